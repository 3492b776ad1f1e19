//! [`Relocator`]: moves live values out of victim segments while a compaction rewrites
//! the tables that point at them (the copying half of log cleaning).
//!
//! Design (see docs/design.md, "Log cleaning"): FlatStore §3.4 copies live log entries
//! to a new chunk and repoints the in-memory index with a compare-and-swap; here the
//! pointers to a value live in immutable tables, so — as RocksDB's BlobDB does during
//! compaction — the pointer is changed by rewriting the table: the compaction that
//! rewrites a table entry whose value lies in a victim reads the record (verifying it),
//! appends key and value to a fresh value segment (chunk kind `Value`), and writes the
//! new pointer into the new table. The victim loses those bytes in the accounting and
//! is freed once no table holds it and no reader references it (`segment.rs`).
//!
//! Crash safety: the new value segments and the new tables are made durable before the
//! compaction's manifest edit names the tables; a crash before the edit leaves value
//! chunks no table points into, which recovery frees. The victims are released only
//! after the edit, through their holders.
//!
//! Thread-safety: one relocator per merge thread; its segments are written only by it.

use std::sync::Arc;

use super::segments::LiveTally;
use super::{read, Segment, SegmentLive};
use crate::error::Result;
use crate::log::record::{value_len, Kind, RecordIn};
use crate::log::LogWriter;
use crate::pmem::{AllocClass, ChunkKind, Pool};
use crate::value::ValuePtr;

/// Appends moved values to fresh value segments.
#[derive(Debug)]
pub(crate) struct Relocator {
    pool: Arc<Pool>,
    writer: Option<LogWriter>,
    tally: LiveTally,
    moved_bytes: u64,
}

impl Relocator {
    /// A relocator writing into `pool`.
    pub fn new(pool: Arc<Pool>) -> Self {
        Relocator {
            pool,
            writer: None,
            tally: LiveTally::default(),
            moved_bytes: 0,
        }
    }

    /// Moves the value of `key` at `from` (verified on the way) and returns its new
    /// pointer and the segment it now lies in.
    pub fn relocate(&mut self, key: &[u8], from: ValuePtr) -> Result<(ValuePtr, Arc<Segment>)> {
        let value = read(&self.pool, key, from)?;
        let pool = self.pool.clone();
        let w = self
            .writer
            .get_or_insert_with(|| LogWriter::with_kind(pool, 0, ChunkKind::Value));
        let addr = w.append(
            &RecordIn {
                kind: Kind::Put,
                lsn: 0,
                in_batch: false,
                key,
                value: &value,
            },
            AllocClass::Upkeep,
        )?;
        let seg =
            w.segments().last().cloned().ok_or_else(|| {
                crate::Error::Internal("value segment missing after append".into())
            })?;
        let to = ValuePtr {
            addr,
            len: value_len(&value),
        };
        self.tally.note(&seg, key.len(), to);
        self.moved_bytes += u64::from(to.len);
        Ok((to, seg))
    }

    /// Makes every moved value durable.
    pub fn sync(&mut self) -> Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.sync(),
            None => Ok(()),
        }
    }

    /// The new segments with the bytes moved into each.
    pub fn created(&self) -> Vec<SegmentLive> {
        self.tally.finish()
    }

    /// Value bytes moved.
    pub fn moved_bytes(&self) -> u64 {
        self.moved_bytes
    }
}

impl Drop for Relocator {
    fn drop(&mut self) {
        // The writer's own holder goes; the tables that point into the segments hold
        // them from here on (or, if the compaction failed, nothing does and they are
        // freed).
        if let Some(w) = &self.writer {
            for s in w.segments() {
                s.release();
            }
        }
    }
}
