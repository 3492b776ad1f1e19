//! Fast restart (FlatStore §3.5): a clean close checkpoints the FastStore index and the
//! next open loads it instead of replaying the logs — with exactly the data replay
//! would give; a damaged checkpoint, or none, means a replay, never different data.
//! (Crash images taken at every fence of a close, checkpoint included, are in
//! `simcrash.rs`; SIGKILLs never leave a usable checkpoint: `kill.rs`.)

use std::collections::BTreeMap;

use cascadekv::{Db, Options};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ckv-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A store whose FastStore is not flushed behind the tests' back (a read-only spell
/// would flush it in the background), so every reopen has entries to load.
fn opts() -> Options {
    Options {
        pool_size: 64 << 20,
        chunk_size: 256 << 10,
        flush_when_read_only: false,
        ..Options::default()
    }
}

/// Puts, overwrites (small and separated values) and deletes, mirrored in `model`.
fn write_round(
    db: &Db,
    model: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    round: u32,
) -> cascadekv::Result<()> {
    for i in 0..3000u32 {
        let k = format!("key{:05}", (i * 7 + round * 13) % 4000).into_bytes();
        let v = if i % 5 == 0 {
            vec![(i % 251) as u8; 300 + (i % 700) as usize] // separated
        } else {
            format!("v{round}-{i}").into_bytes()
        };
        db.put(&k, &v)?;
        model.insert(k, Some(v));
        if i % 11 == 0 {
            let d = format!("key{:05}", (i * 3 + round) % 4000).into_bytes();
            db.delete(&d)?;
            model.insert(d, None);
        }
    }
    Ok(())
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Option<Vec<u8>>>) -> cascadekv::Result<()> {
    for (k, want) in model {
        assert_eq!(&db.get(k)?, want, "key {}", String::from_utf8_lossy(k));
    }
    let live = model.values().filter(|v| v.is_some()).count();
    assert_eq!(db.scan(None, None, usize::MAX)?.len(), live);
    Ok(())
}

/// Byte offsets of every checkpoint head in the pool file ("CKPT", version 1).
fn heads(dir: &std::path::Path) -> Vec<usize> {
    let b = std::fs::read(dir.join("pool")).unwrap_or_else(|e| panic!("read pool: {e}"));
    (0..b.len().saturating_sub(8))
        .filter(|&i| &b[i..i + 4] == b"CKPT" && b[i + 4..i + 8] == 1u32.to_le_bytes())
        .collect()
}

#[test]
fn clean_reopen_loads_the_checkpoint_and_reads_what_replay_would() -> cascadekv::Result<()> {
    let dir = tmp("load");
    let mut model = BTreeMap::new();
    for round in 0..3 {
        let db = Db::open(&dir, opts())?;
        let info = db.recovery_info();
        if round > 0 {
            assert!(
                info.clean_shutdown && info.from_checkpoint,
                "round {round}: {info:?}"
            );
            assert!(info.records > 0);
            assert!(db.stats().recovered_from_checkpoint);
        }
        check(&db, &model)?;
        write_round(&db, &mut model, round)?;
        check(&db, &model)?;
        db.close()?;
    }
    // The same store opened without using a checkpoint (replay) reads the same.
    let db = Db::open(
        &dir,
        Options {
            checkpoint_at_close: false,
            ..opts()
        },
    )?;
    assert!(
        db.recovery_info().from_checkpoint,
        "the last close wrote one"
    );
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let db = Db::open(&dir, opts())?;
    assert!(
        !db.recovery_info().from_checkpoint,
        "no checkpoint was written: replay"
    );
    check(&db, &model)?;
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_damaged_checkpoint_is_replaced_by_a_replay() -> cascadekv::Result<()> {
    let dir = tmp("damaged");
    let mut model = BTreeMap::new();
    let db = Db::open(&dir, opts())?;
    write_round(&db, &mut model, 0)?;
    db.close()?;
    drop(db);
    let found = heads(&dir);
    assert_eq!(found.len(), 1, "one checkpoint after a clean close");
    // One bit of a fresh copy each time: the checkpoint's chunk header (64 bytes before
    // its head: a redundant checkpoint's damage must not refuse the open), its head,
    // its list of segments, an entry.
    let spots = [
        found[0] - 44,
        found[0] + 9,
        found[0] + 64 + 40,
        found[0] + 64 + 5000,
    ];
    for (i, off) in spots.iter().enumerate() {
        let mut b = std::fs::read(dir.join("pool")).unwrap_or_else(|e| panic!("read: {e}"));
        let copy = tmp(&format!("damaged-{i}"));
        std::fs::create_dir_all(&copy).unwrap_or_else(|e| panic!("mkdir: {e}"));
        b[*off] ^= 0x10;
        std::fs::write(copy.join("pool"), &b).unwrap_or_else(|e| panic!("write: {e}"));
        let db = Db::open(&copy, opts())?;
        assert!(
            !db.recovery_info().from_checkpoint,
            "flip at {} from the head",
            i64::try_from(*off).unwrap_or(0) - i64::try_from(found[0]).unwrap_or(0)
        );
        check(&db, &model)?;
        db.close()?;
        drop(db);
        let _ = std::fs::remove_dir_all(&copy);
    }
    // The intact one is used, and freed by the open that used it.
    let db = Db::open(&dir, opts())?;
    assert!(db.recovery_info().from_checkpoint);
    check(&db, &model)?;
    db.put(b"after", b"1")?;
    model.insert(b"after".to_vec(), Some(b"1".to_vec()));
    db.close()?;
    drop(db);
    assert_eq!(
        heads(&dir).len(),
        1,
        "the old checkpoint was freed, a new one written"
    );
    let db = Db::open(&dir, opts())?;
    check(&db, &model)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
