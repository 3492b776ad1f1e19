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
//!
//! At the first edit after open, and when a manifest log grows past `ROTATE_BYTES`, a
//! new one is started with a `Snapshot` and the old one is freed. Recovery uses the
//! newest manifest log that holds any valid record (a log whose snapshot never became
//! durable holds none and is skipped); if that log does not start with a snapshot, or
//! a record in it is damaged, open fails with `Corruption` rather than fall back to an
//! older state.
//!
//! Encoding of every edit (varints, LEB128; byte strings are length-prefixed) is in
//! docs/formats.md. Decoding never trusts a length: every count and length is checked
//! against the bytes that remain.
//!
//! Thread-safety: [`Manifest`] is internally locked; flush and compaction threads
//! append edits through it.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::coding::{get_varint, put_varint};
use crate::error::{Error, Result};
use crate::log::{self, Kind, LogInfo, LogWriter, RecordIn};
use crate::pmem::{ChunkKind, Pool};
use crate::table::LstMeta;

/// Manifest bytes after which a new manifest log is started.
pub const ROTATE_BYTES: u64 = 8 << 20;

const TAG_SNAPSHOT: u8 = 1;
const TAG_FLUSH: u8 = 2;
const TAG_COMPACTION: u8 = 3;

/// Everything the manifest knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestState {
    /// FastStore generations up to this one are in LSTs (their logs need no replay).
    pub flushed_generation: u64,
    /// Next LST id to hand out.
    pub next_lst_id: u64,
    /// Next buffer-tree sequence number.
    pub next_tree_seq: u64,
    /// Buffer-trees by sequence number (higher = newer), each its LSTs in key order.
    pub trees: BTreeMap<u64, Vec<LstMeta>>,
    /// StableStore LSTs by id.
    pub stable: BTreeMap<u64, LstMeta>,
    /// Log segments kept because tables reference separated values in them:
    /// first chunk → (span, live value bytes). Dead bytes = span × chunk size − live;
    /// a later log-GC reclaims them.
    pub retained: BTreeMap<u64, (u64, u64)>,
}

/// One change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// The full state.
    Snapshot(ManifestState),
    /// A FastStore generation became a buffer-tree.
    Flush {
        /// The generation flushed (all older ones were flushed before).
        generation: u64,
        /// The new buffer-tree's sequence number.
        tree_seq: u64,
        /// Its LSTs in key order.
        lsts: Vec<LstMeta>,
        /// Log segments to keep for separated values: (chunk, span, live bytes).
        retained: Vec<(u64, u64, u64)>,
    },
    /// Buffer-trees and stable LSTs merged into new stable LSTs.
    Compaction {
        /// Buffer-trees removed.
        trees: Vec<u64>,
        /// Stable LSTs removed (ids).
        removed: Vec<u64>,
        /// Stable LSTs added (new or moved).
        added: Vec<LstMeta>,
        /// Separated value bytes that became dead, by retained segment: (chunk, bytes).
        dead: Vec<(u64, u64)>,
    },
}

impl ManifestState {
    /// Applies an edit.
    pub fn apply(&mut self, e: &Edit) {
        match e {
            Edit::Snapshot(s) => *self = s.clone(),
            Edit::Flush {
                generation,
                tree_seq,
                lsts,
                retained,
            } => {
                self.flushed_generation = self.flushed_generation.max(*generation);
                self.next_tree_seq = self.next_tree_seq.max(tree_seq + 1);
                self.trees.insert(*tree_seq, lsts.clone());
                for (c, span, live) in retained {
                    let e = self.retained.entry(*c).or_insert((*span, 0));
                    e.1 += live;
                }
                self.bump_ids(lsts);
            }
            Edit::Compaction {
                trees,
                removed,
                added,
                dead,
            } => {
                for (c, bytes) in dead {
                    if let Some(e) = self.retained.get_mut(c) {
                        e.1 = e.1.saturating_sub(*bytes);
                    }
                }
                for t in trees {
                    self.trees.remove(t);
                }
                for id in removed {
                    self.stable.remove(id);
                }
                for m in added {
                    self.stable.insert(m.id, m.clone());
                }
                self.bump_ids(added);
            }
        }
    }

    fn bump_ids(&mut self, lsts: &[LstMeta]) {
        for m in lsts {
            self.next_lst_id = self.next_lst_id.max(m.id + 1);
        }
    }

    /// Every LST the state references.
    pub fn all_lsts(&self) -> impl Iterator<Item = &LstMeta> {
        self.trees.values().flatten().chain(self.stable.values())
    }
}

// ---------- encoding ----------

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_lst(out: &mut Vec<u8>, m: &LstMeta) {
    for v in [
        m.id,
        m.base,
        u64::from(m.size),
        u64::from(m.index_off),
        u64::from(m.index_units),
        u64::from(m.entries),
    ] {
        put_varint(out, v);
    }
    put_bytes(out, &m.min_key);
    put_bytes(out, &m.max_key);
}

