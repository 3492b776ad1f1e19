//! [`TableWriter`]: places built LSTs into table chunks and makes them durable.
//!
//! A writer owns the table chunk it is filling until it moves to the next one, so it
//! is the only thread writing those bytes (the seam's ownership rule, `pmem/persist.rs`).
//! LSTs it places are not durable until [`TableWriter::sync`]; flush and compaction
//! sync before the manifest edit that makes the tables reachable.
//!
//! Thread-safety: a writer is owned by one flush or compaction thread.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use super::{BuiltLst, Lst, Place, TableChunk};
use crate::error::{Error, Result};
use crate::pmem::{AllocClass, ChunkKind, Pool, WritebackSet, CHUNK_HEADER_LEN};
use crate::vlog::SegmentMap;

/// Places built LSTs into table chunks.
#[derive(Debug)]
pub struct TableWriter {
    pool: Arc<Pool>,
    cur: Option<(Arc<TableChunk>, u64, u64)>,
    set: WritebackSet,
    written: u64,
}

impl TableWriter {
    /// A writer on `pool`.
    pub fn new(pool: Arc<Pool>) -> Self {
        TableWriter {
            pool,
            cur: None,
            set: WritebackSet::new(),
            written: 0,
        }
    }

    /// Table bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Writes `b` into a table chunk (allocating one when needed) and returns the
    /// handle, holding the value segments (from `segs`) its entries point into. Not
    /// durable until [`TableWriter::sync`].
    ///
    /// # Errors
    /// `Corruption` if an entry points outside every segment in `segs` (a damaged
    /// pointer that passed its checksum cannot happen; this guards the invariant).
    /// `PoolFull` and `Io` from allocating and writing.
    pub fn place(&mut self, b: BuiltLst, segs: &SegmentMap) -> Result<Arc<Lst>> {
        // A flush or compaction thread re-checks its CPU priority once per table.
        crate::priority::checkpoint();
        let mut values = Vec::with_capacity(b.values.len());
        for c in &b.values {
            let s = segs.get(*c).ok_or_else(|| {
                Error::corruption(
                    self.pool.path(),
                    self.pool.chunk_offset(*c),
                    format!(
                        "table {} points into chunk {c}, which is no value segment",
                        b.id
                    ),
                )
            })?;
            values.push(s.clone());
        }
        let need = b.bytes.len() as u64;
        let fits = self
            .cur
            .as_ref()
            .is_some_and(|(_, pos, end)| pos + need <= *end);
        if !fits {
            let cs = self.pool.chunk_size();
            let span = (CHUNK_HEADER_LEN + need).div_ceil(cs).max(1);
            let (a, _) =
                self.pool
                    .alloc_chunk(ChunkKind::Table, span, None, 0, 0, AllocClass::Upkeep)?;
            let tc = Arc::new(TableChunk {
                pool: self.pool.clone(),
                chunk: a.chunk,
                span: a.span,
                live: AtomicUsize::new(0),
            });
            let base = self.pool.chunk_offset(a.chunk);
            self.cur = Some((tc, base + CHUNK_HEADER_LEN, base + a.span * cs));
        }
        let Some((tc, pos, _)) = self.cur.as_mut() else {
            return Err(Error::Internal("no table chunk".into()));
        };
        let base = *pos;
        self.pool.mem().write(base, &b.bytes)?;
        self.pool.mem().write_back(&mut self.set, base, need);
        *pos += need;
        self.written += need;
        Ok(Lst::placed(b, base, Place::Pool(tc.clone()), values))
    }

    /// Makes every placed LST durable.
    pub fn sync(&mut self) -> Result<()> {
        self.pool.mem().fence(&mut self.set)
    }

    #[cfg(test)]
    /// Gives up the current chunk (further LSTs go to a new one).
    pub fn close_chunk(&mut self) {
        self.cur = None;
    }
}
