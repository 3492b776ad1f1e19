//! Tests of the optimistic index: against a `BTreeMap` model (sequential property
//! tests and many-thread stress with tiny nodes, so nearly every insert splits), plus
//! Algorithm 1, snapshots and bulk loading (key shapes: `key_tests.rs`).
//!
//! These tests also run under `AddressSanitizer` in CI (scripts/test.sh), so a
//! use-after-free in reclamation or a read past a node would fail them.

// Tests index with small integers converted from `u64`, on 64-bit targets only.
#![allow(clippy::cast_possible_truncation)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;

use super::Olc;
use crate::epoch::Snapshots;
use crate::faststore::ikey::IKey;
use crate::faststore::version::{ver, Val, Version};
use crate::faststore::PutOutcome;

/// A heap value (not inline), so a use-after-free of a replaced version is visible to
/// the sanitizer.
fn heap_ver(lsn: u64) -> Version {
    Version {
        lsn,
        epoch: 1,
        val: Val::Heap(vec![(lsn % 251) as u8; 24].into()),
    }
}

/// A version whose value is a function of its LSN, of every kind the index stores:
/// heap (a new entry per put), ≤ 16 B inline and log address (rewritten in place), and
/// tombstones. [`whole`] checks a read version against it, so a torn in-place read (one
/// put's LSN with another's value) fails.
fn mixed_ver(lsn: u64) -> Version {
    let val = match lsn % 5 {
        0 => return heap_ver(lsn),
        1 => Val::inline(&[lsn.to_le_bytes(), (!lsn).to_le_bytes()].concat()),
        2 => Val::Addr(crate::value::ValuePtr {
            addr: lsn.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            len: lsn as u32,
        }),
        3 => Val::inline(&lsn.to_be_bytes()[..(lsn % 8) as usize]),
        _ => Val::Tomb,
    };
    Version { lsn, epoch: 1, val }
}

/// True if `v` is exactly the version [`mixed_ver`] makes for its LSN.
fn whole(v: &Version) -> bool {
    *v == mixed_ver(v.lsn)
}

pub(super) fn all(i: &Olc) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    i.for_each(|k, v| out.push((k.to_vec(), v.lsn)));
    out
}

pub(super) fn range(
    i: &Olc,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    batch: usize,
    rev: bool,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let (mut lo_o, mut hi_o): (Bound<Vec<u8>>, Bound<Vec<u8>>) =
        (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec));
    loop {
        let mut out = Vec::new();
        let last = if rev {
            i.collect_range_rev(
                lo_o.as_ref().map(Vec::as_slice),
                hi_o.as_ref().map(Vec::as_slice),
                u64::MAX,
                batch,
                &mut out,
            )
        } else {
            i.collect_range(
                lo_o.as_ref().map(Vec::as_slice),
                hi_o.as_ref().map(Vec::as_slice),
                u64::MAX,
                batch,
                &mut out,
            )
        };
        got.extend(out.into_iter().map(|(k, _)| k.to_vec()));
        match last {
            Some(l) if rev => hi_o = Bound::Excluded(l.to_vec()),
            Some(l) => lo_o = Bound::Excluded(l.to_vec()),
            None => return got,
        }
    }
}

pub(super) fn model_range(
    m: &BTreeMap<Vec<u8>, u64>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    rev: bool,
) -> Vec<Vec<u8>> {
    if crate::faststore::ikey::bounds_empty(lo, hi) {
        return Vec::new(); // `BTreeMap::range` panics on such bounds
    }
    let r = m.range::<[u8], _>((lo, hi)).map(|(k, _)| k.clone());
    if rev {
        r.rev().collect()
    } else {
        r.collect()
    }
}

#[test]
fn newest_lsn_wins_in_any_arrival_order() {
    let s = Snapshots::default();
    let i = Olc::new();
    assert_eq!(
        i.put_validate(b"k", ver(5, 1, b"five"), &s),
        PutOutcome::Inserted
    );
    assert_eq!(
        i.put_validate(b"k", ver(3, 1, b"three"), &s),
        PutOutcome::Stale
    );
    assert_eq!(
        i.put_validate(b"k", ver(5, 1, b"again"), &s),
        PutOutcome::Stale
    );
    assert_eq!(
        i.put_validate(b"k", ver(9, 1, b"nine"), &s),
        PutOutcome::Replaced
    );
    assert_eq!(i.get(b"k").map(|v| v.val), Some(Val::inline(b"nine")));
    assert!(i.remove(b"k"));
    assert!(!i.remove(b"k"));
    assert_eq!(i.get(b"k"), None);
    assert!(i.is_empty());
}

