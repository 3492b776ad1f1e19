//! Fence pointers: a DRAM copy of an LST's index block (issue #13, "a StableStore /
//! buffer-tree index that answers in one cache-friendly search").
//!
//! A point lookup used to read the table's index block from the pool, verify its
//! checksum (one or two 512-byte units, on every get) and binary-search it before it
//! read the data block: `perf` of `readrandom` after `settle` showed CRC-32C at about
//! 29 % of the time and the block read at 22 %. The index block never changes once the
//! LST is placed, so the first lookup verifies it once, decodes every entry into this
//! copy, and later lookups search DRAM and read only the data block (whose checksum is
//! still verified on every read).
//!
//! Safety of the copy: it is built only from a block whose checksum and structure
//! verified, so it holds exactly what was written; damage to the index block on media
//! *afterwards* cannot change what lookups find, and the scrubber and `cascade
//! verify`, which read the media, still report it.
//!
//! Layout: all first keys back to back in one buffer with end offsets, the keys' integer
//! slices (`slices.rs`), and each block's offset and size packed in one `u64` — four
//! allocations per table, no pointer chasing in the search. Every array a lookup
//! touches is one more cache miss (about a quarter of a get on this host), so a get
//! touches only the slices and the packed block word unless slices tie.
//! Immutable once built; shared by any number of readers (`OnceLock` in [`super::Lst`]).

use super::block::Block;
use super::slices::Slices;

/// The decoded index of one LST.
#[derive(Debug)]
pub(crate) struct Fences {
    /// First keys of the data blocks, concatenated.
    keys: Box<[u8]>,
    /// End of each key in `keys`.
    ends: Box<[u32]>,
    /// Each data block as `offset from the LST's start << 8 | size in units`: one
    /// array, so the block a search lands on costs one cache miss, not two.
    blocks: Box<[u64]>,
    /// The keys as integers after their common prefix (`slices.rs`): most
    /// comparisons of the search are one integer compare (`perf`: `memcmp` was 22 % of
    /// a get with a plain search, 15 % of a server worker's time with 8-byte prefixes
    /// of keys that all begin `key:0000`).
    slices: Slices,
}

impl Fences {
    /// Decodes every entry of a verified index block; `None` if any does not decode.
    pub(crate) fn from_block(b: &Block<'_>) -> Option<Fences> {
        let n = b.count();
        let mut keys = Vec::new();
        let mut ends = Vec::with_capacity(n);
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let e = b.index_at(i)?;
            keys.extend_from_slice(e.first_key);
            ends.push(u32::try_from(keys.len()).ok()?);
            // An LST is at most 16 MiB: an offset this large does not decode.
            if e.addr >= 1 << 56 {
                return None;
            }
            blocks.push(e.addr << 8 | u64::from(e.units));
        }
        let mut f = Fences {
            keys: keys.into(),
            ends: ends.into(),
            blocks: blocks.into(),
            slices: Slices::default(),
        };
        f.slices = Slices::new((0..n).map(|i| f.key(i)));
        Some(f)
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// The data block that may hold `key`: (offset, units, whether it is the table's
    /// last block — only there can a key sort past the table's end), or `None` if `key`
    /// sorts before the first block: the same block as `Block::child_for` on the index
    /// block.
    pub(crate) fn block_for(&self, key: &[u8]) -> Option<(u64, u8, bool)> {
        // Number of blocks whose first key is <= key.
        let pfx = self.keys.get(..self.slices.prefix_len()).unwrap_or(&[]);
        let lo = self.slices.count_below(pfx, key, true, |i| self.key(i));
        let i = lo.checked_sub(1)?;
        let b = self.blocks[i];
        Some((b >> 8, (b & 0xff) as u8, lo == self.blocks.len()))
    }

    /// DRAM this copy takes.
    /// Position of the block that may hold `key` (the last whose first key is `<=
    /// key`); `None` if `key` sorts before the first block.
    pub(crate) fn position(&self, key: &[u8]) -> Option<usize> {
        let pfx = self.keys.get(..self.slices.prefix_len()).unwrap_or(&[]);
        self.slices
            .count_below(pfx, key, true, |i| self.key(i))
            .checked_sub(1)
    }

    /// First key of data block `i`.
    pub(crate) fn first_key(&self, i: usize) -> Option<&[u8]> {
        (i < self.ends.len()).then(|| self.key(i))
    }

    /// Number of data blocks.
    pub(crate) fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Offset and units of data block `i` (`i < len`).
    pub(crate) fn block(&self, i: usize) -> Option<(u64, u8)> {
        let b = *self.blocks.get(i)?;
        Some((b >> 8, (b & 0xff) as u8))
    }

    pub(crate) fn dram_bytes(&self) -> usize {
        self.keys.len() + self.ends.len() * (4 + 8) + self.slices.dram_bytes() + 4 * 16
    }
}

#[cfg(test)]
mod tests {
    use super::super::block::{BlockBuilder, BlockKind};
    use super::*;

    #[test]
    fn answers_as_the_index_block_does() {
        let mut bb = BlockBuilder::new(BlockKind::Index, 1 << 16);
        // Keys longer and shorter than the 8-byte prefix; runs of up to 14 fences
        // share one prefix (keys that differ only after their first 8 bytes).
        let firsts: Vec<Vec<u8>> = (0..300u32)
            .map(|i| match i % 3 {
                0 => format!("k{:06}", i * 10).into_bytes(),
                1 => format!("k{:06}-long-key", i * 10).into_bytes(),
                _ => format!("k{:06}-long-kez{i:03}", (i / 40) * 400).into_bytes(),
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for (i, k) in firsts.iter().enumerate() {
            bb.add_index(k, i as u64 * 512, [1, 2, 3][i % 3]);
        }
        let mut bytes = Vec::new();
        bb.finish(7, &mut bytes);
        let block = Block::open(&bytes, 7, BlockKind::Index).unwrap_or_else(|e| panic!("{e:?}"));
        let f = Fences::from_block(&block).unwrap_or_else(|| panic!("decode"));
        for probe in 0..3100u32 {
            for key in [
                format!("k{probe:06}"),
                format!("k{probe:06}x"),
                format!("k{probe:06}-long-kez{:03}", probe % 300),
                String::new(),
                "z".to_string(),
            ] {
                let want = block
                    .child_for(key.as_bytes())
                    .unwrap_or_else(|| panic!("search"))
                    .and_then(|i| block.index_at(i))
                    .map(|e| (e.addr, e.units));
                let got = f.block_for(key.as_bytes());
                assert_eq!(got.map(|(a, u, _)| (a, u)), want, "{key}");
                let last_addr = (firsts.len() as u64 - 1) * 512;
                assert_eq!(got.map(|g| g.2), want.map(|w| w.0 == last_addr), "{key}");
            }
        }
    }
}
