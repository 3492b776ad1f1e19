//! The compaction job: FluidKV Algorithm 3, lines 17–33, around
//! [`crate::compaction::run`] — persist the edit, install the new stage set, retire
//! the replaced tables — and log cleaning, which rides on it (docs/design.md).
//!
//! The buffer-trees compacted are those present when the compaction started; trees
//! flushed meanwhile are newer than its output and stay in front of StableStore.
//! Replaced tables are marked obsolete only after the edit is durable and the new
//! stage set is installed; their chunks are freed when the last reader holding an
//! older stage set drops it, and so are value segments no table holds any more.
//!
//! Cleaning: [`maintain`] (the compaction thread, every window) compacts when enough
//! buffer-trees wait, and otherwise, when some value segments are dead enough
//! (`vlog/cleaner.rs`), runs a cleaning compaction: only the stable tables pointing
//! into the victims are rewritten, their live values moved. Victims that buffer-tree
//! tables still point into wait for the next full compaction.
//!
//! Called by the compaction thread and by `Db::compact`; `compact_lock` makes them
//! take turns.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::engine::Engine;
use super::load::LoadMode;
use crate::bufferstore::BufferTree;
use crate::coding::{micros, ratio};
use crate::compaction::{self, Input};
use crate::error::Result;
use crate::manifest::Edit;
use crate::stages::Stages;
use crate::table;
use crate::vlog::cleaner::{self, Pressure};

/// Compacts every buffer-tree into StableStore if there are at least `min_trees`,
/// cleaning the value segments that qualify at the same time. Returns false if there
/// was nothing to do.
pub(crate) fn compact(e: &Engine, min_trees: usize) -> Result<bool> {
    let _one = e.compact_lock.lock();
    let stages = e.stages.load_full();
    if stages.buffer.is_empty() || stages.buffer.len() < min_trees {
        return Ok(false);
    }
    let victims = pick_victims(e, &stages, true);
    let rewrite = pick_sparse_tables(e, &stages, true);
    run(e, &stages, Job::Trees(true), victims, rewrite)?;
    Ok(true)
}

/// `Db::compact`: every buffer-tree into StableStore, or — with none waiting — a
/// cleaning if the value log has victims. Returns false if there was nothing to do.
pub(crate) fn compact_now(e: &Engine) -> Result<bool> {
    if compact(e, 1)? {
        return Ok(true);
    }
    clean(e)
}

/// A cleaning compaction of StableStore, if the value log has victims or table chunks
/// are sparse enough that rewriting their tables frees one.
fn clean(e: &Engine) -> Result<bool> {
    let _one = e.compact_lock.lock();
    let stages = e.stages.load_full();
    let victims = pick_victims(e, &stages, false);
    let rewrite = pick_sparse_tables(e, &stages, false);
    if victims.is_empty() && rewrite.is_empty() {
        return Ok(false);
    }
    run(e, &stages, Job::Trees(false), victims, rewrite)?;
    Ok(true)
}

/// LSTs in sparse table chunks, among those a compaction over `stages` rewrites
/// (StableStore's, and the buffer-trees' too if `with_trees`).
fn pick_sparse_tables(e: &Engine, stages: &Stages, with_trees: bool) -> BTreeSet<u64> {
    let trees = stages
        .buffer
        .iter()
        .filter(|_| with_trees)
        .flat_map(|t| t.tables.tables());
    table::reclaim::sparse_tables(
        trees.chain(stages.stable.tables().tables()),
        e.pool.chunk_size(),
        merge_writers(e, stages, with_trees),
    )
}

/// Merge threads a compaction over `stages` may use (see `compaction::writers`).
fn merge_writers(e: &Engine, stages: &Stages, with_trees: bool) -> u64 {
    let trees: u64 = stages
        .buffer
        .iter()
        .filter(|_| with_trees)
        .flat_map(|t| t.tables.tables())
        .map(|l| u64::from(l.entries))
        .sum();
    let stable: u64 = stages
        .stable
        .tables()
        .tables()
        .map(|l| u64::from(l.entries))
        .sum();
    compaction::writers(trees + stable, e.opts.compaction_threads)
}

/// One round of the compaction thread: a compaction if the load-aware threshold is
/// reached, else a cleaning if the value log has victims.
pub(crate) fn maintain(e: &Engine) -> Result<()> {
    let mode = e.load.update();
    let idle = e.load.idle();
    let threshold = match mode {
        _ if idle => 1,
        LoadMode::WriteHeavy => e.opts.buffer_trees_write_heavy,
        LoadMode::ReadHeavy | LoadMode::ReadOnly => e.opts.buffer_trees_read_heavy,
    };
    if !compact(e, threshold)? {
        clean(e)?;
    }
    Ok(())
}

