//! Which StableStore key ranges a demotion takes (PrismDB §5.2–5.3, §6 "MSC metric",
//! Appendix B.1): multi-tiered storage compaction.
//!
//! **Candidates.** StableStore's tables in key order are cut into *units* of
//! consecutive tables of about `unit_bytes` each (PrismDB's compaction key range of
//! `i` SST files; ours follow the fast tier's tables, because our slow tier appends a
//! run per demotion instead of rewriting the files below, LightKV §III-F).
//!
//! **Score** (equation 1): `MSC = Σ coldness / (F · (2 − o) / (1 − p) + 1)` with
//! `coldness = 1 / (clock + 1)` (1 for an untracked key), `p` the share of the range's
//! keys the mapper pins, `F = t_f / t_n` the slow tier's entries in the range over the
//! fast tier's, and `o` the share of those slow entries the fast range repeats.
//!
//! **Approximation** (approx-MSC, §5.3). PrismDB keeps per-bucket bitmaps over an
//! integer key space (64 K keys per bucket). Our keys are byte strings with no dense
//! numbering, so a bucket is the unit itself and its bitmaps are drawn from a *sample*:
//! the first key of up to [`SAMPLE`] of its data blocks, spread evenly (they are in
//! DRAM: the tables' fence copies). Per sampled key: popularity from the tracker and
//! the mapper (the pop bitmap), presence in the slow tier from its Bloom filters (the
//! flash bitmap; AND with the fast sample gives `o`). `t_n` and `t_f` are exact entry
//! counts from table metadata (slow tables overlapping the range, partial ones
//! counted half). `Exact` scores every key instead (the paper's precise MSC), to
//! measure what the sample loses.
//!
//! **Choice.** Power of k choices (k = [`K`]): k random units are scored, the best
//! is taken, until the units taken free `target` bytes by estimate (their bytes times
//! `1 − p`). Every unit after the first comes from the first one's slow-tier
//! partition, so a batch adds one run to one partition (see `choose`). `Random` and `Oldest` (lowest table id first) are the baselines the issue
//! measures against; `KeyOrder` is the round robin of issue #14.
//!
//! Thread-safety: pure functions over an immutable stage set, called by the demotion
//! job under `compact_lock` and `slow_lock`.

use std::sync::Arc;

use super::mapper::Pinning;
use super::tracker::Tracker;
use crate::db::DemotionPolicy;
use crate::error::Result;
use crate::slowtier::SlowTier;
use crate::table::Lst;

/// Candidates scored per choice (PrismDB: k = 8).
pub(crate) const K: usize = 8;
/// Keys sampled per unit for approx-MSC.
pub(crate) const SAMPLE: usize = 64;

/// Consecutive StableStore tables `[first, first + n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    pub first: usize,
    pub n: usize,
    /// Table bytes.
    pub bytes: u64,
    /// Smallest table id (age).
    pub oldest: u64,
}

/// What scoring a unit found.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Score {
    pub msc: f64,
    /// Share of the unit's keys pinned (`p`).
    pub pinned: f64,
}

