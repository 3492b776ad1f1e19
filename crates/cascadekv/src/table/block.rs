//! Blocks of a Logical Sorted Table (FluidKV §4.3, Fig. 9).
//!
//! A block is `units × block_size` bytes (one unit normally; more only when a single
//! entry — a long key, a large inline value — does not fit in one). Layout
//! (little-endian; see docs/formats.md):
//!
//! ```text
//! 0  crc32c u32    over [4, size), seeded with the LST's id
//! 4  kind u8       1 = data, 2 = index
//! 5  units u8      size = units × block_size
//! 6  count u16     entries
//! 8  offsets       count × u16: start of each entry, from the block start
//!    entries       in key order, then zero padding to `size`
//! ```
//! Data entry: `key_len varint, key, vtype u8 (0 tombstone, 1 inline, 2 separated),
//! then inline: value_len varint, value | separated: log address u64, value_len u32`.
//! Index entry: `key_len varint, key (first key of the data block), offset u64 (from
//! the LST's first byte), units u8`.
//!
//! The offset array makes every entry reachable by binary search with one block read;
//! the block checksum is verified before anything in it is used, so damaged bytes are
//! reported as corruption, never returned.

use crate::coding::{
    crc32c, crc32c_extend, get_u16, get_u32, get_u64, get_varint, put_u16, put_u32, put_varint,
    usize_from, varint_len,
};
use crate::value::{ValuePtr, ValueRef};

/// Bytes before the offset array.
pub const BLOCK_HEADER: usize = 8;

/// Block kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    /// Sorted key-value entries.
    Data = 1,
    /// First key and address of each data block of an LST.
    Index = 2,
}

/// Encoded length of a data entry (without its offset slot).
pub fn data_entry_len(key: &[u8], v: &ValueRef<'_>) -> usize {
    varint_len(key.len() as u64)
        + key.len()
        + 1
        + match v {
            ValueRef::Tombstone => 0,
            ValueRef::Inline(b) => varint_len(b.len() as u64) + b.len(),
            ValueRef::Separated(_) => 12,
        }
}

/// Encoded length of an index entry (without its offset slot).
pub fn index_entry_len(key: &[u8]) -> usize {
    varint_len(key.len() as u64) + key.len() + 9
}

/// Accumulates entries of one block.
#[derive(Debug)]
pub struct BlockBuilder {
    kind: BlockKind,
    block_size: usize,
    capacity: usize,
    offsets: Vec<u16>,
    body: Vec<u8>,
}

impl BlockBuilder {
    /// An empty block of `kind` for unit size `block_size`, filled up to one unit.
    pub fn new(kind: BlockKind, block_size: usize) -> Self {
        Self::with_units(kind, block_size, 1)
    }

    /// An empty block filled up to `units` units before `fits` says no.
    pub fn with_units(kind: BlockKind, block_size: usize, units: usize) -> Self {
        BlockBuilder {
            kind,
            block_size,
            capacity: block_size * units.max(1),
            offsets: Vec::new(),
            body: Vec::new(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes the block would take with one more entry of `entry_len` bytes.
    fn size_with(&self, entry_len: usize) -> usize {
        BLOCK_HEADER + 2 * (self.offsets.len() + 1) + self.body.len() + entry_len
    }

    /// True if an entry of `entry_len` fits the block's capacity (an empty block takes
    /// any entry; it then spans as many units as it needs).
    pub fn fits(&self, entry_len: usize) -> bool {
        self.is_empty() || self.size_with(entry_len) <= self.capacity
    }

    /// Appends a data entry (keys must come in increasing order).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a block is at most one unit set or one entry (key <= 4 KiB, inline value \
                  <= 8 KiB, Options::validate): well under 64 KiB and 256 units"
    )]
    pub fn add_data(&mut self, key: &[u8], v: &ValueRef<'_>) {
        self.offsets.push(self.body.len() as u16);
        put_varint(&mut self.body, key.len() as u64);
        self.body.extend_from_slice(key);
        match v {
            ValueRef::Tombstone => self.body.push(0),
            ValueRef::Inline(b) => {
                self.body.push(1);
                put_varint(&mut self.body, b.len() as u64);
                self.body.extend_from_slice(b);
            }
            ValueRef::Separated(p) => {
                self.body.push(2);
                self.body.extend_from_slice(&p.addr.to_le_bytes());
                self.body.extend_from_slice(&p.len.to_le_bytes());
            }
        }
    }