fn put_lsts(out: &mut Vec<u8>, l: &[LstMeta]) {
    put_varint(out, l.len() as u64);
    for m in l {
        put_lst(out, m);
    }
}

fn put_pairs(out: &mut Vec<u8>, r: &[(u64, u64)]) {
    put_varint(out, r.len() as u64);
    for (c, s) in r {
        put_varint(out, *c);
        put_varint(out, *s);
    }
}

fn put_triples(out: &mut Vec<u8>, r: &[(u64, u64, u64)]) {
    put_varint(out, r.len() as u64);
    for (a, b, c) in r {
        put_varint(out, *a);
        put_varint(out, *b);
        put_varint(out, *c);
    }
}

/// Encodes an edit: tag byte, then its fields.
pub fn encode(e: &Edit) -> Vec<u8> {
    let mut out = Vec::new();
    match e {
        Edit::Snapshot(s) => {
            out.push(TAG_SNAPSHOT);
            put_varint(&mut out, s.flushed_generation);
            put_varint(&mut out, s.next_lst_id);
            put_varint(&mut out, s.next_tree_seq);
            put_varint(&mut out, s.trees.len() as u64);
            for (seq, l) in &s.trees {
                put_varint(&mut out, *seq);
                put_lsts(&mut out, l);
            }
            let stable: Vec<LstMeta> = s.stable.values().cloned().collect();
            put_lsts(&mut out, &stable);
            let runs: Vec<(u64, u64, u64)> = s
                .retained
                .iter()
                .map(|(c, (sp, l))| (*c, *sp, *l))
                .collect();
            put_triples(&mut out, &runs);
        }
        Edit::Flush {
            generation,
            tree_seq,
            lsts,
            retained,
        } => {
            out.push(TAG_FLUSH);
            put_varint(&mut out, *generation);
            put_varint(&mut out, *tree_seq);
            put_lsts(&mut out, lsts);
            put_triples(&mut out, retained);
        }
        Edit::Compaction {
            trees,
            removed,
            added,
            dead,
        } => {
            out.push(TAG_COMPACTION);
            put_varint(&mut out, trees.len() as u64);
            for t in trees {
                put_varint(&mut out, *t);
            }
            put_varint(&mut out, removed.len() as u64);
            for r in removed {
                put_varint(&mut out, *r);
            }
            put_lsts(&mut out, added);
            put_pairs(&mut out, dead);
        }
    }
    out
}

struct Dec<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Dec<'a> {
    fn v(&mut self) -> Option<u64> {
        get_varint(self.b, &mut self.p)
    }

    fn small(&mut self, max: u64) -> Option<u64> {
        self.v().filter(|v| *v <= max)
    }

    /// A count of items each at least `min_item` bytes long: never more than the bytes
    /// left allow, so a damaged count cannot drive a huge allocation.
    fn count(&mut self, min_item: usize) -> Option<usize> {
        let n = self.v()? as usize;
        (n <= (self.b.len() - self.p) / min_item.max(1)).then_some(n)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.v()? as usize;
        let s = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(s)
    }

    fn lst(&mut self) -> Option<LstMeta> {
        Some(LstMeta {
            id: self.v()?,
            base: self.v()?,
            size: u32::try_from(self.v()?).ok()?,
            index_off: u32::try_from(self.v()?).ok()?,
            index_units: u8::try_from(self.small(255)?).ok()?,
            entries: u32::try_from(self.v()?).ok()?,
            min_key: self.bytes()?.into(),
            max_key: self.bytes()?.into(),
        })
    }

    fn lsts(&mut self) -> Option<Vec<LstMeta>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.lst()).collect()
    }

    fn pairs(&mut self) -> Option<Vec<(u64, u64)>> {
        let n = self.count(2)?;
        (0..n).map(|_| Some((self.v()?, self.v()?))).collect()
    }

    fn triples(&mut self) -> Option<Vec<(u64, u64, u64)>> {
        let n = self.count(3)?;
        (0..n)
            .map(|_| Some((self.v()?, self.v()?, self.v()?)))
            .collect()
    }

    fn ids(&mut self) -> Option<Vec<u64>> {
        let n = self.count(1)?;
        (0..n).map(|_| self.v()).collect()
    }
}

