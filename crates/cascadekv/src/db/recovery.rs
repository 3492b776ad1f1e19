//! Recovery (FluidKV §5.5): the stages as the manifest and the logs say they were.
//!
//! Recovery walks the pool once (`log::discover`), reads the newest valid manifest,
//! rebuilds buffer-trees and StableStore from it and frees table chunks no live table
//! lives in (interrupted flushes and compactions). Logs of flushed generations are not
//! replayed: their segments are freed, except those holding separated values that
//! tables reference. The other logs are replayed into one FastStore, in parallel on
//! `Options::recovery_threads` threads: replay is order-independent (the largest LSN
//! per key wins), so each thread sorts what it read and the sorted runs are merged.
//! LSN counters restart above the largest LSN seen.
//!
//! Runs inside `Db::open`, before the store is shared.

use crate::coding::usize_from;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Options, RecoveryInfo};
use crate::bufferstore::BufferTree;
use crate::error::{Error, Result};
use crate::faststore::ikey::IKey;
use crate::faststore::{checkpoint, FastStore, Val, Version};
use crate::log::record::value_len;
use crate::log::{self, Discovery, Kind, LogInfo, TornTail};
use crate::manifest::ManifestState;
use crate::pmem::{ChunkKind, Pool, CHUNK_HEADER_LEN};
use crate::stablestore::StableStore;
use crate::table::{Lst, LstMeta, TableChunk, TableSet};
use crate::value::ValuePtr;
use crate::vlog::{RetainedSegments, Segment, SegmentLive, SegmentMap};

/// The value-log segments recovery may keep: every log segment of a flushed
/// generation and every value chunk (cleaning output). Each starts with no holder;
/// [`load_tables`] gives each one a holder per table pointing into it, and
/// [`release_unreferenced`] frees the rest.
pub(crate) fn value_candidates(
    pool: &Arc<Pool>,
    disc: &Discovery,
    flushed: &[LogInfo],
) -> SegmentMap {
    let mut m = SegmentMap::default();
    for s in flushed.iter().flat_map(|l| l.segments.iter()) {
        m.insert(Segment::new(pool.clone(), s.chunk, s.span, 0));
    }
    for (h, c) in &disc.others {
        if h.kind == ChunkKind::Value {
            m.insert(Segment::new(pool.clone(), *c, u64::from(h.span).max(1), 0));
        }
    }
    m
}

/// Rebuilds buffer-trees and StableStore from the manifest and frees table chunks no
/// live table lives in (half-built or obsolete tables of an interrupted flush or
/// compaction). Each table holds the value segments its manifest entry lists; a
/// table of the first manifest format lists none, so it is read once to find them
/// (and `state` is completed, to be written with the next manifest snapshot).
pub(crate) fn load_tables(
    pool: &Arc<Pool>,
    disc: &Discovery,
    state: &mut ManifestState,
    values: &SegmentMap,
) -> Result<(Vec<Arc<BufferTree>>, StableStore)> {
    // Table allocations by first chunk.
    let allocs: BTreeMap<u64, u64> = disc
        .others
        .iter()
        .filter(|(h, _)| h.kind == ChunkKind::Table)
        .map(|(h, c)| (*c, u64::from(h.span).max(1)))
        .collect();
    let mut chunks: BTreeMap<u64, Arc<TableChunk>> = BTreeMap::new();
    let cs = pool.chunk_size();
    let mut handle = |m: &mut LstMeta| -> Result<Arc<Lst>> {
        if m.index_units == 0 || m.index_off >= m.size || m.min_key > m.max_key {
            return Err(Error::corruption(
                pool.path(),
                m.base,
                format!("manifest entry of table {} is inconsistent", m.id),
            ));
        }
        let c = m.base / cs;
        let found = allocs.range(..=c).next_back().filter(|(f, span)| {
            c < *f + *span
                && m.base >= *f * cs + CHUNK_HEADER_LEN
                && m.base + u64::from(m.size) <= (*f + *span) * cs
        });
        let Some((first, span)) = found else {
            return Err(Error::corruption(
                pool.path(),
                m.base,
                format!("manifest names table {} outside any table chunk", m.id),
            ));
        };
        let tc = chunks
            .entry(*first)
            .or_insert_with(|| TableChunk::recovered(pool.clone(), *first, *span))
            .clone();
        if m.values.is_none() {
            m.values = Some(referenced_segments(pool, m, &tc, values)?);
        }
        let mut segs = Vec::new();
        for chunk in m.values.as_deref().unwrap_or(&[]) {
            let s = values.get(*chunk).ok_or_else(|| {
                Error::corruption(
                    pool.path(),
                    pool.chunk_offset(*chunk),
                    format!(
                        "table {} points into chunk {chunk}, which holds no flushed log or values",
                        m.id
                    ),
                )
            })?;
            segs.push(s.clone());
        }
        Ok(Lst::from_meta(m, tc, segs))
    };
    let mut buffer = Vec::with_capacity(state.trees.len());
    for (seq, metas) in state.trees.iter_mut().rev() {
        let lsts = metas
            .iter_mut()
            .map(&mut handle)
            .collect::<Result<Vec<_>>>()?;
        buffer.push(Arc::new(BufferTree {
            seq: *seq,
            tables: TableSet::new(lsts),
        }));
    }
    let stable = StableStore::new(
        state
            .stable
            .values_mut()
            .map(&mut handle)
            .collect::<Result<Vec<_>>>()?,
    );
    let unused: Vec<(u64, u64)> = allocs
        .iter()
        .filter(|(c, _)| !chunks.contains_key(c))
        .map(|(c, s)| (*c, *s))
        .collect();
    pool.free_chunks(&unused)?;
    Ok((buffer, stable))
}

