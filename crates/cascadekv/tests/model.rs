//! Model test: random histories of put / delete / batch / get / scan (both directions,
//! and both ends of one iterator interleaved) / iterate / snapshot reads / reopen
//! against a `BTreeMap`, on small FastStores so generation switches happen.

use std::collections::BTreeMap;
use std::ops::Bound;

use cascadekv::{Db, Durability, Options, WriteBatch};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Delete(u16),
    Batch(Vec<(u16, Option<usize>)>),
    Get(u16),
    Scan(u16, u16, usize),
    ScanRev(u16, u16, usize),
    /// Both ends of one iterator; bit i of the pattern: next (0) or next_back (1).
    TwoEnds(u16, u16, u64),
    IterDuringWrites(u16),
    SnapshotGet(u16),
    Reopen,
    Flush,
    Compact,
}

fn key(k: u16) -> Vec<u8> {
    // Mix key lengths: short, 8-byte, and long keys sharing prefixes.
    match k % 3 {
        0 => vec![b'k', (k >> 8) as u8, k as u8],
        1 => format!("key{k:05}").into_bytes(),
        _ => format!("a-much-longer-key-with-a-shared-prefix-{k:05}").into_bytes(),
    }
}

fn value(k: u16, n: usize) -> Vec<u8> {
    // Sizes on both sides of the inline threshold (32).
    let len = [0, 1, 8, 31, 33, 100, 700][n % 7];
    (0..len).map(|i| (k as usize + n + i) as u8).collect()
}

fn ordered(a: u16, b: u16) -> (Vec<u8>, Vec<u8>) {
    if key(a) <= key(b) {
        (key(a), key(b))
    } else {
        (key(b), key(a))
    }
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0u16..300;
    prop_oneof![
        6 => (k.clone(), 0usize..1000).prop_map(|(k, n)| Op::Put(k, n)),
        2 => k.clone().prop_map(Op::Delete),
        2 => proptest::collection::vec((k.clone(), proptest::option::of(0usize..1000)), 1..6).prop_map(Op::Batch),
        3 => k.clone().prop_map(Op::Get),
        1 => (k.clone(), k.clone(), 1usize..50).prop_map(|(a, b, l)| Op::Scan(a, b, l)),
        1 => (k.clone(), k.clone(), 1usize..50).prop_map(|(a, b, l)| Op::ScanRev(a, b, l)),
        1 => (k.clone(), k.clone(), any::<u64>()).prop_map(|(a, b, p)| Op::TwoEnds(a, b, p)),
        1 => k.clone().prop_map(Op::IterDuringWrites),
        1 => k.prop_map(Op::SnapshotGet),
        1 => Just(Op::Reopen),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
    ]
}

