//! `cascade repair`: salvage every intact version into a fresh store, drop what is
//! damaged, and say exactly what was lost. Explicit and never automatic (`Db::open`
//! refuses a damaged store and names `cascade verify`).
//!
//! How (RocksDB's `RepairDB` and `redis-check-aof --fix` are the field's references):
//! 1. the shared walk ([`super::walk`]) reads the damaged store copy-on-write;
//! 2. live-log versions are resolved by LSN in memory (bounded by the log capacity),
//!    then written to a new store in `<dir>.repair-tmp`; table entries follow in
//!    precedence order (newest buffer-tree first, StableStore last), each key taken
//!    from the first intact version met — only the set of keys seen is kept in DRAM;
//! 3. the new store is closed cleanly, the damaged directory renamed to
//!    `<dir>.damaged-<unix seconds>` (kept, never deleted) and the new one put in its
//!    place; the report is written into the kept directory as `REPAIR-REPORT.txt`.
//!
//! What the report calls lost: each damaged part with its key or key range; for each
//! key an older intact version of which was kept while a damaged part may have held a
//! newer one, that key (its value may be stale — the operator decides).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::walk::{self, Item, Rank};
use super::{show_key, Finding, WalkStats};
use crate::db::{Db, Durability, Options, WriteBatch};
use crate::error::{Error, Result};

/// What `cascade repair` did.
#[derive(Debug)]
#[non_exhaustive]
pub struct RepairReport {
    /// Every damaged part (what was dropped).
    pub findings: Vec<Finding>,
    /// Keys written to the repaired store.
    pub keys_kept: u64,
    /// Keys whose kept value is an older version: a damaged part may have held a newer
    /// one.
    pub maybe_stale: Vec<Vec<u8>>,
    /// What the walk read.
    pub stats: WalkStats,
    /// Where the damaged store was moved (`None` when it was clean and left alone).
    pub kept_damaged: Option<PathBuf>,
    /// The report file (inside `kept_damaged`).
    pub report_file: Option<PathBuf>,
}

/// Salvages the store in `dir` (see the module doc). A store with no damage is left
/// untouched.
///
/// # Errors
/// `NotAStore`, `Locked`, `Io`; `Corruption` when nothing can be salvaged (the pool
/// header is damaged beyond rebuilding); errors writing the new store.
pub fn repair(dir: &Path) -> Result<RepairReport> {
    let tmp = sibling(dir, "repair-tmp")?;
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .map_err(|e| Error::io(format!("removing {}", tmp.display()), e))?;
    }
    // Pass 1: find the damage (nothing written yet; a clean store stays as it is).
    let mut findings = Vec::new();
    let stats = walk::walk(dir, &mut |_| {}, &mut |f| findings.push(f))?;
    let mut report = RepairReport {
        findings,
        keys_kept: 0,
        maybe_stale: Vec::new(),
        stats,
        kept_damaged: None,
        report_file: None,
    };
    if report.findings.is_empty() {
        return Ok(report);
    }
    let geometry = pool_geometry(dir).map_err(|e| match e {
        Error::Corruption {
            file,
            offset,
            reason,
        } => Error::Corruption {
            file,
            offset,
            reason: format!("nothing can be salvaged: {reason}"),
        },
        other => other,
    })?;
    // Pass 2: salvage into the new store.
    let new = Db::open(
        &tmp,
        Options {
            pool_size: geometry.0,
            chunk_size: geometry.1,
            ..Options::default()
        },
    )?;
    let seen = salvage(dir, &new, &mut report.keys_kept)?;
    new.close()?;
    drop(new);
    // Keys kept from an older source than a damaged part that covered them.
    for (k, rank) in &seen {
        if report
            .findings
            .iter()
            .any(|f| f.rank < *rank && (f.unknown_keys || f.covers(k)))
        {
            report.maybe_stale.push(k.clone());
        }
    }
    let stamp = unix_seconds();
    let mut kept = sibling(dir, &format!("damaged-{stamp}"))?;
    let mut n = 1;
    while kept.exists() {
        kept = sibling(dir, &format!("damaged-{stamp}-{n}"))?;
        n += 1;
    }
    std::fs::rename(dir, &kept)
        .map_err(|e| Error::io(format!("moving {} to {}", dir.display(), kept.display()), e))?;
    std::fs::rename(&tmp, dir)
        .map_err(|e| Error::io(format!("moving {} to {}", tmp.display(), dir.display()), e))?;
    let file = kept.join("REPAIR-REPORT.txt");
    report.kept_damaged = Some(kept);
    std::fs::write(&file, render(dir, &report))
        .map_err(|e| Error::io(format!("writing {}", file.display()), e))?;
    report.report_file = Some(file);
    Ok(report)
}

