//! Opening a store: directory checks, the lock file, the pool, then recovery
//! (`recovery.rs`, FluidKV §5.5) and the engine state it starts from.
//!
//! Order: the pool is opened (header and bitmap validated) and marked "not cleanly
//! closed" before anything else is written, so a crash from here on is never taken for
//! a clean shutdown.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::background::Signal;
use super::engine::{Counters, Engine};
use super::load::LoadTracker;
use super::recovery::{load_tables, release_unreferenced, restore_faststore, value_candidates};
use super::{Options, RecoveryInfo};
use crate::epoch::Snapshots;
use crate::error::{Error, Result};
use crate::faststore::{FastStore, Lsns};
use crate::log::{self, LogInfo};
use crate::manifest::{self, Manifest};
use crate::pmem::{journal, Device, Pool, PoolGeometry};
use crate::slowtier;
use crate::stages::{StageSet, Stages};
use crate::table::builder::TableOptions;

/// Largest default FastStore log capacity: beyond it, logs outgrow the live data of
/// most stores and dominate the footprint (the value log then holds the same values
/// once they are flushed).
const LOG_CAPACITY_MAX: u64 = 256 << 20;

/// Name of the pool file inside the data directory.
pub(crate) const POOL_FILE: &str = "pool";
/// Name of the lock file inside the data directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

pub(crate) fn open(dir: PathBuf, opts: Options) -> Result<Engine> {
    open_with(dir, opts, false)
}

/// Opens the store with its pool mapped copy-on-write (`Device::Private`) when
/// `private`: recovery runs as usual but nothing it writes reaches the file. The lock
/// file is taken (a running server keeps it) but never created.
pub(crate) fn open_with(dir: PathBuf, opts: Options, private: bool) -> Result<Engine> {
    opts.validate()?;
    let (pool, lock, redone) = if private {
        open_private_pool(&dir, &opts, false)?
    } else {
        open_pool(&dir, &opts)?
    };
    let mut info = start_info(&pool, redone.applied);
    // From here on the store is "open": a crash is no longer a clean shutdown.
    if !pool.created() {
        pool.allocator().set_clean(pool.mem(), false)?;
    }
    let start = Instant::now();
    let mut disc = log::discover(&pool)?;
    // The manifest says which tables are live and which generations are flushed.
    let man = manifest::recover(&pool, &disc.manifests)?;
    pool.free_chunks(&man.stale)?;
    let mut state = man.state;
    // Logs of flushed generations are not replayed; their segments (and value chunks
    // written by cleaning) are kept only where tables point into them.
    let (flushed, live): (Vec<LogInfo>, Vec<LogInfo>) = std::mem::take(&mut disc.logs)
        .into_iter()
        .partition(|l| l.generation <= state.flushed_generation);
    let values = value_candidates(&pool, &disc, &flushed);
    let (buffer, stable) = load_tables(&pool, &disc, &mut state, &values)?;
    let slow_io = slow_io(&opts)?;
    let slow = slowtier::open::open(
        &dir,
        opts.slow_dir.as_deref(),
        &state.slow,
        private,
        &slow_io,
    )?;
    info.slow_orphans = slow.orphans as u64;
    release_unreferenced(&pool, values, &mut state.retained)?;
    // The new FastStore's generation follows every log's and every flushed one.
    let generation = live
        .iter()
        .fold(state.flushed_generation, |g, l| g.max(l.generation))
        + 1;
    let snaps = Arc::new(Snapshots::default());
    let fs = Arc::new(FastStore::with_group(
        &pool,
        generation,
        opts.log_slots,
        opts.sync_group_size,
        &super::engine::index_kind(&opts, &snaps),
    ));
    let max_lsn = restore_faststore(&pool, &fs, &disc, &live, &opts, &mut info)?;
    info.logs = live.len() as u64;
    info.tables = state.all_lsts().count() as u64;
    let topts = TableOptions {
        block_size: opts.block_size,
        max_bytes: opts.table_max_bytes,
        ids: Arc::new(AtomicU64::new(state.next_lst_id.max(1))),
        stable_filters: opts.stable_filters,
    };
    let old = man.current.map_or_else(Vec::new, |m| {
        m.segments.iter().map(|s| (s.chunk, s.span)).collect()
    });
    let slow_ctx = slow_ctx(&opts, &topts, state.slow.next_file, slow_io);
    let manifest = Manifest::open(pool.clone(), state, old);
    info.replay_micros = crate::coding::micros(start.elapsed());
    let (active_bytes, active_log_bytes) = (fs.dram_bytes(), fs.recovered_log_bytes());
    let (log_capacity, log_capacity_write_heavy) = size_pool_use(&opts, &pool);
    Ok(Engine {
        placement: placement(&opts, &pool, slow_ctx.is_some()),
        dir,
        pool,
        stages: StageSet::new(Stages {
            active: fs,
            immutable: Vec::new(),
            buffer,
            stable: Arc::new(stable),
            slow: Arc::new(slow.tier),
        }),
        flush_lock: Mutex::new(()),
        compact_lock: Mutex::new(()),
        slow_lock: Mutex::new(()),
        slow: slow_ctx,
        manifest,
        topts,
        lsns: Lsns::new(max_lsn + 1),
        snaps,
        next_generation: AtomicU64::new(generation + 1),
        closed: AtomicBool::new(false),
        poison: Mutex::new(None),
        poisoned: AtomicBool::new(false),
        recovery: info,
        counters: Counters::default(),
        scrub: crate::integrity::scrub::ScrubCounters::default(),
        active_bytes: AtomicU64::new(active_bytes),
        active_log_bytes: AtomicU64::new(active_log_bytes),
        log_capacity,
        log_capacity_write_heavy,
        space_blocked: AtomicBool::new(false),
        load: LoadTracker::default(),
        bg: Signal::default(),
        opts,
        _lock: lock,
        _slow_lock: slow.lock,
    })
}

