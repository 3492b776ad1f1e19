//! The Manifest (FluidKV §5.5): which Logical Sorted Tables make up the BufferStore's
//! buffer-trees and the StableStore, which FastStore generations are flushed, and
//! which log segments must be kept because tables point into them.
//!
//! The manifest is a log in pool chunks of kind `Manifest` written with the log record
//! format (checksums seeded with the chunk epoch, torn tails, corruption rules of
//! [`crate::log::reader`]). Each record is one *edit*, appended and made durable
//! before the change it describes becomes visible, so a crash at any point leaves
//! either the old or the new state:
//!
//! * `Snapshot` — the whole state; every manifest log starts with one.
//! * `Flush` — FastStore generation `g` became buffer-tree `seq` (its LSTs), and
//!   these log segments hold separated values the LSTs reference.
//! * `Compaction` — these buffer-trees and stable LSTs were replaced by these new
//!   stable LSTs.
//! * `Slow` — the slow tier's partitions changed (a demotion, merge or split,
//!   [`slow`]).
//!
//! At the first edit after open, and when a manifest log grows past `ROTATE_BYTES`, a
//! new one is started with a `Snapshot` and the old one is freed. Recovery uses the
//! newest manifest log that holds any valid record (a log whose snapshot never became
//! durable holds none and is skipped); if that log does not start with a snapshot, or
//! a record in it is damaged, open fails with `Corruption` rather than fall back to an
//! older state.
//!
//! Edits and their encoding: [`edit`] (drawn in docs/formats.md).
//!
//! Thread-safety: [`Manifest`] holds its log and the current state behind one mutex
//! (`ManifestLog`); flush and compaction threads append edits through it, and a reader
//! of the state gets a copy.

pub(crate) mod edit;
pub(crate) mod slow;

use std::sync::Arc;

use parking_lot::Mutex;

pub use edit::{decode, encode};
pub(crate) use edit::{Edit, ManifestState};
pub(crate) use slow::{RunMeta, SlowEdit, SlowState};

use crate::error::{Error, Result};
use crate::log::{self, Kind, LogInfo, LogWriter, RecordIn};
use crate::pmem::{AllocClass, ChunkKind, Pool};

/// Manifest bytes after which a new manifest log is started.
pub(crate) const ROTATE_BYTES: u64 = 8 << 20;

/// The log being appended to and the state it describes (behind `Manifest::log`).
struct ManifestLog {
    /// The manifest log being appended to; `None` until the first edit after open.
    log: Option<LogWriter>,
    bytes: u64,
    state: ManifestState,
    /// Segments of the manifest log read at open, freed once a new log exists.
    old: Vec<(u64, u64)>,
}

/// The manifest of an open store.
pub struct Manifest {
    pool: Arc<Pool>,
    /// The manifest log and state; held for a whole edit (append + sync + apply).
    log: Mutex<ManifestLog>,
}

impl std::fmt::Debug for Manifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifest").finish()
    }
}

/// What recovery read.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The state.
    pub state: ManifestState,
    /// Manifest logs to free (older or invalid ones): (chunk, span) runs.
    pub stale: Vec<(u64, u64)>,
    /// The manifest log in use, if any.
    pub current: Option<LogInfo>,
}

/// Reads the newest valid manifest log.
pub fn recover(pool: &Pool, manifests: &[LogInfo]) -> Result<Recovered> {
    recover_with(pool, manifests, None)
}

