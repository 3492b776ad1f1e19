//! Space is reclaimed (issue #10): bounded FastStore logs, value-log cleaning, old
//! versions read through snapshots while their segments are cleaned and freed, and a
//! full pool as an ordinary state that deleting data recovers from.

use std::time::{Duration, Instant};

use cascadekv::{Db, Error, Options, Stats};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ckv-space-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value of `len` bytes that names its key and version.
fn val(i: u32, v: u32, len: usize) -> Vec<u8> {
    let mut b = format!("{i}:{v}:").into_bytes();
    b.resize(len, b'a' + (v % 26) as u8);
    b
}

/// Polls `db.stats()` until `ok` holds (background work is asynchronous).
fn wait_for(db: &Db, secs: u64, ok: impl Fn(&Stats) -> bool) -> Stats {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let s = db.stats();
        if ok(&s) || Instant::now() > until {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn hot_keys_overwritten_far_beyond_the_pool_stay_bounded() -> cascadekv::Result<()> {
    let dir = tmp("hot");
    let pool = 32u64 << 20;
    let db = Db::open(
        &dir,
        Options {
            pool_size: pool,
            ..Options::default()
        },
    )?;
    let (keys, len) = (500u32, 1000usize);
    let live = u64::from(keys) * len as u64;
    // 150 MB of overwrites through a 32 MB pool.
    let mut last = vec![0u32; keys as usize];
    for n in 0..150_000u32 {
        let k = n.wrapping_mul(2_654_435_761) % keys;
        last[k as usize] = n;
        db.put(&key(k), &val(k, n, len))?;
    }
    for k in 0..keys {
        assert_eq!(db.get(&key(k))?, Some(val(k, last[k as usize], len)));
    }
    let during = db.stats();
    assert!(
        during.flushes > 5,
        "the logs must have been flushed: {during:?}"
    );
    assert!(during.vlog_cleanings > 0, "nothing was cleaned: {during:?}");
    // Left idle, the store flushes its FastStore and cleans until the retained values
    // take at most twice their live bytes; the pool then holds about that plus a few
    // chunks of tables, manifest and header.
    // (Waited for together: a moment in the middle of a cleaning cycle, new segment
    // written and old ones not yet released, may meet the first two but not the third.)
    let cs = during.chunk_size;
    let s = wait_for(&db, 20, |s| {
        s.faststore_log_bytes == 0
            && s.vlog_bytes <= 2 * s.vlog_live_bytes.max(1)
            && s.pool_bytes_used <= 2 * live + 8 * cs
    });
    assert_eq!(
        s.faststore_log_bytes, 0,
        "idle FastStore not flushed: {s:?}"
    );
    assert!(
        s.vlog_bytes <= 2 * s.vlog_live_bytes,
        "value log not cleaned down to 2x live: {s:?}"
    );
    assert!(
        s.pool_bytes_used <= 2 * live + 8 * cs,
        "pool holds {} for {live} live bytes: {s:?}",
        s.pool_bytes_used
    );
    // Freed chunks are given back to the file system (punched), so the pool file takes
    // on disk about what the store uses, not its high-water mark.
    let on_disk = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir.join("pool"))
            .map_err(|e| cascadekv::Error::io("stat pool", e))?
            .blocks()
            * 512
    };
    assert!(
        on_disk <= s.pool_bytes_used + 2 * cs,
        "pool file takes {on_disk} bytes on disk for {} in use",
        s.pool_bytes_used
    );
    for k in 0..keys {
        assert_eq!(db.get(&key(k))?, Some(val(k, last[k as usize], len)));
    }
    drop(db);
    // Everything survives a reopen, and reopening frees nothing that is needed.
    let db = Db::open(&dir, Options::default())?;
    for k in 0..keys {
        assert_eq!(db.get(&key(k))?, Some(val(k, last[k as usize], len)));
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn snapshots_and_iterators_read_old_versions_while_their_segments_are_cleaned(
) -> cascadekv::Result<()> {
    let dir = tmp("snap");
    let opts = Options {
        pool_size: 64 << 20,
        inline_threshold: 32,
        background: false,
        ..Options::default()
    };
    let db = Db::open(&dir, opts.clone())?;
    let n = 2000u32;
    for i in 0..n {
        db.put(&key(i), &val(i, 1, 300))?;
    }
    db.flush_faststore()?;
    db.compact()?;
    // A snapshot and an iterator see version 1 from here on.
    let snap = db.snapshot()?;
    let mut it = db.iter(..)?;
    let first = it.next().transpose()?;
    for i in 0..n {
        db.put(&key(i), &val(i, 2, 300))?;
    }
    // Version 2 goes through every stage; version 1's segments become all dead, are
    // cleaned or released — while the snapshot still points at them.
    db.flush_faststore()?;
    db.compact()?;
    while db.compact()? {}
    let s = db.stats();
    assert!(s.vlog_released_segments > 0, "{s:?}");
    for i in (0..n).step_by(7) {
        assert_eq!(
            snap.get(&key(i))?,
            Some(val(i, 1, 300)),
            "snapshot, key {i}"
        );
        assert_eq!(db.get(&key(i))?, Some(val(i, 2, 300)), "current, key {i}");
    }
    assert_eq!(first, Some((key(0), val(0, 1, 300))));
    let mut count = 1;
    for kv in it {
        let (k, v) = kv?;
        let i: u32 = std::str::from_utf8(&k[3..])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(u32::MAX);
        assert_eq!(v, val(i, 1, 300), "iterator, key {i}");
        count += 1;
    }
    assert_eq!(count, n);
    // The old segments go once the last reader lets go.
    let used = db.stats().pool_bytes_used;
    drop(snap);
    db.compact()?;
    assert!(
        db.stats().pool_bytes_used < used,
        "nothing freed after the snapshot"
    );
    drop(db);
    let db = Db::open(&dir, opts)?;
    for i in (0..n).step_by(3) {
        assert_eq!(db.get(&key(i))?, Some(val(i, 2, 300)));
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_full_pool_refuses_puts_keeps_reads_and_deletes_and_recovers() -> cascadekv::Result<()> {
    let dir = tmp("full");
    let db = Db::open(
        &dir,
        Options {
            pool_size: 16 << 20,
            ..Options::default()
        },
    )?;
    let len = 2000usize;
    let mut n = 0u32;
    let full = loop {
        match db.put(&key(n), &val(n, 0, len)) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100_000, "a 16 MiB pool took 200 MB");
    };
    assert!(matches!(full, Error::PoolFull { .. }), "{full}");
    assert!(n > 1000, "only {n} values fit");
    // Reads keep working.
    for i in (0..n).step_by(17) {
        assert_eq!(db.get(&key(i))?, Some(val(i, 0, len)));
    }
    // Deletes keep working, and free space once they have moved on.
    for i in 0..n {
        if i % 4 != 0 {
            db.delete(&key(i))?;
        }
    }
    let until = Instant::now() + Duration::from_secs(30);
    let mut m = 0u32;
    loop {
        match db.put(&key(1_000_000 + m), &val(m, 9, len)) {
            Ok(()) => {
                m += 1;
                if m == 500 {
                    break;
                }
            }
            Err(Error::PoolFull { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!(
                "writes did not resume after deletes: {e} ({:?})",
                db.stats()
            ),
        }
    }
    for i in (0..n).step_by(13) {
        let want = (i % 4 == 0).then(|| val(i, 0, len));
        assert_eq!(db.get(&key(i))?, want, "key {i}");
    }
    for i in (0..500).step_by(7) {
        assert_eq!(db.get(&key(1_000_000 + i))?, Some(val(i, 9, len)));
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A batch that runs out of pool part-way leaves its first records in the log; it fails,
/// later writes go on, and the store still opens — with the batch wholly absent.
#[test]
fn a_batch_cut_by_a_full_pool_is_absent_and_the_store_reopens() -> cascadekv::Result<()> {
    let dir = tmp("batchfull");
    let opts = || Options {
        pool_size: 8 << 20,
        chunk_size: 256 << 10,
        background: false,
        ..Options::default()
    };
    let db = Db::open(&dir, opts())?;
    let len = 2000usize;
    let mut n = 0u32;
    while db.put(&key(n), &val(n, 0, len)).is_ok() {
        n += 1;
        assert!(n < 50_000, "an 8 MiB pool took 100 MB");
    }
    // Batches of growing size: at least one must start in the current segment and fail
    // when its next record needs a new one.
    let mut failed = 0;
    for size in 1..40u32 {
        let mut b = cascadekv::WriteBatch::default();
        for j in 0..size {
            b.put(key(2_000_000 + size * 100 + j), val(j, 1, len));
        }
        if db.write(&b).is_err() {
            failed += 1;
        }
    }
    assert!(failed > 0, "no batch hit the full pool");
    // Later writes of the same thread land after the cut batch (deletes may use the
    // pool's headroom).
    for i in 0..20 {
        db.delete(&key(i))?;
    }
    drop(db);
    let db = Db::open(&dir, opts())?;
    for i in 0..20 {
        assert_eq!(db.get(&key(i))?, None, "delete of key {i} lost");
    }
    assert_eq!(db.get(&key(20))?, Some(val(20, 0, len)));
    // A failed batch is absent as a whole; a successful one is wholly there.
    for size in 1..40u32 {
        let got: Vec<bool> = (0..size)
            .map(|j| {
                db.get(&key(2_000_000 + size * 100 + j))
                    .map(|v| v.is_some())
            })
            .collect::<cascadekv::Result<_>>()?;
        assert!(
            got.iter().all(|g| *g) || got.iter().all(|g| !*g),
            "batch of {size} partly applied: {got:?}"
        );
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
