//! Options for [`super::Db::open`] and per-write durability.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::record::{MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::pmem::pool::{MAX_CHUNK, MIN_CHUNK};
use crate::pmem::SimDevice;

/// How durable a write is when the call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The record is in the mapped log: it survives a crash of this process, but not
    /// an OS crash or power loss until a later `Sync` write, [`super::Db::sync`] or
    /// close persists it.
    #[default]
    Buffered,
    /// The record has been persisted through the seam (cache-line flush + fence, or
    /// `msync`) before the call returns: it survives power loss.
    Sync,
}

/// Which StableStore key ranges a demotion moves to the slow tier (issue #15,
/// `placement/msc.rs`). Whatever the choice, entries the popularity mapper pins stay
/// in the fast tier (see [`Options::pin_fraction`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DemotionPolicy {
    /// PrismDB's approx-MSC: the best of 8 random candidates by benefit (coldness)
    /// over cost (slow-tier I/O per byte moved), each scored from a sample of keys.
    Msc,
    /// MSC scored from every key of each candidate (slower; for comparison).
    MscExact,
    /// A random candidate.
    Random,
    /// The oldest tables first (lowest table id).
    Oldest,
    /// Key ranges in a round robin over the key space (issue #14's order; the
    /// default, see [`Options::pin_fraction`]).
    #[default]
    KeyOrder,
}

impl std::str::FromStr for DemotionPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "msc" => Ok(DemotionPolicy::Msc),
            "msc-exact" => Ok(DemotionPolicy::MscExact),
            "random" => Ok(DemotionPolicy::Random),
            "oldest" => Ok(DemotionPolicy::Oldest),
            "key-order" => Ok(DemotionPolicy::KeyOrder),
            _ => Err(Error::invalid(format!(
                "unknown demotion policy {s:?}: msc, msc-exact, random, oldest or key-order"
            ))),
        }
    }
}

