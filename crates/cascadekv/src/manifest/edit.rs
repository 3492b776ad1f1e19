//! Manifest edits and the state they build, and their encoding (varints, LEB128; byte
//! strings length-prefixed; drawn in docs/formats.md). Decoding never trusts a length:
//! every count and length is checked against the bytes that remain.
//!
//! Two encodings: tags 1–3 are the first format (tables without their value-segment
//! lists, compactions without value-log changes); tags 4–6 add them. Both decode;
//! only the second is written, so a store's manifest moves to it at its next edit
//! (which starts a new manifest log with a snapshot).

use std::collections::BTreeMap;

use super::slow::{PartEdit, RunMeta, SlowEdit, SlowState};
use crate::coding::{get_varint, put_varint, usize_from};
use crate::table::LstMeta;
use crate::vlog::segments::SegmentUsage;
use crate::vlog::{RetainedSegments, SegmentDead, SegmentLive};

const TAG_SNAPSHOT_V1: u8 = 1;
const TAG_FLUSH_V1: u8 = 2;
const TAG_COMPACTION_V1: u8 = 3;
const TAG_SNAPSHOT: u8 = 4;
const TAG_FLUSH: u8 = 5;
const TAG_COMPACTION: u8 = 6;
/// A snapshot with the slow tier's state appended (written only when it is not empty,
/// so a store that never used the slow tier stays readable by older binaries).
const TAG_SNAPSHOT_SLOW: u8 = 7;
const TAG_SLOW: u8 = 8;
/// A slow-tier edit that also adds StableStore tables (a demotion that kept pinned
/// entries in the pool, issue #15): tag 8's fields, then the added tables. Written
/// only when there are some, so stores without pinning stay readable by older builds.
const TAG_SLOW_KEEP: u8 = 9;

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
    /// Log segments kept because tables reference separated values in them, with
    /// their live bytes (the value log's accounting, [`crate::vlog`]).
    pub retained: RetainedSegments,
    /// The slow tier's partitions and runs.
    pub slow: SlowState,
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
        /// Log segments to keep for separated values, with their live bytes.
        retained: Vec<SegmentLive>,
    },
    /// Buffer-trees and stable LSTs merged into new stable LSTs.
    Compaction {
        /// Buffer-trees removed.
        trees: Vec<u64>,
        /// Stable LSTs removed (ids).
        removed: Vec<u64>,
        /// Stable LSTs added (new or moved).
        added: Vec<LstMeta>,
        /// Separated value bytes that became dead, by retained segment.
        dead: Vec<SegmentDead>,
        /// Value segments a cleaning wrote (values moved out of victim segments), with
        /// the bytes the new tables reference in them.
        created: Vec<SegmentLive>,
        /// Retained segments no table references any more (first chunks).
        released: Vec<u64>,
    },
    /// A slow-tier change: a demotion, merge or split.
    Slow(SlowEdit),
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
                for s in retained {
                    self.retained.add_live(*s);
                }
                self.bump_ids(lsts);
            }
            Edit::Compaction {
                trees,
                removed,
                added,
                dead,
                created,
                released,
            } => {
                for d in dead {
                    self.retained.add_dead(*d);
                }
                for s in created {
                    self.retained.add_live(*s);
                }
                for c in released {
                    self.retained.remove(*c);
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
            Edit::Slow(e) => {
                for d in &e.dead {
                    self.retained.add_dead(*d);
                }
                for c in &e.released {
                    self.retained.remove(*c);
                }
                for id in &e.removed {
                    self.stable.remove(id);
                }
                for m in &e.added {
                    self.stable.insert(m.id, m.clone());
                }
                self.bump_ids(&e.added);
                self.slow.apply(e);
                let added: Vec<LstMeta> = e
                    .parts
                    .iter()
                    .filter_map(|(_, r)| r.as_ref())
                    .flatten()
                    .flat_map(|r| r.lsts.iter().cloned())
                    .collect();
                self.bump_ids(&added);
            }
        }
    }

    fn bump_ids(&mut self, lsts: &[LstMeta]) {
        for m in lsts {
            self.next_lst_id = self.next_lst_id.max(m.id + 1);
        }
    }

    /// Every pool LST the state references (slow-tier tables: `slow.lsts()`).
    pub fn all_lsts(&self) -> impl Iterator<Item = &LstMeta> {
        self.trees.values().flatten().chain(self.stable.values())
    }
}

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
    let values: &[u64] = m.values.as_deref().unwrap_or(&[]);
    put_ids(out, values);
}

