//! The slow tier as a reader sees it (LightKV §III-B…F): key-range **partitions**, each
//! a stack of **runs** newest first. A run is one slow-tier file: non-overlapping LSTs
//! in key order (a [`TableSet`]) with a compaction **weight** — a run demoted from the
//! fast tier has weight 0, and `CS` runs of weight `w` merge into one of weight `w + 1`
//! (`plan.rs`).
//!
//! Invariants:
//! * Partitions are ordered by their lower bound `lo` (inclusive); the first one's is
//!   the empty key; a partition ends where the next begins. Every key of every run of
//!   a partition lies inside it.
//! * Within a partition a newer run (smaller index) wins over an older one, and the
//!   weights never increase from older to newer runs, so runs of equal weight are
//!   adjacent (a base-`CS` counter, LightKV §III-F).
//! * Everything here is newer than nothing and older than every fast-tier stage: a
//!   reader consults the slow tier last.
//!
//! One index across media (LightKV §III-B…E): a point read binary-searches the
//! partition array, then per run the DRAM table array, the table's Bloom filter and its
//! DRAM copy of the index block (`table/fences.rs`), so only the one data block that
//! may hold the key is read from the file — one `pread` per run whose filter answers
//! "maybe", about one per get.
//!
//! Thread-safety: a `SlowTier` is immutable and shared by `Arc` inside a stage set;
//! a change builds the next one (`with_parts`).

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::table::{Lst, TableSet};
use crate::value::{Value, ValueRef};

/// `(lo, hi)` narrowed to end at `cutoff` (inclusive) in the scan's direction: a scan
/// batch hands out nothing past the nearest stop an earlier stage or run reported
/// (`db/iter.rs`), so later ones need not collect (and copy) it.
pub(crate) fn clip<'b>(
    forward: bool,
    lo: Bound<&'b [u8]>,
    hi: Bound<&'b [u8]>,
    cutoff: Option<&'b [u8]>,
) -> (Bound<&'b [u8]>, Bound<&'b [u8]>) {
    let Some(c) = cutoff else {
        return (lo, hi);
    };
    if forward {
        let inside = match hi {
            Bound::Unbounded => true,
            Bound::Included(h) | Bound::Excluded(h) => c < h,
        };
        (lo, if inside { Bound::Included(c) } else { hi })
    } else {
        let inside = match lo {
            Bound::Unbounded => true,
            Bound::Included(l) | Bound::Excluded(l) => c > l,
        };
        (if inside { Bound::Included(c) } else { lo }, hi)
    }
}

/// Entries of one run a scan collected, in scan order.
pub type SortedRun = Vec<(Box<[u8]>, Value)>;

/// One slow-tier file as a sorted run.
#[derive(Debug)]
pub struct Run {
    /// File number.
    pub file: u64,
    /// Compaction weight (0 = demoted from the fast tier).
    pub weight: u32,
    /// The file's tables in key order.
    pub tables: TableSet,
    /// Where the file's filter section lies: offset and bytes (0 bytes: none).
    pub filters: (u64, u64),
}

impl Run {
    /// A run over `lsts` (all in file `file`).
    pub fn new(file: u64, weight: u32, lsts: Vec<Arc<Lst>>, filters: (u64, u64)) -> Self {
        Run {
            file,
            weight,
            tables: TableSet::new(lsts),
            filters,
        }
    }
}

/// A key-range partition.
#[derive(Debug, Clone)]
pub struct Partition {
    /// Smallest key (inclusive); the empty key for the first partition.
    pub lo: Box<[u8]>,
    /// Runs, newest first.
    pub runs: Vec<Arc<Run>>,
}

impl Partition {
    /// True for a partition that holds no run and is not the first one: it is removed
    /// and its range joins the partition before it.
    pub fn gone(&self) -> bool {
        self.runs.is_empty() && !self.lo.is_empty()
    }

    /// Table bytes of all runs.
    pub fn bytes(&self) -> u64 {
        self.runs.iter().map(|r| r.tables.bytes()).sum()
    }
}

/// The slow tier of one stage set.
#[derive(Debug, Default, Clone)]
pub struct SlowTier {
    parts: Vec<Partition>,
}

impl SlowTier {
    /// A tier of `parts` (sorted by `lo`, the first one's `lo` empty).
    pub fn new(mut parts: Vec<Partition>) -> Self {
        parts.sort_by(|a, b| a.lo.cmp(&b.lo));
        SlowTier { parts }
    }

    /// The partitions in key order.
    pub fn parts(&self) -> &[Partition] {
        &self.parts
    }

    /// Index of the partition holding `key` (`None` for an empty tier).
    pub fn part_for(&self, key: &[u8]) -> Option<usize> {
        self.parts.partition_point(|p| &*p.lo <= key).checked_sub(1)
    }

    /// Exclusive upper bound of partition `i` (`None`: unbounded).
    pub fn part_hi(&self, i: usize) -> Option<&[u8]> {
        self.parts.get(i + 1).map(|p| &*p.lo)
    }

