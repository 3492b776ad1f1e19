//! Group commit across the workers of a server started with `--durability sync`
//! (issue #30 item 2): workers never wait for a persist. A worker that served a round
//! asks for a *ticket* and holds the round's replies; persister threads (`flushers`,
//! bound to the shared log slot like the workers) each take every ticket asked for so
//! far, persist the shared log once (`Db::sync_thread`), publish `done` = the highest
//! ticket they took and wake the workers waiting for it; a worker then sends the
//! replies of every held round whose ticket is done.
//!
//! Why: a worker blocked in a persist (or waiting for the one in flight) reads
//! nothing, so each persist used to cover one worker's round of whatever had arrived
//! when it polled — 13–15 writes per device flush with 50 clients on two workers
//! (docs/benchmarks.md, session 11), against Redis's ~25 (one `fsync` per event-loop
//! turn). Here workers keep reading and executing while a persist runs, so the next
//! persist covers every request that arrived meanwhile, on every worker; and with
//! more than one persister the device serves several flushes at once (design.md §10).
//!
//! Invariants:
//! * a ticket is asked for after its round's commands ran, so everything the round
//!   wrote — and every write of another worker it could have read, which was in the
//!   shared log before the read — is in the log before the persister that takes the
//!   ticket calls `sync_thread`, which makes everything in the log then durable;
//!   hence a held reply goes out only when nothing it reveals can be lost (design.md
//!   §10's rule);
//! * `done` only grows: a persister that took ticket `t` and returns covers every
//!   ticket `<= t` (each was asked for before it began), whichever persister took them;
//! * a worker records the ticket it waits for *under the lock* that a persister takes
//!   to wake the waiting workers, so a wake-up is never lost (a mio `Waker` is sticky:
//!   a wake before the worker polls makes its next poll return at once).
//!
//! Shared state: everything in [`State`] is guarded by `state`'s mutex; `work` wakes
//! the persisters.

use std::sync::Arc;

use mio::Waker;
use parking_lot::{Condvar, Mutex};

/// What the workers and persisters share.
#[derive(Debug, Default)]
struct State {
    /// The last ticket handed out.
    asked: u64,
    /// The last ticket a persister took.
    taken: u64,
    /// Every ticket up to this one is covered by a finished persist.
    done: u64,
    /// Tickets up to this one were covered by a persist that failed.
    failed: u64,
    /// Per lane: the ticket the worker waits for (0: none).
    waiting: Vec<u64>,
    /// Per lane: the worker's poll waker.
    wakers: Vec<Option<Arc<Waker>>>,
    /// Persisters stop once nothing is asked for.
    stop: bool,
}

/// The workers' shared group commit.
#[derive(Debug)]
pub(crate) struct Commit {
    state: Mutex<State>,
    work: Condvar,
}

/// Where a worker's held rounds stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Progress {
    /// Every ticket up to this one is durable (or failed).
    pub(crate) done: u64,
    /// Every ticket up to this one failed to persist.
    pub(crate) failed: u64,
}

impl Commit {
    /// For `workers` workers.
    pub(crate) fn new(workers: usize) -> Commit {
        let n = workers.max(1);
        Commit {
            state: Mutex::new(State {
                waiting: vec![0; n],
                wakers: vec![None; n],
                ..State::default()
            }),
            work: Condvar::new(),
        }
    }

    /// Registers worker `lane`'s waker (once, when it starts).
    pub(crate) fn enter(&self, lane: usize, waker: Arc<Waker>) {
        let mut g = self.state.lock();
        if let Some(w) = g.wakers.get_mut(lane) {
            *w = Some(waker);
        }
    }

    /// Worker `lane` served a round: its ticket. The worker is woken when the ticket is
    /// done (or an older one it waits for is).
    pub(crate) fn ask(&self, lane: usize) -> u64 {
        let mut g = self.state.lock();
        g.asked += 1;
        let t = g.asked;
        if let Some(w) = g.waiting.get_mut(lane) {
            if *w == 0 {
                *w = t;
            }
        }
        self.work.notify_one();
        t
    }

