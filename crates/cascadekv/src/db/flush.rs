//! The flush job (FluidKV §5.4, Algorithm 3 FLUSH): the oldest immutable FastStore
//! becomes LSTs and one buffer-tree.
//!
//! Steps, each crash-safe because new data is written before old data is dropped:
//! 1. build the buffer-tree's tables from the FastStore and make them durable
//!    ([`crate::bufferstore::build`]);
//! 2. persist a `Flush` edit in the manifest: the generation, the new buffer-tree and
//!    the log segments that must stay because the tables point at separated values in
//!    them (with their live bytes, [`crate::vlog`]);
//! 3. give back the generation's holder on its log segments: from now on the new
//!    tables hold the segments they point into, and the others are freed when the
//!    FastStore's last reader lets go (`vlog/segment.rs`) — a snapshot or iterator that
//!    still reads an older version in them keeps them alive;
//! 4. install it in the stage set: the FastStore leaves, the buffer-tree is in front.
//!
//! Step 3 comes before step 4 so that a compaction never sees a table whose segment
//! still carries a generation holder: its count of holders is then exactly its count
//! of live tables, which is what tells it a segment became unreferenced.
//!
//! A crash before step 2 leaves unreferenced table chunks (freed at recovery) and the
//! logs (replayed); after step 2, recovery skips the generation's logs and frees those
//! no table points into. A flush that fails before step 2 marks its tables obsolete, so
//! their chunks go back to the pool. The FastStore's DRAM index is freed when the last
//! reader holding an older stage set drops it (reference counting, no waiting).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::engine::Engine;
use crate::bufferstore::{self, BufferTree};
use crate::error::Result;
use crate::manifest::Edit;
use crate::table::TableSet;

/// Flushes the oldest immutable FastStore. Returns false if there was none.
pub(crate) fn flush_oldest(e: &Engine) -> Result<bool> {
    let _one = e.flush_lock.lock();
    let Some(fs) = e.stages.load().immutable.last().cloned() else {
        return Ok(false);
    };
    let start = Instant::now();
    let built = bufferstore::build(&e.pool, &e.topts, &fs)?;
    let seq = e.manifest.next_tree_seq();
    e.manifest.apply(&Edit::Flush {
        generation: fs.generation(),
        tree_seq: seq,
        lsts: built.tables.tables().iter().map(|l| l.meta()).collect(),
        retained: built.retained.clone(),
    })?;
    let tables = TableSet::new(built.tables.publish());
    fs.release_segments();
    e.stages
        .install_flush(&fs, Arc::new(BufferTree { seq, tables }));
    let (log, user) = fs.written();
    let c = &e.counters;
    c.retired_log_bytes.fetch_add(log, Ordering::Relaxed);
    c.retired_user_bytes.fetch_add(user, Ordering::Relaxed);
    c.flushes.fetch_add(1, Ordering::Relaxed);
    c.flush_bytes
        .fetch_add(built.bytes_written, Ordering::Relaxed);
    c.flush_micros.fetch_add(
        u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    e.bg.wake();
    Ok(true)
}
