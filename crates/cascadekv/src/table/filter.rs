//! Per-table Bloom filters in DRAM (issue #13 item 4): a lookup skips a table whose
//! filter says the key is absent, so it reads and verifies no data block there.
//!
//! Where it pays: a point read walks the stages newest first, and every buffer-tree
//! holds tables over the whole key range, so a key that lives in StableStore (or
//! nowhere — `readmissing`) costs one data block read and one CRC per buffer-tree on
//! the way. LevelDB/RocksDB filters serve the same purpose per SST.
//!
//! Layout: a *blocked* Bloom filter (Putze, Sanders, Singler): 512-bit blocks, one per
//! cache line; a key's hash picks one block and sets [`PROBES`] bits inside it, so a
//! probe touches one cache line. [`BITS_PER_KEY`] = 10 gives about 1 % false
//! positives (measured by the test below).
//!
//! Not persisted in the pool (a slow-tier file stores its tables' filters,
//! `slowtier/filters.rs`): the builder hashes every key it writes, so tables built by flushes
//! and compactions get their filter for free; a table loaded at open gets one on its
//! first lookup, from a verified read of all its data blocks (a table is about 45
//! blocks). If that read fails the table simply has no filter — the lookup then reads
//! the one block it needs and reports damage there, as before. Immutable once built.

/// Filter bits per key.
pub(crate) const BITS_PER_KEY: usize = 10;
/// Bits set per key, all in one 512-bit block.
const PROBES: u32 = 6;
/// `u64` words per block (one 64-byte cache line).
const WORDS: usize = 8;

/// The hash a filter uses: the engine's key hash (`coding::hash64`, which also picks
/// LSN stripes); its high half picks the block, its low half the bits.
pub(crate) use crate::coding::hash64 as key_hash;

/// A blocked Bloom filter over a table's keys.
#[derive(Debug)]
pub(crate) struct Filter {
    words: Box<[u64]>,
}

impl Filter {
    /// A filter holding the keys whose [`key_hash`]es are `hashes`.
    pub(crate) fn build(hashes: &[u64]) -> Filter {
        let blocks = (hashes.len() * BITS_PER_KEY).div_ceil(WORDS * 64).max(1);
        let mut words = vec![0u64; blocks * WORDS].into_boxed_slice();
        for &h in hashes {
            let base = block(h, blocks) * WORDS;
            for bit in bits(h) {
                words[base + (bit >> 6) as usize] |= 1 << (bit & 63);
            }
        }
        Filter { words }
    }

    /// False only if no key with hash `h` was added.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let blocks = self.words.len() / WORDS;
        let Some(w) = self.words.get(block(h, blocks) * WORDS..) else {
            return true;
        };
        bits(h).all(|bit| {
            w.get((bit >> 6) as usize)
                .is_some_and(|x| x & (1 << (bit & 63)) != 0)
        })
    }

    /// The filter's words (a slow-tier file stores them, `slowtier/filters.rs`).
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// A filter from stored words; `None` unless they form whole blocks.
    pub(crate) fn from_words(words: Vec<u64>) -> Option<Filter> {
        (!words.is_empty() && words.len().is_multiple_of(WORDS)).then(|| Filter {
            words: words.into_boxed_slice(),
        })
    }

    /// DRAM the filter takes.
    pub(crate) fn dram_bytes(&self) -> usize {
        self.words.len() * 8 + 16
    }
}

/// The block of hash `h` among `blocks` (multiply-shift range reduction of its high
/// half; the low half picks the bits). `blocks` is far below 2^32 (a table holds
/// thousands of keys), so the product does not overflow and the result is < `blocks`.
fn block(h: u64, blocks: usize) -> usize {
    (((h >> 32) * blocks as u64) >> 32) as usize
}

/// The [`PROBES`] bit positions (0..512) of hash `h`: double hashing of its low half.
fn bits(h: u64) -> impl Iterator<Item = u32> {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the low 32 bits, on purpose"
    )]
    let lo = h as u32;
    let step = lo.rotate_left(15) | 1;
    (0..PROBES).map(move |i| lo.wrapping_add(i.wrapping_mul(step)) & 511)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        for n in [1usize, 7, 1000, 20_000] {
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|i| format!("user{i:012}").into_bytes())
                .collect();
            let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
            let f = Filter::build(&hashes);
            assert!(keys.iter().all(|k| f.may_contain(key_hash(k))), "n = {n}");
            let probes = 100_000;
            let fp = (0..probes)
                .filter(|i| f.may_contain(key_hash(format!("miss{i:012}").as_bytes())))
                .count();
            // 10 bits per key, 6 probes in 512-bit blocks: about 1 %; tiny filters
            // round up to one block and do better.
            assert!(
                fp * 100 < probes * 2,
                "n = {n}: {fp} false positives of {probes}"
            );
        }
    }

    #[test]
    fn hashes_spread_short_and_binary_keys() {
        // Keys that differ in one byte, or only in length, hash apart.
        let a = key_hash(b"");
        let b = key_hash(&[0]);
        let c = key_hash(&[0, 0]);
        let d = key_hash(&1u64.to_be_bytes());
        let e = key_hash(&2u64.to_be_bytes());
        let all = [a, b, c, d, e];
        for (i, x) in all.iter().enumerate() {
            for y in &all[i + 1..] {
                assert_ne!(x, y);
            }
        }
    }
}
