//! [`Stats`]: what the engine holds and where (`Db::stats`, `cascade stats`).

use std::sync::atomic::Ordering;

use super::engine::Engine;
use super::Db;
use crate::coding::ratio;
use crate::pmem::Backend;
use crate::stages::Stages;

/// A point-in-time summary of the store. New fields may be added in any release.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Index entries in FastStores (tombstones and shadowed keys count).
    pub faststore_entries: u64,
    /// Estimated DRAM bytes of the FastStore indexes.
    pub faststore_dram_bytes: u64,
    /// Current active FastStore generation.
    pub active_generation: u64,
    /// Immutable FastStores waiting for a flush (readable).
    pub immutable_faststores: u64,
    /// Buffer-trees.
    pub buffer_trees: u64,
    /// Tables in buffer-trees.
    pub buffer_tables: u64,
    /// Entries in buffer-tree tables.
    pub buffer_entries: u64,
    /// Table bytes of buffer-trees.
    pub buffer_bytes: u64,
    /// Estimated DRAM of the buffer-tree indexes.
    pub buffer_dram_bytes: u64,
    /// StableStore tables.
    pub stable_tables: u64,
    /// Entries in StableStore tables.
    pub stable_entries: u64,
    /// Table bytes of StableStore.
    pub stable_bytes: u64,
    /// Estimated DRAM of the StableStore index.
    pub stable_dram_bytes: u64,
    /// Log segments in use (live FastStores).
    pub log_segments: u64,
    /// Log bytes of the live FastStores (their segments' size).
    pub faststore_log_bytes: u64,
    /// Value-log segments: flushed log segments and cleaning output that tables point
    /// into.
    pub vlog_segments: u64,
    /// Pool bytes those segments take.
    pub vlog_bytes: u64,
    /// Value bytes in them that tables still reference (records, headers included).
    pub vlog_live_bytes: u64,
    /// The rest of `vlog_bytes`: overwritten or deleted values, space cleaning reclaims.
    pub vlog_dead_bytes: u64,
    /// Cleanings (compactions that moved values out of victim segments) since open.
    pub vlog_cleanings: u64,
    /// Value bytes cleaning moved since open.
    pub vlog_cleaned_bytes: u64,
    /// Time spent in cleaning compactions, microseconds.
    pub vlog_clean_micros: u64,
    /// Value-log segments released (no table points into them) since open, and their
    /// bytes.
    pub vlog_released_segments: u64,
    /// Bytes of the released segments.
    pub vlog_released_bytes: u64,
    /// Completed passes of the background scrubber over every table.
    pub scrub_passes: u64,
    /// Tables, blocks and bytes (blocks plus separated values) it read and verified.
    pub scrub_tables: u64,
    /// Blocks the scrubber verified.
    pub scrub_blocks: u64,
    /// Bytes the scrubber verified.
    pub scrub_bytes: u64,
    /// Damaged blocks or values the scrubber found (run `cascade verify`).
    pub scrub_errors: u64,
    /// The latest damage the scrubber found.
    pub scrub_last_error: Option<String>,
    /// Bytes the data needs: live values, tables, the FastStores' logs.
    pub live_bytes: u64,
    /// `pool_bytes_used / live_bytes`: what the store occupies per byte it needs.
    pub space_amplification: f64,
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
    /// How FastStore logs are made durable: "journal" (the sync journal, blocks
    /// written with `O_DIRECT`), "journal-dsync" (the same through the page cache, where
    /// the file system refuses `O_DIRECT`) or "fence" (the backend's fence).
    pub log_durability: &'static str,
    /// Sync-journal blocks written (each one durable device write).
    pub journal_blocks: u64,
    /// Log bytes those blocks carried.
    pub journal_bytes: u64,
    /// Journal checkpoints (the pool written back, journal slots freed).
    pub journal_checkpoints: u64,
    /// Times a writer waited for a checkpoint because the journal was full.
    pub journal_waits: u64,
    /// Live snapshots (open iterators).
    pub live_snapshots: u64,
    /// Largest LSN issued.
    pub max_lsn: u64,
    /// FastStore switches since open.
    pub faststore_switches: u64,
    /// Flushes since open, table bytes they wrote, and their time.
    pub flushes: u64,
    /// Table bytes written by flushes.
    pub flush_bytes: u64,
    /// Time spent flushing, microseconds.
    pub flush_micros: u64,
    /// Compactions since open.
    pub compactions: u64,
    /// Table bytes written by compactions.
    pub compaction_bytes: u64,
    /// Time spent compacting, microseconds.
    pub compaction_micros: u64,
    /// Tables moved to StableStore without a rewrite.
    pub moved_tables: u64,
    /// Log bytes appended since open.
    pub log_bytes_written: u64,
    /// Key + value bytes written by users since open.
    pub user_bytes_written: u64,
    /// (log + flush + compaction bytes) / user bytes, since open.
    pub write_amplification: f64,
    /// Times writers were slowed down by the memory budget, and the time they waited.
    pub stalls: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Load mode in effect: "write-heavy", "read-heavy" or "read-only".
    pub load_mode: &'static str,
    /// Reads and writes counted by the load tracker.
    pub reads: u64,
    /// Writes counted by the load tracker.
    pub writes: u64,
    /// Whether the previous session closed cleanly.
    pub recovered_clean: bool,
    /// Records replayed at open (entries loaded, when from a checkpoint).
    pub recovered_records: u64,
    /// The FastStore index came from the checkpoint of a clean close.
    pub recovered_from_checkpoint: bool,
    /// Open (recovery) time, microseconds.
    pub recovery_micros: u64,
    /// Slow tier (issue #14): files, partitions, tables, entries and bytes on it.
    pub slow_tier_files: u64,
    /// Key-range partitions.
    pub slow_tier_partitions: u64,
    /// Tables.
    pub slow_tier_tables: u64,
    /// Entries (tombstones and shadowed versions included).
    pub slow_tier_entries: u64,
    /// Table bytes on the slow tier.
    pub slow_tier_bytes: u64,
    /// DRAM of its index (table arrays, fence copies, filters).
    pub slow_tier_dram_bytes: u64,
    /// Gets answered by the slow tier.
    pub slow_gets: u64,
    /// Reads (`pread`s) from slow-tier files and their bytes.
    pub slow_reads: u64,
    /// Bytes read from slow-tier files.
    pub slow_bytes_read: u64,
    /// Of `slow_reads`, those made for gets (a data block or a blob): per slow get,
    /// the device reads a get from the slow tier costs.
    pub slow_point_reads: u64,
    /// Of `slow_point_reads`, those that bypassed the page cache
    /// (`Options::slow_direct_reads`).
    pub slow_direct_reads: u64,
    /// Demotions and the pool table bytes they moved.
    pub demotions: u64,
    /// Pool table bytes demoted.
    pub demoted_bytes: u64,
    /// Slow-tier merges.
    pub slow_merges: u64,
    /// Slow-tier partition splits.
    pub slow_splits: u64,
    /// Time in demotions, merges and splits, microseconds.
    pub slow_micros: u64,
    /// Bytes written to the slow tier.
    pub slow_bytes_written: u64,
    /// Write amplification of the fast tier: (log + flush + compaction bytes) / user bytes.
    pub fast_write_amplification: f64,
    /// Write amplification of the slow tier: bytes written there / bytes demoted into
    /// it (LightKV Fig. 9).
    pub slow_write_amplification: f64,
    /// The fast budget in effect: `Options::fast_budget`, or a quarter of the pool.
    pub fast_budget_bytes: u64,
    /// Compaction debt: StableStore bytes (with their separated values) over the fast
    /// budget plus slow-tier bytes in
    /// partitions due a merge or split.
    pub slow_debt_bytes: u64,
    /// Keys the popularity tracker follows now (issue #15; 0 without placement).
    pub tracker_keys: u64,
    /// Keys it evicted since open.
    pub tracker_evictions: u64,
    /// Its estimated DRAM bytes.
    pub tracker_dram_bytes: u64,
    /// Gets that found a key in the fast tier (counted with placement on; the slow
    /// tier's are `slow_gets`).
    pub fast_gets: u64,
    /// Gets of keys the pinning rule in force pinned (the pinned set's accesses).
    pub pinned_gets: u64,
    /// Share of found gets the fast tier served (with placement on).
    pub fast_get_share: f64,
    /// Share of found gets whose key was in the pinned set.
    pub pinned_get_share: f64,
    /// Share of tracked keys the pinning rule in force pins.
    pub pinned_fraction: f64,
    /// Entries demotions kept in the fast tier because they were pinned, and the
    /// table bytes rewritten for them.
    pub kept_entries: u64,
    /// Table bytes rewritten in the pool for kept entries.
    pub kept_bytes: u64,
    /// Entries demotions moved to the slow tier.
    pub demoted_entries: u64,
    /// Demotions that ignored pinning (every candidate looked wholly pinned).
    pub forced_demotions: u64,
    /// Promotion jobs, keys promoted to the fast tier and their bytes.
    pub promotion_jobs: u64,
    /// Keys promoted.
    pub promotions: u64,
    /// Key and value bytes promoted.
    pub promoted_bytes: u64,
    /// Read-triggered promotion epochs started, and cool-downs entered.
    pub read_epochs: u64,
    /// Cool-downs entered.
    pub read_cooldowns: u64,
}

