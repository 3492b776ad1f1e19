//! The compaction job: FluidKV Algorithm 3, lines 17–33, around
//! [`crate::compaction::run`] — persist the edit, install the new stage set, retire
//! the replaced tables.
//!
//! The buffer-trees compacted are those present when the compaction started; trees
//! flushed meanwhile are newer than its output and stay in front of StableStore.
//! Replaced tables are marked obsolete only after the edit is durable and the new
//! stage set is installed; their chunks are freed when the last reader holding an
//! older stage set drops it.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::engine::Engine;
use crate::compaction::{self, Input};
use crate::error::Result;
use crate::manifest::Edit;

/// Compacts every buffer-tree into StableStore if there are at least `min_trees`.
/// Returns false if there was nothing to do.
pub(crate) fn compact(e: &Engine, min_trees: usize) -> Result<bool> {
    let _one = e.compact_lock.lock();
    let stages = e.stages.load_full();
    if stages.buffer.is_empty() || stages.buffer.len() < min_trees {
        return Ok(false);
    }
    let start = Instant::now();
    let input = Input {
        trees: stages.buffer.clone(),
        stable: stages.stable.clone(),
        retained: e.manifest.state().retained,
        pool: e.pool.clone(),
        topts: e.topts.clone(),
        threads: e.opts.compaction_threads,
    };
    drop(stages);
    let out = compaction::run(&input)?;
    let seqs: Vec<u64> = input.trees.iter().map(|t| t.seq).collect();
    let mut added: Vec<_> = out.created.iter().map(|l| l.meta()).collect();
    added.extend(out.moved.iter().map(|l| l.meta()));
    e.manifest.apply(&Edit::Compaction {
        trees: seqs.clone(),
        removed: out.removed_stable.clone(),
        added,
        dead: out.dead.clone(),
    })?;
    let removed: HashSet<u64> = out.removed_stable.iter().copied().collect();
    e.stages.install_compaction(
        &seqs,
        &removed,
        out.created.iter().chain(out.moved.iter()).cloned(),
    );
    for l in &out.rewritten {
        l.mark_obsolete();
    }
    let c = &e.counters;
    c.compactions.fetch_add(1, Ordering::Relaxed);
    c.compaction_bytes
        .fetch_add(out.bytes_written, Ordering::Relaxed);
    c.compaction_micros.fetch_add(
        u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
    c.moved_tables
        .fetch_add(out.moved.len() as u64, Ordering::Relaxed);
    Ok(true)
}
