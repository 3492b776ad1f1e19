//! Runs one workload phase on an engine with N threads and measures it.
//!
//! Each thread times every operation into its own HDR histogram (nanoseconds, 3
//! significant digits), merged at the end; each thread also bumps its own padded
//! counter, which a sampler thread reads once a second for the throughput timeline
//! and the progress line on stderr, and which also samples the heap peak every 10 ms.
//! A phase ends after `ops` operations (split across threads) or after `duration`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::alloc;
use crate::engine::Engine;
use crate::keys::Rng;
use crate::report::{Latency, Report};

/// How long a phase runs.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    /// This many operations in total.
    Ops(u64),
    /// Until this much time has passed.
    Duration(Duration),
}

/// What an operation did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// A read found its key.
    pub found: bool,
    /// Entries read (scans), reported separately from operations.
    pub entries: u64,
    /// The thread has nothing more to do (the operation itself did nothing).
    pub stop: bool,
}

/// Per-thread state handed to each operation.
#[derive(Debug)]
pub struct Ctx {
    /// The thread's index.
    pub thread: usize,
    /// The thread's random source.
    pub rng: Rng,
    /// Scratch buffers.
    pub key: Vec<u8>,
    /// Scratch buffer for values.
    pub value: Vec<u8>,
    /// Scratch buffer for scans.
    pub last: Vec<u8>,
    /// This thread's YCSB operation stream (YCSB workloads only).
    pub ycsb: Option<crate::ycsb::OpGenerator>,
}

#[repr(align(64))]
struct Counter(AtomicU64);

/// One measured phase.
pub struct Phase<'a> {
    /// The engine.
    pub engine: &'a dyn Engine,
    /// Workload name (for the report).
    pub workload: &'a str,
    /// Worker threads.
    pub threads: usize,
    /// Key space (for the report).
    pub num: u64,
    /// How long it runs.
    pub amount: Amount,
    /// Random seed.
    pub seed: u64,
    /// Progress line on stderr.
    pub progress: bool,
}

