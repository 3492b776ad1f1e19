//! The slow-tier jobs around [`crate::slowtier::compact`]: pick, run, persist the
//! manifest edit, install the next stage set, retire the inputs (issue #14).
//!
//! * [`demote`] (compaction thread's partner, `cascade-slow`): while StableStore —
//!   its tables and the separated values they point to — holds more than the fast
//!   budget, moves a batch of its tables into the slow tier: the next key range in a
//!   round robin over the key space, or with popularity placement (issue #15) the
//!   ranges `placement/msc.rs` picks, keeping the entries the mapper pins in new pool
//!   tables (`slowtier/keep.rs`). It holds `compact_lock` (no
//!   fast compaction may rewrite its victims meanwhile) and `slow_lock`, and gives up
//!   at once if a slow-tier merge holds the latter, so a long merge never blocks fast
//!   compaction. One batch is a quarter of the budget, 8–64 MiB (a larger batch means
//!   fewer weight-0 runs, so fewer merges: slow-tier write amplification at 6× the
//!   budget 2.98 with eighths, 2.00 with quarters), and `compact_lock` is released
//!   between batches.
//! * [`merge_step`]: one partition merge or split (`slowtier::compact::plan`), under
//!   `slow_lock` only: it rewrites slow-tier files alone, and a demotion is the only
//!   other writer of partitions. Splits and over-cap full merges are *urgent*: the
//!   slow-tier thread runs them before demotions.
//!
//! Order of effects, as for compaction: new files sealed (fsync, rename, fsync dir) →
//! manifest edit durable → stage set installed → inputs marked obsolete (their pool
//! chunks or files go once no reader holds an older stage set).

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::engine::Engine;
use crate::coding::micros;
use crate::error::Result;
use crate::manifest::{Edit, RunMeta, SlowEdit};
use crate::placement::mapper::Pinning;
use crate::placement::msc;
use crate::slowtier::compact::{self, Outcome, Step};
use crate::slowtier::Partition;
use crate::stages::Stages;
use crate::table::Lst;
use crate::table::LstMeta;
use crate::vlog::Segment;

/// What the fast budget counts: StableStore's table bytes and the separated values in
/// the pool's value log (`vlog_live`, which buffer-trees share for the short time they
/// exist).
pub(crate) fn fast_bytes(stable_tables: u64, vlog_live: u64) -> u64 {
    stable_tables + vlog_live
}

/// Sets `Ctx::behind` (StableStore with its values is over the fast budget), which
/// [`behind`] combines with the pool's fill. Called by the compaction and slow-tier
/// threads each round and after each slow-tier step.
pub(crate) fn update_pressure(e: &Engine) {
    if let Some(ctx) = &e.slow {
        let stable = e.stages.load().stable.tables().bytes();
        let over = fast_bytes(stable, e.manifest.live_value_bytes()) > e.fast_budget();
        ctx.behind.store(over, Ordering::Release);
    }
}

/// True while a writer should wait for demotion: StableStore is over the fast budget
/// (so demotion can make room) and the pool is more than half full (flushes,
/// compactions and cleaning need free chunks too). A writer that went on would meet a
/// full pool although the slow tier has space. The pool's fill is read by the writer
/// itself, and only past the budget: it changes faster than the background threads'
/// rounds.
pub(crate) fn behind(e: &Engine) -> bool {
    e.slow
        .as_ref()
        .is_some_and(|c| c.behind.load(Ordering::Acquire))
        && e.pool.used_bytes().saturating_mul(2) > e.pool.chunk_count() * e.pool.chunk_size()
}

/// Lets writers go: a failed slow-tier step will not make the room they wait for.
pub(crate) fn release_writers(e: &Engine) {
    if let Some(c) = &e.slow {
        c.behind.store(false, Ordering::Release);
    }
}

/// Smallest demotion batch.
const MIN_BATCH: u64 = 8 << 20;
/// Largest demotion batch: `compact_lock` is held for a whole batch (about 0.35 s at
/// the ~180 MB/s demotion ran at here), so fast compaction never waits longer.
const MAX_BATCH: u64 = 64 << 20;

