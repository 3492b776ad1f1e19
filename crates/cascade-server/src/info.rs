//! `INFO` and the Prometheus `/metrics` page, both rendered from one list: [`collect`]
//! gathers every metric once — its INFO section and field name, its Prometheus name,
//! type and help — and [`info`] and [`prometheus`] only format that list. Per-command
//! counters come from the same [`CmdTotals`] for `INFO commandstats` and the
//! Prometheus command families. Engine statistics are the rows of `Stats::rows()`, so a
//! new engine statistic shows up in both without a change here.
//!
//! Called by the `INFO` command (worker threads) and the metrics thread; reads only
//! atomics and locked registries of [`Shared`].

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::keyspace::now_ms;
use crate::metrics::{CmdTotals, Prom};
use crate::shared::Shared;

/// Prometheus type of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only grows (reset only by `CONFIG RESETSTAT` or a restart).
    Counter,
    /// Goes up and down.
    Gauge,
}

/// One metric as INFO and Prometheus show it.
#[derive(Debug)]
pub(crate) struct Metric {
    /// INFO section (lower case).
    section: &'static str,
    /// INFO field name (empty: Prometheus only).
    info: String,
    /// Prometheus name (empty: INFO only; then the value need not be a number).
    prom: String,
    kind: Kind,
    help: &'static str,
    value: String,
}

/// INFO sections in Redis's order, with their headers.
const SECTIONS: &[(&str, &str)] = &[
    ("server", "Server"),
    ("clients", "Clients"),
    ("memory", "Memory"),
    ("persistence", "Persistence"),
    ("stats", "Stats"),
    ("replication", "Replication"),
    ("cpu", "CPU"),
    ("modules", "Modules"),
    ("commandstats", "Commandstats"),
    ("errorstats", "Errorstats"),
    ("cluster", "Cluster"),
    ("keyspace", "Keyspace"),
    ("cascade", "Cascade"),
];

/// Sections `INFO` and `INFO default` print (Redis 7: not commandstats).
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
    "cascade",
];

