//! Asynchronous updates of the hybrid index's ordered part (HiKV §3.2).
//!
//! A write installs its version in the hash part synchronously and appends it to its
//! writer's *update queue* (one per log slot, so the producer is the thread holding
//! that slot); *backend threads* move queued updates into the ordered index (`olc`). The tree's
//! LSN validation makes the order in which queues are applied irrelevant to the newest
//! version, and `node::update` keeps a late-arriving older version that a snapshot can
//! see, so applying queues out of order changes nothing a reader can observe.
//!
//! Queues are bounded ([`QUEUE_CAP`], HiKV's 4096): a writer that finds its queue full
//! applies it itself instead of waiting. A scan (or flush, or checkpoint) needs every
//! update acknowledged before it started: unlike HiKV, which stops all writers from
//! enqueueing until the queue drains, it reads each queue's sequence counter (`enq`)
//! and waits only until that queue's applied counter (`done`) reaches it, applying the
//! queue itself if it is behind — writers keep enqueueing meanwhile ([`Updates::fence`]).
//!
//! Backend threads (§3.2.2): their number follows HiKV's cost model — equations (1)
//! and (2) — from sampled get, scan and write latencies ([`backend_threads`]); the
//! first thread re-evaluates it every [`ADAPT_EVERY`]. Threads beyond the chosen number
//! sleep.
//!
//! Thread-safety and locks, per queue: `apply` (held for a whole batch: take, apply,
//! count) → `items` (held only to push or to take the batch). FIFO within a queue and
//! one applier at a time make `done` count a prefix of the pushed sequence. Counters
//! are atomics; `enq` is only changed under `items`, `done` only under `apply`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ikey::IKey;
use super::olc::Olc;
use super::version::Version;
use crate::epoch::Snapshots;

/// Most updates a queue holds before its writer applies them itself (HiKV §3.2.1).
pub(super) const QUEUE_CAP: usize = 4096;
/// Queue length at which a writer wakes the queue's backend thread.
const WAKE_AT: usize = 256;
/// How often the first backend thread re-evaluates the thread count.
pub(super) const ADAPT_EVERY: Duration = Duration::from_millis(100);
/// How long an idle backend thread sleeps before looking again.
const IDLE_NAP: Duration = Duration::from_millis(20);
/// One operation in this many is timed for the cost model.
pub(super) const SAMPLE_EVERY: u32 = 64;

type Update = (IKey, Version);

#[derive(Debug, Default)]
#[repr(align(128))]
struct Queue {
    /// Pushed, not yet taken updates.
    items: Mutex<Vec<Update>>,
    /// The applier's lock, with a spare buffer to swap with `items`.
    apply: Mutex<Vec<Update>>,
    /// Updates pushed so far.
    enq: AtomicU64,
    /// Updates applied to the tree so far.
    done: AtomicU64,
}

/// Sampled costs of one adaptation window (HiKV §3.2.2), nanoseconds and counts.
#[derive(Debug, Default)]
pub(super) struct Costs {
    /// Sampled gets and their total latency.
    pub get_n: AtomicU64,
    pub get_ns: AtomicU64,
    /// Scans and their total latency (each one is counted).
    pub scan_n: AtomicU64,
    pub scan_ns: AtomicU64,
    /// Sampled writes (hash install + enqueue) and their total latency.
    pub write_n: AtomicU64,
    pub write_ns: AtomicU64,
    /// Updates applied by backend threads and the time it took.
    pub applied_n: AtomicU64,
    pub applied_ns: AtomicU64,
}

/// What the queues share with the backend threads.
#[derive(Debug)]
pub(super) struct Shared {
    pub tree: Olc,
    pub snaps: Arc<Snapshots>,
    queues: Box<[Queue]>,
    pub costs: Costs,
    /// Backend threads currently asked to work (the rest sleep).
    active: AtomicUsize,
    closed: AtomicBool,
}