/// What recovery knows before it reads anything: created or clean, journal blocks
/// redone.
fn start_info(pool: &Pool, redone: u64) -> RecoveryInfo {
    RecoveryInfo {
        created: pool.created(),
        clean_shutdown: !pool.created() && pool.allocator().was_clean(),
        journal_blocks_redone: redone,
        ..RecoveryInfo::default()
    }
}

/// Placement state for a store with a slow tier (`None` without one, or with
/// popularity off: no pinning and key-order demotion).
fn placement(opts: &Options, pool: &Pool, slow: bool) -> Option<crate::placement::Placement> {
    if !slow
        || (opts.pin_fraction <= 0.0 && opts.demotion_policy == super::DemotionPolicy::KeyOrder)
    {
        return None;
    }
    let budget = match opts.fast_budget {
        0 => pool.chunk_count() * pool.chunk_size() / 4,
        b => b,
    };
    // A fixed seed: the same operations place data the same way (reproducible runs
    // and tests); the choices need spread, not secrecy.
    let seed = 0x5EED_CA5C_ADE0_0001;
    Some(crate::placement::Placement::new(
        opts.tracker_keys,
        // Until the first pinning rule: entries of about 1 KiB.
        crate::placement::tracker_keys((budget / 1024).saturating_mul(7) / 10),
        opts.demotion_policy,
        opts.pin_fraction,
        opts.promote_epoch_ops,
        opts.promote_cooldown_ops,
        seed,
    ))
}

/// Sets the headroom ordinary writes leave for deletes and background work (1/32 of
/// the pool, at least 4 chunks, at most a quarter) and returns the log bytes at which
/// the active FastStore is switched, plainly and while writes dominate
/// (`faststore_write_heavy_factor` times as many, at most a quarter of the pool).
fn size_pool_use(opts: &Options, pool: &Pool) -> (u64, u64) {
    let n = pool.chunk_count();
    pool.set_headroom((n / 32).max(4).min(n / 4));
    let cs = pool.chunk_size();
    let plain = if opts.faststore_log_capacity == 0 {
        (n * cs / 16).min(LOG_CAPACITY_MAX).max(4 * cs)
    } else {
        opts.faststore_log_capacity
    };
    let write_heavy = plain
        .saturating_mul(u64::from(opts.faststore_write_heavy_factor))
        .min(n * cs / 4)
        .max(plain);
    (plain, write_heavy)
}

/// The slow tier's read counters and read mode; with `slow_direct_reads`, first
/// checks that the slow directory takes `O_DIRECT`.
fn slow_io(opts: &Options) -> Result<Arc<crate::slowtier::file::SlowIo>> {
    let direct = match (opts.slow_direct_reads, opts.slow_dir.as_deref()) {
        (true, Some(d)) => {
            crate::slowtier::direct::check_direct(d)?;
            true
        }
        _ => false,
    };
    Ok(Arc::new(crate::slowtier::file::SlowIo::new(direct)))
}

