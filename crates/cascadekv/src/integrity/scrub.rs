//! Background scrubbing: every table at rest — its index and data blocks and the
//! separated values its entries point at; buffer-trees, StableStore, then the slow
//! tier's tables (issue #14) with the blobs in their files — is re-read and its
//! checksums verified, at most `Options::scrub_bytes_per_sec` bytes per second (blobs
//! counted), pass after pass (ZFS scrub, RocksDB `VerifyChecksum`). Damage is counted
//! and the latest finding kept in [`ScrubCounters`] (shown by `Db::stats`, `cascade
//! stats` and the server's INFO); the scrubber never changes data — an operator runs
//! `cascade verify` / `cascade repair`.
//!
//! Thread: one `cascade-scrub` thread, started with the other background threads when
//! the rate is non-zero. Each step loads the current stage set and walks one table
//! while holding it, as a reader does, so nothing it reads is freed under it (nor a
//! slow-tier file unlinked while a table in it is held). A pass walks the tables in id
//! order, so every table that exists for the whole pass is scrubbed in it; tables
//! added by compaction, demotion or a slow-tier merge during a pass are met in it (their
//! ids are larger) and dropped ones are missed.
//! Slow-tier reads are `pread`s of the files and count in the store's slow-tier read
//! counters like any other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::db::engine::Engine;
use crate::value::ValueRef;
use crate::vlog;

/// What the scrubber did since open. Each counter is an independent relaxed atomic.
#[derive(Debug, Default)]
pub(crate) struct ScrubCounters {
    pub passes: AtomicU64,
    pub tables: AtomicU64,
    pub blocks: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    /// The latest damage found, as text (guarded by its own mutex).
    pub last_error: Mutex<Option<String>>,
}

/// The scrub thread's body: runs until the engine's background signal stops.
pub(crate) fn run(engine: &Engine) {
    let rate = engine.opts.scrub_bytes_per_sec.max(1);
    let c = &engine.scrub;
    let start = Instant::now();
    let mut budget_used = 0u64;
    // The id of the table scrubbed last in this pass (0: none yet). Table ids come
    // from one counter that only grows (`next_lst_id`), so walking in id order meets
    // every table that lives through the whole pass, whatever compaction adds or
    // drops meanwhile (a position in the stage lists would shift and skip one).
    let mut last = 0u64;
    while !engine.bg.stopped() {
        let stages = engine.stages.load_full();
        let table = stages
            .buffer
            .iter()
            .flat_map(|t| t.tables.tables())
            .chain(stages.stable.tables().tables())
            .chain(stages.slow.tables())
            .filter(|t| t.id > last)
            .min_by_key(|t| t.id)
            .cloned();
        let Some(t) = table else {
            drop(stages);
            if last > 0 {
                c.passes.fetch_add(1, Ordering::Relaxed);
            }
            last = 0;
            // Between passes (and while there is nothing to scrub): a second's rest.
            let until = Instant::now() + Duration::from_secs(1);
            while !engine.bg.stopped() && Instant::now() < until {
                engine.bg.wait();
            }
            continue;
        };
        last = t.id;
        let mut value_bytes = 0u64;
        let note = |what: String| {
            c.errors.fetch_add(1, Ordering::Relaxed);
            *c.last_error.lock() = Some(what);
        };
        let w = t.walk(
            |k, v| {
                if let ValueRef::Separated(p) = v {
                    value_bytes += u64::from(p.len);
                    if let Err(e) = vlog::read(&engine.pool, k, p) {
                        note(format!(
                            "separated value of key \"{}\": {e}",
                            k.escape_ascii()
                        ));
                    }
                }
                !engine.bg.stopped()
            },
            &mut |d| {
                // The error names the file: the pool, or the slow-tier file.
                let tier = if t.table_chunk().is_none() {
                    "slow-tier "
                } else {
                    ""
                };
                note(format!(
                    "{tier}table {} block at {}: {}",
                    t.id, d.addr, d.error
                ));
            },
        );
        drop(stages);
        // Blocks, separated values in the pool and blobs in slow-tier files.
        let read = w.bytes + value_bytes + w.blob_bytes;
        c.tables.fetch_add(1, Ordering::Relaxed);
        c.blocks.fetch_add(w.blocks, Ordering::Relaxed);
        c.bytes.fetch_add(read, Ordering::Relaxed);
        // Pace: never ahead of `rate` bytes per second since the thread started.
        budget_used += read;
        let due = start + Duration::from_millis(budget_used.saturating_mul(1000) / rate);
        while !engine.bg.stopped() && Instant::now() < due {
            engine.bg.wait();
        }
    }
}
