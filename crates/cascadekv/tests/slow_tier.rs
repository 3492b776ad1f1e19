//! The slow (capacity) tier (issue #14, `slowtier/`): data beyond the fast budget
//! moves to table files in the slow directory and reads back exactly — point reads,
//! scans both ways, after merges and splits, after a reopen — and a damaged or foreign
//! slow directory is an error, never wrong data.

use std::collections::BTreeMap;
use std::path::Path;

use cascadekv::{Db, Error, Options};

#[path = "common/slowdirs.rs"]
mod slowdirs;
use slowdirs::Dirs;

fn opts(slow: &Path) -> Options {
    slowdirs::opts(slow, 2, 2 << 20)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("key{:08}", (i * 7919) % 100_000).into_bytes()
}

use slowdirs::mixed_value as value;

fn check(db: &Db, model: &Model, deleted: &[Vec<u8>]) -> cascadekv::Result<()> {
    for (k, v) in model {
        assert_eq!(
            db.get(k)?.as_ref(),
            Some(v),
            "key {}",
            String::from_utf8_lossy(k)
        );
    }
    for k in deleted {
        if !model.contains_key(k) {
            assert_eq!(
                db.get(k)?,
                None,
                "deleted key {}",
                String::from_utf8_lossy(k)
            );
        }
    }
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = db.iter(..)?.collect::<cascadekv::Result<_>>()?;
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(fwd.len(), want.len());
    assert!(fwd == want, "forward scan differs");
    let mut back: Vec<(Vec<u8>, Vec<u8>)> = db.iter(..)?.rev().collect::<cascadekv::Result<_>>()?;
    back.reverse();
    assert!(back == want, "backward scan differs");
    // A bounded scan starting inside the key space.
    let lo = b"key00050000".to_vec();
    let part: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter(lo.clone()..)?
        .take(300)
        .collect::<cascadekv::Result<_>>()?;
    let want_part: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(lo..)
        .take(300)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(part == want_part, "bounded scan differs");
    Ok(())
}

/// Writes `n` keys of round `round`, deleting every 13th key of the previous round.
fn round(
    db: &Db,
    model: &mut Model,
    deleted: &mut Vec<Vec<u8>>,
    n: u64,
    round: u64,
) -> cascadekv::Result<()> {
    for i in 0..n {
        let k = key(i + round * 1000);
        let v = value(i, round);
        db.put(&k, &v)?;
        model.insert(k, v);
        if i % 13 == 0 {
            let d = key(i + (round.saturating_sub(1)) * 1000);
            db.delete(&d)?;
            model.remove(&d);
            deleted.push(d);
        }
    }
    db.flush_faststore()?;
    db.compact()?;
    Ok(())
}

#[test]
fn data_beyond_the_fast_budget_moves_down_and_reads_back() -> cascadekv::Result<()> {
    let d = Dirs::new("slowt-basic");
    let (mut model, mut deleted) = (Model::new(), Vec::new());
    {
        let db = Db::open(d.data(), opts(&d.slow()))?;
        for r in 0..6 {
            round(&db, &mut model, &mut deleted, 4000, r)?;
        }
        let s = db.stats();
        assert!(s.demotions > 0, "{s:?}");
        assert!(s.slow_tier_bytes > s.stable_bytes, "{s:?}");
        assert!(s.stable_bytes + s.vlog_live_bytes <= 600 << 10, "{s:?}");
        assert!(s.slow_merges > 0, "no merge ran");
        assert!(s.slow_splits > 0, "no split ran");
        assert!(s.slow_tier_partitions > 1);
        assert!(s.slow_write_amplification >= 1.0);
        eprintln!("{s:#?}");
        check(&db, &model, &deleted)?;
        assert!(db.stats().slow_gets > 0);
        db.close()?;
    }
    // Reopen: the manifest names the same files, and their filters come from the
    // files' filter sections: one get reads the table's index block and one data
    // block, not every block of every table it passes (a filter rebuilt lazily would).
    let db = Db::open(d.data(), opts(&d.slow()))?;
    let (k, v) = model
        .iter()
        .find(|(_, v)| v.len() < 1000)
        .map_or((Vec::new(), Vec::new()), |(k, v)| (k.clone(), v.clone()));
    // The open read each file's filter section once.
    let at_open = db.stats().slow_reads;
    assert_eq!(at_open, db.stats().slow_tier_files);
    assert_eq!(db.get(&k)?, Some(v));
    let reads = db.stats().slow_reads - at_open;
    assert!(
        (1..=4).contains(&reads),
        "{reads} slow-tier reads for one get after a reopen"
    );
    check(&db, &model, &deleted)?;
    // Every slow-tier file is named by the manifest: nothing left behind.
    let files = std::fs::read_dir(d.slow()).map_err(|e| Error::io("ls", e))?;
    let ssts = files
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .count() as u64;
    assert_eq!(ssts, db.stats().slow_tier_files);
    Ok(())
}