impl Stats {
    /// Every field as `(name, value)` rows, in a stable order (for `cascade stats`,
    /// `INFO` and metrics).
    #[must_use]
    #[expect(clippy::too_many_lines, reason = "one row per field, in order")]
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let mut r: Vec<(&'static str, String)> = Vec::new();
        let mut n = |k: &'static str, v: u64| r.push((k, v.to_string()));
        n("faststore_entries", self.faststore_entries);
        n("faststore_dram_bytes", self.faststore_dram_bytes);
        n("active_generation", self.active_generation);
        n("immutable_faststores", self.immutable_faststores);
        n("buffer_trees", self.buffer_trees);
        n("buffer_tables", self.buffer_tables);
        n("buffer_entries", self.buffer_entries);
        n("buffer_bytes", self.buffer_bytes);
        n("buffer_dram_bytes", self.buffer_dram_bytes);
        n("stable_tables", self.stable_tables);
        n("stable_entries", self.stable_entries);
        n("stable_bytes", self.stable_bytes);
        n("stable_dram_bytes", self.stable_dram_bytes);
        n("log_segments", self.log_segments);
        n("faststore_log_bytes", self.faststore_log_bytes);
        n("vlog_segments", self.vlog_segments);
        n("vlog_bytes", self.vlog_bytes);
        n("vlog_live_bytes", self.vlog_live_bytes);
        n("vlog_dead_bytes", self.vlog_dead_bytes);
        n("vlog_cleanings", self.vlog_cleanings);
        n("vlog_cleaned_bytes", self.vlog_cleaned_bytes);
        n("vlog_clean_micros", self.vlog_clean_micros);
        n("vlog_released_segments", self.vlog_released_segments);
        n("vlog_released_bytes", self.vlog_released_bytes);
        n("live_bytes", self.live_bytes);
        n("pool_bytes_total", self.pool_bytes_total);
        n("pool_bytes_used", self.pool_bytes_used);
        n("pool_bytes_free", self.pool_bytes_free);
        n("chunk_size", self.chunk_size);
        n("live_snapshots", self.live_snapshots);
        n("max_lsn", self.max_lsn);
        n("faststore_switches", self.faststore_switches);
        n("flushes", self.flushes);
        n("flush_bytes", self.flush_bytes);
        n("flush_micros", self.flush_micros);
        n("compactions", self.compactions);
        n("compaction_bytes", self.compaction_bytes);
        n("compaction_micros", self.compaction_micros);
        n("moved_tables", self.moved_tables);
        n("log_bytes_written", self.log_bytes_written);
        n("user_bytes_written", self.user_bytes_written);
        n("stalls", self.stalls);
        n("stall_micros", self.stall_micros);
        n("reads", self.reads);
        n("writes", self.writes);
        n("recovered_records", self.recovered_records);
        n("recovery_micros", self.recovery_micros);
        n("scrub_passes", self.scrub_passes);
        n("scrub_tables", self.scrub_tables);
        n("scrub_blocks", self.scrub_blocks);
        n("scrub_bytes", self.scrub_bytes);
        n("scrub_errors", self.scrub_errors);
        n("slow_tier_files", self.slow_tier_files);
        n("slow_tier_partitions", self.slow_tier_partitions);
        n("slow_tier_tables", self.slow_tier_tables);
        n("slow_tier_entries", self.slow_tier_entries);
        n("slow_tier_bytes", self.slow_tier_bytes);
        n("slow_tier_dram_bytes", self.slow_tier_dram_bytes);
        n("slow_gets", self.slow_gets);
        n("slow_reads", self.slow_reads);
        n("slow_bytes_read", self.slow_bytes_read);
        n("slow_point_reads", self.slow_point_reads);
        n("slow_direct_reads", self.slow_direct_reads);
        n("demotions", self.demotions);
        n("demoted_bytes", self.demoted_bytes);
        n("slow_merges", self.slow_merges);
        n("slow_splits", self.slow_splits);
        n("slow_micros", self.slow_micros);
        n("slow_bytes_written", self.slow_bytes_written);
        n("slow_debt_bytes", self.slow_debt_bytes);
        n("fast_budget_bytes", self.fast_budget_bytes);
        n("tracker_keys", self.tracker_keys);
        n("tracker_evictions", self.tracker_evictions);
        n("tracker_dram_bytes", self.tracker_dram_bytes);
        n("fast_gets", self.fast_gets);
        n("pinned_gets", self.pinned_gets);
        n("kept_entries", self.kept_entries);
        n("kept_bytes", self.kept_bytes);
        n("demoted_entries", self.demoted_entries);
        n("forced_demotions", self.forced_demotions);
        n("promotion_jobs", self.promotion_jobs);
        n("promotions", self.promotions);
        n("promoted_bytes", self.promoted_bytes);
        n("read_epochs", self.read_epochs);
        n("read_cooldowns", self.read_cooldowns);
        for (k, v) in [
            ("fast_get_share", self.fast_get_share),
            ("pinned_get_share", self.pinned_get_share),
            ("pinned_fraction", self.pinned_fraction),
        ] {
            r.push((k, format!("{v:.3}")));
        }
        r.push((
            "fast_write_amplification",
            format!("{:.3}", self.fast_write_amplification),
        ));
        r.push((
            "slow_write_amplification",
            format!("{:.3}", self.slow_write_amplification),
        ));
        r.push((
            "write_amplification",
            format!("{:.3}", self.write_amplification),
        ));
        r.push((
            "space_amplification",
            format!("{:.3}", self.space_amplification),
        ));
        r.push(("load_mode", self.load_mode.to_string()));
        r.push(("backend", self.backend.to_string()));
        r.push(("log_durability", self.log_durability.to_string()));
        r.push(("journal_blocks", self.journal_blocks.to_string()));
        r.push(("journal_bytes", self.journal_bytes.to_string()));
        r.push(("journal_checkpoints", self.journal_checkpoints.to_string()));
        r.push(("journal_waits", self.journal_waits.to_string()));
        r.push(("recovered_clean", self.recovered_clean.to_string()));
        r.push((
            "recovered_from_checkpoint",
            self.recovered_from_checkpoint.to_string(),
        ));
        r
    }

