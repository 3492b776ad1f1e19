//! One read-only pass over every structure of a store, shared by `cascade verify`
//! ([`super::verify`]) and `cascade repair` ([`super::repair`]).
//!
//! Order: pool header and bitmaps (a failure there ends the walk: nothing else can be
//! located), every allocated chunk header, the manifest, the live FastStore logs, then
//! every table — buffer-trees newest first, then StableStore — with the separated value
//! behind each entry, and last the slow tier (issue #14): partition by partition, each
//! partition's runs newest first, every table of each run with the blobs its entries
//! point at. Damage never stops the walk: each damaged record, block, blob or header
//! becomes a [`Finding`] and the walk goes on with the next intact one. A slow-tier
//! file the manifest names that is missing, or too short for the tables in it, is a
//! [`Structure::SlowFile`] finding covering those tables' keys.
//!
//! The pool is mapped copy-on-write (`Device::Private`): recovery code runs on it
//! unchanged, and nothing it writes reaches the file. The store's lock is held
//! throughout, so a running server is never walked. Slow-tier files are only opened
//! and read (`pread`): nothing in the slow directory is created, locked or removed.
//! A store whose manifest names slow-tier data is walked only with its slow directory
//! (`Options::slow_dir`): without one, or with another store's, the walk fails with
//! `InvalidArgument` before reading anything, since dropping the tier as "damaged"
//! would make `repair` lose it.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::{Finding, Structure};
use crate::db::recovery::{load_tables, value_candidates};
use crate::db::Options;
use crate::error::{Error, Result};
use crate::log::{self, Kind, LogInfo};
use crate::manifest::{self, SlowState};
use crate::pmem::Pool;
use crate::slowtier::file::{SlowFile, SlowIo};
use crate::table::check::TableDamage;
use crate::table::{Lst, LstMeta};
use crate::value::ValueRef;
use crate::vlog;

/// Precedence of an item: 0 for the live logs (newest by LSN within), then one per
/// buffer-tree from the newest, then StableStore, then one per slow-tier run position
/// (the newest run of every partition, then the next newest, …: partitions hold
/// disjoint key ranges, so only runs of one partition ever shadow each other). A
/// lower rank shadows a higher one.
pub(crate) type Rank = u32;

/// One version met by the walk. `value` is `None` for a delete.
pub(crate) struct Item<'a> {
    pub rank: Rank,
    /// LSN (live logs only; 0 for table entries).
    pub lsn: u64,
    pub key: &'a [u8],
    pub value: Option<&'a [u8]>,
}

/// What the walk read.
#[derive(Debug, Default, Clone, Copy)]
#[non_exhaustive]
pub struct WalkStats {
    /// Allocated chunks whose headers were read.
    pub chunks: u64,
    /// Live FastStore logs replayed.
    pub logs: u64,
    /// Intact log records (puts and deletes) in them.
    pub log_records: u64,
    /// Tables read.
    pub tables: u64,
    /// Table blocks read and checked.
    pub blocks: u64,
    /// Table entries read.
    pub entries: u64,
    /// Separated values read and checked (slow-tier blobs included).
    pub values: u64,
    /// Bytes checked (blocks, value records and blobs).
    pub bytes: u64,
    /// Slow-tier files opened (those the manifest names and that exist).
    pub slow_files: u64,
    /// Slow-tier tables read (also counted in `tables`).
    pub slow_tables: u64,
}

