//! The integrity tools over the slow tier (issue #14): `integrity::verify_with` walks
//! every slow-tier table and blob after StableStore and names the damaged file; a
//! missing or truncated file is a finding, never a crash; `integrity::repair_with`
//! keeps every intact key (slow-tier ones included), leaves the repaired store paired
//! with its slow directory and the damaged one with the old slow directory; and a
//! store with slow-tier data is never checked without its slow directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cascadekv::integrity::{self, Structure};
use cascadekv::{Db, Error, Options};

#[path = "common/slowdirs.rs"]
mod slowdirs;
use slowdirs::Dirs;

fn opts(slow: &Path) -> Options {
    slowdirs::opts(slow, 4, 3 << 20)
}

/// Every key ever written: its value, or `None` once deleted.
type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

const N: u64 = 6000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

use slowdirs::mixed_value as value;

/// Writes N keys, then twice overwrites some and deletes others (newer runs over the
/// first in the slow tier's partitions), compacting after each round; closes cleanly.
fn build(d: &Dirs) -> cascadekv::Result<Model> {
    let mut model = Model::new();
    let db = Db::open(d.data(), opts(&d.slow()))?;
    for (round, put, del) in [(0, 1, 0), (1, 3, 13), (2, 7, 17)] {
        for i in (0..N).step_by(put) {
            let v = value(i, round);
            db.put(&key(i), &v)?;
            model.insert(key(i), Some(v));
        }
        if del > 0 {
            for i in (0..N).step_by(del) {
                db.delete(&key(i))?;
                model.insert(key(i), None);
            }
        }
        db.flush_faststore()?;
        db.compact()?;
    }
    let s = db.stats();
    // Partitions of several runs each.
    assert!(
        s.slow_tier_partitions > 1 && s.slow_tier_files > s.slow_tier_partitions,
        "{s:?}"
    );
    db.close()?;
    Ok(model)
}

/// The slow-tier table files in `slow`, by name.
fn ssts(slow: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(slow)
        .unwrap_or_else(|e| panic!("ls {}: {e}", slow.display()))
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    v.sort();
    v
}

fn largest(files: &[PathBuf]) -> PathBuf {
    files
        .iter()
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
        .unwrap_or_else(|| panic!("no slow-tier file"))
}

/// Flips one byte in every 4 KiB of `file`.
fn flip_every_4k(file: &Path) {
    let mut b = std::fs::read(file).unwrap_or_else(|e| panic!("read: {e}"));
    for i in (100..b.len()).step_by(4096) {
        b[i] ^= 0x20;
    }
    std::fs::write(file, b).unwrap_or_else(|e| panic!("write: {e}"));
}

/// A blob (a 300 KB value) in some slow-tier file: (file, offset of its value's
/// start, key).
fn find_blob(files: &[PathBuf], model: &Model) -> (PathBuf, usize, Vec<u8>) {
    for i in (9..N).step_by(500) {
        let k = key(i);
        let Some(Some(v)) = model.get(&k) else {
            continue;
        };
        if v.len() < 300_000 {
            continue;
        }
        let prefix = &v[..v.iter().position(|&c| c == b'-').unwrap_or(0) + 4];
        for f in files {
            let b = std::fs::read(f).unwrap_or_else(|e| panic!("read: {e}"));
            if let Some(at) = b.windows(prefix.len()).position(|w| w == prefix) {
                return (f.clone(), at, k);
            }
        }
    }
    panic!("no blob found in the slow-tier files");
}