    /// Estimated DRAM of all engine indexes.
    #[must_use]
    pub fn dram_bytes(&self) -> u64 {
        self.faststore_dram_bytes
            + self.buffer_dram_bytes
            + self.stable_dram_bytes
            + self.slow_tier_dram_bytes
    }
}

impl Db {
    /// Gathers statistics (locks each log slot briefly).
    pub fn stats(&self) -> Stats {
        let e = &*self.engine;
        let c = &e.counters;
        let stages = e.stages.load();
        let (reads, writes) = e.load.totals();
        let retained = e.manifest.retained();
        let mut s = Stats {
            active_generation: stages.active.generation(),
            immutable_faststores: stages.immutable.len() as u64,
            buffer_trees: stages.buffer.len() as u64,
            stable_tables: stages.stable.tables().len() as u64,
            stable_entries: stages.stable.tables().entries(),
            stable_bytes: stages.stable.tables().bytes(),
            stable_dram_bytes: stages.stable.tables().dram_bytes(),
            vlog_segments: retained.len() as u64,
            vlog_bytes: retained.iter().map(|(_, u)| u.span).sum::<u64>() * e.pool.chunk_size(),
            vlog_live_bytes: retained.live_bytes(),
            vlog_cleanings: ld(&c.cleanings),
            vlog_cleaned_bytes: ld(&c.cleaned_value_bytes),
            vlog_clean_micros: ld(&c.clean_micros),
            vlog_released_segments: ld(&c.released_segments),
            vlog_released_bytes: ld(&c.released_segment_bytes),
            pool_bytes_total: e.pool.chunk_count() * e.pool.chunk_size(),
            pool_bytes_used: e.pool.used_bytes(),
            pool_bytes_free: e.pool.free_bytes(),
            chunk_size: e.pool.chunk_size(),
            backend: match e.pool.backend() {
                Backend::Dax => "dax",
                Backend::Msync => "msync",
                Backend::Sim => "sim",
                Backend::Private => "private",
            },
            log_durability: match e.pool.journal() {
                Some(j) if j.direct() => "journal",
                Some(_) => "journal-dsync",
                None => "fence",
            },
            journal_blocks: e.pool.journal().map_or(0, |j| ld(&j.stats().blocks)),
            journal_bytes: e.pool.journal().map_or(0, |j| ld(&j.stats().bytes)),
            journal_checkpoints: e.pool.journal().map_or(0, |j| ld(&j.stats().checkpoints)),
            journal_waits: e.pool.journal().map_or(0, |j| ld(&j.stats().waits)),
            live_snapshots: e.snaps.live() as u64,
            max_lsn: e.lsns.max_issued(),
            faststore_switches: ld(&c.switches),
            flushes: ld(&c.flushes),
            flush_bytes: ld(&c.flush_bytes),
            flush_micros: ld(&c.flush_micros),
            compactions: ld(&c.compactions),
            compaction_bytes: ld(&c.compaction_bytes),
            compaction_micros: ld(&c.compaction_micros),
            moved_tables: ld(&c.moved_tables),
            log_bytes_written: ld(&c.retired_log_bytes),
            user_bytes_written: ld(&c.retired_user_bytes),
            stalls: ld(&c.stalls),
            stall_micros: ld(&c.stall_micros),
            load_mode: e.load.mode().name(),
            reads,
            writes,
            recovered_clean: e.recovery.clean_shutdown,
            recovered_records: e.recovery.records,
            recovered_from_checkpoint: e.recovery.from_checkpoint,
            recovery_micros: e.recovery.replay_micros,
            scrub_passes: ld(&e.scrub.passes),
            scrub_tables: ld(&e.scrub.tables),
            scrub_blocks: ld(&e.scrub.blocks),
            scrub_bytes: ld(&e.scrub.bytes),
            scrub_errors: ld(&e.scrub.errors),
            scrub_last_error: e.scrub.last_error.lock().clone(),
            ..Stats::default()
        };
        slow_stats(e, &stages, retained.live_bytes(), &mut s);
        placement_stats(e, &mut s);
        for fs in stages.fast() {
            s.faststore_entries += fs.index().len() as u64;
            s.faststore_dram_bytes += fs.dram_bytes();
            let segs = fs.segments();
            s.log_segments += segs.len() as u64;
            s.faststore_log_bytes += segs.iter().map(|x| x.bytes()).sum::<u64>();
            let (log, user) = fs.written();
            s.log_bytes_written += log;
            s.user_bytes_written += user;
        }
        for t in &stages.buffer {
            s.buffer_tables += t.tables.len() as u64;
            s.buffer_entries += t.tables.entries();
            s.buffer_bytes += t.tables.bytes();
            s.buffer_dram_bytes += t.tables.dram_bytes();
        }
        s.vlog_dead_bytes = s.vlog_bytes.saturating_sub(s.vlog_live_bytes);
        s.live_bytes = s.vlog_live_bytes + s.buffer_bytes + s.stable_bytes + s.faststore_log_bytes;
        // Space amplification stays a pool figure: the slow tier is not in the pool.
        s.space_amplification = ratio(s.pool_bytes_used, s.live_bytes);
        let fast = s.log_bytes_written + s.flush_bytes + s.compaction_bytes;
        s.fast_write_amplification = ratio(fast, s.user_bytes_written);
        s.write_amplification = ratio(fast + s.slow_bytes_written, s.user_bytes_written);
        s.slow_write_amplification = ratio(s.slow_bytes_written, ld(&c.slow_demote_bytes_written));
        s
    }
}