/// The queues and their backend threads; dropping it stops and joins the threads.
#[derive(Debug)]
pub(super) struct Updates {
    pub shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// One window's measured costs, per write (HiKV §3.2.2's symbols).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Window {
    /// Gets per write, and ns per get.
    pub ng: f64,
    pub lg: f64,
    /// Scans per write, and ns per scan.
    pub ns: f64,
    pub ls: f64,
    /// ns a serving thread spends on a write, and a backend thread on applying one.
    pub lsw: f64,
    pub lbw: f64,
}

/// HiKV §3.2.2, equations (1) and (2): with `n_thd` threads in all, the backend share
/// that makes serving and backend threads equally busy is
/// `n_thd · lbw / (ng·lg + ns·ls + lsw + lbw)`; rounded, at least 1 and at most `max`.
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "thread counts are small; `want` is finite and in [0, n_thd]"
)]
pub(super) fn backend_threads(n_thd: usize, max: usize, w: Window) -> usize {
    let serve = w.ng * w.lg + w.ns * w.ls + w.lsw;
    let want = if serve + w.lbw > 0.0 {
        n_thd as f64 * w.lbw / (serve + w.lbw)
    } else {
        1.0
    };
    (want.round() as usize).clamp(1, max.max(1))
}

impl Shared {
    /// Applies everything queue `q` holds; returns how many updates that was.
    fn apply(&self, q: &Queue, timed: bool) -> usize {
        let mut buf = q.apply.lock();
        {
            let mut items = q.items.lock();
            if items.is_empty() {
                return 0;
            }
            std::mem::swap(&mut *items, &mut *buf);
        }
        let t0 = timed.then(Instant::now);
        let n = buf.len();
        let mut key = Vec::new();
        for (k, v) in buf.drain(..) {
            k.write_to(&mut key);
            self.tree.put_validate(&key, v, &self.snaps);
        }
        q.done.fetch_add(n as u64, Ordering::Release);
        if let Some(t0) = t0 {
            let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.costs.applied_n.fetch_add(n as u64, Ordering::Relaxed);
            self.costs.applied_ns.fetch_add(ns, Ordering::Relaxed);
        }
        n
    }

    /// Re-evaluates how many backend threads should work (`backend_threads`) from the
    /// costs sampled since the last call, and starts a new window.
    #[expect(
        clippy::cast_precision_loss,
        reason = "counts and nanoseconds of one 100 ms window"
    )]
    fn adapt(&self, n_thd: usize, max: usize) {
        let take = |a: &AtomicU64| a.swap(0, Ordering::Relaxed) as f64;
        let c = &self.costs;
        let (gn, gns) = (take(&c.get_n), take(&c.get_ns));
        let (sn, sns) = (take(&c.scan_n), take(&c.scan_ns));
        let (wn, wns) = (take(&c.write_n), take(&c.write_ns));
        let (an, ans) = (take(&c.applied_n), take(&c.applied_ns));
        if wn == 0.0 || an == 0.0 {
            return; // no writes this window: keep the current number
        }
        let per = |n: f64, ns: f64| if n > 0.0 { ns / n } else { 0.0 };
        // Sampled counts stand for SAMPLE_EVERY operations each; scans are all counted.
        let w = Window {
            ng: gn / wn,
            lg: per(gn, gns),
            ns: sn / (wn * f64::from(SAMPLE_EVERY)),
            ls: per(sn, sns),
            lsw: per(wn, wns),
            lbw: per(an, ans),
        };
        self.active
            .store(backend_threads(n_thd, max, w), Ordering::Relaxed);
    }

    /// Body of backend thread `me` of `max`.
    fn run(&self, me: usize, max: usize, n_thd: usize) {
        let mut window = Instant::now();
        while !self.closed.load(Ordering::Acquire) {
            let active = self.active.load(Ordering::Relaxed).max(1);
            let mut did = 0;
            if me < active {
                for q in self.queues.iter().skip(me).step_by(active) {
                    did += self.apply(q, true);
                }
            }
            if me == 0 && window.elapsed() >= ADAPT_EVERY {
                self.adapt(n_thd, max);
                window = Instant::now();
            }
            if did == 0 {
                std::thread::park_timeout(IDLE_NAP);
            }
        }
    }
}

