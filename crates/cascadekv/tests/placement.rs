//! Popularity-aware placement (issue #15, `placement/`): keys read often stay in the
//! fast tier when demotion moves their neighbours down, hot keys found in the slow
//! tier are promoted back, and neither ever changes what a read returns — before and
//! after a reopen.

use std::collections::BTreeMap;
use std::path::Path;

use cascadekv::{Db, DemotionPolicy, Options};

#[path = "common/slowdirs.rs"]
mod slowdirs;
use slowdirs::Dirs;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("user{:010}", i.wrapping_mul(0x9E37_79B9) % 10_000_000_000).into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    let mut v = format!("v{i}-r{round}-").into_bytes();
    v.resize(400, b'a' + (i % 26) as u8);
    v
}

fn opts(slow: &Path, pin_fraction: f64, policy: DemotionPolicy) -> Options {
    Options {
        pin_fraction,
        demotion_policy: policy,
        promote_epoch_ops: 500,
        promote_cooldown_ops: 100_000,
        ..slowdirs::opts(slow, 4, 2 << 20)
    }
}

fn check(db: &Db, model: &Model) -> cascadekv::Result<()> {
    for (k, v) in model {
        assert_eq!(
            db.get(k)?.as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter(..)?.collect::<cascadekv::Result<_>>()?;
    assert_eq!(all.len(), model.len());
    assert!(all
        .iter()
        .zip(model)
        .all(|(a, (k, v))| a.0 == *k && a.1 == *v));
    Ok(())
}

/// Gets of `keys` the slow tier answered.
fn slow_gets(db: &Db, keys: &[Vec<u8>]) -> cascadekv::Result<u64> {
    let before = db.stats().slow_gets;
    for k in keys {
        assert!(db.get(k)?.is_some());
    }
    Ok(db.stats().slow_gets - before)
}

/// The first `n` of the 4000 keys whose get the slow tier answers now (each read
/// once, so it is tracked with its location).
fn served_by_slow_tier(db: &Db, n: usize) -> cascadekv::Result<Vec<Vec<u8>>> {
    let mut hot = Vec::new();
    for i in 0..4000u64 {
        if hot.len() < n && slow_gets(db, &[key(i)])? == 1 {
            hot.push(key(i));
        }
    }
    assert_eq!(hot.len(), n);
    Ok(hot)
}

/// Writes 2000 keys, then rounds of 800 new keys each while a hot set of 200 is read
/// between rounds; each round is flushed and compacted (demoting past the budget).
/// Returns the model and the hot keys.
fn workload(db: &Db) -> cascadekv::Result<(Model, Vec<Vec<u8>>)> {
    let mut model = Model::new();
    let hot: Vec<Vec<u8>> = (0..200u64).map(|i| key(i * 10)).collect();
    for i in 0..2000u64 {
        db.put(&key(i), &value(i, 0))?;
        model.insert(key(i), value(i, 0));
    }
    for r in 1..=5u64 {
        for _ in 0..3 {
            for k in &hot {
                assert!(db.get(k)?.is_some());
            }
        }
        for i in 0..800u64 {
            let n = 2000 + (r - 1) * 800 + i;
            db.put(&key(n), &value(n, r))?;
            model.insert(key(n), value(n, r));
        }
        db.flush_faststore()?;
        db.compact()?;
    }
    for k in &hot {
        assert!(db.get(k)?.is_some());
    }
    db.flush_faststore()?;
    db.compact()?;
    Ok((model, hot))
}

/// With pinning, the hot set stays in the fast tier while most data sinks; without it
/// (issue #14's key-order demotion), the same workload leaves most of the hot set in
/// the slow tier. Data reads back exactly either way, and after a reopen.
#[test]
fn hot_keys_stay_in_the_fast_tier() -> cascadekv::Result<()> {
    let mut misses = Vec::new();
    for (pin, policy) in [
        (0.7, DemotionPolicy::Msc),
        (0.7, DemotionPolicy::Random),
        (0.0, DemotionPolicy::KeyOrder),
    ] {
        let d = Dirs::new(&format!("place-hot-{policy:?}"));
        let o = opts(&d.slow(), pin, policy);
        let db = Db::open(d.data(), o.clone())?;
        let (model, hot) = workload(&db)?;
        let st = db.stats();
        assert!(st.slow_tier_entries > 3000, "most data sank: {st:?}");
        let n = slow_gets(&db, &hot)?;
        misses.push(n);
        if pin > 0.0 {
            assert!(st.kept_entries > 0 && st.tracker_keys > 0, "{st:?}");
            assert!(st.pinned_fraction > 0.0);
        }
        check(&db, &model)?;
        db.close()?;
        drop(db);
        let db = Db::open(d.data(), o)?;
        check(&db, &model)?;
        db.close()?;
    }
    // 200 hot keys: pinned, at most a few reach the slow tier; unpinned, most do.
    assert!(misses[0] <= 10, "msc: {misses:?}");
    assert!(misses[1] <= 10, "random: {misses:?}");
    assert!(misses[2] >= 100, "key order without pinning: {misses:?}");
    Ok(())
}

/// Keys that sank and then became hot are promoted by read-triggered epochs, an
/// eighth of the budget per epoch while each raises the fast tier's share of gets:
/// after them the fast tier serves most of the hot keys, and the data is unchanged, also after a
/// reopen and after later writes and demotions.
#[test]
fn hot_keys_in_the_slow_tier_are_promoted() -> cascadekv::Result<()> {
    let d = Dirs::new("place-promote");
    let o = opts(&d.slow(), 0.7, DemotionPolicy::Msc);
    let db = Db::open(d.data(), o.clone())?;
    let mut model = Model::new();
    for i in 0..4000u64 {
        db.put(&key(i), &value(i, 0))?;
        model.insert(key(i), value(i, 0));
    }
    db.flush_faststore()?;
    db.compact()?;
    // The hot set: 600 keys the slow tier holds now.
    let hot = served_by_slow_tier(&db, 600)?;
    assert_eq!(slow_gets(&db, &hot)?, 600);
    // Epochs of 500 operations: each may promote an eighth of the budget, and
    // another follows while the fast tier's share of gets keeps rising.
    for _ in 0..12 {
        slow_gets(&db, &hot)?;
        db.compact()?;
    }
    let st = db.stats();
    assert!(st.promotions >= 300, "{st:?}");
    assert!(st.read_epochs >= 1);
    let n = slow_gets(&db, &hot)?;
    assert!(
        n <= 300,
        "{n} of 600 promoted keys still read from the slow tier"
    );
    check(&db, &model)?;
    // Overwrites and deletes after the promotion win over the promoted copies.
    for (j, k) in hot.iter().enumerate().take(100) {
        if j % 2 == 0 {
            db.delete(k)?;
            model.remove(k);
        } else {
            db.put(k, b"new")?;
            model.insert(k.clone(), b"new".to_vec());
        }
    }
    db.flush_faststore()?;
    db.compact()?;
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let db = Db::open(d.data(), o)?;
    check(&db, &model)?;
    db.close()?;
    Ok(())
}

/// With the background threads running (no manual compaction): demotion keeps the
/// store near its budget, read-triggered epochs promote the hot keys the slow tier
/// serves, and every value stays exact while they do.
#[test]
fn background_threads_promote_while_serving() -> cascadekv::Result<()> {
    let d = Dirs::new("place-bg");
    let o = Options {
        background: true,
        ..opts(&d.slow(), 0.7, DemotionPolicy::Msc)
    };
    let db = Db::open(d.data(), o)?;
    let mut model = Model::new();
    for i in 0..4000u64 {
        db.put(&key(i), &value(i, 0))?;
        model.insert(key(i), value(i, 0));
    }
    db.flush_faststore()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().slow_tier_entries < 3000 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The hot set: 400 keys the slow tier serves now.
    let hot = served_by_slow_tier(&db, 400)?;
    while db.stats().promotions == 0 && std::time::Instant::now() < deadline {
        for k in &hot {
            assert_eq!(db.get(k)?.as_ref(), model.get(k));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let st = db.stats();
    assert!(st.promotions > 0 && st.demotions > 0, "{st:?}");
    check(&db, &model)?;
    db.close()?;
    Ok(())
}