/// The slow tier's part of `s` (before the amplifications are derived).
fn slow_stats(e: &Engine, stages: &Stages, vlog_live: u64, s: &mut Stats) {
    let (c, slow) = (&e.counters, &stages.slow);
    s.slow_tier_files = slow.runs().count() as u64;
    s.slow_tier_partitions = slow.parts().len() as u64;
    s.slow_tier_tables = slow.tables().count() as u64;
    s.slow_tier_entries = slow.entries();
    s.slow_tier_bytes = slow.bytes();
    s.slow_tier_dram_bytes = slow.dram_bytes();
    s.slow_gets = ld(&c.slow_gets);
    s.demotions = ld(&c.demotions);
    s.demoted_bytes = ld(&c.demoted_bytes);
    s.slow_merges = ld(&c.slow_merges);
    s.slow_splits = ld(&c.slow_splits);
    s.slow_micros = ld(&c.slow_micros);
    s.slow_bytes_written = ld(&c.slow_bytes_written);
    if let Some(ctx) = &e.slow {
        s.fast_budget_bytes = e.fast_budget();
        s.slow_reads = ld(&ctx.io.reads);
        s.slow_bytes_read = ld(&ctx.io.read_bytes);
        s.slow_point_reads = ld(&ctx.io.point_reads);
        s.slow_direct_reads = ld(&ctx.io.direct_reads);
        s.slow_debt_bytes = super::slow::fast_bytes(stages.stable.tables().bytes(), vlog_live)
            .saturating_sub(e.fast_budget())
            + crate::slowtier::compact::debt(
                slow,
                e.opts.slow_merge_width,
                e.opts.slow_partition_bytes,
            );
    }
}

