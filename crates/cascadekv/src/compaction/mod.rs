//! Compaction (FluidKV §5.4, Algorithm 3 COMPACTION): merge all buffer-trees with the
//! StableStore tables they overlap into new StableStore tables.
//!
//! 1. *Pick*: every table of every buffer-tree, and every stable table. Sorted by key
//!    range they form clusters of overlapping tables; a buffer table alone in its
//!    cluster overlaps nothing and *moves* to StableStore without being rewritten, a
//!    stable table alone is left alone. Every table in a larger cluster is rewritten.
//! 2. *Run*: each rewritten cluster is cut into key-range units (by its tables'
//!    smallest keys, so large clusters split into about `threads` parts) and the units
//!    are merged in parallel, one k-way merge per unit over the runs newest first
//!    (buffer-trees, then StableStore). Only the newest version of a key survives;
//!    tombstones are dropped, because every older version of the key in the fast tier
//!    is among the inputs (a stable table holding the key overlaps the buffer table
//!    holding it) — unless the slow tier below may hold the key (its filters say
//!    so): then the tombstone stays to hide it. Output tables never cross a unit boundary, so
//!    they never overlap a moved or untouched table.
//! 3. *Clean* is done by the caller: persist the edit in the manifest, swap in the new
//!    stage set, mark the replaced tables obsolete (their chunks are freed once no
//!    reader holds them).
//!
//! Log cleaning rides on compaction (docs/design.md, "Log cleaning"): the caller may
//! name *victim* value segments. Every table pointing into a victim is rewritten —
//! a table that would have moved or stayed untouched too — and every value the output
//! keeps that lies in a victim is copied to a fresh value segment
//! ([`crate::vlog::Relocator`]) with the new pointer in the new table. A compaction
//! with no buffer-trees and some victims is a pure cleaning of StableStore.
//!
//! Thread-safety: `run` reads immutable inputs and writes only new chunks; it may run
//! while readers and writers work and while a flush adds newer buffer-trees.

pub(crate) mod merge;

use std::collections::BTreeSet;
use std::sync::Arc;

use merge::{merge, RunCursor};

use crate::bufferstore::BufferTree;
use crate::coding::usize_from;
use crate::error::{Error, Result};
use crate::pmem::Pool;
use crate::slowtier::SlowTier;
use crate::stablestore::StableStore;
use crate::table::builder::TableOptions;
use crate::table::{Lst, TableWriter, Unpublished};
use crate::value::ValueRef;
use crate::vlog::segments::DeadTally;
use crate::vlog::{Relocator, RetainedSegments, SegmentDead, SegmentLive, SegmentMap};

/// What a compaction works on.
#[derive(Debug)]
pub(crate) struct Input {
    /// Buffer-trees, newest first.
    pub trees: Vec<Arc<BufferTree>>,
    /// The StableStore.
    pub stable: Arc<StableStore>,
    /// The slow tier below it: a tombstone for a key it may hold is kept.
    pub slow: Arc<SlowTier>,
    /// Retained log segments, for dead-byte accounting.
    pub retained: RetainedSegments,
    /// The pool.
    pub pool: Arc<Pool>,
    /// How output tables are cut.
    pub topts: TableOptions,
    /// Merge threads.
    pub threads: usize,
    /// Value segments to clean (first chunks): values kept in them are moved.
    pub victims: BTreeSet<u64>,
    /// Ids of LSTs to rewrite even when nothing overlaps them: they sit in sparse table
    /// chunks (`table/reclaim.rs`).
    pub rewrite: BTreeSet<u64>,
}

/// What a compaction produced.
#[derive(Debug, Default)]
pub(crate) struct Output {
    /// Buffer tables moved to StableStore unchanged.
    pub moved: Vec<Arc<Lst>>,
    /// Tables replaced (buffer and stable); obsolete once the edit is durable.
    pub rewritten: Vec<Arc<Lst>>,
    /// Ids of stable tables among `rewritten`.
    pub removed_stable: Vec<u64>,
    /// New tables, in key order; live once the caller's edit is durable.
    pub created: Unpublished,
    /// Separated value bytes made dead (dropped versions and moved values), by
    /// retained segment.
    pub dead: Vec<SegmentDead>,
    /// Value segments written by cleaning, with the bytes moved into each.
    pub created_segments: Vec<SegmentLive>,
    /// Value bytes moved out of victims.
    pub moved_value_bytes: u64,
    /// Table bytes written.
    pub bytes_written: u64,
    /// Entries read from rewritten tables.
    pub entries_in: u64,
    /// Entries written.
    pub entries_out: u64,
}

#[derive(Debug, Clone)]
enum Src {
    Tree(usize),
    Stable,
}

