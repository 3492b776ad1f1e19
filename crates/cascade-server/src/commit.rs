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
//! A round of keyed reads whose newest visible write is durable already needs no
//! ticket (`visible.rs`); one whose newest visible write is covered by a persist
//! that has *begun* (`started`) waits for that persist's end (`settled`) instead of
//! asking for another.
//!
//! A worker runs the persist itself ([`Commit::ask_inline`]) when the recent ones were
//! short, even while another worker's runs: on a fast device the hand-off to a
//! persister thread and back costs more than the worker's wait, and a worker blocked
//! in its persist lets requests gather for its next round, as Redis's event loop does
//! in its `fsync`. Slow persists go to the threads, so the workers serve meanwhile.
//! The persist is the same code either way, so every invariant below holds for both.
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
//! * a persister reads the last write number `g0` (`Seqs::last`) under `state`'s lock
//!   before it persists: `started` and `settled` only grow, every write numbered `<=
//!   started` is covered by a persist that has begun, and every one `<= settled` by one
//!   that has ended (and is durable unless that persist failed);
//! * a worker records what it waits for (a ticket, a write number) *under the lock*
//!   that a persister takes to wake the waiting workers, so a wake-up is never lost (a
//!   mio `Waker` is sticky: a wake before the worker polls makes its next poll return
//!   at once).
//!
//! Shared state: everything in [`State`] is guarded by `state`'s mutex; `work` wakes
//! the persisters. The durable write number itself is an atomic in `visible::Seqs`.

use std::sync::Arc;
use std::time::Instant;

use mio::Waker;
use parking_lot::{Condvar, Mutex};

use crate::visible::Seqs;

/// A worker runs the persist itself when none is running and recent ones took less
/// than this (µs; [`Commit::ask_inline`]).
const INLINE_BELOW_US: u64 = 500;

/// What one worker waits for (0: nothing).
#[derive(Debug, Default, Clone, Copy)]
struct Wait {
    ticket: u64,
    seq: u64,
}

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
    /// Writes numbered up to this one are covered by a persist that has begun.
    started: u64,
    /// Writes numbered up to this one are covered by a persist that has ended.
    settled: u64,
    /// The largest write number a persist that *failed* covered (0: none failed).
    settled_failed: u64,
    /// Persists run so far.
    persists: u64,
    /// Of those, persists a worker ran itself ([`Commit::ask_inline`]).
    inline: u64,
    /// Persists running now (on persister threads or inline).
    running: usize,
    /// Moving average of a persist's duration in µs (0: none measured yet).
    persist_us: u64,
    /// Per lane: what the worker waits for.
    waiting: Vec<Wait>,
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
    /// Every write numbered up to this one was covered by a persist that ended.
    pub(crate) settled: u64,
    /// A persist that covered the writes numbered up to this one failed (0: none did):
    /// reads held for such a write must not be answered.
    pub(crate) settled_failed: u64,
}

