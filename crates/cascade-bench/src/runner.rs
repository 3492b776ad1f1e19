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
    /// Scratch buffer values are read into (`Engine::get_into`).
    pub got: Vec<u8>,
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

impl Amount {
    /// The phase's deadline (for a duration) and operation count (for a count;
    /// unbounded otherwise), for a phase starting at `start`.
    fn bounds(&self, start: Instant) -> (Option<Instant>, u64) {
        match *self {
            Amount::Duration(d) => (Some(start + d), u64::MAX),
            Amount::Ops(n) => (None, n),
        }
    }
}

/// Runs `op(ctx, i)` for operation numbers `i` (thread `t` takes `t, t+T, …`).
pub fn run_phase<F>(p: &Phase<'_>, op: F) -> Report
where
    F: Fn(&mut Ctx, u64) -> Result<Outcome, String> + Sync,
{
    let (engine, workload) = (p.engine, p.workload);
    let threads = p.threads.max(1);
    alloc::reset_peak();
    let counters: Vec<Counter> = (0..threads).map(|_| Counter(AtomicU64::new(0))).collect();
    let done = AtomicBool::new(false);
    // Cumulative read counters before the phase, for its share of slow-tier gets.
    let before = engine.stats();
    let start = Instant::now();
    let (deadline, total) = p.amount.bounds(start);
    let mut timeline = Vec::new();
    let mut footprint = Vec::new();
    let results: Vec<ThreadResult> = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| sample(p, start, total, &counters, &done));
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let worker = Worker {
                    thread,
                    threads,
                    total,
                    seed: p.seed,
                    deadline,
                };
                let (op, counter) = (&op, &counters[thread].0);
                scope.spawn(move || worker.run(op, counter))
            })
            .collect();
        let r: Vec<_> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        done.store(true, Ordering::Relaxed);
        (timeline, footprint) = sampler.join().unwrap_or_default();
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
    let (latency, cdf) = latencies(&hist);
    let st = engine.stats();
    let slow_gets = st.slow_gets.saturating_sub(before.slow_gets);
    let gets = st.gets.saturating_sub(before.gets);
    let footprint_peak_bytes = footprint
        .iter()
        .copied()
        .chain([st.fast_tier_bytes + st.slow_tier_bytes])
        .max()
        .unwrap_or(0);
    Report {
        engine: engine.name().to_string(),
        workload: workload.to_string(),
        threads,
        num: p.num,
        ops,
        seconds,
        ops_per_sec: ops as f64 / seconds.max(1e-9),
        latency_us: latency,
        latency_cdf: cdf,
        timeline,
        footprint_timeline: footprint,
        footprint_peak_bytes,
        heap_bytes_peak: alloc::peak_heap_bytes() as u64,
        heap_bytes_end: alloc::heap_bytes() as u64,
        rss_bytes: crate::micro::rss_bytes(),
        fast_tier_bytes: st.fast_tier_bytes,
        slow_tier_bytes: st.slow_tier_bytes,
        write_amp: st.write_amp,
        fast_write_amp: st.fast_write_amp,
        slow_write_amp: st.slow_write_amp,
        slow_gets,
        slow_get_share: share(slow_gets, gets),
        slow_point_reads: st.slow_point_reads.saturating_sub(before.slow_point_reads),
        pinned_get_share: share(st.pinned_gets.saturating_sub(before.pinned_gets), gets),
        promotions: st.promotions.saturating_sub(before.promotions),
        slow_bytes_written: st.slow_bytes_written
            - before.slow_bytes_written.min(st.slow_bytes_written),
        engine_dram_bytes: st.engine_dram_bytes,
        found,
        errors,
        entries,
        zipf_constant: None,
    }
}

/// `part` of `gets` as a share (0 without gets). The engine counts reads in
/// per-thread batches: the share is kept within 1.
#[allow(clippy::cast_precision_loss)]
fn share(part: u64, gets: u64) -> f64 {
    if gets == 0 {
        0.0
    } else {
        (part as f64 / gets as f64).min(1.0)
    }
}

