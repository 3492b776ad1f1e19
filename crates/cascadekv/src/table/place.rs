//! Where an LST's bytes live: a table allocation in the pool (the fast tier), or a
//! slow-tier file (`slowtier/file.rs`, issue #14). Both count the live tables they
//! hold and give their space back when the last reference goes with none live.
//!
//! A pool table is read in place from the mapping; a file table is read with one
//! `pread` per block into a caller's buffer. A slow-tier table's `Separated` entries
//! name a *blob* in the same file (a value too large for a block) instead of a log
//! record in the pool: see [`BLOB_HEADER`].
//!
//! Thread-safety: immutable but for the atomic live counts.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::coding::{crc32c, crc32c_extend, get_u32, put_u32};
use crate::error::{Error, Result};
use crate::pmem::Pool;
use crate::slowtier::SlowFile;
use crate::value::ValuePtr;

/// An allocation of table chunks and the number of live LSTs in it.
#[derive(Debug)]
pub struct TableChunk {
    pub(super) pool: Arc<Pool>,
    pub(super) chunk: u64,
    pub(super) span: u64,
    pub(super) live: AtomicUsize,
}

impl TableChunk {
    /// A chunk found at recovery.
    pub fn recovered(pool: Arc<Pool>, chunk: u64, span: u64) -> Arc<Self> {
        Arc::new(TableChunk {
            pool,
            chunk,
            span,
            live: AtomicUsize::new(0),
        })
    }
}

impl Drop for TableChunk {
    fn drop(&mut self) {
        if self.live.load(Ordering::Acquire) == 0 {
            // Freed in the pool's next batch (a reader dropping the last reference
            // does not persist the bitmap itself).
            self.pool.release(self.chunk, self.span);
        }
    }
}

/// Bytes before a blob's value in a slow-tier file: `crc u32 | len u32`, the crc being
/// `crc32c(file_number_le8 ‖ len_le4 ‖ value)` (formats.md §13.2).
pub const BLOB_HEADER: usize = 8;

/// Where a table lies.
#[derive(Debug, Clone)]
pub enum Place {
    /// In a pool table allocation.
    Pool(Arc<TableChunk>),
    /// In a slow-tier file.
    File(Arc<SlowFile>),
}

/// Why a table is read, for the slow tier's choice of descriptor
/// (`slowtier/file.rs`: point reads may bypass the page cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// One block or value for a get.
    Point,
    /// A pass over many blocks (scan, merge, check).
    Bulk,
}

impl Place {
    /// The file errors name.
    pub fn path(&self) -> &Path {
        match self {
            Place::Pool(c) => c.pool.path(),
            Place::File(f) => f.path(),
        }
    }

    /// Asks the CPU to load the lines of `[at, at + len)` of a pool table (a file
    /// table: nothing). A get whose block needs no checksum prefetches the whole block
    /// so the lines its search visits arrive together, not one dependent miss each.
    pub fn prefetch(&self, at: u64, len: u64) {
        if let Place::Pool(c) = self {
            c.pool.mem().prefetch(at, len);
        }
    }

    /// `len` bytes at `at` (a pool address, or a file offset): borrowed from the
    /// mapping, or read into `buf`.
    pub fn read<'b>(
        &'b self,
        at: u64,
        len: u64,
        buf: &'b mut Vec<u8>,
        how: Access,
    ) -> Result<&'b [u8]> {
        match self {
            Place::Pool(c) => c.pool.mem().read(at, len),
            Place::File(f) => {
                let len = usize::try_from(len)
                    .map_err(|_| Error::corruption(f.path(), at, "block length out of range"))?;
                match how {
                    Access::Point => f.read_point_into(at, len, buf),
                    Access::Bulk => f.read_into(at, len, buf),
                }
            }
        }
    }

    /// Counts one more live table here.
    pub fn add_live(&self) {
        match self {
            Place::Pool(c) => {
                c.live.fetch_add(1, Ordering::AcqRel);
            }
            Place::File(f) => f.add_live(),
        }
    }

    /// Counts one live table fewer.
    pub fn sub_live(&self) {
        match self {
            Place::Pool(c) => {
                c.live.fetch_sub(1, Ordering::AcqRel);
            }
            Place::File(f) => f.sub_live(),
        }
    }

    /// First chunk and span of a pool table's allocation.
    pub fn table_chunk(&self) -> Option<(u64, u64)> {
        match self {
            Place::Pool(c) => Some((c.chunk, c.span)),
            Place::File(_) => None,
        }
    }

    /// Reads and verifies the blob `p` names in a slow-tier file into `buf`.
    pub fn read_blob<'b>(
        &self,
        p: ValuePtr,
        buf: &'b mut Vec<u8>,
        how: Access,
    ) -> Result<&'b [u8]> {
        let Place::File(f) = self else {
            return Err(Error::Internal("a blob read on a pool table".into()));
        };
        let len = p.len as usize;
        if how == Access::Point && f.reads_direct() {
            // The record sits inside an aligned window: copy it to the front.
            let mut win = Vec::new();
            let rec = f.read_point_into(p.addr, BLOB_HEADER + len, &mut win)?;
            buf.clear();
            buf.extend_from_slice(rec);
        } else {
            f.read_into(p.addr, BLOB_HEADER + len, buf)?;
        }
        let stored = get_u32(buf, 0).unwrap_or(0);
        let actual = blob_crc(f.number(), &buf[4..]);
        if get_u32(buf, 4) != Some(p.len) {
            return Err(Error::corruption(
                f.path(),
                p.addr,
                "blob length differs from its table entry",
            ));
        }
        if stored != actual {
            return Err(Error::ChecksumMismatch {
                file: f.path().to_path_buf(),
                offset: p.addr,
                expected: stored,
                actual,
            });
        }
        Ok(&buf[BLOB_HEADER..])
    }
}

/// The checksum of a blob whose length field and value are `len_and_value`.
fn blob_crc(file_number: u64, len_and_value: &[u8]) -> u32 {
    crc32c_extend(crc32c(&file_number.to_le_bytes()), len_and_value)
}

/// Encodes the blob of `value` for file `file_number`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "values are at most MAX_VALUE_LEN (< 2^27) bytes"
)]
pub fn encode_blob(file_number: u64, value: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.resize(BLOB_HEADER, 0);
    put_u32(out, 4, value.len() as u32);
    out.extend_from_slice(value);
    let crc = blob_crc(file_number, &out[4..]);
    put_u32(out, 0, crc);
}
