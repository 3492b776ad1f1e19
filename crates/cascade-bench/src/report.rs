//! What one (engine, workload) run measured, and how it is printed.
//!
//! [`Report`] serializes to the JSON object `cascade bench --json` writes (one per
//! engine and workload) with at least: `engine, workload, threads, num, ops, seconds,
//! ops_per_sec, latency_us{p50,p99,p999,max}, heap_bytes_peak, heap_bytes_end,
//! rss_bytes, fast_tier_bytes, write_amp`, and for the slow tier (`--slow-dir`):
//! `slow_tier_bytes, fast_write_amp, slow_write_amp, slow_gets, slow_get_share`,
//! `pinned_get_share, promotions, slow_bytes_written, slow_point_reads`.
//! YCSB workloads drawing keys from a Zipfian (`zipfian`, `latest`) add
//! `zipf_constant`.

use std::fmt::Write as _;

use serde::Serialize;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// One engine × workload result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Engine name (`cascade`, `rocksdb`, `dram-index`).
    pub engine: String,
    /// Workload name (`load`, `a`…`f`, `fillrandom`, …).
    pub workload: String,
    /// Worker threads.
    pub threads: usize,
    /// Records loaded (key space).
    pub num: u64,
    /// Operations done.
    pub ops: u64,
    /// Wall time of the measured phase.
    pub seconds: f64,
    /// Throughput.
    pub ops_per_sec: f64,
    /// Latency of single operations (a scan counts as one operation).
    pub latency_us: Latency,
    /// Latency CDF points: (fraction 0..1, microseconds), for plots.
    pub latency_cdf: Vec<(f64, f64)>,
    /// Operations completed in each second of the run.
    pub timeline: Vec<f64>,
    /// Fast plus slow tier bytes at the end of each second of the run.
    pub footprint_timeline: Vec<u64>,
    /// Largest footprint seen (the per-second samples and the end).
    pub footprint_peak_bytes: u64,
    /// Peak heap bytes (counting allocator, sampled) during the workload.
    pub heap_bytes_peak: u64,
    /// Heap bytes at the end.
    pub heap_bytes_end: u64,
    /// Resident set size at the end.
    pub rss_bytes: u64,
    /// Bytes on the fast tier.
    pub fast_tier_bytes: u64,
    /// Bytes on the slow tier.
    pub slow_tier_bytes: u64,
    /// Write amplification reported by the engine (0 if unknown).
    pub write_amp: f64,
    /// Write amplification of the fast tier alone, since open (0 if unknown).
    pub fast_write_amp: f64,
    /// Write amplification of the slow tier (bytes written there / bytes moved into
    /// it), since open (0 if unknown or no slow tier).
    pub slow_write_amp: f64,
    /// Point reads the slow tier answered during the workload (0 if unknown).
    pub slow_gets: u64,
    /// `slow_gets` / point reads during the workload (0 without reads).
    pub slow_get_share: f64,
    /// Slow-tier file reads the workload's point reads made (device reads with
    /// direct reads; 0 if unknown).
    pub slow_point_reads: u64,
    /// Share of the workload's point reads whose key the popularity mapper pinned
    /// in the fast tier (0 if unknown).
    pub pinned_get_share: f64,
    /// Keys promoted to the fast tier during the workload.
    pub promotions: u64,
    /// Bytes written to the slow tier during the workload.
    pub slow_bytes_written: u64,
    /// The engine's own DRAM estimate (0 if unknown).
    pub engine_dram_bytes: u64,
    /// Reads that found their key (read workloads).
    pub found: u64,
    /// Operations that failed (should be 0; printed when not).
    pub errors: u64,
    /// Entries read by scans.
    pub entries: u64,
    /// Zipfian constant of the key chooser (YCSB workloads with the `zipfian` or
    /// `latest` distribution; absent from the JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zipf_constant: Option<f64>,
}

