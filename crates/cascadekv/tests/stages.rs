//! Flush, compaction and recovery through all four stages; corruption in tables and
//! the manifest; readers and writers racing flush, compaction and teardown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

mod common;

use cascadekv::{Db, Error, Options};
use common::{xor_byte, PoolFile};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ckv-stages-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(background: bool) -> Options {
    Options {
        pool_size: 256 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: 256 << 10,
        inline_threshold: 40,
        block_size: 512,
        table_max_bytes: 8 << 10,
        background,
        ..Options::default()
    }
}

fn val(k: u32, v: u32) -> Vec<u8> {
    // Sizes on both sides of the inline threshold (40): some values are separated.
    let len = if k.is_multiple_of(5) { 120 } else { 8 };
    let mut out = format!("{k}:{v}:").into_bytes();
    out.resize(len, b'.');
    out
}

fn key(k: u32) -> Vec<u8> {
    format!("user{:010}", k.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) -> cascadekv::Result<()> {
    for (k, v) in model.iter().step_by(3) {
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
        .zip(model.iter())
        .all(|(a, b)| a.0 == *b.0 && a.1 == *b.1));
    Ok(())
}

#[test]
fn data_moves_through_every_stage_and_survives_reopen() -> cascadekv::Result<()> {
    let dir = tmp("flow");
    let mut model = BTreeMap::new();
    {
        let db = Db::open(&dir, opts(false))?;
        for i in 0..20_000u32 {
            db.put(&key(i), &val(i, 0))?;
            model.insert(key(i), val(i, 0));
        }
        let s = db.stats();
        assert!(s.immutable_faststores >= 3, "{s:?}");
        db.flush_faststore()?;
        let s = db.stats();
        assert_eq!(
            (s.immutable_faststores, s.faststore_entries),
            (0, 0),
            "{s:?}"
        );
        assert!(s.buffer_trees >= 3 && s.buffer_tables > 10, "{s:?}");
        check_all(&db, &model)?;
        assert!(db.compact()?);
        let s = db.stats();
        assert_eq!(s.buffer_trees, 0, "{s:?}");
        assert_eq!(s.stable_entries, 20_000, "{s:?}");
        // DRAM: the stable index holds one entry per table, not per key.
        assert!(s.stable_dram_bytes < 20_000 * 8, "{s:?}");
        check_all(&db, &model)?;
        // Overwrites and deletes shadow stable data, then compact away.
        for i in (0..20_000u32).step_by(7) {
            if i % 2 == 0 {
                db.delete(&key(i))?;
                model.remove(&key(i));
            } else {
                db.put(&key(i), &val(i, 1))?;
                model.insert(key(i), val(i, 1));
            }
        }
        check_all(&db, &model)?;
        db.flush_faststore()?;
        check_all(&db, &model)?;
        assert!(db.compact()?);
        let s = db.stats();
        assert_eq!(
            s.stable_entries,
            model.len() as u64,
            "tombstones and old versions dropped: {s:?}"
        );
        assert!(s.compactions == 2 && s.flushes >= 4, "{s:?}");
        check_all(&db, &model)?;
        // Some writes stay in the FastStore for the reopen.
        for i in 20_000..20_100u32 {
            db.put(&key(i), &val(i, 2))?;
            model.insert(key(i), val(i, 2));
        }
    }
    let db = Db::open(&dir, opts(false))?;
    assert!(db.recovery_info().tables > 0);
    assert_eq!(
        db.recovery_info().records,
        100,
        "flushed logs are not replayed"
    );
    check_all(&db, &model)?;
    drop(db);
    // And with the background threads on, still the same data.
    let db = Db::open(&dir, opts(true))?;
    check_all(&db, &model)?;
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
    Ok(())
}

#[test]
fn separated_values_keep_their_log_segments_with_live_byte_accounting() -> cascadekv::Result<()> {
    let dir = tmp("retained");
    let db = Db::open(&dir, opts(false))?;
    for i in 0..3000u32 {
        db.put(&key(i * 5), &val(i * 5, 0))?; // every one separated (k % 5 == 0)
    }
    db.flush_faststore()?;
    let s = db.stats();
    assert!(s.vlog_segments > 0 && s.vlog_live_bytes > 0, "{s:?}");
    let live0 = s.vlog_live_bytes;
    for i in 0..3000u32 {
        db.put(&key(i * 5), &val(i * 5, 1))?;
    }
    db.flush_faststore()?;
    db.compact()?;
    let s = db.stats();
    // The first versions are dead now; the second ones live.
    assert!(
        s.vlog_live_bytes <= live0 + live0 / 10 && s.vlog_live_bytes >= live0 / 2,
        "{live0} -> {s:?}"
    );
    for i in (0..3000u32).step_by(11) {
        assert_eq!(db.get(&key(i * 5))?, Some(val(i * 5, 1)));
    }
    drop(db);
    let db = Db::open(&dir, opts(false))?;
    for i in (0..3000u32).step_by(13) {
        assert_eq!(db.get(&key(i * 5))?, Some(val(i * 5, 1)));
    }
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
    Ok(())
}

#[test]
fn flipped_bits_in_tables_are_corruption_never_wrong_data() -> cascadekv::Result<()> {
    let dir = tmp("tableflip");
    let mut db = Db::open(&dir, opts(false))?;
    let mut model = BTreeMap::new();
    for i in 0..5000u32 {
        db.put(&key(i), &val(i, 3))?;
        model.insert(key(i), val(i, 3));
    }
    db.flush_faststore()?;
    db.compact()?;
    // Find table chunks and flip bytes in them, one at a time, through the file.
    let pool = PoolFile::read(&dir);
    let table_chunks = pool.chunks_of_kind(common::KIND_TABLE);
    assert!(!table_chunks.is_empty());
    let mut detected = 0;
    for (n, off) in (64..30_000u64).step_by(1999).enumerate() {
        let c = table_chunks[n % table_chunks.len()];
        let addr = pool.chunk_offset(c) + off;
        xor_byte(&pool.path, addr, 0x04);
        // A flip at rest, read after an open: every block is verified at its first
        // read. (A flip after a block's first read within one open is caught by the
        // scrubber's next pass instead: tests/scrub.rs, README "Guarantees".)
        drop(db);
        db = Db::open(&dir, opts(false))?;
        for (k, v) in model.iter().step_by(17) {
            match db.get(k) {
                Ok(Some(got)) => assert_eq!(&got, v, "wrong data after flipping {addr}"),
                Ok(None) => panic!("key vanished after flipping {addr}"),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    detected += 1;
                }
            }
        }
        xor_byte(&pool.path, addr, 0x04);
    }
    assert!(detected > 0, "no flip was noticed");
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
    Ok(())
}