/// Writes every key's first intact version (precedence order) into `new`; returns the
/// keys met with the rank their kept version came from, and counts the keys written.
fn salvage(dir: &Path, new: &Db, kept: &mut u64) -> Result<BTreeMap<Vec<u8>, Rank>> {
    let mut logs: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
    let mut seen: BTreeMap<Vec<u8>, Rank> = BTreeMap::new();
    let mut out = Writer {
        db: new,
        batch: WriteBatch::default(),
        failed: None,
        kept: 0,
    };
    walk::walk(
        dir,
        &mut |it: Item<'_>| {
            if it.rank == 0 {
                let e = logs.entry(it.key.to_vec()).or_insert((0, None));
                if it.lsn >= e.0 {
                    *e = (it.lsn, it.value.map(<[u8]>::to_vec));
                }
                return;
            }
            // The first table entry: every live-log version has been met.
            for (k, (_, v)) in std::mem::take(&mut logs) {
                out.put(&k, v.as_deref());
                seen.insert(k, 0);
            }
            if !seen.contains_key(it.key) {
                seen.insert(it.key.to_vec(), it.rank);
                out.put(it.key, it.value);
            }
        },
        &mut |_| {},
    )?;
    for (k, (_, v)) in std::mem::take(&mut logs) {
        out.put(&k, v.as_deref());
        seen.insert(k, 0);
    }
    out.flush();
    if let Some(e) = out.failed {
        return Err(e);
    }
    *kept = out.kept;
    Ok(seen)
}

/// Batched writes into the new store; the first error is kept and stops writing.
struct Writer<'a> {
    db: &'a Db,
    batch: WriteBatch,
    failed: Option<Error>,
    kept: u64,
}

impl Writer<'_> {
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        if let Some(v) = value {
            self.batch.put(key, v);
            self.kept += 1;
            if self.batch.len() >= 512 {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if self.failed.is_none() && !self.batch.is_empty() {
            if let Err(e) = self.db.write_with(&self.batch, Durability::Buffered) {
                self.failed = Some(e);
            }
        }
        self.batch = WriteBatch::default();
    }
}

/// The report as text.
#[must_use]
pub fn render(dir: &Path, r: &RepairReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "cascade repair of {}", dir.display());
    let _ = writeln!(
        s,
        "damaged parts dropped: {}; keys kept: {}; keys whose kept value may be stale: {}",
        r.findings.len(),
        r.keys_kept,
        r.maybe_stale.len()
    );
    if let Some(k) = &r.kept_damaged {
        let _ = writeln!(s, "the damaged store was kept at {}", k.display());
    }
    let _ = writeln!(s, "\nlost (each damaged part):");
    for f in &r.findings {
        let _ = writeln!(s, "  {f}");
    }
    let _ = writeln!(
        s,
        "\nkept from an older version (a damaged part may have held a newer one):"
    );
    for k in &r.maybe_stale {
        let _ = writeln!(s, "  \"{}\"", show_key(k));
    }
    s
}

fn sibling(dir: &Path, suffix: &str) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} has no directory name", dir.display())))?;
    let mut n = name.to_os_string();
    n.push(".");
    n.push(suffix);
    Ok(dir.with_file_name(n))
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// (pool size, chunk size) from the damaged store's pool header.
fn pool_geometry(dir: &Path) -> Result<(u64, u64)> {
    let (pool, _lock) = crate::db::open_private_pool(dir, &Options::default(), true)?;
    Ok((pool.chunk_count() * pool.chunk_size(), pool.chunk_size()))
}
