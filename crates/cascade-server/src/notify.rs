//! Key-change notifications: WATCH flags and clients parked in blocking commands.
//!
//! A transaction records the user keys it changes (only while anyone watches or
//! waits: [`Notify::active`]); after its commit the store calls [`Notify::touched`],
//! which sets the dirty flag of every client watching one of those keys and calls the
//! wake function of every client blocked on one. Purging an already expired key is not
//! a change (Redis's rule for stale keys); a watcher notices expiry itself by comparing
//! liveness at WATCH and at EXEC.
//!
//! Parked clients are served in the order their commands arrived, as Redis's single
//! loop serves them: each carries the kernel's receive time of its command (ties by
//! a sequence number), a change marks every waiter on the key as woken, and a woken
//! client may run its command again only when no earlier woken client waiting on one
//! of the same keys is still to run ([`Notify::may_retry`]); when that one has run
//! ([`Notify::retried`] or [`Notify::unwait`]) the clients it held back are woken
//! again. A client counts as woken from the moment it parks until it has run once
//! more. So two clients blocked on one key on two worker threads are served first
//! come, first served — also when the first one's worker parked it after the other
//! (it was not yet scheduled), provided it parks before the other runs again, which
//! `worker/presence.rs` gives it a moment for.
//!
//! One mutex guards each map; `active` counts registrations so that the common case
//! (nobody watching or waiting) costs one atomic load per write. Any thread.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Wakes a parked client (pushes it to its worker's ready queue).
pub(crate) type WakeFn = Arc<dyn Fn() + Send + Sync>;

/// A watching client: its id and dirty flag.
type Watcher = (u64, Arc<AtomicBool>);

/// A parked client.
struct Turn {
    /// The client's id (CLIENT UNBLOCK).
    id: u64,
    /// CLIENT UNBLOCK asked it to stop waiting: `Some(true)` with an error.
    unblock: Option<bool>,
    keys: Vec<Vec<u8>>,
    wake: WakeFn,
    /// When its command arrived (ns since the epoch, the kernel's receive time): the
    /// order of service, ties by `seq`.
    arrival: u64,
    /// Another command changed one of its keys since it parked.
    touched: bool,
    /// A key changed since it last ran (or it just parked and runs once more).
    woken: bool,
    /// It was held back by an earlier woken client: wake it when that one has run.
    held: bool,
}

/// Parked clients by key and in park order.
#[derive(Default)]
struct Waiters {
    by_key: HashMap<Vec<u8>, Vec<u64>>,
    turns: BTreeMap<u64, Turn>,
    next: u64,
}

/// The registries.
#[derive(Default)]
pub(crate) struct Notify {
    active: AtomicUsize,
    /// Parked clients woken and not yet run again.
    woken: AtomicUsize,
    watchers: Mutex<HashMap<Vec<u8>, Vec<Watcher>>>,
    waiters: Mutex<Waiters>,
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

    /// Stops watching `keys` under `id` (all the client's keys: UNWATCH, EXEC,
    /// DISCARD, a closed connection). A key SWAPDB moved to the other physical
    /// database after the caller qualified it is looked for by its user key.
    pub(crate) fn unwatch(&self, id: u64, keys: &[Vec<u8>]) {
        let mut w = self.watchers.lock();
        for k in keys {
            let mut found = false;
            if let Some(list) = w.get_mut(k) {
                let before = list.len();
                list.retain(|(i, _)| *i != id);
                found = before != list.len();
                self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
                if list.is_empty() {
                    w.remove(k);
                }
            }
            if !found {
                let user = k.get(2..).unwrap_or_default();
                w.retain(|q, list| {
                    if q.get(2..) == Some(user) {
                        let before = list.len();
                        list.retain(|(i, _)| *i != id);
                        self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
                    }
                    !list.is_empty()
                });
            }
        }
    }