/// The sampler thread of a phase: samples the heap peak every 10 ms and, once a
/// second, the operations done in that second, the engine's footprint (fast plus
/// slow tier bytes) and the progress line, until `done`; returns the throughput and
/// footprint timelines.
fn sample(
    p: &Phase<'_>,
    start: Instant,
    total: u64,
    counters: &[Counter],
    done: &AtomicBool,
) -> (Vec<f64>, Vec<u64>) {
    let mut last = 0u64;
    let mut next = start + Duration::from_secs(1);
    let mut tl = Vec::new();
    let mut space = Vec::new();
    while !done.load(Ordering::Relaxed) {
        alloc::sample_peak();
        std::thread::sleep(Duration::from_millis(10));
        if Instant::now() >= next {
            let now: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
            tl.push((now - last) as f64);
            let st = p.engine.stats();
            space.push(st.fast_tier_bytes + st.slow_tier_bytes);
            last = now;
            next += Duration::from_secs(1);
            if p.progress {
                let pct = if total == u64::MAX {
                    String::new()
                } else {
                    format!(" {:.0}%", 100.0 * now as f64 / total as f64)
                };
                eprint!(
                    "\r  {} {}: {now} ops{pct}, {:.0} ops/s    ",
                    p.engine.name(),
                    p.workload,
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
    if p.progress {
        eprint!("\r{:80}\r", "");
    }
    (tl, space)
}

/// One worker thread's share of a phase.
struct Worker {
    /// The thread's index: it runs operations `thread, thread + threads, …`.
    thread: usize,
    threads: usize,
    /// Operations of the whole phase (`u64::MAX` when timed).
    total: u64,
    seed: u64,
    deadline: Option<Instant>,
}

impl Worker {
    /// Runs the thread's operations, timing each, and bumps `counter` after each.
    ///
    /// One clock read per operation, as `db_bench` times them (`FinishedOps`): an
    /// operation's latency is the time since the previous one finished, so it includes
    /// the loop's own few instructions (recording the last latency, ~10 ns). Two reads
    /// per operation were 4-5 % of a 2-thread fillrandom or readrandom (`perf`:
    /// `clock_gettime`), time the peers in the other benchmarks do not spend.
    fn run<F>(self, op: &F, counter: &AtomicU64) -> ThreadResult
    where
        F: Fn(&mut Ctx, u64) -> Result<Outcome, String>,
    {
        let mut hist = new_hist();
        let mut ctx = Ctx {
            thread: self.thread,
            rng: Rng::new(self.seed ^ (self.thread as u64).wrapping_mul(0x9E37_79B9)),
            key: Vec::new(),
            value: Vec::new(),
            last: Vec::new(),
            got: Vec::new(),
            ycsb: None,
        };
        let (mut n, mut found, mut errors, mut entries) = (0u64, 0u64, 0u64, 0u64);
        let mut first_error = None;
        let mut i = self.thread as u64;
        let mut last = Instant::now();
        while i < self.total {
            if let Some(d) = self.deadline {
                if n % 64 == 0 && last >= d {
                    break;
                }
            }
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
            let now = Instant::now();
            // Saturates only past 584 years.
            let nanos = u64::try_from(now.duration_since(last).as_nanos()).unwrap_or(u64::MAX);
            last = now;
            hist.saturating_record(nanos.max(1));
            n += 1;
            counter.store(n, Ordering::Relaxed);
            i += self.threads as u64;
        }
        ThreadResult {
            hist,
            ops: n,
            found,
            errors,
            entries,
            first_error,
        }
    }
}

/// Latency percentiles and CDF points (µs) of `hist`; zeros and none if it is empty.
fn latencies(hist: &Histogram<u64>) -> (Latency, Vec<(f64, f64)>) {
    if hist.is_empty() {
        return (Latency::default(), Vec::new());
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let latency = Latency {
        p50: us(hist.value_at_quantile(0.5)),
        p99: us(hist.value_at_quantile(0.99)),
        p999: us(hist.value_at_quantile(0.999)),
        max: us(hist.max()),
        mean: hist.mean() / 1000.0,
    };
    let cdf = [
        0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
    ]
    .iter()
    .map(|q| (*q, us(hist.value_at_quantile(*q))))
    .collect();
    (latency, cdf)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operation's own time is recorded (one clock read per operation, measured
    /// from the previous one's end), not a running total.
    #[test]
    fn each_operation_is_timed_alone() {
        let w = Worker {
            thread: 0,
            threads: 1,
            total: 20,
            seed: 1,
            deadline: None,
        };
        let counter = AtomicU64::new(0);
        let op = |_: &mut Ctx, i: u64| {
            if i.is_multiple_of(2) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(Outcome::default())
        };
        let r = w.run(&op, &counter);
        assert_eq!((r.ops, r.hist.len()), (20, 20));
        assert_eq!(counter.load(Ordering::Relaxed), 20);
        // Ten sleeps of 2 ms, ten operations that do nothing.
        assert!(
            r.hist.value_at_quantile(0.4) < 1_000_000,
            "{:?}",
            r.hist.max()
        );
        assert!(r.hist.value_at_quantile(0.6) >= 2_000_000);
        assert!(
            r.hist.max() < 60_000_000,
            "one operation took far longer than its 2 ms sleep"
        );
    }
}
