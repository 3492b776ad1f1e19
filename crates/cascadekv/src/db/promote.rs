//! Promotion (PrismDB §4.2, §5.3 "Object promotions", "Read-triggered Compactions"):
//! hot keys the slow tier served are copied back into StableStore, so the fast tier
//! serves them next time.
//!
//! One job, run by the slow-tier thread while the read trigger (`placement/epochs.rs`)
//! says so:
//! 1. under `compact_lock` (no compaction or demotion changes StableStore) and
//!    `slow_lock` (no demotion or merge changes the slow tier), take up to
//!    [`MAX_KEYS`] tracked keys last served by the slow tier that the mapper pins;
//! 2. drop each key some fast stage holds (its version there is newer: nothing to
//!    promote) and read the rest from the slow tier — their newest version, since the
//!    slow tier cannot change meanwhile; tombstones and values over [`MAX_VALUE`] stay;
//! 3. keep only the candidates in the densest eighth of StableStore's tables (a
//!    compaction rewrites every table its keys overlap), write their values inline
//!    into new pool tables and merge them into StableStore with an ordinary
//!    compaction (`compact::Job::Promote`): one manifest edit.
//!
//! Why this is correct: a promoted key is absent from StableStore when read, and
//! StableStore cannot gain it before the edit (both locks are held), so the copy sits
//! directly above the slow tier — newer than every slow version, older than anything
//! in the buffer-trees or FastStores, which a concurrent write or flush may add. The
//! slow tier keeps its copy (same value, shadowed) until a later demotion of the key
//! writes a newer run above it; a crash before the edit loses only the copy.
//!
//! Room: a job promotes at most [`MAX_BYTES`] or a 32nd of the fast budget (and what
//! is left of the epoch's allowance, `placement/epochs.rs`), and only while
//! StableStore is within a 16th over the budget; demotion then moves colder ranges
//! down (an exchange, as PrismDB's read-triggered compactions do).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::compact::{self, Job};
use super::engine::Engine;
use super::slow::fast_bytes;
use crate::bufferstore::BufferTree;
use crate::error::Result;
use crate::table::{Lst, TableSet, TableWriter, Unpublished};
use crate::value::ValueRef;
use crate::vlog::SegmentMap;

/// Keys one job looks at.
pub(crate) const MAX_KEYS: usize = 4096;
/// Value bytes one job promotes at most.
pub(crate) const MAX_BYTES: u64 = 8 << 20;
/// Largest value promoted (an inline entry must fit a table block's unit limit).
pub(crate) const MAX_VALUE: usize = 64 << 10;

/// Runs one promotion job if placement wants one. Returns whether it promoted.
pub(crate) fn promote(e: &Engine) -> Result<bool> {
    let (Some(p), Some(_)) = (&e.placement, &e.slow) else {
        return Ok(false);
    };
    let budget = e.fast_budget();
    let allowed = p.promote_now(budget);
    if allowed == 0 {
        return Ok(false);
    }
    let _c = e.compact_lock.lock();
    let Some(_s) = e.slow_lock.try_lock() else {
        return Ok(false);
    };
    let stages = e.stages.load_full();
    let stable = stages.stable.tables();
    let fast = fast_bytes(stable.bytes(), e.manifest.live_value_bytes());
    if fast > budget + budget / 16 {
        return Ok(false);
    }
    let room = (budget / 32).clamp(1 << 20, MAX_BYTES).min(allowed);
    let pin = p.pinning(budget, fast, stable.entries());
    let mut keys = p
        .tracker
        .hot_in_slow(MAX_KEYS, |clock, k| pin.pins(k, Some(clock)));
    keys.sort_unstable();
    let tables: Vec<Arc<Lst>> = stable.tables().cloned().collect();
    let keys = densest_window(keys, &tables);
    let mut got: Vec<(Box<[u8]>, Vec<u8>)> = Vec::new();
    let mut bytes = 0u64;
    for k in keys {
        if bytes >= room {
            break;
        }
        let in_fast = stages
            .fast()
            .any(|fs| fs.index().with_version(&k, None, |_| ()).is_some());
        let in_fast = in_fast
            || stages
                .buffer
                .iter()
                .map(|t| t.tables.get_with(&k, true, |_| ()))
                .any(|r| !matches!(r, Ok(None)))
            || !matches!(stable.get_with(&k, e.opts.stable_filters, |_| ()), Ok(None));
        if in_fast {
            p.tracker.mark_fast(&k);
            continue;
        }
        let v = stages.slow.get_with(&k, |v| match v {
            ValueRef::Inline(b) if b.len() <= MAX_VALUE => Some(b.to_vec()),
            _ => None,
        })?;
        if let Some(Some(v)) = v {
            bytes += (k.len() + v.len()) as u64;
            got.push((k, v));
        }
    }
    if got.is_empty() {
        return Ok(false);
    }
    // Inline values only: the tables point into no value segment.
    let segs = SegmentMap::default();
    let mut w = TableWriter::new(e.pool.clone());
    let mut b = e.topts.builder(e.opts.stable_filters);
    let mut made = Unpublished::default();
    for (k, v) in &got {
        if let Some(t) = b.add(k, &ValueRef::Inline(v)) {
            made.push(w.place(t, &segs)?);
        }
    }
    if let Some(t) = b.finish() {
        made.push(w.place(t, &segs)?);
    }
    w.sync()?;
    let tree = Arc::new(BufferTree {
        seq: u64::MAX,
        tables: TableSet::new(made.tables().iter().cloned()),
    });
    compact::run(
        e,
        &stages,
        Job::Promote(tree),
        BTreeSet::new(),
        BTreeSet::new(),
    )?;
    // The compaction moved or rewrote every table: nothing left to retire on drop.
    let _ = made.publish();
    for (k, _) in &got {
        p.tracker.mark_fast(k);
    }
    let c = &p.counters;
    c.promotion_jobs.fetch_add(1, Ordering::Relaxed);
    c.promotions.fetch_add(got.len() as u64, Ordering::Relaxed);
    c.promoted_bytes.fetch_add(bytes, Ordering::Relaxed);
    Ok(true)
}

/// The candidates (sorted) that fall in the densest run of consecutive StableStore
/// tables, an eighth of them: a promotion is a compaction that rewrites every table
/// its keys overlap, and hot keys are scattered, so a job over all of them rewrote
/// nearly all of StableStore each time (perf, YCSB C: placement served 45 % of gets
/// from the pool against 16 % without it, and was still slower).
fn densest_window(keys: Vec<Box<[u8]>>, tables: &[Arc<Lst>]) -> Vec<Box<[u8]>> {
    if tables.len() <= 8 {
        return keys;
    }
    let w = tables.len() / 8;
    let idx: Vec<usize> = keys
        .iter()
        .map(|k| {
            tables
                .partition_point(|l| *l.min_key <= **k)
                .saturating_sub(1)
        })
        .collect();
    let (mut best, mut best_lo, mut lo) = (0usize, 0usize, 0usize);
    for (hi, &x) in idx.iter().enumerate() {
        while idx.get(lo).is_some_and(|&y| x >= y + w) {
            lo += 1;
        }
        if hi + 1 - lo > best {
            best = hi + 1 - lo;
            best_lo = lo;
        }
    }
    keys.into_iter().skip(best_lo).take(best).collect()
}
