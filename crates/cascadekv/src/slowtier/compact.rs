//! Slow-tier compactions (LightKV §III-F/G), as pure jobs over immutable inputs: they
//! write new files and return what the caller must persist and install
//! (`db/slow.rs`).
//!
//! * **Demotion** moves a key range of StableStore tables from the pool into the slow
//!   tier: one new weight-0 run per partition the range touches, put in front of that
//!   partition's runs. Separated values are read from the value log and written
//!   inline (or as blobs): nothing in the slow tier points into the pool. A tombstone
//!   goes down only if some run of its partition may hold the key.
//! * **Merge** (partition-based compaction): `CS` adjacent runs of equal weight `w`
//!   in one partition become one run of weight `w + 1`, so every entry is rewritten
//!   about `log_CS(N)` times (LightKV: write amplification `log_CS(N) + 1`, flat as the
//!   data grows, where a leveled LSM's grows). Tombstones are dropped when the group
//!   includes the partition's oldest run: nothing older can be hidden.
//! * **Split**: a partition grown past its bound is merged whole into two partitions
//!   at its median table key (the skew remedy §III-G leaves open), each with one run.
//!
//! Thread-safety: run on one background thread; they read immutable tables and write
//! only new files.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::file::SlowIo;
pub(crate) use super::keep::Keep;
use super::keep::KeptWriter;
use super::tier::{Partition, Run, SlowTier};
use super::writer::{Pace, RunWriter};
use crate::compaction::merge::{merge, RunCursor};
use crate::error::Result;
use crate::pmem::Pool;
use crate::table::{Lst, Unpublished};
use crate::value::ValueRef;
use crate::vlog::segments::DeadTally;
use crate::vlog::RetainedSegments;

/// What a slow-tier job needs.
#[derive(Debug)]
pub(crate) struct Ctx {
    /// The slow directory.
    pub dir: PathBuf,
    /// Block unit of slow tables.
    pub block_size: usize,
    /// LST ids (shared with the fast tier: ids seed checksums).
    pub ids: Arc<AtomicU64>,
    /// File numbers.
    pub files: Arc<AtomicU64>,
    /// Write pacing.
    pub pace: Pace,
    /// Read counters of the store's slow-tier files.
    pub io: Arc<SlowIo>,
    /// Where the next demotion starts (round robin over the key space); taken under
    /// `Engine::slow_lock`.
    pub demote_from: parking_lot::Mutex<Vec<u8>>,
    /// StableStore (with its values) is over the fast budget: writers then wait while
    /// the pool is over half full, so demotion can make room (`db/slow.rs`). Set by
    /// the background threads, read by writers (Release/Acquire).
    pub behind: std::sync::atomic::AtomicBool,
}

impl Ctx {
    fn writer(&self) -> Result<RunWriter> {
        let n = self.files.fetch_add(1, Ordering::AcqRel);
        RunWriter::new(
            &self.dir,
            n,
            self.block_size,
            self.ids.clone(),
            self.pace,
            self.io.clone(),
        )
    }
}

/// What a job made.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Lower bounds of the partitions replaced.
    pub replaced: Vec<Box<[u8]>>,
    /// Their replacements.
    pub parts: Vec<Partition>,
    /// Slow-tier tables the job consumed (obsolete once the edit is durable).
    pub consumed: Vec<Arc<Lst>>,
    /// Separated value bytes that left the pool, by retained segment (demotion).
    pub dead: DeadTally,
    /// The new runs' tables: live once the caller's edit is durable (dropping this
    /// unpublished makes them obsolete, so their files go).
    pub created: Unpublished,
    /// Pool tables holding the entries a demotion kept in the fast tier (durable;
    /// live once the caller's edit is).
    pub kept: Unpublished,
    /// Entries kept, and the table bytes written for them.
    pub kept_entries: u64,
    pub kept_bytes: u64,
    /// Bytes written to the slow tier.
    pub written: u64,
    /// Entries read and written.
    pub entries_in: u64,
    /// Entries written.
    pub entries_out: u64,
}

/// Entries of one partition's new run, or the run itself when finished.
struct Out {
    part: usize,
    w: RunWriter,
}

