//! db_bench-style micro workloads against a CascadeKV store.
//!
//! Each workload runs `threads` threads over `num` keys (thread `t` takes every
//! `threads`-th key number, so loads never collide) and reports wall-clock throughput,
//! heap bytes (end and peak, from the counting allocator), RSS and pool bytes.

use std::path::PathBuf;
use std::time::Instant;

use cascadekv::{Db, Durability, Options};

use crate::alloc;
use crate::keys::{make_key, make_value, mix, Rng};

/// Settings shared by all workloads of one run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Store directory (put it on /dev/shm to emulate a fast tier).
    pub dir: PathBuf,
    /// Keys loaded.
    pub num: u64,
    /// Operations per read/overwrite workload (default: `num`).
    pub ops: Option<u64>,
    /// Worker threads.
    pub threads: usize,
    /// Key size in bytes (≥ 8).
    pub key_size: usize,
    /// Value size in bytes.
    pub value_size: usize,
    /// Per-write durability.
    pub durability: Durability,
    /// Seed for random choices.
    pub seed: u64,
    /// Engine options.
    pub options: Options,
}

/// One workload's result.
#[derive(Debug, Clone)]
pub struct Report {
    /// Workload name.
    pub workload: String,
    /// Operations done.
    pub ops: u64,
    /// Wall time.
    pub seconds: f64,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Heap bytes at the end.
    pub heap_bytes_end: u64,
    /// Peak heap bytes during the workload.
    pub heap_bytes_peak: u64,
    /// Resident set size at the end.
    pub rss_bytes: u64,
    /// Pool bytes in allocated chunks.
    pub fast_tier_bytes: u64,
    /// Reads that found their key (read workloads).
    pub found: u64,
    /// Engine write amplification since open ((log + table bytes) / user bytes).
    pub write_amp: f64,
    /// Engine DRAM estimate (FastStore + buffer-tree + StableStore indexes).
    pub engine_dram_bytes: u64,
}

/// Resident set size of this process, from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Runs `f(thread)` on every thread; returns wall seconds and the summed results.
fn run_threads(
    cfg: &Config,
    f: impl Fn(usize) -> cascadekv::Result<u64> + Sync,
) -> Result<(f64, u64), String> {
    let start = Instant::now();
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..cfg.threads.max(1))
            .map(|t| {
                let f = &f;
                s.spawn(move || f(t))
            })
            .collect();
        hs.into_iter().map(|h| h.join()).collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut total = 0;
    for r in results {
        match r {
            Ok(Ok(n)) => total += n,
            Ok(Err(e)) => return Err(format!("engine error: {e}")),
            Err(_) => return Err("benchmark thread panicked".into()),
        }
    }
    Ok((secs, total))
}

/// Runs `workload` on `db`. Unknown names are an error.
pub fn run(db: &Db, cfg: &Config, workload: &str) -> Result<Report, String> {
    alloc::reset_peak();
    let threads = cfg.threads.max(1) as u64;
    let ops = cfg.ops.unwrap_or(cfg.num);
    let d = cfg.durability;
    let (seconds, found, done) = match workload {
        "fillrandom" | "fillseq" | "overwrite" => {
            let seq = workload == "fillseq";
            let n = if workload == "overwrite" {
                ops
            } else {
                cfg.num
            };
            let (secs, _) = run_threads(cfg, |t| {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                let mut rng = Rng::new(cfg.seed ^ t as u64);
                let mut i = t as u64;
                while i < n {
                    let num = if workload == "overwrite" {
                        rng.below(cfg.num)
                    } else {
                        i
                    };
                    make_key(if seq { num } else { mix(num) }, cfg.key_size, &mut k);
                    make_value(num ^ cfg.seed, cfg.value_size, &mut v);
                    db.put_with(&k, &v, d)?;
                    i += threads;
                }
                Ok(0)
            })?;
            (secs, 0, n)
        }
        "readrandom" => {
            let (secs, found) = run_threads(cfg, |t| {
                let mut k = Vec::new();
                let mut rng = Rng::new(cfg.seed ^ (t as u64 + 1000));
                let mut hits = 0;
                let mut i = t as u64;
                while i < ops {
                    make_key(mix(rng.below(cfg.num)), cfg.key_size, &mut k);
                    if db.get(&k)?.is_some() {
                        hits += 1;
                    }
                    i += threads;
                }
                Ok(hits)
            })?;
            (secs, found, ops)
        }
        "settle" => {
            // Flush every FastStore and compact everything into StableStore.
            let start = Instant::now();
            db.flush_faststore().map_err(|e| e.to_string())?;
            db.compact().map_err(|e| e.to_string())?;
            (start.elapsed().as_secs_f64(), 0, 0)
        }
        other => return Err(format!("unknown workload {other:?}")),
    };
    let stats = db.stats();
    Ok(Report {
        workload: workload.to_string(),
        ops: done,
        seconds,
        ops_per_sec: done as f64 / seconds.max(1e-9),
        heap_bytes_end: alloc::heap_bytes() as u64,
        heap_bytes_peak: alloc::peak_heap_bytes() as u64,
        rss_bytes: rss_bytes(),
        fast_tier_bytes: stats.pool_bytes_used,
        found,
        write_amp: stats.write_amplification,
        engine_dram_bytes: stats.dram_bytes(),
    })
}

/// Measures `Db::open` (log replay) on an existing store.
pub fn recover(cfg: &Config) -> Result<(Db, Report), String> {
    alloc::reset_peak();
    let start = Instant::now();
    let done = std::sync::atomic::AtomicBool::new(false);
    let db = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                alloc::sample_peak();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        let r = Db::open(&cfg.dir, cfg.options.clone());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    })
    .map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let info = db.recovery_info().clone();
    let stats = db.stats();
    let report = Report {
        workload: format!(
            "recover ({} records, {} logs, clean={})",
            info.records, info.logs, info.clean_shutdown
        ),
        ops: info.records,
        seconds,
        ops_per_sec: info.records as f64 / seconds.max(1e-9),
        heap_bytes_end: alloc::heap_bytes() as u64,
        heap_bytes_peak: alloc::peak_heap_bytes() as u64,
        rss_bytes: rss_bytes(),
        fast_tier_bytes: stats.pool_bytes_used,
        found: 0,
        write_amp: stats.write_amplification,
        engine_dram_bytes: stats.dram_bytes(),
    };
    Ok((db, report))
}

/// Formats reports as a markdown table.
pub fn table(cfg: &Config, reports: &[Report]) -> String {
    let mut s = format!(
        "threads={} num={} key={}B value={}B durability={:?} dir={}\n\n",
        cfg.threads,
        cfg.num,
        cfg.key_size,
        cfg.value_size,
        cfg.durability,
        cfg.dir.display()
    );
    s.push_str("| workload | ops | seconds | Mops/s | heap end MB | heap peak MB | heap B/key | engine DRAM MB | RSS MB | pool MB | WA | found |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mb = |b: u64| b as f64 / 1e6;
    for r in reports {
        s.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {} |\n",
            r.workload,
            r.ops,
            r.seconds,
            r.ops_per_sec / 1e6,
            mb(r.heap_bytes_end),
            mb(r.heap_bytes_peak),
            r.heap_bytes_end as f64 / cfg.num.max(1) as f64,
            mb(r.engine_dram_bytes),
            mb(r.rss_bytes),
            mb(r.fast_tier_bytes),
            r.write_amp,
            r.found
        ));
    }
    s
}