/// [`recover`]; with a `sink`, a damaged manifest record is reported there and skipped
/// (the edit it held is lost) instead of failing — for `cascade verify` and `repair`.
pub fn recover_with(
    pool: &Pool,
    manifests: &[LogInfo],
    mut sink: Option<&mut dyn FnMut(log::Damage)>,
) -> Result<Recovered> {
    let mut r = Recovered::default();
    let mut sorted: Vec<&LogInfo> = manifests.iter().collect();
    sorted.sort_by_key(|l| std::cmp::Reverse(l.log_id));
    for m in sorted {
        let segs = m.segments.iter().map(|s| (s.chunk, s.span));
        if r.current.is_some() {
            r.stale.extend(segs);
            continue;
        }
        let mut state: Option<ManifestState> = None;
        let apply = |rec: &log::record::RecordOut<'_>, addr: u64| {
            let Some(e) = decode(rec.value) else {
                return Err(Error::corruption(
                    pool.path(),
                    addr,
                    "undecodable manifest edit",
                ));
            };
            match (&mut state, &e) {
                (None, Edit::Snapshot(s)) => state = Some(s.clone()),
                (None, _) => {
                    return Err(Error::corruption(
                        pool.path(),
                        addr,
                        "manifest log does not start with a snapshot",
                    ));
                }
                (Some(st), e) => st.apply(e),
            }
            Ok(())
        };
        match sink.as_mut() {
            Some(s) => log::salvage(pool, m, apply, &mut **s)?,
            None => log::replay(pool, m, apply)?,
        };
        match state {
            // A manifest log whose snapshot never became durable (rotation crashed):
            // the previous one is still complete.
            None => r.stale.extend(segs),
            Some(s) => {
                r.state = s;
                r.current = Some(m.clone());
            }
        }
    }
    Ok(r)
}

impl Manifest {
    /// The manifest of an opened store: `state` as recovered, `old` the segments of the
    /// manifest log it came from. Nothing is written until the first edit, which
    /// starts a new manifest log with a snapshot (so opening a store with a full pool
    /// works) and then frees `old`.
    pub fn open(pool: Arc<Pool>, state: ManifestState, old: Vec<(u64, u64)>) -> Manifest {
        Manifest {
            pool,
            log: Mutex::new(ManifestLog {
                log: None,
                bytes: 0,
                state,
                old,
            }),
        }
    }

    /// A copy of the retained value segments only: the whole state also holds every
    /// table's metadata (the slow tier's included), which the compaction thread's
    /// rounds, jobs and statistics do not need.
    pub fn retained(&self) -> crate::vlog::RetainedSegments {
        self.log.lock().state.retained.clone()
    }

    /// The next buffer-tree sequence number.
    pub fn next_tree_seq(&self) -> u64 {
        self.log.lock().state.next_tree_seq
    }

    /// Live bytes of the retained value segments (without copying the state).
    pub fn live_value_bytes(&self) -> u64 {
        self.log.lock().state.retained.live_bytes()
    }

    /// Makes `e` durable, then applies it. Starts a new manifest log (a snapshot of
    /// the state after `e`) at the first edit and whenever the log has grown past
    /// [`ROTATE_BYTES`]; the previous log is freed once the new one is durable.
    pub fn apply(&self, e: &Edit) -> Result<()> {
        let mut g = self.log.lock();
        let rotate = g.log.is_none() || g.bytes > ROTATE_BYTES;
        if rotate {
            let mut next = g.state.clone();
            next.apply(e);
            let mut fresh = LogWriter::with_kind(self.pool.clone(), 0, ChunkKind::Manifest);
            let bytes = append(&mut fresh, &Edit::Snapshot(next.clone()))?;
            let old = std::mem::take(&mut g.old);
            if let Some(prev) = g.log.replace(fresh) {
                // Its segments are freed once nothing references them.
                for s in prev.segments() {
                    s.release();
                }
            }
            g.bytes = bytes;
            g.state = next;
            // The new log's snapshot is durable: the old log is no longer needed.
            self.pool.free_chunks(&old)?;
            return Ok(());
        }
        let Some(log) = g.log.as_mut() else {
            return Err(Error::Internal("manifest log missing".into()));
        };
        let n = append(log, e)?;
        g.bytes += n;
        g.state.apply(e);
        Ok(())
    }
}

fn append(log: &mut LogWriter, e: &Edit) -> Result<u64> {
    let payload = encode(e);
    let before = log.bytes_written();
    log.append(
        &RecordIn {
            kind: Kind::Put,
            lsn: 0,
            in_batch: false,
            key: b"M",
            value: &payload,
        },
        AllocClass::Upkeep,
    )?;
    log.sync()?;
    Ok(log.bytes_written() - before)
}