fn finish_run(w: RunWriter, weight: u32, o: &mut Outcome) -> Result<Option<Arc<Run>>> {
    let Some((f, lsts, filters)) = w.finish()? else {
        return Ok(None);
    };
    // Counted once finished: the last table and the filter section are written then.
    o.written += f.size();
    for l in &lsts {
        o.created.push(l.clone());
    }
    Ok(Some(Arc::new(Run::new(f.number(), weight, lsts, filters))))
}

/// Demotes `victims` (stable tables in key order, not overlapping) into `tier`,
/// except the entries `keep` pins: those are rewritten into new pool tables
/// (`Outcome::kept`, durable on return) that replace the victims in StableStore.
pub(crate) fn demote(
    ctx: &Ctx,
    tier: &SlowTier,
    victims: &[Arc<Lst>],
    pool: &Arc<Pool>,
    retained: &RetainedSegments,
    keep: Keep<'_>,
) -> Result<Outcome> {
    let mut o = Outcome::default();
    let chunk_size = pool.chunk_size();
    // An empty tier gets its first partition, covering every key.
    let parts: Vec<Partition> = if tier.parts().is_empty() {
        vec![Partition {
            lo: Box::default(),
            runs: Vec::new(),
        }]
    } else {
        tier.parts().to_vec()
    };
    let lookup = SlowTier::new(parts.clone());
    let mut kept = KeptWriter::new(pool, victims, keep.topts, keep.cuts);
    let pins = keep.pins;
    let mut cur: Option<Out> = None;
    let mut made: Vec<(usize, Arc<Run>)> = Vec::new();
    let mut cursor = [RunCursor::new(victims.to_vec(), None, None)];
    let mut val = Vec::new();
    let (mut n_in, mut n_out) = (0u64, 0u64);
    merge(
        &mut cursor,
        |k, v| {
            n_in += 1;
            let part = lookup.part_for(k).unwrap_or(0);
            if cur.as_ref().is_none_or(|c| c.part != part) {
                if let Some(c) = cur.take() {
                    if let Some(r) = finish_run(c.w, 0, &mut o)? {
                        made.push((c.part, r));
                    }
                }
                cur = Some(Out {
                    part,
                    w: ctx.writer()?,
                });
            }
            if v != ValueRef::Tombstone && pins(k) {
                return kept.add(k, v, &mut o);
            }
            let Some(c) = cur.as_mut() else {
                return Ok(());
            };
            match v {
                ValueRef::Tombstone if !lookup.may_contain(k) => return Ok(()),
                ValueRef::Separated(p) => {
                    crate::vlog::read_into(pool, k, p, &mut val)?;
                    o.dead.note(retained, chunk_size, k.len(), p);
                    c.w.add(k, ValueRef::Inline(&val))?;
                }
                v => c.w.add(k, v)?,
            }
            n_out += 1;
            Ok(())
        },
        |_, _| {},
    )?;
    if let Some(c) = cur.take() {
        if let Some(r) = finish_run(c.w, 0, &mut o)? {
            made.push((c.part, r));
        }
    }
    kept.finish(&mut o)?;
    for (i, run) in made {
        let Some(p) = parts.get(i) else { continue };
        let mut runs = Vec::with_capacity(p.runs.len() + 1);
        runs.push(run);
        runs.extend(p.runs.iter().cloned());
        o.replaced.push(p.lo.clone());
        o.parts.push(Partition {
            lo: p.lo.clone(),
            runs,
        });
    }
    o.entries_in = n_in;
    o.entries_out = n_out;
    Ok(o)
}

/// What a merge step should do to one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Merge runs `[from, from + n)` (adjacent, equal weight) into one.
    Merge { part: usize, from: usize, n: usize },
    /// Merge all runs and cut the output at `at` into two partitions.
    Split { part: usize, at: Box<[u8]> },
}

/// Runs a partition may hold before all of them merge into one, whatever their weights:
/// each run may repeat the partition's keys, so this bounds the slow tier's space
/// amplification (and its file count) under updates of a fixed key set, where the
/// equal-weight rule alone lets runs grow with the logarithm of the demotions.
pub(crate) fn max_runs(width: usize) -> usize {
    (2 * width).max(8)
}

