//! Background scrubbing (issue #11, part 4): with `Options::scrub_bytes_per_sec` set,
//! a thread re-reads every table block and separated value at rest, pass after pass,
//! at a bounded rate, and counts what it finds in `Stats` — without changing anything.
//! The slow tier's tables and blobs (issue #14) are re-read too.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cascadekv::integrity::{self, Structure};
use cascadekv::{Db, Options};

fn opts(scrub: u64) -> Options {
    Options {
        pool_size: 16 << 20,
        chunk_size: 64 << 10,
        inline_threshold: 48,
        faststore_capacity: 64 << 10,
        block_size: 512,
        table_max_bytes: 8192,
        scrub_bytes_per_sec: scrub,
        ..Options::default()
    }
}

/// A store whose data sits in tables (inline and separated values), closed cleanly.
fn build(dir: &Path) {
    let db = Db::open(
        dir,
        Options {
            scrub_bytes_per_sec: 0,
            ..opts(0)
        },
    )
    .unwrap_or_else(|e| panic!("open: {e}"));
    for round in 0..2u32 {
        for i in 0..1500u32 {
            let len = if i % 3 == 0 { 200 } else { 16 };
            let v = vec![b'a' + (round as u8); len];
            db.put(format!("k{i:05}").as_bytes(), &v)
                .unwrap_or_else(|e| panic!("put: {e}"));
        }
        db.flush_faststore()
            .unwrap_or_else(|e| panic!("flush: {e}"));
    }
    db.compact().unwrap_or_else(|e| panic!("compact: {e}"));
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
}

