//! BufferStore (FluidKV §4.4): the buffer-trees between FastStore and StableStore.
//!
//! Each flush turns one immutable FastStore into LSTs and one *buffer-tree* — a small
//! DRAM index from table key range to table ([`TableSet`]) — so the FastStore's
//! per-key DRAM index can be freed right away. Buffer-trees are read newest first and
//! merged into StableStore by compaction once there are enough of them (the threshold
//! follows the read:write mix, see `db::load`).
//!
//! Thread-safety: a `BufferTree` is immutable and shared by `Arc`.

use crate::stablestore::TableSet;

/// One flushed FastStore generation.
#[derive(Debug, Clone)]
pub struct BufferTree {
    /// Manifest sequence number (higher = newer).
    pub seq: u64,
    /// The FastStore generation it came from.
    pub generation: u64,
    /// Its tables.
    pub tables: TableSet,
}
