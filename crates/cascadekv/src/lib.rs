//! CascadeKV: a persistent key-value engine for ultra-fast storage.
//!
//! Writes land in a thread-exclusive log on a memory-mapped fast-tier pool and in a
//! concurrent in-DRAM ordered index (FluidKV's FastStore). See the README for the
//! architecture and the guarantees table, and `docs/formats.md` for every byte on
//! media.
//!
//! ```no_run
//! use cascadekv::{Db, Durability, Options};
//! # fn main() -> cascadekv::Result<()> {
//! let db = Db::open("/tmp/my-store", Options::default())?;
//! db.put_with(b"hello", b"world", Durability::Sync)?;
//! assert_eq!(db.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! for kv in db.iter(..)? {
//!     let (k, v) = kv?;
//!     println!("{:?} = {:?}", k, v);
//! }
//! db.close()?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod bufferstore;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod error;
pub mod faststore;
pub mod log;
pub mod manifest;
pub mod pmem;
pub mod snapshot;
pub mod stablestore;
pub mod table;

pub use db::{BatchOp, Db, DbIter, Durability, Options, RecoveryInfo, Stats, WriteBatch};
pub use error::{Error, Result};
