//! Opening a store: directory checks, the lock file, the pool, and recovery
//! (FluidKV §5.5).
//!
//! Recovery finds every log in the pool, frees chunks whose allocation never
//! completed, and replays the logs into one FastStore. Replay is order-independent —
//! `put_validate` keeps the largest LSN per key — so logs are replayed in parallel on
//! `Options::recovery_threads` threads; the result equals replaying all records merged
//! in LSN order. LSN counters restart above the largest LSN seen.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use super::lsn::Lsns;
use super::{Inner, Options, RecoveryInfo, Stages};
use crate::error::{Error, Result};
use crate::faststore::{entry_dram, FastStore, PutOutcome, Val, Version};
use crate::log::{self, Kind, LogInfo};
use crate::pmem::{Device, Pool, PoolGeometry};
use crate::snapshot::Snapshots;

/// Name of the pool file inside the data directory.
pub const POOL_FILE: &str = "pool";
/// Name of the lock file inside the data directory.
pub const LOCK_FILE: &str = "LOCK";

pub(crate) fn open(dir: PathBuf, opts: Options) -> Result<Inner> {
    opts.validate()?;
    if !dir.exists() {
        if !opts.create_if_missing {
            return Err(Error::NotAStore(dir));
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating data directory {}", dir.display()), e))?;
    }
    if !dir.is_dir() {
        return Err(Error::NotAStore(dir));
    }
    let lock = take_lock(&dir)?;
    let pool_path = dir.join(POOL_FILE);
    let device = match &opts.sim_device {
        Some(d) => Device::Sim(d.clone()),
        None => Device::File { dax: opts.dax },
    };
    if opts.sim_device.is_none() && !pool_path.exists() && has_foreign_files(&dir)? {
        return Err(Error::NotAStore(dir));
    }
    let geo = PoolGeometry {
        pool_size: opts.pool_size,
        chunk_size: opts.chunk_size,
    };
    let pool = Arc::new(Pool::open(
        &pool_path,
        &device,
        geo,
        opts.create_if_missing,
    )?);
    let mut info = RecoveryInfo {
        created: pool.created(),
        clean_shutdown: !pool.created() && pool.allocator().was_clean(),
        ..RecoveryInfo::default()
    };
    // From here on the store is "open": a crash is no longer a clean shutdown.
    if !pool.created() {
        pool.allocator().set_clean(pool.mem(), false)?;
    }
    let start = Instant::now();
    let disc = log::discover(&pool)?;
    let generation = disc.logs.iter().map(|l| l.generation).max().unwrap_or(0) + 1;
    let snaps = Snapshots::default();
    let fs = Arc::new(FastStore::new(&pool, generation, opts.log_slots));
    let max_lsn = replay_all(&pool, &fs, &disc.logs, &snaps, &opts, &mut info)?;
    info.logs = disc.logs.len() as u64;
    info.replay_micros = start.elapsed().as_micros() as u64;
    let active_bytes = fs.dram_bytes();
    Ok(Inner {
        dir,
        pool,
        stages: ArcSwap::from_pointee(Stages {
            active: fs,
            immutable: Vec::new(),
        }),
        lsns: Lsns::new(max_lsn + 1),
        snaps,
        switch_lock: Mutex::new(()),
        next_generation: AtomicU64::new(generation + 1),
        closed: AtomicBool::new(false),
        poison: Mutex::new(None),
        poisoned: AtomicBool::new(false),
        recovery: info,
        switches: AtomicU64::new(0),
        active_bytes: AtomicU64::new(active_bytes),
        opts,
        _lock: lock,
    })
}

fn take_lock(dir: &Path) -> Result<std::fs::File> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(path)),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("locking the store", e)),
    }
}

fn has_foreign_files(dir: &Path) -> Result<bool> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io("listing the data directory", e))?;
    for e in rd {
        let e = e.map_err(|e| Error::io("listing the data directory", e))?;
        if e.file_name() != LOCK_FILE {
            return Ok(true);
        }
    }
    Ok(false)
}

fn replay_all(
    pool: &Arc<Pool>,
    fs: &Arc<FastStore>,
    logs: &[LogInfo],
    snaps: &Snapshots,
    opts: &Options,
    info: &mut RecoveryInfo,
) -> Result<u64> {
    let inline = opts.inline_threshold;
    let threads = opts.recovery_threads;
    let threads = threads.clamp(1, logs.len().max(1));
    let results: Vec<Result<(u64, u64, u64, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<(u64, u64, u64, u64)> {
                    let (mut recs, mut torn, mut max, mut dram) = (0, 0, 0, 0u64);
                    for log in logs.iter().skip(t).step_by(threads) {
                        let end = log::replay(pool, log, |r, addr| {
                            let val = match r.kind {
                                Kind::Delete => Val::Tomb,
                                _ if r.value.len() <= inline => Val::inline(r.value),
                                _ => Val::Addr {
                                    addr,
                                    len: r.value.len() as u32,
                                },
                            };
                            let d = entry_dram(r.key.len(), &val);
                            let v = Version {
                                lsn: r.lsn,
                                epoch: 0,
                                val,
                            };
                            if fs.index().put_validate(r.key, v, snaps) == PutOutcome::Inserted {
                                dram += d;
                            }
                            Ok(())
                        })?;
                        recs += end.records;
                        torn += end.torn_batch_records;
                        max = max.max(end.max_lsn);
                    }
                    Ok((recs, torn, max, dram))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Internal("recovery thread panicked".into())))
            })
            .collect()
    });
    let mut max_lsn = 0;
    let mut dram = 0;
    for r in results {
        let (recs, torn, max, d) = r?;
        info.records += recs;
        info.torn_batch_records += torn;
        max_lsn = max_lsn.max(max);
        dram += d;
    }
    fs.add_recovered(
        logs.iter()
            .flat_map(|l| l.segments.iter().map(|s| (s.chunk, s.span))),
        dram as usize,
    );
    Ok(max_lsn)
}
