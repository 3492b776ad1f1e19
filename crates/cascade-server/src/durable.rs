//! The reply barrier of `--durability sync`: no reply leaves a worker before every
//! write it could have read is durable — the guarantee Redis' `appendfsync always`
//! gives by sending replies only after the event loop's `fsync`.
//!
//! A server *started* with `--durability sync` needs no lanes: its workers share one
//! engine log (`cascadekv::set_thread_log_slot`), and a round's replies wait for a
//! persist of that log that began after the round (`commit.rs`'s persister threads,
//! or with `--sync-persisters 0` the worker's own `Db::sync_thread` at the round's
//! end, pipelined: it waits for a running persist that covers it), which covers every
//! write the round could have read (and a round of keyed reads of durable writes
//! needs none, `visible.rs`). The lanes below
//! serve a server switched to sync at run time (`CONFIG SET appendfsync always`),
//! whose workers keep logs of their own.
//!
//! Each worker makes its own round's writes durable (one persist of its log, the
//! round's group commit) before replying. But a worker reads what the *other* workers
//! wrote as soon as they indexed it, before their persist: without this barrier a GET
//! on one worker could reply with a value whose SET, on another worker, is lost by a
//! crash a moment later. So:
//!
//! * every worker owns a [`Lane`]: `issued` counts the write commands it started
//!   (bumped by [`note_write`] *before* the write reaches the engine, so a write
//!   another thread can see is already counted), `durable` the ones its persists
//!   covered;
//! * at the end of a round a worker persists its log if it wrote, publishes
//!   `durable = issued` as it read it before the persist ([`Gate::round_done`]), and
//!   then, in sync mode, waits until every other lane's `durable` reaches the
//!   `issued` it reads now ([`Gate::wait_others`]) — only then does it write replies.
//!
//! No deadlock: a worker publishes its own lane before it waits, and never waits
//! inside a command (it holds no stripe lock). A lane whose worker is idle has
//! `durable == issued`, so it costs nothing; a worker in the middle of a round delays
//! the others' replies by at most that round and its persist.
//!
//! Threads without a lane (the expiry sweeper, tests) are not counted: what they write
//! (deletes of expired keys) is already invisible to reads.
//!
//! Shared state: the lanes' counters are atomics; `lock` + `cv` only carry wake-ups.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// One worker's counters.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Lane {
    issued: AtomicU64,
    durable: AtomicU64,
    /// Rounds begun (odd while one is being served): the shared-log rendezvous.
    rounds: AtomicU64,
}

thread_local! {
    static MINE: RefCell<Option<Arc<Lane>>> = const { RefCell::new(None) };
}

/// Counts a write command of the calling worker; called before the write is applied.
pub(crate) fn note_write() {
    MINE.with(|m| {
        if let Some(l) = m.borrow().as_ref() {
            l.issued.fetch_add(1, Ordering::SeqCst);
        }
    });
}

/// Every worker's lane.
#[derive(Debug)]
pub(crate) struct Gate {
    lanes: Box<[Arc<Lane>]>,
    lock: Mutex<()>,
    cv: Condvar,
    stop: AtomicBool,
}