impl Commit {
    /// For `workers` workers.
    pub(crate) fn new(workers: usize) -> Commit {
        let n = workers.max(1);
        Commit {
            state: Mutex::new(State {
                waiting: vec![Wait::default(); n],
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

    /// A worker served a round: its ticket. It is done once a persist that began
    /// after this call has ended ([`Commit::wait_for`] asks to be woken then).
    #[cfg(test)]
    pub(crate) fn ask(&self) -> u64 {
        let mut g = self.state.lock();
        g.asked += 1;
        let t = g.asked;
        self.work.notify_one();
        t
    }

    /// [`Commit::ask`], and if recent persists were short (under [`INLINE_BELOW_US`]),
    /// runs one on the calling worker at once, whether or not another is running (the
    /// device serves several): its ticket is then done when this returns. A hand-off
    /// to a persister thread costs two wake-ups per persist, which on a fast device and
    /// a busy CPU cost more than the worker's wait (measured: docs/benchmarks.md,
    /// 2026-12-04, sessions 13 and 14); slow persists (ms) all go to the threads, which
    /// let the workers serve meanwhile. `persist` must persist the shared log, as the
    /// persisters' does.
    pub(crate) fn ask_inline(&self, seqs: &Seqs, persist: impl FnMut() -> bool) -> u64 {
        let mut g = self.state.lock();
        g.asked += 1;
        let t = g.asked;
        if g.persist_us != 0 && g.persist_us < INLINE_BELOW_US {
            g.inline += 1;
            Self::persist_taken(&mut g, seqs, persist);
        } else {
            self.work.notify_one();
        }
        t
    }

    /// Whether a persist that has begun covers the write numbered `seq`: a round
    /// that read nothing newer may wait for it instead of asking for a ticket.
    pub(crate) fn covering(&self, seq: u64) -> bool {
        let g = self.state.lock();
        g.started >= seq || g.settled >= seq
    }

    /// Where tickets stand.
    pub(crate) fn progress(&self) -> Progress {
        let g = self.state.lock();
        Progress {
            done: g.done,
            failed: g.failed,
            settled: g.settled,
            settled_failed: g.settled_failed,
        }
    }

    /// Moving average of a persist's duration, µs (0: none measured yet).
    pub(crate) fn recent_persist_us(&self) -> u64 {
        self.state.lock().persist_us
    }

    /// Persists run so far, and how many of them a worker ran itself (INFO).
    pub(crate) fn persists(&self) -> (u64, u64) {
        let g = self.state.lock();
        (g.persists, g.inline)
    }

    /// Worker `lane` still holds rounds waiting for ticket `ticket` or for the write
    /// numbered `seq` (0: none of that kind): `true` if one of them is met already,
    /// else the worker is woken when one is.
    pub(crate) fn wait_for(&self, lane: usize, ticket: u64, seq: u64) -> bool {
        let mut g = self.state.lock();
        if (ticket != 0 && g.done >= ticket) || (seq != 0 && g.settled >= seq) {
            return true;
        }
        if let Some(w) = g.waiting.get_mut(lane) {
            *w = Wait { ticket, seq };
        }
        false
    }

    /// A persister's loop: takes every ticket asked for, runs `persist` (which makes
    /// everything in the shared log durable), publishes the result — the tickets it
    /// took, and the write number `seqs` had before it began; returns after
    /// [`Commit::stop`] once nothing is left to take.
    pub(crate) fn run_persister(&self, seqs: &Seqs, mut persist: impl FnMut() -> bool) {
        let mut g = self.state.lock();
        loop {
            if g.taken < g.asked {
                Self::persist_taken(&mut g, seqs, &mut persist);
                continue;
            }
            if g.stop {
                return;
            }
            self.work.wait(&mut g);
        }
    }

    /// Takes every ticket asked for and runs `persist` without the lock, then
    /// publishes the result — the tickets it took, and the write number `seqs` had
    /// before it began — and wakes the workers it satisfied. Called with the lock held
    /// and `taken < asked`, by a persister thread or inline by a worker.
    fn persist_taken(
        g: &mut parking_lot::MutexGuard<'_, State>,
        seqs: &Seqs,
        mut persist: impl FnMut() -> bool,
    ) {
        let upto = g.asked;
        g.taken = upto;
        // Before the persist: every write numbered up to g0 is in the log.
        let g0 = seqs.last();
        g.started = g.started.max(g0);
        g.running += 1;
        let t0 = Instant::now();
        let ok = parking_lot::MutexGuard::unlocked(g, &mut persist);
        let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
        g.persist_us = if g.persist_us == 0 {
            us.max(1)
        } else {
            (g.persist_us.saturating_mul(7).saturating_add(us) / 8).max(1)
        };
        g.running -= 1;
        if ok {
            seqs.persisted(g0);
        } else {
            g.failed = g.failed.max(upto);
            g.settled_failed = g.settled_failed.max(g0);
        }
        g.persists += 1;
        g.done = g.done.max(upto);
        g.settled = g.settled.max(g0);
        let (done, settled) = (g.done, g.settled);
        let State {
            waiting, wakers, ..
        } = &mut **g;
        for (w, k) in waiting.iter_mut().zip(wakers.iter()) {
            let met = (w.ticket != 0 && w.ticket <= done) || (w.seq != 0 && w.seq <= settled);
            if met {
                *w = Wait::default();
                if let Some(k) = k {
                    let _ = k.wake();
                }
            }
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

    /// A worker's poll with a registered waker.
    fn worker(commit: &Commit, lane: usize) -> Poll {
        let poll = Poll::new().expect("test");
        let waker = Arc::new(Waker::new(poll.registry(), Token(7)).expect("test"));
        commit.enter(lane, waker);
        poll
    }

    fn woken(poll: &mut Poll, within: Duration) -> bool {
        let mut events = Events::with_capacity(4);
        poll.poll(&mut events, Some(within)).expect("test");
        events.iter().any(|e| e.token() == Token(7))
    }

    #[test]
    fn a_held_round_is_done_only_after_a_persist_that_began_after_its_ticket() {
        let commit = Arc::new(Commit::new(2));
        let seqs = Arc::new(Seqs::new(4));
        let mut poll = worker(&commit, 1);
        // A "log" whose appends become durable only when a persist starts after them.
        let appended = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let persister = {
            let (commit, seqs) = (commit.clone(), seqs.clone());
            let (appended, durable) = (appended.clone(), durable.clone());
            std::thread::spawn(move || {
                commit.run_persister(&seqs, || {
                    let at = appended.load(Ordering::SeqCst);
                    let _ = gate_rx.recv(); // the persist takes as long as the test says
                    durable.store(at, Ordering::SeqCst);
                    true
                });
            })
        };
        appended.store(1, Ordering::SeqCst);
        let t1 = commit.ask();
        assert!(!commit.wait_for(1, t1, 0));
        // The persister took t1 and is persisting; a second round arrives meanwhile.
        std::thread::sleep(Duration::from_millis(20));
        appended.store(2, Ordering::SeqCst);
        let t2 = commit.ask();
        assert!(t2 > t1);
        assert!(
            !woken(&mut poll, Duration::from_millis(20)),
            "woken before any persist ended"
        );
        gate_tx.send(()).expect("test");
        assert!(woken(&mut poll, Duration::from_secs(5)), "not woken");
        let p = commit.progress();
        assert!(p.done >= t1 && p.done < t2, "{p:?}");
        assert_eq!(durable.load(Ordering::SeqCst), 1);
        assert!(!commit.wait_for(1, t2, 0), "t2 is not durable yet");
        gate_tx.send(()).expect("test");
        assert!(woken(&mut poll, Duration::from_secs(5)), "not woken for t2");
        assert!(commit.wait_for(1, t2, 0));
        assert_eq!(durable.load(Ordering::SeqCst), 2);
        assert_eq!(commit.progress().failed, 0);
        assert_eq!(commit.persists(), (2, 0));
        commit.stop();
        persister.join().expect("test");
    }

    #[test]
    fn a_read_waits_for_the_persist_that_began_after_its_write_not_for_a_new_one() {
        let commit = Arc::new(Commit::new(1));
        let seqs = Arc::new(Seqs::new(4));
        seqs.enable();
        let mut poll = worker(&commit, 0);
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let persister = {
            let (commit, seqs) = (commit.clone(), seqs.clone());
            std::thread::spawn(move || {
                commit.run_persister(&seqs, || gate_rx.recv().is_ok());
            })
        };
        seqs.wrote(); // write 1 (no stripe held: on the floor)
        assert!(!commit.covering(1), "no persist has begun");
        let t1 = commit.ask();
        while !commit.covering(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
        seqs.wrote(); // write 2, after the persist began
        assert!(
            !commit.covering(2),
            "the running persist does not cover write 2"
        );
        // A reader of write 1 waits for the running persist, without a ticket.
        assert!(!commit.wait_for(0, 0, 1));
        assert_eq!(seqs.durable(), 0);
        assert!(
            !woken(&mut poll, Duration::from_millis(20)),
            "woken before the persist ended"
        );
        gate_tx.send(()).expect("test");
        assert!(
            woken(&mut poll, Duration::from_secs(5)),
            "the reader was not woken"
        );
        assert_eq!(seqs.durable(), 1, "write 2 is not durable");
        let p = commit.progress();
        assert_eq!((p.done, p.settled), (t1, 1));
        assert!(commit.wait_for(0, 0, 1));
        assert!(!commit.wait_for(0, 0, 2));
        assert_eq!(commit.persists(), (1, 0), "the reader asked for no persist");
        drop(gate_tx);
        commit.stop();
        persister.join().expect("test");
    }

    #[test]
    fn a_worker_persists_inline_only_when_recent_persists_were_short() {
        for (pause, inline) in [(Duration::ZERO, true), (Duration::from_millis(50), false)] {
            let commit = Arc::new(Commit::new(1));
            let seqs = Arc::new(Seqs::new(1));
            let ran = AtomicU64::new(0);
            let count = || {
                ran.fetch_add(1, Ordering::SeqCst);
                true
            };
            // Nothing measured yet: the ticket goes to a persister thread.
            let t1 = commit.ask_inline(&seqs, count);
            assert_eq!(ran.load(Ordering::SeqCst), 0);
            let (c, s) = (commit.clone(), seqs.clone());
            let persister = std::thread::spawn(move || {
                c.run_persister(&s, || {
                    std::thread::sleep(pause);
                    true
                });
            });
            while commit.progress().done < t1 {
                std::thread::sleep(Duration::from_millis(1));
            }
            // Measured: a short persist runs on the asking worker, done when it
            // returns; a long one goes to the thread, which is still in it (50 ms).
            let t2 = commit.ask_inline(&seqs, count);
            assert_eq!(ran.load(Ordering::SeqCst), u64::from(inline), "{pause:?}");
            assert_eq!(commit.progress().done >= t2, inline, "{pause:?}");
            commit.stop();
            persister.join().expect("test");
            assert_eq!(commit.progress().done, t2);
            assert_eq!(commit.persists(), (2, u64::from(inline)));
        }
    }

    #[test]
    fn a_short_persist_runs_inline_while_another_worker_s_persist_runs() {
        let commit = Arc::new(Commit::new(2));
        let seqs = Arc::new(Seqs::new(1));
        // The persister's first persist is short (it sets the measure), its second
        // blocks until the test lets it go.
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let (c, s) = (commit.clone(), seqs.clone());
        let persister = std::thread::spawn(move || {
            let mut first = true;
            c.run_persister(&s, || {
                if !std::mem::take(&mut first) {
                    let _ = gate_rx.recv();
                }
                true
            });
        });
        let t1 = commit.ask();
        while commit.progress().done < t1 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Measured: under a millisecond. Without one running, the next ticket would go
        // inline; `ask` hands it to the thread, which blocks in it.
        let t2 = commit.ask();
        while commit.state.lock().running == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let ran = AtomicU64::new(0);
        let t3 = commit.ask_inline(&seqs, || {
            ran.fetch_add(1, Ordering::SeqCst);
            true
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1, "did not run inline");
        // It began after t2 was asked for, so it covers t2 as well as its own ticket.
        assert!(commit.progress().done >= t3 && t3 > t2);
        assert_eq!(commit.persists(), (2, 1));
        gate_tx.send(()).expect("test");
        commit.stop();
        persister.join().expect("test");
        assert_eq!(commit.progress().done, t3, "done only grows");
    }

    #[test]
    fn a_failed_persist_fails_the_tickets_it_took_and_marks_nothing_durable() {
        let commit = Arc::new(Commit::new(1));
        let seqs = Arc::new(Seqs::new(1));
        seqs.enable();
        seqs.wrote();
        let t = commit.ask();
        let (c, s) = (commit.clone(), seqs.clone());
        let persister = std::thread::spawn(move || c.run_persister(&s, || false));
        while commit.progress().done < t {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            commit.progress(),
            Progress {
                done: t,
                failed: t,
                settled: 1,
                settled_failed: 1
            }
        );
        assert_eq!(seqs.durable(), 0);
        commit.stop();
        persister.join().expect("test");
    }
}