impl Updates {
    /// `queues` update queues (one per log slot) in front of `tree`, and up to
    /// `max_threads` backend threads (none if they cannot be started: then writers and
    /// scans apply the queues themselves).
    pub(super) fn new(tree: Olc, snaps: Arc<Snapshots>, queues: usize, max_threads: usize) -> Self {
        let n_thd = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let shared = Arc::new(Shared {
            tree,
            snaps,
            queues: (0..queues.max(1)).map(|_| Queue::default()).collect(),
            costs: Costs::default(),
            active: AtomicUsize::new(1),
            closed: AtomicBool::new(false),
        });
        let mut threads = Vec::new();
        for me in 0..max_threads {
            let s = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("cascade-hikv".into())
                .spawn(move || s.run(me, max_threads, n_thd));
            match spawned {
                Ok(h) => threads.push(h),
                Err(_) => break,
            }
        }
        Updates { shared, threads }
    }

    /// Queues `(key, v)` on queue `q` (the caller's log slot number); applies the
    /// queue if it is full, wakes its backend thread when it has a batch.
    pub(super) fn push(&self, q: usize, key: IKey, v: Version) {
        let s = &*self.shared;
        let qi = q % s.queues.len();
        let queue = &s.queues[qi];
        let len = {
            let mut items = queue.items.lock();
            items.push((key, v));
            queue.enq.fetch_add(1, Ordering::Release);
            items.len()
        };
        if len >= QUEUE_CAP || self.threads.is_empty() && len >= WAKE_AT {
            s.apply(queue, false);
        } else if len == WAKE_AT {
            let active = s.active.load(Ordering::Relaxed).max(1);
            if let Some(t) = self.threads.get(qi % active) {
                t.thread().unpark();
            }
        }
    }

    /// Waits until every update pushed before this call is in the tree, applying
    /// queues that are behind.
    pub(super) fn fence(&self) {
        let s = &*self.shared;
        for q in &*s.queues {
            let target = q.enq.load(Ordering::Acquire);
            while q.done.load(Ordering::Acquire) < target {
                s.apply(q, false);
            }
        }
    }

    /// Updates queued and not yet applied (all queues).
    pub(super) fn backlog(&self) -> u64 {
        self.shared
            .queues
            .iter()
            .map(|q| {
                let done = q.done.load(Ordering::Acquire);
                q.enq.load(Ordering::Acquire).saturating_sub(done)
            })
            .sum()
    }

    /// Backend threads currently working.
    pub(super) fn active_threads(&self) -> usize {
        self.shared.active.load(Ordering::Relaxed)
    }
}

impl Drop for Updates {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads.drain(..) {
            // A backend thread only applies updates; if it panicked there is nothing
            // left to clean up.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_model_balances_serving_and_backend_work() {
        let w = |ng, lg, ns, ls, lsw, lbw| Window {
            ng,
            lg,
            ns,
            ls,
            lsw,
            lbw,
        };
        // Writes only, backend as costly as serving: half the threads.
        assert_eq!(
            backend_threads(8, 7, w(0.0, 0.0, 0.0, 0.0, 100.0, 100.0)),
            4
        );
        // Many cheap gets per write: the serving side needs most threads.
        assert_eq!(
            backend_threads(8, 7, w(9.0, 100.0, 0.0, 0.0, 100.0, 100.0)),
            1
        );
        // A costly backend (tree splits) with cheap hash writes: most threads.
        assert_eq!(backend_threads(8, 7, w(0.0, 0.0, 0.0, 0.0, 20.0, 300.0)), 7);
        // Scans weigh on the serving side (14x a get in HiKV's measurements).
        assert_eq!(
            backend_threads(8, 7, w(1.0, 100.0, 0.5, 1400.0, 100.0, 300.0)),
            2
        );
        // Bounded by `max` and by 1; nothing measured yet: 1.
        assert_eq!(backend_threads(2, 1, w(0.0, 0.0, 0.0, 0.0, 1.0, 1000.0)), 1);
        assert_eq!(backend_threads(4, 3, Window::default()), 1);
    }
}
