//! Key-change notifications: WATCH flags and clients parked in blocking commands.
//!
//! A transaction records the user keys it changes (only while anyone watches or
//! waits: [`Notify::active`]); after its commit the store calls [`Notify::touched`],
//! which sets the dirty flag of every client watching one of those keys and calls the
//! wake function of every client blocked on one. Purging an already expired key is not
//! a change (Redis's rule for stale keys); a watcher notices expiry itself by comparing
//! liveness at WATCH and at EXEC.
//!
//! One mutex guards each map; `active` counts registrations so that the common case
//! (nobody watching or waiting) costs one atomic load per write. Any thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Wakes a parked client (pushes it to its worker's ready queue).
pub(crate) type WakeFn = Arc<dyn Fn() + Send + Sync>;

/// A watching client: its id and dirty flag.
type Watcher = (u64, Arc<AtomicBool>);

/// A parked client: its id and wake function.
type Waiter = (u64, WakeFn);

/// The registries.
#[derive(Default)]
pub(crate) struct Notify {
    active: AtomicUsize,
    watchers: Mutex<HashMap<Vec<u8>, Vec<Watcher>>>,
    waiters: Mutex<HashMap<Vec<u8>, Vec<Waiter>>>,
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notify")
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Notify {
    /// True while anyone watches or waits.
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire) > 0
    }

    /// Watches `key`: `dirty` is set when it changes.
    pub(crate) fn watch(&self, id: u64, key: &[u8], dirty: &Arc<AtomicBool>) {
        self.active.fetch_add(1, Ordering::AcqRel);
        self.watchers
            .lock()
            .entry(key.to_vec())
            .or_default()
            .push((id, dirty.clone()));
    }

    /// Stops watching `keys` under `id`.
    pub(crate) fn unwatch(&self, id: u64, keys: &[Vec<u8>]) {
        let mut w = self.watchers.lock();
        for k in keys {
            if let Some(list) = w.get_mut(k) {
                let before = list.len();
                list.retain(|(i, _)| *i != id);
                self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
                if list.is_empty() {
                    w.remove(k);
                }
            }
        }
    }

    /// Parks `id` on `keys`: `wake` runs when one of them changes.
    pub(crate) fn wait(&self, id: u64, keys: &[Vec<u8>], wake: &WakeFn) {
        let mut w = self.waiters.lock();
        for k in keys {
            self.active.fetch_add(1, Ordering::AcqRel);
            w.entry(k.clone()).or_default().push((id, wake.clone()));
        }
    }

    /// Unparks `id`.
    pub(crate) fn unwait(&self, id: u64, keys: &[Vec<u8>]) {
        let mut w = self.waiters.lock();
        for k in keys {
            if let Some(list) = w.get_mut(k) {
                let before = list.len();
                list.retain(|(i, _)| *i != id);
                self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
                if list.is_empty() {
                    w.remove(k);
                }
            }
        }
    }

    /// `keys` changed.
    pub(crate) fn touched(&self, keys: &[Vec<u8>]) {
        if keys.is_empty() {
            return;
        }
        {
            let w = self.watchers.lock();
            for k in keys {
                for (_, d) in w.get(k).into_iter().flatten() {
                    d.store(true, Ordering::Release);
                }
            }
        }
        let wakes: Vec<WakeFn> = {
            let w = self.waiters.lock();
            keys.iter()
                .flat_map(|k| w.get(k).into_iter().flatten().map(|(_, f)| f.clone()))
                .collect()
        };
        for f in wakes {
            f();
        }
    }

    /// Keys currently watched (FLUSHDB touches those that exist).
    pub(crate) fn watched_keys(&self) -> Vec<Vec<u8>> {
        self.watchers.lock().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_and_wait() {
        let n = Notify::default();
        assert!(!n.active());
        let dirty = Arc::new(AtomicBool::new(false));
        n.watch(1, b"a", &dirty);
        let woken = Arc::new(AtomicUsize::new(0));
        let w2 = woken.clone();
        let wake: WakeFn = Arc::new(move || {
            w2.fetch_add(1, Ordering::Relaxed);
        });
        n.wait(2, &[b"b".to_vec()], &wake);
        assert!(n.active());
        n.touched(&[b"c".to_vec()]);
        assert!(!dirty.load(Ordering::Relaxed));
        n.touched(&[b"a".to_vec(), b"b".to_vec()]);
        assert!(dirty.load(Ordering::Relaxed));
        assert_eq!(woken.load(Ordering::Relaxed), 1);
        n.unwatch(1, &[b"a".to_vec()]);
        n.unwait(2, &[b"b".to_vec()]);
        assert!(!n.active());
    }
}