/// Demotes one batch of StableStore tables if StableStore is over the fast budget.
/// Returns false if there was nothing to do, or — unless `wait` (`Db::compact`) — a
/// slow-tier merge holds `slow_lock` (the background thread then merges first).
pub(crate) fn demote(e: &Engine, wait: bool) -> Result<bool> {
    let Some(ctx) = &e.slow else {
        return Ok(false);
    };
    let budget = e.fast_budget();
    let _c = e.compact_lock.lock();
    let _s = if wait {
        e.slow_lock.lock()
    } else {
        match e.slow_lock.try_lock() {
            Some(g) => g,
            None => return Ok(false),
        }
    };
    let start = Instant::now();
    let stages = e.stages.load_full();
    let stable = stages.stable.tables();
    let fast = fast_bytes(stable.bytes(), e.manifest.live_value_bytes());
    if fast <= budget {
        return Ok(false);
    }
    let retained = e.manifest.retained();
    // Down to 15/16 of the budget, one batch at a time; in table bytes, with
    // the separated values in the same proportion as over all of StableStore.
    let want = (fast - budget + budget / 16).min((budget / 4).clamp(MIN_BATCH, MAX_BATCH));
    let target =
        u64::try_from(u128::from(want) * u128::from(stable.bytes()) / u128::from(fast.max(1)))
            .unwrap_or(u64::MAX)
            .max(1);
    let tables: Vec<Arc<Lst>> = stable.tables().cloned().collect();
    let mut from = ctx.demote_from.lock();
    let (victims, pinning, forced) = pick(e, &stages, &tables, target, fast, &from)?;
    if victims.is_empty() {
        return Ok(false);
    }
    let got: u64 = victims.iter().map(|l| u64::from(l.size)).sum();
    let pin_any = !forced && pinning != Pinning::NONE;
    let mut pins = |k: &[u8]| match &e.placement {
        Some(p) if pin_any => pinning.pins(k, p.tracker.get(k).map(|(c, _)| c)),
        _ => false,
    };
    // Kept tables end where the victims are not consecutive StableStore tables.
    let cuts: Vec<Box<[u8]>> = victims
        .windows(2)
        .filter(|w| {
            let next = tables.partition_point(|l| l.min_key <= w[0].min_key);
            tables.get(next).is_none_or(|l| l.id != w[1].id)
        })
        .map(|w| w[1].min_key.clone())
        .collect();
    let keep = compact::Keep {
        pins: &mut pins,
        topts: &e.topts,
        cuts: &cuts,
    };
    let mut out = compact::demote(ctx, &stages.slow, &victims, &e.pool, &retained, keep)?;
    let kept = std::mem::take(&mut out.kept);
    if let Some(p) = &e.placement {
        // Every entry was pinned after all (the sample said otherwise): the next
        // batch ignores pinning, so the budget is kept.
        p.force_next
            .store(out.entries_out == 0 && !forced, Ordering::Relaxed);
    }
    let released = released_segments(&victims);
    let removed: Vec<u64> = victims.iter().map(|l| l.id).collect();
    persist(
        e,
        &mut out,
        removed.clone(),
        released.iter().map(|(c, _)| *c).collect(),
        kept.tables().iter().map(|l| l.meta()).collect(),
    )?;
    let kept = kept.publish();
    let removed: HashSet<u64> = removed.into_iter().collect();
    let (replaced, parts) = (
        std::mem::take(&mut out.replaced),
        std::mem::take(&mut out.parts),
    );
    e.stages
        .install_slow(&removed, kept, |cur| cur.with_parts(&replaced, parts));
    for l in &victims {
        l.mark_obsolete();
    }
    if let Some(last) = victims.last() {
        let next = tables.partition_point(|l| l.min_key <= last.min_key);
        *from = tables
            .get(next)
            .map_or_else(Vec::new, |l| l.min_key.to_vec());
    }
    count_demotion(e, &out, got, &released, forced, start);
    Ok(true)
}

/// Counts a finished demotion of `got` table bytes.
fn count_demotion(
    e: &Engine,
    out: &Outcome,
    got: u64,
    released: &[(u64, u64)],
    forced: bool,
    start: Instant,
) {
    let c = &e.counters;
    c.demotions.fetch_add(1, Ordering::Relaxed);
    c.demoted_bytes.fetch_add(got, Ordering::Relaxed);
    c.slow_bytes_written
        .fetch_add(out.written, Ordering::Relaxed);
    c.slow_demote_bytes_written
        .fetch_add(out.written, Ordering::Relaxed);
    c.slow_micros
        .fetch_add(micros(start.elapsed()), Ordering::Relaxed);
    c.released_segments
        .fetch_add(released.len() as u64, Ordering::Relaxed);
    c.released_segment_bytes.fetch_add(
        released.iter().map(|(_, b)| *b).sum::<u64>(),
        Ordering::Relaxed,
    );
    if let Some(p) = &e.placement {
        let pc = &p.counters;
        pc.kept_entries
            .fetch_add(out.kept_entries, Ordering::Relaxed);
        pc.kept_bytes.fetch_add(out.kept_bytes, Ordering::Relaxed);
        pc.demoted_entries
            .fetch_add(out.entries_out, Ordering::Relaxed);
        pc.forced_demotions
            .fetch_add(u64::from(forced), Ordering::Relaxed);
    }
}

