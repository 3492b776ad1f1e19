//! StableStore (FluidKV §4.3): the last stage of the fast tier — one [`TableSet`] of
//! non-overlapping LSTs under one coarse DRAM index, holding the newest version of
//! every key that left the earlier stages. Tombstones are dropped on the way in unless
//! the slow tier below may hold the key. With a slow tier, StableStore keeps at most
//! the fast budget; demotion (`db/slow.rs`) moves key ranges beyond it down.
//!
//! Compaction ([`crate::compaction`]) is the only way in: it merges buffer-trees with
//! the stable tables they overlap and [`StableStore::with_compaction`] builds the next
//! StableStore from the previous one, its removed tables and its new ones.
//!
//! Thread-safety: immutable once built, shared by `Arc` inside a stage set.

use std::collections::HashSet;
use std::sync::Arc;

use crate::table::{Lst, TableSet};

/// The StableStore of one stage set.
#[derive(Debug, Default, Clone)]
pub(crate) struct StableStore {
    tables: TableSet,
}

impl StableStore {
    /// A StableStore holding `lsts` (must not overlap).
    pub fn new(lsts: impl IntoIterator<Item = Arc<Lst>>) -> Self {
        StableStore {
            tables: TableSet::new(lsts),
        }
    }

    /// The tables.
    pub fn tables(&self) -> &TableSet {
        &self.tables
    }

    /// The StableStore after a compaction removed the tables with ids in `removed` and
    /// added `added` (new or moved tables; they do not overlap what stays).
    pub fn with_compaction(
        &self,
        removed: &HashSet<u64>,
        added: impl IntoIterator<Item = Arc<Lst>>,
    ) -> Self {
        StableStore {
            tables: self.tables.replace(removed, added),
        }
    }
}