fn put_ids(out: &mut Vec<u8>, ids: &[u64]) {
    put_varint(out, ids.len() as u64);
    for v in ids {
        put_varint(out, *v);
    }
}

fn put_lsts(out: &mut Vec<u8>, l: &[LstMeta]) {
    put_varint(out, l.len() as u64);
    for m in l {
        put_lst(out, m);
    }
}

fn put_runs(out: &mut Vec<u8>, runs: &[RunMeta]) {
    put_varint(out, runs.len() as u64);
    for r in runs {
        put_varint(out, r.file);
        put_varint(out, u64::from(r.weight));
        put_varint(out, r.filters.0);
        put_varint(out, r.filters.1);
        put_lsts(out, &r.lsts);
    }
}

fn put_parts<'a>(
    out: &mut Vec<u8>,
    n: usize,
    parts: impl Iterator<Item = (&'a [u8], Option<&'a [RunMeta]>)>,
) {
    put_varint(out, n as u64);
    for (lo, runs) in parts {
        put_bytes(out, lo);
        match runs {
            Some(r) => {
                out.push(1);
                put_runs(out, r);
            }
            None => out.push(0),
        }
    }
}

fn put_dead(out: &mut Vec<u8>, r: &[SegmentDead]) {
    put_varint(out, r.len() as u64);
    for d in r {
        put_varint(out, d.chunk);
        put_varint(out, d.bytes);
    }
}

fn put_live(out: &mut Vec<u8>, r: &[SegmentLive]) {
    put_varint(out, r.len() as u64);
    for s in r {
        put_varint(out, s.chunk);
        put_varint(out, s.span);
        put_varint(out, s.live);
    }
}

/// Encodes an edit: tag byte, then its fields.
#[must_use]
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
            let runs: Vec<SegmentLive> = s
                .retained
                .iter()
                .map(|(chunk, u)| SegmentLive {
                    chunk,
                    span: u.span,
                    live: u.live,
                })
                .collect();
            put_live(&mut out, &runs);
            if !s.slow.is_empty() {
                out[0] = TAG_SNAPSHOT_SLOW;
                put_varint(&mut out, s.slow.next_file);
                put_parts(
                    &mut out,
                    s.slow.parts.len(),
                    s.slow.parts.iter().map(|(lo, r)| (&**lo, Some(&r[..]))),
                );
            }
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
            put_live(&mut out, retained);
        }
        Edit::Compaction {
            trees,
            removed,
            added,
            dead,
            created,
            released,
        } => {
            out.push(TAG_COMPACTION);
            put_ids(&mut out, trees);
            put_ids(&mut out, removed);
            put_lsts(&mut out, added);
            put_dead(&mut out, dead);
            put_live(&mut out, created);
            put_ids(&mut out, released);
        }
        Edit::Slow(e) => {
            out.push(if e.added.is_empty() {
                TAG_SLOW
            } else {
                TAG_SLOW_KEEP
            });
            put_ids(&mut out, &e.removed);
            put_dead(&mut out, &e.dead);
            put_ids(&mut out, &e.released);
            put_parts(
                &mut out,
                e.parts.len(),
                e.parts.iter().map(|(lo, r)| (&**lo, r.as_deref())),
            );
            put_varint(&mut out, e.next_file);
            if !e.added.is_empty() {
                put_lsts(&mut out, &e.added);
            }
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
        let n = usize_from(self.v()?);
        (n <= (self.b.len() - self.p) / min_item.max(1)).then_some(n)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize_from(self.v()?);
        let s = self.b.get(self.p..self.p.checked_add(n)?)?;
        self.p += n;
        Some(s)
    }

    /// A table; with `v2`, followed by its value segments.
    fn lst(&mut self, v2: bool) -> Option<LstMeta> {
        Some(LstMeta {
            id: self.v()?,
            base: self.v()?,
            size: u32::try_from(self.v()?).ok()?,
            index_off: u32::try_from(self.v()?).ok()?,
            index_units: u8::try_from(self.small(255)?).ok()?,
            entries: u32::try_from(self.v()?).ok()?,
            min_key: self.bytes()?.into(),
            max_key: self.bytes()?.into(),
            values: if v2 { Some(self.ids()?) } else { None },
        })
    }

    fn lsts(&mut self, v2: bool) -> Option<Vec<LstMeta>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.lst(v2)).collect()
    }

    fn dead(&mut self) -> Option<Vec<SegmentDead>> {
        let n = self.count(2)?;
        (0..n)
            .map(|_| {
                Some(SegmentDead {
                    chunk: self.v()?,
                    bytes: self.v()?,
                })
            })
            .collect()
    }

    fn live(&mut self) -> Option<Vec<SegmentLive>> {
        let n = self.count(3)?;
        (0..n)
            .map(|_| {
                Some(SegmentLive {
                    chunk: self.v()?,
                    span: self.v()?,
                    live: self.v()?,
                })
            })
            .collect()
    }

    fn runs(&mut self) -> Option<Vec<RunMeta>> {
        let n = self.count(3)?;
        (0..n)
            .map(|_| {
                Some(RunMeta {
                    file: self.v()?,
                    weight: u32::try_from(self.v()?).ok()?,
                    filters: (self.v()?, self.v()?),
                    lsts: self.lsts(true)?,
                })
            })
            .collect()
    }

    /// Partitions: lower bound, then 1 and the runs, or 0 for a removed one.
    fn parts(&mut self) -> Option<Vec<PartEdit>> {
        let n = self.count(2)?;
        (0..n)
            .map(|_| {
                let lo: Box<[u8]> = self.bytes()?.into();
                let present = self.small(1)?;
                let runs = if present == 1 {
                    Some(self.runs()?)
                } else {
                    None
                };
                Some((lo, runs))
            })
            .collect()
    }

    fn ids(&mut self) -> Option<Vec<u64>> {
        let n = self.count(1)?;
        (0..n).map(|_| self.v()).collect()
    }
}

