//! [`TableSet`]: non-overlapping Logical Sorted Tables ordered by key, indexed by a
//! DRAM array of the tables in order of their smallest keys (FluidKV §4.3's table
//! index). A point lookup costs one binary search of the array,
//! one of the table's DRAM index copy (`fences.rs`) and one data block read; DRAM is
//! one entry per table plus one first key per data block, not per key.
//!
//! It is the structure of both later stages: each BufferStore buffer-tree is one set
//! (one flushed FastStore), and StableStore is one set (FluidKV: "structurally identical
//! to StableStore").
//!
//! Thread-safety: a `TableSet` is immutable once built and shared by `Arc`; a change
//! (compaction) builds a new one.

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::table::slices::Slices;
use crate::table::Lst;
use crate::value::{Value, ValueRef};

/// Non-overlapping LSTs ordered by key.
#[derive(Debug, Default, Clone)]
pub struct TableSet {
    /// The tables ordered by smallest key: lookups and range starts are one binary
    /// search over a contiguous array (`perf`: a `BTreeMap` range descent was ~9 % of
    /// a get). Built once; the set is immutable.
    sorted: Vec<Arc<Lst>>,
    /// The tables' smallest keys as integers after their common prefix
    /// (`slices.rs`): most comparisons of the search are one integer compare.
    slices: Slices,
    entries: u64,
    bytes: u64,
}

/// Fixed DRAM estimate per table in a set (`Lst`, `Arc`, its place in the sorted array
/// and its key prefix).
const TABLE_OVERHEAD: u64 = 176;

impl TableSet {
    /// A set of `lsts` (must not overlap).
    pub fn new(lsts: impl IntoIterator<Item = Arc<Lst>>) -> Self {
        let mut sorted: Vec<Arc<Lst>> = lsts.into_iter().collect();
        sorted.sort_by(|a, b| a.min_key.cmp(&b.min_key));
        TableSet {
            slices: Slices::new(sorted.iter().map(|l| &*l.min_key)),
            entries: sorted.iter().map(|l| u64::from(l.entries)).sum(),
            bytes: sorted.iter().map(|l| u64::from(l.size)).sum(),
            sorted,
        }
    }

    /// A copy without the tables whose ids are in `remove`, plus `add`.
    pub fn replace(
        &self,
        remove: &std::collections::HashSet<u64>,
        add: impl IntoIterator<Item = Arc<Lst>>,
    ) -> Self {
        TableSet::new(
            self.sorted
                .iter()
                .filter(|l| !remove.contains(&l.id))
                .cloned()
                .chain(add),
        )
    }

    /// The tables overlapping `[lo, hi]` (a contiguous slice: the set's tables do
    /// not overlap each other).
    pub fn overlapping(&self, lo: &[u8], hi: &[u8]) -> &[Arc<Lst>] {
        let from = self.sorted.partition_point(|l| &*l.max_key < lo);
        let to = self.sorted.partition_point(|l| &*l.min_key <= hi);
        self.sorted.get(from..to.max(from)).unwrap_or(&[])
    }

    /// Number of tables.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Entries in all tables (tombstones and shadowed versions included).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Table bytes on the fast tier.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Estimated DRAM of the index.
    pub fn dram_bytes(&self) -> u64 {
        self.sorted
            .iter()
            .map(|l| {
                TABLE_OVERHEAD + (l.min_key.len() + l.max_key.len()) as u64 + l.lookup_dram_bytes()
            })
            .sum()
    }