/// Cuts `tables` (StableStore, key order) into units of about `unit_bytes`.
pub(crate) fn units(tables: &[Arc<Lst>], unit_bytes: u64) -> Vec<Unit> {
    let mut out: Vec<Unit> = Vec::new();
    let mut cur: Option<Unit> = None;
    for (i, l) in tables.iter().enumerate() {
        let u = cur.get_or_insert(Unit {
            first: i,
            n: 0,
            bytes: 0,
            oldest: u64::MAX,
        });
        u.n += 1;
        u.bytes += u64::from(l.size);
        u.oldest = u.oldest.min(l.id);
        if u.bytes >= unit_bytes {
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

/// A small deterministic generator (`SplitMix64`) for candidate choice.
#[derive(Debug, Clone)]
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

/// Scores `unit` of `tables` (see the module docs); `exact`: every key, not a sample.
pub(crate) fn score(
    unit: &Unit,
    tables: &[Arc<Lst>],
    slow: &SlowTier,
    tracker: &Tracker,
    pin: &Pinning,
    exact: bool,
) -> Result<Score> {
    let Some(ts) = tables.get(unit.first..unit.first + unit.n) else {
        return Ok(Score::default());
    };
    let t_n: u64 = ts.iter().map(|l| u64::from(l.entries)).sum();
    let (mut seen, mut cold, mut pinned, mut in_slow) = (0u64, 0f64, 0u64, 0u64);
    let mut visit = |k: &[u8]| {
        let clock = tracker.get(k).map(|(c, _)| c);
        seen += 1;
        cold += 1.0 / (f64::from(clock.unwrap_or(0)) + 1.0);
        pinned += u64::from(pin.pins(k, clock));
        in_slow += u64::from(slow.may_contain(k));
    };
    let per_table = (SAMPLE / ts.len().max(1)).max(1);
    for l in ts {
        if exact {
            l.scan_from(None, |k, _| {
                visit(k);
                true
            })?;
        } else {
            l.sample_keys(per_table, &mut visit)?;
        }
    }
    if seen == 0 {
        return Ok(Score::default());
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "ratios of counts far below 2^52"
    )]
    let (p, coldness, o_fast, t_n, t_f) = (
        pinned as f64 / seen as f64,
        cold / seen as f64,
        in_slow as f64 / seen as f64,
        t_n as f64,
        slow_entries(slow, ts) as f64,
    );
    let benefit = coldness * t_n;
    // `o`: share of the slow entries the fast range repeats (o·t_f = o_fast·t_n).
    let o = if t_f > 0.0 {
        (o_fast * t_n / t_f).min(1.0)
    } else {
        0.0
    };
    let fanout = t_f / t_n.max(1.0);
    let msc = if p >= 1.0 {
        0.0
    } else {
        benefit / (fanout * (2.0 - o) / (1.0 - p) + 1.0)
    };
    Ok(Score { msc, pinned: p })
}

/// Entries of slow-tier tables overlapping the key range of `ts` (a table only partly
/// inside counts half): per run of the partitions the range touches, a binary search.
fn slow_entries(slow: &SlowTier, ts: &[Arc<Lst>]) -> u64 {
    let (Some(first), Some(last)) = (ts.first(), ts.last()) else {
        return 0;
    };
    let (lo, hi) = (&*first.min_key, &*last.max_key);
    let (Some(a), Some(b)) = (slow.part_for(lo), slow.part_for(hi)) else {
        return 0;
    };
    let mut n = 0;
    for p in slow.parts().get(a..=b).unwrap_or(&[]) {
        for r in &p.runs {
            for l in r.tables.overlapping(lo, hi) {
                let inside = &*l.min_key >= lo && &*l.max_key <= hi;
                n += u64::from(l.entries) / if inside { 1 } else { 2 };
            }
        }
    }
    n
}

/// Chooses units to demote until their estimated freed bytes reach `target`.
/// `from_key`: where `KeyOrder` resumes (the first unit whose tables start at or
/// after it). Returns the chosen units in key order, and whether pinning should be
/// dropped for them (every candidate looked wholly pinned: demoting by popularity
/// would free nothing, and the budget must still be kept).
#[expect(
    clippy::too_many_arguments,
    reason = "the pieces of one choice, all borrowed from the demotion job"
)]
pub(crate) fn choose(
    policy: DemotionPolicy,
    mut cands: Vec<Unit>,
    tables: &[Arc<Lst>],
    slow: &SlowTier,
    tracker: &Tracker,
    pin: &Pinning,
    target: u64,
    from_key: &[u8],
    rng: &mut Rng,
) -> Result<(Vec<Unit>, bool)> {
    let mut chosen: Vec<Unit> = Vec::new();
    let mut freed = 0f64;
    #[expect(clippy::cast_precision_loss, reason = "byte estimates")]
    let target_f = target as f64;
    if policy == DemotionPolicy::KeyOrder {
        let start = cands
            .iter()
            .position(|u| tables.get(u.first).is_some_and(|l| &*l.min_key >= from_key))
            .unwrap_or(0);
        cands.rotate_left(start);
    } else if policy == DemotionPolicy::Oldest {
        cands.sort_by_key(|u| u.oldest);
    }
    let mut best_unpinned: Option<(f64, usize)> = None;
    while freed < target_f && !cands.is_empty() {
        let exact = policy == DemotionPolicy::MscExact;
        let score_at = |i: usize| match cands.get(i) {
            Some(u) => score(u, tables, slow, tracker, pin, exact).map(|s| (i, s)),
            None => Ok((i, Score::default())),
        };
        let (i, s) = match policy {
            DemotionPolicy::KeyOrder | DemotionPolicy::Oldest => score_at(0)?,
            DemotionPolicy::Random => score_at(rng.below(cands.len()))?,
            DemotionPolicy::Msc | DemotionPolicy::MscExact => {
                let mut best: Option<(usize, Score)> = None;
                for _ in 0..K.min(cands.len()) {
                    let (i, s) = score_at(rng.below(cands.len()))?;
                    if best.is_none_or(|(_, b)| s.msc > b.msc) {
                        best = Some((i, s));
                    }
                }
                best.unwrap_or((0, Score::default()))
            }
        };
        if i >= cands.len() {
            break;
        }
        let u = cands.remove(i);
        if chosen.is_empty() && policy != DemotionPolicy::KeyOrder {
            // The rest of the batch comes from the same slow-tier partition: one run
            // per batch, as LightKV's key-range demotion makes. Candidates scattered
            // over every partition made a small run in each, and the runs piling up
            // forced whole-partition merges (YCSB B, 1M keys, 20 % budget: 1.46 GB
            // written to the slow tier against 0 in key order).
            if let Some(first) = tables.get(u.first) {
                let part = slow.part_for(&first.min_key);
                cands.retain(|c| {
                    tables
                        .get(c.first)
                        .is_some_and(|l| slow.part_for(&l.min_key) == part)
                });
            }
        }
        #[expect(clippy::cast_precision_loss, reason = "byte estimates")]
        let bytes = u.bytes as f64;
        if best_unpinned.is_none_or(|(p, _)| s.pinned < p) {
            best_unpinned = Some((s.pinned, chosen.len()));
        }
        freed += bytes * (1.0 - s.pinned);
        chosen.push(u);
    }
    let force = freed <= 0.0 && !chosen.is_empty();
    if force {
        // Everything looked pinned: demote the least pinned unit whole.
        let keep = best_unpinned.map_or(0, |(_, i)| i);
        chosen = chosen.get(keep).copied().into_iter().collect();
    }
    chosen.sort_by_key(|u| u.first);
    Ok((chosen, force))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::test_pool;
    use crate::slowtier::Partition;
    use crate::table::builder::LstBuilder;
    use crate::table::TableWriter;
    use crate::value::ValueRef;
    use crate::vlog::SegmentMap;

    /// 16 tables of 20 keys each: table `t` holds `k{t:02}-{i:02}`.
    fn tables() -> Result<Vec<Arc<Lst>>> {
        let p = test_pool();
        let ids = Arc::new(std::sync::atomic::AtomicU64::new(1));
        let mut w = TableWriter::new(p.clone());
        let mut out = Vec::new();
        for t in 0..16 {
            let mut b = LstBuilder::new(256, 64 << 10, ids.clone());
            for i in 0..20 {
                let _ = b.add(
                    format!("k{t:02}-{i:02}").as_bytes(),
                    &ValueRef::Inline(b"v"),
                );
            }
            if let Some(built) = b.finish() {
                out.push(w.place(built, &SegmentMap::default())?);
            }
        }
        w.sync()?;
        Ok(out)
    }

    /// Whatever the policy, a batch's units after the first come from the first
    /// one's slow-tier partition (one run per batch); key order takes consecutive
    /// units from where the last batch stopped.
    #[test]
    fn a_batch_stays_in_one_partition() -> Result<()> {
        let ts = tables()?;
        let part = |lo: &str| Partition {
            lo: lo.as_bytes().into(),
            runs: Vec::new(),
        };
        let slow = SlowTier::new(vec![part(""), part("k04"), part("k08"), part("k12")]);
        let tracker = Tracker::new(1024);
        let all: u64 = ts.iter().map(|l| u64::from(l.size)).sum();
        for policy in [
            DemotionPolicy::Msc,
            DemotionPolicy::MscExact,
            DemotionPolicy::Random,
            DemotionPolicy::Oldest,
        ] {
            for seed in 0..20 {
                let units = units(&ts, 1);
                let (chosen, forced) = choose(
                    policy,
                    units,
                    &ts,
                    &slow,
                    &tracker,
                    &Pinning::NONE,
                    all,
                    b"",
                    &mut Rng(seed),
                )?;
                assert!(!forced);
                let parts: std::collections::BTreeSet<Option<usize>> = chosen
                    .iter()
                    .map(|u| slow.part_for(&ts[u.first].min_key))
                    .collect();
                assert_eq!(parts.len(), 1, "{policy:?}: {chosen:?}");
                assert_eq!(chosen.len(), 4, "{policy:?}: the whole partition");
            }
        }
        let (chosen, _) = choose(
            DemotionPolicy::KeyOrder,
            units(&ts, 1),
            &ts,
            &slow,
            &tracker,
            &Pinning::NONE,
            u64::from(ts[0].size) * 6,
            b"k03",
            &mut Rng(1),
        )?;
        let firsts: Vec<usize> = chosen.iter().map(|u| u.first).collect();
        assert_eq!(firsts, vec![3, 4, 5, 6, 7, 8]);
        Ok(())
    }

    #[test]
    fn rng_spreads() {
        let mut r = Rng(1);
        let mut hits = [0u32; 8];
        for _ in 0..8000 {
            hits[r.below(8)] += 1;
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
    }
}
