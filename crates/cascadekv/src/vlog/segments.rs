//! Retained log segments and their live/dead accounting.
//!
//! A *retained segment* is a log allocation (first chunk + span) kept after its
//! FastStore generation was flushed, because tables point at separated values in it.
//! For each one the manifest records the bytes of the records still referenced (*live
//! bytes*); the rest of the segment is dead space. Record bytes are counted as
//! [`encoded_len`] without the optional MARK, the same way everywhere.
//!
//! * A flush tallies, per segment of the flushed generation, the records its tables
//!   reference ([`LiveTally`]) and adds them ([`SegmentLive`]).
//! * A compaction that drops an older version of a key whose value was separated
//!   subtracts that record from its segment ([`SegmentDead`]).

use std::collections::BTreeMap;

use crate::log::record::encoded_len;
use crate::value::ValuePtr;
use crate::vlog::Segment;

/// Live bytes added to a segment by a flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentLive {
    /// First chunk of the segment (its identity).
    pub chunk: u64,
    /// Chunks it spans.
    pub span: u64,
    /// Record bytes the new tables reference in it.
    pub live: u64,
}

/// Bytes of a segment that became dead (a compaction dropped the versions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentDead {
    /// First chunk of the segment.
    pub chunk: u64,
    /// Record bytes no table references any more.
    pub bytes: u64,
}

/// Span and live bytes of one retained segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentUsage {
    /// Chunks the segment spans.
    pub span: u64,
    /// Record bytes still referenced by tables.
    pub live: u64,
}

/// The retained segments by first chunk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetainedSegments {
    map: BTreeMap<u64, SegmentUsage>,
}

/// Record bytes a value occupies in the log (what live/dead accounting counts).
pub(crate) fn record_bytes(key_len: usize, ptr: ValuePtr) -> u64 {
    encoded_len(key_len, ptr.len as usize, false)
}

impl RetainedSegments {
    /// Adds live bytes (a flush), creating the entry if needed.
    pub fn add_live(&mut self, s: SegmentLive) {
        let e = self.map.entry(s.chunk).or_insert(SegmentUsage {
            span: s.span,
            live: 0,
        });
        e.live += s.live;
    }

    /// Subtracts dead bytes (a compaction); unknown segments are ignored.
    pub fn add_dead(&mut self, d: SegmentDead) {
        if let Some(e) = self.map.get_mut(&d.chunk) {
            e.live = e.live.saturating_sub(d.bytes);
        }
    }

    /// Inserts an entry as a snapshot of the manifest lists it.
    pub fn insert(&mut self, chunk: u64, usage: SegmentUsage) {
        self.map.insert(chunk, usage);
    }

    /// Forgets the segment starting at `chunk` (no table references it any more).
    pub fn remove(&mut self, chunk: u64) {
        self.map.remove(&chunk);
    }

    /// The usage of the segment starting at `chunk`.
    pub fn get(&self, chunk: u64) -> Option<SegmentUsage> {
        self.map.get(&chunk).copied()
    }

    /// True if the segment starting at `chunk` is retained.
    pub fn contains(&self, chunk: u64) -> bool {
        self.map.contains_key(&chunk)
    }

    /// The retained segment holding byte `addr`, if any.
    pub fn segment_of(&self, addr: u64, chunk_size: u64) -> Option<u64> {
        let chunk = addr / chunk_size;
        self.map
            .range(..=chunk)
            .next_back()
            .filter(|(c, u)| chunk < *c + u.span)
            .map(|(c, _)| *c)
    }

    /// Segments in chunk order with their usage.
    pub fn iter(&self) -> impl Iterator<Item = (u64, SegmentUsage)> + '_ {
        self.map.iter().map(|(c, u)| (*c, *u))
    }

    /// Number of retained segments.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Live bytes over all retained segments.
    pub fn live_bytes(&self) -> u64 {
        self.map.values().map(|u| u.live).sum()
    }
}

/// Counts, per value segment, the record bytes of the values a flush's or a
/// cleaning's new tables reference.
#[derive(Debug, Default)]
pub(crate) struct LiveTally {
    live: BTreeMap<u64, (u64, u64)>,
}

impl LiveTally {
    /// Counts the value `ptr` of a key `key_len` bytes long, which lies in `seg`.
    pub fn note(&mut self, seg: &Segment, key_len: usize, ptr: ValuePtr) {
        let e = self.live.entry(seg.chunk()).or_insert((seg.span(), 0));
        e.1 += record_bytes(key_len, ptr);
    }

    /// The segments with referenced values.
    pub fn finish(&self) -> Vec<SegmentLive> {
        self.live
            .iter()
            .map(|(c, (span, live))| SegmentLive {
                chunk: *c,
                span: *span,
                live: *live,
            })
            .collect()
    }
}

/// Sums dead bytes per retained segment over one compaction.
#[derive(Debug, Default)]
pub(crate) struct DeadTally {
    dead: BTreeMap<u64, u64>,
}

impl DeadTally {
    /// Counts a dropped version's value if it lives in a retained segment.
    pub fn note(
        &mut self,
        retained: &RetainedSegments,
        chunk_size: u64,
        key_len: usize,
        ptr: ValuePtr,
    ) {
        if let Some(seg) = retained.segment_of(ptr.addr, chunk_size) {
            *self.dead.entry(seg).or_insert(0) += record_bytes(key_len, ptr);
        }
    }

    /// Adds another tally (per-thread tallies of one compaction).
    pub fn merge(&mut self, other: DeadTally) {
        for (c, b) in other.dead {
            *self.dead.entry(c).or_insert(0) += b;
        }
    }

    /// The totals.
    pub fn finish(self) -> Vec<SegmentDead> {
        self.dead
            .into_iter()
            .map(|(chunk, bytes)| SegmentDead { chunk, bytes })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retained_accounting_by_segment() {
        let cs = 1 << 16;
        let p = |chunk: u64, off: u64| ValuePtr {
            addr: chunk * cs + off,
            len: 100,
        };
        let per = record_bytes(8, p(3, 64));
        let mut r = RetainedSegments::default();
        r.add_live(SegmentLive {
            chunk: 3,
            span: 2,
            live: 2 * per,
        });
        r.add_live(SegmentLive {
            chunk: 7,
            span: 1,
            live: per,
        });
        assert_eq!(r.segment_of(4 * cs + 10, cs), Some(3));
        assert_eq!(r.segment_of(5 * cs, cs), None);
        let mut d = DeadTally::default();
        d.note(&r, cs, 8, p(4, 64));
        d.note(&r, cs, 8, p(9, 64));
        for x in d.finish() {
            r.add_dead(x);
        }
        assert_eq!(r.live_bytes(), 2 * per);
        assert_eq!(r.len(), 2);
    }
}
