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
//! With a slow tier (issue #14, `Options::slow_dir`): the walk reads the slow-tier
//! runs after StableStore (newest run of a partition first), so their intact keys are
//! salvaged like any other. The new store is opened with the caller's options (its
//! pool geometry taken from the damaged one) and its own slow directory
//! `<slow_dir>.repair-tmp`, with background threads, so salvaged keys are flushed,
//! compacted and demoted again as in normal operation. The swap then moves the old
//! slow directory to `<slow_dir>.damaged-<unix seconds>` next to the kept data
//! directory — the kept pair still match (`SLOW_ID` / `OWNER`) and open together —
//! and puts the new one in its place, which the new data directory owns. Order:
//! old data directory away, old slow directory away, new slow directory in, new data
//! directory in: a crash in between leaves no data directory paired with a slow one
//! it does not own (open refuses a foreign slow directory). A slow directory inside
//! the data directory (or the reverse) is refused: the two cannot be swapped apart.
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
    /// Where its slow directory was moved (`None` without one).
    pub kept_damaged_slow: Option<PathBuf>,
    /// The report file (inside `kept_damaged`).
    pub report_file: Option<PathBuf>,
}

/// [`repair_with`] with the default options: for a store without a slow tier.
///
/// # Errors
/// As [`repair_with`].
pub fn repair(dir: &Path) -> Result<RepairReport> {
    repair_with(dir, &Options::default())
}

/// Salvages the store in `dir`, with its slow tier in `opts.slow_dir` (see the module
/// doc); the repaired store is written with `opts` (but the damaged pool's size and
/// chunk size). A store with no damage is left untouched.
///
/// # Errors
/// `NotAStore`, `Locked`, `Io`; `InvalidArgument` for invalid `opts`, or a store with
/// slow-tier data and no (or another store's) slow directory; `Corruption` when
/// nothing can be salvaged (the pool header is damaged beyond rebuilding); errors
/// writing the new store.
pub fn repair_with(dir: &Path, opts: &Options) -> Result<RepairReport> {
    opts.validate()?;
    let slow = opts.slow_dir.as_deref();
    if let Some(s) = slow {
        if nested(dir, s) {
            return Err(Error::invalid(format!(
                "cannot repair a store whose slow directory {} and data directory {} \
                 contain one another: move the slow directory out first",
                s.display(),
                dir.display()
            )));
        }
        // Never move away a slow directory another store owns.
        if s.exists() {
            crate::slowtier::open::check_owner_readonly(dir, s)?;
        }
    }
    let tmp = sibling(dir, "repair-tmp")?;
    let slow_tmp = slow.map(|s| sibling(s, "repair-tmp")).transpose()?;
    for t in std::iter::once(&tmp).chain(slow_tmp.as_ref()) {
        if t.exists() {
            std::fs::remove_dir_all(t)
                .map_err(|e| Error::io(format!("removing {}", t.display()), e))?;
        }
    }
    // Pass 1: find the damage (nothing written yet; a clean store stays as it is).
    let mut findings = Vec::new();
    let stats = walk::walk(dir, opts, &mut |_| {}, &mut |f| findings.push(f))?;
    let mut report = RepairReport {
        findings,
        keys_kept: 0,
        maybe_stale: Vec::new(),
        stats,
        kept_damaged: None,
        kept_damaged_slow: None,
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
    // Pass 2: salvage into the new store. Background threads flush, compact and
    // demote while it fills, so it never needs more pool than normal operation.
    let new = Db::open(
        &tmp,
        Options {
            pool_size: geometry.0,
            chunk_size: geometry.1,
            create_if_missing: true,
            background: true,
            scrub_bytes_per_sec: 0,
            sim_device: None,
            slow_dir: slow_tmp.clone(),
            ..opts.clone()
        },
    )?;
    let seen = salvage(dir, opts, &new, &mut report.keys_kept)?;
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
    let kept = unused_sibling(dir, stamp)?;
    rename(dir, &kept)?;
    if let (Some(s), Some(st)) = (slow, &slow_tmp) {
        if s.exists() {
            let kept_slow = unused_sibling(s, stamp)?;
            rename(s, &kept_slow)?;
            report.kept_damaged_slow = Some(kept_slow);
        }
        rename(st, s)?;
    }
    rename(&tmp, dir)?;
    let file = kept.join("REPAIR-REPORT.txt");
    report.kept_damaged = Some(kept);
    std::fs::write(&file, render(dir, &report))
        .map_err(|e| Error::io(format!("writing {}", file.display()), e))?;
    report.report_file = Some(file);
    Ok(report)
}

/// Writes every key's first intact version (precedence order) into `new`; returns the
/// keys met with the rank their kept version came from, and counts the keys written.
fn salvage(
    dir: &Path,
    opts: &Options,
    new: &Db,
    kept: &mut u64,
) -> Result<BTreeMap<Vec<u8>, Rank>> {
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
        opts,
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
    if let Some(k) = &r.kept_damaged_slow {
        let _ = writeln!(
            s,
            "its slow directory was kept at {} (the two open together)",
            k.display()
        );
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

/// `<dir>.damaged-<stamp>`, or with `-1`, `-2`, … until the name is free.
fn unused_sibling(dir: &Path, stamp: u64) -> Result<PathBuf> {
    let mut p = sibling(dir, &format!("damaged-{stamp}"))?;
    let mut n = 1;
    while p.exists() {
        p = sibling(dir, &format!("damaged-{stamp}-{n}"))?;
        n += 1;
    }
    Ok(p)
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to)
        .map_err(|e| Error::io(format!("moving {} to {}", from.display(), to.display()), e))
}

/// True if one of `a` and `b` is (or lies inside) the other.
fn nested(a: &Path, b: &Path) -> bool {
    let full = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (a, b) = (full(a), full(b));
    a.starts_with(&b) || b.starts_with(&a)
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// (pool size, chunk size) from the damaged store's pool header.
fn pool_geometry(dir: &Path) -> Result<(u64, u64)> {
    let (pool, _lock, _) = crate::db::open_private_pool(dir, &Options::default(), true)?;
    Ok((pool.chunk_count() * pool.chunk_size(), pool.chunk_size()))
}
