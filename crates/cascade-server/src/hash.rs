//! The server's own 64-bit hash of byte strings: FNV-1a over the bytes, finished
//! with the `SplitMix64` mixer so that every output bit depends on every input bit.
//!
//! Used for lock stripes (`store.rs`) and for seeding run ids and SCAN cursor numbers
//! (`shared.rs`). Not a cryptographic hash and not stored anywhere: it may change
//! between versions. Pure function; any thread.

/// Hashes `bytes`.
pub(crate) fn hash64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// `SplitMix64`'s finaliser.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_similar_keys() {
        assert_ne!(hash64(b"key:1"), hash64(b"key:2"));
        assert_ne!(hash64(b""), hash64(b"\0"));
        // 10 000 sequential keys over 1024 stripes: no stripe gets more than 3x its share.
        let mut count = vec![0u32; 1024];
        for i in 0..10_000u32 {
            count[(hash64(format!("key:{i}").as_bytes()) % 1024) as usize] += 1;
        }
        assert!(count.iter().all(|&c| c < 30), "{:?}", count.iter().max());
    }
}
