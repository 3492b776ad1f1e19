//! CascadeKV: a persistent key-value engine for ultra-fast storage.
//!
//! Writes land in a thread-exclusive log on a memory-mapped fast-tier pool and in a
//! concurrent in-DRAM ordered index (FluidKV's FastStore); full FastStores are flushed
//! into Logical Sorted Tables indexed by small buffer-trees (BufferStore), which are
//! compacted into one StableStore. See the README for the architecture and the
//! guarantees table, `docs/design.md` for the invariants and `docs/formats.md` for every
//! byte on media.
//!
//! The public surface is [`Db`] and what its methods take and return: [`Options`],
//! [`Durability`], [`WriteBatch`], [`Snapshot`], [`DbIter`], [`Stats`],
//! [`RecoveryInfo`], [`Error`]. [`SimDevice`] is a simulated persistent-memory device for
//! crash tests ([`Options::sim_device`]).
//!
//! ```no_run
//! use cascadekv::{Db, Durability, Options};
//! # fn main() -> cascadekv::Result<()> {
//! let db = Db::open("/tmp/my-store", Options::default())?;
//! db.put_with(b"hello", b"world", Durability::Sync)?;
//! assert_eq!(db.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! let snap = db.snapshot()?;
//! db.put(b"hello", b"again")?;
//! assert_eq!(snap.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! for kv in db.iter(..)? {
//!     let (k, v) = kv?;
//!     println!("{:?} = {:?}", k, v);
//! }
//! db.close()?;
//! # Ok(()) }
//! ```

#![deny(
    missing_docs,
    unsafe_op_in_unsafe_fn,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]
// Codecs and index code name bytes, positions, counts, keys and values `b`, `p`, `n`,
// `k`, `v`: the short names are the convention here, not an accident.
#![allow(clippy::many_single_char_names, clippy::similar_names)]

#[cfg(not(target_pointer_width = "64"))]
compile_error!("CascadeKV maps its pool with 64-bit offsets and needs a 64-bit target");

mod bufferstore;
mod coding;
mod compaction;
mod db;
mod epoch;
mod error;
mod faststore;
pub mod integrity;
mod log;
mod manifest;
mod placement;
mod pmem;
mod priority;
mod slowtier;
mod stablestore;
mod stages;
mod table;
mod value;
mod vlog;

pub use db::{
    BatchOp, Db, DbIter, DemotionPolicy, Durability, Options, RecoveryInfo, Snapshot, Stats,
    WriteBatch,
};
pub use error::{Error, Result};
pub use faststore::set_thread_log_slot;
pub use pmem::sim::{CrashMode, FenceHook, SimDevice};

/// Decoders, encoders and the FastStore index, for the fuzz targets and the index
/// benchmark. Not part of the supported API: it may change in any release. Nothing in
/// it touches the pool; every function here is safe for any input.
#[doc(hidden)]
pub mod internals {
    /// CRC-32C as every checksum on media uses it.
    pub use crate::coding::{crc32c, crc32c_extend};
    /// The FastStore's ordered index and what it stores (index benchmark).
    pub use crate::epoch::Snapshots;
    /// The optimistic (OLC) ordered index alone (index benchmark).
    pub use crate::faststore::olc::Olc;
    /// The former B-link tree, no longer used by the engine: the index benchmark's
    /// baseline.
    pub use crate::faststore::tree::Tree as BLinkTree;
    pub use crate::faststore::{Index, PutOutcome, Val, Version};
    /// Values as the stages share them.
    pub use crate::value::{Value, ValuePtr, ValueRef};
    /// Log record encoding (fuzz target `log_record`).
    pub mod log_record {
        pub use crate::log::record::{decode, encode, encode_filler, Invalid, Kind, RecordIn};
    }
    /// Table block decoding (fuzz target `table_block`).
    pub mod table_block {
        pub use crate::table::block::{Block, BlockKind};
    }
    /// Manifest edit encoding (fuzz target `manifest_edit`).
    pub mod manifest_edit {
        pub use crate::manifest::{decode, encode};
    }
    /// Chunk header decoding (fuzz target `chunk_header`, tests that read a pool file).
    pub use crate::pmem::ChunkHeader;
    /// The sync journal's header and blocks (fuzz target `journal_block`).
    pub mod journal {
        pub use crate::pmem::journal::format::{
            block_size, decode_block, encode_block, scan_slot, Block, Header, Target, ALIGN,
            BLOCK_HEADER,
        };
    }
}
