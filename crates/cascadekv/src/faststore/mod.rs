//! FastStore: a concurrent DRAM range index plus thread-exclusive logs on the fast
//! tier (FluidKV §4.2, §5.1–5.2).
//!
//! A FastStore *generation* owns an [`Index`] and a fixed array of log slots. A writing
//! thread is bound to one slot for its lifetime (round-robin on first use), so with up
//! to `slots` writer threads every thread has a log of its own and no log tail is
//! shared; more threads than slots share slots through the slot's mutex, which stays
//! uncontended in the common case.
//!
//! Lifecycle: *active* (takes writes) → *frozen* (set by the switcher; writers that see
//! it retry on the new active FastStore) → *immutable* once every slot has been locked
//! and sealed by the switcher (no write can still be in flight). Readers may use any
//! generation at any time.
//!
//! Thread-safety: `FastStore` is `Sync`. A slot's mutex is held for the whole of a
//! write — LSN fetch, log append, optional sync and index update — which is what lets
//! the switcher and snapshot creation wait for in-flight writes by locking slots.

pub mod ikey;
pub mod index;
pub mod node;
pub mod version;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

pub use index::{Index, PutOutcome};
pub use node::ENTRY_OVERHEAD;
pub use version::{Val, Version};

use crate::log::LogWriter;
use crate::pmem::Pool;

/// One thread's log and its accounting.
#[derive(Debug)]
pub struct LogSlot {
    /// The thread-exclusive log.
    pub writer: LogWriter,
    /// Estimated DRAM bytes this slot's writes added to the index.
    pub dram_bytes: u64,
    /// Part of `dram_bytes` not yet added to the store-wide counter.
    pub unpublished: u64,
    /// Key and value bytes written through this slot (for write amplification).
    pub user_bytes: u64,
}

#[derive(Debug)]
#[repr(align(128))]
struct Padded<T>(T);

/// One FastStore generation.
#[derive(Debug)]
pub struct FastStore {
    generation: u64,
    index: Index,
    slots: Box<[Padded<Mutex<LogSlot>>]>,
    frozen: AtomicBool,
    /// Log segments recovered into this generation at open: (chunk, span).
    recovered: Mutex<Vec<(u64, u64)>>,
    /// DRAM estimate of recovered entries (not attributed to a slot).
    recovered_bytes: AtomicUsize,
}

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static THREAD_NO: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This thread's stable number (assigned on first use).
pub fn thread_no() -> usize {
    THREAD_NO.with(|c| match c.get() {
        Some(n) => n,
        None => {
            let n = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            c.set(Some(n));
            n
        }
    })
}

impl FastStore {
    /// A new, empty generation with `slots` log slots on `pool`.
    pub fn new(pool: &Arc<Pool>, generation: u64, slots: usize) -> Self {
        let slots = (0..slots.max(1))
            .map(|_| {
                Padded(Mutex::new(LogSlot {
                    writer: LogWriter::new(pool.clone(), generation),
                    dram_bytes: 0,
                    unpublished: 0,
                    user_bytes: 0,
                }))
            })
            .collect();
        FastStore {
            generation,
            index: Index::new(),
            slots,
            frozen: AtomicBool::new(false),
            recovered: Mutex::new(Vec::new()),
            recovered_bytes: AtomicUsize::new(0),
        }
    }

    /// Generation number.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Locks the calling thread's log slot.
    pub fn my_slot(&self) -> MutexGuard<'_, LogSlot> {
        let n = thread_no() % self.slots.len();
        self.slots[n].0.lock()
    }

    /// Locks every slot in turn and runs `f` on it (flush, seal, snapshot barrier).
    pub fn for_each_slot<E>(
        &self,
        mut f: impl FnMut(&mut LogSlot) -> Result<(), E>,
    ) -> Result<(), E> {
        for s in self.slots.iter() {
            f(&mut s.0.lock())?;
        }
        Ok(())
    }

    /// True once the switcher froze this generation.
    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Freezes the generation: writers that see this retry elsewhere.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Records segments recovered into this generation.
    pub fn add_recovered(&self, segs: impl IntoIterator<Item = (u64, u64)>, dram: usize) {
        self.recovered.lock().extend(segs);
        self.recovered_bytes.fetch_add(dram, Ordering::Relaxed);
    }

    /// Every log segment holding this generation's records: (chunk, span).
    pub fn segments(&self) -> Vec<(u64, u64)> {
        let mut v = self.recovered.lock().clone();
        for s in self.slots.iter() {
            v.extend_from_slice(s.0.lock().writer.segments());
        }
        v
    }

    /// Estimated DRAM bytes held by the index.
    pub fn dram_bytes(&self) -> u64 {
        let mut n = self.recovered_bytes.load(Ordering::Relaxed) as u64;
        for s in self.slots.iter() {
            n += s.0.lock().dram_bytes;
        }
        n
    }

    /// Log bytes and user bytes written through this generation's slots.
    pub fn written(&self) -> (u64, u64) {
        let (mut log, mut user) = (0, 0);
        for s in self.slots.iter() {
            let g = s.0.lock();
            log += g.writer.bytes_written();
            user += g.user_bytes;
        }
        (log, user)
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }
}

/// DRAM the index spends on one entry with this key and value.
pub fn entry_dram(key_len: usize, val: &Val) -> u64 {
    let key_heap = key_len.div_ceil(16) * 16;
    (ENTRY_OVERHEAD + key_heap + val.heap_bytes()) as u64
}