impl Gate {
    /// A gate for `workers` workers.
    pub(crate) fn new(workers: usize) -> Gate {
        Gate {
            lanes: (0..workers.max(1)).map(|_| Arc::default()).collect(),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    /// Makes lane `i` the calling thread's (a worker, once, when it starts).
    pub(crate) fn enter(&self, i: usize) {
        let lane = self.lanes.get(i).cloned();
        MINE.with(|m| *m.borrow_mut() = lane);
    }

    /// The calling worker's count of write commands started so far: read it before
    /// persisting, hand it to [`Gate::round_done`] after.
    pub(crate) fn issued(&self, i: usize) -> u64 {
        self.lanes
            .get(i)
            .map_or(0, |l| l.issued.load(Ordering::SeqCst))
    }

    /// Whether lane `i` started writes (up to `issued`) its persists did not cover yet
    /// (a command not flagged as a write may still write: a lazily expired key).
    pub(crate) fn behind(&self, i: usize, issued: u64) -> bool {
        self.lanes
            .get(i)
            .is_some_and(|l| l.durable.load(Ordering::SeqCst) < issued)
    }

    /// Lane `i`'s writes up to `upto` (from [`Gate::issued`] before its persist) are
    /// durable (or the lane wrote nothing since): wakes workers waiting for it.
    pub(crate) fn round_done(&self, i: usize, upto: u64) {
        let Some(l) = self.lanes.get(i) else {
            return;
        };
        if l.durable.load(Ordering::SeqCst) >= upto {
            return;
        }
        l.durable.store(upto, Ordering::SeqCst);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    /// Waits until every lane but `i` made durable the writes it had started when this
    /// is called (so whatever worker `i` read of theirs this round is durable).
    pub(crate) fn wait_others(&self, i: usize) {
        for (j, l) in self.lanes.iter().enumerate() {
            if j == i {
                continue;
            }
            let want = l.issued.load(Ordering::SeqCst);
            if l.durable.load(Ordering::SeqCst) >= want {
                continue;
            }
            let mut g = self.lock.lock();
            while l.durable.load(Ordering::SeqCst) < want && !self.stop.load(Ordering::SeqCst) {
                // The timeout only bounds the cost of a missed wake-up.
                self.cv.wait_for(&mut g, Duration::from_millis(5));
            }
        }
    }

    /// Worker `i` begins serving a round (shared log: see [`Gate::rendezvous`]).
    pub(crate) fn round_begins(&self, i: usize) {
        if let Some(l) = self.lanes.get(i) {
            l.rounds.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Worker `i` ended its round's commands (its replies may still wait for a
    /// persist, `commit.rs`): a worker in [`Gate::rendezvous`] stops waiting for it.
    pub(crate) fn round_ends(&self, i: usize) {
        if let Some(l) = self.lanes.get(i) {
            l.rounds.fetch_add(1, Ordering::SeqCst);
        }
        let _g = self.lock.lock();
        self.cv.notify_all();
    }

    /// Worker `i` ended its round's commands; before it persists the shared log it
    /// waits until every other worker that is in the middle of a round ends that round
    /// (not the ones after), so that one fence covers both rounds instead of two
    /// fences one after the other covering half as much each (group commit across
    /// workers). Bounded by one round of each other worker; a worker between rounds is
    /// not waited for.
    pub(crate) fn rendezvous(&self, i: usize) {
        self.round_ends(i);
        for (j, l) in self.lanes.iter().enumerate() {
            if j == i {
                continue;
            }
            let at = l.rounds.load(Ordering::SeqCst);
            if at % 2 == 0 {
                continue;
            }
            let mut g = self.lock.lock();
            while l.rounds.load(Ordering::SeqCst) == at && !self.stop.load(Ordering::SeqCst) {
                self.cv.wait_for(&mut g, Duration::from_millis(1));
            }
        }
    }

    /// Releases every waiter for good (shutdown: workers stop serving rounds).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _g = self.lock.lock();
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_waits_for_the_writers_persist() {
        let gate = Arc::new(Gate::new(2));
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                gate.enter(0);
                note_write();
                note_write();
                let upto = gate.issued(0);
                let _ = tx.send(());
                std::thread::sleep(Duration::from_millis(50)); // "persisting"
                gate.round_done(0, upto);
            })
        };
        gate.enter(1);
        let _ = rx.recv();
        let t = std::time::Instant::now();
        gate.wait_others(1);
        assert!(t.elapsed() >= Duration::from_millis(40), "did not wait");
        assert_eq!(gate.lanes[0].durable.load(Ordering::SeqCst), 2);
        let _ = writer.join();
        // Nothing outstanding: no wait.
        let t = std::time::Instant::now();
        gate.wait_others(1);
        assert!(t.elapsed() < Duration::from_millis(40));
        // A thread without a lane is not counted.
        std::thread::spawn(note_write).join().ok();
        assert_eq!(gate.issued(0), 2);
    }
}
