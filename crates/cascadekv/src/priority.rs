//! CPU priority of the background threads (with `Options::idle_priority_background`,
//! off by default): while their store takes no writes, flush, compaction (and its
//! merge threads) and scrubbing run under Linux's `SCHED_IDLE` policy, so a reader that becomes runnable takes the core at once instead of waiting
//! out a compaction slice. While writes come in, or a writer is stalled waiting for
//! them, they run as normal threads: then they are what the writers wait for.
//!
//! Why: on a 2-vCPU host, `perf sched timehist` showed server workers runnable but not
//! running for up to 15.7 ms while compaction ran 51 ms slices on the other core; a
//! niced (19) compaction did not help (docs/benchmarks.md). Measured with
//! redis-benchmark, alternating builds: GET p99 and maximum fall; but saturating
//! readers starve the compactions that cut read amplification, and YCSB E fell to a
//! third — hence off by default (docs/benchmarks.md, "Background threads at idle
//! priority").
//!
//! Reaction time: a background thread looks at its store's write counter (batched by
//! 64 per thread, `load.rs`) at every step and every table it writes, at most every
//! [`QUIET`]; a stalled writer ([`StallGuard`]) lifts every background thread in the
//! process at its next look, whatever its store (harmless with several stores).
//!
//! Thread-safety: `STALLED` is an atomic; the rest is thread-local state of the calling
//! thread. A thread only ever changes its own policy.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thread_priority::{
    set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy, ThreadPriority,
    ThreadSchedulePolicy,
};

/// Writers currently stalled on the memory budget (all stores in this process).
static STALLED: AtomicUsize = AtomicUsize::new(0);

/// How long a background thread must see no new writes before it turns idle.
const QUIET: Duration = Duration::from_millis(20);

/// What a background thread watches: its store's write counter.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    writes: Arc<AtomicU64>,
}

#[derive(Debug)]
struct State {
    watch: Watch,
    /// Counter value and time of the last look.
    seen: u64,
    at: Instant,
    /// No writes between the last two looks.
    quiet: bool,
}

thread_local! {
    /// Set on background threads.
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
    /// The policy this thread last set: true = idle.
    static IDLE: Cell<bool> = const { Cell::new(false) };
}

impl Watch {
    /// Watches `writes`, a store's write counter (`LoadTracker::writes_counter`).
    pub(crate) fn new(writes: Arc<AtomicU64>) -> Self {
        Watch { writes }
    }
}

/// Makes the calling thread a background thread watching `w`: from now on
/// [`checkpoint`] sets its policy.
pub(crate) fn enter_background(w: Watch) {
    let seen = w.writes.load(Ordering::Relaxed);
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            watch: w,
            seen,
            at: Instant::now(),
            quiet: false,
        });
    });
    checkpoint();
}

/// The calling background thread's watch, for the merge threads it spawns.
pub(crate) fn current() -> Option<Watch> {
    STATE.with(|s| s.borrow().as_ref().map(|st| st.watch.clone()))
}

/// On a background thread: idle policy while its store saw no writes for [`QUIET`]
/// and no writer is stalled, normal policy otherwise (a syscall only when that
/// changes). Called at every background step and every table written. Elsewhere:
/// nothing.
pub(crate) fn checkpoint() {
    let want_idle = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let st = s.as_mut()?;
        if st.at.elapsed() >= QUIET {
            let now = st.watch.writes.load(Ordering::Relaxed);
            st.quiet = now == st.seen;
            st.seen = now;
            st.at = Instant::now();
        }
        Some(st.quiet && STALLED.load(Ordering::Acquire) == 0)
    });
    if let Some(want_idle) = want_idle {
        if IDLE.with(Cell::get) != want_idle {
            set_idle(want_idle);
        }
    }
}

/// Sets the calling thread's policy: idle or normal.
fn set_idle(want_idle: bool) {
    let policy = if want_idle {
        NormalThreadSchedulePolicy::Idle
    } else {
        NormalThreadSchedulePolicy::Other
    };
    // Failure (a kernel without SCHED_IDLE, a sandbox refusing it) leaves the thread
    // as it was: only latency suffers, so it is ignored.
    let set = set_thread_priority_and_policy(
        thread_native_id(),
        ThreadPriority::Min,
        ThreadSchedulePolicy::Normal(policy),
    );
    if set.is_ok() {
        IDLE.with(|i| i.set(want_idle));
    }
}

/// Held by a writer while it is stalled: background threads run at normal priority.
#[derive(Debug)]
pub(crate) struct StallGuard(());

impl StallGuard {
    /// Registers a stalled writer.
    pub(crate) fn new() -> Self {
        STALLED.fetch_add(1, Ordering::AcqRel);
        StallGuard(())
    }
}

impl Drop for StallGuard {
    fn drop(&mut self) {
        STALLED.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_is_idle() -> bool {
        let p = thread_priority::thread_schedule_policy();
        matches!(
            p,
            Ok(ThreadSchedulePolicy::Normal(
                NormalThreadSchedulePolicy::Idle
            ))
        )
    }

    #[test]
    fn policies_switch_and_stalls_are_counted() {
        let t = std::thread::spawn(|| {
            checkpoint(); // not a background thread: nothing changes
            assert!(!policy_is_idle());
            set_idle(true);
            assert!(policy_is_idle());
            set_idle(false);
            assert!(!policy_is_idle());
            // A background thread starts normal, turns idle once its store was quiet
            // for a window, and normal again when a write comes in.
            let writes = Arc::new(AtomicU64::new(0));
            enter_background(Watch::new(writes.clone()));
            assert!(!policy_is_idle());
            assert!(current().is_some());
            std::thread::sleep(QUIET * 2);
            checkpoint();
            // (Other tests' writers may stall meanwhile: then it stays normal.)
            assert_eq!(policy_is_idle(), STALLED.load(Ordering::Acquire) == 0);
            writes.fetch_add(64, Ordering::Relaxed);
            std::thread::sleep(QUIET * 2);
            checkpoint();
            assert!(!policy_is_idle());
            let stall = StallGuard::new();
            assert!(STALLED.load(Ordering::Acquire) >= 1);
            std::thread::sleep(QUIET * 2);
            checkpoint();
            assert!(
                !policy_is_idle(),
                "a stalled writer keeps background threads normal"
            );
            drop(stall);
        });
        assert!(t.join().is_ok());
    }
}
