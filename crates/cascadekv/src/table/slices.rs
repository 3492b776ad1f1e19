//! Sorted keys as integers for cache-friendly searching: the keys' common prefix once,
//! then each key's next 8 bytes as a big-endian `u64` (its *slice*). Both DRAM searches
//! of a point lookup use it — the table array of a [`super::set::TableSet`] (tables'
//! smallest keys) and a table's fence copy (`fences.rs`, data blocks' first keys).
//!
//! Why the common prefix: with the first 8 bytes of each key as the integer, keys that
//! share those bytes tie at every step and the search falls back to `memcmp` each time.
//! Real key sets do share them — `redis-benchmark`'s `key:000000123456` (all begin
//! `key:0000`), YCSB's `user…`, any `tenant/table/…` scheme — and `perf` of server
//! GETs showed `memcmp` at 15 % of the worker's time. Stripping the prefix the keys of
//! one table (or one set) share makes the slices distinct again (the same idea as the
//! FastStore nodes' prefix skip, `faststore/node.rs`, and Masstree's key slices).
//!
//! Order: for keys that all start with `pfx`, comparing the bytes after it compares the
//! keys; for two such tails whose zero-padded first 8 bytes differ, those integers
//! order them as their bytes do (at the first byte where the padded slices differ,
//! either both tails have a byte there, or the shorter one ended — padding 0 against a
//! byte — and is a prefix of the longer, hence smaller; a 0 byte against the padding
//! is a tie, not a difference). Equal slices are resolved by comparing the full keys.
//!
//! Immutable once built; any number of readers.

use std::cmp::Ordering;

use crate::faststore::ikey::slice_at;

/// Arrays at least this long are searched by interpolation first ([`Slices::bracket`]);
/// shorter ones fit a few cache lines and a binary search is as fast.
const INTERPOLATE_FROM: usize = 16;

/// Keys of one sorted, duplicate-free list, as the length of their common prefix and
/// 8-byte slices after it. The prefix itself is not copied: the caller passes it from
/// a key it keeps anyway (a separate copy per table was one more cache miss per
/// lookup and measured 10-15 % slower on readrandom).
#[derive(Debug, Default, Clone)]
pub(crate) struct Slices {
    /// Big-endian bytes `plen..plen + 8` of each key, zero-padded.
    ints: Box<[u64]>,
    /// Length of the prefix every key starts with.
    plen: u32,
    /// The prefix itself when it is at most 8 bytes (most key sets, and every table of
    /// hashed or random keys): beside `ints`' pointer, so the prefix check costs no
    /// cache miss of its own (`perf`: the byte compare against the caller's copy, a
    /// separate allocation, was the hottest instruction of the search).
    head: [u8; 8],
}

