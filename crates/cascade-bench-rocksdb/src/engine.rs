//! [`RocksEngine`]: a RocksDB instance behind [`Engine`], configured by [`open`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cascade_bench::engine::{Engine, EngineStats};
use rocksdb::statistics::{StatsLevel, Ticker};
use rocksdb::{
    properties, BlockBasedOptions, Cache, DBCompressionType, DBPath, Options,
    WaitForCompactOptions, WriteOptions, DB,
};

/// Target size of the slow `db_paths` entry: large enough never to be reached (the
/// last path takes whatever does not fit the ones before it anyway).
const SLOW_TARGET_BYTES: u64 = 1 << 50;

/// RocksDB behind the benchmark [`Engine`] trait. Shared by all worker threads.
pub struct RocksEngine {
    db: DB,
    dir: PathBuf,
    /// The slow `db_paths` directory, if RocksDB was given one.
    slow_dir: Option<PathBuf>,
    /// Kept for the statistics tickers (shared with the open DB) and the cache.
    opts: Options,
    cache: Cache,
    write_opts: WriteOptions,
    /// Key + value bytes passed to `put`/`delete`: the same definition of "user
    /// bytes" as CascadeKV's `user_bytes_written`, so write amplifications compare.
    user_bytes: AtomicU64,
}

/// Opens (or creates) RocksDB in `dir`. `sync` fsyncs the WAL on every write;
/// `block_cache_bytes` sizes the LRU block cache. See the crate docs for the rest of
/// the configuration.
///
/// # Errors
///
/// RocksDB's error opening `dir`, as text.
pub fn open(dir: &Path, sync: bool, block_cache_bytes: usize) -> Result<RocksEngine, String> {
    open_tiered(dir, sync, block_cache_bytes, None, false)
}

/// Like [`open`]; with `slow` = `(slow_dir, fast_bytes)`, RocksDB gets two `db_paths`:
/// `dir` with a target of `fast_bytes` and `slow_dir` with an unbounded one, so SST
/// files of the levels that do not fit the fast budget go to `slow_dir` (the WAL,
/// manifest and flushed L0 files stay in `dir`). Reopen with the same `slow`.
/// `direct_reads` sets `use_direct_reads` (`O_DIRECT` for SST reads in both
/// directories), to compare with `cascade bench --slow-direct-reads`.
///
/// # Errors
///
/// RocksDB's error opening `dir` or setting up the paths, as text.
pub fn open_tiered(
    dir: &Path,
    sync: bool,
    block_cache_bytes: usize,
    slow: Option<(&Path, u64)>,
    direct_reads: bool,
) -> Result<RocksEngine, String> {
    let cache = Cache::new_lru_cache(block_cache_bytes);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_block_cache(&cache);

    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.increase_parallelism(2);
    opts.set_max_background_jobs(2);
    opts.set_compression_type(DBCompressionType::None);
    opts.set_bottommost_compression_type(DBCompressionType::None);
    opts.set_block_based_table_factory(&table);
    opts.enable_statistics();
    opts.set_statistics_level(StatsLevel::ExceptHistogramOrTimers);
    opts.set_use_direct_reads(direct_reads);
    if let Some((slow_dir, fast_bytes)) = slow {
        let path = |p: &Path, size: u64| {
            DBPath::new(p, size).map_err(|e| format!("rocksdb db_path {}: {e}", p.display()))
        };
        opts.set_db_paths(&[path(dir, fast_bytes)?, path(slow_dir, SLOW_TARGET_BYTES)?]);
    }

    let db = DB::open(&opts, dir).map_err(|e| format!("rocksdb open {}: {e}", dir.display()))?;
    let mut write_opts = WriteOptions::default();
    write_opts.set_sync(sync);
    write_opts.disable_wal(false);
    Ok(RocksEngine {
        db,
        dir: dir.to_path_buf(),
        slow_dir: slow.map(|(d, _)| d.to_path_buf()),
        opts,
        cache,
        write_opts,
        user_bytes: AtomicU64::new(0),
    })
}

impl RocksEngine {
    /// The database, for callers that want RocksDB-specific calls.
    #[must_use]
    pub fn db(&self) -> &DB {
        &self.db
    }

    /// A statistics ticker, found by its name in RocksDB's statistics dump
    /// (`rocksdb.wal.bytes COUNT : 123`) rather than by its number, which differs
    /// between RocksDB versions (a build against a system RocksDB, see build.rs).
    fn ticker(&self, t: Ticker) -> u64 {
        let Some(dump) = self.opts.get_statistics() else {
            return 0;
        };
        dump.lines()
            .find_map(|l| {
                let rest = l.strip_prefix(t.name())?.trim_start();
                rest.strip_prefix("COUNT : ")?.trim().parse().ok()
            })
            .unwrap_or(0)
    }