#[test]
fn damaged_manifest_is_reported_at_open() -> cascadekv::Result<()> {
    let dir = tmp("manflip");
    {
        let db = Db::open(&dir, opts(false))?;
        for round in 0..2u32 {
            for i in 0..3000u32 {
                db.put(&key(i), &val(i, round))?;
            }
            // Two edits: the first starts the manifest log (a snapshot), the second
            // follows it, so damage to the first is followed by a durable record.
            db.flush_faststore()?;
        }
    }
    let pool = PoolFile::read(&dir);
    let (path, bytes, chunk_size) = (pool.path.clone(), pool.bytes.clone(), pool.chunk_size);
    let manifest_chunks = pool.chunks_of_kind(common::KIND_MANIFEST);
    assert_eq!(manifest_chunks.len(), 1, "one live manifest log");
    for delta in [20usize, 40, 70] {
        let mut bad = bytes.clone();
        bad[(manifest_chunks[0] * chunk_size) as usize + 64 + delta] ^= 0x01;
        std::fs::write(&path, &bad).map_err(|e| Error::io("write", e))?;
        match Db::open(&dir, opts(false)) {
            Err(e) => assert!(e.is_corruption(), "{e}"),
            Ok(_) => panic!("damaged manifest record at +{delta} was not reported"),
        }
    }
    // The undamaged file still opens with every key.
    std::fs::write(&path, &bytes).map_err(|e| Error::io("write", e))?;
    let db = Db::open(&dir, opts(false))?;
    for i in (0..3000u32).step_by(7) {
        assert_eq!(db.get(&key(i))?, Some(val(i, 1)));
    }
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
    Ok(())
}

