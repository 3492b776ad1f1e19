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

/// A pseudo-random number (xorshift64* per thread, seeded from the clock and the
/// thread): for SPOP, SRANDMEMBER, RANDOMKEY and friends, not for secrets.
pub(crate) fn random_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let id = format!("{:?}", std::thread::current().id());
            // Truncating the nanoseconds keeps their fast-changing low bits.
            #[expect(clippy::cast_possible_truncation, reason = "only the low bits seed")]
            let low = t as u64;
            mix(low ^ hash64(id.as_bytes())) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// A pseudo-random index below `n` (`n > 0`).
pub(crate) fn random_below(n: usize) -> usize {
    let n64 = u64::try_from(n).unwrap_or(u64::MAX).max(1);
    usize::try_from(random_u64() % n64).unwrap_or(0)
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
