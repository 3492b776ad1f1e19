//! The slow tier in the manifest (issue #14; drawn in docs/formats.md §7.3): which
//! files make up which runs of which key-range partitions, and the `Slow` edit that
//! changes them.
//!
//! A `Slow` edit is written for every slow-tier change: a demotion (stable LSTs leave
//! the pool for new runs, and the separated values they pointed into die), a merge of
//! runs in one partition, or a split. It names whole partitions: each listed partition
//! is replaced by the listed runs (or removed), so applying it never depends on the
//! order of runs inside a partition the edit did not list.

use std::collections::BTreeMap;

use crate::table::LstMeta;
use crate::vlog::SegmentDead;

/// One slow-tier file as a run of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMeta {
    /// File number (`NNNNNNNNNNNN.sst` in the slow directory).
    pub file: u64,
    /// Compaction weight.
    pub weight: u32,
    /// The filter section: offset in the file and bytes (0: none).
    pub filters: (u64, u64),
    /// The file's tables in key order (`base` = offset in the file; no value segments).
    pub lsts: Vec<LstMeta>,
}

/// The slow tier's part of the manifest state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlowState {
    /// Next file number to hand out (at least 1 + every number named).
    pub next_file: u64,
    /// Partitions by lower bound (inclusive), each its runs newest first.
    pub parts: BTreeMap<Box<[u8]>, Vec<RunMeta>>,
}

impl SlowState {
    /// True for a store that never used the slow tier.
    pub fn is_empty(&self) -> bool {
        self.next_file == 0 && self.parts.is_empty()
    }

    /// Every slow-tier table.
    pub fn lsts(&self) -> impl Iterator<Item = &LstMeta> {
        self.parts.values().flatten().flat_map(|r| r.lsts.iter())
    }

    /// Every file number named.
    pub fn files(&self) -> impl Iterator<Item = u64> + '_ {
        self.parts.values().flatten().map(|r| r.file)
    }
}

/// A partition an edit replaces: its lower bound, and its runs newest first (`None`:
/// the partition is removed).
pub type PartEdit = (Box<[u8]>, Option<Vec<RunMeta>>);

/// A slow-tier change (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowEdit {
    /// Stable LSTs that left the fast tier (ids).
    pub removed: Vec<u64>,
    /// Stable LSTs added: the entries a demotion kept in the fast tier (issue #15).
    pub added: Vec<LstMeta>,
    /// Separated value bytes that died in the pool, by retained segment.
    pub dead: Vec<SegmentDead>,
    /// Retained segments no table references any more (first chunks).
    pub released: Vec<u64>,
    /// Partitions replaced: lower bound, and its runs newest first (`None`: removed).
    pub parts: Vec<PartEdit>,
    /// The slow tier's next file number after this change.
    pub next_file: u64,
}

impl SlowState {
    /// Applies the slow-tier half of `e` (the caller applies removals and dead bytes).
    pub fn apply(&mut self, e: &SlowEdit) {
        for (lo, runs) in &e.parts {
            match runs {
                Some(r) => {
                    self.parts.insert(lo.clone(), r.clone());
                }
                None => {
                    self.parts.remove(lo);
                }
            }
        }
        self.next_file = self.next_file.max(e.next_file);
    }
}