/// Engine options. `Options::default()` suits a server with a few GiB of fast tier.
#[derive(Debug, Clone)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent on/off switches, as in RocksDB's Options; not a state machine"
)]
pub struct Options {
    /// Create the store if the directory holds none (default true).
    pub create_if_missing: bool,
    /// Fast-tier pool size in bytes, used when creating (default 4 GiB, allocated lazily).
    pub pool_size: u64,
    /// Chunk size in bytes, used when creating: a power of two, 16 KiB–64 MiB, or 0
    /// (the default) for `pool_size / 256` between 256 KiB and 4 MiB. The unit of
    /// allocation: each log in use, each table run and each value segment takes whole
    /// chunks, so small pools want small chunks.
    pub chunk_size: u64,
    /// DRAM (estimated index bytes) at which the active FastStore is switched to
    /// immutable and a new one takes writes (default 256 MiB).
    pub faststore_capacity: u64,
    /// Log bytes at which the active FastStore is switched too, so that a small set of
    /// hot keys, overwritten again and again, is flushed and its logs freed instead of
    /// filling the pool (0, the default: 1/16 of the pool, at most 256 MiB, at least 4
    /// chunks).
    pub faststore_log_capacity: u64,
    /// Clean the value log: move the live values out of mostly dead segments so their
    /// space is reclaimed (default true; off only to measure what cleaning costs).
    pub vlog_cleaning: bool,
    /// Dead share of a value segment's bytes from which it is cleaned when space is not
    /// short (default 0.5; lower under pressure, see `vlog/cleaner.rs`).
    pub vlog_dead_ratio: f64,
    /// Live bytes one cleaning cycle may move at most (0, the default: 1/16 of the pool,
    /// at most 64 MiB).
    pub vlog_clean_batch_bytes: u64,
    /// Horizontal batching of `Durability::Sync` writes (FlatStore §3.3): a writer
    /// posts its records, a leader appends up to this many writers' records to its
    /// own log and persists them once; at most two groups persist at a time. 1 = each
    /// writer persists its own log (vertical batching). Default 32: on block storage it
    /// measured 1.0× per-thread persists at 1–2 threads and 1.1–1.9× at 8–32
    /// (docs/benchmarks.md, 2026-11-25).
    pub sync_group_size: usize,
    /// Compacted log entries (FlatStore §3.2, formats.md §5.7): a write of two or more
    /// operations with inline-sized values — a `WriteBatch`, a group of synchronous
    /// writes — is logged as one packed record (about 20 instead of 32 bytes for an
    /// 8 B + 8 B put). Default true; false writes a record per operation (for
    /// comparison: bench engine `cascade-plain`).
    pub pack_log_entries: bool,
    /// On a file-backed pool without DAX: log records go into the pool file with
    /// `pwrite` instead of stores into the mapping (design.md §10). Default false: a
    /// system call per record made buffered loads 2.2× slower (0.27 against 0.59
    /// Mops/s, 2 M puts on /dev/shm) and gained nothing measurable on synced writes
    /// (docs/benchmarks.md, sessions 10 and 11). `CASCADE_LOG_WRITE=pwrite|store`
    /// overrides it.
    pub log_pwrite: bool,
    /// On a file-backed pool without DAX, once a log was synced: each new log segment
    /// is filled with zeros before its first record (its write-back started, not
    /// waited for), so that later fences of it write data only, no extent conversion
    /// (design.md §10). Default true (no cost measured on buffered loads).
    /// `CASCADE_LOG_PREWRITE=1|0` overrides it.
    pub log_prewrite: bool,
    /// On a file-backed pool without DAX: a log fence is one `fdatasync` of the pool
    /// file instead of `msync` of the ranges written. Default false (docs/benchmarks.md,
    /// session 11). `CASCADE_LOG_FENCE=fdatasync|msync` overrides it.
    pub log_fdatasync: bool,
    /// The sync journal (design.md §10, formats.md §16): FastStore log ranges that must
    /// become durable (`Durability::Sync` writes, `sync`, the server's persists) are
    /// written as blocks into a preallocated journal file with `O_DIRECT`, several in
    /// flight at once and made durable by shared device flushes, instead of fenced
    /// with `msync`; checkpoints write
    /// the pool back in the background and free the journal, and open redoes it after
    /// a crash. `None` (the default): on for a pool file without DAX that is not on
    /// tmpfs; `Some(on)` decides (a simulated device needs `Some(true)`).
    /// `CASCADE_JOURNAL=1|0` overrides it for a pool file.
    pub sync_journal: Option<bool>,
    /// Bytes of the journal's eight slots (0: a 32nd of the pool, 1–64 MiB).
    pub journal_size: u64,
    /// Background scrubbing: re-read and verify every table block and separated value
    /// at most this many bytes per second, pass after pass (0: off). Default 16 MiB/s:
    /// gets verify a table block's checksum on its first read after open only
    /// (`table/verified.rs`), and a pass of the scrubber is what catches a flip in a
    /// block after that read (README "Guarantees"). Findings are counted in
    /// `Stats::scrub_errors`; nothing is changed.
    pub scrub_bytes_per_sec: u64,
    /// Values up to this many bytes are kept in the DRAM index; larger values are
    /// key-value separated (the index holds the log address). Default 256.
    pub inline_threshold: usize,
    /// Largest key accepted (1..=4096, default 4096).
    pub max_key_len: usize,
    /// Largest value accepted (default 64 MiB).
    pub max_value_len: usize,
    /// Thread-exclusive log slots per FastStore (default 32). Each slot that is used
    /// takes at least one chunk of the pool.
    pub log_slots: usize,
    /// Durability of `put`/`delete`/`write` (the `_with` variants choose per call).
    pub durability: Durability,
    /// DAX: `Some(true)` requires `MAP_SYNC`, `Some(false)` never tries, `None` tries
    /// and falls back to msync (default).
    pub dax: Option<bool>,
    /// Threads used to replay logs at open (default: available parallelism).
    pub recovery_threads: usize,
    /// Write a checkpoint of the FastStore index at a clean close and load it at the
    /// next open instead of replaying the logs (FlatStore §3.5; default true). After a
    /// crash, or when the checkpoint is damaged or does not match the logs, open
    /// replays as without it.
    pub checkpoint_at_close: bool,
    /// Use a simulated device instead of the pool file (crash tests).
    pub sim_device: Option<Arc<SimDevice>>,
    /// LST block size in bytes: a power of two, 256–4096 (default 512, FluidKV §4.3;
    /// 4 KiB suits a flash- or CXL-SSD-backed tier).
    pub block_size: usize,
    /// Largest LST in bytes (an LST also ends when its index block is full).
    pub table_max_bytes: usize,
    /// Bloom filters (`table/filter.rs`, 10 bits per key of DRAM) are kept for every
    /// buffer-tree table; this also keeps and consults them for StableStore tables
    /// (default off, like RocksDB's `optimize_filters_for_hits`). On: a missing key
    /// costs no block read anywhere (readmissing after settle, 4M 8-byte keys: 1.9-3.0
    /// → 5.6-5.9 Mops/s) but every hit pays one more cache miss (readrandom 2.3-2.6 →
    /// 1.8-2.3 Mops/s) and DRAM grows by 1.25 B per key; off: the last stage answers a
    /// miss by reading one block, as without filters. Bench engine `cascade-sf`.
    pub stable_filters: bool,
    /// HiKV's hybrid FastStore index (`faststore/index.rs`, HiKV §3.1–3.3): a
    /// partitioned hash index answers gets and takes puts, and the ordered B-link tree
    /// beside it is updated by backend threads (as many as HiKV's cost model asks, at
    /// most one fewer than the cores, at least one); a scan or flush first waits for
    /// the updates acknowledged before it. Costs about 2× the index DRAM per key.
    /// Default off, chosen by measurement (docs/benchmarks.md, "HiKV"). Bench engines
    /// `cascade-hikv` and `dram-hikv`.
    pub hash_index: bool,
    /// Run the flush, compaction and scrub threads at idle CPU priority (Linux
    /// `SCHED_IDLE`) while the store takes no writes and no writer is stalled, so
    /// point readers never wait behind them for a core (`priority.rs`). Default false:
    /// it lowered redis-benchmark's GET p99 by ~30 % and halved its maximum, but under
    /// saturating reads it starves the compactions that keep read amplification low —
    /// YCSB E after a load ran at 0.013 instead of 0.036 Mops/s (docs/benchmarks.md).
    pub idle_priority_background: bool,
    /// Immutable FastStores allowed to wait for the flush thread before writers are
    /// slowed down (the memory budget; default 2).
    pub max_immutable_faststores: usize,
    /// Buffer-trees tolerated before compaction under write-heavy load (default 4).
    pub buffer_trees_write_heavy: usize,
    /// While writes dominate (load-awareness, FluidKV §4.4: "FastStore … allows
    /// dynamically trading more memory for throughput under write-intensive
    /// workloads"), the active FastStore is switched only at this many times
    /// `faststore_capacity` (and its log capacity), so a load flushes and compacts
    /// less while it runs; once reads come the next write switches at the plain
    /// capacity, and read-only load flushes what is there. DRAM of the FastStores
    /// grows to at most `(1 + max_immutable_faststores) × factor × faststore_capacity`;
    /// the log bound stays within a quarter of the pool. Default 1 (off).
    pub faststore_write_heavy_factor: u32,
    /// Buffer-trees tolerated under read-heavy or read-only load (default 1).
    pub buffer_trees_read_heavy: usize,
    /// Under read-only load, flush even a partly full FastStore (default true).
    pub flush_when_read_only: bool,
    /// Threads merging key-range partitions in a compaction (default: cores).
    pub compaction_threads: usize,
    /// Directory of the slow (capacity) tier, on ordinary SSD (LightKV §III, issue
    /// #14). `None` (default): every table stays in the pool. With a directory,
    /// StableStore keeps at most [`Options::fast_budget`] bytes of tables in the pool
    /// and demotes key ranges past that into table files here. A store that has slow
    /// data must always be opened with its slow directory.
    pub slow_dir: Option<std::path::PathBuf>,
    /// Bytes of StableStore data — its tables and the separated values they point to —
    /// the pool keeps before key ranges move to the slow tier (only with `slow_dir`;
    /// 0 = a quarter of the pool).
    pub fast_budget: u64,
    /// Block unit of slow-tier tables: a power of two, 512–4096 (default 4096, one
    /// SSD page).
    pub slow_block_size: usize,
    /// Runs of equal weight in a slow-tier partition that merge into one (LightKV's
    /// `CS`, default 4): write amplification about `log_CS(data / run size) + 1`.
    pub slow_merge_width: usize,
    /// A slow-tier partition larger than this splits in two (default 256 MiB).
    pub slow_partition_bytes: u64,
    /// Slow-tier write rate limit of demotions and merges, bytes per second (0 =
    /// unlimited, the default), so reads keep their tail under a write stream.
    pub slow_write_rate: u64,
    /// Point reads of the slow tier (a get's data block or value) bypass the page
    /// cache with `O_DIRECT` (default false), as RocksDB's `use_direct_reads`: each
    /// then costs a device read, which is what a slow tier much larger than memory
    /// costs. Merges and scans still read through the page cache. The slow
    /// directory's file system must support `O_DIRECT` (tmpfs before Linux 6.6 does
    /// not): opening fails with `InvalidArgument` otherwise.
    pub slow_direct_reads: bool,
    /// How demotions choose key ranges (default [`DemotionPolicy::KeyOrder`]).
    pub demotion_policy: DemotionPolicy,
    /// Share of the fast budget the popular keys pinned in the fast tier may take
    /// (PrismDB's pinning threshold; PrismDB's setting is 0.7). 0, the default, turns
    /// popularity off: demotions move whole key ranges and nothing is promoted. Off by
    /// default because it measured slower here (docs/benchmarks.md, session 5): it
    /// raised the fast tier's share of YCSB gets by up to 10 points, but its tracker,
    /// kept-entry rewrites and extra demotions cost more throughput than that won
    /// (up to 43 % lost, YCSB B at zipfian 0.99 with a 20 % budget).
    pub pin_fraction: f64,
    /// Keys the popularity tracker follows (0 = automatic: the pinning target over
    /// 0.7, PrismDB's pinning threshold of 70 % of the tracker; 1 Ki–4 Mi keys). Each
    /// costs about 40 bytes of DRAM plus its key.
    pub tracker_keys: usize,
    /// Client operations per read-triggered promotion epoch (default 1 M).
    pub promote_epoch_ops: u64,
    /// Operations of cool-down after an epoch that did not raise the fast tier's
    /// share of gets by a point (default 10 M).
    pub promote_cooldown_ops: u64,
    /// Run the flush and compaction threads (default true). Without them nothing is
    /// flushed or compacted unless [`super::Db::flush_faststore`] or
    /// [`super::Db::compact`] is called, and writers are never slowed down.
    pub background: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            pool_size: 4 << 30,
            chunk_size: 0,
            faststore_capacity: 256 << 20,
            faststore_log_capacity: 0,
            vlog_cleaning: true,
            vlog_dead_ratio: 0.5,
            vlog_clean_batch_bytes: 0,
            scrub_bytes_per_sec: 16 << 20,
            sync_group_size: 32,
            pack_log_entries: true,
            log_pwrite: false,
            log_prewrite: true,
            log_fdatasync: false,
            sync_journal: None,
            journal_size: 0,
            inline_threshold: 256,
            max_key_len: MAX_KEY_LEN,
            max_value_len: 64 << 20,
            log_slots: 32,
            durability: Durability::Buffered,
            dax: None,
            recovery_threads: std::thread::available_parallelism()
                .map_or(2, std::num::NonZero::get),
            checkpoint_at_close: true,
            sim_device: None,
            block_size: 512,
            table_max_bytes: 256 << 10,
            stable_filters: false,
            hash_index: false,
            idle_priority_background: false,
            max_immutable_faststores: 2,
            buffer_trees_write_heavy: 4,
            faststore_write_heavy_factor: 1,
            buffer_trees_read_heavy: 1,
            flush_when_read_only: true,
            compaction_threads: std::thread::available_parallelism()
                .map_or(2, std::num::NonZero::get),
            background: true,
            slow_dir: None,
            fast_budget: 0,
            slow_block_size: 4096,
            slow_merge_width: 4,
            slow_partition_bytes: 256 << 20,
            slow_write_rate: 0,
            slow_direct_reads: false,
            demotion_policy: DemotionPolicy::KeyOrder,
            pin_fraction: 0.0,
            tracker_keys: 0,
            promote_epoch_ops: 1_000_000,
            promote_cooldown_ops: 10_000_000,
        }
    }
}

