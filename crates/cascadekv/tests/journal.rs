//! The sync journal on a real file system (`pmem/journal/`, design.md §10): what a
//! `Durability::Sync` write leaves durable is the journal block, and after a power
//! loss that took the pool's unwritten log pages, open puts the bytes back.
//!
//! A power loss is made by hand: the store is copied while it is open (the copy reads
//! the page cache, so it holds everything written), then every log chunk of the copy
//! is emptied after its chunk header — what the disk would hold if none of the log
//! pages written since the last checkpoint had been written back (the test keeps the
//! journal large enough that no checkpoint runs). The simulated device covers the rest:
//! a crash image at every journal write, torn blocks and checkpoints
//! (`tests/simcrash.rs`, `*_journal`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cascadekv::{Db, Durability, Options, WriteBatch};

const CHUNK: u64 = 256 << 10;

fn opts(journal: Option<bool>) -> Options {
    Options {
        pool_size: 64 << 20,
        chunk_size: CHUNK,
        inline_threshold: 64,
        sync_journal: journal,
        journal_size: 8 << 20,
        background: false,
        ..Options::default()
    }
}

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ckv-journal-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn value(i: u64) -> Vec<u8> {
    let len = match i % 3 {
        0 => 10,
        1 => 200,
        _ => 1500,
    };
    let mut v = format!("v{i}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

/// Copies the store's files (not its lock) from `from` to `to`.
fn copy_store(from: &Path, to: &Path, journal: bool) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir: {e}"));
    for name in ["pool", "JOURNAL"] {
        if name == "JOURNAL" && !journal {
            continue;
        }
        std::fs::copy(from.join(name), to.join(name)).unwrap_or_else(|e| panic!("copy: {e}"));
    }
}

/// Empties every log chunk of the pool file in `dir` after its 64-byte chunk header
/// (formats.md §3: magic "CKCH", kind 1 = log, span at 6): the log pages a power loss
/// took. Returns the chunks emptied.
fn lose_log_pages(dir: &Path) -> usize {
    let path = dir.join("pool");
    let mut bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("read: {e}"));
    let cs = usize::try_from(CHUNK).unwrap_or(usize::MAX);
    let mut n = 0;
    let mut at = cs; // chunk 0 is the header region
    while at + 64 <= bytes.len() {
        let h = &bytes[at..at + 64];
        let span = usize::from(u16::from_le_bytes([h[6], h[7]])).max(1);
        if &h[..4] == b"CKCH" && h[4] == 1 {
            let end = (at + span * cs).min(bytes.len());
            bytes[at + 64..end].fill(0);
            n += 1;
        }
        at += cs;
    }
    std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("write: {e}"));
    n
}

#[test]
fn a_power_loss_that_took_the_log_pages_is_redone_from_the_journal() {
    let live = dir("live");
    let db = Db::open(&live, opts(Some(true))).unwrap_or_else(|e| panic!("open: {e}"));
    let mut oracle = BTreeMap::new();
    for i in 0..300u64 {
        let k = format!("key{:04}", i % 170).into_bytes();
        if i % 11 == 5 {
            db.delete_with(&k, Durability::Sync)
                .unwrap_or_else(|e| panic!("delete: {e}"));
            oracle.insert(k, None);
        } else if i % 7 == 3 {
            let k2 = format!("key{:04}", (i + 1) % 170).into_bytes();
            let mut b = WriteBatch::new();
            b.put(k.clone(), value(i)).put(k2.clone(), value(i + 1000));
            db.write_with(&b, Durability::Sync)
                .unwrap_or_else(|e| panic!("batch: {e}"));
            oracle.insert(k, Some(value(i)));
            oracle.insert(k2, Some(value(i + 1000)));
        } else {
            db.put_with(&k, &value(i), Durability::Sync)
                .unwrap_or_else(|e| panic!("put: {e}"));
            oracle.insert(k, Some(value(i)));
        }
    }
    let s = db.stats();
    assert!(s.log_durability.starts_with("journal"), "{s:?}");
    assert!(s.journal_blocks >= 300, "{s:?}");
    assert_eq!(
        s.journal_checkpoints, 0,
        "the journal must hold every block"
    );

    // The power loss, with the journal: every acknowledged write comes back.
    let copy = dir("copy");
    copy_store(&live, &copy, true);
    assert!(lose_log_pages(&copy) >= 1);
    {
        let back = Db::open(&copy, opts(Some(true))).unwrap_or_else(|e| panic!("reopen: {e}"));
        assert!(back.recovery_info().journal_blocks_redone >= 300);
        for (k, v) in &oracle {
            let got = back.get(k).unwrap_or_else(|e| panic!("get: {e}"));
            assert_eq!(&got, v, "{}", String::from_utf8_lossy(k));
        }
        // A second crash right after that recovery: its redo is durable in the pool.
        drop(back);
    }
    // The same loss without the journal file: the writes are gone (or the damage is
    // refused), so the check above depends on the journal.
    let bare = dir("bare");
    copy_store(&live, &bare, false);
    lose_log_pages(&bare);
    if let Ok(back) = Db::open(&bare, opts(Some(false))) {
        let found = oracle
            .iter()
            .filter(|(k, v)| back.get(k).ok().flatten() == **v)
            .count();
        assert!(
            found < oracle.len() / 2,
            "{found} of {} survived",
            oracle.len()
        );
    }
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
    for d in [&live, &copy, &bare] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn the_journal_follows_the_option_across_reopens() {
    let d = dir("toggle");
    let file = d.join("JOURNAL");
    {
        let db = Db::open(&d, opts(Some(true))).unwrap_or_else(|e| panic!("open: {e}"));
        db.put_with(b"a", b"1", Durability::Sync)
            .unwrap_or_else(|e| panic!("put: {e}"));
        assert!(file.exists());
        // Pre-written: the file system holds written blocks for the whole file.
        let m = std::fs::metadata(&file).unwrap_or_else(|e| panic!("stat: {e}"));
        let blocks = std::os::unix::fs::MetadataExt::blocks(&m) * 512;
        assert!(blocks >= m.len(), "{blocks} of {} bytes allocated", m.len());
    }
    {
        // Turned off: the journal is redone (nothing to do after a clean close) and
        // removed; the store still opens and holds its data.
        let db = Db::open(&d, opts(Some(false))).unwrap_or_else(|e| panic!("open: {e}"));
        assert!(!file.exists());
        assert_eq!(db.stats().log_durability, "fence");
        assert_eq!(db.get(b"a").ok().flatten().as_deref(), Some(&b"1"[..]));
        db.put_with(b"b", b"2", Durability::Sync)
            .unwrap_or_else(|e| panic!("put: {e}"));
    }
    {
        let db = Db::open(&d, opts(Some(true))).unwrap_or_else(|e| panic!("open: {e}"));
        assert!(file.exists());
        assert_eq!(db.get(b"b").ok().flatten().as_deref(), Some(&b"2"[..]));
    }
    let _ = std::fs::remove_dir_all(&d);
}
