//! The clean step of compaction (FluidKV Algorithm 3, lines 26–33) around
//! [`crate::compaction::run`]: persist the edit, publish the new stage set, retire the
//! replaced tables.
//!
//! The buffer-trees compacted are those present when the compaction started; trees
//! flushed meanwhile are newer than its output and stay in front of StableStore.
//! Replaced tables are marked obsolete only after the edit is durable and the new
//! stage set is published; their chunks are freed when the last reader holding an
//! older stage set drops it.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{Inner, Stages};
use crate::compaction::{self, Input};
use crate::error::Result;
use crate::manifest::Edit;

/// Compacts every buffer-tree into StableStore if there are at least `min_trees`.
/// Returns false if there was nothing to do.
pub(crate) fn compact(inner: &Inner, min_trees: usize) -> Result<bool> {
    let _one = inner.compact_lock.lock();
    let stages = inner.stages.load_full();
    if stages.buffer.is_empty() || stages.buffer.len() < min_trees {
        return Ok(false);
    }
    let start = Instant::now();
    let input = Input {
        trees: stages.buffer.clone(),
        stable: stages.stable.clone(),
        retained: inner.manifest.state().retained,
        pool: inner.pool.clone(),
        ids: inner.lst_ids.clone(),
        block_size: inner.opts.block_size,
        lst_max_bytes: inner.opts.table_max_bytes,
        threads: inner.opts.compaction_threads,
    };
    let out = compaction::run(&input)?;
    let seqs: Vec<u64> = input.trees.iter().map(|t| t.seq).collect();
    let mut added: Vec<_> = out.created.iter().map(|l| l.meta()).collect();
    added.extend(out.moved.iter().map(|l| l.meta()));
    inner.manifest.apply(Edit::Compaction {
        trees: seqs.clone(),
        removed: out.removed_stable.clone(),
        added,
        dead: out.dead.clone(),
    })?;
    {
        let _g = inner.stage_lock.lock();
        let cur = inner.stages.load();
        let removed: HashSet<u64> = out.removed_stable.iter().copied().collect();
        let stable = cur.stable.replace(
            &removed,
            out.created.iter().chain(out.moved.iter()).cloned(),
        );
        inner.stages.store(Arc::new(Stages {
            active: cur.active.clone(),
            immutable: cur.immutable.clone(),
            buffer: cur
                .buffer
                .iter()
                .filter(|t| !seqs.contains(&t.seq))
                .cloned()
                .collect(),
            stable: Arc::new(stable),
        }));
    }
    for l in &out.rewritten {
        l.mark_obsolete();
    }
    let c = &inner.counters;
    c.compactions.fetch_add(1, Ordering::Relaxed);
    c.compaction_bytes
        .fetch_add(out.bytes_written, Ordering::Relaxed);
    c.compaction_micros
        .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
    c.moved_tables
        .fetch_add(out.moved.len() as u64, Ordering::Relaxed);
    Ok(true)
}