/// Decodes an edit; `None` if the bytes are not a well-formed edit.
pub fn decode(b: &[u8]) -> Option<Edit> {
    let (&tag, rest) = b.split_first()?;
    let mut d = Dec { b: rest, p: 0 };
    let e = match tag {
        TAG_SNAPSHOT => {
            let mut s = ManifestState {
                flushed_generation: d.v()?,
                next_lst_id: d.v()?,
                next_tree_seq: d.v()?,
                ..ManifestState::default()
            };
            let n = d.count(2)?;
            for _ in 0..n {
                let seq = d.v()?;
                let l = d.lsts()?;
                s.trees.insert(seq, l);
            }
            for m in d.lsts()? {
                s.stable.insert(m.id, m);
            }
            s.retained = d
                .triples()?
                .into_iter()
                .map(|(c, sp, l)| (c, (sp, l)))
                .collect();
            Edit::Snapshot(s)
        }
        TAG_FLUSH => Edit::Flush {
            generation: d.v()?,
            tree_seq: d.v()?,
            lsts: d.lsts()?,
            retained: d.triples()?,
        },
        TAG_COMPACTION => Edit::Compaction {
            trees: d.ids()?,
            removed: d.ids()?,
            added: d.lsts()?,
            dead: d.pairs()?,
        },
        _ => return None,
    };
    (d.p == rest.len()).then_some(e)
}

// ---------- the live manifest ----------

struct Inner {
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
    inner: Mutex<Inner>,
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
        log::replay(pool, m, |rec, addr| {
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
        })?;
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
            inner: Mutex::new(Inner {
                log: None,
                bytes: 0,
                state,
                old,
            }),
        }
    }

    /// A copy of the current state.
    pub fn state(&self) -> ManifestState {
        self.inner.lock().state.clone()
    }

    /// Makes `e` durable, then applies it. Starts a new manifest log (a snapshot of
    /// the state after `e`) at the first edit and whenever the log has grown past
    /// [`ROTATE_BYTES`]; the previous log is freed once the new one is durable.
    pub fn apply(&self, e: Edit) -> Result<()> {
        let mut g = self.inner.lock();
        let rotate = g.log.is_none() || g.bytes > ROTATE_BYTES;
        if rotate {
            let mut next = g.state.clone();
            next.apply(&e);
            let mut fresh = LogWriter::with_kind(self.pool.clone(), 0, ChunkKind::Manifest);
            let bytes = append(&mut fresh, &Edit::Snapshot(next.clone()))?;
            let mut old = std::mem::take(&mut g.old);
            if let Some(prev) = g.log.replace(fresh) {
                old.extend_from_slice(prev.segments());
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
        let n = append(log, &e)?;
        g.bytes += n;
        g.state.apply(&e);
        Ok(())
    }

    /// Bytes in the current manifest log.
    pub fn bytes(&self) -> u64 {
        self.inner.lock().bytes
    }
}

fn append(log: &mut LogWriter, e: &Edit) -> Result<u64> {
    let payload = encode(e);
    let before = log.bytes_written();
    log.append(&RecordIn {
        kind: Kind::Put,
        lsn: 0,
        in_batch: false,
        key: b"M",
        value: &payload,
    })?;
    log.sync()?;
    Ok(log.bytes_written() - before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta(id: u64) -> LstMeta {
        LstMeta {
            id,
            base: id * 4096,
            size: 1000,
            index_off: 900,
            index_units: 1,
            entries: 50,
            min_key: format!("a{id}").into_bytes().into(),
            max_key: format!("z{id}").into_bytes().into(),
        }
    }

    #[test]
    fn edits_round_trip_and_apply() {
        let mut s = ManifestState::default();
        let edits = vec![
            Edit::Flush {
                generation: 3,
                tree_seq: 0,
                lsts: vec![meta(1), meta(2)],
                retained: vec![(7, 1, 500)],
            },
            Edit::Flush {
                generation: 4,
                tree_seq: 1,
                lsts: vec![meta(3)],
                retained: vec![],
            },
            Edit::Compaction {
                trees: vec![0, 1],
                removed: vec![],
                added: vec![meta(4), meta(5)],
                dead: vec![(7, 200)],
            },
        ];
        for e in &edits {
            assert_eq!(decode(&encode(e)).as_ref(), Some(e));
            s.apply(e);
        }
        assert_eq!(s.flushed_generation, 4);
        assert!(s.trees.is_empty());
        assert_eq!(s.stable.keys().copied().collect::<Vec<_>>(), vec![4, 5]);
        assert_eq!(s.next_lst_id, 6);
        assert_eq!(s.retained.get(&7), Some(&(1, 300)));
        let snap = Edit::Snapshot(s.clone());
        assert_eq!(decode(&encode(&snap)), Some(snap));
    }

    #[test]
    fn truncated_or_padded_edits_are_rejected() {
        let e = encode(&Edit::Flush {
            generation: 1,
            tree_seq: 2,
            lsts: vec![meta(9)],
            retained: vec![(1, 2, 3)],
        });
        for cut in 0..e.len() {
            assert_eq!(decode(&e[..cut]), None, "cut at {cut}");
        }
        let mut longer = e.clone();
        longer.push(0);
        assert_eq!(decode(&longer), None);
    }

    proptest! {
        #[test]
        fn decode_never_panics_or_overallocates(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }
    }
}