    /// Appends an index entry.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a block is at most one unit set or one entry (key <= 4 KiB, inline value \
                  <= 8 KiB, Options::validate): well under 64 KiB and 256 units"
    )]
    pub fn add_index(&mut self, first_key: &[u8], addr: u64, units: u8) {
        self.offsets.push(self.body.len() as u16);
        put_varint(&mut self.body, first_key.len() as u64);
        self.body.extend_from_slice(first_key);
        self.body.extend_from_slice(&addr.to_le_bytes());
        self.body.push(units);
    }

    /// Serializes the block (checksum seeded with `epoch`) into `out` and resets the
    /// builder. Returns the number of units.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a block is at most one unit set or one entry (key <= 4 KiB, inline value \
                  <= 8 KiB, Options::validate): well under 64 KiB and 256 units"
    )]
    pub fn finish(&mut self, epoch: u64, out: &mut Vec<u8>) -> u8 {
        let n = self.offsets.len();
        let raw = BLOCK_HEADER + 2 * n + self.body.len();
        let units = raw.div_ceil(self.block_size).max(1);
        out.clear();
        out.resize(units * self.block_size, 0);
        out[4] = self.kind as u8;
        out[5] = units as u8;
        put_u16(out, 6, n as u16);
        let base = (BLOCK_HEADER + 2 * n) as u16;
        for (i, off) in self.offsets.iter().enumerate() {
            put_u16(out, BLOCK_HEADER + 2 * i, base + off);
        }
        out[BLOCK_HEADER + 2 * n..raw].copy_from_slice(&self.body);
        let crc = crc32c_extend(crc32c(&epoch.to_le_bytes()), &out[4..]);
        put_u32(out, 0, crc);
        self.offsets.clear();
        self.body.clear();
        units as u8
    }
}

/// Why bytes are not a valid block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// Checksum mismatch.
    Checksum {
        /// Stored.
        stored: u32,
        /// Computed.
        actual: u32,
    },
    /// Structurally impossible contents.
    Malformed(&'static str),
}

/// Units of the block starting at `b` (from its header; validate before trusting).
pub fn units_of(b: &[u8]) -> Option<u8> {
    b.get(5).copied().filter(|u| *u > 0)
}

/// A verified block borrowed from the pool.
#[derive(Debug, Clone, Copy)]
pub struct Block<'a> {
    bytes: &'a [u8],
    count: usize,
    kind: BlockKind,
}

/// A decoded index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry<'a> {
    /// First key of the data block.
    pub first_key: &'a [u8],
    /// Offset of the data block from the LST's first byte.
    pub addr: u64,
    /// Its size in units.
    pub units: u8,
}

impl<'a> Block<'a> {
    /// Verifies `bytes` (exactly one block) against its checksum and structure.
    ///
    /// # Errors
    /// [`BlockError`]: checksum mismatch, or a header that cannot be right.
    pub fn open(bytes: &'a [u8], epoch: u64, want: BlockKind) -> Result<Self, BlockError> {
        if bytes.len() < BLOCK_HEADER {
            return Err(BlockError::Malformed("short block"));
        }
        let stored = get_u32(bytes, 0).ok_or(BlockError::Malformed("short block"))?;
        let actual = crc32c_extend(crc32c(&epoch.to_le_bytes()), bytes.get(4..).unwrap_or(&[]));
        if stored != actual {
            return Err(BlockError::Checksum { stored, actual });
        }
        Self::open_verified(bytes, want)
    }

    /// A block whose checksum verified earlier in this process (`verified.rs`): the
    /// header is checked as by [`Block::open`], the checksum is not. Accessors still
    /// return `None` rather than read outside the block if its bytes changed since.
    ///
    /// # Errors
    /// [`BlockError::Malformed`]: a header that cannot be right.
    pub fn open_verified(bytes: &'a [u8], want: BlockKind) -> Result<Self, BlockError> {
        if bytes.len() < BLOCK_HEADER {
            return Err(BlockError::Malformed("short block"));
        }
        let kind = match bytes[4] {
            1 => BlockKind::Data,
            2 => BlockKind::Index,
            _ => return Err(BlockError::Malformed("unknown block kind")),
        };
        if kind != want {
            return Err(BlockError::Malformed("unexpected block kind"));
        }
        let count = get_u16(bytes, 6).ok_or(BlockError::Malformed("short block"))? as usize;
        if BLOCK_HEADER + 2 * count > bytes.len() {
            return Err(BlockError::Malformed("offset array overruns the block"));
        }
        Ok(Block { bytes, count, kind })
    }

