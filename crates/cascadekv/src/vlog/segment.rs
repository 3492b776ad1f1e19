//! [`Segment`]: one allocation of log (or value) chunks, shared by whoever may read
//! records in it, and freed only when nobody can.
//!
//! Two counts keep a segment alive, for two different reasons:
//!
//! * **Holders** (`holders`, an atomic count) say it must stay *on media*: one for the
//!   writer or FastStore generation that owns it until that generation's flush is
//!   durable, plus one for every live table whose entries point into it. A holder is
//!   taken when the table is built (or the segment allocated) and given back when the
//!   table is marked obsolete after the edit that replaced it is durable (or when the
//!   generation's flush edit is durable).
//! * **References** (`Arc<Segment>`) say it may still be *read*: the FastStore that
//!   wrote it (and so every stage set, iterator and snapshot holding that FastStore),
//!   every table pointing into it (and so every stage set holding that table), the
//!   flush or compaction working with it.
//!
//! The chunks are handed back to the pool when the last reference goes *and* no holder
//! is left. So no reader — a get, an iterator, a snapshot, a stage that still holds an
//! old pointer — can reach a freed or reused segment: whoever holds the pointer holds a
//! reference. Freeing goes through the pool's release queue, so the thread that drops
//! the last reference (often a reader) never persists the bitmap itself.
//!
//! At close every durable segment still has a holder, so nothing is freed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::pmem::Pool;

/// One log or value allocation. See the module docs.
#[derive(Debug)]
pub(crate) struct Segment {
    pool: Arc<Pool>,
    chunk: u64,
    span: u64,
    /// Reasons to keep the chunks on media (see the module docs).
    holders: AtomicUsize,
}

impl Segment {
    /// A segment of `span` chunks from `chunk` with `holders` holders.
    pub fn new(pool: Arc<Pool>, chunk: u64, span: u64, holders: usize) -> Arc<Segment> {
        Arc::new(Segment {
            pool,
            chunk,
            span,
            holders: AtomicUsize::new(holders),
        })
    }

    /// First chunk (the segment's identity).
    pub fn chunk(&self) -> u64 {
        self.chunk
    }

    /// Chunks spanned.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// Bytes of pool the segment occupies.
    pub fn bytes(&self) -> u64 {
        self.span * self.pool.chunk_size()
    }

    /// Takes one holder.
    pub fn hold(&self) {
        self.holders.fetch_add(1, Ordering::AcqRel);
    }

    /// Gives one holder back; true if none is left.
    pub fn release(&self) -> bool {
        let prev = self
            .holders
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1));
        prev == Ok(1)
    }

    /// Current holders.
    pub fn holders(&self) -> usize {
        self.holders.load(Ordering::Acquire)
    }

    #[cfg(test)]
    /// True if pool offset `addr` lies in the segment.
    pub fn contains(&self, addr: u64) -> bool {
        let c = addr / self.pool.chunk_size();
        c >= self.chunk && c < self.chunk + self.span
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.holders.load(Ordering::Acquire) == 0 {
            self.pool.release(self.chunk, self.span);
        }
    }
}

/// Segments by first chunk, to find the one a pointer falls in.
#[derive(Debug, Default, Clone)]
pub(crate) struct SegmentMap {
    map: BTreeMap<u64, Arc<Segment>>,
}

impl SegmentMap {
    /// Adds a segment (replacing one with the same first chunk).
    pub fn insert(&mut self, s: Arc<Segment>) {
        self.map.insert(s.chunk(), s);
    }

    /// The segment starting at `chunk`.
    pub fn get(&self, chunk: u64) -> Option<&Arc<Segment>> {
        self.map.get(&chunk)
    }

    /// The segment holding pool offset `addr`.
    pub fn find(&self, addr: u64, chunk_size: u64) -> Option<&Arc<Segment>> {
        let c = addr / chunk_size;
        self.map
            .range(..=c)
            .next_back()
            .map(|(_, s)| s)
            .filter(|s| c < s.chunk() + s.span())
    }

    /// Every segment, by first chunk.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Segment>> {
        self.map.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::{AllocClass, ChunkKind, Device, PoolGeometry, SimDevice};
    use std::path::Path;

    #[test]
    fn freed_only_without_holders_and_references() -> crate::Result<()> {
        let dev = Arc::new(SimDevice::new(1 << 20));
        let geo = PoolGeometry {
            pool_size: 1 << 20,
            chunk_size: 64 << 10,
        };
        let pool = Arc::new(Pool::open(Path::new("sim"), &Device::Sim(dev), geo, true)?);
        let used = || pool.allocator().used_chunks();
        let (a, _) = pool.alloc_chunk(ChunkKind::Log, 1, None, 0, 0, AllocClass::Upkeep)?;
        let before = used();
        let s = Segment::new(pool.clone(), a.chunk, a.span, 1);
        let reader = s.clone();
        s.hold(); // a table points into it
        assert!(!s.release()); // the generation's flush is durable
        drop(s);
        pool.free_released()?;
        assert_eq!(used(), before, "a table still holds it");
        assert!(reader.release()); // the table was replaced
        pool.free_released()?;
        assert_eq!(used(), before, "a reader still references it");
        assert!(reader.contains(pool.chunk_offset(a.chunk) + 100));
        let mut m = SegmentMap::default();
        m.insert(reader.clone());
        assert!(m
            .find(pool.chunk_offset(a.chunk) + 7, pool.chunk_size())
            .is_some());
        assert!(m
            .find(pool.chunk_offset(a.chunk + 1), pool.chunk_size())
            .is_none());
        drop(m);
        drop(reader);
        assert_eq!(pool.free_released()?, 1);
        assert_eq!(used(), before - 1);
        // A segment dropped with a holder (the store closing) is kept.
        let (b, _) = pool.alloc_chunk(ChunkKind::Log, 1, None, 0, 0, AllocClass::Upkeep)?;
        drop(Segment::new(pool.clone(), b.chunk, b.span, 1));
        assert_eq!(pool.free_released()?, 0);
        Ok(())
    }
}