fn is_invalid<T: std::fmt::Debug>(r: &cascadekv::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

#[test]
fn a_store_with_a_slow_tier_verifies_clean_and_needs_its_slow_directory() -> cascadekv::Result<()> {
    let d = Dirs::new("slowint-clean");
    let model = build(&d)?;
    let r = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert!(
        r.is_clean(),
        "{:?}",
        r.findings.first().map(ToString::to_string)
    );
    assert_eq!(r.stats.slow_files as usize, ssts(&d.slow()).len());
    assert!(r.stats.slow_tables > 0 && r.stats.tables > r.stats.slow_tables);
    // Blobs are read and checked too.
    assert!(r.stats.values > 0, "{:?}", r.stats);
    let live = model.values().filter(|v| v.is_some()).count() as u64;
    assert_eq!(r.keys_read, live);

    // Without its slow directory (or with a wrong or foreign one): refused, not
    // reported as a lost tier.
    assert!(is_invalid(&integrity::verify(&d.data())));
    let none = Options {
        slow_dir: None,
        ..opts(&d.slow())
    };
    assert!(is_invalid(&integrity::verify_with(&d.data(), &none)));
    let missing = d.root.join("nowhere");
    assert!(is_invalid(&integrity::verify_with(
        &d.data(),
        &opts(&missing)
    )));
    let foreign = d.root.join("foreign");
    std::fs::create_dir_all(&foreign).map_err(|e| Error::io("mkdir", e))?;
    std::fs::write(foreign.join("OWNER"), "0123456789abcdef\n").map_err(|e| Error::io("w", e))?;
    assert!(is_invalid(&integrity::verify_with(
        &d.data(),
        &opts(&foreign)
    )));
    // The same for repair, which then changes nothing.
    assert!(is_invalid(&integrity::repair(&d.data())));
    assert!(is_invalid(&integrity::repair_with(
        &d.data(),
        &opts(&foreign)
    )));
    // Nothing was changed by any of it.
    let db = Db::open(d.data(), opts(&d.slow()))?;
    for (k, v) in &model {
        assert_eq!(&db.get(k)?, v);
    }
    Ok(())
}

#[test]
fn flipped_bytes_in_a_slow_file_are_findings_naming_it() -> cascadekv::Result<()> {
    let d = Dirs::new("slowint-flip");
    let model = build(&d)?;
    let files = ssts(&d.slow());

    // A blob: its checksum catches it, and the finding covers its key.
    let (bf, at, bk) = find_blob(&files, &model);
    let mut b = std::fs::read(&bf).map_err(|e| Error::io("r", e))?;
    b[at + 100_000] ^= 0x01;
    std::fs::write(&bf, b).map_err(|e| Error::io("w", e))?;
    let r = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert!(!r.is_clean());
    let f = r
        .findings
        .iter()
        .find(|f| f.covers(&bk))
        .unwrap_or_else(|| panic!("no finding covers the blob's key: {:?}", r.findings));
    assert_eq!(f.structure, Structure::TableBlock);
    assert_eq!(f.file.as_deref(), Some(bf.as_path()));
    let name = bf.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(
        f.to_string().contains(name.as_deref().unwrap_or("?")),
        "{f}"
    );

    // Many flipped bytes all over the largest file: every finding is in a slow file
    // and at least one names that one.
    let big = largest(&files);
    flip_every_4k(&big);
    let r = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert!(
        r.findings
            .iter()
            .any(|f| f.file.as_deref() == Some(big.as_path())),
        "{:?}",
        r.findings
    );
    for f in &r.findings {
        assert!(f.file.is_some(), "not in a slow file: {f}");
        assert!(matches!(
            f.structure,
            Structure::TableBlock | Structure::SlowFile
        ));
    }
    // Verify changed nothing: the same again.
    let again = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert_eq!(again.findings.len(), r.findings.len());
    Ok(())
}

#[test]
fn a_missing_or_truncated_slow_file_is_a_finding() -> cascadekv::Result<()> {
    let d = Dirs::new("slowint-missing");
    build(&d)?;
    let files = ssts(&d.slow());
    let gone = files[0].clone();
    std::fs::remove_file(&gone).map_err(|e| Error::io("rm", e))?;
    let r = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    let f = r
        .findings
        .iter()
        .find(|f| f.structure == Structure::SlowFile)
        .unwrap_or_else(|| panic!("missing file not reported: {:?}", r.findings));
    assert_eq!(f.file.as_deref(), Some(gone.as_path()));
    assert!(f.key.is_some(), "{f}");
    assert!(f.to_string().contains("missing"), "{f}");
    assert_eq!(r.stats.slow_files as usize, files.len() - 1);

    // A truncated file: the tables past its end are reported, those before it read.
    let short = largest(&files[1..]);
    let len = std::fs::metadata(&short)
        .map_err(|e| Error::io("stat", e))?
        .len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&short)
        .map_err(|e| Error::io("open", e))?;
    f.set_len(len / 2).map_err(|e| Error::io("truncate", e))?;
    drop(f);
    let r = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert!(
        r.findings
            .iter()
            .any(|f| f.structure == Structure::SlowFile
                && f.file.as_deref() == Some(short.as_path())),
        "{:?}",
        r.findings
    );
    assert!(r
        .findings
        .iter()
        .any(|f| f.file.as_deref() == Some(gone.as_path())));
    Ok(())
}

