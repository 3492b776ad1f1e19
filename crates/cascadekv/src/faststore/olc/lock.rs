//! The version lock of one index node (optimistic lock coupling, Leis et al., "The ART
//! of Practical Synchronization", 2016; the same protocol as Masstree's node
//! versions, which FluidKV's FastStore index uses, §5.1).
//!
//! One `u64` per node: bit 1 is the writer lock, the bits above it count completed
//! write sections. A reader takes the version (`read`, refused while locked), reads the
//! node with relaxed atomic loads, and accepts what it read only if the version is
//! unchanged afterwards (`check`): readers write nothing, so a read touches no shared
//! cache line in exclusive mode. A writer turns a version it read into the lock with one
//! compare-exchange (`upgrade`), so it also knows nothing changed since it read;
//! `unlock` adds 2, which clears the lock bit and bumps the version in one step.
//!
//! Memory ordering (the seqlock pattern): `upgrade` is followed by a release fence, so a
//! reader whose relaxed loads see any store of the write section also sees the lock bit
//! at its acquire-fenced `check`; `unlock` is a release, `read` an acquire, so a reader
//! that sees the new version sees every store of the section.
//!
//! Thread-safety: all methods take `&self`; the lock is the only synchronization of a
//! node's fields besides the acquire/release publication of new nodes and entries.

use super::sync::{fence, AtomicU64, Ordering};

/// Lock bit (bit 0 is unused: versions advance by 4 per write section).
const LOCKED: u64 = 0b10;

/// A node's version and writer lock.
#[derive(Debug)]
pub(super) struct VersionLock(AtomicU64);

impl VersionLock {
    pub(super) fn new() -> Self {
        VersionLock(AtomicU64::new(0))
    }

    /// Begins an optimistic read: the current version, or `None` while a writer holds
    /// the lock (the caller restarts).
    #[inline]
    pub(super) fn read(&self) -> Option<u64> {
        let v = self.0.load(Ordering::Acquire);
        (v & LOCKED == 0).then_some(v)
    }

    /// True if no write section began since [`VersionLock::read`] returned `v`: what was
    /// read in between is a consistent state of the node.
    #[inline]
    pub(super) fn check(&self, v: u64) -> bool {
        fence(Ordering::Acquire);
        self.0.load(Ordering::Relaxed) == v
    }

    /// Takes the lock if the version is still `v` (nothing changed since it was read).
    #[inline]
    pub(super) fn upgrade(&self, v: u64) -> Option<WriteGuard<'_>> {
        if self
            .0
            .compare_exchange(v, v | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            fence(Ordering::Release);
            Some(WriteGuard(self))
        } else {
            None
        }
    }

    /// Ends a write section: clears the lock bit and advances the version.
    fn unlock(&self) {
        self.0.fetch_add(LOCKED, Ordering::Release);
    }
}

/// A held node lock; dropping it ends the write section.
#[derive(Debug)]
pub(super) struct WriteGuard<'a>(&'a VersionLock);

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn versions_advance_and_refuse_stale_upgrades() {
        let l = VersionLock::new();
        let v = l.read().unwrap_or(u64::MAX);
        assert!(l.check(v));
        {
            let g = l.upgrade(v);
            assert!(g.is_some(), "an unchanged version upgrades");
            assert_eq!(l.read(), None, "readers are refused while locked");
            assert!(!l.check(v));
            assert!(l.upgrade(v).is_none(), "a second writer is refused");
        }
        let w = l.read().unwrap_or(u64::MAX);
        assert_ne!(w, v);
        assert!(
            !l.check(v),
            "a completed write section invalidates old reads"
        );
        assert!(
            l.upgrade(v).is_none(),
            "an upgrade from a stale version fails"
        );
        drop(l.upgrade(w));
        assert!(l.check(w + 4));
    }
}
