//! Flush (FluidKV §5.4, Algorithm 3 FLUSH): the oldest immutable FastStore becomes
//! LSTs and one buffer-tree.
//!
//! Steps, each crash-safe because new data is written before old data is dropped:
//! 1. scan the FastStore index in key order (newest version of each key, tombstones
//!    included) into LSTs in fresh table chunks, and make them durable;
//! 2. persist a `Flush` edit in the manifest: the generation, the new buffer-tree and
//!    the log segments that must stay because the tables point at separated values in
//!    them (with their live bytes, for a later log GC);
//! 3. publish a stage set without the FastStore and with the buffer-tree in front;
//! 4. free the generation's other log segments. No reader needs them: inline values
//!    are read from the DRAM index, separated ones from the retained segments.
//!
//! A crash before step 2 leaves unreferenced table chunks (freed at recovery) and the
//! logs (replayed); after step 2, recovery skips the generation's logs and frees them.
//! The FastStore's DRAM index is freed when the last reader holding an older stage set
//! drops it (reference counting, no waiting).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{Inner, Stages};
use crate::bufferstore::BufferTree;
use crate::error::Result;
use crate::faststore::{FastStore, Val};
use crate::log::record::encoded_len;
use crate::manifest::Edit;
use crate::stablestore::TableSet;
use crate::table::block::TableValue;
use crate::table::{LstBuilder, TableWriter};

/// Flushes the oldest immutable FastStore. Returns false if there was none.
pub(crate) fn flush_oldest(inner: &Inner) -> Result<bool> {
    let _one = inner.flush_lock.lock();
    let Some(fs) = inner.stages.load().immutable.last().cloned() else {
        return Ok(false);
    };
    let start = Instant::now();
    let (tree, retained, written) = build(inner, &fs)?;
    let seq = inner.manifest.state().next_tree_seq;
    let metas = tree.tables().map(|l| l.meta()).collect();
    inner.manifest.apply(Edit::Flush {
        generation: fs.generation(),
        tree_seq: seq,
        lsts: metas,
        retained: retained.iter().map(|(c, (s, l))| (*c, *s, *l)).collect(),
    })?;
    {
        let _g = inner.stage_lock.lock();
        let cur = inner.stages.load();
        let mut buffer = Vec::with_capacity(cur.buffer.len() + 1);
        buffer.push(Arc::new(BufferTree {
            seq,
            generation: fs.generation(),
            tables: tree,
        }));
        buffer.extend(cur.buffer.iter().cloned());
        inner.stages.store(Arc::new(Stages {
            active: cur.active.clone(),
            immutable: cur
                .immutable
                .iter()
                .filter(|f| !Arc::ptr_eq(f, &fs))
                .cloned()
                .collect(),
            buffer,
            stable: cur.stable.clone(),
        }));
    }
    let free: Vec<(u64, u64)> = fs
        .segments()
        .into_iter()
        .filter(|(c, _)| !retained.contains_key(c))
        .collect();
    inner.pool.free_chunks(&free)?;
    let (log, user) = fs.written();
    let c = &inner.counters;
    c.retired_log_bytes.fetch_add(log, Ordering::Relaxed);
    c.retired_user_bytes.fetch_add(user, Ordering::Relaxed);
    c.flushes.fetch_add(1, Ordering::Relaxed);
    c.flush_bytes.fetch_add(written, Ordering::Relaxed);
    c.flush_micros
        .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
    inner.bg.wake();
    Ok(true)
}

type Retained = BTreeMap<u64, (u64, u64)>;

/// Writes the FastStore's newest versions into LSTs; returns the table set, the
/// segments holding separated values they reference (chunk → (span, live bytes)) and
/// the table bytes written.
fn build(inner: &Inner, fs: &FastStore) -> Result<(TableSet, Retained, u64)> {
    let mut writer = TableWriter::new(inner.pool.clone());
    let mut builder = LstBuilder::new(
        inner.opts.block_size,
        inner.opts.table_max_bytes,
        inner.lst_ids.clone(),
    );
    let mut segs = fs.segments();
    segs.sort_unstable();
    let chunk_size = inner.pool.chunk_size();
    let mut retained: Retained = BTreeMap::new();
    let mut lsts = Vec::new();
    let mut err = None;
    fs.index().for_each(|k, v| {
        if err.is_some() {
            return;
        }
        let tv = match &v.val {
            Val::Tomb => TableValue::Tombstone,
            Val::Addr { addr, len } => {
                let chunk = addr / chunk_size;
                let i = segs.partition_point(|(c, _)| *c <= chunk);
                if let Some((c, span)) = i.checked_sub(1).and_then(|i| segs.get(i)) {
                    let e = retained.entry(*c).or_insert((*span, 0));
                    e.1 += encoded_len(k.len(), *len as usize, false);
                }
                TableValue::Separated {
                    addr: *addr,
                    len: *len,
                }
            }
            other => TableValue::Inline(other.inline_bytes().unwrap_or(&[])),
        };
        if let Some(b) = builder.add(k, &tv) {
            match writer.place(b) {
                Ok(l) => lsts.push(l),
                Err(e) => err = Some(e),
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(b) = builder.finish() {
        lsts.push(writer.place(b)?);
    }
    writer.sync()?;
    Ok((TableSet::new(lsts), retained, writer.bytes_written()))
}