    /// SWAPDB of the logical databases on physical `pa` and `pb`: watches and parked
    /// clients stay with their logical database, as in Redis, so every registration
    /// on one of the two moves to the other. Returns the registered keys now on either
    /// (the caller touches those that exist on either side, as Redis's
    /// `touchAllWatchedKeysInDb` and `scanDatabaseForReadyLists` do).
    pub(crate) fn swap(&self, pa: u16, pb: u16) -> Vec<Vec<u8>> {
        let (a, b) = (pa.to_be_bytes(), pb.to_be_bytes());
        let flip = |q: &[u8]| -> Option<Vec<u8>> {
            let to = match q.get(..2) {
                Some(p) if p == a => b,
                Some(p) if p == b => a,
                _ => return None,
            };
            let mut n = q.to_vec();
            n[..2].copy_from_slice(&to);
            Some(n)
        };
        let mut moved = Vec::new();
        {
            let mut w = self.watchers.lock();
            let keys: Vec<Vec<u8>> = w.keys().filter(|q| flip(q).is_some()).cloned().collect();
            let mut taken: Vec<(Vec<u8>, Vec<Watcher>)> = keys
                .into_iter()
                .filter_map(|q| w.remove(&q).map(|l| (q, l)))
                .collect();
            for (q, list) in taken.drain(..) {
                if let Some(n) = flip(&q) {
                    moved.push(n.clone());
                    w.entry(n).or_default().extend(list);
                }
            }
        }
        {
            let mut guard = self.waiters.lock();
            let wt = &mut *guard;
            let keys: Vec<Vec<u8>> = wt
                .by_key
                .keys()
                .filter(|q| flip(q).is_some())
                .cloned()
                .collect();
            let taken: Vec<(Vec<u8>, Vec<u64>)> = keys
                .into_iter()
                .filter_map(|q| wt.by_key.remove(&q).map(|l| (q, l)))
                .collect();
            for (q, seqs) in taken {
                if let Some(n) = flip(&q) {
                    moved.push(n.clone());
                    wt.by_key.entry(n).or_default().extend(seqs);
                }
            }
            for t in wt.turns.values_mut() {
                for k in &mut t.keys {
                    if let Some(n) = flip(k) {
                        *k = n;
                    }
                }
            }
        }
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    /// Parks a client whose command arrived at `arrival` on `keys`: `wake` runs
    /// when one of them changes. Returns its place in the queue. It counts as woken
    /// until it has run once more (the caller wakes it at once: a change may have come
    /// between its run and this call), so a client that arrived later and is woken
    /// waits for it.
    pub(crate) fn wait(&self, id: u64, keys: &[Vec<u8>], wake: &WakeFn, arrival: u64) -> u64 {
        let mut w = self.waiters.lock();
        let seq = w.next;
        w.next += 1;
        for k in keys {
            self.active.fetch_add(1, Ordering::AcqRel);
            w.by_key.entry(k.clone()).or_default().push(seq);
        }
        self.woken.fetch_add(1, Ordering::AcqRel);
        w.turns.insert(
            seq,
            Turn {
                id,
                unblock: None,
                keys: keys.to_vec(),
                wake: wake.clone(),
                arrival,
                touched: false,
                woken: true,
                held: false,
            },
        );
        seq
    }

    /// True if a change by another command woke the client at `seq` since it parked.
    pub(crate) fn touched_turn(&self, seq: u64) -> bool {
        self.waiters
            .lock()
            .turns
            .get(&seq)
            .is_some_and(|t| t.touched)
    }

    /// Unparks the client at `seq` (served, timed out or gone).
    pub(crate) fn unwait(&self, seq: u64) {
        let released = {
            let mut w = self.waiters.lock();
            let Some(turn) = w.turns.remove(&seq) else {
                return;
            };
            if turn.woken {
                self.woken.fetch_sub(1, Ordering::AcqRel);
            }
            for k in &turn.keys {
                if let Some(list) = w.by_key.get_mut(k) {
                    let before = list.len();
                    list.retain(|s| *s != seq);
                    self.active.fetch_sub(before - list.len(), Ordering::AcqRel);
                    if list.is_empty() {
                        w.by_key.remove(k);
                    }
                }
            }
            Self::release_held(&mut w)
        };
        for f in released {
            f();
        }
    }

    /// May the woken client at `seq` run its command again now? False while an
    /// earlier woken client shares one of its keys; it is then woken again later.
    pub(crate) fn may_retry(&self, seq: u64) -> bool {
        let mut w = self.waiters.lock();
        let Some(turn) = w.turns.get(&seq) else {
            return true;
        };
        let me = (turn.arrival, seq);
        let blocked = w.turns.iter().any(|(&s, t)| {
            t.woken && (t.arrival, s) < me && t.keys.iter().any(|k| turn.keys.contains(k))
        });
        if blocked {
            if let Some(t) = w.turns.get_mut(&seq) {
                t.held = true;
            }
        }
        !blocked
    }

    /// CLIENT UNBLOCK: asks the parked client `id` to stop waiting (`error`: with
    /// an error instead of the timeout reply). False if it is not parked.
    pub(crate) fn unblock(&self, id: u64, error: bool) -> bool {
        let wake = {
            let mut w = self.waiters.lock();
            let Some(t) = w.turns.values_mut().find(|t| t.id == id) else {
                return false;
            };
            t.unblock = Some(error);
            t.wake.clone()
        };
        wake();
        true
    }

    /// Whether CLIENT UNBLOCK asked the client at `seq` to stop (`Some(error)`).
    pub(crate) fn unblocked(&self, seq: u64) -> Option<bool> {
        self.waiters.lock().turns.get(&seq).and_then(|t| t.unblock)
    }

    /// The client at `seq` ran again and is still parked.
    pub(crate) fn retried(&self, seq: u64) {
        let released = {
            let mut w = self.waiters.lock();
            if let Some(t) = w.turns.get_mut(&seq) {
                if t.woken {
                    self.woken.fetch_sub(1, Ordering::AcqRel);
                }
                t.woken = false;
            }
            Self::release_held(&mut w)
        };
        for f in released {
            f();
        }
    }

    /// Wake functions of the clients held back (they check their turn again).
    fn release_held(w: &mut Waiters) -> Vec<WakeFn> {
        w.turns
            .values_mut()
            .filter(|t| t.held)
            .map(|t| {
                t.held = false;
                t.wake.clone()
            })
            .collect()
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
            let mut guard = self.waiters.lock();
            let w = &mut *guard;
            let mut wakes = Vec::new();
            for k in keys {
                for seq in w.by_key.get(k).into_iter().flatten() {
                    if let Some(t) = w.turns.get_mut(seq) {
                        if !t.woken {
                            self.woken.fetch_add(1, Ordering::AcqRel);
                        }
                        t.woken = true;
                        t.touched = true;
                        wakes.push(t.wake.clone());
                    }
                }
            }
            wakes
        };
        for f in wakes {
            f();
        }
    }

