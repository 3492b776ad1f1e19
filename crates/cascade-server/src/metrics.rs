//! Server metrics: per-command counts, errors and latency histograms, connections,
//! bytes, group commits; rendered as Prometheus text (`/metrics`) and read by `INFO`.
//!
//! Each worker thread owns one [`WorkerStats`] and is its only writer (relaxed
//! atomics, no shared cache lines between workers); readers sum over workers. Command
//! latency is measured from the start to the end of the command's execution on the
//! worker (queueing and network time are not included).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Histogram bucket upper bounds in microseconds (Prometheus `le`).
pub(crate) const BOUNDS_US: [u64; 16] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    1_000_000, 10_000_000,
];

/// Counters of one command on one worker.
#[derive(Debug, Default)]
pub(crate) struct CmdCounters {
    /// Calls.
    pub(crate) calls: AtomicU64,
    /// Calls that replied with an error.
    pub(crate) errors: AtomicU64,
    /// Total execution time in microseconds.
    pub(crate) usec: AtomicU64,
    /// Calls per latency bucket (the last one is +Inf).
    pub(crate) buckets: [AtomicU64; BOUNDS_US.len() + 1],
}

/// Everything one worker counts.
#[derive(Debug)]
pub(crate) struct WorkerStats {
    /// Per command (index into the command table).
    pub(crate) cmds: Box<[CmdCounters]>,
    /// Unknown commands.
    pub(crate) unknown: AtomicU64,
    /// Bytes read from clients.
    pub(crate) bytes_in: AtomicU64,
    /// Bytes written to clients.
    pub(crate) bytes_out: AtomicU64,
    /// Group commits (one persist of this worker's log for a round of writes).
    pub(crate) group_commits: AtomicU64,
    /// Connections whose round of keyed reads was answered without waiting for a
    /// persist (sync durability, `visible.rs`).
    pub(crate) reads_unheld: AtomicU64,
    /// Connections whose round of keyed reads waited for a persist already running,
    /// without a ticket of their own.
    pub(crate) reads_no_ticket: AtomicU64,
    /// Commit delays begun (`linger.rs`), and of those, ones that ended at their
    /// deadline.
    pub(crate) sync_delays: AtomicU64,
    pub(crate) sync_delays_expired: AtomicU64,
    /// Protocol errors (connection closed).
    pub(crate) protocol_errors: AtomicU64,
}

impl WorkerStats {
    /// Counters for `n` commands.
    pub(crate) fn new(n: usize) -> WorkerStats {
        WorkerStats {
            cmds: (0..n).map(|_| CmdCounters::default()).collect(),
            unknown: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            group_commits: AtomicU64::new(0),
            reads_unheld: AtomicU64::new(0),
            reads_no_ticket: AtomicU64::new(0),
            sync_delays: AtomicU64::new(0),
            sync_delays_expired: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
        }
    }

    /// Records one command.
    pub(crate) fn record(&self, cmd: Option<usize>, failed: bool, took: Duration) {
        let Some(c) = cmd.and_then(|i| self.cmds.get(i)) else {
            self.unknown.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        c.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
        c.usec.fetch_add(us, Ordering::Relaxed);
        let b = BOUNDS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(BOUNDS_US.len());
        c.buckets[b].fetch_add(1, Ordering::Relaxed);
    }
}

/// Server-wide metrics.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Command names, in command-table order (the index of every per-command counter).
    pub(crate) names: Vec<&'static str>,
    /// One per worker.
    pub(crate) workers: Vec<Arc<WorkerStats>>,
    /// Connected clients.
    pub(crate) connected: AtomicI64,
    /// Connections accepted since start.
    pub(crate) total_connections: AtomicU64,
    /// Connections refused (maxclients).
    pub(crate) rejected: AtomicU64,
    /// Clients closed for idleness.
    pub(crate) timed_out: AtomicU64,
    /// Clients parked in a blocking command.
    pub(crate) blocked: AtomicI64,
    /// Error replies by code (`INFO errorstats`): the first word of the error.
    /// Error replies are rare, so one lock; at most [`MAX_ERROR_CODES`] codes, as
    /// Redis, after which new codes are not counted (`errorstat_` lines stay bounded).
    pub(crate) error_codes: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// The most distinct error codes `INFO errorstats` keeps (Redis's limit).
pub(crate) const MAX_ERROR_CODES: usize = 128;

/// One command's totals over all workers.
#[derive(Debug, Default, Clone)]
pub(crate) struct CmdTotals {
    /// Calls.
    pub(crate) calls: u64,
    /// Failed calls.
    pub(crate) errors: u64,
    /// Microseconds.
    pub(crate) usec: u64,
    /// Bucket counts (non-cumulative).
    pub(crate) buckets: Vec<u64>,
}

impl Metrics {
    /// Sum over workers of a per-worker counter.
    pub(crate) fn sum(&self, f: impl Fn(&WorkerStats) -> &AtomicU64) -> u64 {
        self.workers
            .iter()
            .map(|w| f(w).load(Ordering::Relaxed))
            .sum()
    }

    /// Totals of command `i`.
    pub(crate) fn cmd(&self, i: usize) -> CmdTotals {
        let mut t = CmdTotals {
            buckets: vec![0; BOUNDS_US.len() + 1],
            ..CmdTotals::default()
        };
        for w in &self.workers {
            if let Some(c) = w.cmds.get(i) {
                t.calls += c.calls.load(Ordering::Relaxed);
                t.errors += c.errors.load(Ordering::Relaxed);
                t.usec += c.usec.load(Ordering::Relaxed);
                for (d, s) in t.buckets.iter_mut().zip(c.buckets.iter()) {
                    *d += s.load(Ordering::Relaxed);
                }
            }
        }
        t
    }