#[test]
fn readers_writers_and_iterators_race_flush_compaction_and_teardown() -> cascadekv::Result<()> {
    let dir = tmp("race");
    let o = Options {
        faststore_capacity: 64 << 10,
        buffer_trees_write_heavy: 2,
        table_max_bytes: 4096,
        ..opts(true)
    };
    let db = Arc::new(Db::open(&dir, o)?);
    let stop = Arc::new(AtomicBool::new(false));
    let versions: Arc<Vec<AtomicU64>> = Arc::new((0..2000).map(|_| AtomicU64::new(0)).collect());
    let mut hs = Vec::new();
    for t in 0..2u32 {
        let (db, stop, versions) = (db.clone(), stop.clone(), versions.clone());
        hs.push(std::thread::spawn(move || -> cascadekv::Result<u64> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (n as u32 * 2 + t) % 2000;
                let v = versions[k as usize].load(Ordering::Relaxed) as u32 + 1;
                db.put(&key(k), &val(k, v))?;
                versions[k as usize].store(u64::from(v), Ordering::Relaxed);
                n += 1;
            }
            Ok(n)
        }));
    }
    for _ in 0..2 {
        let (db, stop, versions) = (db.clone(), stop.clone(), versions.clone());
        hs.push(std::thread::spawn(move || -> cascadekv::Result<u64> {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (n as u32).wrapping_mul(7919) % 2000;
                let floor = versions[k as usize].load(Ordering::Relaxed) as u32;
                if let Some(v) = db.get(&key(k))? {
                    let s = String::from_utf8_lossy(&v).to_string();
                    let got: u32 = s
                        .split(':')
                        .nth(1)
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                    assert!(
                        got >= floor,
                        "key {k}: read version {got} after {floor} was acknowledged"
                    );
                    assert_eq!(v, val(k, got), "torn value");
                } else {
                    assert_eq!(floor, 0, "key {k} vanished");
                }
                if n.is_multiple_of(500) {
                    // A scan over a consistent snapshot, held across flushes.
                    let mut prev: Option<Vec<u8>> = None;
                    for kv in db.iter(..)?.take(3000) {
                        let (k, _) = kv?;
                        assert!(prev.as_ref().is_none_or(|p| *p < k), "scan out of order");
                        prev = Some(k);
                    }
                }
                n += 1;
            }
            Ok(n)
        }));
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in hs {
        total += h
            .join()
            .map_err(|_| Error::Internal("thread panicked".into()))??;
    }
    let s = db.stats();
    assert!(s.flushes > 2 && s.compactions > 0, "{s:?}");
    assert!(total > 1000);
    for k in 0..2000u32 {
        let v = versions[k as usize].load(Ordering::Relaxed) as u32;
        if v > 0 {
            assert_eq!(db.get(&key(k))?, Some(val(k, v)));
        }
    }
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
    Ok(())
}

/// Load-awareness (FluidKV §4.4, `Options::faststore_write_heavy_factor`): while writes
/// dominate, the active FastStore is switched at the factor times its capacity, not at
/// the capacity; with the factor at 1 the same writes switch it.
#[test]
fn write_heavy_load_switches_the_faststore_at_its_factor() -> cascadekv::Result<()> {
    for factor in [1u32, 4] {
        let dir = tmp(&format!("write-heavy-{factor}"));
        let db = Db::open(
            &dir,
            Options {
                faststore_write_heavy_factor: factor,
                ..opts(false)
            },
        )?;
        let mut model = BTreeMap::new();
        // About twice the 256 KiB capacity of index bytes, well under four times.
        let mut i = 0u32;
        while db.stats().faststore_dram_bytes < 2 * (256 << 10) && i < 1_000_000 {
            db.put(&key(i), &val(i, 1))?;
            model.insert(key(i), val(i, 1));
            i += 1;
        }
        let s = db.stats();
        let switched = s.flushes + s.immutable_faststores + s.buffer_tables > 0;
        assert_eq!(switched, factor == 1, "factor {factor}: {s:?}");
        check_all(&db, &model)?;
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
