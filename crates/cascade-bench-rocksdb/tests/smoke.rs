//! Smoke test: open RocksDB in a temp dir and round-trip every [`Engine`] call.
//! Needs the `rocksdb` feature (`cargo test --release --features rocksdb
//! --manifest-path crates/cascade-bench-rocksdb/Cargo.toml`); empty without it.

#![cfg(feature = "rocksdb")]
#![deny(clippy::unwrap_used)]

use std::path::PathBuf;

use cascade_bench::engine::Engine;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "cascade-bench-rocksdb-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

#[test]
fn round_trip() -> Result<(), String> {
    let dir = TempDir::new("smoke");
    let n = 20_000u64;
    {
        let db = cascade_bench_rocksdb::open(&dir.0, false, 8 << 20)?;
        assert_eq!(db.name(), "rocksdb");

        for i in 0..n {
            db.put(&key(i), &(i * 7).to_le_bytes())?;
        }
        assert_eq!(db.get(&key(5))?, Some(35u64.to_le_bytes().to_vec()));
        assert_eq!(db.get(&key(n + 1))?, None);

        db.delete(&key(5))?;
        assert_eq!(db.get(&key(5))?, None);

        // Scan from 3: 3, 4, (5 deleted), 6, 7, ...
        let mut last = Vec::new();
        assert_eq!(db.scan(&key(3), 10, &mut last)?, 10);
        assert_eq!(last, key(13));
        assert_eq!(db.scan(&key(n - 4), 10, &mut last)?, 4);
        assert_eq!(last, key(n - 1));
        assert_eq!(db.scan(&key(n), 10, &mut last)?, 0);
        assert_eq!(last, key(n - 1), "unchanged when nothing was read");

        db.settle()?;
        // Still readable after the flush to SSTs.
        assert_eq!(
            db.get(&key(n - 1))?,
            Some(((n - 1) * 7).to_le_bytes().to_vec())
        );
        assert_eq!(db.get(&key(5))?, None);

        let s = db.stats();
        eprintln!("{s:?}");
        assert!(s.fast_tier_bytes > 0, "no SST/WAL bytes: {s:?}");
        assert_eq!(s.slow_tier_bytes, 0);
        assert!(
            (s.fast_write_amp - s.write_amp).abs() < f64::EPSILON,
            "{s:?}"
        );
        assert!(s.write_amp >= 1.0, "write amp {} < 1", s.write_amp);
        assert!(s.engine_dram_bytes > 0, "no DRAM reported: {s:?}");
    }

    // Reopen with sync writes: data survives, sync puts work.
    let db = cascade_bench_rocksdb::open(&dir.0, true, 8 << 20)?;
    assert_eq!(db.get(&key(7))?, Some(49u64.to_le_bytes().to_vec()));
    assert_eq!(db.get(&key(5))?, None);
    db.put(&key(5), b"again")?;
    assert_eq!(db.get(&key(5))?, Some(b"again".to_vec()));
    Ok(())
}

/// Bytes of the `.sst` files directly in `dir`.
fn sst_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn slow_dir_takes_the_levels_past_the_fast_budget() -> Result<(), String> {
    let dir = TempDir::new("tiered");
    let (fast, slow) = (dir.0.join("fast"), dir.0.join("slow"));
    let n = 20_000u64;
    {
        // A fast budget far below L1's target size: flushes land in the fast
        // directory, what compactions write in the slow one. Five flushed L0 files
        // trigger an automatic L0 -> L1 compaction (a manual `compact_range` would
        // write to the first path: its `target_path_id` is 0).
        let db = cascade_bench_rocksdb::open_tiered(
            &fast,
            false,
            8 << 20,
            Some((&slow, 64 << 10)),
            false,
        )?;
        for round in 0..5 {
            for i in (round..n).step_by(5) {
                db.put(&key(i), &(i * 3).to_le_bytes())?;
            }
            db.db().flush().map_err(|e| e.to_string())?;
        }
        db.settle()?;
        let s = db.stats();
        eprintln!("{s:?}");
        assert!(
            s.slow_tier_bytes > 0,
            "nothing in the slow directory: {s:?}"
        );
        assert_eq!(s.slow_tier_bytes, sst_bytes(&slow));
        assert_eq!(db.get(&key(17))?, Some(51u64.to_le_bytes().to_vec()));
    }
    // Reopened with the same paths, every key is there.
    let db =
        cascade_bench_rocksdb::open_tiered(&fast, false, 8 << 20, Some((&slow, 64 << 10)), false)?;
    for i in (0..n).step_by(97) {
        assert_eq!(db.get(&key(i))?, Some((i * 3).to_le_bytes().to_vec()));
    }
    assert!(db.stats().slow_tier_bytes > 0);
    Ok(())
}