/// Runs `op(ctx, i)` for operation numbers `i` (thread `t` takes `t, t+T, …`).
pub fn run_phase<F>(p: &Phase<'_>, op: F) -> Report
where
    F: Fn(&mut Ctx, u64) -> Result<Outcome, String> + Sync,
{
    let (engine, workload, amount, seed, show_progress) =
        (p.engine, p.workload, p.amount, p.seed, p.progress);
    let num = p.num;
    let threads = p.threads.max(1);
    alloc::reset_peak();
    let counters: Vec<Counter> = (0..threads).map(|_| Counter(AtomicU64::new(0))).collect();
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let deadline = match amount {
        Amount::Duration(d) => Some(start + d),
        Amount::Ops(_) => None,
    };
    let total = match amount {
        Amount::Ops(n) => n,
        Amount::Duration(_) => u64::MAX,
    };
    let mut timeline = Vec::new();
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut last = 0u64;
            let mut next = start + Duration::from_secs(1);
            let mut tl = Vec::new();
            while !done.load(Ordering::Relaxed) {
                alloc::sample_peak();
                std::thread::sleep(Duration::from_millis(10));
                if Instant::now() >= next {
                    let now: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
                    tl.push((now - last) as f64);
                    last = now;
                    next += Duration::from_secs(1);
                    if show_progress {
                        let pct = if total == u64::MAX {
                            String::new()
                        } else {
                            format!(" {:.0}%", 100.0 * now as f64 / total as f64)
                        };
                        eprint!(
                            "\r  {} {workload}: {now} ops{pct}, {:.0} ops/s    ",
                            engine.name(),
                            tl.last().copied().unwrap_or(0.0)
                        );
                    }
                }
            }
            // The partial last second, scaled to a rate.
            let now: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
            let frac = (Instant::now() + Duration::from_secs(1))
                .saturating_duration_since(next)
                .as_secs_f64();
            if now > last && frac > 0.05 {
                tl.push((now - last) as f64 / frac.min(1.0));
            }
            if show_progress {
                eprint!("\r{:80}\r", "");
            }
            tl
        });
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (op, counter) = (&op, &counters[t].0);
                s.spawn(move || {
                    let mut h = new_hist();
                    let mut ctx = Ctx {
                        thread: t,
                        rng: Rng::new(seed ^ (t as u64).wrapping_mul(0x9E37_79B9)),
                        key: Vec::new(),
                        value: Vec::new(),
                        last: Vec::new(),
                        ycsb: None,
                    };
                    let (mut n, mut found, mut errors, mut entries) = (0u64, 0u64, 0u64, 0u64);
                    let mut first_error = None;
                    let mut i = t as u64;
                    while i < total {
                        if let Some(d) = deadline {
                            if n % 64 == 0 && Instant::now() >= d {
                                break;
                            }
                        }
                        let t0 = Instant::now();
                        match op(&mut ctx, i) {
                            Ok(o) if o.stop => break,
                            Ok(o) => {
                                found += u64::from(o.found);
                                entries += o.entries;
                            }
                            Err(e) => {
                                errors += 1;
                                first_error.get_or_insert(e);
                            }
                        }
                        h.saturating_record((t0.elapsed().as_nanos() as u64).max(1));
                        n += 1;
                        counter.store(n, Ordering::Relaxed);
                        i += threads as u64;
                    }
                    ThreadResult {
                        hist: h,
                        ops: n,
                        found,
                        errors,
                        entries,
                        first_error,
                    }
                })
            })
            .collect();
        let r: Vec<_> = hs.into_iter().filter_map(|h| h.join().ok()).collect();
        done.store(true, Ordering::Relaxed);
        timeline = sampler.join().unwrap_or_default();
        r
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut hist = new_hist();
    let (mut ops, mut found, mut errors, mut entries) = (0, 0, 0, 0);
    let mut first_error = None;
    for r in results {
        let _ = hist.add(&r.hist);
        ops += r.ops;
        found += r.found;
        errors += r.errors;
        entries += r.entries;
        if first_error.is_none() {
            first_error = r.first_error;
        }
    }
    if let Some(e) = first_error {
        eprintln!(
            "  {} {workload}: {errors} operations failed, first: {e}",
            engine.name()
        );
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let latency = if hist.is_empty() {
        Latency::default()
    } else {
        Latency {
            p50: us(hist.value_at_quantile(0.5)),
            p99: us(hist.value_at_quantile(0.99)),
            p999: us(hist.value_at_quantile(0.999)),
            max: us(hist.max()),
            mean: hist.mean() / 1000.0,
        }
    };
    let cdf = if hist.is_empty() {
        Vec::new()
    } else {
        [
            0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
        ]
        .iter()
        .map(|q| (*q, us(hist.value_at_quantile(*q))))
        .collect()
    };
    let st = engine.stats();
    Report {
        engine: engine.name().to_string(),
        workload: workload.to_string(),
        threads,
        num,
        ops,
        seconds,
        ops_per_sec: ops as f64 / seconds.max(1e-9),
        latency_us: latency,
        latency_cdf: cdf,
        timeline,
        heap_bytes_peak: alloc::peak_heap_bytes() as u64,
        heap_bytes_end: alloc::heap_bytes() as u64,
        rss_bytes: crate::micro::rss_bytes(),
        fast_tier_bytes: st.fast_tier_bytes,
        slow_tier_bytes: st.slow_tier_bytes,
        write_amp: st.write_amp,
        engine_dram_bytes: st.engine_dram_bytes,
        found,
        errors,
        entries,
    }
}

struct ThreadResult {
    hist: Histogram<u64>,
    ops: u64,
    found: u64,
    errors: u64,
    entries: u64,
    first_error: Option<String>,
}

/// 1 ns .. 60 s at 3 significant digits.
fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("constant histogram bounds are valid")
}
