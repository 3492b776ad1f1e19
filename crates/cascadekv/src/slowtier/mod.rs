//! The slow (capacity) tier: sorted table files on an ordinary SSD directory under the
//! pool (LightKV §III, issue #14). StableStore keeps at most `Options::fast_budget`
//! bytes of tables in the pool; past that, key ranges are *demoted* into slow-tier
//! files, where partition-based compaction keeps write amplification flat.
//!
//! * [`file`] — one table file: written once, sealed (fsync, rename, fsync dir),
//!   reference-counted, unlinked when obsolete; orphans swept at open.
//! * [`direct`] — `O_DIRECT` reads for gets (`Options::slow_direct_reads`).
//! * [`writer`] — writes one run (a file of LSTs with the slow tier's block unit).
//! * [`tier`] — the tier as readers see it: partitions of runs, one index across
//!   media for point reads, scans.
//! * [`compact`] — demotion, partition merges and splits.
//! * [`keep`] — the entries a demotion keeps in the pool (popularity pinning, #15).
//!
//! The job glue (manifest edit, installing the next stage set, retiring inputs) is
//! `db/slow.rs`; the manifest part is `manifest/slow.rs`; the format is formats.md §13.

pub(crate) mod compact;
pub(crate) mod direct;
pub(crate) mod file;
pub(crate) mod filters;
pub(crate) mod keep;
pub(crate) mod open;
pub(crate) mod tier;
pub(crate) mod writer;

pub use file::SlowFile;
pub(crate) use tier::{Partition, SlowTier};
