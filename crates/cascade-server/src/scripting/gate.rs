//! The script gate: what makes a Lua script atomic and isolated, and what other
//! clients see while one runs.
//!
//! `rw` is a reader-writer lock around the keyspace: every data command (`run_data`,
//! EXEC, the expiry sweeper) holds it shared while it runs; the script thread holds it
//! exclusively for a whole script, so no other command interleaves with the script's
//! `redis.call`s and the script needs no stripe locks (its writes commit as one engine
//! batch at the end, `scripting/engine.rs`).
//!
//! A worker never waits for the gate without bound: [`Gate::enter`] waits in short
//! steps and gives up with `-BUSY` once the running script is past the
//! `busy-reply-threshold` (Redis answers `-BUSY` to other clients from then on, and
//! only `SCRIPT KILL`, `FUNCTION KILL` and `SHUTDOWN NOSAVE` work). So a client on the
//! same worker thread as the one that sends `SCRIPT KILL` never blocks it for long.
//!
//! The run state (`started_ms`, `function`, `wrote`, `kill`, `limit_ms`) is atomics,
//! written by the script thread at the start and end of each script and read by any
//! worker; `kill` is set by `SCRIPT KILL`/`FUNCTION KILL` and polled by the Lua hook.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{CmdError, CmdResult};
use crate::keyspace::now_ms;

/// `-BUSY` for a running EVAL.
pub(crate) const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `-BUSY` for a running function.
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    rw: RwLock<()>,
    /// Unix ms when the running script started (0: none runs).
    started_ms: AtomicU64,
    /// The running script is a function (FCALL), not EVAL.
    function: AtomicBool,
    /// The running script already wrote (SCRIPT KILL answers `-UNKILLABLE`).
    wrote: AtomicBool,
    /// SCRIPT KILL / FUNCTION KILL asked the running script to stop.
    kill: AtomicBool,
    /// The busy threshold of the running script (ms, 0: never busy).
    limit_ms: AtomicU64,
}

/// What `SCRIPT KILL` / `FUNCTION KILL` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kill {
    /// The script will stop.
    Killed,
    /// No script runs.
    NotBusy,
    /// It wrote: it cannot be stopped.
    Unkillable,
    /// A function runs and SCRIPT KILL was asked (or the other way round).
    WrongKind,
}

impl Gate {
    /// Holds the gate shared for a data command; `-BUSY` once a running script is past
    /// its threshold.
    pub(crate) fn enter(&self) -> CmdResult<RwLockReadGuard<'_, ()>> {
        loop {
            if let Some(g) = self.rw.try_read_for(Duration::from_millis(2)) {
                return Ok(g);
            }
            if let Some(msg) = self.busy() {
                return Err(CmdError::Msg(msg.into()));
            }
        }
    }

    /// Holds the gate exclusively for one script (the script thread).
    pub(crate) fn exclusive(&self) -> RwLockWriteGuard<'_, ()> {
        self.rw.write()
    }

    /// Marks a script as running (called with the gate held exclusively).
    pub(crate) fn begin(&self, function: bool, limit_ms: u64) {
        self.function.store(function, Ordering::Relaxed);
        self.wrote.store(false, Ordering::Relaxed);
        self.kill.store(false, Ordering::Relaxed);
        self.limit_ms.store(limit_ms, Ordering::Relaxed);
        self.started_ms.store(now_ms().max(1), Ordering::Release);
    }

    /// Marks the script as finished.
    pub(crate) fn end(&self) {
        self.started_ms.store(0, Ordering::Release);
        self.kill.store(false, Ordering::Relaxed);
    }

    /// The running script wrote.
    pub(crate) fn note_write(&self) {
        self.wrote.store(true, Ordering::Relaxed);
    }

    /// True when the running script must stop (the Lua hook asks). Never once the
    /// script wrote: a kill that raced with its first write is not carried out, so a
    /// killed script has written nothing.
    pub(crate) fn kill_requested(&self) -> bool {
        self.kill.load(Ordering::Relaxed) && !self.wrote.load(Ordering::Relaxed)
    }

    /// The `-BUSY` text if a script is running past its threshold.
    pub(crate) fn busy(&self) -> Option<&'static str> {
        let start = self.started_ms.load(Ordering::Acquire);
        let limit = self.limit_ms.load(Ordering::Relaxed);
        if start == 0 || limit == 0 || now_ms().saturating_sub(start) < limit {
            return None;
        }
        Some(if self.function.load(Ordering::Relaxed) {
            BUSY_FUNCTION
        } else {
            BUSY_EVAL
        })
    }

    /// True while any script runs (FUNCTION STATS).
    pub(crate) fn running(&self) -> Option<(bool, u64)> {
        let start = self.started_ms.load(Ordering::Acquire);
        (start != 0).then(|| {
            (
                self.function.load(Ordering::Relaxed),
                now_ms().saturating_sub(start),
            )
        })
    }

    /// `SCRIPT KILL` (`function` false) or `FUNCTION KILL` (true).
    pub(crate) fn kill(&self, function: bool) -> Kill {
        // As in Redis, where other clients are served only once a script is past its
        // threshold: before that, no script is "in execution" for them.
        if self.busy().is_none() {
            return Kill::NotBusy;
        }
        if self.wrote.load(Ordering::Relaxed) {
            return Kill::Unkillable;
        }
        if self.function.load(Ordering::Relaxed) != function {
            return Kill::WrongKind;
        }
        self.kill.store(true, Ordering::Relaxed);
        Kill::Killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_after_threshold_and_kill_rules() {
        let g = Gate::default();
        assert_eq!(g.kill(false), Kill::NotBusy);
        let w = g.exclusive();
        g.begin(false, 1);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(g.busy(), Some(BUSY_EVAL));
        assert!(g.enter().is_err(), "a reader gets -BUSY instead of waiting");
        assert_eq!(g.kill(true), Kill::WrongKind);
        assert_eq!(g.kill(false), Kill::Killed);
        assert!(g.kill_requested());
        g.note_write();
        assert_eq!(g.kill(false), Kill::Unkillable);
        g.end();
        drop(w);
        assert!(g.busy().is_none());
        assert!(g.enter().is_ok());
    }
}
