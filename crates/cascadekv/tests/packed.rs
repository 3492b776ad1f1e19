//! Compacted log entries (FlatStore §3.2, `log/packed.rs`): a write of several small
//! operations — a `WriteBatch`, or a group of synchronous writes a leader appends —
//! goes to the log as one packed record. It takes fewer log bytes per put and reads
//! back exactly as the plain records did, after a replay as well as from a checkpoint.
//! (Crash images at every fence: `simcrash.rs`; SIGKILLs: `kill.rs`; both write
//! batches and grouped synchronous writes.)

use std::collections::BTreeMap;
use std::sync::Arc;

use cascadekv::{Db, Durability, Options, WriteBatch};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ckv-packed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn opts(checkpoint: bool) -> Options {
    Options {
        pool_size: 64 << 20,
        chunk_size: 256 << 10,
        flush_when_read_only: false,
        checkpoint_at_close: checkpoint,
        ..Options::default()
    }
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Runs `body(thread, db)` on `threads` threads that start together; their models
/// merged (each thread writes keys of its own).
fn writers(
    db: &Db,
    threads: u64,
    body: impl Fn(u64, &Db) -> cascadekv::Result<Model> + Sync,
) -> cascadekv::Result<Model> {
    let start = std::sync::Barrier::new(usize::try_from(threads).unwrap_or(1));
    let models = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (start, body) = (&start, &body);
                s.spawn(move || {
                    start.wait();
                    body(t, db)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("writer panicked")))
            .collect::<cascadekv::Result<Vec<_>>>()
    })?;
    Ok(models.into_iter().flatten().collect())
}

fn check(db: &Db, model: &Model) -> cascadekv::Result<()> {
    for (k, want) in model {
        assert_eq!(&db.get(k)?, want, "key {}", String::from_utf8_lossy(k));
    }
    Ok(())
}

/// Writes 20,000 8 B + 8 B puts (key numbers modulo `keys`) in batches of ten,
/// mirrored in `model`; returns the log bytes written per put.
fn batches_of_ten(db: &Db, keys: u64, model: &mut Model) -> cascadekv::Result<f64> {
    let before = db.stats().log_bytes_written;
    let puts = 20_000u64;
    for b in 0..puts / 10 {
        let mut batch = WriteBatch::new();
        for i in 0..10 {
            let k = format!("k{:07}", (b * 10 + i) % keys).into_bytes();
            let v = (b * 10 + i).to_le_bytes().to_vec();
            batch.put(k.clone(), v.clone());
            model.insert(k, Some(v));
        }
        db.write(&batch)?;
    }
    Ok((db.stats().log_bytes_written - before) as f64 / puts as f64)
}