    /// The tier with partitions whose `lo` is in `replaced` swapped for `with`. A
    /// partition left without runs is dropped unless it is the first: the one before
    /// it takes over its range, which is valid because that one holds no key there.
    /// (The manifest edit lists such a partition as removed, [`Partition::gone`].)
    #[must_use]
    pub fn with_parts(&self, replaced: &[Box<[u8]>], with: Vec<Partition>) -> SlowTier {
        let keep = self
            .parts
            .iter()
            .filter(|p| !replaced.contains(&p.lo))
            .cloned();
        SlowTier::new(keep.chain(with.into_iter().filter(|p| !p.gone())).collect())
    }

    /// Every run, partition by partition.
    pub fn runs(&self) -> impl Iterator<Item = &Arc<Run>> {
        self.parts.iter().flat_map(|p| p.runs.iter())
    }

    /// Every table.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<Lst>> {
        self.runs().flat_map(|r| r.tables.tables())
    }

    /// Table bytes.
    pub fn bytes(&self) -> u64 {
        self.runs().map(|r| r.tables.bytes()).sum()
    }

    /// Entries (tombstones and shadowed versions included).
    pub fn entries(&self) -> u64 {
        self.runs().map(|r| r.tables.entries()).sum()
    }

    /// Estimated DRAM of the tier's index (table arrays, fence copies, filters).
    pub fn dram_bytes(&self) -> u64 {
        self.runs().map(|r| r.tables.dram_bytes()).sum()
    }

    /// Looks `key` up, newest run of its partition first; calls `f` with the value of
    /// the first run holding it (a tombstone included).
    pub fn get_with<R>(
        &self,
        key: &[u8],
        mut f: impl FnMut(ValueRef<'_>) -> R,
    ) -> Result<Option<R>> {
        let Some(p) = self.part_for(key).and_then(|i| self.parts.get(i)) else {
            return Ok(None);
        };
        for r in &p.runs {
            if let Some(x) = r.tables.get_with(key, true, &mut f)? {
                return Ok(Some(x));
            }
        }
        Ok(None)
    }

    /// True unless no run can hold `key` (its filters say so): a tombstone for a key
    /// that may be here must not be dropped above the slow tier.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        let Some(p) = self.part_for(key).and_then(|i| self.parts.get(i)) else {
            return false;
        };
        p.runs.iter().any(|r| r.tables.may_contain(key))
    }

    /// Appends to `runs` one sorted run per slow-tier run with entries in `(lo, hi)`,
    /// newest first within a partition, each at most `max` entries and none past
    /// `cutoff`; partitions are visited in scan direction (`forward`) and the walk stops
    /// at the first one that begins past `cutoff`. Returns the tightest stop (as `collect_range` does), to
    /// be merged into the caller's cutoff.
    pub fn collect(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        max: usize,
        forward: bool,
        runs: &mut Vec<SortedRun>,
        cutoff: &mut Option<Box<[u8]>>,
    ) -> Result<()> {
        let n = self.parts.len();
        let first = match lo {
            Bound::Included(k) | Bound::Excluded(k) => self.part_for(k).unwrap_or(0),
            Bound::Unbounded => 0,
        };
        let last = match hi {
            Bound::Included(k) | Bound::Excluded(k) => self.part_for(k).unwrap_or(0),
            Bound::Unbounded => n.saturating_sub(1),
        };
        if n == 0 || first > last {
            return Ok(());
        }
        let order: Box<dyn Iterator<Item = usize>> = if forward {
            Box::new(first..=last)
        } else {
            Box::new((first..=last).rev())
        };
        for i in order {
            // Past the cutoff in the walk's direction: every key here is beyond it.
            let beyond = cutoff.as_deref().is_some_and(|c| {
                if forward {
                    &*self.parts[i].lo > c
                } else {
                    self.part_hi(i).is_some_and(|h| h <= c)
                }
            });
            if beyond {
                break;
            }
            // Oldest (largest) run first: it sets the tightest stop, so the newer ones
            // collect less; they are handed to the merge newest first.
            let mut part_runs = Vec::new();
            for r in self.parts[i].runs.iter().rev() {
                let mut out = Vec::new();
                // Nothing past the cutoff is handed out by this batch: stop there.
                let c = cutoff.clone();
                let (lo, hi) = clip(forward, lo, hi, c.as_deref());
                let stop = if forward {
                    r.tables.collect_range(lo, hi, max, &mut out)?
                } else {
                    r.tables.collect_range_rev(lo, hi, max, &mut out)?
                };
                if let Some(s) = stop {
                    let tighter =
                        cutoff
                            .as_deref()
                            .is_none_or(|c| if forward { *s < *c } else { *s > *c });
                    if tighter {
                        *cutoff = Some(s);
                    }
                }
                if !out.is_empty() {
                    part_runs.push(out);
                }
            }
            runs.extend(part_runs.into_iter().rev());
        }
        Ok(())
    }
}
