//! Reading and damaging a store's pool file from outside the engine, as an operator's
//! tool or a failing disk would, using only the on-media format of docs/formats.md:
//! the pool header (chunk size at offset 24, chunk count at 32, header-region chunks
//! at 40), the double-buffered chunk bitmap at offset 4096, and chunk headers.
//!
//! Writes go through the file (`pwrite`); the engine maps the same file shared, so an
//! open store sees them at once, like bytes that went bad under it.

#![allow(dead_code)] // each test file uses a different part

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use cascadekv::internals::{crc32c, ChunkHeader};

/// Chunk kinds as chunk headers store them (docs/formats.md).
pub const KIND_LOG: u8 = 1;
/// Table chunks.
pub const KIND_TABLE: u8 = 2;
/// Manifest chunks.
pub const KIND_MANIFEST: u8 = 3;

/// A snapshot of a pool file.
pub struct PoolFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its bytes when read.
    pub bytes: Vec<u8>,
    /// Chunk size from the header.
    pub chunk_size: u64,
    /// Chunks in the pool.
    pub chunk_count: u64,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap_or([0; 8]))
}

impl PoolFile {
    /// Reads the pool file of the store in `dir`.
    pub fn read(dir: &Path) -> PoolFile {
        let path = dir.join("pool");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"));
        let chunk_size = u64_at(&bytes, 24);
        let chunk_count = u64_at(&bytes, 32);
        PoolFile {
            path,
            bytes,
            chunk_size,
            chunk_count,
        }
    }

    /// The chunk bitmap of the newest valid copy (bit set = allocated).
    pub fn bitmap(&self) -> Vec<u8> {
        let len = self.chunk_count.div_ceil(8) as usize;
        let copy = (20 + len as u64).div_ceil(64) * 64;
        let mut best: Option<(u64, Vec<u8>)> = None;
        for i in 0..2u64 {
            let off = (4096 + i * copy) as usize;
            let b = &self.bytes[off..off + 20 + len];
            let gen = u64_at(b, 0);
            let ok = u32_at(b, 12) as usize == len && u32_at(b, 16 + len) == crc32c(&b[..16 + len]);
            if ok && best.as_ref().is_none_or(|(g, _)| gen > *g) {
                best = Some((gen, b[16..16 + len].to_vec()));
            }
        }
        best.map(|(_, b)| b).unwrap_or_default()
    }

    /// First chunks of allocated chunks of `kind` (by their chunk header).
    pub fn chunks_of_kind(&self, kind: u8) -> Vec<u64> {
        let bits = self.bitmap();
        let allocated = |c: u64| {
            bits.get((c / 8) as usize)
                .is_some_and(|b| b & (1 << (c % 8)) != 0)
        };
        (0..self.chunk_count)
            .filter(|c| allocated(*c))
            .filter(|c| {
                let off = (c * self.chunk_size) as usize;
                self.bytes
                    .get(off..off + 64)
                    .and_then(ChunkHeader::decode)
                    .is_some_and(|h| h.kind as u8 == kind)
            })
            .collect()
    }

    /// Byte offset of chunk `c`.
    pub fn chunk_offset(&self, c: u64) -> u64 {
        c * self.chunk_size
    }

    /// Offset of the first occurrence of `pat` at or after `from`.
    pub fn find(&self, pat: &[u8], from: usize) -> Option<usize> {
        self.bytes[from..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map(|p| p + from)
    }
}

/// XORs `mask` into the byte at `off` of the file at `path` (through the file, so a
/// store that has it mapped sees the change).
pub fn xor_byte(path: &Path, off: u64, mask: u8) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening {path:?}: {e}"));
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off)
        .unwrap_or_else(|e| panic!("reading {path:?}@{off}: {e}"));
    b[0] ^= mask;
    f.write_all_at(&b, off)
        .unwrap_or_else(|e| panic!("writing {path:?}@{off}: {e}"));
}
