//! CascadeKV: a persistent key-value engine for ultra-fast storage.
//!
//! Writes land in a thread-exclusive log on a memory-mapped fast-tier pool and in a
//! concurrent in-DRAM ordered index (FluidKV's FastStore). See the README for the
//! architecture and the guarantees table, and `docs/formats.md` for every byte on
//! media.

#![warn(missing_docs)]

pub mod coding;
pub mod error;
pub mod pmem;

pub use error::{Error, Result};
