//! The engines a benchmark can drive, behind one trait so CascadeKV and its peers run
//! the same workload code in the same process, one after another.
//!
//! * `cascade` — CascadeKV as configured (all three stages).
//! * `dram-index` — the upper bound FluidKV and FlatStore compare against: the same
//!   concurrent DRAM index with the same thread-exclusive logs, but no stages: nothing
//!   is ever flushed, every key stays indexed in DRAM.
//! * `cascade-hikv`, `dram-hikv` — the same two with HiKV's hybrid FastStore index
//!   (`Options::hash_index`).
//! * `rocksdb` — RocksDB through the `rocksdb` crate, in the separate
//!   `cascade-bench-rocksdb` crate (enable with `--features rocksdb` on `cascade`).
//!
//! Engines are `Send + Sync`; worker threads share one instance.

use cascadekv::{Db, Durability, Options};

/// Sizes an engine reports after a workload.
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineStats {
    /// Bytes on the fast tier (pool file / RocksDB directory on the fast device).
    pub fast_tier_bytes: u64,
    /// Bytes on the slow tier (CascadeKV: slow-tier table files; RocksDB: SST files
    /// in the slow `db_paths` entry); 0 without a slow directory.
    pub slow_tier_bytes: u64,
    /// Bytes written to storage / bytes written by users, if the engine knows.
    pub write_amp: f64,
    /// Write amplification of the fast tier alone, if the engine knows (0 if not).
    pub fast_write_amp: f64,
    /// Write amplification of the slow tier: bytes written there / bytes moved into
    /// it, if the engine knows (0 if not, or with no slow tier).
    pub slow_write_amp: f64,
    /// Point reads since open, as the engine counts them (0 if it does not).
    pub gets: u64,
    /// Of those, reads the slow tier answered (0 if unknown).
    pub slow_gets: u64,
    /// Slow-tier file reads made for point reads (0 if unknown).
    pub slow_point_reads: u64,
    /// Reads of keys the engine's popularity mapper pinned in the fast tier (0 if
    /// unknown; CascadeKV with a slow tier).
    pub pinned_gets: u64,
    /// Keys promoted from the slow tier to the fast one (0 if unknown).
    pub promotions: u64,
    /// Bytes written to the slow tier (0 if unknown).
    pub slow_bytes_written: u64,
    /// The engine's own estimate of its DRAM use (indexes, caches), if it has one.
    pub engine_dram_bytes: u64,
}

/// Operations a workload needs.
pub trait Engine: Send + Sync {
    /// Short name used in reports.
    fn name(&self) -> &str;
    /// Sets a key.
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Sets every pair of `pairs` atomically, as one write batch (`fillbatch`).
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn put_batch(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String>;
    /// Reads a key.
    ///
    /// # Errors
    ///
    /// The engine's error, as text (a missing key is `Ok(None)`).
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Reads a value into `out` (reused across calls, so the engine need not
    /// allocate per read); returns whether the key was found. The read workloads
    /// use this; engines without such an API copy from [`Engine::get`].
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        let got = self.get(key)?;
        out.clear();
        if let Some(v) = &got {
            out.extend_from_slice(v);
        }
        Ok(got.is_some())
    }
    /// Deletes a key.
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn delete(&self, key: &[u8]) -> Result<(), String>;
    /// Reads up to `n` pairs from the first key `>= start`; returns how many it read
    /// and leaves the last key read in `last` (unchanged if none).
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn scan(&self, start: &[u8], n: usize, last: &mut Vec<u8>) -> Result<usize, String>;
    /// Moves buffered data to its final place (CascadeKV: flush + compact; RocksDB:
    /// flush memtables + wait for compactions). Used by `settle`.
    ///
    /// # Errors
    ///
    /// The engine's error, as text.
    fn settle(&self) -> Result<(), String>;
    /// Current sizes.
    fn stats(&self) -> EngineStats;
    /// Every statistic the engine has, as name/value rows (empty if it has none).
    fn stat_rows(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// CascadeKV behind the [`Engine`] trait.
pub struct CascadeEngine {
    name: String,
    db: Db,
    durability: Durability,
}

impl CascadeEngine {
    /// Opens CascadeKV in `dir` with `opts`.
    ///
    /// # Errors
    ///
    /// [`Db::open`]'s error, as text.
    pub fn open(name: &str, dir: &std::path::Path, opts: Options) -> Result<Self, String> {
        let durability = opts.durability;
        let db = Db::open(dir, opts).map_err(|e| e.to_string())?;
        Ok(CascadeEngine {
            name: name.to_string(),
            db,
            durability,
        })
    }

    /// The `dram-index` peer: the same index and logs, stages switched off.
    ///
    /// # Errors
    ///
    /// [`Db::open`]'s error, as text.
    pub fn open_dram_index(dir: &std::path::Path, opts: Options) -> Result<Self, String> {
        Self::open_dram_index_named("dram-index", dir, opts)
    }

    /// A FastStore-only peer named `name` (stages switched off as for `dram-index`).
    ///
    /// # Errors
    ///
    /// [`Db::open`]'s error, as text.
    pub fn open_dram_index_named(
        name: &str,
        dir: &std::path::Path,
        opts: Options,
    ) -> Result<Self, String> {
        // Nothing is ever flushed, so nothing could reach a slow tier either.
        let opts = Options {
            faststore_capacity: u64::MAX / 4,
            background: false,
            flush_when_read_only: false,
            slow_dir: None,
            ..opts
        };
        Self::open(name, dir, opts)
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl Engine for CascadeEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db
            .put_with(key, value, self.durability)
            .map_err(|e| e.to_string())
    }

    fn put_batch(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
        let mut b = cascadekv::WriteBatch::new();
        for (k, v) in pairs {
            b.put(k.as_slice(), v.as_slice());
        }
        self.db
            .write_with(&b, self.durability)
            .map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get(key).map_err(|e| e.to_string())
    }

    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, String> {
        self.db.get_into(key, out).map_err(|e| e.to_string())
    }

    fn delete(&self, key: &[u8]) -> Result<(), String> {
        self.db
            .delete_with(key, self.durability)
            .map_err(|e| e.to_string())
    }

    fn scan(&self, start: &[u8], n: usize, last: &mut Vec<u8>) -> Result<usize, String> {
        let pairs = self
            .db
            .scan(Some(start), None, n)
            .map_err(|e| e.to_string())?;
        if let Some((k, _)) = pairs.last() {
            last.clear();
            last.extend_from_slice(k);
        }
        Ok(pairs.len())
    }

    fn settle(&self) -> Result<(), String> {
        if self.db.options().background || !self.name.starts_with("dram-") {
            self.db.flush_faststore().map_err(|e| e.to_string())?;
            self.db.compact().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn stat_rows(&self) -> Vec<(String, String)> {
        self.db
            .stats()
            .rows()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    fn stats(&self) -> EngineStats {
        let s = self.db.stats();
        EngineStats {
            fast_tier_bytes: s.pool_bytes_used,
            slow_tier_bytes: s.slow_tier_bytes,
            write_amp: s.write_amplification,
            fast_write_amp: s.fast_write_amplification,
            slow_write_amp: s.slow_write_amplification,
            gets: s.reads,
            slow_gets: s.slow_gets,
            slow_point_reads: s.slow_point_reads,
            pinned_gets: s.pinned_gets,
            promotions: s.promotions,
            slow_bytes_written: s.slow_bytes_written,
            engine_dram_bytes: s.dram_bytes(),
        }
    }
}