    /// True if a parked client woken and not yet run again waits on one of `keys`.
    pub(crate) fn woken_on(&self, keys: &[&[u8]]) -> bool {
        if !self.any_woken() {
            return false;
        }
        let w = self.waiters.lock();
        w.turns
            .values()
            .any(|t| t.woken && t.keys.iter().any(|k| keys.contains(&k.as_slice())))
    }

    /// True while some parked client was woken and has not run again: a client whose
    /// write woke it gets its reply only after that (Redis serves blocked clients
    /// before the next command runs).
    pub(crate) fn any_woken(&self) -> bool {
        self.woken.load(Ordering::Acquire) > 0
    }

    /// Keys parked clients wait on (FLUSHDB wakes those that existed: a parked
    /// XREADGROUP must learn that its stream is gone).
    pub(crate) fn waited_keys(&self) -> Vec<Vec<u8>> {
        self.waiters.lock().by_key.keys().cloned().collect()
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
        let seq = n.wait(7, &[b"b".to_vec()], &wake, 1);
        // Its run right after parking found nothing.
        n.retried(seq);
        assert!(n.active());
        n.touched(&[b"c".to_vec()]);
        assert!(!dirty.load(Ordering::Relaxed));
        n.touched(&[b"a".to_vec(), b"b".to_vec()]);
        assert!(dirty.load(Ordering::Relaxed));
        assert_eq!(woken.load(Ordering::Relaxed), 1);
        n.unwatch(1, &[b"a".to_vec()]);
        n.unwait(seq);
        assert!(!n.active());
    }

    #[test]
    fn woken_clients_run_in_park_order() {
        let n = Notify::default();
        let count = Arc::new(AtomicUsize::new(0));
        let c2 = count.clone();
        let wake: WakeFn = Arc::new(move || {
            c2.fetch_add(1, Ordering::Relaxed);
        });
        let first = n.wait(7, &[b"k".to_vec()], &wake, 10);
        let second = n.wait(7, &[b"k".to_vec(), b"j".to_vec()], &wake, 10);
        let other = n.wait(7, &[b"x".to_vec()], &wake, 5);
        // Each ran once more after parking and found nothing.
        for s in [first, second, other] {
            n.retried(s);
        }
        assert!(!n.any_woken());
        let before = count.load(Ordering::Relaxed);
        n.touched(&[b"k".to_vec()]);
        assert_eq!(count.load(Ordering::Relaxed), before + 2);
        assert!(n.touched_turn(first) && !n.touched_turn(other));
        // The second must wait for the first; an unrelated key is free.
        assert!(!n.may_retry(second));
        assert!(n.may_retry(other));
        assert!(n.may_retry(first));
        assert!(n.any_woken());
        // The first ran and parked again: the second is woken to try again.
        n.retried(first);
        assert_eq!(count.load(Ordering::Relaxed), before + 3);
        assert!(n.may_retry(second));
        n.unwait(first);
        n.unwait(second);
        n.unwait(other);
        assert!(!n.any_woken());
        assert!(!n.active());
    }

    /// A client whose command arrived first but whose worker parked it after a later
    /// one (that worker was not yet running) is served first: it counts as woken
    /// from its parking, and order is by arrival.
    #[test]
    fn arrival_order_beats_park_order() {
        let n = Notify::default();
        let wake: WakeFn = Arc::new(|| {});
        let late = n.wait(2, &[b"k".to_vec()], &wake, 200);
        n.retried(late);
        n.touched(&[b"k".to_vec()]);
        let early = n.wait(1, &[b"k".to_vec()], &wake, 100);
        assert!(!n.may_retry(late), "the earlier arrival goes first");
        assert!(n.may_retry(early));
        n.unwait(early);
        assert!(n.may_retry(late));
        n.unwait(late);
        assert!(!n.active());
    }
}
