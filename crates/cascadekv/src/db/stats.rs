//! [`Stats`]: what the engine holds and where (`Db::stats`, `cascade stats`).

use std::sync::atomic::Ordering;

use super::Db;
use crate::pmem::Backend;

/// A point-in-time summary of the store.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Index entries across FastStore generations (tombstones and shadowed keys count).
    pub index_entries: u64,
    /// Estimated DRAM bytes of all FastStore indexes.
    pub faststore_dram_bytes: u64,
    /// Current active FastStore generation.
    pub active_generation: u64,
    /// Immutable FastStores waiting (readable).
    pub immutable_faststores: u64,
    /// FastStore switches since open.
    pub faststore_switches: u64,
    /// Log segments in use.
    pub log_segments: u64,
    /// Pool size in bytes.
    pub pool_bytes_total: u64,
    /// Bytes in allocated chunks.
    pub pool_bytes_used: u64,
    /// Bytes in free chunks.
    pub pool_bytes_free: u64,
    /// Chunk size.
    pub chunk_size: u64,
    /// Persistence backend: "dax", "msync" or "sim".
    pub backend: &'static str,
    /// Live snapshots (open iterators).
    pub live_snapshots: u64,
    /// Largest LSN issued.
    pub max_lsn: u64,
    /// Log bytes appended since open.
    pub log_bytes_written: u64,
    /// Whether the previous session closed cleanly.
    pub recovered_clean: bool,
    /// Records replayed at open.
    pub recovered_records: u64,
    /// Replay time at open, microseconds.
    pub recovery_micros: u64,
}

impl Db {
    /// Gathers statistics (locks each log slot briefly).
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let stages = inner.stages.load();
        let mut s = Stats {
            active_generation: stages.active.generation(),
            immutable_faststores: stages.immutable.len() as u64,
            faststore_switches: inner.switches.load(Ordering::Relaxed),
            pool_bytes_total: inner.pool.chunk_count() * inner.pool.chunk_size(),
            pool_bytes_used: inner.pool.used_bytes(),
            pool_bytes_free: inner.pool.free_bytes(),
            chunk_size: inner.pool.chunk_size(),
            backend: match inner.pool.backend() {
                Backend::Dax => "dax",
                Backend::Msync => "msync",
                Backend::Sim => "sim",
            },
            live_snapshots: inner.snaps.live() as u64,
            max_lsn: inner.lsns.max_issued(),
            recovered_clean: inner.recovery.clean_shutdown,
            recovered_records: inner.recovery.records,
            recovery_micros: inner.recovery.replay_micros,
            ..Stats::default()
        };
        for fs in stages.all() {
            s.index_entries += fs.index().len() as u64;
            s.faststore_dram_bytes += fs.dram_bytes();
            s.log_segments += fs.segments().len() as u64;
            let _ = fs.for_each_slot(|slot| {
                s.log_bytes_written += slot.writer.bytes_written();
                Ok::<(), ()>(())
            });
        }
        s
    }
}