/// What slow-tier jobs need, if the store has a slow directory.
fn slow_ctx(
    opts: &Options,
    topts: &TableOptions,
    next_file: u64,
    io: Arc<crate::slowtier::file::SlowIo>,
) -> Option<crate::slowtier::compact::Ctx> {
    opts.slow_dir
        .as_ref()
        .map(|d| crate::slowtier::compact::Ctx {
            dir: d.clone(),
            block_size: opts.slow_block_size,
            ids: topts.ids.clone(),
            files: Arc::new(AtomicU64::new(next_file.max(1))),
            pace: crate::slowtier::writer::Pace {
                rate: opts.slow_write_rate,
            },
            io,
            demote_from: Mutex::new(Vec::new()),
            behind: AtomicBool::new(false),
        })
}

/// Checks the directory, takes the lock file and opens (or creates) the pool.
/// The pool, the lock file and what the sync journal's redo did.
type Opened = (Arc<Pool>, std::fs::File, journal::redo::Redone);

fn open_pool(dir: &Path, opts: &Options) -> Result<Opened> {
    if !dir.exists() {
        if !opts.create_if_missing {
            return Err(Error::NotAStore(dir.to_path_buf()));
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating data directory {}", dir.display()), e))?;
    }
    if !dir.is_dir() {
        return Err(Error::NotAStore(dir.to_path_buf()));
    }
    let lock = take_lock(dir)?;
    let pool_path = dir.join(POOL_FILE);
    let device = match &opts.sim_device {
        Some(d) => Device::Sim(d.clone()),
        None => Device::File { dax: opts.dax },
    };
    if opts.sim_device.is_none() && !pool_path.exists() && has_foreign_files(dir)? {
        return Err(Error::NotAStore(dir.to_path_buf()));
    }
    let geo = PoolGeometry {
        pool_size: opts.pool_size,
        chunk_size: opts.effective_chunk_size(),
    };
    let mut pool = Pool::open(&pool_path, &device, geo, opts.create_if_missing)?;
    pool.set_log_io(
        crate::pmem::persist::LogIo {
            pwrite: opts.log_pwrite,
            prewrite: opts.log_prewrite,
            fdatasync: opts.log_fdatasync,
        }
        .with_env(),
    );
    let redone = attach_journal(&mut pool, dir, opts)?;
    Ok((Arc::new(pool), lock, redone))
}

/// Redoes and starts the sync journal (`pmem/journal/`) before anything reads the
/// pool's logs.
fn attach_journal(pool: &mut Pool, dir: &Path, opts: &Options) -> Result<journal::redo::Redone> {
    let clean = !pool.created() && pool.allocator().was_clean();
    let cfg = journal::Config {
        want: opts.sync_journal,
        size: opts.journal_size,
    };
    journal::attach(pool, dir, cfg, clean)
}

/// The lock (if the store has a lock file) and the pool mapped copy-on-write; with
/// `rebuild`, a damaged pool header or bitmap is rebuilt in the private mapping.
pub(crate) fn open_private_pool(dir: &Path, opts: &Options, rebuild: bool) -> Result<Opened> {
    let pool_path = dir.join(POOL_FILE);
    if !pool_path.is_file() {
        return Err(Error::NotAStore(dir.to_path_buf()));
    }
    let lock_path = dir.join(LOCK_FILE);
    let lock = std::fs::File::open(if lock_path.exists() {
        &lock_path
    } else {
        &pool_path
    })
    .map_err(|e| Error::io(format!("opening {}", lock_path.display()), e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Err(Error::Locked(lock_path)),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("locking the store", e)),
    }
    let geo = PoolGeometry {
        pool_size: opts.pool_size,
        chunk_size: opts.effective_chunk_size(),
    };
    let mut pool = Pool::open(&pool_path, &Device::Private { rebuild }, geo, false)?;
    let redone = attach_journal(&mut pool, dir, opts)?;
    Ok((Arc::new(pool), lock, redone))
}

/// Creates (if needed) and takes the lock file `LOCK` of `dir` (the data directory,
/// or the slow directory) for the life of the returned file; `Locked` if another
/// process or store holds it.
pub(crate) fn take_lock(dir: &Path) -> Result<std::fs::File> {
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
        if e.file_name() != LOCK_FILE && e.file_name() != journal::JOURNAL_FILE {
            return Ok(true);
        }
    }
    Ok(false)
}