    /// Tables in key order.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<Lst>> {
        self.sorted.iter()
    }

    /// Number of tables whose smallest key is `<= key` (`< key` unless `inclusive`).
    fn count_upto(&self, key: &[u8], inclusive: bool) -> usize {
        let pfx = || {
            self.sorted
                .first()
                .and_then(|l| l.min_key.get(..self.slices.prefix_len()))
                .unwrap_or(&[])
        };
        self.slices
            .count_below(pfx, key, inclusive, |i| &self.sorted[i].min_key)
    }

    /// The table whose range may hold `key`.
    fn table_for(&self, key: &[u8]) -> Option<&Arc<Lst>> {
        self.sorted.get(self.count_upto(key, true).checked_sub(1)?)
    }

    /// False only if no table can hold `key` (outside every range, or its Bloom
    /// filter says no).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.table_for(key)
            .is_some_and(|l| key <= &*l.max_key && l.may_contain(key))
    }

    /// Looks `key` up (Algorithm 2: scan the index for the LST, search the LST) and
    /// calls `f` with its value borrowed ([`Lst::get_with`]).
    pub fn get_with<R>(
        &self,
        key: &[u8],
        filtered: bool,
        f: impl FnOnce(ValueRef<'_>) -> R,
    ) -> Result<Option<R>> {
        match self.table_for(key) {
            Some(l) => l.get_with(key, filtered, f),
            None => Ok(None),
        }
    }

    /// Appends up to `max` entries in `(lo, hi)` to `out`; returns the last key
    /// visited if it stopped because of `max`.
    pub fn collect_range(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Value)>,
    ) -> Result<Option<Box<[u8]>>> {
        let start_key: Option<&[u8]> = match lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
            Bound::Unbounded => None,
        };
        // The table holding the start key (if any), then every table after it.
        let first = start_key.map_or(0, |k| self.count_upto(k, true).saturating_sub(1));
        let iter = self.sorted.get(first..).unwrap_or(&[]).iter();
        let mut visited = 0;
        let mut last: Option<Box<[u8]>> = None;
        let mut stop = false;
        for l in iter {
            if past(hi, &l.min_key) {
                break;
            }
            l.scan_from(start_key, |k, v| {
                if !inside_lo(lo, k) {
                    return true;
                }
                if past(hi, k) {
                    stop = true;
                    return false;
                }
                visited += 1;
                out.push((k.into(), v.to_owned_value()));
                if visited >= max {
                    last = Some(k.into());
                    stop = true;
                    return false;
                }
                true
            })?;
            if stop {
                break;
            }
        }
        Ok(last)
    }

    /// Like [`TableSet::collect_range`] in descending key order: appends up to `max`
    /// entries in `(lo, hi)` from the top; returns the last (smallest) key visited if
    /// it stopped because of `max`.
    pub fn collect_range_rev(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        max: usize,
        out: &mut Vec<(Box<[u8]>, Value)>,
    ) -> Result<Option<Box<[u8]>>> {
        let (hi_key, exclusive) = match hi {
            Bound::Included(k) => (Some(k), false),
            Bound::Excluded(k) => (Some(k), true),
            Bound::Unbounded => (None, false),
        };
        // Tables whose smallest key is inside `hi`, from the top.
        let inside = match hi {
            Bound::Included(k) => self.count_upto(k, true),
            Bound::Excluded(k) => self.count_upto(k, false),
            Bound::Unbounded => self.sorted.len(),
        };
        let tables = self.sorted.get(..inside).unwrap_or(&[]).iter().rev();
        let mut visited = 0;
        let mut last: Option<Box<[u8]>> = None;
        let mut stop = false;
        for l in tables {
            if !inside_lo(lo, &l.max_key) {
                break;
            }
            l.scan_rev(hi_key, exclusive, |k, v| {
                if !inside_lo(lo, k) {
                    stop = true;
                    return false;
                }
                visited += 1;
                out.push((k.into(), v.to_owned_value()));
                if visited >= max {
                    last = Some(k.into());
                    stop = true;
                    return false;
                }
                true
            })?;
            if stop {
                break;
            }
        }
        Ok(last)
    }
}

fn inside_lo(lo: Bound<&[u8]>, k: &[u8]) -> bool {
    match lo {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    }
}

fn past(hi: Bound<&[u8]>, k: &[u8]) -> bool {
    match hi {
        Bound::Included(h) => k > h,
        Bound::Excluded(h) => k >= h,
        Bound::Unbounded => false,
    }
}