    /// Full structural check: every entry decodes inside the block and keys strictly
    /// increase. `open` checks only the checksum and header (a block that passed its
    /// checksum was written by the builder); accessors still return `None` rather than
    /// panic on anything malformed.
    ///
    /// # Errors
    /// [`BlockError::Malformed`] naming the first problem.
    pub fn validate(&self) -> Result<(), BlockError> {
        let mut prev: Option<&[u8]> = None;
        for i in 0..self.count {
            let k = self
                .key_at(i)
                .ok_or(BlockError::Malformed("entry overruns the block"))?;
            let ok = match self.kind {
                BlockKind::Data => self.data_at(i).is_some(),
                BlockKind::Index => self.index_at(i).is_some(),
            };
            if !ok {
                return Err(BlockError::Malformed("bad entry"));
            }
            if prev.is_some_and(|p| p >= k) {
                return Err(BlockError::Malformed("keys out of order"));
            }
            prev = Some(k);
        }
        Ok(())
    }

    /// Bytes of the block (all its units).
    #[must_use]
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Number of entries.
    #[must_use]
    pub fn count(&self) -> usize {
        self.count
    }

    /// Block kind.
    #[must_use]
    pub fn kind(&self) -> BlockKind {
        self.kind
    }

    fn entry_start(&self, i: usize) -> Option<usize> {
        let off = get_u16(self.bytes, BLOCK_HEADER + 2 * i)? as usize;
        (off >= BLOCK_HEADER + 2 * self.count && off < self.bytes.len()).then_some(off)
    }

    fn key_and_rest(&self, i: usize) -> Option<(&'a [u8], usize)> {
        let mut p = self.entry_start(i)?;
        let n = usize_from(get_varint(self.bytes, &mut p)?);
        let key = self.bytes.get(p..p.checked_add(n)?)?;
        Some((key, p + n))
    }