/// Resident set size of this process in bytes (0 if unknown).
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// User and system CPU seconds of this process (from `/proc/self/stat`, 100 ticks/s).
fn cpu_seconds() -> (f64, f64) {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else {
        return (0.0, 0.0);
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<u32>().ok())
            .map_or(0.0, f64::from)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after ")".
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

fn human(b: u64) -> String {
    let units = ["B", "K", "M", "G", "T"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024 * 1024 && u + 2 < units.len() {
        v /= 1024;
        u += 1;
    }
    // Two decimals from integer arithmetic: v is below 1 GiB here.
    let (whole, frac) = if v >= 1024 {
        u += 1;
        (v / 1024, (v % 1024) * 100 / 1024)
    } else {
        (v, 0)
    };
    format!("{whole}.{frac:02}{}", units[u])
}

/// Builds the list.
struct List(Vec<Metric>);

impl List {
    /// An INFO-only field.
    fn info(&mut self, section: &'static str, name: &str, v: impl std::fmt::Display) {
        self.both(section, name, "", Kind::Gauge, "", v);
    }

    /// A field in INFO (if `info` is not empty) and Prometheus (if `prom` is not).
    fn both(
        &mut self,
        section: &'static str,
        info: &str,
        prom: &str,
        kind: Kind,
        help: &'static str,
        v: impl std::fmt::Display,
    ) {
        self.0.push(Metric {
            section,
            info: info.to_string(),
            prom: prom.to_string(),
            kind,
            help,
            value: v.to_string(),
        });
    }
}

/// Every metric, once.
#[expect(
    clippy::too_many_lines,
    reason = "one flat list of fields is the point: each metric is written once"
)]
pub(crate) fn collect(shared: &Shared) -> Vec<Metric> {
    use Kind::{Counter, Gauge};
    let m = &shared.metrics;
    let mut l = List(Vec::with_capacity(128));
    let uptime = shared.started.elapsed().as_secs();
    let s = "server";
    l.info(s, "redis_version", crate::REDIS_COMPAT_VERSION);
    l.info(s, "redis_git_sha1", "00000000");
    l.info(s, "redis_git_dirty", 0);
    l.info(s, "redis_build_id", "0");
    l.info(s, "redis_mode", "standalone");
    l.info(s, "os", std::env::consts::OS);
    l.info(s, "arch_bits", 64);
    l.info(s, "monotonic_clock", "POSIX clock_gettime");
    l.info(s, "multiplexing_api", "epoll");
    l.info(s, "atomicvar_api", "c11-builtin");
    l.info(s, "process_id", std::process::id());
    l.info(s, "process_supervised", "no");
    l.info(s, "run_id", &shared.run_id);
    l.info(s, "tcp_port", shared.port);
    l.info(s, "server_time_usec", now_ms() * 1000);
    l.both(
        s,
        "uptime_in_seconds",
        "cascade_uptime_seconds",
        Gauge,
        "Seconds since start.",
        uptime,
    );
    l.info(s, "uptime_in_days", uptime / 86400);
    l.info(s, "hz", 10);
    l.info(s, "configured_hz", 10);
    l.info(s, "lru_clock", (now_ms() / 1000) % (1 << 24));
    l.info(
        s,
        "executable",
        std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    );
    l.info(s, "config_file", "");
    l.info(s, "io_threads_active", 0);
    l.info(s, "cascade_version", env!("CARGO_PKG_VERSION"));
    l.info(s, "cascade_worker_threads", shared.fixed.threads);

    let s = "clients";
    l.both(
        s,
        "connected_clients",
        "cascade_connected_clients",
        Gauge,
        "Connected clients.",
        m.connected.load(Ordering::Relaxed),
    );
    l.info(s, "cluster_connections", 0);
    l.info(
        s,
        "maxclients",
        shared.config.maxclients.load(Ordering::Relaxed),
    );
    l.info(s, "client_recent_max_input_buffer", 0);
    l.info(s, "client_recent_max_output_buffer", 0);
    l.both(
        s,
        "blocked_clients",
        "cascade_blocked_clients",
        Gauge,
        "Clients waiting in a blocking command.",
        m.blocked.load(Ordering::Relaxed),
    );
    let tracking = shared.store.tracking().stats();
    l.info(s, "tracking_clients", tracking.clients);
    l.info(s, "clients_in_timeout_table", 0);

    let rows = shared.store.db().stats().rows();
    let row = |name: &str| -> u64 {
        rows.iter()
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    let s = "memory";
    let heap = (shared.fixed.heap_bytes)();
    let rss = rss_bytes();
    l.both(
        s,
        "used_memory",
        "cascade_heap_bytes",
        Gauge,
        "Heap bytes allocated by the server process.",
        heap,
    );
    l.info(s, "used_memory_human", human(heap));
    l.both(
        s,
        "used_memory_rss",
        "cascade_resident_bytes",
        Gauge,
        "Resident set size of the server process.",
        rss,
    );
    l.info(s, "used_memory_rss_human", human(rss));
    l.info(s, "used_memory_peak", heap);
    l.info(s, "number_of_cached_scripts", *shared.scripts.cached.lock());
    l.info(s, "maxmemory", 0);
    l.info(s, "maxmemory_human", "0B");
    l.info(s, "maxmemory_policy", "noeviction");
    let index: u64 = rows
        .iter()
        .filter(|(k, _)| k.ends_with("_dram_bytes"))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum();
    l.info(s, "cascade_index_dram_bytes", index);
    l.info(s, "cascade_pool_bytes_used", row("pool_bytes_used"));
    l.info(s, "cascade_pool_bytes_total", row("pool_bytes_total"));

    let s = "persistence";
    let rec = shared.store.db().recovery_info();
    let loading = shared.repl.loading();
    l.info(s, "loading", u8::from(loading));
    l.info(s, "async_loading", 0);
    if loading {
        // A full sync from a primary: bytes of its data applied so far.
        l.info(s, "loading_loaded_bytes", shared.repl.loaded_bytes());
    }
    l.info(s, "rdb_changes_since_last_save", 0);
    l.info(s, "rdb_bgsave_in_progress", 0);
    l.info(
        s,
        "rdb_last_save_time",
        shared.last_save.load(Ordering::Relaxed),
    );
    l.info(s, "rdb_last_bgsave_status", "ok");
    l.info(s, "aof_enabled", 1);
    l.info(s, "aof_rewrite_in_progress", 0);
    l.info(s, "aof_rewrite_scheduled", 0);
    l.info(s, "aof_last_write_status", "ok");
    l.info(s, "appendfsync", shared.config.appendfsync());
    l.both(
        s,
        "cascade_group_commits",
        "cascade_group_commits_total",
        Counter,
        "Log persists covering a round of writes (sync durability).",
        m.sum(|w| &w.group_commits),
    );
    l.both(
        s,
        "cascade_sync_persists",
        "cascade_sync_persists_total",
        Counter,
        "Persists of the shared log, by the persister threads or a worker (sync durability).",
        shared.commit.persists().0,
    );
    l.both(
        s,
        "cascade_sync_persists_inline",
        "cascade_sync_persists_inline_total",
        Counter,
        "Persists of the shared log a worker ran itself, none running and recent ones short.",
        shared.commit.persists().1,
    );
    l.both(
        s,
        "cascade_sync_reads_unheld",
        "cascade_sync_reads_unheld_total",
        Counter,
        "Rounds of keyed reads on a connection answered without waiting for a persist.",
        m.sum(|w| &w.reads_unheld),
    );
    l.both(
        s,
        "cascade_sync_reads_no_ticket",
        "cascade_sync_reads_no_ticket_total",
        Counter,
        "Rounds of keyed reads that waited for a running persist, asking for none.",
        m.sum(|w| &w.reads_no_ticket),
    );
    l.both(
        s,
        "cascade_sync_delays",
        "cascade_sync_delays_total",
        Counter,
        "Commit delays: a worker waited for writers on their way before asking for a persist.",
        m.sum(|w| &w.sync_delays),
    );
    l.both(
        s,
        "cascade_sync_delays_expired",
        "cascade_sync_delays_expired_total",
        Counter,
        "Commit delays that ended at their deadline.",
        m.sum(|w| &w.sync_delays_expired),
    );
    l.info(
        s,
        "cascade_previous_shutdown_clean",
        u8::from(rec.clean_shutdown),
    );
    l.info(s, "cascade_recovered_records", rec.records);
    l.info(s, "cascade_recovery_micros", rec.replay_micros);

    let s = "stats";
    let n = m.names.len();
    let cmd_errors: u64 = (0..n).map(|i| m.cmd(i).errors).sum::<u64>();
    let unknown = m.sum(|w| &w.unknown);
    l.both(
        s,
        "total_connections_received",
        "cascade_connections_total",
        Counter,
        "Connections accepted.",
        m.total_connections.load(Ordering::Relaxed),
    );
    l.info(s, "total_commands_processed", m.total_commands());
    l.info(s, "instantaneous_ops_per_sec", shared.ops_per_sec());
    l.both(
        s,
        "total_net_input_bytes",
        "cascade_net_input_bytes_total",
        Counter,
        "Bytes read from clients.",
        m.sum(|w| &w.bytes_in),
    );
    l.both(
        s,
        "total_net_output_bytes",
        "cascade_net_output_bytes_total",
        Counter,
        "Bytes written to clients.",
        m.sum(|w| &w.bytes_out),
    );
    l.info(s, "instantaneous_input_kbps", "0.00");
    l.info(s, "instantaneous_output_kbps", "0.00");
    l.both(
        s,
        "rejected_connections",
        "cascade_rejected_connections_total",
        Counter,
        "Connections refused at maxclients.",
        m.rejected.load(Ordering::Relaxed),
    );
    let syncs = &shared.repl.syncs;
    l.info(s, "sync_full", syncs[0].load(Ordering::Relaxed));
    l.info(s, "sync_partial_ok", syncs[1].load(Ordering::Relaxed));
    l.info(s, "sync_partial_err", syncs[2].load(Ordering::Relaxed));
    l.both(
        s,
        "expired_keys",
        "cascade_expired_keys_total",
        Counter,
        "Keys deleted by expiry.",
        shared.store.expired_keys(),
    );
    l.info(s, "expired_stale_perc", "0.00");
    l.info(s, "expired_time_cap_reached_count", 0);
    l.info(s, "evicted_keys", 0);
    let (hits, misses) = shared.store.lookups();
    l.info(s, "keyspace_hits", hits);
    l.info(s, "keyspace_misses", misses);
    let ps = shared.store.pubsub();
    l.info(
        s,
        "pubsub_channels",
        ps.channels(crate::pubsub::Kind::Channel),
    );
    l.info(s, "pubsub_patterns", ps.numpat());
    l.info(
        s,
        "pubsubshard_channels",
        ps.channels(crate::pubsub::Kind::Shard),
    );
    l.info(
        s,
        "migrate_cached_sockets",
        shared.store.migrate_sockets().count(),
    );
    l.info(s, "tracking_total_keys", tracking.keys);
    l.info(s, "tracking_total_items", tracking.items);
    l.info(s, "tracking_total_prefixes", tracking.prefixes);
    l.info(s, "total_error_replies", cmd_errors + unknown);
    l.both(
        s,
        "",
        "cascade_unknown_commands_total",
        Counter,
        "Unknown commands.",
        unknown,
    );
    l.both(
        s,
        "cascade_idle_timeouts",
        "cascade_idle_timeouts_total",
        Counter,
        "Clients closed for idleness.",
        m.timed_out.load(Ordering::Relaxed),
    );
    l.both(
        s,
        "cascade_protocol_errors",
        "cascade_protocol_errors_total",
        Counter,
        "Clients closed for protocol errors.",
        m.sum(|w| &w.protocol_errors),
    );

    let s = "replication";
    for (name, v) in crate::replication::info::fields(shared) {
        l.info(s, &name, v);
    }

    let s = "cpu";
    let (user, sys) = cpu_seconds();
    l.info(s, "used_cpu_sys", format!("{sys:.6}"));
    l.info(s, "used_cpu_user", format!("{user:.6}"));
    l.info(s, "used_cpu_sys_children", "0.000000");
    l.info(s, "used_cpu_user_children", "0.000000");

    l.info(
        "cluster",
        "cluster_enabled",
        u8::from(shared.cluster.enabled),
    );

    let s = "keyspace";
    let (mut keys, mut expires) = (0, 0);
    for db in 0..shared.store.dbs().count() {
        let (dbk, dbe) = (shared.store.key_count(db), shared.store.expires_count(db));
        if dbk > 0 {
            l.info(
                s,
                &format!("db{db}"),
                format!("keys={dbk},expires={dbe},avg_ttl=0"),
            );
        }
        keys += dbk;
        expires += dbe;
    }
    l.both(s, "", "cascade_keys", Gauge, "Keys (DBSIZE).", keys);
    l.both(
        s,
        "",
        "cascade_keys_with_expiry",
        Gauge,
        "Keys with a time to live.",
        expires,
    );

    for (k, v) in &rows {
        let (prom, kind) = if is_engine_counter(k) {
            (format!("cascade_engine_{k}_total"), Counter)
        } else {
            (format!("cascade_engine_{k}"), Gauge)
        };
        l.both(
            "cascade",
            k,
            &prom,
            kind,
            "Engine statistic (see `cascade stats`).",
            v,
        );
    }
    l.0
}

/// Engine statistics that only grow: event counts, work done, bytes written or read.
fn is_engine_counter(name: &str) -> bool {
    const GROWING: &[&str] = &[
        "switches",
        "flushes",
        "compactions",
        "moved_tables",
        "stalls",
        "reads",
        "writes",
        "_micros",
        "_written",
        "flush_bytes",
        "compaction_bytes",
        "slow_gets",
        "_bytes_read",
        "demotions",
        "demoted_bytes",
        "slow_merges",
        "slow_splits",
    ];
    !name.starts_with("recover") && GROWING.iter().any(|g| name.ends_with(g))
}

/// Per-command totals in table order.
fn command_totals(shared: &Shared) -> Vec<(&'static str, CmdTotals)> {
    let m = &shared.metrics;
    m.names
        .iter()
        .enumerate()
        .map(|(i, n)| (*n, m.cmd(i)))
        .collect()
}

/// Which sections `INFO args...` asks for.
fn wanted(args: &[String]) -> Vec<&'static str> {
    let mut want: Vec<&'static str> = Vec::new();
    let mut add = |names: &mut dyn Iterator<Item = &'static str>| {
        for n in names {
            if !want.contains(&n) {
                want.push(n);
            }
        }
    };
    if args.is_empty() {
        add(&mut DEFAULT.iter().copied());
    }
    for a in args {
        match a.as_str() {
            "default" => add(&mut DEFAULT.iter().copied()),
            // No modules are loaded, so `all` and `everything` are the same here.
            "all" | "everything" => add(&mut SECTIONS.iter().map(|(n, _)| *n)),
            other => add(&mut SECTIONS.iter().map(|(n, _)| *n).filter(|n| *n == other)),
        }
    }
    want
}