/// Popularity placement's part of `s` (issue #15).
fn placement_stats(e: &Engine, s: &mut Stats) {
    let Some(p) = &e.placement else {
        return;
    };
    let c = &p.counters;
    let t = &p.tracker;
    s.tracker_keys = t.len();
    s.tracker_evictions = t.evictions();
    s.tracker_dram_bytes = t.dram_bytes();
    s.fast_gets = ld(&c.fast_gets);
    s.pinned_gets = ld(&c.pinned_gets);
    let slow = ld(&c.slow_gets);
    s.fast_get_share = ratio(s.fast_gets, s.fast_gets + slow);
    s.pinned_get_share = ratio(s.pinned_gets, s.fast_gets + slow);
    let rule = p.rule();
    let dist = t.distribution();
    #[expect(clippy::cast_precision_loss, reason = "a share of counts")]
    let pinned: f64 = (0..4u8)
        .map(|c| rule.share(c) * dist[usize::from(c)] as f64)
        .sum();
    #[expect(clippy::cast_precision_loss, reason = "a share of counts")]
    let len = t.len().max(1) as f64;
    s.pinned_fraction = pinned / len;
    s.kept_entries = ld(&c.kept_entries);
    s.kept_bytes = ld(&c.kept_bytes);
    s.demoted_entries = ld(&c.demoted_entries);
    s.forced_demotions = ld(&c.forced_demotions);
    s.promotion_jobs = ld(&c.promotion_jobs);
    s.promotions = ld(&c.promotions);
    s.promoted_bytes = ld(&c.promoted_bytes);
    let trig = *p.trigger.lock();
    s.read_epochs = trig.epochs;
    s.read_cooldowns = trig.cooldowns;
}

/// A counter's value (counters are independent relaxed atomics).
fn ld(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}
