//! Byte layout of the sync journal file (docs/formats.md §16): its two header copies
//! and its blocks.
//!
//! ```text
//! file:   [0, 4096) header copy 0 | [4096, 8192) header copy 1 | slot 0 | slot 1 | …
//!         slot i = [DATA_BASE + i·seg_size, DATA_BASE + (i+1)·seg_size)
//! header (64 B at the start of its copy; the rest of the 4 KiB is zero):
//!   0 magic "CKJOURNL"  8 version u32 (1)  12 zero u32
//!  16 gen u64 (the copy with the larger valid gen wins)
//!  24 nonce u64 (random per journal lifetime; seeds every block checksum)
//!  32 live_from u64 (segments numbered below it are dead)
//!  40 seg_size u64     48 nseg u32      52 zero u32   56 zero u32
//!  60 crc32c u32 over [0, 60)
//! block (at a 4096-aligned offset of a slot, never crossing the slot's end):
//!   0 magic "CKJB"      4 len u32 (payload bytes)
//!   8 seq u64 (the journal segment it belongs to; its slot is seq mod nseg)
//!  16 pool_off u64 (where the payload belongs in the pool)
//!  24 seg_base u64 (pool offset of that log segment's chunk header)
//!  32 epoch u64 (that allocation's epoch, from its chunk header)
//!  40 crc32c u32 over nonce (8 B, LE) ‖ [0, 40) ‖ payload
//!  44 zero u32
//!  48 payload, then zeros up to the next 4096 boundary
//! ```
//!
//! A block is valid only with the right magic, a length that fits its slot and a
//! checksum seeded with the journal's nonce, so bytes of an earlier journal (another
//! nonce) or of a block torn by a crash never validate.

use crate::coding::{crc32c, crc32c_extend, get_u32, get_u64, put_u32, put_u64, usize_from};

/// The unit of journal I/O (`O_DIRECT` alignment) and of block placement.
pub const ALIGN: u64 = 4096;
/// Offset of slot 0 (after the two header copies).
pub const DATA_BASE: u64 = 2 * ALIGN;
/// Bytes of a block header.
pub const BLOCK_HEADER: u64 = 48;
const HEADER_MAGIC: &[u8; 8] = b"CKJOURNL";
const BLOCK_MAGIC: &[u8; 4] = b"CKJB";
const VERSION: u32 = 1;
/// Bytes of the header that carry fields (the rest of its 4 KiB copy is zero).
pub const HEADER_LEN: usize = 64;

/// The journal header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Generation: each rewrite goes to the other copy with `gen + 1`.
    pub gen: u64,
    /// Seeds every block checksum of this journal's lifetime.
    pub nonce: u64,
    /// Segments numbered below this are dead (their pool bytes are durable).
    pub live_from: u64,
    /// Bytes per slot.
    pub seg_size: u64,
    /// Number of slots.
    pub nseg: u32,
}

impl Header {
    /// The 4 KiB copy holding this header.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; usize_from(ALIGN)];
        b[..8].copy_from_slice(HEADER_MAGIC);
        put_u32(&mut b, 8, VERSION);
        put_u64(&mut b, 16, self.gen);
        put_u64(&mut b, 24, self.nonce);
        put_u64(&mut b, 32, self.live_from);
        put_u64(&mut b, 40, self.seg_size);
        put_u32(&mut b, 48, self.nseg);
        let crc = crc32c(&b[..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// Decodes one copy; `None` unless magic, version, checksum and geometry hold.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Header> {
        if b.len() < HEADER_LEN || &b[..8] != HEADER_MAGIC || get_u32(b, 8)? != VERSION {
            return None;
        }
        if crc32c(&b[..60]) != get_u32(b, 60)? {
            return None;
        }
        let h = Header {
            gen: get_u64(b, 16)?,
            nonce: get_u64(b, 24)?,
            live_from: get_u64(b, 32)?,
            seg_size: get_u64(b, 40)?,
            nseg: get_u32(b, 48)?,
        };
        let sane = h.nseg >= 2 && h.seg_size >= 4 * ALIGN && h.seg_size.is_multiple_of(ALIGN);
        sane.then_some(h)
    }

    /// The valid copy with the larger generation, from the file's first 8 KiB.
    pub fn newest(file: &[u8]) -> Option<Header> {
        let a = file.get(..usize_from(ALIGN)).and_then(Header::decode);
        let b = file
            .get(usize_from(ALIGN)..usize_from(DATA_BASE))
            .and_then(Header::decode);
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.gen > a.gen { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// File offset of slot `i`'s start.
    #[must_use]
    pub fn slot_offset(&self, i: u64) -> u64 {
        DATA_BASE + i * self.seg_size
    }

    /// Bytes of the whole journal file.
    #[must_use]
    pub fn file_len(&self) -> u64 {
        DATA_BASE + u64::from(self.nseg) * self.seg_size
    }
}

/// Where a block's payload belongs in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Pool offset of the log segment's chunk header.
    pub seg_base: u64,
    /// The segment's allocation epoch.
    pub epoch: u64,
    /// Pool offset of the payload's first byte.
    pub pool_off: u64,
}

/// Bytes a block with `len` payload bytes takes in the journal (whole 4 KiB units).
#[must_use]
pub fn block_size(len: usize) -> u64 {
    (BLOCK_HEADER + len as u64).div_ceil(ALIGN) * ALIGN
}

/// Encodes a block of segment `seq` into `out` (whose length must be
/// `block_size(payload.len())`; the padding is zeroed).
pub fn encode_block(out: &mut [u8], nonce: u64, seq: u64, t: Target, payload: &[u8]) {
    let (h, rest) = out.split_at_mut(usize_from(BLOCK_HEADER));
    h.fill(0);
    h[..4].copy_from_slice(BLOCK_MAGIC);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a block is at most a quarter of a slot, far below 4 GiB"
    )]
    put_u32(h, 4, payload.len() as u32);
    put_u64(h, 8, seq);
    put_u64(h, 16, t.pool_off);
    put_u64(h, 24, t.seg_base);
    put_u64(h, 32, t.epoch);
    let crc = block_crc(nonce, &h[..40], payload);
    put_u32(h, 40, crc);
    rest[..payload.len()].copy_from_slice(payload);
    rest[payload.len()..].fill(0);
}

