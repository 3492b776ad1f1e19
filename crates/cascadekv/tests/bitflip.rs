//! Bit-flip sweep over a cleanly closed store: one bit at a time, over the non-zero
//! bytes of the pool file, the store is reopened and every key read back against an
//! oracle. Every flip must end in one of three ways — the open fails naming the
//! damage, the reads of some keys fail, or every key reads back exactly — and never in
//! a wrong, stale or missing value (issue #11).
//!
//! Each flipped copy is first checked with `integrity::verify`, which must change no
//! byte and must report damage whenever the open or a read does; a damaged copy is
//! then salvaged with `integrity::repair`, after which the store opens, verifies
//! clean, and every key reads back as before or is named by the repair report.
//!
//! `BITFLIP_TOOLS=0` skips verify and repair (for the every-byte run).
//!
//! CI tries `BITFLIP_SAMPLES` flips (default 300) at offsets drawn with
//! `BITFLIP_SEED`; `BITFLIP_SAMPLES=all` tries every non-zero byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cascadekv::{integrity, Db, Durability, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn opts() -> Options {
    Options {
        pool_size: 8 << 20,
        chunk_size: 64 << 10,
        inline_threshold: 48,
        faststore_capacity: 64 << 10,
        block_size: 256,
        table_max_bytes: 4096,
        background: false,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, v: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(3) { 300 } else { 20 };
    let mut b = format!("{i}:{v}:").into_bytes();
    b.resize(len, b'a' + (v % 26) as u8);
    b
}

/// Writes the store: versions in StableStore, in a buffer-tree and in the FastStore
/// logs, overwrites and deletes; closes it cleanly. Returns the oracle.
fn build(dir: &Path) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let db = Db::open(dir, opts()).unwrap_or_else(|e| panic!("open: {e}"));
    let mut oracle = BTreeMap::new();
    let n = 600u32;
    for round in 0..3u32 {
        for i in 0..n {
            if round > 0 && i % (round + 2) != 0 {
                continue;
            }
            let (k, v) = (key(i), value(i, round));
            db.put_with(&k, &v, Durability::Buffered)
                .unwrap_or_else(|e| panic!("put: {e}"));
            oracle.insert(k, Some(v));
        }
        for i in (0..n).step_by(37 + round as usize) {
            let k = key(i);
            db.delete(&k).unwrap_or_else(|e| panic!("delete: {e}"));
            oracle.insert(k, None);
        }
        if round == 0 {
            db.flush_faststore()
                .unwrap_or_else(|e| panic!("flush: {e}"));
            db.compact().unwrap_or_else(|e| panic!("compact: {e}"));
        } else if round == 1 {
            db.flush_faststore()
                .unwrap_or_else(|e| panic!("flush: {e}"));
        }
    }
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
    oracle
}

/// How one flip ended.
#[derive(Debug, Default)]
struct Tally {
    tried: u64,
    verify_found: u64,
    repaired: u64,
    refused_at_open: u64,
    detected_at_read: u64,
    harmless: u64,
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("mkdir: {e}"));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read_dir: {e}")) {
        let e = e.unwrap_or_else(|e| panic!("dir entry: {e}"));
        if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap_or_else(|e| panic!("copy: {e}"));
        }
    }
}

/// Flips bit `bit` of byte `off` in a copy of the store and checks every key.
fn trial(
    golden: &Path,
    work: &Path,
    off: usize,
    bit: u8,
    oracle: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    t: &mut Tally,
) -> Result<(), String> {
    copy_dir(golden, work);
    let pool: PathBuf = work.join("pool");
    let mut bytes = std::fs::read(&pool).map_err(|e| e.to_string())?;
    bytes[off] ^= 1 << bit;
    std::fs::write(&pool, &bytes).map_err(|e| e.to_string())?;
    t.tried += 1;
    if std::env::var("BITFLIP_TOOLS").is_ok_and(|v| v == "0") {
        return open_and_read(work, off, bit, oracle, t, true);
    }
    let report = integrity::verify(work).map_err(|e| format!("flip at {off}: verify: {e}"))?;
    if std::fs::read(&pool).map_err(|e| e.to_string())? != bytes {
        return Err(format!(
            "flip at {off} bit {bit}: verify changed the pool file"
        ));
    }
    let found = !report.is_clean();
    t.verify_found += u64::from(found);
    if found {
        check_repair(work, off, oracle)?;
        t.repaired += 1;
        copy_dir(golden, work);
        std::fs::write(&pool, &bytes).map_err(|e| e.to_string())?;
    }
    open_and_read(work, off, bit, oracle, t, found)
}