/// Tiny stages so every path runs: small FastStores, 256 B blocks, 1 KiB tables.
/// `background` = flush and compaction threads on (timing-dependent interleavings)
/// or off (only the explicit Flush / Compact operations move data). `hash_index`:
/// HiKV's hybrid FastStore index instead of the tree alone.
fn opts(background: bool, hash_index: bool) -> Options {
    Options {
        hash_index,
        pool_size: 64 << 20,
        chunk_size: 64 << 10,
        faststore_capacity: 64 << 10,
        inline_threshold: 32,
        log_slots: 4,
        block_size: 256,
        table_max_bytes: 1024,
        buffer_trees_write_heavy: 3,
        compaction_threads: 2,
        background,
        ..Options::default()
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    check_with(ops.clone(), false, false)?;
    check_with(ops.clone(), true, false)?;
    check_with(ops, true, true)
}

fn check_with(ops: Vec<Op>, background: bool, hash_index: bool) -> Result<(), TestCaseError> {
    let opts = || opts(background, hash_index);
    let dir = std::env::temp_dir().join(format!(
        "ckv-model-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut db = Some(Db::open(&dir, opts()).map_err(|e| TestCaseError::fail(e.to_string()))?);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let fail = |e: cascadekv::Error| TestCaseError::fail(e.to_string());
    for op in ops {
        let d = db.as_ref().ok_or_else(|| TestCaseError::fail("no db"))?;
        match op {
            Op::Put(k, n) => {
                d.put_with(&key(k), &value(k, n), Durability::Buffered)
                    .map_err(fail)?;
                model.insert(key(k), value(k, n));
            }
            Op::Delete(k) => {
                d.delete(&key(k)).map_err(fail)?;
                model.remove(&key(k));
            }
            Op::Batch(items) => {
                let mut b = WriteBatch::new();
                for (k, v) in &items {
                    match v {
                        Some(n) => {
                            b.put(key(*k), value(*k, *n));
                            model.insert(key(*k), value(*k, *n));
                        }
                        None => {
                            b.delete(key(*k));
                            model.remove(&key(*k));
                        }
                    }
                }
                d.write(&b).map_err(fail)?;
            }
            Op::Get(k) => {
                prop_assert_eq!(d.get(&key(k)).map_err(fail)?, model.get(&key(k)).cloned());
            }
            Op::Scan(a, b, limit) => {
                let (lo, hi) = if key(a) <= key(b) {
                    (key(a), key(b))
                } else {
                    (key(b), key(a))
                };
                let got = d.scan(Some(&lo), Some(&hi), limit).map_err(fail)?;
                let want: Vec<_> = model
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Excluded(&hi)))
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, want);
            }
            Op::ScanRev(a, b, limit) => {
                let (lo, hi) = ordered(a, b);
                let got: Vec<_> = d
                    .iter(lo.clone()..hi.clone())
                    .map_err(fail)?
                    .rev()
                    .take(limit)
                    .collect::<Result<_, _>>()
                    .map_err(fail)?;
                let want: Vec<_> = model
                    .range(lo..hi)
                    .rev()
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, want);
            }
            Op::TwoEnds(a, b, pattern) => {
                let (lo, hi) = ordered(a, b);
                let mut want: std::collections::VecDeque<_> = model
                    .range(lo.clone()..=hi.clone())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut it = d.iter(lo..=hi).map_err(fail)?;
                for i in 0..(want.len() + 2) {
                    let (got, expect) = if (pattern >> (i % 64)) & 1 == 0 {
                        (it.next(), want.pop_front())
                    } else {
                        (it.next_back(), want.pop_back())
                    };
                    prop_assert_eq!(got.transpose().map_err(fail)?, expect, "step {}", i);
                }
            }
            Op::SnapshotGet(k) => {
                let snap = d.snapshot().map_err(fail)?;
                let before = model.get(&key(k)).cloned();
                d.put(&key(k), b"after-the-snapshot").map_err(fail)?;
                model.insert(key(k), b"after-the-snapshot".to_vec());
                prop_assert_eq!(snap.get(&key(k)).map_err(fail)?, before);
                let now = d.get(&key(k)).map_err(fail)?;
                prop_assert_eq!(now.as_deref(), Some(&b"after-the-snapshot"[..]));
            }
            Op::IterDuringWrites(k) => {
                // The iterator sees the snapshot taken at its creation, not later writes.
                let snapshot = model.clone();
                let mut it = d.iter(..).map_err(fail)?;
                let first = it.next();
                d.put(&key(k), b"written-after-the-snapshot")
                    .map_err(fail)?;
                d.delete(&key(k.wrapping_add(1) % 300)).map_err(fail)?;
                model.insert(key(k), b"written-after-the-snapshot".to_vec());
                model.remove(&key(k.wrapping_add(1) % 300));
                let mut got = Vec::new();
                if let Some(f) = first {
                    got.push(f.map_err(fail)?);
                }
                for kv in it {
                    got.push(kv.map_err(fail)?);
                }
                let want: Vec<_> = snapshot.into_iter().collect();
                prop_assert_eq!(got, want);
            }
            Op::Reopen => {
                drop(db.take());
                db = Some(Db::open(&dir, opts()).map_err(fail)?);
            }
            Op::Flush => d.flush_faststore().map_err(fail)?,
            Op::Compact => {
                d.compact().map_err(fail)?;
            }
        }
    }
    // Final full comparison, then once more after a reopen.
    for round in 0..2 {
        let d = db.as_ref().ok_or_else(|| TestCaseError::fail("no db"))?;
        let all: Vec<_> = d
            .iter(..)
            .map_err(fail)?
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(&all, &want, "round {}", round);
        let mut rev: Vec<_> = d
            .iter(..)
            .map_err(fail)?
            .rev()
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        rev.reverse();
        prop_assert_eq!(rev, want, "reverse, round {}", round);
        drop(db.take());
        db = Some(Db::open(&dir, opts()).map_err(fail)?);
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        check(ops)?;
    }
}

#[test]
fn many_switches_then_reopen() -> Result<(), TestCaseError> {
    // A long deterministic history that crosses many FastStore generations.
    let mut ops = Vec::new();
    for i in 0..6000u32 {
        let k = (i.wrapping_mul(7919) % 300) as u16;
        ops.push(match i % 11 {
            0 => Op::Delete(k),
            5 => Op::Scan(k, k.wrapping_add(40) % 300, 20),
            7 => Op::ScanRev(k, k.wrapping_add(90) % 300, 30),
            9 => Op::TwoEnds(k, k.wrapping_add(60) % 300, u64::from(i) * 0x9E37_79B9),
            _ => Op::Put(k, i as usize),
        });
        if i % 700 == 0 {
            ops.push(Op::Flush);
        }
        if i % 2100 == 0 {
            ops.push(Op::Compact);
        }
        if i % 1500 == 0 {
            ops.push(Op::Reopen);
        }
    }
    check(ops)
}