/// A markdown table of `reports`, with a throughput ratio against the first engine
/// that ran the same workload. When any report has slow-tier data, four columns
/// follow the usual ones: slow-tier MB, the share of the workload's gets the slow
/// tier answered, and the fast and slow tiers' write amplification.
#[must_use]
pub fn table(reports: &[Report]) -> String {
    let slow = reports
        .iter()
        .any(|r| r.slow_tier_bytes > 0 || r.slow_write_amp > 0.0);
    let mut s = String::new();
    s.push_str("| engine | workload | threads | ops | Mops/s | vs first | p50 µs | p99 µs | p99.9 µs | max µs | heap peak MB | heap end MB | RSS MB | fast tier MB | space peak MB | WA |");
    if slow {
        s.push_str(" slow tier MB | slow gets % | WA fast | WA slow |");
    }
    s.push_str("\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    if slow {
        s.push_str("---|---|---|---|");
    }
    s.push('\n');
    let mb = |b: u64| b as f64 / 1e6;
    for r in reports {
        let first = reports
            .iter()
            .find(|x| x.workload == r.workload)
            .map_or(r.ops_per_sec, |x| x.ops_per_sec);
        let ratio = if first > 0.0 {
            r.ops_per_sec / first
        } else {
            0.0
        };
        write!(
            s,
            "| {} | {} | {} | {} | {:.4} | {:.2}x | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
            r.engine,
            r.workload,
            r.threads,
            r.ops,
            r.ops_per_sec / 1e6,
            ratio,
            r.latency_us.p50,
            r.latency_us.p99,
            r.latency_us.p999,
            r.latency_us.max,
            mb(r.heap_bytes_peak),
            mb(r.heap_bytes_end),
            mb(r.rss_bytes),
            mb(r.fast_tier_bytes),
            mb(r.footprint_peak_bytes),
            r.write_amp
        )
        .expect("writing to a String cannot fail");
        if slow {
            write!(
                s,
                " {:.1} | {:.1} | {:.2} | {:.2} |",
                mb(r.slow_tier_bytes),
                r.slow_get_share * 100.0,
                r.fast_write_amp,
                r.slow_write_amp
            )
            .expect("writing to a String cannot fail");
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_every_documented_field() {
        let r = Report {
            engine: "cascade".into(),
            workload: "a".into(),
            threads: 2,
            num: 10,
            ops: 20,
            seconds: 1.5,
            ops_per_sec: 13.3,
            ..Report::default()
        };
        let v: serde_json::Value = serde_json::to_value([&r]).expect("serializes");
        let obj = v[0].as_object().expect("an object per report");
        for f in [
            "engine",
            "workload",
            "threads",
            "num",
            "ops",
            "seconds",
            "ops_per_sec",
            "latency_us",
            "heap_bytes_peak",
            "heap_bytes_end",
            "rss_bytes",
            "fast_tier_bytes",
            "write_amp",
        ] {
            assert!(obj.contains_key(f), "missing field {f}");
        }
        let lat = obj["latency_us"].as_object().expect("latency object");
        for f in ["p50", "p99", "p999", "max"] {
            assert!(lat.contains_key(f), "missing latency field {f}");
        }
        assert_eq!(obj["engine"], "cascade");
        assert_eq!(obj["ops"], 20);
        assert!(!obj.contains_key("zipf_constant"));
        let z = Report {
            zipf_constant: Some(0.7),
            ..r
        };
        let v: serde_json::Value = serde_json::to_value(&z).expect("serializes");
        assert_eq!(v["zipf_constant"], 0.7);
    }

    #[test]
    fn table_reports_ratios_against_the_first_engine() {
        let mk = |e: &str, ops: f64| Report {
            engine: e.into(),
            workload: "c".into(),
            ops_per_sec: ops,
            ..Report::default()
        };
        let t = table(&[mk("cascade", 2e6), mk("rocksdb", 5e5)]);
        assert!(t.contains("| cascade | c |") && t.contains("1.00x"), "{t}");
        assert!(t.contains("0.25x"), "{t}");
        assert!(
            !t.contains("slow tier"),
            "no slow-tier columns without one: {t}"
        );
    }

    #[test]
    fn slow_tier_columns_and_fields() {
        let r = Report {
            engine: "cascade".into(),
            workload: "readrandom".into(),
            slow_tier_bytes: 5_000_000,
            fast_write_amp: 2.5,
            slow_write_amp: 1.75,
            slow_gets: 40,
            slow_get_share: 0.4,
            ..Report::default()
        };
        let t = table(std::slice::from_ref(&r));
        assert!(
            t.contains("| slow tier MB | slow gets % | WA fast | WA slow |"),
            "{t}"
        );
        assert!(t.contains("| 5.0 | 40.0 | 2.50 | 1.75 |"), "{t}");
        // Header, separator and row have the same number of columns.
        let cols: Vec<usize> = t.lines().map(|l| l.matches('|').count()).collect();
        assert!(cols.windows(2).all(|w| w[0] == w[1]), "{t}");
        let v: serde_json::Value = serde_json::to_value(&r).expect("serializes");
        for f in [
            "slow_tier_bytes",
            "fast_write_amp",
            "slow_write_amp",
            "slow_gets",
            "slow_get_share",
            "pinned_get_share",
            "promotions",
            "slow_bytes_written",
            "slow_point_reads",
        ] {
            assert!(v.get(f).is_some(), "missing field {f}");
        }
        assert_eq!(v["slow_tier_bytes"], 5_000_000);
    }
}
