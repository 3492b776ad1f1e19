//! Where each worker's event loop is, so that a blocked client woken right after it
//! parked can give the other workers a moment to park clients whose commands arrived
//! before its own.
//!
//! Redis serves blocked clients in the order their commands arrived: its one event
//! loop reads them in that order. Here parked clients are ordered by the kernel's
//! receive time of their commands (`notify.rs`), but a client is only in that order
//! once its worker has read and parked it. Two clients that send `BRPOPLPUSH src dst 0`
//! one after the other, then a third that pushes to `src`: the first client's worker
//! may not be running yet (on two CPUs shared with the clients this is common) while
//! the other worker parks the second client, runs the push and would serve the second
//! client. Redis's own suite depends on this order without waiting for the clients to
//! block ("BRPOPLPUSH with multiple blocked clients" then hangs, and the rest of its
//! unit with it).
//!
//! So a parked client that another command woke within [`RECENT`] of its parking
//! first waits, once and at most [`GRACE`], until every other worker has taken in
//! everything that arrived before the client's own command: a worker is caught up
//! with time `t` once it went idle (into its poll) after `t` — input from before `t`
//! would have kept it from idling — or finished a round that began after `t`. A worker
//! that is itself in such a wait is not waited for. The times are the clock the
//! kernel stamps arrivals with (`CLOCK_REALTIME`, ns). A producer and a consumer
//! handing elements back and forth do not wait (the producer's worker went idle after
//! the consumer's command arrived); a client whose command arrived just before a
//! busy worker's round began waits for that round. Arrival order across connections
//! is not a Redis guarantee (two sockets have none); this makes the common case come
//! out as one loop would serve it.
//!
//! Each lane's fields are atomics written by its own worker only (`idle_since`,
//! `began`, `waiting`); any worker reads them. No lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest a woken client waits for the other workers.
pub(crate) const GRACE: Duration = Duration::from_micros(250);
/// How long the wait yields the CPU before it sleeps.
const SPIN: Duration = Duration::from_micros(20);
/// A client woken within this of its parking waits for the other workers first.
pub(crate) const RECENT: Duration = Duration::from_millis(1);

/// One worker's place.
#[derive(Debug, Default)]
struct Lane {
    /// When it went into its poll (ns since the epoch); 0 while it runs a round.
    idle_since: AtomicU64,
    /// When its last finished round began.
    began: AtomicU64,
    /// In [`Presence::let_others_catch_up`]: the others need not wait for it.
    waiting: AtomicBool,
}

/// Every worker's place (one lane per worker, by its index).
#[derive(Debug)]
pub(crate) struct Presence {
    lanes: Vec<Lane>,
}

impl Presence {
    /// Lanes for `workers` workers.
    pub(crate) fn new(workers: usize) -> Presence {
        Presence {
            lanes: (0..workers).map(|_| Lane::default()).collect(),
        }
    }

    /// Worker `lane` goes into its poll at `now` (ns since the epoch).
    pub(crate) fn idle(&self, lane: usize, now: u64) {
        if let Some(l) = self.lanes.get(lane) {
            l.idle_since.store(now, Ordering::Release);
        }
    }

    /// Worker `lane` came out of its poll: a round begins.
    pub(crate) fn busy(&self, lane: usize) {
        if let Some(l) = self.lanes.get(lane) {
            l.idle_since.store(0, Ordering::Release);
        }
    }

    /// Worker `lane` finished a round that began at `began`.
    pub(crate) fn round_done(&self, lane: usize, began: u64) {
        if let Some(l) = self.lanes.get(lane) {
            l.began.store(began, Ordering::Release);
        }
    }

    /// Returns once every worker but `lane` has caught up with time `t` (ns since the
    /// epoch) or waits here itself, or after [`GRACE`].
    pub(crate) fn let_others_catch_up(&self, lane: usize, t: u64) {
        let Some(me) = self.lanes.get(lane) else {
            return;
        };
        if self.lanes.len() < 2 || !self.behind(lane, t) {
            return;
        }
        me.waiting.store(true, Ordering::Release);
        let start = Instant::now();
        // Mostly the wait is for a round to end (microseconds): yield first (a sleep
        // lasts ~60 µs here whatever it asks for). Then sleep: a worker that is not
        // running yet may need this CPU (an idle CPU takes waiting threads over).
        while start.elapsed() < GRACE && self.behind(lane, t) {
            if start.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        me.waiting.store(false, Ordering::Release);
    }

    /// True while some worker but `lane` may not have taken in input from before `t`.
    fn behind(&self, lane: usize, t: u64) -> bool {
        self.lanes.iter().enumerate().any(|(j, l)| {
            j != lane
                && !l.waiting.load(Ordering::Acquire)
                && l.idle_since.load(Ordering::Acquire) <= t
                && l.began.load(Ordering::Acquire) <= t
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_is_waited_for() {
        let p = Presence::new(1);
        let t = Instant::now();
        p.let_others_catch_up(0, 100);
        assert!(t.elapsed() < GRACE, "one worker never waits");

        let p = Presence::new(2);
        // Worker 1 went idle at 50, before the arrival at 100: it may have been woken
        // and not yet run, so it is waited for, at most the grace.
        p.idle(1, 50);
        assert!(p.behind(0, 100));
        let t = Instant::now();
        p.let_others_catch_up(0, 100);
        assert!(t.elapsed() >= GRACE);
        // Idle since after the arrival: caught up.
        p.idle(1, 150);
        assert!(!p.behind(0, 100));
        // Busy in a round that began before the arrival: behind until it ends.
        p.busy(1);
        p.round_done(1, 90);
        assert!(p.behind(0, 100));
        p.round_done(1, 120);
        assert!(!p.behind(0, 100));
        // A worker that waits itself is not waited for.
        p.round_done(1, 90);
        p.lanes[1].waiting.store(true, Ordering::Release);
        assert!(!p.behind(0, 100));
    }
}