/// A key range `[lo, hi)` to merge (`None` = unbounded).
#[derive(Debug, Clone)]
struct Unit {
    lo: Option<Box<[u8]>>,
    hi: Option<Box<[u8]>>,
    /// Tables per run (index = tree position, last = stable), key order.
    runs: Vec<Vec<Arc<Lst>>>,
}

/// Runs a compaction.
pub(crate) fn run(input: &Input) -> Result<Output> {
    let mut out = Output::default();
    let units = pick(input, &mut out);
    // 2. Run: units spread over threads, each thread merging its units in order.
    // Small rewrites run on one thread: each thread leaves a value segment and a table
    // chunk partly filled, which the cleaning policies count on (`writers`).
    let threads = input
        .threads
        .clamp(1, units.len().max(1))
        .min(usize_from(writers(out.entries_in, input.threads)));
    let watch = crate::priority::current();
    let results: Vec<Result<UnitResult>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let units = &units;
                let watch = watch.clone();
                s.spawn(move || {
                    if let Some(w) = watch {
                        crate::priority::enter_background(w);
                    }
                    merge_units(input, units, t, threads)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("compaction thread panicked".into())))
            })
            .collect()
    });
    // Any thread's failure fails the compaction; the tables the others made are
    // dropped unpublished (marked obsolete, so their space goes back).
    let mut ok = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(r) => ok.push(r),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let mut per_unit: Vec<(usize, Unpublished)> = Vec::new();
    let mut dead = DeadTally::default();
    for r in ok {
        per_unit.extend(r.made);
        dead.merge(r.dead);
        out.bytes_written += r.written;
        out.entries_out += r.entries;
        out.created_segments.extend(r.created_segments);
        out.moved_value_bytes += r.moved_value_bytes;
    }
    per_unit.sort_by_key(|(i, _)| *i);
    for (_, u) in per_unit {
        out.created.extend(u);
    }
    out.dead = dead.finish();
    Ok(out)
}

/// Fewest entries a unit of work gets: smaller rewrites run on one thread.
pub(crate) const MIN_UNIT_ENTRIES: u64 = 16 * 1024;

/// How many merge threads a compaction over `entries` input entries uses at most: each
/// may leave one value segment and one table chunk partly filled.
pub(crate) fn writers(entries: u64, threads: usize) -> u64 {
    (entries / MIN_UNIT_ENTRIES + 1).min(threads.max(1) as u64)
}

/// Step 1, pick: sorts every input table by smallest key into clusters of overlapping
/// tables; a buffer table alone in its cluster moves (recorded in `out.moved`), a
/// stable table alone stays; every other cluster is rewritten (`out.rewritten`,
/// `out.removed_stable`) and cut into key-range units of about equal entry counts.
fn pick(input: &Input, out: &mut Output) -> Vec<Unit> {
    let nruns = input.trees.len() + 1;
    let mut all: Vec<(Arc<Lst>, Src)> = Vec::new();
    for (i, t) in input.trees.iter().enumerate() {
        all.extend(t.tables.tables().map(|l| (l.clone(), Src::Tree(i))));
    }
    all.extend(
        input
            .stable
            .tables()
            .tables()
            .map(|l| (l.clone(), Src::Stable)),
    );
    all.sort_by(|a, b| a.0.min_key.cmp(&b.0.min_key));
    let mut clusters: Vec<Vec<(Arc<Lst>, Src)>> = Vec::new();
    let mut cur_max: Option<Box<[u8]>> = None;
    for (l, s) in all {
        let joins = cur_max.as_ref().is_some_and(|m| l.min_key <= *m);
        if !joins {
            clusters.push(Vec::new());
        }
        if cur_max.as_ref().is_none_or(|m| l.max_key > *m) {
            cur_max = Some(l.max_key.clone());
        }
        if let Some(c) = clusters.last_mut() {
            c.push((l, s));
        }
    }
    let total_rewrite: u64 = clusters
        .iter()
        .filter(|c| c.len() > 1)
        .flat_map(|c| c.iter().map(|(l, _)| u64::from(l.entries)))
        .sum();
    let target = (total_rewrite / input.threads.max(1) as u64).max(MIN_UNIT_ENTRIES);
    let mut units: Vec<Unit> = Vec::new();
    for c in clusters {
        let forced = |l: &Lst| {
            input.rewrite.contains(&l.id)
                || l.value_segments()
                    .iter()
                    .any(|s| input.victims.contains(&s.chunk()))
        };
        if c.len() == 1 && !c.iter().any(|(l, _)| forced(l)) {
            if let Some((l, Src::Tree(_))) = c.into_iter().next() {
                out.moved.push(l);
            }
            continue;
        }
        let entries: u64 = c.iter().map(|(l, _)| u64::from(l.entries)).sum();
        out.entries_in += entries;
        // Split points: table smallest keys at even entry intervals.
        let mut splits: Vec<Box<[u8]>> = Vec::new();
        let mut acc = 0;
        for (l, _) in c.iter().skip(1) {
            acc += u64::from(l.entries);
            if acc >= target && splits.last().is_none_or(|s| l.min_key > *s) {
                splits.push(l.min_key.clone());
                acc = 0;
            }
        }
        let cluster_lo = c.first().map(|(l, _)| l.min_key.clone());
        let mut bounds: Vec<Option<Box<[u8]>>> = vec![cluster_lo];
        bounds.extend(splits.into_iter().map(Some));
        bounds.push(None);
        let mut runs: Vec<Vec<Arc<Lst>>> = vec![Vec::new(); nruns];
        for (l, s) in &c {
            out.rewritten.push(l.clone());
            match s {
                Src::Tree(i) => runs[*i].push(l.clone()),
                Src::Stable => {
                    out.removed_stable.push(l.id);
                    runs[nruns - 1].push(l.clone());
                }
            }
        }
        // The last unit of a cluster ends at the cluster's largest key (inclusive):
        // `hi = None` is safe because the runs only hold this cluster's tables.
        for w in bounds.windows(2) {
            units.push(Unit {
                lo: w[0].clone(),
                hi: w[1].clone(),
                runs: runs.clone(),
            });
        }
    }
    units
}

