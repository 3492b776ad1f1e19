//! Background threads: one flushes immutable FastStores, one compacts (FluidKV §5.4:
//! "performed with a dedicated background thread respectively"), and with a slow
//! directory a third demotes to the slow tier and merges its partitions (`slow.rs`).
//!
//! Both sleep on a shared [`Signal`] and wake when a FastStore is switched, a flush
//! finishes, a writer stalls, or every 50 ms (the load window). An error in either
//! thread poisons the store — writes then fail with `Error::Poisoned` instead of
//! stalling forever — and stops that thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::engine::Engine;
use super::load::LoadMode;
use super::{compact, flush, promote, slow};
use crate::error::{Error, Result};

const WINDOW: Duration = Duration::from_millis(50);

/// Wake-up and stop flags shared with the threads.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    woken: Mutex<bool>,
    cv: Condvar,
    stop: AtomicBool,
}

impl Signal {
    /// Wakes the threads.
    pub fn wake(&self) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }

    /// Asks the threads to exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake();
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn wait(&self) {
        let mut w = self.woken.lock();
        if !*w {
            let _ = self.cv.wait_for(&mut w, WINDOW);
        }
        *w = false;
    }
}

/// Starts the flush and compaction threads.
pub(crate) fn start(engine: &Arc<Engine>) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let spawn = |name: &str, f: fn(&Engine) -> Result<()>| {
        let engine = engine.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                watch_priority(&engine);
                while !engine.bg.stopped() {
                    crate::priority::checkpoint();
                    match f(&engine) {
                        Ok(()) => engine.space_blocked.store(false, Ordering::Release),
                        // Out of space is not a broken store: writers get PoolFull
                        // instead of waiting, and the work is retried next window.
                        Err(Error::PoolFull { .. }) => {
                            engine.space_blocked.store(true, Ordering::Release);
                        }
                        Err(e) => {
                            engine.poison(&e);
                            return;
                        }
                    }
                    engine.bg.wait();
                }
            })
            .map_err(|e| Error::io("starting a background thread", e))
    };
    let mut threads = vec![
        spawn("cascade-flush", flush_step)?,
        spawn("cascade-compact", compact_step)?,
    ];
    if engine.slow.is_some() {
        threads.push(spawn("cascade-slow", slow_step)?);
    }
    if engine.opts.scrub_bytes_per_sec > 0 {
        let engine = engine.clone();
        threads.push(
            std::thread::Builder::new()
                .name("cascade-scrub".into())
                .spawn(move || {
                    watch_priority(&engine);
                    crate::integrity::scrub::run(&engine);
                })
                .map_err(|e| Error::io("starting the scrub thread", e))?,
        );
    }
    Ok(threads)
}

/// Lets the calling background thread drop to idle CPU priority while `engine` takes
/// no writes (`priority.rs`), unless the options say no.
fn watch_priority(engine: &Engine) {
    if engine.opts.idle_priority_background {
        crate::priority::enter_background(crate::priority::Watch::new(
            engine.load.writes_counter(),
        ));
    }
}

fn flush_step(engine: &Engine) -> Result<()> {
    while !engine.bg.stopped() && flush::flush_oldest(engine)? {}
    let stages = engine.stages.load_full();
    let active = &stages.active;
    // Move a partly filled FastStore on: under read-only load (to the read-optimized
    // stages), when idle (so its logs can be cleaned), or when its logs outgrew their
    // capacity without a writer noticing (after recovery).
    let read_only = engine.opts.flush_when_read_only && engine.load.mode() == LoadMode::ReadOnly;
    let idle = engine.load.idle();
    let logs_full = engine.active_log_bytes.load(Ordering::Acquire) >= engine.switch_capacity().1;
    if (read_only || idle || logs_full)
        && stages.immutable.is_empty()
        && !active.index().is_empty()
        && engine.switch(active, true)
    {
        flush::flush_oldest(engine)?;
    }
    engine.stages.sweep();
    engine.pool.free_released()?;
    Ok(())
}

/// Demotes while StableStore is over the fast budget, then runs the slow tier's due
/// merges, then promotions while the read trigger wants them (`promote.rs`), a step
/// at a time so a stop request is seen between them.
fn slow_step(engine: &Engine) -> Result<()> {
    slow::update_pressure(engine);
    let r = (|| {
        while !engine.bg.stopped()
            && (slow::merge_step(engine, true)?
                || slow::demote(engine, false)?
                || slow::merge_step(engine, false)?
                || promote::promote(engine)?)
        {
            engine.stages.sweep();
            engine.pool.free_released()?;
            slow::update_pressure(engine);
        }
        Ok(())
    })();
    // A failed step must not leave writers waiting for room it will not make.
    if r.is_err() {
        slow::release_writers(engine);
    }
    r
}

fn compact_step(engine: &Engine) -> Result<()> {
    slow::update_pressure(engine);
    compact::maintain(engine)?;
    slow::update_pressure(engine);
    engine.stages.sweep();
    engine.pool.free_released()?;
    Ok(())
}
