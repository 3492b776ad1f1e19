//! Key shapes in the optimistic index: short keys over a tiny alphabet (slices tie,
//! keys are prefixes of each other), YCSB-like keys with a long shared prefix, long
//! keys, and short keys whose leaves split deep enough that `skip` grows (the
//! split copies shifted slices instead of reading the moved entries, `write.rs`).
//! Checked against a `BTreeMap`; these also run under `AddressSanitizer` in CI.

// Tests index with small integers converted from `u64`, on 64-bit targets only.
#![allow(clippy::cast_possible_truncation)]

use std::collections::BTreeMap;
use std::ops::Bound;

use super::tests::{all, model_range, range};
use super::Olc;
use crate::epoch::Snapshots;
use crate::faststore::version::ver;

/// Xorshift step.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Puts `k` (LSN `n + 1`) into the index and the model; every `every`-th step also
/// removes a key `x` picks from both (and checks both agreed it was there).
fn put_then_remove(
    i: &Olc,
    model: &mut BTreeMap<Vec<u8>, u64>,
    s: &Snapshots,
    k: Vec<u8>,
    n: u64,
    x: u64,
    every: u64,
) {
    i.put_validate(&k, ver(n + 1, 1, &n.to_le_bytes()), s);
    model.insert(k, n + 1);
    if n.is_multiple_of(every) {
        let r = model
            .keys()
            .nth((x % model.len() as u64) as usize)
            .cloned()
            .unwrap_or_default();
        assert_eq!(i.remove(&r), model.remove(&r).is_some());
    }
}

/// Every key of `model` reads back with its LSN, in order, with the right count, and
/// ranges in both directions match the model's.
fn check(i: &Olc, model: &BTreeMap<Vec<u8>, u64>, extra: &[(&[u8], &[u8])]) {
    assert_eq!(
        all(i),
        model
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect::<Vec<_>>()
    );
    assert_eq!(i.len(), model.len());
    for (k, v) in model.iter().step_by(13) {
        assert_eq!(i.get(k).map(|x| x.lsn), Some(*v));
    }
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let (a, b) = (
        keys[keys.len() / 5].as_slice(),
        keys[keys.len() * 3 / 5].as_slice(),
    );
    let mut bounds = vec![
        (Bound::Included(a), Bound::Excluded(b)),
        (Bound::Excluded(a), Bound::Included(b)),
        (Bound::Unbounded, Bound::Unbounded),
        (Bound::Unbounded, Bound::Included(a)),
    ];
    bounds.extend(
        extra
            .iter()
            .map(|(l, h)| (Bound::Included(*l), Bound::Excluded(*h))),
    );
    for (lo, hi) in bounds {
        for rev in [false, true] {
            assert_eq!(
                range(i, lo, hi, 257, rev),
                model_range(model, lo, hi, rev),
                "{lo:?}..{hi:?} rev={rev}"
            );
        }
    }
}

#[test]
fn many_keys_of_every_shape_stay_ordered() {
    let s = Snapshots::default();
    for (leaf, inner) in [(32, 32), (3, 2), (5, 4)] {
        let i = Olc::with_caps(leaf, inner);
        let mut model = BTreeMap::new();
        let mut x: u64 = 7;
        // Fewer keys in the unoptimized (sanitizer) build of CI.
        let keys = if cfg!(debug_assertions) {
            8_000
        } else {
            40_000u64
        };
        for n in 0..keys {
            next(&mut x);
            // Short keys over a tiny alphabet (slices tie, keys are prefixes of each
            // other), YCSB-like keys with a long shared prefix, long keys.
            let k: Vec<u8> = match n % 3 {
                0 => (0..(x % 20) as usize)
                    .map(|j| x.to_le_bytes()[j % 8] % 4)
                    .collect(),
                1 => format!("user{:020}", x % 100_000).into_bytes(),
                _ => format!("{}{}", "p".repeat(300), x % 5000).into_bytes(),
            };
            put_then_remove(&i, &mut model, &s, k, n, x, 7);
        }
        check(&i, &model, &[(b"user0000", b"user1")]);
    }
}

/// Short keys only, so leaves split with `max_len <= skip + 8` and the right half's
/// slices are shifted copies: random 8-byte keys (skip grows by a byte or two), and
/// 9–10-byte keys over a few 8-byte heads (skip grows past 8, slices become 0 or the
/// last bytes), with removes and re-inserts between.
#[test]
fn short_keys_split_with_shifted_slices() {
    let s = Snapshots::default();
    for (leaf, inner) in [(32, 32), (3, 2), (4, 3)] {
        for shape in 0..2 {
            let i = Olc::with_caps(leaf, inner);
            let mut model = BTreeMap::new();
            let mut x: u64 = 11 + shape;
            let keys = if cfg!(debug_assertions) {
                6_000
            } else {
                30_000u64
            };
            for n in 0..keys {
                let r = next(&mut x);
                let k: Vec<u8> = if shape == 0 {
                    r.to_be_bytes().to_vec()
                } else {
                    let mut k = (r % 3)
                        .wrapping_mul(0x0101_0101_0101_0101)
                        .to_be_bytes()
                        .to_vec();
                    k.extend_from_slice(&(r >> 8).to_be_bytes()[..=((r >> 2) as usize % 2)]);
                    k
                };
                put_then_remove(&i, &mut model, &s, k, n, x, 5);
            }
            check(&i, &model, &[]);
        }
    }
}