/// Batches of ten 8 B + 8 B puts: ~22 log bytes per put (a plain record is 32), and
/// every value (deletes and a separated value among them) back after a replay.
#[test]
fn small_batches_take_fewer_log_bytes_and_replay_exactly() -> cascadekv::Result<()> {
    let dir = tmp("batches");
    let mut model = Model::new();
    let db = Db::open(&dir, opts(false))?;
    let per_put = batches_of_ten(&db, 15_000, &mut model)?;
    assert!(
        (15.0..26.0).contains(&per_put),
        "{per_put:.1} log bytes per 8 B + 8 B put in batches of ten"
    );
    // Mixed batches: deletes pack too; a separated value keeps its own records.
    for b in 0..300u64 {
        let mut batch = WriteBatch::new();
        let d = format!("k{:07}", b * 7).into_bytes();
        batch.delete(d.clone());
        model.insert(d, None);
        let k = format!("k{:07}", b * 7 + 1).into_bytes();
        let v = if b % 10 == 0 {
            vec![b as u8; 2000]
        } else {
            b"short".to_vec()
        };
        batch.put(k.clone(), v.clone());
        model.insert(k, Some(v));
        db.write(&batch)?;
    }
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let db = Db::open(&dir, opts(false))?;
    assert!(
        !db.stats().recovered_from_checkpoint,
        "the logs were replayed"
    );
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Synchronous writers batched across threads: the leader packs the group. Values come
/// back after a replay and from a checkpoint, and a reopen with a lower inline
/// threshold still serves packed values (they stay inline: no pointer names them).
#[test]
fn grouped_sync_writes_pack_and_recover() -> cascadekv::Result<()> {
    let dir = tmp("groups");
    let o = Options {
        sync_group_size: 32,
        ..opts(false)
    };
    let db = Arc::new(Db::open(&dir, o.clone())?);
    let model = writers(&db, 8, |t, db| {
        let mut m = Model::new();
        for i in 0..400u64 {
            let k = format!("t{t}-{:05}", i % 300).into_bytes();
            if i % 9 == 4 {
                db.delete_with(&k, Durability::Sync)?;
                m.insert(k, None);
            } else {
                let v = vec![(i % 200) as u8; 8 + (i % 120) as usize];
                db.put_with(&k, &v, Durability::Sync)?;
                m.insert(k, Some(v));
            }
        }
        Ok(m)
    })?;
    check(&db, &model)?;
    let db = Arc::try_unwrap(db).unwrap_or_else(|_| panic!("db still shared"));
    db.close()?;
    drop(db);
    // Replay, with a threshold below most packed values.
    let db = Db::open(
        &dir,
        Options {
            inline_threshold: 16,
            checkpoint_at_close: true,
            ..o.clone()
        },
    )?;
    check(&db, &model)?;
    db.close()?;
    drop(db);
    // And from the checkpoint that close wrote.
    let db = Db::open(&dir, o)?;
    assert!(db.stats().recovered_from_checkpoint);
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Grouped synchronous writes go to the generation's few group logs, not to a log per
/// writer thread: 16 threads that write once each and then keep writing leave at most
/// four log segments (one per group log), where a log per thread took 16 — every
/// writer's first write allocated one (`faststore/group.rs`). Everything reads back,
/// before and after a replay.
#[test]
fn grouped_sync_writes_use_few_logs() -> cascadekv::Result<()> {
    let dir = tmp("grouplogs");
    let o = Options {
        sync_group_size: 32,
        ..opts(false)
    };
    let db = Arc::new(Db::open(&dir, o.clone())?);
    let threads = 16u64;
    let model = writers(&db, threads, |t, db| {
        let mut m = Model::new();
        for i in 0..150u64 {
            let k = format!("w{t:02}-{i:04}").into_bytes();
            let v = vec![t as u8; 24 + (i % 40) as usize];
            db.put_with(&k, &v, Durability::Sync)?;
            m.insert(k, Some(v));
        }
        Ok(m)
    })?;
    let st = db.stats();
    assert_eq!(st.faststore_switches, 0, "the test wants one generation");
    assert!(
        (1..=4).contains(&st.log_segments),
        "{} log segments for {threads} synced writer threads",
        st.log_segments
    );
    check(&db, &model)?;
    let db = Arc::try_unwrap(db).unwrap_or_else(|_| panic!("db still shared"));
    db.close()?;
    drop(db);
    let db = Db::open(&dir, o)?;
    check(&db, &model)?;
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// `pack_log_entries: false` writes a record per operation: the same batches take a
/// 32-byte record per put plus the batch header (the comparison `cascade-plain` runs).
#[test]
fn plain_records_when_packing_is_off() -> cascadekv::Result<()> {
    let dir = tmp("plain");
    let db = Db::open(
        &dir,
        Options {
            pack_log_entries: false,
            ..opts(false)
        },
    )?;
    let per_put = batches_of_ten(&db, u64::MAX, &mut Model::new())?;
    assert!(
        (30.0..40.0).contains(&per_put),
        "{per_put:.1} log bytes per put without packing"
    );
    db.close()?;
    drop(db);
    let db = Db::open(&dir, opts(false))?;
    assert_eq!(db.get(b"k0019999")?, Some(19_999u64.to_le_bytes().to_vec()));
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
