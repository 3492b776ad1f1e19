//! Redo of the sync journal at open (design.md §10, formats.md §16): after a crash the
//! pool's log pages may lack bytes that a journal block made durable (power loss
//! before the pages were written back); this puts them back, before the logs are
//! discovered, so that log recovery sees every byte ever reported durable.
//!
//! Order at open: read the newest valid header; unless the previous session closed
//! cleanly (then the pool holds everything and the journal is only reinitialized),
//! apply every valid block of a live segment to the pool — only where the chunk at its
//! `seg_base` is still an allocated log chunk of the block's epoch and the payload lies
//! inside that allocation — write those ranges back and fence them. Only then may the
//! journal start a new lifetime (a new nonce makes every old block invalid), so a crash
//! during redo just redoes it at the next open: applying a block twice writes the same
//! bytes.
//!
//! A journal file without a valid header holds nothing acknowledged (the header of a
//! new journal lifetime is durable before any block of it is written), so it is
//! ignored. Runs on every backend, the private (copy-on-write) one of `cascade verify`
//! included: there the redone bytes stay in the process, as recovery's other writes do.

use super::format::{scan_slot, Header, DATA_BASE};
use super::io::JournalIo;
use crate::error::Result;
use crate::pmem::{ChunkKind, Pool, WritebackSet, CHUNK_HEADER_LEN};

/// What redo found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Redone {
    /// Valid blocks of live segments.
    pub blocks: u64,
    /// Of those, applied to the pool.
    pub applied: u64,
    /// Payload bytes applied.
    pub bytes: u64,
}

/// Applies the live blocks of the journal in `io` to `pool` (see the module docs).
/// `clean`: the previous session closed cleanly, nothing to redo.
///
/// # Errors
/// `Io` reading the journal or fencing the pool.
pub(crate) fn redo(pool: &Pool, io: &JournalIo, clean: bool) -> Result<Redone> {
    let mut out = Redone::default();
    if clean {
        return Ok(out);
    }
    let Some(h) = Header::newest(&io.read_all(DATA_BASE)?) else {
        return Ok(out);
    };
    let file = io.read_all(h.file_len())?;
    let mem = pool.mem();
    let mut set = WritebackSet::new();
    for slot in 0..u64::from(h.nseg) {
        let start = usize::try_from(h.slot_offset(slot)).unwrap_or(usize::MAX);
        let end = usize::try_from(h.slot_offset(slot + 1)).unwrap_or(usize::MAX);
        let Some(bytes) = file.get(start..end.min(file.len())) else {
            continue;
        };
        for b in scan_slot(bytes, slot, &h) {
            out.blocks += 1;
            let t = b.target;
            if !fits_log_chunk(
                pool,
                t.seg_base,
                t.epoch,
                t.pool_off,
                b.payload.len() as u64,
            )? {
                continue;
            }
            mem.write(t.pool_off, b.payload)?;
            mem.write_back(&mut set, t.pool_off, b.payload.len() as u64);
            out.applied += 1;
            out.bytes += b.payload.len() as u64;
        }
    }
    mem.fence(&mut set)?;
    Ok(out)
}

/// Whether `[off, off+len)` lies inside the allocation at `seg_base`, after its chunk
/// header, and that chunk is an allocated log chunk of allocation `epoch`.
fn fits_log_chunk(pool: &Pool, seg_base: u64, epoch: u64, off: u64, len: u64) -> Result<bool> {
    let cs = pool.chunk_size();
    if !seg_base.is_multiple_of(cs) {
        return Ok(false);
    }
    let Some(h) = pool.chunk_header(seg_base / cs)? else {
        return Ok(false);
    };
    if h.kind != ChunkKind::Log || h.epoch != epoch {
        return Ok(false);
    }
    let end = seg_base + u64::from(h.span) * cs;
    Ok(off >= seg_base + CHUNK_HEADER_LEN && off.checked_add(len).is_some_and(|e| e <= end))
}
