//! [`Feed`]: the replication stream as the store produces it, and the bounded backlog
//! of its most recent bytes.
//!
//! Every commit appends one record (`record.rs`) while it still holds its stripe locks,
//! so records of commits that touch a common key are in commit order, and a commit's
//! record is in the backlog before its client hears back (so `WAIT` after a reply
//! covers that write). Offsets count stream bytes as Redis's `master_repl_offset`
//! does: `end` is the offset of the last byte produced; the backlog holds the bytes
//! `first()..=end`, at most `cap` of them (older ones are dropped; a replica that
//! needs them gets a full sync).
//!
//! Locks: `gate` (a read-write lock) is held shared by every commit from its engine
//! write to its append, and exclusively for an instant by a full sync that takes its
//! engine snapshot and reads `end` (so the snapshot holds exactly the records up to
//! that offset). `ring` (a mutex) guards the bytes and `end`; `grown` signals appends
//! to the threads that stream to replicas. `active` and `replica` are atomics read
//! without a lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Default backlog size (Redis's `repl-backlog-size`: 1 MiB).
pub(crate) const DEFAULT_BACKLOG: usize = 1 << 20;

/// The stream and its backlog. See the module docs.
#[derive(Debug)]
pub(crate) struct Feed {
    gate: RwLock<()>,
    /// Records are kept (a replica has connected once, or this node is a replica).
    active: AtomicBool,
    /// This node applies a primary's stream: it refuses client writes and does not
    /// expire keys itself (the primary's deletions arrive in the stream).
    replica: AtomicBool,
    ring: Mutex<Ring>,
    grown: Condvar,
    /// Bytes the backlog may hold (`repl-backlog-size`).
    cap: AtomicU64,
}

#[derive(Debug, Default)]
struct Ring {
    buf: VecDeque<u8>,
    /// Offset of the last byte produced (0: none yet).
    end: u64,
}

/// What a reader asked for is no longer in the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Overrun;

impl Default for Feed {
    fn default() -> Self {
        Feed {
            gate: RwLock::new(()),
            active: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            ring: Mutex::new(Ring::default()),
            grown: Condvar::new(),
            cap: AtomicU64::new(DEFAULT_BACKLOG as u64),
        }
    }
}

impl Feed {
    /// Held by a commit from its engine write to its append.
    pub(crate) fn enter(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    /// Held by a full sync while it takes its snapshot and reads the offset.
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }

    /// True while records are kept.
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Starts keeping records.
    pub(crate) fn activate(&self) {
        self.active.store(true, Ordering::Release);
    }

    /// True while this node is a replica.
    pub(crate) fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// Marks this node a replica (or a primary again).
    pub(crate) fn set_replica(&self, on: bool) {
        self.replica.store(on, Ordering::Release);
    }

    /// The backlog's capacity in bytes.
    pub(crate) fn capacity(&self) -> u64 {
        self.cap.load(Ordering::Relaxed)
    }

    /// Sets the backlog's capacity (`repl-backlog-size`, at least 16 KiB).
    pub(crate) fn set_capacity(&self, bytes: u64) {
        self.cap.store(bytes.max(16 << 10), Ordering::Relaxed);
    }

    /// Appends one record (the caller holds [`Feed::enter`]).
    pub(crate) fn append(&self, rec: &[u8]) {
        let cap = usize::try_from(self.capacity()).unwrap_or(usize::MAX);
        let mut r = self.ring.lock();
        r.buf.extend(rec.iter().copied());
        r.end += rec.len() as u64;
        let extra = r.buf.len().saturating_sub(cap);
        if extra > 0 {
            r.buf.drain(..extra);
        }
        drop(r);
        self.grown.notify_all();
    }

    /// The offset of the last byte produced (`master_repl_offset`).
    pub(crate) fn offset(&self) -> u64 {
        self.ring.lock().end
    }

    /// The offset of the oldest byte held, and how many bytes are held.
    pub(crate) fn span(&self) -> (u64, u64) {
        let r = self.ring.lock();
        (r.end + 1 - r.buf.len() as u64, r.buf.len() as u64)
    }

    /// Forgets the backlog and continues the stream at `end` (after a full sync, or at
    /// start from the offset a replica stored).
    pub(crate) fn reset(&self, end: u64) {
        let mut r = self.ring.lock();
        r.buf.clear();
        r.end = end;
    }

    /// True if a reader that wants `from` next can be served from the backlog.
    pub(crate) fn can_serve(&self, from: u64) -> bool {
        let r = self.ring.lock();
        let first = r.end + 1 - r.buf.len() as u64;
        from >= first && from <= r.end + 1
    }

    /// Up to `max` bytes starting at offset `from`, waiting up to `wait` for some
    /// when there are none yet (empty: none arrived).
    ///
    /// # Errors
    /// [`Overrun`] when `from` was dropped from the backlog (or lies past its end).
    pub(crate) fn read_from(
        &self,
        from: u64,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<u8>, Overrun> {
        let mut r = self.ring.lock();
        if from > r.end {
            if from > r.end + 1 {
                return Err(Overrun);
            }
            let _ = self.grown.wait_for(&mut r, wait);
        }
        let first = r.end + 1 - r.buf.len() as u64;
        if from < first || from > r.end + 1 {
            return Err(Overrun);
        }
        let skip = usize::try_from(from - first).map_err(|_| Overrun)?;
        let n = (r.buf.len() - skip).min(max);
        Ok(r.buf.range(skip..skip + n).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_overrun() {
        let f = Feed::default();
        f.set_capacity(16 << 10);
        assert_eq!(f.offset(), 0);
        assert_eq!(f.span(), (1, 0));
        f.append(b"abc");
        f.append(b"de");
        assert_eq!(f.offset(), 5);
        assert_eq!(f.read_from(1, 100, Duration::ZERO), Ok(b"abcde".to_vec()));
        assert_eq!(f.read_from(4, 1, Duration::ZERO), Ok(b"d".to_vec()));
        assert_eq!(f.read_from(6, 10, Duration::ZERO), Ok(Vec::new()));
        assert_eq!(f.read_from(7, 10, Duration::ZERO), Err(Overrun));
        // Overflow the backlog: the oldest bytes go, a reader of them is overrun.
        f.append(&vec![b'x'; 16 << 10]);
        assert_eq!(f.read_from(1, 10, Duration::ZERO), Err(Overrun));
        assert!(!f.can_serve(5));
        let (first, len) = f.span();
        assert_eq!(len, 16 << 10);
        assert_eq!(first + len - 1, f.offset());
        assert!(f.can_serve(first));
        f.reset(100);
        assert_eq!(f.span(), (101, 0));
        assert!(f.can_serve(101));
    }
}