impl Slices {
    /// Builds the slices of `keys`, which must be sorted ascending.
    pub(crate) fn new<'a>(keys: impl Iterator<Item = &'a [u8]> + Clone) -> Slices {
        let first = keys.clone().next().unwrap_or(&[]);
        let last = keys.clone().last().unwrap_or(&[]);
        // In a sorted list every key lies between the first and the last, so it shares
        // their common prefix.
        let n = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let mut head = [0; 8];
        if let (Some(h), Some(p)) = (head.get_mut(..n), first.get(..n)) {
            h.copy_from_slice(p);
        }
        Slices {
            ints: keys.map(|k| slice_at(k, n)).collect(),
            plen: u32::try_from(n).unwrap_or(u32::MAX),
            head,
        }
    }

    /// Length of the common prefix: the caller's `pfx` for [`Slices::count_below`]
    /// is this many bytes of any of the keys.
    pub(crate) fn prefix_len(&self) -> usize {
        self.plen as usize
    }

    /// Number of keys `< probe`, or `<= probe` when `inclusive`; `pfx` gives the
    /// keys' common prefix (the first [`Slices::prefix_len`] bytes of any key; called
    /// only when it is longer than 8 bytes), `key(i)` the `i`-th key, read only when
    /// its slice ties with the probe's.
    pub(crate) fn count_below<'k>(
        &'k self,
        pfx: impl FnOnce() -> &'k [u8],
        probe: &[u8],
        inclusive: bool,
        key: impl Fn(usize) -> &'k [u8],
    ) -> usize {
        let pfx = self.head.get(..self.prefix_len()).unwrap_or_else(pfx);
        let n = pfx.len();
        let m = n.min(probe.len());
        // A byte loop, not `memcmp`: the prefix is short and a library call per
        // search showed up in `perf` (16 % with two calls per get).
        let ord = probe[..m]
            .iter()
            .zip(&pfx[..m])
            .find(|(a, b)| a != b)
            .map_or(Ordering::Equal, |(a, b)| a.cmp(b));
        match ord {
            // Every key starts with `pfx`, so all sort after the probe ...
            Ordering::Less => return 0,
            // ... or all before it.
            Ordering::Greater => return self.ints.len(),
            // The probe is a proper prefix of `pfx`: shorter than every key.
            Ordering::Equal if probe.len() < n => return 0,
            Ordering::Equal => {}
        }
        let kp = slice_at(probe, n);
        // Key `i` sorts below the probe: true for a prefix of the keys, whose length
        // is the answer.
        let below = |i: usize| {
            let s = self.ints[i];
            s < kp
                || (s == kp && {
                    let k = key(i);
                    k < probe || (inclusive && k == probe)
                })
        };
        let (mut lo, mut hi) = self.bracket(kp, &below);
        while lo < hi {
            let mid = usize::midpoint(lo, hi);
            if below(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// A range `[lo, hi)` that holds the answer of [`Slices::count_below`] (every key
    /// before `lo` is below, key `hi` is not, or `hi` is the end), found by
    /// interpolation (issue #29 item 3, "interpolation over fixed-width slices"): the
    /// slices are integers, so where the probe's slice falls between the first and the
    /// last one estimates its position, and a gallop outward from the estimate
    /// brackets it in a few neighbouring cache lines. A binary search of a large table's
    /// fences was ~15 dependent probes, the first ten of them cache misses (`perf`:
    /// the fence search was 17–19 % of a get after `settle`, docs/benchmarks.md);
    /// with keys spread evenly (hashed, random or sequential ids) the estimate lands
    /// within a few lines. Skewed keys cost at most twice the binary search's probes.
    fn bracket(&self, kp: u64, below: &impl Fn(usize) -> bool) -> (usize, usize) {
        let len = self.ints.len();
        let (Some(&a), Some(&b)) = (self.ints.first(), self.ints.last()) else {
            return (0, len);
        };
        // Ties at the ends (equal slices, decided by whole keys) and small arrays:
        // the plain binary search.
        if len < INTERPOLATE_FROM || kp <= a || kp >= b {
            return (0, len);
        }
        // a < kp < b, so 0 <= g < len - 1.
        let span = u128::from(b - a);
        let g = usize::try_from(u128::from(kp - a) * (len as u128 - 1) / span).unwrap_or(0);
        let mut step = 1;
        if below(g) {
            // The answer is above g: gallop up until a key is not below.
            let mut last_below = g;
            loop {
                let j = g.saturating_add(step);
                if j >= len {
                    return (last_below + 1, len);
                }
                if !below(j) {
                    return (last_below + 1, j);
                }
                last_below = j;
                step *= 2;
            }
        } else {
            // The answer is at most g: gallop down until a key is below.
            let mut first_not = g;
            loop {
                let Some(j) = g.checked_sub(step) else {
                    return (0, first_not);
                };
                if below(j) {
                    return (j + 1, first_not);
                }
                first_not = j;
                step *= 2;
            }
        }
    }

    /// DRAM these slices take.
    pub(crate) fn dram_bytes(&self) -> usize {
        self.ints.len() * 8 + 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(keys: &[Vec<u8>], probe: &[u8]) {
        let s = Slices::new(keys.iter().map(Vec::as_slice));
        for inclusive in [false, true] {
            let want = keys
                .iter()
                .filter(|k| k.as_slice() < probe || (inclusive && k.as_slice() == probe))
                .count();
            let pfx = keys.first().map_or(&[][..], |k| &k[..s.prefix_len()]);
            let got = s.count_below(|| pfx, probe, inclusive, |i| &keys[i]);
            assert_eq!(
                got, want,
                "probe {probe:?} inclusive {inclusive} keys {keys:?}"
            );
        }
    }

    #[test]
    fn shared_prefixes_short_keys_and_zero_bytes() {
        let mut keys: Vec<Vec<u8>> = [
            &b"key:000000000001"[..],
            b"key:000000000001\0",
            b"key:000000000002",
            b"key:0000000000020",
            b"key:00000001",
            b"key:000001",
        ]
        .iter()
        .map(|k| k.to_vec())
        .collect();
        keys.sort();
        for probe in [
            &b""[..],
            b"k",
            b"key:",
            b"key:0000000000015",
            b"key:000000000001",
            b"key:000000000001\0",
            b"key:000000000001\0\0",
            b"key:00000001",
            b"key:1",
            b"kez",
            b"key:000000000002",
        ] {
            check(&keys, probe);
        }
        check(&[], b"x");
        check(&[b"only".to_vec()], b"only");
        check(&[b"only".to_vec()], b"onl");
        check(&[b"only".to_vec()], b"onlz");
    }

    proptest! {
        /// Long arrays (the interpolation path): evenly spread, clustered and tied
        /// slices, with a shared prefix.
        #[test]
        fn long_arrays_count_as_a_linear_scan_does(
            ints in proptest::collection::btree_set(prop_oneof![
                any::<u64>(),
                0u64..64,
                (u64::MAX - 64)..=u64::MAX,
                (0u64..8).prop_map(|x| x << 40),
            ], 16..300),
            tails in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3), 300),
            probes in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..10)), 20),
        ) {
            // Keys "p" + 8 slice bytes (+ a short tail, so slices tie across keys).
            let mut keys: Vec<Vec<u8>> = ints.iter().zip(&tails).flat_map(|(i, t)| {
                let mut k = b"p".to_vec();
                k.extend_from_slice(&i.to_be_bytes());
                let mut k2 = k.clone();
                k2.extend_from_slice(t);
                [k, k2]
            }).collect();
            keys.sort();
            keys.dedup();
            for (pi, tail) in &probes {
                let mut p = b"p".to_vec();
                p.extend_from_slice(&pi.to_be_bytes());
                p.extend_from_slice(tail);
                check(&keys, &p);
            }
            for k in keys.iter().step_by(7) {
                check(&keys, k);
                let mut more = k.clone();
                more.push(0);
                check(&keys, &more);
                check(&keys, &k[..k.len() - 1]);
            }
        }

        #[test]
        fn counts_as_a_linear_scan_does(
            mut keys in proptest::collection::btree_set(
                proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(b'a'), any::<u8>()], 0..20),
                0..40,
            ).prop_map(|s| s.into_iter().collect::<Vec<_>>()),
            prefix in proptest::collection::vec(any::<u8>(), 0..12),
            probe in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(b'a'), any::<u8>()], 0..24),
        ) {
            // A shared prefix in front of every key, and probes with and without it.
            for k in &mut keys {
                k.splice(0..0, prefix.iter().copied());
            }
            keys.sort();
            check(&keys, &probe);
            let mut with = prefix.clone();
            with.extend_from_slice(&probe);
            check(&keys, &with);
        }
    }
}
