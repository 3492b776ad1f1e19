//! Rebuilding a damaged pool header or bitmap — only in a copy-on-write mapping, only
//! for `cascade verify` and `cascade repair` (`Device::Private { rebuild: true }`); the
//! engine never opens a store through it.

use std::path::Path;

use super::alloc::{Allocator, BitmapGeometry};
use super::chunk::{ChunkHeader, CHUNK_HEADER_LEN};
use super::persist::Mem;
use super::pool::{encode_header, BITMAP_BASE, HEADER_LEN, MAGIC, MAX_CHUNK, MIN_CHUNK};
use crate::coding::{crc32c, get_u32, get_u64};
use crate::error::{Error, Result};

/// Rewrites, in `mem` (a copy-on-write mapping), a damaged pool header and/or
/// both damaged bitmap copies from what the chunks say. The chunk size is the
/// largest power of two at whose multiples the most valid chunk headers sit; every
/// chunk with a valid header counts as allocated (freed chunks keep theirs, which
/// recovery then meets as stale logs, tables or manifests and ignores).
pub(super) fn rebuild(mem: &Mem, path: &Path) -> Result<()> {
    let len = mem.len();
    let header_ok = check_header(mem.read(0, HEADER_LEN)?);
    let chunk_size = match header_ok {
        Some(cs) => cs,
        None => infer_chunk_size(mem, path)?,
    };
    let chunk_count = len / chunk_size;
    let bgeo = BitmapGeometry::new(BITMAP_BASE, chunk_count);
    let reserved = bgeo.end().div_ceil(chunk_size);
    if header_ok.is_none() {
        mem.write(0, &encode_header(chunk_count, chunk_size, reserved)?)?;
    }
    if Allocator::load(mem, bgeo, chunk_size, path).is_err() {
        let mut runs = Vec::new();
        let mut max_epoch = 0;
        let mut c = reserved;
        while c < chunk_count {
            match ChunkHeader::decode(mem.read(c * chunk_size, CHUNK_HEADER_LEN)?) {
                Some(h) => {
                    let span = u64::from(h.span).max(1);
                    runs.push((c, span));
                    max_epoch = max_epoch.max(h.epoch);
                    c += span;
                }
                None => c += 1,
            }
        }
        Allocator::rebuild(mem, bgeo, chunk_size, reserved, &runs, max_epoch)?;
    }
    Ok(())
}

/// The chunk size a pool header states, if the header is intact.
fn check_header(h: &[u8]) -> Option<u64> {
    (h.get(0..8)? == MAGIC && get_u32(h, 60)? == crc32c(h.get(0..60)?))
        .then(|| get_u64(h, 24))
        .flatten()
}

/// The chunk size at whose multiples the most valid chunk headers sit (the largest
/// such power of two: a header at every 64 KiB is also one at every 32 KiB).
fn infer_chunk_size(mem: &Mem, path: &Path) -> Result<u64> {
    let len = mem.len();
    let mut best = (0u64, 0u64);
    let mut cs = MIN_CHUNK;
    while cs <= MAX_CHUNK && cs < len {
        let found = (1..len / cs)
            .filter(|k| {
                mem.read(k * cs, CHUNK_HEADER_LEN)
                    .ok()
                    .and_then(ChunkHeader::decode)
                    .is_some()
            })
            .count() as u64;
        if found >= best.1 && found > 0 {
            best = (cs, found);
        }
        cs *= 2;
    }
    if best.1 == 0 {
        return Err(Error::corruption(
            path,
            0,
            "pool header damaged and no chunk header found to rebuild it from",
        ));
    }
    Ok(best.0)
}