/// Victims for a compaction that merges the buffer-trees (`with_trees`) or not; in the
/// latter case segments that buffer-tree tables point into are left for later.
fn pick_victims(e: &Engine, stages: &Stages, with_trees: bool) -> BTreeSet<u64> {
    if !e.opts.vlog_cleaning {
        return BTreeSet::new();
    }
    let total = e.pool.chunk_count();
    let pressure = Pressure {
        free_fraction: ratio(e.pool.free_chunk_count(), total),
        idle: e.load.idle(),
    };
    let retained = e.manifest.retained();
    // Which tables point where is worked out only for segments dead enough to be
    // picked: walking every table's segment list is the costly part (perf of YCSB D,
    // 1 KB values: 5 % of all CPU time, every 50 ms round, with nothing to clean).
    let candidates: BTreeSet<u64> = cleaner::dead_enough(
        &retained,
        e.pool.chunk_size(),
        e.opts.vlog_dead_ratio,
        pressure,
    )
    .map(|(_, c, _)| c)
    .collect();
    if candidates.is_empty() {
        return BTreeSet::new();
    }
    // Only segments the tables of this stage set point into can be cleaned by
    // rewriting them; without the buffer-trees, only those StableStore alone holds.
    let mut exclude = BTreeSet::new();
    let mut pointed: BTreeSet<u64> = BTreeSet::new();
    for t in &stages.buffer {
        for l in t.tables.tables() {
            let chunks = chunks_among(l, &candidates);
            if with_trees {
                pointed.extend(chunks);
            } else {
                exclude.extend(chunks);
            }
        }
    }
    for l in stages.stable.tables().tables() {
        pointed.extend(chunks_among(l, &candidates));
    }
    for &c in &candidates {
        if !pointed.contains(&c) {
            exclude.insert(c);
        }
    }
    let budget = if e.opts.vlog_clean_batch_bytes == 0 {
        (total * e.pool.chunk_size() / 16).min(64 << 20)
    } else {
        e.opts.vlog_clean_batch_bytes
    };
    cleaner::victims(
        &retained,
        e.pool.chunk_size(),
        e.opts.vlog_dead_ratio,
        pressure,
        budget,
        &exclude,
        merge_writers(e, stages, with_trees),
    )
}

/// The chunks of `l`'s value segments that are in `among`.
fn chunks_among<'a>(l: &'a table::Lst, among: &'a BTreeSet<u64>) -> impl Iterator<Item = u64> + 'a {
    l.value_segments()
        .iter()
        .map(|s| s.chunk())
        .filter(|c| among.contains(c))
}

/// What a compaction merges into StableStore besides its own tables.
pub(crate) enum Job {
    /// The stage set's buffer-trees (`true`) or none (a cleaning).
    Trees(bool),
    /// Tables of promoted entries (`db/promote.rs`), built for this compaction and
    /// named by no manifest edit before it: keys StableStore does not hold.
    Promote(Arc<BufferTree>),
}

/// Runs one compaction over `stages` and `job`, moving the live values of
/// `victims`. The caller holds `compact_lock`.
pub(crate) fn run(
    e: &Engine,
    stages: &Arc<Stages>,
    job: Job,
    victims: BTreeSet<u64>,
    rewrite: BTreeSet<u64>,
) -> Result<()> {
    let start = Instant::now();
    let cleaning = !victims.is_empty();
    let promotion = matches!(job, Job::Promote(_));
    let input = Input {
        trees: match job {
            Job::Trees(true) => stages.buffer.clone(),
            Job::Trees(false) => Vec::new(),
            Job::Promote(t) => vec![t],
        },
        stable: stages.stable.clone(),
        slow: stages.slow.clone(),
        retained: e.manifest.retained(),
        pool: e.pool.clone(),
        topts: e.topts.clone(),
        threads: e.opts.compaction_threads,
        victims,
        rewrite,
    };
    let out = compaction::run(&input)?;
    if out.rewritten.is_empty() && out.moved.is_empty() && input.trees.is_empty() {
        return Ok(());
    }
    // Segments no table will hold once the replaced tables are obsolete (flushes give
    // back their generation's holder before they install, and the new tables already
    // hold theirs).
    let released = super::slow::released_segments(&out.rewritten);
    // A promotion's tables were never a buffer-tree of the manifest.
    let seqs: Vec<u64> = if promotion {
        Vec::new()
    } else {
        input.trees.iter().map(|t| t.seq).collect()
    };
    let mut added: Vec<_> = out.created.tables().iter().map(|l| l.meta()).collect();
    added.extend(out.moved.iter().map(|l| l.meta()));
    e.manifest.apply(&Edit::Compaction {
        trees: seqs.clone(),
        removed: out.removed_stable.clone(),
        added,
        dead: out.dead.clone(),
        created: out.created_segments.clone(),
        released: released.iter().map(|(c, _)| *c).collect(),
    })?;
    let created = out.created.publish();
    let removed: HashSet<u64> = out.removed_stable.iter().copied().collect();
    e.stages.install_compaction(
        &seqs,
        &removed,
        created.iter().chain(out.moved.iter()).cloned(),
    );
    for l in &out.rewritten {
        l.mark_obsolete();
    }
    let c = &e.counters;
    if !promotion {
        c.compactions.fetch_add(1, Ordering::Relaxed);
    }
    c.compaction_bytes
        .fetch_add(out.bytes_written, Ordering::Relaxed);
    c.compaction_micros
        .fetch_add(micros(start.elapsed()), Ordering::Relaxed);
    c.moved_tables
        .fetch_add(out.moved.len() as u64, Ordering::Relaxed);
    c.released_segments
        .fetch_add(released.len() as u64, Ordering::Relaxed);
    c.released_segment_bytes.fetch_add(
        released.iter().map(|(_, b)| *b).sum::<u64>(),
        Ordering::Relaxed,
    );
    if cleaning {
        c.cleanings.fetch_add(1, Ordering::Relaxed);
        c.clean_micros
            .fetch_add(micros(start.elapsed()), Ordering::Relaxed);
        c.cleaned_value_bytes
            .fetch_add(out.moved_value_bytes, Ordering::Relaxed);
    }
    Ok(())
}