#[test]
fn repair_keeps_every_intact_key_and_pairs_the_slow_directory() -> cascadekv::Result<()> {
    let d = Dirs::new("slowint-repair");
    let model = build(&d)?;
    // The newest file: the newest run of its partition, over older versions.
    let big = ssts(&d.slow())
        .pop()
        .unwrap_or_else(|| panic!("no slow-tier file"));
    flip_every_4k(&big);
    let r = integrity::repair_with(&d.data(), &opts(&d.slow()))?;
    assert!(!r.findings.is_empty());
    // Older versions kept where the damaged run held newer ones: flagged.
    assert!(!r.maybe_stale.is_empty());
    assert!(r.keys_kept > 0);
    let kept = r
        .kept_damaged
        .clone()
        .unwrap_or_else(|| panic!("no kept store"));
    let kept_slow = r
        .kept_damaged_slow
        .clone()
        .unwrap_or_else(|| panic!("no kept slow directory"));
    assert!(kept_slow.join(big.file_name().unwrap_or_default()).exists());
    let text = integrity::render_repair(&d.data(), &r);
    assert!(text.contains(&kept_slow.display().to_string()), "{text}");

    // The repaired store opens with the same slow directory and is clean.
    let v = integrity::verify_with(&d.data(), &opts(&d.slow()))?;
    assert!(
        v.is_clean(),
        "{:?}",
        v.findings.first().map(ToString::to_string)
    );
    {
        let db = Db::open(d.data(), opts(&d.slow()))?;
        let (mut intact, mut named) = (0, 0);
        for (k, want) in &model {
            let got = db.get(k)?;
            let reported = r.findings.iter().any(|f| f.covers(k)) || r.maybe_stale.contains(k);
            if reported {
                named += 1;
            } else {
                // Every key no damaged part held is kept, exactly.
                assert_eq!(
                    &got,
                    want,
                    "key {} lost or changed by the repair",
                    String::from_utf8_lossy(k)
                );
                intact += 1;
            }
        }
        assert!(named > 0 && intact > 0, "{intact} intact, {named} named");
        // Its data moves to its own slow tier again.
        db.compact()?;
        let s = db.stats();
        assert!(s.slow_tier_files > 0, "{s:?}");
        db.close()?;
    }
    // Each data directory owns its slow directory: the new pair and the kept pair.
    let id = |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| Error::io("read id", e));
    assert_eq!(id(d.data().join("SLOW_ID"))?, id(d.slow().join("OWNER"))?);
    assert_eq!(id(kept.join("SLOW_ID"))?, id(kept_slow.join("OWNER"))?);
    assert_ne!(id(d.data().join("SLOW_ID"))?, id(kept.join("SLOW_ID"))?);

    // The kept pair still belong together: it verifies (with the same findings).
    let again = integrity::verify_with(&kept, &opts(&kept_slow))?;
    assert_eq!(again.findings.len(), r.findings.len());
    assert!(again
        .findings
        .iter()
        .all(|f| f.file.as_deref().is_some_and(|p| p.starts_with(&kept_slow))));
    Ok(())
}