#[test]
fn orphans_go_and_a_missing_or_foreign_slow_directory_is_refused() -> cascadekv::Result<()> {
    let d = Dirs::new("slowt-orphans");
    let mut model = Model::new();
    {
        let db = Db::open(d.data(), opts(&d.slow()))?;
        round(&db, &mut model, &mut Vec::new(), 6000, 0)?;
        assert!(db.stats().slow_tier_files > 0);
        db.close()?;
    }
    // A file a crashed job left (never named by the manifest) and a temporary.
    std::fs::write(d.slow().join("999999999999.sst"), b"junk").map_err(|e| Error::io("w", e))?;
    std::fs::write(d.slow().join("000000000777.sst.tmp"), b"junk")
        .map_err(|e| Error::io("w", e))?;
    {
        let db = Db::open(d.data(), opts(&d.slow()))?;
        assert_eq!(db.recovery_info().slow_orphans, 2);
        assert!(!d.slow().join("999999999999.sst").exists());
        check(&db, &model, &[])?;
        db.close()?;
    }
    // Without its slow directory the store does not open.
    let no_slow = Options {
        slow_dir: None,
        ..opts(&d.slow())
    };
    let e = Db::open(d.data(), no_slow).err();
    assert!(matches!(e, Some(Error::InvalidArgument(_))), "{e:?}");
    // Another store may not use this slow directory (it would delete its files).
    let other = d.root.join("other");
    let e = Db::open(&other, opts(&d.slow())).err();
    assert!(matches!(e, Some(Error::InvalidArgument(_))), "{e:?}");
    let db = Db::open(d.data(), opts(&d.slow()))?;
    check(&db, &model, &[])?;
    Ok(())
}