/// Opens the flipped copy and reads every key; `found`: whether verify saw damage.
fn open_and_read(
    work: &Path,
    off: usize,
    bit: u8,
    oracle: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    t: &mut Tally,
    found: bool,
) -> Result<(), String> {
    let db = match Db::open(work, opts()) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => {
            t.refused_at_open += 1;
            if !e.to_string().contains("cascade verify") {
                return Err(format!(
                    "flip at {off}: the refusal does not name verify: {e}"
                ));
            }
            if !found {
                return Err(format!(
                    "flip at {off} bit {bit}: open refused ({e}), verify clean"
                ));
            }
            return Ok(());
        }
        Err(e) => return Err(format!("flip at {off} bit {bit}: open failed oddly: {e}")),
    };
    let mut read_errors = 0u64;
    for (k, want) in oracle {
        match db.get(k) {
            Ok(got) if got == *want => {}
            Ok(got) => {
                return Err(format!(
                    "flip at {off} bit {bit}: key {} read {:?}, want {:?}",
                    String::from_utf8_lossy(k),
                    got.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                    want.as_ref()
                        .map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                ))
            }
            Err(e) if e.is_corruption() => read_errors += 1,
            Err(e) => return Err(format!("flip at {off} bit {bit}: get failed oddly: {e}")),
        }
    }
    if read_errors > 0 {
        if !found {
            return Err(format!(
                "flip at {off} bit {bit}: {read_errors} reads failed, verify clean"
            ));
        }
        t.detected_at_read += 1;
    } else {
        t.harmless += 1;
    }
    Ok(())
}

/// Repairs the damaged store in `work`, then checks it: it opens, verifies clean, and
/// every key reads back as the oracle says or is named by the report (a finding covers
/// it, or its kept value is flagged as possibly stale, or a log record whose key could
/// not be read was lost).
fn check_repair(
    work: &Path,
    off: usize,
    oracle: &BTreeMap<Vec<u8>, Option<Vec<u8>>>,
) -> Result<(), String> {
    let r = integrity::repair(work).map_err(|e| format!("flip at {off}: repair: {e}"))?;
    // Keys a damaged part held that it cannot name may be missing (never stale).
    let unnamed_loss = r.findings.iter().any(|f| f.unknown_keys);
    let v = integrity::verify(work).map_err(|e| format!("flip at {off}: verify: {e}"))?;
    if !v.is_clean() {
        return Err(format!(
            "flip at {off}: repaired store not clean: {}",
            v.findings[0]
        ));
    }
    let db = Db::open(work, opts()).map_err(|e| format!("flip at {off}: reopen: {e}"))?;
    for (k, want) in oracle {
        let got = db
            .get(k)
            .map_err(|e| format!("flip at {off}: repaired read: {e}"))?;
        let named = r.findings.iter().any(|f| f.covers(k)) || r.maybe_stale.contains(k);
        if got != *want && !named && (got.is_some() || !unnamed_loss) {
            return Err(format!(
                "flip at {off}: after repair key {} differs and the report does not say so \
                 (got {:?}); report: {}",
                String::from_utf8_lossy(k),
                got.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()),
                integrity::render_repair(work, &r)
            ));
        }
    }
    drop(db);
    if let Some(d) = r.kept_damaged {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(())
}

#[test]
fn one_flipped_bit_is_an_error_never_a_wrong_or_stale_value() {
    let root = std::env::temp_dir().join(format!("ckv-bitflip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (golden, work) = (root.join("golden"), root.join("work"));
    let oracle = build(&golden);
    let bytes = std::fs::read(golden.join("pool")).unwrap_or_else(|e| panic!("read: {e}"));
    let nonzero: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
    let seed: u64 = std::env::var("BITFLIP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_124);
    let samples = std::env::var("BITFLIP_SAMPLES").unwrap_or_else(|_| "300".into());
    let mut rng = StdRng::seed_from_u64(seed);
    let offsets: Vec<usize> = if samples == "all" {
        nonzero.clone()
    } else {
        let n: usize = samples.parse().unwrap_or(300);
        (0..n)
            .map(|_| nonzero[rng.gen_range(0..nonzero.len())])
            .collect()
    };
    // `BITFLIP_OFFSETS=a,b,…` tries every bit of those offsets instead (to replay one).
    let chosen: Option<Vec<usize>> = std::env::var("BITFLIP_OFFSETS")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect());
    let flips: Vec<(usize, u8)> = match chosen {
        Some(list) => list
            .iter()
            .flat_map(|o| (0..8u8).map(move |b| (*o, b)))
            .collect(),
        None => offsets
            .into_iter()
            .map(|o| (o, rng.gen_range(0..8u8)))
            .collect(),
    };
    let mut t = Tally::default();
    let mut failures = Vec::new();
    for (off, bit) in flips {
        if let Err(e) = trial(&golden, &work, off, bit, &oracle, &mut t) {
            failures.push(e);
        }
    }
    eprintln!(
        "bit flips over {} non-zero bytes (seed {seed}): tried {}, refused at open {}, \
         detected at read {}, harmless {}, silent {}; verify found damage in {}, repaired {}",
        nonzero.len(),
        t.tried,
        t.refused_at_open,
        t.detected_at_read,
        t.harmless,
        failures.len(),
        t.verify_found,
        t.repaired
    );
    for f in failures.iter().take(12) {
        eprintln!("  {f}");
    }
    assert!(
        failures.is_empty(),
        "{} flips gave wrong, stale or missing values; first: {}",
        failures.len(),
        failures[0]
    );
    let _ = std::fs::remove_dir_all(&root);
}