/// The value segments a table of the first manifest format points into, read from
/// the table itself.
fn referenced_segments(
    pool: &Pool,
    m: &LstMeta,
    tc: &Arc<TableChunk>,
    values: &SegmentMap,
) -> Result<Vec<u64>> {
    let probe = Lst::probe(m, tc.clone());
    let mut found = std::collections::BTreeSet::new();
    let mut stray = None;
    probe.scan_from(None, |_, v| {
        if let Some(p) = v.ptr() {
            match values.find(p.addr, pool.chunk_size()) {
                Some(s) => {
                    found.insert(s.chunk());
                }
                None => stray = Some(p.addr),
            }
        }
        true
    })?;
    if let Some(addr) = stray {
        return Err(Error::corruption(
            pool.path(),
            addr,
            format!("table {} points at a value outside every log segment", m.id),
        ));
    }
    Ok(found.into_iter().collect())
}

/// After the tables took their holders: frees the candidate segments no table points
/// into, and brings the manifest's accounting in line — an entry for every segment a
/// table points into (one the accounting missed counts as wholly live), none for the
/// others.
pub(super) fn release_unreferenced(
    pool: &Pool,
    values: SegmentMap,
    retained: &mut RetainedSegments,
) -> Result<()> {
    let mut kept = std::collections::BTreeSet::new();
    for s in values.iter() {
        if s.holders() > 0 {
            kept.insert(s.chunk());
            if retained.get(s.chunk()).is_none() {
                retained.add_live(SegmentLive {
                    chunk: s.chunk(),
                    span: s.span(),
                    live: s.bytes(),
                });
            }
        }
    }
    let stale: Vec<u64> = retained
        .iter()
        .map(|(c, _)| c)
        .filter(|c| !kept.contains(c))
        .collect();
    for c in stale {
        retained.remove(c);
    }
    // The unreferenced ones have no holder: dropping the last handle queues them.
    drop(values);
    pool.free_released()?;
    Ok(())
}

/// Fills `fs` with what the `live` logs hold: after a clean close from the checkpoint
/// that stands for them (`faststore/checkpoint.rs`, FlatStore §3.5), otherwise — or if
/// it does not check out — by replaying them ([`replay_all`]). Checkpoint chunks are
/// freed either way, before anything is written. Returns the largest LSN.
pub(super) fn restore_faststore(
    pool: &Arc<Pool>,
    fs: &Arc<FastStore>,
    disc: &crate::log::Discovery,
    live: &[LogInfo],
    opts: &Options,
    info: &mut RecoveryInfo,
) -> Result<u64> {
    let live_segs: Vec<(u64, u64)> = live
        .iter()
        .flat_map(|l| l.segments.iter().map(|s| (s.chunk, s.span)))
        .collect();
    let (found, damaged) = (&disc.checkpoints, &disc.damaged_checkpoints);
    match checkpoint::take(pool, fs, found, damaged, info.clean_shutdown, &live_segs)? {
        Some(cp) => {
            info.records = cp.entries;
            info.from_checkpoint = true;
            fs.add_recovered(
                live_segs
                    .iter()
                    .map(|&(c, span)| Segment::new(pool.clone(), c, span, 1))
                    .collect(),
                usize_from(cp.dram),
            );
            Ok(cp.max_lsn)
        }
        None => replay_all(pool, fs, live, opts, info),
    }
}