fn wait_for_pass(db: &Db, passes: u64) -> cascadekv::Stats {
    let start = Instant::now();
    loop {
        let s = db.stats();
        if s.scrub_passes >= passes {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no scrub pass within 60 s: {} bytes scrubbed",
            s.scrub_bytes
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn scrubbing_reads_every_table_and_counts_damage() {
    let root = std::env::temp_dir().join(format!("ckv-scrub-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("db");
    build(&dir);

    // An intact store: a whole pass, nothing found, and the rate respected.
    let rate = 4 << 20;
    let db = Db::open(&dir, opts(rate)).unwrap_or_else(|e| panic!("open: {e}"));
    let t0 = Instant::now();
    let s = wait_for_pass(&db, 1);
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        s.scrub_tables > 0 && s.scrub_blocks > s.scrub_tables,
        "{s:?}"
    );
    assert!(s.scrub_bytes > 0);
    assert_eq!(s.scrub_errors, 0, "{:?}", s.scrub_last_error);
    // Paced: never more than one table ahead of the rate.
    let slack = 64 << 10;
    assert!(
        (s.scrub_bytes as f64) <= rate as f64 * secs + slack as f64,
        "{} bytes in {secs:.2} s at {rate} B/s",
        s.scrub_bytes
    );
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
    drop(db);

    // Find a byte inside a table block: flip candidates in a copy until verify says so.
    let pool = dir.join("pool");
    let bytes = std::fs::read(&pool).unwrap_or_else(|e| panic!("read: {e}"));
    let probe = root.join("probe");
    let mut target = None;
    for off in (0..bytes.len()).step_by(4093).filter(|&o| bytes[o] != 0) {
        let _ = std::fs::remove_dir_all(&probe);
        std::fs::create_dir_all(&probe).unwrap_or_else(|e| panic!("mkdir: {e}"));
        let mut b = bytes.clone();
        b[off] ^= 0x20;
        std::fs::write(probe.join("pool"), &b).unwrap_or_else(|e| panic!("write: {e}"));
        let r = integrity::verify(&probe).unwrap_or_else(|e| panic!("verify: {e}"));
        if r.findings
            .iter()
            .any(|f| f.structure == Structure::TableBlock)
        {
            target = Some(off);
            break;
        }
    }
    let off = target.unwrap_or_else(|| panic!("no table block found to damage"));
    let mut b = bytes;
    b[off] ^= 0x20;
    std::fs::write(&pool, &b).unwrap_or_else(|e| panic!("write: {e}"));

    // The scrubber finds it and says where; it changes nothing.
    let db = Db::open(&dir, opts(64 << 20)).unwrap_or_else(|e| panic!("open: {e}"));
    let s = wait_for_pass(&db, 1);
    assert!(s.scrub_errors >= 1, "damage at {off} not found: {s:?}");
    let last = s.scrub_last_error.unwrap_or_default();
    assert!(last.contains("table"), "{last}");
    drop(db);
    let _ = std::fs::remove_dir_all(&root);
}

/// Options of a store with a slow tier (as tests/slow_tier.rs).
fn slow_opts(slow: &Path, scrub: u64) -> Options {
    Options {
        pool_size: 64 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: 1 << 20,
        table_max_bytes: 64 << 10,
        background: scrub > 0,
        slow_dir: Some(slow.to_path_buf()),
        fast_budget: 512 << 10,
        slow_block_size: 1024,
        scrub_bytes_per_sec: scrub,
        ..Options::default()
    }
}

#[test]
fn scrubbing_covers_the_slow_tier() {
    let root = std::env::temp_dir().join(format!("ckv-scrub-slow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (dir, slow) = (root.join("db"), root.join("slow"));
    {
        // Mixed sizes, some values too large for a slow-tier block (blobs).
        let db = Db::open(&dir, slow_opts(&slow, 0)).unwrap_or_else(|e| panic!("open: {e}"));
        for i in 0..6000u32 {
            let len = match i % 10 {
                0..=5 => 20,
                6..=8 => 600,
                _ if i % 500 == 9 => 300_000,
                _ => 3000,
            };
            let v = vec![b'a' + (i % 26) as u8; len];
            db.put(format!("key{i:08}").as_bytes(), &v)
                .unwrap_or_else(|e| panic!("put: {e}"));
        }
        db.flush_faststore()
            .unwrap_or_else(|e| panic!("flush: {e}"));
        db.compact().unwrap_or_else(|e| panic!("compact: {e}"));
        db.close().unwrap_or_else(|e| panic!("close: {e}"));
    }

    // A whole pass reads every table, the slow tier's included, and finds nothing.
    let db = Db::open(&dir, slow_opts(&slow, 64 << 20)).unwrap_or_else(|e| panic!("open: {e}"));
    let s = wait_for_pass(&db, 1);
    assert!(s.slow_tier_tables > 0, "{s:?}");
    let fast_tables = s.stable_tables + s.buffer_tables;
    assert!(
        s.scrub_tables >= fast_tables + s.slow_tier_tables,
        "{} tables scrubbed of {fast_tables} + {} slow",
        s.scrub_tables,
        s.slow_tier_tables
    );
    assert!(s.scrub_blocks > s.scrub_tables, "{s:?}");
    // Blobs are read too: more than the slow tier's tables alone.
    assert!(s.scrub_bytes > s.slow_tier_bytes, "{s:?}");
    assert_eq!(s.scrub_errors, 0, "{:?}", s.scrub_last_error);
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
    drop(db);

    // A flipped byte in every 4 KiB of the largest slow-tier file: found, and named.
    let big: PathBuf = std::fs::read_dir(&slow)
        .unwrap_or_else(|e| panic!("ls: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .unwrap_or_else(|| panic!("no slow-tier file"));
    let mut b = std::fs::read(&big).unwrap_or_else(|e| panic!("read: {e}"));
    for i in (100..b.len()).step_by(4096) {
        b[i] ^= 0x20;
    }
    std::fs::write(&big, b).unwrap_or_else(|e| panic!("write: {e}"));
    let db = Db::open(&dir, slow_opts(&slow, 64 << 20)).unwrap_or_else(|e| panic!("open: {e}"));
    let s = wait_for_pass(&db, 1);
    assert!(s.scrub_errors >= 1, "damage not found: {s:?}");
    let last = s.scrub_last_error.unwrap_or_default();
    let name = big.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(last.contains("slow-tier"), "{last}");
    assert!(last.contains(name.as_deref().unwrap_or("?")), "{last}");
    drop(db);
    let _ = std::fs::remove_dir_all(&root);
}

/// Issue #29 item 3: a get verifies a table block's checksum on its first read after
/// open only. A bit flipped in a block *after* that read is caught by the scrubber —
/// on by default — within one pass, and from then on every get of that block is an
/// error; no get ever returns a value that was not written except, at most, between
/// the flip and that pass (the window README "Guarantees" states).
#[test]
fn a_flip_after_a_blocks_first_read_is_caught_by_the_next_scrub_pass() {
    assert!(
        Options::default().scrub_bytes_per_sec > 0,
        "the scrubber is on by default"
    );
    let root = std::env::temp_dir().join(format!("ckv-scrub-window-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("db");
    build(&dir);
    let want = |i: u32| {
        let len = if i.is_multiple_of(3) { 200 } else { 16 };
        vec![b'b'; len]
    };
    let db = Db::open(
        &dir,
        Options {
            scrub_bytes_per_sec: 64 << 20,
            ..opts(0)
        },
    )
    .unwrap_or_else(|e| panic!("open: {e}"));
    // Every block read (and verified) once.
    for i in 0..1500u32 {
        let got = db.get(format!("k{i:05}").as_bytes());
        assert_eq!(got.ok().flatten(), Some(want(i)), "key {i}");
    }
    // Flip the first value byte of k00001's table entry (`06 "k00001" 01 10`: key
    // length, key, inline, 16 bytes) wherever it lies in the pool file; the mapping
    // is shared, so the open store sees it.
    let pool = dir.join("pool");
    let bytes = std::fs::read(&pool).unwrap_or_else(|e| panic!("read: {e}"));
    let pat = b"\x06k00001\x01\x10";
    let hits: Vec<usize> = bytes
        .windows(pat.len())
        .enumerate()
        .filter(|(_, w)| *w == pat)
        .map(|(at, _)| at + pat.len())
        .collect();
    assert!(!hits.is_empty(), "k00001's entry not found");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&pool)
            .unwrap_or_else(|e| panic!("open pool: {e}"));
        for &at in &hits {
            f.write_all_at(&[bytes[at] ^ 0x01], at as u64)
                .unwrap_or_else(|e| panic!("write: {e}"));
        }
    }
    // Between the flip and the next pass a get may still skip the block's checksum.
    let flipped = db.get(b"k00001");
    let mut wrong = want(1);
    wrong[0] ^= 0x01;
    assert!(
        matches!(&flipped, Err(e) if e.is_corruption())
            || flipped.as_ref().ok() == Some(&Some(wrong)),
        "{flipped:?}"
    );
    // One whole pass that began after the flip finds it ...
    let passes = db.stats().scrub_passes;
    let s = wait_for_pass(&db, passes + 2);
    assert!(s.scrub_errors >= 1, "flip not found: {s:?}");
    // ... and from then on the key is an error, never the flipped value, and every
    // other key is its value or an error.
    let got = db.get(b"k00001");
    assert!(matches!(&got, Err(e) if e.is_corruption()), "{got:?}");
    let mut errors = 0;
    for i in 0..1500u32 {
        match db.get(format!("k{i:05}").as_bytes()) {
            Ok(v) => assert_eq!(v, Some(want(i)), "key {i}"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors >= 1);
    drop(db);
    let _ = std::fs::remove_dir_all(&root);
}
