//! One read-only pass over every structure of a store, shared by `cascade verify`
//! ([`super::verify`]) and `cascade repair` ([`super::repair`]).
//!
//! Order: pool header and bitmaps (a failure there ends the walk: nothing else can be
//! located), every allocated chunk header, the manifest, the live FastStore logs, then
//! every table — buffer-trees newest first, then StableStore — with the separated value
//! behind each entry. Damage never stops the walk: each damaged record, block or header
//! becomes a [`Finding`] and the walk goes on with the next intact one.
//!
//! The pool is mapped copy-on-write (`Device::Private`): recovery code runs on it
//! unchanged, and nothing it writes reaches the file. The store's lock is held
//! throughout, so a running server is never walked.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::{Finding, Structure};
use crate::db::recovery::{load_tables, value_candidates};
use crate::db::Options;
use crate::error::Result;
use crate::log::{self, Kind, LogInfo};
use crate::manifest;
use crate::pmem::Pool;
use crate::table::check::TableDamage;
use crate::value::ValueRef;
use crate::vlog;

/// Precedence of an item: 0 for the live logs (newest by LSN within), then one per
/// buffer-tree from the newest, then StableStore. A lower rank shadows a higher one.
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
    /// Separated values read and checked.
    pub values: u64,
    /// Bytes checked (blocks and value records).
    pub bytes: u64,
}

/// Walks the store in `dir`. `item` gets every intact version (live-log versions
/// first), `finding` every damaged part. Fails only when the store cannot be read at
/// all (not a store, locked, I/O) — damage is reported, not returned.
pub(crate) fn walk(
    dir: &Path,
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
    let flushed_gen = state.as_ref().map_or(0, |s| s.flushed_generation);
    let (flushed, live): (Vec<LogInfo>, Vec<LogInfo>) = std::mem::take(&mut disc.logs)
        .into_iter()
        .partition(|l| l.generation <= flushed_gen);
    walk_logs(&pool, &live, &mut st, item, finding)?;
    let Some(state) = state.as_mut() else {
        return Ok(st);
    };
    let values = value_candidates(&pool, &disc, &flushed);
    let (buffer, stable) = match load_tables(&pool, &disc, state, &values) {
        Ok(t) => t,
        Err(e) if e.is_corruption() => {
            let mut f = Finding::from_error(Structure::Manifest, &e, None);
            f.unknown_keys = true;
            finding(f);
            return Ok(st);
        }
        Err(e) => return Err(e),
    };
    let sets = buffer
        .iter()
        .map(|t| &t.tables)
        .chain(std::iter::once(stable.tables()));
    for (rank, set) in (1..).zip(sets) {
        for t in set.tables() {
            st.tables += 1;
            walk_table(&pool, t, rank, &mut st, item, finding);
        }
    }
    Ok(st)
}

/// The pool, mapped copy-on-write; a damaged header or bitmap is reported and rebuilt
/// (in memory) so the rest can be read. `None` when even that fails.
fn open_pool(
    dir: &Path,
    finding: &mut dyn FnMut(Finding),
) -> Result<Option<(Arc<Pool>, std::fs::File)>> {
    let opts = Options::default();
    match crate::db::open_private_pool(dir, &opts, false) {
        Ok(p) => Ok(Some(p)),
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
            Ok(rebuilt.ok())
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

fn walk_table(
    pool: &Arc<Pool>,
    t: &crate::table::Lst,
    rank: Rank,
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
            f.until = d.until;
            f.rank = rank;
            let _ = write!(f.detail, " (table {})", t.id);
            finding(f);
        },
    );
    st.blocks += w.blocks;
    st.bytes += w.bytes;
    st.entries += w.entries;
    for mut f in bad_values {
        f.rank = rank;
        finding(f);
    }
}
