//! Key and value generation for benchmarks.
//!
//! Key number `i` maps to a key through a bijective 64-bit mixer, so `num` distinct
//! numbers give `num` distinct, uniformly spread keys; `fillseq` uses the numbers
//! themselves (big-endian) so keys arrive in order.

/// A bijective 64-bit mixer (the splitmix64 finalizer).
#[must_use]
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Writes the key for number `n` into `buf` (`key_size` bytes, at least 8): the 8-byte
/// big-endian number, zero-padded on the right.
pub fn make_key(n: u64, key_size: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&n.to_be_bytes());
    buf.resize(key_size.max(8), 0);
}

/// Fills `buf` with `len` bytes derived from `seed` (cheap, not constant).
pub fn make_value(seed: u64, len: usize, buf: &mut Vec<u8>) {
    buf.clear();
    let mut x = seed | 1;
    while buf.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let take = (len - buf.len()).min(8);
        buf.extend_from_slice(&b[..take]);
    }
}

/// A small, fast PRNG for picking keys (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (seed 0 is remapped).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Rng(mix(seed) | 1)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn mix_is_injective_on_a_sample_and_keys_have_the_right_size() {
        let s: HashSet<u64> = (0..100_000).map(mix).collect();
        assert_eq!(s.len(), 100_000);
        let mut k = Vec::new();
        make_key(mix(3), 24, &mut k);
        assert_eq!(k.len(), 24);
        make_key(3, 4, &mut k);
        assert_eq!(k.len(), 8);
    }

    #[test]
    fn rng_below_stays_in_range_and_spreads() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            let v = r.below(10);
            seen[usize::try_from(v).expect("below 10")] += 1;
        }
        assert!(seen.iter().all(|c| *c > 800 && *c < 1200), "{seen:?}");
    }
}