/// Options with point reads through `O_DIRECT`, or `None` (after checking that the
/// open says why) where the slow directory's file system refuses it.
fn direct_opts(d: &Dirs) -> cascadekv::Result<Option<Options>> {
    let o = Options {
        slow_direct_reads: true,
        ..opts(&d.slow())
    };
    match Db::open(d.data(), o.clone()) {
        Ok(db) => {
            db.close()?;
            Ok(Some(o))
        }
        Err(Error::InvalidArgument(why)) => {
            assert!(why.contains("O_DIRECT"), "{why}");
            eprintln!("no O_DIRECT here: {why}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Point reads that bypass the page cache return what buffered ones do — gets,
/// separated values, after merges, splits and a reopen — and are counted.
#[test]
fn direct_point_reads_return_the_same_data() -> cascadekv::Result<()> {
    let d = Dirs::new("slowt-direct");
    let Some(o) = direct_opts(&d)? else {
        return Ok(());
    };
    let (mut model, mut deleted) = (Model::new(), Vec::new());
    {
        let db = Db::open(d.data(), o.clone())?;
        for r in 0..4 {
            round(&db, &mut model, &mut deleted, 4000, r)?;
        }
        check(&db, &model, &deleted)?;
        let s = db.stats();
        assert!(s.slow_gets > 0, "{s:?}");
        assert!(s.slow_direct_reads >= s.slow_gets, "{s:?}");
        // Every point read went through O_DIRECT; scans and merges did not.
        assert_eq!(s.slow_direct_reads, s.slow_point_reads, "{s:?}");
        assert!(s.slow_reads > s.slow_point_reads, "{s:?}");
        db.close()?;
    }
    let db = Db::open(d.data(), o)?;
    check(&db, &model, &deleted)?;
    assert!(db.stats().slow_direct_reads > 0);
    Ok(())
}

#[test]
fn damaged_slow_files_are_errors_never_wrong_data() -> cascadekv::Result<()> {
    damaged_slow_files(false)
}

#[test]
fn damaged_slow_files_read_directly_are_errors_never_wrong_data() -> cascadekv::Result<()> {
    damaged_slow_files(true)
}

fn damaged_slow_files(direct: bool) -> cascadekv::Result<()> {
    let d = Dirs::new(if direct {
        "slowt-damage-direct"
    } else {
        "slowt-damage"
    });
    let o = if direct {
        match direct_opts(&d)? {
            Some(o) => o,
            None => return Ok(()),
        }
    } else {
        opts(&d.slow())
    };
    let mut model = Model::new();
    {
        let db = Db::open(d.data(), o.clone())?;
        round(&db, &mut model, &mut Vec::new(), 6000, 0)?;
        db.close()?;
    }
    // Flip one byte in every 4 KiB of every slow-tier file.
    for e in std::fs::read_dir(d.slow()).map_err(|e| Error::io("ls", e))? {
        let p = e.map_err(|e| Error::io("ls", e))?.path();
        if p.extension().is_some_and(|x| x == "sst") {
            let mut b = std::fs::read(&p).map_err(|e| Error::io("r", e))?;
            for i in (100..b.len()).step_by(4096) {
                b[i] ^= 0x20;
            }
            std::fs::write(&p, b).map_err(|e| Error::io("w", e))?;
        }
    }
    let db = Db::open(d.data(), o)?;
    let (mut ok, mut bad) = (0, 0);
    for (k, v) in &model {
        match db.get(k) {
            Ok(Some(got)) => {
                assert_eq!(&got, v, "wrong data for {}", String::from_utf8_lossy(k));
                ok += 1;
            }
            Ok(None) => panic!(
                "a damaged slow tier lost {} silently",
                String::from_utf8_lossy(k)
            ),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                bad += 1;
            }
        }
    }
    assert!(bad > 0, "no damage was seen");
    assert!(ok > 0);
    assert_eq!(db.stats().slow_direct_reads > 0, direct);
    Ok(())
}

/// A writer that outruns demotion waits for it instead of filling the pool: 64 MiB of
/// values stream through a 32 MiB pool with an 8 MiB fast budget while slow-tier
/// writes are held to 32 MB/s; every write succeeds and every value reads back
/// (without the wait the pool fills: PoolFull).
#[test]
fn a_sustained_writer_waits_for_demotion_instead_of_filling_the_pool() -> cascadekv::Result<()> {
    let d = Dirs::new("slowt-pressure");
    let o = Options {
        pool_size: 32 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: 2 << 20,
        background: true,
        fast_budget: 8 << 20,
        slow_write_rate: 32 << 20,
        ..opts(&d.slow())
    };
    let db = Db::open(d.data(), o)?;
    let n = 64u64 * 1024;
    let val = |i: u64| {
        let mut v = i.to_le_bytes().to_vec();
        v.resize(1000, b'x');
        v
    };
    for i in 0..n {
        db.put(format!("k{i:09}").as_bytes(), &val(i))?;
    }
    let s = db.stats();
    assert!(s.slow_tier_bytes > 32 << 20, "{s:?}");
    assert!(s.stalls > 0, "the writer never waited: {s:?}");
    for i in (0..n).step_by(97) {
        assert_eq!(
            db.get(format!("k{i:09}").as_bytes())?,
            Some(val(i)),
            "key {i}"
        );
    }
    Ok(())
}
