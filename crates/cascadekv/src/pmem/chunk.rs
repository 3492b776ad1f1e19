//! The 64-byte header at the start of every allocated chunk.
//!
//! It says what the chunk holds (its [`ChunkKind`]), which object owns it and where the
//! chunk sits in that object, and carries the chunk's *epoch*: a number unique to this
//! allocation. Records inside the chunk seed their checksums with the epoch, so stale
//! bytes left by an earlier owner of a reused chunk never validate.
//!
//! Layout (little-endian; see docs/formats.md):
//! ```text
//! 0  magic "CKCH"   4  kind u8   5  flags u8   6  span u16
//! 8  epoch u64      16 owner u64  24 seq u64    32 aux u64
//! 40 reserved (20 zero bytes)                  60 crc32c u32 over [0, 60)
//! ```

use crate::coding::{crc32c, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64, usize_from};

/// Bytes taken by the header at the start of each chunk.
pub const CHUNK_HEADER_LEN: u64 = 64;
const MAGIC: &[u8; 4] = b"CKCH";

/// What a chunk holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ChunkKind {
    /// A piece of a thread-exclusive log.
    Log = 1,
    /// Blocks of a sorted table.
    Table = 2,
    /// A piece of the manifest.
    Manifest = 3,
    /// Values a log cleaning moved out of a victim segment (the value log, `vlog/`).
    Value = 4,
    /// A FastStore checkpoint written at a clean close (`faststore/checkpoint.rs`).
    Checkpoint = 5,
}

impl ChunkKind {
    fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(ChunkKind::Log),
            2 => Some(ChunkKind::Table),
            3 => Some(ChunkKind::Manifest),
            4 => Some(ChunkKind::Value),
            5 => Some(ChunkKind::Checkpoint),
            _ => None,
        }
    }
}

/// A decoded chunk header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// What the chunk holds.
    pub kind: ChunkKind,
    /// Number of contiguous chunks this allocation spans (1 for ordinary chunks).
    pub span: u16,
    /// Unique allocation number; seeds record checksums.
    pub epoch: u64,
    /// Owning object (e.g. a log id).
    pub owner: u64,
    /// Position of this chunk within its owner.
    pub seq: u64,
    /// Kind-specific extra word (for logs: the FastStore generation).
    pub aux: u64,
}

impl ChunkHeader {
    /// Encodes the header into its 64-byte form.
    #[must_use]
    pub fn encode(&self) -> [u8; usize_from(CHUNK_HEADER_LEN)] {
        let mut b = [0u8; usize_from(CHUNK_HEADER_LEN)];
        b[0..4].copy_from_slice(MAGIC);
        b[4] = self.kind as u8;
        put_u16(&mut b, 6, self.span);
        put_u64(&mut b, 8, self.epoch);
        put_u64(&mut b, 16, self.owner);
        put_u64(&mut b, 24, self.seq);
        put_u64(&mut b, 32, self.aux);
        let crc = crc32c(&b[0..60]);
        put_u32(&mut b, 60, crc);
        b
    }

    /// Decodes a header that has exactly one flipped bit (its checksum detects every
    /// such flip, so the correction that validates is the header as written). For
    /// `cascade verify` and `repair`, which can then read the chunk's own checksummed
    /// records; the engine never opens a store through it.
    #[must_use]
    pub fn decode_corrected(b: &[u8]) -> Option<Self> {
        let mut h = b.get(0..usize_from(CHUNK_HEADER_LEN))?.to_vec();
        for i in 0..h.len() * 8 {
            h[i / 8] ^= 1 << (i % 8);
            if let Some(x) = Self::decode(&h) {
                return Some(x);
            }
            h[i / 8] ^= 1 << (i % 8);
        }
        None
    }

    /// Decodes a header; `None` if the bytes are not a valid header (never written,
    /// torn, or damaged). Callers decide whether that is corruption or a leak.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(0..usize_from(CHUNK_HEADER_LEN))?;
        if &b[0..4] != MAGIC || get_u32(b, 60)? != crc32c(&b[0..60]) {
            return None;
        }
        Some(ChunkHeader {
            kind: ChunkKind::from_u8(b[4])?,
            span: get_u16(b, 6)?,
            epoch: get_u64(b, 8)?,
            owner: get_u64(b, 16)?,
            seq: get_u64(b, 24)?,
            aux: get_u64(b, 32)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_bit_flip_is_rejected() {
        let h = ChunkHeader {
            kind: ChunkKind::Log,
            span: 3,
            epoch: 99,
            owner: 7,
            seq: 12,
            aux: 5,
        };
        let enc = h.encode();
        assert_eq!(ChunkHeader::decode(&enc), Some(h));
        for bit in 0..(64 * 8) {
            let mut bad = enc;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                ChunkHeader::decode(&bad),
                None,
                "flip of bit {bit} accepted"
            );
        }
        assert_eq!(ChunkHeader::decode(&[0u8; 64]), None);
        assert_eq!(ChunkHeader::decode(&enc[..63]), None);
    }
}