    /// Key of entry `i`.
    #[must_use]
    pub fn key_at(&self, i: usize) -> Option<&'a [u8]> {
        self.key_and_rest(i).map(|(k, _)| k)
    }

    /// Key and value of data entry `i`.
    #[must_use]
    pub fn data_at(&self, i: usize) -> Option<(&'a [u8], ValueRef<'a>)> {
        let (key, mut p) = self.key_and_rest(i)?;
        let vtype = *self.bytes.get(p)?;
        p += 1;
        let v = match vtype {
            0 => ValueRef::Tombstone,
            1 => {
                let n = usize_from(get_varint(self.bytes, &mut p)?);
                ValueRef::Inline(self.bytes.get(p..p.checked_add(n)?)?)
            }
            2 => ValueRef::Separated(ValuePtr {
                addr: get_u64(self.bytes, p)?,
                len: get_u32(self.bytes, p + 8)?,
            }),
            _ => return None,
        };
        Some((key, v))
    }

    /// Index entry `i`.
    #[must_use]
    pub fn index_at(&self, i: usize) -> Option<IndexEntry<'a>> {
        let (first_key, p) = self.key_and_rest(i)?;
        let addr = get_u64(self.bytes, p)?;
        let units = *self.bytes.get(p + 8)?;
        (units > 0).then_some(IndexEntry {
            first_key,
            addr,
            units,
        })
    }

    /// Binary search: `Some(Ok(i))` if `key` is entry `i`, `Some(Err(i))` = number of
    /// entries below `key`, `None` if an entry on the search path does not decode
    /// (never a wrong answer from damaged bytes).
    #[must_use]
    pub fn search(&self, key: &[u8]) -> Option<Result<usize, usize>> {
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = usize::midpoint(lo, hi);
            match self.key_at(mid)?.cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Equal => return Some(Ok(mid)),
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        Some(Err(lo))
    }

    /// Index: `Some(Some(i))` for the entry whose data block may hold `key` (last
    /// `first_key` <= key), `Some(None)` if `key` is below every entry, `None` if the
    /// block does not decode.
    #[must_use]
    pub fn child_for(&self, key: &[u8]) -> Option<Option<usize>> {
        Some(match self.search(key)? {
            Ok(i) => Some(i),
            Err(0) => None,
            Err(i) => Some(i - 1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn build_search_and_verify() {
        let mut b = BlockBuilder::new(BlockKind::Data, 512);
        let mut n = 0u64;
        while b.fits(data_entry_len(&n.to_be_bytes(), &ValueRef::Inline(&[1; 8]))) {
            b.add_data(&n.to_be_bytes(), &ValueRef::Inline(&n.to_le_bytes()));
            n += 1;
        }
        assert!(n >= 20, "only {n} 8+8 entries fit");
        let mut out = Vec::new();
        assert_eq!(b.finish(7, &mut out), 1);
        assert_eq!(out.len(), 512);
        let blk = Block::open(&out, 7, BlockKind::Data).map_err(|e| format!("{e:?}"));
        let blk = blk.as_ref().map_err(Clone::clone);
        assert!(blk.is_ok());
        if let Ok(blk) = blk {
            for i in 0..n {
                let k = i.to_be_bytes();
                let at = blk.search(&k);
                assert_eq!(at, Some(Ok(usize_from(i))));
                assert_eq!(
                    blk.data_at(usize_from(i)).map(|(_, v)| v),
                    Some(ValueRef::Inline(&i.to_le_bytes()[..]))
                );
            }
            assert_eq!(blk.search(&[0xFF; 9]), Some(Err(usize_from(n))));
        }
        assert!(
            Block::open(&out, 8, BlockKind::Data).is_err(),
            "other epoch accepted"
        );
        assert!(
            Block::open(&out, 7, BlockKind::Index).is_err(),
            "wrong kind accepted"
        );
        for bit in 0..(512 * 8) {
            let mut bad = out.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                Block::open(&bad, 7, BlockKind::Data).is_err(),
                "flip of bit {bit} accepted"
            );
        }
    }

    #[test]
    fn regression_fuzz_four_byte_block_with_matching_checksum() {
        // Found by `cargo fuzz run table_block`: a 4-byte "block" whose checksum
        // (covering only the epoch) matched made `open` read past the end.
        let mut b = [0u8; 4];
        let crc = crc32c(&0u64.to_le_bytes());
        put_u32(&mut b, 0, crc);
        assert!(Block::open(&b, 0, BlockKind::Data).is_err());
        assert!(Block::open(&b[..0], 0, BlockKind::Index).is_err());
    }

    #[test]
    fn oversized_entry_takes_several_units() {
        let mut b = BlockBuilder::new(BlockKind::Data, 256);
        let key = vec![b'k'; 4096];
        assert!(b.fits(data_entry_len(&key, &ValueRef::Inline(&[0; 300]))));
        b.add_data(&key, &ValueRef::Inline(&[9; 300]));
        let mut out = Vec::new();
        let units = b.finish(1, &mut out);
        assert_eq!(units as usize * 256, out.len());
        assert!(units > 16);
        let blk = Block::open(&out, 1, BlockKind::Data);
        assert!(matches!(
            blk.map(|b| b.data_at(0).map(|(k, _)| k.len())),
            Ok(Some(4096))
        ));
    }

    proptest! {
        #[test]
        fn open_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), epoch in any::<u64>()) {
            for kind in [BlockKind::Data, BlockKind::Index] {
                if let Ok(b) = Block::open(&bytes, epoch, kind) {
                    let _ = b.validate();
                    for i in 0..=b.count() {
                        let _ = (b.data_at(i), b.index_at(i), b.key_at(i));
                    }
                    let _ = b.search(b"key");
                }
            }
        }

        #[test]
        fn any_block_with_a_forged_checksum_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 8..600)) {
            // Make the checksum match so the structural decoders see arbitrary bytes.
            bytes[4] = 1 + (bytes[4] % 2);
            let crc = crc32c_extend(crc32c(&5u64.to_le_bytes()), &bytes[4..]);
            put_u32(&mut bytes, 0, crc);
            let kind = if bytes[4] == 1 { BlockKind::Data } else { BlockKind::Index };
            if let Ok(b) = Block::open(&bytes, 5, kind) {
                let _ = b.validate();
                for i in 0..=b.count().min(64) {
                    let _ = (b.data_at(i), b.index_at(i), b.key_at(i));
                }
                let _ = (b.search(b"m"), b.child_for(b"m"));
            }
        }

        #[test]
        fn index_blocks_round_trip(keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..30), 1..15)) {
            let mut b = BlockBuilder::new(BlockKind::Index, 4096);
            for (i, k) in keys.iter().enumerate() {
                b.add_index(k, i as u64 * 512, 1);
            }
            let mut out = Vec::new();
            b.finish(3, &mut out);
            let blk = Block::open(&out, 3, BlockKind::Index);
            prop_assert!(blk.is_ok());
            if let Ok(blk) = blk {
                for (i, k) in keys.iter().enumerate() {
                    prop_assert_eq!(blk.index_at(i).map(|e| e.first_key), Some(&k[..]));
                    prop_assert_eq!(blk.child_for(k), Some(Some(i)));
                }
            }
        }
    }
}