#[test]
fn snapshots_keep_the_versions_they_see() {
    let s = Snapshots::default();
    let i = Olc::new();
    i.put_validate(b"a", ver(1, s.write_epoch(), b"old"), &s);
    let snap = s.acquire();
    i.put_validate(b"a", ver(2, s.write_epoch(), b"new"), &s);
    i.put_validate(b"b", ver(3, s.write_epoch(), b"born later"), &s);
    assert_eq!(
        i.get_at(b"a", snap).map(|v| v.val),
        Some(Val::inline(b"old"))
    );
    assert_eq!(i.get_at(b"b", snap), None);
    assert_eq!(i.get(b"a").map(|v| v.val), Some(Val::inline(b"new")));
    let mut out = Vec::new();
    i.collect_range(Bound::Unbounded, Bound::Unbounded, snap, 10, &mut out);
    assert_eq!(out.len(), 1, "b has no version at the snapshot");
    s.release(snap);
    i.put_validate(b"a", ver(4, s.write_epoch(), b"newest"), &s);
    assert_eq!(i.get_at(b"a", snap).map(|v| v.lsn), None);
}

#[test]
fn bulk_load_then_insert_and_scan() {
    let s = Snapshots::default();
    for (caps, n) in [
        ((32, 32), 0u64),
        ((32, 32), 1),
        ((32, 32), 47),
        ((3, 2), 500),
        ((32, 32), 40_000),
    ] {
        let i = Olc::with_caps(caps.0, caps.1);
        i.put_validate(b"replaced by the load", ver(1, 1, b"x"), &s);
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|j| format!("k{:08}", j * 2).into_bytes())
            .collect();
        i.bulk_load(
            keys.iter()
                .enumerate()
                .map(|(j, k)| (IKey::new(k), ver(j as u64 + 1, 0, b"v"))),
        );
        assert_eq!(i.len() as u64, n);
        for (j, k) in keys.iter().enumerate().step_by(7) {
            assert_eq!(i.get(k).map(|v| v.lsn), Some(j as u64 + 1));
        }
        for j in 0..n.min(3000) {
            let k = format!("k{:08}", j * 2 + 1).into_bytes();
            assert_eq!(
                i.put_validate(&k, ver(1, 1, b"x"), &s),
                PutOutcome::Inserted
            );
        }
        let mut want = keys.clone();
        want.extend((0..n.min(3000)).map(|j| format!("k{:08}", j * 2 + 1).into_bytes()));
        want.sort();
        assert_eq!(
            all(&i).into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            want,
            "n = {n}"
        );
        let rev = range(&i, Bound::Unbounded, Bound::Unbounded, 10, true);
        assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, u64),
    Remove(Vec<u8>),
    Range(Vec<u8>, Vec<u8>, bool),
}