/// Replays every log into `fs`. Each thread reads its share of the logs (checksums
/// verified) and sorts what it read by key, newest LSN first; the sorted runs are
/// merged keeping the newest LSN per key — the same result as `put_validate` in LSN
/// order — and the index is built bottom-up, which is far faster than random inserts.
fn replay_all(
    pool: &Arc<Pool>,
    fs: &Arc<FastStore>,
    logs: &[LogInfo],
    opts: &Options,
    info: &mut RecoveryInfo,
) -> Result<u64> {
    type Run = Vec<(IKey, Version)>;
    /// One replay thread's result: its run, records, torn batch records, largest LSN
    /// and the torn tails it found.
    type Replayed = (Run, u64, u64, u64, Vec<TornTail>);
    let inline = opts.inline_threshold;
    let threads = opts.recovery_threads.clamp(1, logs.len().max(1));
    let results: Vec<Result<Replayed>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<Replayed> {
                    let (mut recs, mut torn, mut max) = (0, 0, 0);
                    let mut tails = Vec::new();
                    let mut run: Run = Vec::new();
                    for log in logs.iter().skip(t).step_by(threads) {
                        let end = log::replay(pool, log, |r, addr| {
                            let val = match r.kind {
                                Kind::Delete => Val::Tomb,
                                // A packed entry is never addressable: inline whatever
                                // the threshold is now (log/packed.rs).
                                _ if r.value.len() <= inline || r.packed => Val::inline(r.value),
                                _ => Val::Addr(ValuePtr {
                                    addr,
                                    len: value_len(r.value),
                                }),
                            };
                            let v = Version {
                                lsn: r.lsn,
                                epoch: 0,
                                val,
                            };
                            run.push((IKey::new(r.key), v));
                            Ok(())
                        })?;
                        recs += end.records;
                        torn += end.torn_batch_records;
                        max = max.max(end.max_lsn);
                        tails.extend(end.torn_at);
                    }
                    run.sort_unstable_by(|a, b| a.0.cmp_key(&b.0).then(b.1.lsn.cmp(&a.1.lsn)));
                    run.dedup_by(|later, first| later.0 == first.0);
                    Ok((run, recs, torn, max, tails))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("recovery thread panicked".into())))
            })
            .collect()
    });
    let mut max_lsn = 0;
    let mut runs = Vec::with_capacity(results.len());
    let mut tails = Vec::new();
    for r in results {
        let (run, recs, torn, max, t) = r?;
        info.records += recs;
        info.torn_batch_records += torn;
        max_lsn = max_lsn.max(max);
        runs.push(run);
        tails.extend(t);
    }
    // Every replayed log is sealed where it ended (a clean close sealed the others):
    // from now on a flipped bit in any record of it is corruption, not a shorter log.
    for t in &tails {
        log::seal_torn_tail(pool, t)?;
    }
    let mut dram = 0u64;
    let merged = merge_newest(runs).inspect(|(k, v)| dram += fs.entry_dram(k.len(), &v.val));
    fs.index().bulk_load(merged);
    fs.add_recovered(
        logs.iter()
            .flat_map(|l| l.segments.iter())
            .map(|s| Segment::new(pool.clone(), s.chunk, s.span, 1))
            .collect(),
        usize_from(dram),
    );
    Ok(max_lsn)
}

/// Merges runs sorted by key (one entry per key) into one sorted stream, keeping the
/// entry with the largest LSN when several runs hold the same key.
fn merge_newest(runs: Vec<Vec<(IKey, Version)>>) -> impl Iterator<Item = (IKey, Version)> {
    let mut iters: Vec<std::vec::IntoIter<(IKey, Version)>> =
        runs.into_iter().map(Vec::into_iter).collect();
    let mut heads: Vec<Option<(IKey, Version)>> = iters.iter_mut().map(Iterator::next).collect();
    std::iter::from_fn(move || {
        // Smallest key among the run heads (few runs: a linear pick is enough).
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let take = match best.and_then(|b| heads[b].as_ref()) {
                Some((bk, _)) => k.cmp_key(bk) == Ordering::Less,
                None => true,
            };
            if take {
                best = Some(i);
            }
        }
        let b = best?;
        let (key, mut ver) = heads[b].take()?;
        heads[b] = iters[b].next();
        // The same key in other runs: keep the newest LSN, advance those runs.
        for i in 0..heads.len() {
            let same = heads[i]
                .as_ref()
                .is_some_and(|(k, _)| k.cmp_key(&key) == Ordering::Equal);
            if same {
                if let Some((_, v)) = heads[i].take() {
                    if v.lsn > ver.lsn {
                        ver = v;
                    }
                }
                heads[i] = iters[i].next();
            }
        }
        Some((key, ver))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faststore::Val;

    fn e(k: &str, lsn: u64) -> (IKey, Version) {
        (
            IKey::new(k.as_bytes()),
            Version {
                lsn,
                epoch: 0,
                val: Val::Tomb,
            },
        )
    }

    #[test]
    fn merge_keeps_newest_lsn_per_key_in_order() {
        let runs = vec![
            vec![e("a", 1), e("c", 9), e("d", 2)],
            vec![e("b", 4), e("c", 3), e("e", 5)],
            vec![],
            vec![e("a", 7), e("e", 1)],
        ];
        let got: Vec<(Box<[u8]>, u64)> = merge_newest(runs)
            .map(|(k, v)| (k.to_boxed(), v.lsn))
            .collect();
        let want: Vec<(Box<[u8]>, u64)> = [("a", 7), ("b", 4), ("c", 9), ("d", 2), ("e", 5)]
            .iter()
            .map(|(k, l)| (k.as_bytes().into(), *l))
            .collect();
        assert_eq!(got, want);
    }
}