    /// Metrics for the commands `names` (table order), one [`WorkerStats`] per worker.
    pub(crate) fn new(names: Vec<&'static str>, workers: Vec<Arc<WorkerStats>>) -> Metrics {
        Metrics {
            names,
            workers,
            ..Metrics::default()
        }
    }

    /// Commands processed in total.
    pub(crate) fn total_commands(&self) -> u64 {
        (0..self.names.len())
            .map(|i| self.cmd(i).calls)
            .sum::<u64>()
            + self.sum(|w| &w.unknown)
    }

    /// Counts an error reply (`reply` starts with `-`) under its code; anything else
    /// is ignored.
    pub(crate) fn count_error(&self, reply: &[u8]) {
        let Some(rest) = reply.strip_prefix(b"-") else {
            return;
        };
        let end = rest
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(rest.len());
        let code = String::from_utf8_lossy(&rest[..end]);
        let mut codes = self.error_codes.lock();
        if let Some(n) = codes.get_mut(code.as_ref()) {
            *n += 1;
        } else if codes.len() < MAX_ERROR_CODES {
            codes.insert(code.into_owned(), 1);
        }
    }

    /// Zeroes the command counters (CONFIG RESETSTAT).
    pub(crate) fn reset(&self) {
        self.error_codes.lock().clear();
        for w in &self.workers {
            for c in &w.cmds {
                c.calls.store(0, Ordering::Relaxed);
                c.errors.store(0, Ordering::Relaxed);
                c.usec.store(0, Ordering::Relaxed);
                for b in &c.buckets {
                    b.store(0, Ordering::Relaxed);
                }
            }
            w.unknown.store(0, Ordering::Relaxed);
        }
    }
}

/// Microseconds as decimal seconds (`10` → `0.00001`), without a float round trip.
fn seconds(us: u64) -> String {
    let s = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Builds Prometheus text exposition.
#[derive(Debug, Default)]
pub(crate) struct Prom {
    out: String,
}

impl Prom {
    /// Starts a metric family.
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample; `labels` like `cmd="get"` (may be empty).
    pub(crate) fn sample(&mut self, name: &str, labels: &str, v: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {v}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {v}");
        }
    }

    /// A family with one unlabelled sample.
    pub(crate) fn single(&mut self, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, "", v);
    }

    /// A histogram of one command (`buckets` non-cumulative, per [`BOUNDS_US`]).
    pub(crate) fn histogram(&mut self, name: &str, labels: &str, t: &CmdTotals) {
        let mut cum = 0;
        for (i, b) in BOUNDS_US.iter().enumerate() {
            cum += t.buckets.get(i).copied().unwrap_or(0);
            let le = seconds(*b);
            self.sample(
                &format!("{name}_bucket"),
                &format!("{labels},le=\"{le}\""),
                cum,
            );
        }
        self.sample(
            &format!("{name}_bucket"),
            &format!("{labels},le=\"+Inf\""),
            t.calls,
        );
        self.sample(&format!("{name}_sum"), labels, seconds(t.usec));
        self.sample(&format!("{name}_count"), labels, t.calls);
    }

    /// The text.
    pub(crate) fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_into_buckets() {
        let stats = WorkerStats::new(2);
        stats.record(Some(1), false, Duration::from_micros(7));
        stats.record(Some(1), true, Duration::from_micros(300));
        stats.record(Some(1), false, Duration::from_secs(20));
        stats.record(None, true, Duration::ZERO);
        let m = Metrics::new(vec!["a", "b"], vec![Arc::new(stats)]);
        let t = m.cmd(1);
        assert_eq!((t.calls, t.errors), (3, 1));
        assert_eq!(t.buckets[0], 1);
        assert_eq!(t.buckets[5], 1);
        assert_eq!(t.buckets[BOUNDS_US.len()], 1);
        assert_eq!(m.total_commands(), 4);
        let mut p = Prom::default();
        p.histogram("lat", "cmd=\"x\"", &t);
        let s = p.finish();
        assert!(s.contains("lat_bucket{cmd=\"x\",le=\"0.00001\"} 1"), "{s}");
        assert!(s.contains("lat_bucket{cmd=\"x\",le=\"+Inf\"} 3"));
        assert!(s.contains("lat_count{cmd=\"x\"} 3"));
    }

    #[test]
    fn error_replies_counted_by_code_and_bounded() {
        let m = Metrics::new(vec!["a"], Vec::new());
        m.count_error(b"-WRONGTYPE Operation against a key\r\n");
        m.count_error(b"-ERR x\r\n");
        m.count_error(b"-ERR y\r\n");
        m.count_error(b"+OK\r\n");
        m.count_error(b"-NOSPACE\r\n");
        let got: Vec<(String, u64)> = m.error_codes.lock().clone().into_iter().collect();
        assert_eq!(
            got,
            [
                ("ERR".into(), 2),
                ("NOSPACE".into(), 1),
                ("WRONGTYPE".into(), 1)
            ]
        );
        for i in 0..2 * MAX_ERROR_CODES {
            m.count_error(format!("-E{i} z\r\n").as_bytes());
        }
        assert_eq!(m.error_codes.lock().len(), MAX_ERROR_CODES);
        m.reset();
        assert!(m.error_codes.lock().is_empty());
    }
}
