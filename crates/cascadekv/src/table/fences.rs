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
//! slices (`slices.rs`), and each block's offset and size packed in one `u64` — or,
//! when every block has one size at one stride (most tables: entries are small against
//! the block), just that stride, so the block's address is computed, not loaded. Every
//! array a lookup touches is one more cache miss (about a quarter of a get on this
//! host), so a get touches only the slices (and the packed block word of a table with
//! blocks of mixed sizes) unless slices tie.
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
    /// array, so the block a search lands on costs one cache miss, not two. Empty
    /// when `stride` describes every block.
    blocks: Box<[u64]>,
    /// `Some((first, step, units))` when block `i` is at `first + i * step` and `units`
    /// long, as in most tables (entries small against the block size): then the
    /// search's answer needs no look-up at all (`blocks` was a cache miss per get,
    /// ~10 % of a `readrandom` after `settle`).
    stride: Option<(u64, u64, u8)>,
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
        let stride = uniform(&blocks);
        let mut f = Fences {
            keys: keys.into(),
            ends: ends.into(),
            blocks: if stride.is_some() {
                Box::default()
            } else {
                blocks.into()
            },
            stride,
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
        let i = self.position(key)?;
        let (addr, units) = self.block(i)?;
        Some((addr, units, i + 1 == self.len()))
    }

    /// Position of the block that may hold `key` (the last whose first key is `<=
    /// key`); `None` if `key` sorts before the first block.
    pub(crate) fn position(&self, key: &[u8]) -> Option<usize> {
        let pfx = || self.keys.get(..self.slices.prefix_len()).unwrap_or(&[]);
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
        self.ends.len()
    }

    /// Offset and units of data block `i` (`None` unless `i < len`).
    pub(crate) fn block(&self, i: usize) -> Option<(u64, u8)> {
        if let Some((first, step, units)) = self.stride {
            return (i < self.len()).then(|| (first + i as u64 * step, units));
        }
        let b = *self.blocks.get(i)?;
        Some((b >> 8, (b & 0xff) as u8))
    }

    /// DRAM this copy takes.
    pub(crate) fn dram_bytes(&self) -> usize {
        self.keys.len()
            + self.ends.len() * 4
            + self.blocks.len() * 8
            + self.slices.dram_bytes()
            + 4 * 16
    }
}

/// `(first, step, units)` if the packed block words form one arithmetic progression
/// of offsets with equal sizes.
fn uniform(blocks: &[u64]) -> Option<(u64, u64, u8)> {
    let (&b0, rest) = blocks.split_first()?;
    let (first, units) = (b0 >> 8, (b0 & 0xff) as u8);
    let step = rest.first().map_or(0, |b1| (b1 >> 8).wrapping_sub(first));
    let fits = blocks.iter().enumerate().all(|(i, &b)| {
        (b & 0xff) as u8 == units
            && Some(b >> 8)
                == step
                    .checked_mul(i as u64)
                    .and_then(|d| d.checked_add(first))
    });
    fits.then_some((first, step, units))
}

#[cfg(test)]
mod tests {
    use super::super::block::{BlockBuilder, BlockKind};
    use super::*;

    #[test]
    fn answers_as_the_index_block_does() {
        // Blocks of mixed sizes (the packed array), then of one size at one stride.
        check(|i| [1, 2, 3][i % 3], false);
        check(|_| 1, true);
        check(|_| 2, true);
    }

    fn check(units: impl Fn(usize) -> u8, uniform: bool) {
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
        // Offsets as a table lays them out: each block after the one before.
        let mut addr = 0;
        for (i, k) in firsts.iter().enumerate() {
            bb.add_index(k, addr, units(i));
            addr += u64::from(units(i)) * 512;
        }
        let mut bytes = Vec::new();
        bb.finish(7, &mut bytes);
        let block = Block::open(&bytes, 7, BlockKind::Index).unwrap_or_else(|e| panic!("{e:?}"));
        let f = Fences::from_block(&block).unwrap_or_else(|| panic!("decode"));
        assert_eq!(f.stride.is_some(), uniform);
        assert_eq!(f.len(), firsts.len());
        assert_eq!(f.block(firsts.len()), None);
        for i in 0..firsts.len() {
            let e = block.index_at(i).unwrap_or_else(|| panic!("entry {i}"));
            assert_eq!(f.block(i), Some((e.addr, e.units)));
            assert_eq!(f.first_key(i), Some(e.first_key));
        }
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
                let last_addr = block
                    .index_at(firsts.len() - 1)
                    .unwrap_or_else(|| panic!("last"))
                    .addr;
                assert_eq!(got.map(|g| g.2), want.map(|w| w.0 == last_addr), "{key}");
            }
        }
    }
}