/// Decodes an edit; `None` if the bytes are not a well-formed edit.
#[must_use]
pub fn decode(b: &[u8]) -> Option<Edit> {
    let (&tag, rest) = b.split_first()?;
    let mut d = Dec { b: rest, p: 0 };
    let v2 = matches!(
        tag,
        TAG_SNAPSHOT | TAG_FLUSH | TAG_COMPACTION | TAG_SNAPSHOT_SLOW
    );
    let e = match tag {
        TAG_SNAPSHOT | TAG_SNAPSHOT_V1 | TAG_SNAPSHOT_SLOW => {
            let mut s = ManifestState {
                flushed_generation: d.v()?,
                next_lst_id: d.v()?,
                next_tree_seq: d.v()?,
                ..ManifestState::default()
            };
            let n = d.count(2)?;
            for _ in 0..n {
                let seq = d.v()?;
                let l = d.lsts(v2)?;
                s.trees.insert(seq, l);
            }
            for m in d.lsts(v2)? {
                s.stable.insert(m.id, m);
            }
            for x in d.live()? {
                s.retained.insert(
                    x.chunk,
                    SegmentUsage {
                        span: x.span,
                        live: x.live,
                    },
                );
            }
            if tag == TAG_SNAPSHOT_SLOW {
                s.slow.next_file = d.v()?;
                for (lo, runs) in d.parts()? {
                    s.slow.parts.insert(lo, runs?);
                }
            }
            Edit::Snapshot(s)
        }
        TAG_FLUSH | TAG_FLUSH_V1 => Edit::Flush {
            generation: d.v()?,
            tree_seq: d.v()?,
            lsts: d.lsts(v2)?,
            retained: d.live()?,
        },
        TAG_COMPACTION | TAG_COMPACTION_V1 => Edit::Compaction {
            trees: d.ids()?,
            removed: d.ids()?,
            added: d.lsts(v2)?,
            dead: d.dead()?,
            created: if v2 { d.live()? } else { Vec::new() },
            released: if v2 { d.ids()? } else { Vec::new() },
        },
        TAG_SLOW | TAG_SLOW_KEEP => Edit::Slow(SlowEdit {
            removed: d.ids()?,
            dead: d.dead()?,
            released: d.ids()?,
            parts: d.parts()?,
            next_file: d.v()?,
            added: if tag == TAG_SLOW_KEEP {
                let a = d.lsts(true)?;
                if a.is_empty() {
                    return None;
                }
                a
            } else {
                Vec::new()
            },
        }),
        _ => return None,
    };
    (d.p == rest.len()).then_some(e)
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
            values: Some(vec![7, id + 100]),
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
                retained: vec![SegmentLive {
                    chunk: 7,
                    span: 1,
                    live: 500,
                }],
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
                dead: vec![SegmentDead {
                    chunk: 7,
                    bytes: 200,
                }],
                created: vec![SegmentLive {
                    chunk: 40,
                    span: 1,
                    live: 90,
                }],
                released: vec![],
            },
            Edit::Compaction {
                trees: vec![],
                removed: vec![5],
                added: vec![meta(6)],
                dead: vec![],
                created: vec![],
                released: vec![40],
            },
        ];
        for e in &edits {
            assert_eq!(decode(&encode(e)).as_ref(), Some(e));
            s.apply(e);
        }
        assert_eq!(s.flushed_generation, 4);
        assert!(s.trees.is_empty());
        assert_eq!(s.stable.keys().copied().collect::<Vec<_>>(), vec![4, 6]);
        assert_eq!(s.next_lst_id, 7);
        assert_eq!(
            s.retained.iter().collect::<Vec<_>>(),
            vec![(7, SegmentUsage { span: 1, live: 300 })]
        );
        let snap = Edit::Snapshot(s.clone());
        assert_eq!(decode(&encode(&snap)), Some(snap));
        assert_eq!(encode(&Edit::Snapshot(s.clone()))[0], TAG_SNAPSHOT);
    }

    #[test]
    fn slow_edits_round_trip_and_apply() {
        let mut s = ManifestState {
            next_lst_id: 7,
            stable: [(4, meta(4)), (6, meta(6))].into_iter().collect(),
            ..ManifestState::default()
        };
        s.retained.add_live(SegmentLive {
            chunk: 7,
            span: 1,
            live: 300,
        });
        // A demotion of table 4 into two partitions, then a merge removing one.
        let run = |file, weight, ids: &[u64]| RunMeta {
            file,
            weight,
            filters: (4096, 77),
            lsts: ids.iter().map(|i| meta(*i)).collect(),
        };
        let slow = [
            Edit::Slow(SlowEdit {
                removed: vec![4],
                dead: vec![SegmentDead {
                    chunk: 7,
                    bytes: 100,
                }],
                released: vec![],
                parts: vec![
                    (b"".to_vec().into(), Some(vec![run(1, 0, &[20])])),
                    (b"m".to_vec().into(), Some(vec![run(2, 0, &[21, 22])])),
                ],
                next_file: 3,
                added: vec![],
            }),
            Edit::Slow(SlowEdit {
                removed: vec![],
                dead: vec![],
                released: vec![7],
                parts: vec![(b"m".to_vec().into(), None)],
                next_file: 3,
                added: vec![],
            }),
            // A demotion that kept pinned entries in a new stable table (tag 9).
            Edit::Slow(SlowEdit {
                removed: vec![6],
                dead: vec![],
                released: vec![],
                parts: vec![(b"".to_vec().into(), Some(vec![run(1, 0, &[20])]))],
                next_file: 3,
                added: vec![meta(30)],
            }),
        ];
        for e in &slow {
            let bytes = encode(e);
            let Edit::Slow(se) = e else { continue };
            assert_eq!(bytes[0] == TAG_SLOW_KEEP, !se.added.is_empty());
            assert_eq!(decode(&bytes).as_ref(), Some(e));
            for cut in 0..bytes.len() {
                assert_eq!(decode(&bytes[..cut]), None, "cut at {cut}");
            }
            s.apply(e);
        }
        assert_eq!(s.stable.keys().copied().collect::<Vec<_>>(), vec![30]);
        assert_eq!(s.next_lst_id, 31);
        assert_eq!(s.slow.next_file, 3);
        assert_eq!(s.slow.files().collect::<Vec<_>>(), vec![1]);
        assert!(s.retained.iter().next().is_none());
        let snap = Edit::Snapshot(s.clone());
        let bytes = encode(&snap);
        assert_eq!(bytes[0], TAG_SNAPSHOT_SLOW);
        assert_eq!(decode(&bytes), Some(snap));
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn first_format_edits_still_decode() {
        // A flush edit as the first format wrote it: tag 2, no value-segment lists.
        let mut b = vec![TAG_FLUSH_V1];
        for v in [9u64, 3, 1] {
            put_varint(&mut b, v); // generation, tree_seq, one table
        }
        for v in [1u64, 4096, 1000, 900, 1, 50] {
            put_varint(&mut b, v);
        }
        put_bytes(&mut b, b"a");
        put_bytes(&mut b, b"z");
        put_varint(&mut b, 0); // no retained segments
        match decode(&b) {
            Some(Edit::Flush { lsts, .. }) => assert_eq!(lsts[0].values, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_or_padded_edits_are_rejected() {
        let e = encode(&Edit::Flush {
            generation: 1,
            tree_seq: 2,
            lsts: vec![meta(9)],
            retained: vec![SegmentLive {
                chunk: 1,
                span: 2,
                live: 3,
            }],
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