fn block_crc(nonce: u64, head: &[u8], payload: &[u8]) -> u32 {
    let c = crc32c(&nonce.to_le_bytes());
    crc32c_extend(crc32c_extend(c, head), payload)
}

/// A valid block found in a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block<'a> {
    /// Its journal segment.
    pub seq: u64,
    /// Where its payload belongs.
    pub target: Target,
    /// The payload.
    pub payload: &'a [u8],
    /// Bytes it takes in the slot.
    pub size: u64,
}

/// Decodes the block at the start of `b` (the rest of its slot); `None` unless its
/// magic, length and nonce-seeded checksum hold.
#[must_use]
pub fn decode_block(b: &[u8], nonce: u64) -> Option<Block<'_>> {
    if b.len() < usize_from(BLOCK_HEADER) || &b[..4] != BLOCK_MAGIC {
        return None;
    }
    let len = usize_from(u64::from(get_u32(b, 4)?));
    let end = usize_from(BLOCK_HEADER).checked_add(len)?;
    if end > b.len() {
        return None;
    }
    let payload = &b[usize_from(BLOCK_HEADER)..end];
    if get_u32(b, 44)? != 0 || block_crc(nonce, &b[..40], payload) != get_u32(b, 40)? {
        return None;
    }
    Some(Block {
        seq: get_u64(b, 8)?,
        target: Target {
            pool_off: get_u64(b, 16)?,
            seg_base: get_u64(b, 24)?,
            epoch: get_u64(b, 32)?,
        },
        payload,
        size: block_size(len),
    })
}

/// Every valid block of slot `slot` (bytes `b`) whose segment is live (`live_from` or
/// later) and belongs to this slot, in slot order. Scans every 4 KiB boundary, so a
/// block torn or never written by a crash does not hide the blocks after it (blocks
/// are written in parallel and may complete in any order); a valid block is skipped
/// whole.
#[must_use]
pub fn scan_slot<'a>(b: &'a [u8], slot: u64, h: &Header) -> Vec<Block<'a>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + usize_from(BLOCK_HEADER) <= b.len() {
        match decode_block(&b[at..], h.nonce) {
            Some(blk) if blk.seq % u64::from(h.nseg) == slot && blk.seq >= h.live_from => {
                at += usize_from(blk.size);
                out.push(blk);
            }
            Some(blk) => at += usize_from(blk.size),
            None => at += usize_from(ALIGN),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            gen: 3,
            nonce: 0xDEAD_BEEF,
            live_from: 5,
            seg_size: 64 << 10,
            nseg: 4,
        }
    }

    #[test]
    fn header_round_trips_and_the_newer_copy_wins() {
        let h = header();
        let a = h.encode();
        assert_eq!(Header::decode(&a), Some(h));
        let newer = Header { gen: 4, ..h };
        let mut file = a.clone();
        file.extend_from_slice(&newer.encode());
        assert_eq!(Header::newest(&file), Some(newer));
        // A damaged copy is ignored; the other one stands.
        file[usize_from(ALIGN) + 20] ^= 1;
        assert_eq!(Header::newest(&file), Some(h));
        file[20] ^= 1;
        assert_eq!(Header::newest(&file), None);
        assert_eq!(h.file_len(), DATA_BASE + 4 * (64 << 10));
    }

    #[test]
    fn blocks_validate_only_whole_and_with_their_nonce() {
        let h = header();
        let t = Target {
            seg_base: 1 << 20,
            epoch: 9,
            pool_off: (1 << 20) + 64,
        };
        let payload = b"log bytes of a group".to_vec();
        let mut slot = vec![0u8; 4 * usize_from(ALIGN)];
        let n = usize_from(block_size(payload.len()));
        encode_block(&mut slot[..n], h.nonce, 6, t, &payload);
        // A second block two units on, after a hole (a write the crash lost).
        let far = 2 * usize_from(ALIGN);
        encode_block(&mut slot[far..far + n], h.nonce, 6, t, b"later");
        let found = scan_slot(&slot, 2, &h);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].payload, &payload[..]);
        assert_eq!(found[0].target, t);
        assert_eq!(found[1].payload, b"later");
        // Another nonce, a dead segment, another slot: nothing.
        assert!(scan_slot(&slot, 2, &Header { nonce: 1, ..h }).is_empty());
        assert!(scan_slot(&slot, 2, &Header { live_from: 7, ..h }).is_empty());
        assert!(scan_slot(&slot, 1, &h).is_empty());
        // Every single flipped bit of the first block invalidates it (never a wrong
        // payload), and the second block is still found.
        for bit in 0..(usize_from(BLOCK_HEADER) + payload.len()) * 8 {
            let mut s = slot.clone();
            s[bit / 8] ^= 1 << (bit % 8);
            let found = scan_slot(&s, 2, &h);
            assert!(
                found.iter().all(|b| b.payload == b"later"),
                "bit {bit} gave {found:?}"
            );
        }
    }
}