/// The text of `INFO [section ...]` (section names lower case).
pub(crate) fn info(shared: &Shared, args: &[String]) -> String {
    let want = wanted(args);
    let metrics = collect(shared);
    let mut o = String::new();
    for (name, title) in SECTIONS {
        if !want.contains(name) {
            continue;
        }
        if !o.is_empty() {
            o.push_str("\r\n");
        }
        let _ = write!(o, "# {title}\r\n");
        for mt in metrics
            .iter()
            .filter(|mt| mt.section == *name && !mt.info.is_empty())
        {
            let _ = write!(o, "{}:{}\r\n", mt.info, mt.value);
        }
        if *name == "errorstats" {
            for (code, n) in shared.metrics.error_codes.lock().iter() {
                let _ = write!(o, "errorstat_{code}:count={n}\r\n");
            }
        }
        if *name == "commandstats" {
            for (n, t) in command_totals(shared) {
                if t.calls > 0 {
                    let per = per_call(t.usec, t.calls);
                    let _ = write!(
                        o,
                        "cmdstat_{n}:calls={},usec={},usec_per_call={per},rejected_calls=0,failed_calls={}\r\n",
                        t.calls, t.usec, t.errors
                    );
                }
            }
        }
    }
    o
}

/// `usec / calls` with two decimals.
fn per_call(usec: u64, calls: u64) -> String {
    let hundredths = usec.saturating_mul(100) / calls.max(1);
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// The `/metrics` page.
pub(crate) fn prometheus(shared: &Shared) -> String {
    let mut p = Prom::default();
    let totals = command_totals(shared);
    let used = || totals.iter().filter(|(_, t)| t.calls > 0);
    p.family(
        "cascade_commands_total",
        "counter",
        "Commands processed, by command.",
    );
    for (n, t) in used() {
        p.sample("cascade_commands_total", &format!("cmd=\"{n}\""), t.calls);
    }
    p.family(
        "cascade_command_errors_total",
        "counter",
        "Commands that replied with an error, by command.",
    );
    for (n, t) in used() {
        p.sample(
            "cascade_command_errors_total",
            &format!("cmd=\"{n}\""),
            t.errors,
        );
    }
    p.family(
        "cascade_command_duration_seconds",
        "histogram",
        "Command execution time on the worker, by command.",
    );
    for (n, t) in used() {
        p.histogram(
            "cascade_command_duration_seconds",
            &format!("cmd=\"{n}\""),
            t,
        );
    }
    for mt in collect(shared) {
        if !mt.prom.is_empty() {
            let kind = match mt.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            p.single(&mt.prom, kind, mt.help, &mt.value);
        }
    }
    p.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::testkit::Kit;

    #[test]
    fn slow_tier_counters_and_gauges() {
        for c in [
            "slow_gets",
            "slow_reads",
            "slow_bytes_read",
            "slow_bytes_written",
            "slow_micros",
            "demotions",
            "demoted_bytes",
            "slow_merges",
            "slow_splits",
        ] {
            assert!(is_engine_counter(c), "{c} only grows");
        }
        for g in [
            "slow_tier_bytes",
            "slow_tier_files",
            "slow_tier_dram_bytes",
            "slow_debt_bytes",
            "slow_write_amplification",
            "fast_write_amplification",
        ] {
            assert!(!is_engine_counter(g), "{g} is a gauge");
        }
    }

    #[test]
    fn sections_follow_redis_semantics() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "1"]);
        let default = k.strings(&["INFO"]).join("\n");
        for h in [
            "# Server",
            "# Clients",
            "# CPU",
            "# Keyspace",
            "# Errorstats",
            "db0:keys=1,expires=0,avg_ttl=0",
        ] {
            assert!(default.contains(h), "{h} in {default}");
        }
        assert!(!default.contains("# Commandstats"));
        let all = k.strings(&["INFO", "all"]).join("\n");
        assert!(all.contains("cmdstat_set:calls=1,"), "{all}");
        let headers = |t: &str| {
            t.lines()
                .filter(|l| l.starts_with('#'))
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            headers(&all),
            headers(&k.strings(&["INFO", "everything"]).join("\n"))
        );
        assert_eq!(headers(&all).len(), SECTIONS.len());
        let two = k.strings(&["INFO", "cpu", "server"]).join("\n");
        assert!(two.starts_with("# Server"), "{two}");
        assert!(two.contains("used_cpu_user:") && !two.contains("# Clients"));
        assert_eq!(k.strings(&["INFO", "nosuchsection"]), Vec::<String>::new());
        let cascade = k.strings(&["INFO", "cascade"]).join("\n");
        assert!(cascade.contains("faststore_entries:"), "{cascade}");
    }

    #[test]
    fn info_and_prometheus_agree() {
        let mut k = Kit::new();
        for i in 0..3 {
            k.ok(&["SET", &format!("k{i}"), "v"]);
        }
        let p = prometheus(&k.shared);
        assert!(p.contains("cascade_commands_total{cmd=\"set\"} 3"), "{p}");
        assert!(
            p.contains("# TYPE cascade_keys gauge\ncascade_keys 3\n"),
            "{p}"
        );
        assert!(p.contains("cascade_engine_faststore_entries "));
        assert!(p.contains("# TYPE cascade_engine_writes_total counter"));
        // Every Prometheus scalar that INFO shows has the same value there.
        let info = info(&k.shared, &["everything".into()]);
        for mt in collect(&k.shared) {
            if !mt.info.is_empty() && !mt.prom.is_empty() && mt.section != "server" {
                assert!(
                    info.contains(&format!("{}:", mt.info)),
                    "{} missing from INFO",
                    mt.info
                );
            }
        }
        assert_eq!(per_call(10, 3), "3.33");
        assert_eq!(human(1536), "1.50K");
        assert_eq!(human(512), "512.00B");
    }
}