/// The next merge step for `tier`, if any: a split of the first partition larger than
/// `part_max` bytes; else a full merge of a partition holding more than
/// [`max_runs`]; else the oldest `width` adjacent runs of equal weight in the
/// partition with the most runs.
pub(crate) fn plan(tier: &SlowTier, width: usize, part_max: u64) -> Option<Step> {
    for (i, p) in tier.parts().iter().enumerate() {
        if p.bytes() > part_max {
            if let Some(at) = split_key(p) {
                return Some(Step::Split { part: i, at });
            }
        }
    }
    let width = width.max(2);
    if let Some((i, p)) = tier
        .parts()
        .iter()
        .enumerate()
        .find(|(_, p)| p.runs.len() > max_runs(width))
    {
        return Some(Step::Merge {
            part: i,
            from: 0,
            n: p.runs.len(),
        });
    }
    let mut best: Option<(usize, Step)> = None;
    for (i, p) in tier.parts().iter().enumerate() {
        if p.runs.len() < width || best.as_ref().is_some_and(|(n, _)| *n >= p.runs.len()) {
            continue;
        }
        // From the oldest run towards the newest: the first window of equal weights.
        let found = (0..=p.runs.len() - width).rev().find(|&from| {
            let w = p.runs[from].weight;
            p.runs[from..from + width].iter().all(|r| r.weight == w)
        });
        if let Some(from) = found {
            best = Some((
                p.runs.len(),
                Step::Merge {
                    part: i,
                    from,
                    n: width,
                },
            ));
        }
    }
    best.map(|(_, s)| s)
}

/// True for a split, or the full merge of a partition holding more than
/// [`max_runs`]: what bounds the slow tier's space and read amplification.
pub(crate) fn is_urgent(tier: &SlowTier, step: &Step, width: usize) -> bool {
    match step {
        Step::Split { .. } => true,
        Step::Merge { part, from, n } => {
            *from == 0
                && tier
                    .parts()
                    .get(*part)
                    .is_some_and(|p| *n == p.runs.len() && p.runs.len() > max_runs(width.max(2)))
        }
    }
}

/// Bytes in partitions due a split, and in runs of a weight class with `width` runs or
/// more (due a merge): the slow tier's compaction debt.
pub(crate) fn debt(tier: &SlowTier, width: usize, part_max: u64) -> u64 {
    let mut d = 0;
    for p in tier.parts() {
        if p.bytes() > part_max && split_key(p).is_some() {
            d += p.bytes();
            continue;
        }
        let mut by_weight: std::collections::BTreeMap<u32, (usize, u64)> =
            std::collections::BTreeMap::new();
        for r in &p.runs {
            let e = by_weight.entry(r.weight).or_default();
            e.0 += 1;
            e.1 += r.tables.bytes();
        }
        d += by_weight
            .values()
            .filter(|(n, _)| *n >= width.max(2))
            .map(|(_, b)| b)
            .sum::<u64>();
    }
    d
}

/// The smallest key of the median table of the partition's largest run, if that run
/// has two tables or more (so both halves get one) and the key lies strictly above
/// the partition's lower bound.
fn split_key(p: &Partition) -> Option<Box<[u8]>> {
    let run = p.runs.iter().max_by_key(|r| r.tables.bytes())?;
    let n = run.tables.len();
    if n < 2 {
        return None;
    }
    let mid = run.tables.tables().nth(n / 2)?;
    (mid.min_key > p.lo).then(|| mid.min_key.clone())
}

