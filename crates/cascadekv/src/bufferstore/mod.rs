//! BufferStore (FluidKV §4.4): the buffer-trees between FastStore and StableStore.
//!
//! A flush turns one frozen FastStore into Logical Sorted Tables and one *buffer-tree*
//! — a small DRAM index from table key range to table ([`TableSet`]) — so the
//! FastStore's per-key DRAM index can be dropped right away ([`build`]). Buffer-trees
//! are read newest first and merged into StableStore by compaction once there are
//! enough of them (the threshold follows the read:write mix, see `db::load`).
//!
//! Thread-safety: a `BufferTree` is immutable and shared by `Arc`; building one reads
//! a frozen FastStore (no writer can still add to it) and writes only fresh chunks.

mod build;

pub(crate) use build::build;

use crate::table::TableSet;

/// One flushed FastStore generation.
#[derive(Debug, Clone)]
pub(crate) struct BufferTree {
    /// Manifest sequence number (higher = newer).
    pub seq: u64,
    /// Its tables.
    pub tables: TableSet,
}