    /// Where tickets stand.
    pub(crate) fn progress(&self) -> Progress {
        let g = self.state.lock();
        Progress {
            done: g.done,
            failed: g.failed,
        }
    }

    /// Worker `lane` still holds a round with ticket `t`: `true` if it is done
    /// already, else the worker is woken when it is.
    pub(crate) fn wait_for(&self, lane: usize, t: u64) -> bool {
        let mut g = self.state.lock();
        if g.done >= t {
            return true;
        }
        if let Some(w) = g.waiting.get_mut(lane) {
            *w = t;
        }
        false
    }

    /// A persister's loop: takes every ticket asked for, runs `persist` (which makes
    /// everything in the shared log durable), publishes the result; returns after
    /// [`Commit::stop`] once nothing is left to take.
    pub(crate) fn run_persister(&self, mut persist: impl FnMut() -> bool) {
        let mut g = self.state.lock();
        loop {
            if g.taken < g.asked {
                let upto = g.asked;
                g.taken = upto;
                let ok = parking_lot::MutexGuard::unlocked(&mut g, &mut persist);
                if !ok {
                    g.failed = g.failed.max(upto);
                }
                g.done = g.done.max(upto);
                let done = g.done;
                let State {
                    waiting, wakers, ..
                } = &mut *g;
                for (w, k) in waiting.iter_mut().zip(wakers.iter()) {
                    if *w != 0 && *w <= done {
                        *w = 0;
                        if let Some(k) = k {
                            let _ = k.wake();
                        }
                    }
                }
                continue;
            }
            if g.stop {
                return;
            }
            self.work.wait(&mut g);
        }
    }

    /// Persisters return once every ticket asked for is taken.
    pub(crate) fn stop(&self) {
        self.state.lock().stop = true;
        self.work.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    #[test]
    fn a_held_round_is_done_only_after_a_persist_that_began_after_its_ticket() {
        let commit = Arc::new(Commit::new(2));
        let mut poll = Poll::new().expect("test");
        let waker = Arc::new(Waker::new(poll.registry(), Token(7)).expect("test"));
        commit.enter(1, waker);
        // A "log" whose appends become durable only when a persist starts after them.
        let appended = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let persister = {
            let (commit, appended, durable) = (commit.clone(), appended.clone(), durable.clone());
            std::thread::spawn(move || {
                commit.run_persister(|| {
                    let at = appended.load(Ordering::SeqCst);
                    let _ = gate_rx.recv(); // the persist takes as long as the test says
                    durable.store(at, Ordering::SeqCst);
                    true
                });
            })
        };
        appended.store(1, Ordering::SeqCst);
        let t1 = commit.ask(1);
        // The persister took t1 and is persisting; a second round arrives meanwhile.
        std::thread::sleep(Duration::from_millis(20));
        appended.store(2, Ordering::SeqCst);
        let t2 = commit.ask(1);
        assert!(t2 > t1);
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_millis(20)))
            .expect("test");
        assert!(events.is_empty(), "woken before any persist ended");
        gate_tx.send(()).expect("test");
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .expect("test");
        assert!(events.iter().any(|e| e.token() == Token(7)), "not woken");
        let p = commit.progress();
        assert!(p.done >= t1 && p.done < t2, "{p:?}");
        assert_eq!(durable.load(Ordering::SeqCst), 1);
        assert!(!commit.wait_for(1, t2), "t2 is not durable yet");
        gate_tx.send(()).expect("test");
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .expect("test");
        assert!(
            events.iter().any(|e| e.token() == Token(7)),
            "not woken for t2"
        );
        assert!(commit.wait_for(1, t2));
        assert_eq!(durable.load(Ordering::SeqCst), 2);
        assert_eq!(commit.progress().failed, 0);
        commit.stop();
        persister.join().expect("test");
    }

    #[test]
    fn a_failed_persist_fails_the_tickets_it_took() {
        let commit = Arc::new(Commit::new(1));
        let t = commit.ask(0);
        let c = commit.clone();
        let persister = std::thread::spawn(move || c.run_persister(|| false));
        while commit.progress().done < t {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(commit.progress(), Progress { done: t, failed: t });
        commit.stop();
        persister.join().expect("test");
    }
}
