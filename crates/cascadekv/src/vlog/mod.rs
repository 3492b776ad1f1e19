//! The value log: where key-value-separated values live and how their space is
//! accounted (FluidKV §4.2 "KV separation"; FlatStore §3.4 and WiscKey for cleaning).
//!
//! A value larger than `Options::inline_threshold` is written once, in its record of a
//! thread-exclusive log, and every stage refers to it by a [`ValuePtr`] (record address
//! and value length) instead of copying it: the FastStore index, then the LSTs a flush
//! and later compactions write. When a FastStore is flushed, the log segments holding
//! values its tables point at are *retained* — kept after the rest of the generation's
//! logs are freed — and tracked here:
//!
//! * [`read`] — turns a pointer into bytes, verifying the record (checksum seeded with
//!   the segment's epoch, key, length), so a damaged or stale record is an error, never
//!   a value.
//! * [`segments`] — [`RetainedSegments`]: per retained segment its span and live value
//!   bytes; flushes add live bytes, compactions subtract the bytes of versions they
//!   drop. The manifest persists it with every edit.
//!
//! Thread-safety: `read` may be called from any thread for a pointer reached through a
//! stage set the caller holds (the segment cannot be freed while that set is alive).
//! [`RetainedSegments`] is plain data; the manifest's lock guards the live copy.

pub(crate) mod cleaner;
mod read;
mod relocate;
mod segment;
pub(crate) mod segments;

pub(crate) use read::{prefetch, read, read_into};
pub(crate) use relocate::Relocator;
pub(crate) use segment::{Segment, SegmentMap};
pub(crate) use segments::{LiveTally, RetainedSegments, SegmentDead, SegmentLive};