impl Options {
    /// Checks the options for consistency.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first option out of range.
    pub fn validate(&self) -> Result<()> {
        if self.chunk_size != 0
            && (!self.chunk_size.is_power_of_two()
                || !(MIN_CHUNK..=MAX_CHUNK).contains(&self.chunk_size))
        {
            return Err(Error::invalid(format!(
                "chunk_size {} must be 0 (automatic) or a power of two in [{MIN_CHUNK}, {MAX_CHUNK}]",
                self.chunk_size
            )));
        }
        if !(self.vlog_dead_ratio > 0.0 && self.vlog_dead_ratio < 1.0) {
            return Err(Error::invalid(format!(
                "vlog_dead_ratio {} must be between 0 and 1 (exclusive)",
                self.vlog_dead_ratio
            )));
        }
        if self.max_key_len == 0 || self.max_key_len > MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "max_key_len {} must be in 1..={MAX_KEY_LEN}",
                self.max_key_len
            )));
        }
        if self.max_value_len > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "max_value_len {} exceeds the log format limit {MAX_VALUE_LEN}",
                self.max_value_len
            )));
        }
        if self.journal_size != 0 && !(128 << 10..=1 << 34).contains(&self.journal_size) {
            return Err(Error::invalid(format!(
                "journal_size {} must be 0 (automatic) or between 128 KiB and 16 GiB",
                self.journal_size
            )));
        }
        if self.log_slots == 0 || self.log_slots > 4096 {
            return Err(Error::invalid("log_slots must be in 1..=4096"));
        }
        if self.faststore_capacity < 64 * 1024 {
            return Err(Error::invalid("faststore_capacity must be at least 64 KiB"));
        }
        if !self.block_size.is_power_of_two() || !(256..=4096).contains(&self.block_size) {
            return Err(Error::invalid(format!(
                "block_size {} must be a power of two between 256 and 4096",
                self.block_size
            )));
        }
        if self.table_max_bytes < 4 * self.block_size || self.table_max_bytes > (16 << 20) {
            return Err(Error::invalid(
                "table_max_bytes must be between 4 blocks and 16 MiB",
            ));
        }
        if self.inline_threshold > 8192 {
            return Err(Error::invalid(
                "inline_threshold must be at most 8192 (inline values must fit a table block)",
            ));
        }
        if self.max_immutable_faststores == 0 {
            return Err(Error::invalid(
                "max_immutable_faststores must be at least 1",
            ));
        }
        if self.faststore_write_heavy_factor == 0 {
            return Err(Error::invalid(
                "faststore_write_heavy_factor must be at least 1",
            ));
        }
        if self.buffer_trees_write_heavy == 0 || self.buffer_trees_read_heavy == 0 {
            return Err(Error::invalid("buffer-tree thresholds must be at least 1"));
        }
        if !self.slow_block_size.is_power_of_two() || !(512..=4096).contains(&self.slow_block_size)
        {
            return Err(Error::invalid(format!(
                "slow_block_size {} must be a power of two between 512 and 4096",
                self.slow_block_size
            )));
        }
        if self.slow_merge_width < 2 {
            return Err(Error::invalid("slow_merge_width must be at least 2"));
        }
        if self.slow_partition_bytes < (1 << 20) {
            return Err(Error::invalid(
                "slow_partition_bytes must be at least 1 MiB",
            ));
        }
        if !(0.0..=1.0).contains(&self.pin_fraction) {
            return Err(Error::invalid("pin_fraction must be between 0 and 1"));
        }
        if self.promote_epoch_ops == 0 {
            return Err(Error::invalid("promote_epoch_ops must be at least 1"));
        }
        Ok(())
    }

    /// The chunk size a new pool gets: `chunk_size`, or for 0 `pool_size / 256`
    /// rounded down to a power of two between 256 KiB and 4 MiB.
    #[must_use]
    pub fn effective_chunk_size(&self) -> u64 {
        if self.chunk_size != 0 {
            return self.chunk_size;
        }
        let target = (self.pool_size / 256).clamp(256 << 10, 4 << 20);
        1u64 << target.ilog2()
    }

    /// Bytes of StableStore data a new pool of `pool_size` keeps before demoting
    /// (`fast_budget`, or a quarter of `pool_size` for 0). An open store uses its pool's
    /// actual size instead (`Stats::fast_budget_bytes`).
    #[must_use]
    pub fn effective_fast_budget(&self) -> u64 {
        if self.fast_budget != 0 {
            self.fast_budget
        } else {
            self.pool_size / 4
        }
    }

    /// Checks a key against the limits.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty key or one longer than `max_key_len`.
    pub fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(Error::invalid(
                "key is empty; keys must be 1 byte or longer",
            ));
        }
        if key.len() > self.max_key_len {
            return Err(Error::invalid(format!(
                "key is {} bytes; the limit is {} (Options::max_key_len)",
                key.len(),
                self.max_key_len
            )));
        }
        Ok(())
    }

    /// Checks a value against the limits.
    ///
    /// # Errors
    /// `InvalidArgument` for a value longer than `max_value_len`.
    pub fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.max_value_len {
            return Err(Error::invalid(format!(
                "value is {} bytes; the limit is {} (Options::max_value_len)",
                value.len(),
                self.max_value_len
            )));
        }
        Ok(())
    }
}