    fn int_property(&self, name: &rocksdb::properties::PropName) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    /// Bytes of SST and WAL files directly in the database directory (RocksDB keeps
    /// them flat there). Manifest, options and info-log files are not counted.
    fn file_bytes(&self) -> u64 {
        dir_bytes(&self.dir, &[".sst", ".log"])
    }

    /// Bytes of SST files in the slow `db_paths` directory (0 without one).
    fn slow_file_bytes(&self) -> u64 {
        self.slow_dir
            .as_deref()
            .map_or(0, |d| dir_bytes(d, &[".sst"]))
    }
}

/// Bytes of the regular files directly in `dir` whose names end with one of `suffixes`
/// (0 if `dir` cannot be read).
fn dir_bytes(dir: &Path, suffixes: &[&str]) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            suffixes.iter().any(|s| name.ends_with(s))
        })
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}

impl Engine for RocksEngine {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db
            .put_opt(key, value, &self.write_opts)
            .map_err(|e| e.to_string())?;
        self.user_bytes
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(())
    }

    fn put_batch(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut b = rocksdb::WriteBatch::default();
        let mut bytes = 0;
        for (k, v) in pairs {
            b.put(k, v);
            bytes += k.len() + v.len();
        }
        self.db
            .write_opt(b, &self.write_opts)
            .map_err(|e| e.to_string())?;
        self.user_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get(key).map_err(|e| e.to_string())
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        // PinnableSlice: the value is borrowed from the block cache or memtable and
        // copied once, into the reused buffer.
        let pinned = self.db.get_pinned(key).map_err(|e| e.to_string())?;
        out.clear();
        if let Some(v) = &pinned {
            out.extend_from_slice(v);
        }
        Ok(pinned.is_some())
    }

    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.db
            .delete_opt(key, &self.write_opts)
            .map_err(|e| e.to_string())?;
        self.user_bytes
            .fetch_add(key.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Raw iterator: one seek, then `next` per pair. Values are read in place
    /// (RocksDB's zero-copy slices); each key is copied into `last`, so `last` ends
    /// as the last key read.
    fn scan(&self, start: &[u8], n: usize, last: &mut Vec<u8>) -> Result<usize, String> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let mut count = 0;
        while count < n && it.valid() {
            if let Some(k) = it.key() {
                last.clear();
                last.extend_from_slice(k);
            }
            std::hint::black_box(it.value());
            count += 1;
            if count < n {
                it.next();
            }
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(count)
    }

    /// Flushes the memtables (`flush()`, waits for the flush), then waits for every
    /// queued and running background compaction (`wait_for_compact`, which also
    /// flushes anything written since). It does not force a full manual compaction
    /// (`compact_range(None, None)`): the LSM is left in the shape RocksDB's own
    /// compaction picker settles on, as in a steady state.
    fn settle(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())?;
        let mut wait = WaitForCompactOptions::default();
        wait.set_flush(true);
        self.db.wait_for_compact(&wait).map_err(|e| e.to_string())
    }

    /// * `fast_tier_bytes`: SST + WAL files in the directory.
    /// * `slow_tier_bytes`: SST files in the slow `db_paths` directory (0 without).
    /// * `write_amp`: (WAL + flush + compaction bytes written, from RocksDB's
    ///   statistics tickers) / key + value bytes written by users — the same
    ///   definition CascadeKV uses (log + flush + compaction over user bytes).
    /// * `engine_dram_bytes`: block cache usage + all memtables
    ///   (`rocksdb.cur-size-all-mem-tables`) + table readers' index and filter blocks
    ///   held outside the cache (`rocksdb.estimate-table-readers-mem`). RocksDB
    ///   allocates through C++ `new`, which the Rust counting allocator never sees.
    /// * `fast_write_amp`: `write_amp` without a slow directory. With one, the
    ///   per-tier write amplifications and slow-tier gets are not reported (0):
    ///   RocksDB's tickers do not split them by path.
    fn stats(&self) -> EngineStats {
        let user = self.user_bytes.load(Ordering::Relaxed);
        let written = self.ticker(Ticker::WalFileBytes)
            + self.ticker(Ticker::FlushWriteBytes)
            + self.ticker(Ticker::CompactWriteBytes);
        #[expect(
            clippy::cast_precision_loss,
            reason = "byte counts far below 2^53, as a ratio"
        )]
        let write_amp = if user == 0 {
            0.0
        } else {
            written as f64 / user as f64
        };
        let dram = self.cache.get_usage() as u64
            + self.int_property(properties::CUR_SIZE_ALL_MEM_TABLES)
            + self.int_property(properties::ESTIMATE_TABLE_READERS_MEM);
        EngineStats {
            fast_tier_bytes: self.file_bytes(),
            slow_tier_bytes: self.slow_file_bytes(),
            write_amp,
            // Without a slow path every byte is written to the fast directory.
            fast_write_amp: if self.slow_dir.is_none() {
                write_amp
            } else {
                0.0
            },
            engine_dram_bytes: dram,
            ..EngineStats::default()
        }
    }
}