/// What one merge thread produced.
struct UnitResult {
    /// Tables per unit index.
    made: Vec<(usize, Unpublished)>,
    dead: DeadTally,
    written: u64,
    entries: u64,
    created_segments: Vec<SegmentLive>,
    moved_value_bytes: u64,
}

fn merge_units(input: &Input, units: &[Unit], t: usize, threads: usize) -> Result<UnitResult> {
    let mut writer = TableWriter::new(input.pool.clone());
    let mut builder = input.topts.builder(input.topts.stable_filters);
    let mut made = Vec::new();
    let mut dead = DeadTally::default();
    let mut moved_out = DeadTally::default();
    let mut reloc = Relocator::new(input.pool.clone());
    let chunk_size = input.pool.chunk_size();
    let mut n = 0u64;
    let mine: Vec<(usize, &Unit)> = units.iter().enumerate().skip(t).step_by(threads).collect();
    // Every value segment the input tables point into, plus those cleaning creates.
    let mut segs = SegmentMap::default();
    for (_, u) in &mine {
        for l in u.runs.iter().flatten() {
            for s in l.value_segments() {
                segs.insert(s.clone());
            }
        }
    }
    for (ui, u) in mine {
        let mut cursors: Vec<RunCursor> = u
            .runs
            .iter()
            .map(|r| RunCursor::new(r.clone(), u.lo.clone(), u.hi.clone()))
            .collect();
        let mut lsts = Unpublished::default();
        merge(
            &mut cursors,
            |k, v| {
                // A tombstone hides nothing unless the slow tier below may hold the
                // key (every older version above it is among the inputs).
                if v == ValueRef::Tombstone && !input.slow.may_contain(k) {
                    return Ok(());
                }
                n += 1;
                let Some(p) = v.ptr() else {
                    if let Some(b) = builder.add(k, &v) {
                        lsts.push(writer.place(b, &segs)?);
                    }
                    return Ok(());
                };
                let Some(chunk) = segs.find(p.addr, chunk_size).map(|s| s.chunk()) else {
                    return Err(Error::corruption(
                        input.pool.path(),
                        p.addr,
                        "a table entry points outside the value segments its table lists",
                    ));
                };
                let (v, chunk) = if input.victims.contains(&chunk) {
                    let (to, new_seg) = reloc.relocate(k, p)?;
                    moved_out.note(&input.retained, chunk_size, k.len(), p);
                    let c = new_seg.chunk();
                    segs.insert(new_seg);
                    (ValueRef::Separated(to), c)
                } else {
                    (v, chunk)
                };
                let done = builder.add(k, &v);
                builder.note_value_segment(chunk);
                if let Some(b) = done {
                    lsts.push(writer.place(b, &segs)?);
                }
                Ok(())
            },
            |k, v| {
                if let Some(p) = v.ptr() {
                    dead.note(&input.retained, chunk_size, k.len(), p);
                }
            },
        )?;
        if let Some(b) = builder.finish() {
            lsts.push(writer.place(b, &segs)?);
        }
        made.push((ui, lsts));
    }
    // Moved values first: a table must never point at bytes that are not durable.
    reloc.sync()?;
    writer.sync()?;
    dead.merge(moved_out);
    Ok(UnitResult {
        made,
        dead,
        written: writer.bytes_written(),
        entries: n,
        created_segments: reloc.created(),
        moved_value_bytes: reloc.moved_bytes(),
    })
}