/// The victims of one demotion batch: StableStore tables (key order) chosen by the
/// placement policy (`placement/msc.rs`) to free about `target` table bytes, the
/// pinning rule for their entries, and whether pinning is off for this batch (every
/// candidate looked wholly pinned, so popularity would free nothing). Without
/// placement: the next tables in key order, nothing pinned (issue #14).
fn pick(
    e: &Engine,
    stages: &Stages,
    tables: &[Arc<Lst>],
    target: u64,
    fast: u64,
    from: &[u8],
) -> Result<(Vec<Arc<Lst>>, Pinning, bool)> {
    // Without a single tracked key (a pure write load so far) popularity says
    // nothing: key order, nothing pinned (MSC's random candidates only cost CPU there).
    let placement = e.placement.as_ref().filter(|p| p.tracker.len() > 0);
    let Some(p) = placement else {
        let mut first = tables.partition_point(|l| *l.min_key < *from);
        if first >= tables.len() {
            first = 0;
        }
        let mut got = 0u64;
        let mut victims = Vec::new();
        for l in &tables[first..] {
            victims.push(l.clone());
            got += u64::from(l.size);
            if got >= target {
                break;
            }
        }
        return Ok((victims, Pinning::NONE, false));
    };
    let stable = stages.stable.tables();
    let pinning = p.pinning(e.fast_budget(), fast, stable.entries());
    // Candidates of an eighth of the batch: fine enough for popularity to choose,
    // coarse enough that a batch touches few slow-tier partitions.
    let units = msc::units(tables, (target / 8).max(1));
    let mut rng = p.rng.lock();
    let (chosen, mut forced) = msc::choose(
        p.policy,
        units,
        tables,
        &stages.slow,
        &p.tracker,
        &pinning,
        target,
        from,
        &mut rng,
    )?;
    forced |= p.force_next.load(Ordering::Relaxed);
    let victims = chosen
        .iter()
        .filter_map(|u| tables.get(u.first..u.first + u.n))
        .flatten()
        .cloned()
        .collect();
    Ok((victims, pinning, forced))
}

/// Runs one slow-tier merge or split if one is due — with `urgent`, only a split or
/// the full merge of a partition past `compact::max_runs`. Returns false if none ran.
///
/// The slow-tier thread runs urgent steps before demotions: under a sustained write
/// load demotion is always due, and merges waiting behind it let runs pile up (1M
/// keys, YCSB A at a 20 % budget: 19 runs in one 1 GB partition, no merge, every
/// slow-tier get probing each run's filter).
pub(crate) fn merge_step(e: &Engine, urgent: bool) -> Result<bool> {
    let Some(ctx) = &e.slow else {
        return Ok(false);
    };
    let _s = e.slow_lock.lock();
    let start = Instant::now();
    let stages = e.stages.load_full();
    let Some(step) = compact::plan(
        &stages.slow,
        e.opts.slow_merge_width,
        e.opts.slow_partition_bytes,
    ) else {
        return Ok(false);
    };
    if urgent && !compact::is_urgent(&stages.slow, &step, e.opts.slow_merge_width) {
        return Ok(false);
    }
    let mut out = compact::run_step(ctx, &stages.slow, &step)?;
    persist(e, &mut out, Vec::new(), Vec::new(), Vec::new())?;
    e.stages.install_slow(&HashSet::new(), Vec::new(), |cur| {
        cur.with_parts(&out.replaced, out.parts)
    });
    for l in &out.consumed {
        l.mark_obsolete();
    }
    let c = &e.counters;
    match step {
        Step::Merge { .. } => c.slow_merges.fetch_add(1, Ordering::Relaxed),
        Step::Split { .. } => c.slow_splits.fetch_add(1, Ordering::Relaxed),
    };
    c.slow_bytes_written
        .fetch_add(out.written, Ordering::Relaxed);
    c.slow_micros
        .fetch_add(micros(start.elapsed()), Ordering::Relaxed);
    Ok(true)
}

/// Appends the edit describing `out` (plus the stable tables `removed` and the value
/// segments `released` of a demotion) and makes its new tables live.
fn persist(
    e: &Engine,
    out: &mut Outcome,
    removed: Vec<u64>,
    released: Vec<u64>,
    added: Vec<LstMeta>,
) -> Result<()> {
    let parts = out
        .parts
        .iter()
        .map(|p| (p.lo.clone(), (!p.gone()).then(|| run_metas(p))))
        .collect();
    let next_file = e
        .slow
        .as_ref()
        .map_or(0, |c| c.files.load(Ordering::Acquire));
    e.manifest.apply(&Edit::Slow(SlowEdit {
        removed,
        dead: std::mem::take(&mut out.dead).finish(),
        released,
        parts,
        next_file,
        added,
    }))?;
    std::mem::take(&mut out.created).publish();
    Ok(())
}

fn run_metas(p: &Partition) -> Vec<RunMeta> {
    p.runs
        .iter()
        .map(|r| RunMeta {
            file: r.file,
            weight: r.weight,
            filters: r.filters,
            lsts: r.tables.tables().map(|l| l.meta()).collect(),
        })
        .collect()
}

/// Segments (first chunk, bytes) no table will hold once `replaced` are obsolete:
/// every holder of a segment a replaced table points into is a live table, so a
/// segment whose holders are all among `replaced` is released.
pub(crate) fn released_segments(replaced: &[Arc<Lst>]) -> Vec<(u64, u64)> {
    let mut refs: BTreeMap<u64, (usize, Arc<Segment>)> = BTreeMap::new();
    for l in replaced {
        for s in l.value_segments() {
            refs.entry(s.chunk()).or_insert((0, s.clone())).0 += 1;
        }
    }
    refs.values()
        .filter(|(n, s)| s.holders() == *n)
        .map(|(_, s)| (s.chunk(), s.bytes()))
        .collect()
}
