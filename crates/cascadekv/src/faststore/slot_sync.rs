//! Pipelined group persist of one log slot (FlatStore §3.3), for threads that share a
//! slot ([`super::set_thread_log_slot`]) — the server's workers under
//! `--durability sync`.
//!
//! [`FastStore::sync_my_slot`] makes everything the slot's log holds *when it is
//! called* durable. Under the slot's lock it notes the log's tail; if a persist job
//! already running covers that tail it waits for it (the group commit: one fence for
//! every thread whose records it covers); otherwise, once fewer than
//! [`PIPELINE_DEPTH`] jobs run, it starts one ([`crate::log::writer::LogWriter::begin_sync`])
//! and runs its fence with the lock *released*, so the slot's other threads append
//! (and start the next job) meanwhile; then, locked again, it records what became
//! durable and appends the mark (`finish_sync`) and wakes the waiters.
//!
//! Invariants: a job fences from the log's `fenced` offset at its start, so when it
//! ends everything before its end is durable whatever other jobs do; `persisting_upto`
//! is the end of the newest job started, so a waiter it covers either finds it still
//! running or finds `fenced` past its tail. Guarded by the slot's mutex; the slot's
//! condition variable carries the wake-ups. Any thread bound to the slot may call it.

use std::time::Duration;

use parking_lot::MutexGuard;

use super::FastStore;
use crate::error::Result;

/// Jobs of one slot that may fence at once. Two: the server's persister threads
/// (`cascade-server` `commit.rs`, two by default) each fence what was appended before
/// they began, and the virtio queue serves the two flushes in parallel. Measured with
/// persisters on this machine's disk (`cascade serve --durability sync`, redis-benchmark
/// SET -c 50 -P 1, alternating runs, docs/benchmarks.md session 11): one persister at
/// depth 1 gave 5.9–6.6 K SET/s, two at depth 2 6.4–7.8 K, on a CPU-saturated host; on
/// a quieter one 9.2–9.9 K against 9.8–10.8 K. (When the workers fenced
/// themselves, one at a time was better: 44–51 K SET/s against 33–41 K at depth 2 on a
/// device then ~40× faster, because a worker blocked in a fence read nothing meanwhile.)
const PIPELINE_DEPTH: usize = 2;

/// [`PIPELINE_DEPTH`], or `CASCADE_SYNC_DEPTH` (read once) to measure another depth
/// with the same binary (`scripts/bench-sync.sh`).
fn pipeline_depth() -> usize {
    static DEPTH: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *DEPTH.get_or_init(|| {
        std::env::var("CASCADE_SYNC_DEPTH")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|d| *d >= 1)
            .unwrap_or(PIPELINE_DEPTH)
    })
}

impl FastStore {
    /// Makes everything appended to the calling thread's slot so far durable (see the
    /// module docs).
    ///
    /// # Errors
    /// `Io` from the fence or the mark.
    pub(crate) fn sync_my_slot(&self) -> Result<()> {
        let n = self.my_slot_no();
        let cv = &self.slot_cvs[n];
        let mut slot = self.slots[n].0.lock();
        let tail = slot.writer.tail();
        loop {
            if slot.writer.durable_to(tail) || !slot.writer.has_unsynced() {
                return Ok(());
            }
            let covered = slot.persisting > 0
                && slot.persisting_upto.0 == tail.0
                && slot.persisting_upto.1 >= tail.1;
            if covered || slot.persisting >= pipeline_depth() {
                // The timeout only bounds the cost of a missed wake-up.
                cv.wait_for(&mut slot, Duration::from_millis(5));
                continue;
            }
            let Some(mut job) = slot.writer.begin_sync() else {
                return Ok(());
            };
            slot.persisting += 1;
            slot.persisting_upto = job.upto();
            let ran = MutexGuard::unlocked(&mut slot, || job.run());
            slot.persisting -= 1;
            let finished = match ran {
                Ok(()) => slot.writer.finish_sync(&job),
                Err(e) => Err(e),
            };
            cv.notify_all();
            finished?;
        }
    }
}