fn op() -> impl Strategy<Value = Op> {
    let key = proptest::collection::vec(0u8..4, 0..12);
    prop_oneof![
        4 => (key.clone(), 1u64..50).prop_map(|(k, l)| Op::Put(k, l)),
        1 => key.clone().prop_map(Op::Remove),
        1 => (key.clone(), key, any::<bool>()).prop_map(|(a, b, r)| Op::Range(a, b, r)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any sequence of puts (Algorithm 1: only a newer LSN replaces), removes and
    /// ranges on tiny nodes answers as a `BTreeMap` does.
    #[test]
    fn matches_a_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let s = Snapshots::default();
        let i = Olc::with_caps(2, 2);
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for o in ops {
            match o {
                Op::Put(k, l) => {
                    let want = match m.get(&k) {
                        None => PutOutcome::Inserted,
                        Some(&old) if old < l => PutOutcome::Replaced,
                        Some(_) => PutOutcome::Stale,
                    };
                    prop_assert_eq!(i.put_validate(&k, mixed_ver(l), &s), want);
                    if want != PutOutcome::Stale {
                        m.insert(k, l);
                    }
                }
                Op::Remove(k) => prop_assert_eq!(i.remove(&k), m.remove(&k).is_some()),
                Op::Range(a, b, rev) => {
                    let (lo, hi) = (Bound::Included(&a[..]), Bound::Excluded(&b[..]));
                    prop_assert_eq!(range(&i, lo, hi, 3, rev), model_range(&m, lo, hi, rev));
                }
            }
        }
        prop_assert_eq!(all(&i), m.into_iter().collect::<Vec<_>>());
    }
}

/// Threads race on tiny nodes: each owns the keys `k % THREADS == t` (puts with rising
/// LSNs, removes) and checks its own keys, while every thread also scans and reads
/// everyone's keys. All threads also race on a few shared keys, where the newest LSN
/// must win. At the end the index equals the union of the threads' models.
#[test]
fn racing_threads_on_tiny_nodes_match_the_model() {
    const THREADS: u64 = 8;
    const OPS: u64 = if cfg!(debug_assertions) {
        4_000
    } else {
        12_000
    };
    const KEYS: u64 = 3_000;
    let s = Arc::new(Snapshots::default());
    let i = Arc::new(Olc::with_caps(3, 3));
    let lsn = Arc::new(AtomicU64::new(1));
    let key = |k: u64| -> Vec<u8> {
        // Mixed lengths: 8-byte big-endian and longer keys sharing a prefix.
        if k.is_multiple_of(2) {
            k.to_be_bytes().to_vec()
        } else {
            format!("shared-prefix-{k:06}").into_bytes()
        }
    };
    let models: Vec<BTreeMap<Vec<u8>, u64>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (s, i, lsn) = (s.clone(), i.clone(), lsn.clone());
                sc.spawn(move || {
                    let mut m = BTreeMap::new();
                    let mut x = t * 7919 + 1;
                    for n in 0..OPS {
                        x = x
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        let k = (x >> 33) % KEYS / THREADS * THREADS + t;
                        let kb = key(k);
                        let l = lsn.fetch_add(1, Ordering::Relaxed);
                        if n % 5 == 4 {
                            assert_eq!(i.remove(&kb), m.remove(&kb).is_some());
                            assert_eq!(i.get(&kb), None);
                        } else {
                            let out = i.put_validate(&kb, mixed_ver(l), &s);
                            assert_eq!(
                                out == PutOutcome::Inserted,
                                m.insert(kb.clone(), l).is_none()
                            );
                            assert_eq!(i.get(&kb), Some(mixed_ver(l)));
                        }
                        // A shared key: the newest LSN wins, read whole.
                        let sk = key(KEYS + n % 4);
                        i.put_validate(&sk, mixed_ver(l), &s);
                        assert!(i.get(&sk).is_some_and(|v| v.lsn >= l && whole(&v)));
                        if n % 64 == 0 {
                            // Someone else's key: any answer, but no crash; a scan in
                            // order without duplicates, both directions.
                            let _ = i.get(&key((x >> 20) % KEYS));
                            let lo = key((x >> 12) % KEYS);
                            let rev = n % 128 == 0;
                            let mut out = Vec::new();
                            if rev {
                                i.collect_range_rev(
                                    Bound::Unbounded,
                                    Bound::Included(&lo),
                                    u64::MAX,
                                    40,
                                    &mut out,
                                );
                            } else {
                                i.collect_range(
                                    Bound::Included(&lo),
                                    Bound::Unbounded,
                                    u64::MAX,
                                    40,
                                    &mut out,
                                );
                            }
                            assert!(out.iter().all(|(_, v)| whole(v)), "torn scan");
                            let ks: Vec<&[u8]> = out.iter().map(|(k, _)| &k[..]).collect();
                            assert!(
                                ks.windows(2)
                                    .all(|w| if rev { w[0] > w[1] } else { w[0] < w[1] }),
                                "scan order"
                            );
                        }
                    }
                    m
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut want: BTreeMap<Vec<u8>, u64> = models.into_iter().flatten().collect();
    let got = all(&i);
    // The shared keys: each holds the largest LSN any thread put there.
    for (k, l) in &got {
        if let Some(n) = (0..4).find(|n| key(KEYS + n) == *k) {
            let last = lsn.load(Ordering::Relaxed);
            assert!(*l < last, "shared key {n}");
            want.insert(k.clone(), *l);
        }
    }
    assert_eq!(got, want.into_iter().collect::<Vec<_>>());
    let back = range(&i, Bound::Unbounded, Bound::Unbounded, 17, true);
    assert_eq!(back.len(), got.len());
    assert!(back.iter().rev().eq(got.iter().map(|(k, _)| k)));
}

/// Writers race on the same few keys with interleaved LSNs: each key ends with the
/// largest LSN put, whatever the arrival order.
#[test]
fn racing_writers_keep_the_newest_lsn() {
    const THREADS: u64 = 6;
    const PUTS: u64 = 5_000;
    let s = Arc::new(Snapshots::default());
    let i = Arc::new(Olc::with_caps(2, 2));
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let (s, i) = (s.clone(), i.clone());
            sc.spawn(move || {
                for n in 0..PUTS {
                    let k = (n % 97).to_be_bytes();
                    i.put_validate(&k, mixed_ver(n * THREADS + t + 1), &s);
                }
            });
        }
    });
    for k in 0..97u64 {
        let last = (0..PUTS).filter(|n| n % 97 == k).max().unwrap_or(0);
        assert_eq!(
            i.get(&k.to_be_bytes()).map(|v| v.lsn),
            Some(last * THREADS + THREADS)
        );
    }
}