/// Runs `step` over `tier`.
pub(crate) fn run_step(ctx: &Ctx, tier: &SlowTier, step: &Step) -> Result<Outcome> {
    let mut o = Outcome::default();
    let (part, from, n, at) = match step {
        Step::Merge { part, from, n } => (*part, *from, *n, None),
        Step::Split { part, at } => {
            let runs = tier.parts().get(*part).map_or(0, |p| p.runs.len());
            (*part, 0, runs, Some(at.clone()))
        }
    };
    let Some(p) = tier.parts().get(part) else {
        return Ok(o);
    };
    let Some(group) = p.runs.get(from..from + n) else {
        return Ok(o);
    };
    let drop_tombstones = from + n == p.runs.len();
    let top = group.iter().map(|r| r.weight).max().unwrap_or(0);
    let weight = if at.is_some() { top } else { top + 1 };
    let mut cursors: Vec<RunCursor> = group
        .iter()
        .map(|r| RunCursor::new(r.tables.tables().cloned().collect(), None, None))
        .collect();
    let mut w = ctx.writer()?;
    let mut first: Option<RunWriter> = None;
    let (mut n_in, mut n_out) = (0u64, 0u64);
    merge(
        &mut cursors,
        |k, v| {
            n_in += 1;
            if first.is_none() && at.as_deref().is_some_and(|a| k >= a) {
                first = Some(std::mem::replace(&mut w, ctx.writer()?));
            }
            if drop_tombstones && v == ValueRef::Tombstone {
                return Ok(());
            }
            n_out += 1;
            w.add(k, v)
        },
        |_, _| {},
    )?;
    // Keys below `at` went to `first` if any key reached `at`; else all are in `w`.
    let (lower, upper) = match first {
        Some(f) => (f, Some(w)),
        None => (w, None),
    };
    let lower = finish_run(lower, weight, &mut o)?;
    let upper = match upper {
        Some(u) => finish_run(u, weight, &mut o)?,
        None => None,
    };
    o.consumed = group
        .iter()
        .flat_map(|r| r.tables.tables().cloned())
        .collect();
    o.replaced.push(p.lo.clone());
    match at {
        None => {
            let mut runs: Vec<Arc<Run>> = p.runs[..from].to_vec();
            runs.extend(lower);
            runs.extend(p.runs[from + n..].iter().cloned());
            o.parts.push(Partition {
                lo: p.lo.clone(),
                runs,
            });
        }
        Some(at) => {
            o.parts.push(Partition {
                lo: p.lo.clone(),
                runs: lower.into_iter().collect(),
            });
            o.parts.push(Partition {
                lo: at,
                runs: upper.into_iter().collect(),
            });
        }
    }
    o.entries_in = n_in;
    o.entries_out = n_out;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(lo: &[u8], weights: &[u32]) -> Partition {
        Partition {
            lo: lo.into(),
            runs: weights
                .iter()
                .zip(1u64..)
                .map(|(w, f)| Arc::new(Run::new(f, *w, Vec::new(), (0, 0))))
                .collect(),
        }
    }

    fn merge(part: usize, from: usize, n: usize) -> Step {
        Step::Merge { part, from, n }
    }

    /// Equal-weight merges take the oldest adjacent window; a partition over the run
    /// cap merges whole; nothing is due otherwise.
    #[test]
    fn plan_picks_oldest_equal_weight_windows_and_caps_runs() {
        let t = SlowTier::new(vec![part(b"", &[0, 1, 1])]);
        assert_eq!(plan(&t, 2, u64::MAX), Some(merge(0, 1, 2)));
        let t = SlowTier::new(vec![part(b"", &[0, 0, 0, 2])]);
        assert_eq!(plan(&t, 2, u64::MAX), Some(merge(0, 1, 2)));
        let t = SlowTier::new(vec![part(b"", &[0, 1, 2]), part(b"m", &[0])]);
        assert_eq!(plan(&t, 2, u64::MAX), None);
        // The partition with the most runs first.
        let t = SlowTier::new(vec![part(b"", &[0, 0]), part(b"m", &[0, 1, 1])]);
        assert_eq!(plan(&t, 2, u64::MAX), Some(merge(1, 1, 2)));
        // More than max_runs: everything, whatever the weights.
        let w: Vec<u32> = (0..9).rev().collect();
        let t = SlowTier::new(vec![part(b"", &w)]);
        assert_eq!(plan(&t, 2, u64::MAX), Some(merge(0, 0, 9)));
        assert_eq!(
            debt(&SlowTier::new(vec![part(b"", &[0, 1])]), 2, u64::MAX),
            0
        );
    }

    /// A partition left without runs leaves the tier, unless it is the first.
    #[test]
    fn empty_partitions_join_the_one_before() {
        let t = SlowTier::new(vec![part(b"", &[0]), part(b"m", &[0]), part(b"t", &[1])]);
        let next = t.with_parts(&[b"m".to_vec().into()], vec![part(b"m", &[])]);
        let los: Vec<&[u8]> = next.parts().iter().map(|p| &*p.lo).collect();
        assert_eq!(los, vec![&b""[..], &b"t"[..]]);
        assert_eq!(next.part_for(b"p"), Some(0));
        let first = t.with_parts(&[Box::default()], vec![part(b"", &[])]);
        assert_eq!(first.parts().len(), 3);
    }
}