/// Walks the store in `dir`, its slow-tier files in `opts.slow_dir` (no other option
/// is used). `item` gets every intact version (live-log versions first), `finding`
/// every damaged part. Fails only when the store cannot be read at all (not a store,
/// locked, I/O, slow-tier data without its slow directory) — damage is reported, not
/// returned.
pub(crate) fn walk(
    dir: &Path,
    opts: &Options,
    item: &mut dyn FnMut(Item<'_>),
    finding: &mut dyn FnMut(Finding),
) -> Result<WalkStats> {
    let mut st = WalkStats::default();
    let Some((pool, _lock)) = open_pool(dir, finding)? else {
        return Ok(st);
    };
    let mut sink = |d: log::Damage| {
        let mut f = Finding::from_error(Structure::ChunkHeader, &d.error, None).at(d.addr);
        if d.key_certain {
            f.detail
                .push_str(" (one flipped bit: corrected, the chunk's records are read)");
        } else {
            f.unknown_keys = true;
        }
        finding(f);
    };
    let mut disc = log::discover_with(&pool, Some(&mut sink))?;
    st.chunks = pool.allocator().used_chunks();
    let mut man_sink = |d: log::Damage| {
        let mut f = Finding::from_error(Structure::Manifest, &d.error, None).at(d.addr);
        f.detail.push_str(" (a table edit may be lost)");
        f.unknown_keys = true;
        finding(f);
    };
    let mut state = match manifest::recover_with(&pool, &disc.manifests, Some(&mut man_sink)) {
        Ok(m) => Some(m.state),
        Err(e) if e.is_corruption() => {
            let mut f = Finding::from_error(Structure::Manifest, &e, None);
            f.detail
                .push_str(" (tables cannot be located; only the live logs are read)");
            f.unknown_keys = true;
            finding(f);
            None
        }
        Err(e) => return Err(e),
    };
    // Refused before anything is read: without its slow directory the tier's data
    // would only be reported (and dropped by `repair`) as missing.
    let slow_dir = match &state {
        Some(s) => slow_dir(dir, opts, &s.slow)?,
        None => None,
    };
    let flushed_gen = state.as_ref().map_or(0, |s| s.flushed_generation);
    let (flushed, live): (Vec<LogInfo>, Vec<LogInfo>) = std::mem::take(&mut disc.logs)
        .into_iter()
        .partition(|l| l.generation <= flushed_gen);
    walk_logs(&pool, &live, &mut st, item, finding)?;
    let Some(state) = state.as_mut() else {
        return Ok(st);
    };
    let values = value_candidates(&pool, &disc, &flushed);
    // The slow tier's ranks follow StableStore's (one per buffer-tree, then one).
    let mut slow_rank: Rank = Rank::try_from(state.trees.len())
        .unwrap_or(Rank::MAX / 2)
        .saturating_add(2);
    match load_tables(&pool, &disc, state, &values) {
        Ok((buffer, stable)) => {
            let sets = buffer
                .iter()
                .map(|t| &t.tables)
                .chain(std::iter::once(stable.tables()));
            for (rank, set) in (1..).zip(sets) {
                for t in set.tables() {
                    st.tables += 1;
                    walk_table(&pool, t, rank, None, &mut st, item, finding);
                }
                slow_rank = rank + 1;
            }
        }
        Err(e) if e.is_corruption() => {
            // The pool's tables cannot be located; the slow tier still can.
            let mut f = Finding::from_error(Structure::Manifest, &e, None);
            f.unknown_keys = true;
            finding(f);
        }
        Err(e) => return Err(e),
    }
    if let Some(sd) = slow_dir {
        walk_slow(&pool, sd, &state.slow, slow_rank, &mut st, item, finding)?;
    }
    Ok(st)
}

/// The slow directory to read for a store whose manifest says `slow` (`None` when it
/// has no slow-tier data).
///
/// # Errors
/// `InvalidArgument` when it has some but no slow directory was given, the one given
/// does not exist, or it belongs to another store; `Io` reading the ownership files.
fn slow_dir<'o>(dir: &Path, opts: &'o Options, slow: &SlowState) -> Result<Option<&'o Path>> {
    if slow.parts.values().all(Vec::is_empty) {
        return Ok(None);
    }
    let Some(sd) = opts.slow_dir.as_deref() else {
        return Err(Error::invalid(format!(
            "the store in {} keeps data in a slow tier: pass its slow directory \
             (--slow-dir, Options::slow_dir) to check or repair it",
            dir.display()
        )));
    };
    if !sd.is_dir() {
        return Err(Error::invalid(format!(
            "slow directory {} does not exist (wrong --slow-dir?)",
            sd.display()
        )));
    }
    crate::slowtier::open::check_owner_readonly(dir, sd)?;
    Ok(Some(sd))
}

