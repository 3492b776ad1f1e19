//! Load-awareness (FluidKV §4.4, Fig. 10): the read:write mix decides how many
//! buffer-trees are tolerated before compaction.
//!
//! Readers and writers count their operations in thread-local batches of 64 and add
//! them to two shared counters (so the shared cache lines are touched once per 64
//! operations). The compaction thread looks at the change every window and picks the
//! mode: no writes but reads → read-only (flush even a partly full FastStore, compact
//! at one buffer-tree); more reads than writes → read-heavy (compact at one); else
//! write-heavy (tolerate `buffer_trees_write_heavy`, trading read amplification for
//! write throughput). With several stores in one process the thread-local batches
//! may credit a few operations to the wrong store; the mode is a heuristic.
//!
//! A window with any write is never read-only, however few: each write also sets
//! `wrote` (read first, stored only when clear, so a busy writer does not bounce its
//! cache line), which the window takes. Counting writes in batches alone took a
//! read-mostly load (go-ycsb B: 5 % updates, ~500 per second over many threads) for
//! read-only, because most windows ended with the writes still pending in their
//! threads' batches, and every such window flushed the FastStore (a flush and a
//! compaction every few hundred writes, 35 % of the server's CPU; found in session 12).

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use std::sync::Arc;

use parking_lot::Mutex;

/// The mode in effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum LoadMode {
    /// Writes dominate (or no traffic).
    WriteHeavy = 0,
    /// Reads outnumber writes.
    ReadHeavy = 1,
    /// Only reads in the last window.
    ReadOnly = 2,
}

impl LoadMode {
    /// Name for stats.
    pub fn name(self) -> &'static str {
        match self {
            LoadMode::WriteHeavy => "write-heavy",
            LoadMode::ReadHeavy => "read-heavy",
            LoadMode::ReadOnly => "read-only",
        }
    }
}

const BATCH: u32 = 64;

thread_local! {
    static PENDING: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// Counts operations and classifies the recent mix.
#[derive(Debug, Default)]
pub(crate) struct LoadTracker {
    reads: AtomicU64,
    /// Shared with the background threads' CPU priority (`priority.rs`).
    writes: Arc<AtomicU64>,
    mode: AtomicU8,
    last: Mutex<(u64, u64)>,
    /// Windows in a row without a read or a write.
    quiet_windows: AtomicU32,
    /// A write happened since the last window closed.
    wrote: std::sync::atomic::AtomicBool,
}

/// Quiet windows (of 50 ms) after which the store counts as idle: one second.
const IDLE_WINDOWS: u32 = 20;

impl LoadTracker {
    /// Counts one read.
    pub fn note_read(&self) {
        let (r, w) = PENDING.with(Cell::get);
        if r + 1 >= BATCH {
            self.reads.fetch_add(u64::from(r + 1), Ordering::Relaxed);
            PENDING.with(|p| p.set((0, w)));
        } else {
            PENDING.with(|p| p.set((r + 1, w)));
        }
    }

    /// Counts one write.
    pub fn note_write(&self) {
        if !self.wrote.load(Ordering::Relaxed) {
            self.wrote.store(true, Ordering::Relaxed);
        }
        let (r, w) = PENDING.with(Cell::get);
        if w + 1 >= BATCH {
            self.writes.fetch_add(u64::from(w + 1), Ordering::Relaxed);
            PENDING.with(|p| p.set((r, 0)));
        } else {
            PENDING.with(|p| p.set((r, w + 1)));
        }
    }

    /// Closes a window: classifies the operations counted since the last call.
    pub fn update(&self) -> LoadMode {
        let (r, w) = (
            self.reads.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
        );
        let mut last = self.last.lock();
        let (dr, mut dw) = (r - last.0, w - last.1);
        *last = (r, w);
        if self.wrote.swap(false, Ordering::Relaxed) {
            // Writes still pending in their threads' batches count as one.
            dw = dw.max(1);
        }
        if dr == 0 && dw == 0 {
            self.quiet_windows.fetch_add(1, Ordering::Relaxed);
        } else {
            self.quiet_windows.store(0, Ordering::Relaxed);
        }
        let mode = if dw == 0 && dr > 0 {
            LoadMode::ReadOnly
        } else if dr > dw {
            LoadMode::ReadHeavy
        } else {
            LoadMode::WriteHeavy
        };
        self.mode.store(mode as u8, Ordering::Relaxed);
        mode
    }

    /// True after a second without reads or writes: background work may then tidy up
    /// (flush a partly full FastStore, clean the value log harder).
    pub fn idle(&self) -> bool {
        self.quiet_windows.load(Ordering::Relaxed) >= IDLE_WINDOWS
    }

    /// The mode decided at the last window.
    pub fn mode(&self) -> LoadMode {
        match self.mode.load(Ordering::Relaxed) {
            1 => LoadMode::ReadHeavy,
            2 => LoadMode::ReadOnly,
            _ => LoadMode::WriteHeavy,
        }
    }

    /// The shared write counter (batched like [`LoadTracker::counts`]).
    pub fn writes_counter(&self) -> Arc<AtomicU64> {
        self.writes.clone()
    }

    /// Reads and writes counted so far (batched: up to 63 per thread may be pending).
    pub fn totals(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_follow_the_mix() {
        let t = LoadTracker::default();
        for _ in 0..1000 {
            t.note_write();
        }
        assert_eq!(t.update(), LoadMode::WriteHeavy);
        for _ in 0..1000 {
            t.note_read();
        }
        for _ in 0..100 {
            t.note_write();
        }
        assert_eq!(t.update(), LoadMode::ReadHeavy);
        for _ in 0..1000 {
            t.note_read();
        }
        assert_eq!(t.update(), LoadMode::ReadOnly);
        assert_eq!(t.mode(), LoadMode::ReadOnly);
        // A few writes, all still in this thread's batch, beside many reads: not
        // read-only.
        for _ in 0..1000 {
            t.note_read();
        }
        for _ in 0..3 {
            t.note_write();
        }
        assert_eq!(t.update(), LoadMode::ReadHeavy);
        assert_eq!(
            t.update(),
            LoadMode::WriteHeavy,
            "no traffic counts as write-heavy"
        );
    }
}