/// `bulk_load` racing puts that split and grow the root: memory-safe (each node is freed
/// once at drop, checked by the sanitizer run) and the loaded keys are all there.
#[test]
fn bulk_load_racing_puts_stays_sound() {
    let s = Arc::new(Snapshots::default());
    let i = Arc::new(Olc::with_caps(2, 2));
    std::thread::scope(|sc| {
        for t in 0..3u64 {
            let (s, i) = (s.clone(), i.clone());
            sc.spawn(move || {
                for n in 0..2_000u64 {
                    i.put_validate(&(n * 3 + t).to_be_bytes(), mixed_ver(n + 1), &s);
                }
            });
        }
        for round in 0..20u64 {
            let keys: Vec<Vec<u8>> = (0..50u64)
                .map(|j| format!("load{round:02}-{j:03}").into_bytes())
                .collect();
            i.bulk_load(keys.iter().map(|k| (IKey::new(k), heap_ver(1))));
        }
    });
    for j in 0..50u64 {
        assert!(i.get(format!("load19-{j:03}").as_bytes()).is_some());
    }
}

/// Update-heavy mix on tiny nodes: writers rewrite a small set of hot keys (most puts
/// replace a fixed-size version in place, every fifth allocates a heap entry) while
/// one thread keeps inserting fresh keys into the same leaves (splits that move the hot
/// entries between leaves) and readers get and scan the hot keys. Every read is whole
/// (its value is the one its LSN was put with), each reader sees a key's LSN only rise
/// (newest wins and reads are never older than an earlier read), and at the end each
/// hot key holds the largest LSN put and the model of the inserted keys matches.
#[test]
fn update_heavy_mix_reads_whole_versions() {
    const WRITERS: u64 = 3;
    const HOT: u64 = 24;
    const PUTS: u64 = 4_000;
    let s = Arc::new(Snapshots::default());
    let i = Arc::new(Olc::with_caps(3, 3));
    let hot = |k: u64| (k * 2).to_be_bytes();
    for k in 0..HOT {
        i.put_validate(&hot(k), mixed_ver(k + 1), &s);
    }
    let lsn = Arc::new(AtomicU64::new(HOT + 1));
    let done = Arc::new(AtomicU64::new(0));
    let newest: Vec<Vec<u64>> = std::thread::scope(|sc| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let (s, i, lsn, done) = (s.clone(), i.clone(), lsn.clone(), done.clone());
                sc.spawn(move || {
                    let mut max = vec![0u64; HOT as usize];
                    for n in 0..PUTS {
                        let l = lsn.fetch_add(1, Ordering::Relaxed);
                        let k = (n * 7 + t * 5) % HOT;
                        i.put_validate(&hot(k), mixed_ver(l), &s);
                        max[k as usize] = l;
                    }
                    done.fetch_add(1, Ordering::Release);
                    max
                })
            })
            .collect();
        {
            let (s, i, done) = (s.clone(), i.clone(), done.clone());
            sc.spawn(move || {
                // Odd keys between the hot (even) ones: inserts split the hot leaves.
                let mut n = 0u64;
                while done.load(Ordering::Acquire) < WRITERS && n < 3_000 {
                    i.put_validate(&(n * 2 + 1).to_be_bytes(), mixed_ver(1), &s);
                    n += 1;
                }
            });
        }
        for r in 0..2u64 {
            let (i, done) = (i.clone(), done.clone());
            sc.spawn(move || {
                let mut last = vec![0u64; HOT as usize];
                let mut n = 0u64;
                while done.load(Ordering::Acquire) < WRITERS {
                    let k = (n + r) % HOT;
                    let v = i.get(&hot(k)).unwrap_or_else(|| panic!("hot key {k} lost"));
                    assert!(whole(&v), "torn get: {v:?}");
                    assert!(v.lsn >= last[k as usize], "LSN went back");
                    last[k as usize] = v.lsn;
                    if n.is_multiple_of(16) {
                        let mut out = Vec::new();
                        let (lo, hi) = (Bound::Unbounded, Bound::Unbounded);
                        i.collect_range(lo, hi, u64::MAX, 64, &mut out);
                        assert!(out.iter().all(|(_, v)| whole(v)), "torn scan");
                    }
                    n += 1;
                }
            });
        }
        writers
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    // Each hot key holds the largest LSN any writer put there (Algorithm 1), whole.
    for k in 0..HOT {
        let want = newest.iter().map(|m| m[k as usize]).max().unwrap_or(0);
        assert_eq!(i.get(&hot(k)), Some(mixed_ver(want)), "hot key {k}");
        let older = mixed_ver(want - 1);
        assert_eq!(i.put_validate(&hot(k), older, &s), PutOutcome::Stale);
    }
}