/// Walks every slow-tier table: partition by partition, the runs of each newest first
/// (run `j` of a partition at rank `first + j`). A missing file, or a table past the
/// end of its file, is a [`Structure::SlowFile`] finding; the rest is read.
///
/// # Errors
/// `Io` opening a file for a reason other than its absence.
fn walk_slow(
    pool: &Arc<Pool>,
    slow_dir: &Path,
    slow: &SlowState,
    first: Rank,
    st: &mut WalkStats,
    item: &mut dyn FnMut(Item<'_>),
    finding: &mut dyn FnMut(Finding),
) -> Result<()> {
    let io = Arc::new(SlowIo::default());
    for runs in slow.parts.values() {
        for (rank, r) in (first..).zip(runs) {
            let file = match SlowFile::open(slow_dir, r.file, io.clone()) {
                Ok(f) => Arc::new(f),
                Err(e) if e.is_corruption() => {
                    let path = slow_dir.join(crate::slowtier::file::file_name(r.file));
                    let mut f = lost_tables(&e, &r.lsts, rank, path);
                    let _ = write!(
                        f.detail,
                        " ({} table(s) of a run of weight {} lost)",
                        r.lsts.len(),
                        r.weight
                    );
                    finding(f);
                    continue;
                }
                Err(e) => return Err(e),
            };
            st.slow_files += 1;
            for m in &r.lsts {
                let end = m.base.saturating_add(u64::from(m.size));
                if end > file.size() {
                    let e = Error::corruption(
                        file.path(),
                        m.base,
                        format!(
                            "table {} (bytes {}..{end}) runs past the end of the file ({} \
                             bytes): the file is truncated",
                            m.id,
                            m.base,
                            file.size()
                        ),
                    );
                    finding(lost_tables(
                        &e,
                        std::slice::from_ref(m),
                        rank,
                        file.path().to_path_buf(),
                    ));
                    continue;
                }
                // Live in the file only while walked: never marked obsolete, so the
                // file is never unlinked (`SlowFile`'s drop).
                let t = Lst::from_file_meta(m, file.clone(), None);
                st.tables += 1;
                st.slow_tables += 1;
                walk_table(pool, &t, rank, Some(file.path()), st, item, finding);
            }
        }
    }
    Ok(())
}

/// A [`Structure::SlowFile`] finding for `lsts` (one run's tables, in key order), lost
/// with their file or its end.
fn lost_tables(e: &Error, lsts: &[LstMeta], rank: Rank, path: std::path::PathBuf) -> Finding {
    let mut f = Finding::from_error(
        Structure::SlowFile,
        e,
        lsts.first().map(|m| m.min_key.to_vec()),
    );
    f.last = lsts.last().map(|m| m.max_key.to_vec());
    f.file = Some(path);
    f.rank = rank;
    f
}

/// The pool, mapped copy-on-write; a damaged header or bitmap is reported and rebuilt
/// (in memory) so the rest can be read. `None` when even that fails.
fn open_pool(
    dir: &Path,
    finding: &mut dyn FnMut(Finding),
) -> Result<Option<(Arc<Pool>, std::fs::File)>> {
    let opts = Options::default();
    match crate::db::open_private_pool(dir, &opts, false) {
        Ok((pool, lock, _)) => Ok(Some((pool, lock))),
        Err(e) if e.is_corruption() => {
            let mut f = Finding::from_error(Structure::PoolHeader, &e, None);
            let rebuilt = crate::db::open_private_pool(dir, &opts, true);
            match &rebuilt {
                Ok(_) => f
                    .detail
                    .push_str(" (rebuilt from the chunk headers to read the rest)"),
                Err(e2) => {
                    let _ = write!(f.detail, " (could not be rebuilt: {e2})");
                }
            }
            finding(f);
            Ok(rebuilt.ok().map(|(pool, lock, _)| (pool, lock)))
        }
        Err(e) => Err(e),
    }
}

/// Replays the live logs, salvaging past damaged records.
fn walk_logs(
    pool: &Pool,
    live: &[LogInfo],
    st: &mut WalkStats,
    item: &mut dyn FnMut(Item<'_>),
    finding: &mut dyn FnMut(Finding),
) -> Result<()> {
    for l in live {
        st.logs += 1;
        let mut sink = |d: log::Damage| {
            let mut f = Finding::from_error(Structure::LogRecord, &d.error, d.key).at(d.addr);
            f.unknown_keys = !d.key_certain;
            if d.dropped_batch_records > 0 {
                let _ = write!(
                    f.detail,
                    " (an atomic batch it cut lost {} records)",
                    d.dropped_batch_records
                );
            }
            finding(f);
        };
        log::salvage(
            pool,
            l,
            |r, _| {
                let value = match r.kind {
                    Kind::Put => Some(r.value),
                    Kind::Delete => None,
                    _ => return Ok(()),
                };
                st.log_records += 1;
                item(Item {
                    rank: 0,
                    lsn: r.lsn,
                    key: r.key,
                    value,
                });
                Ok(())
            },
            &mut sink,
        )?;
    }
    Ok(())
}

/// Reads table `t` (in the pool, or in slow-tier file `file`) at rank `rank`.
fn walk_table(
    pool: &Arc<Pool>,
    t: &Lst,
    rank: Rank,
    file: Option<&Path>,
    st: &mut WalkStats,
    item: &mut dyn FnMut(Item<'_>),
    finding: &mut dyn FnMut(Finding),
) {
    let mut bad_values = Vec::new();
    let w = t.walk(
        |k, v| {
            let owned;
            let value = match v {
                ValueRef::Tombstone => None,
                ValueRef::Inline(b) => Some(b),
                ValueRef::Separated(p) => match vlog::read(pool, k, p) {
                    Ok(b) => {
                        st.values += 1;
                        st.bytes += u64::from(p.len);
                        owned = b;
                        Some(&owned[..])
                    }
                    Err(e) => {
                        bad_values.push(Finding::from_error(
                            Structure::SeparatedValue,
                            &e,
                            Some(k.to_vec()),
                        ));
                        return true;
                    }
                },
            };
            item(Item {
                rank,
                lsn: 0,
                key: k,
                value,
            });
            true
        },
        &mut |d: TableDamage| {
            let mut f = Finding::from_error(Structure::TableBlock, &d.error, d.from).at(d.addr);
            // Without a next key the damage runs through the table's largest key.
            if d.until.is_none() {
                f.last = Some(t.max_key.to_vec());
            }
            f.until = d.until;
            f.rank = rank;
            f.file = file.map(Path::to_path_buf);
            match file {
                Some(_) => {
                    let _ = write!(f.detail, " (slow-tier table {})", t.id);
                }
                None => {
                    let _ = write!(f.detail, " (table {})", t.id);
                }
            }
            finding(f);
        },
    );
    st.blocks += w.blocks;
    st.bytes += w.bytes + w.blob_bytes;
    st.entries += w.entries;
    st.values += w.blobs;
    for mut f in bad_values {
        f.rank = rank;
        finding(f);
    }
}
