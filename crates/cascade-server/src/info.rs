//! `INFO` sections and the Prometheus `/metrics` page: the same numbers in two
//! formats, read from [`Shared`] (server counters) and the engine's `Stats`.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::metrics::Prom;
use crate::server::Shared;

/// Sections `INFO` with no argument prints.
const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "keyspace",
    "cascade",
];

/// Resident set size of this process in bytes (0 if unknown).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn human(b: u64) -> String {
    let units = ["B", "K", "M", "G", "T"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2}{}", units[u])
}

/// The text of `INFO [section ...]`.
pub fn info(shared: &Shared, sections: &[String]) -> String {
    let all = sections.iter().any(|s| s == "all" || s == "everything");
    let want = |name: &str| {
        if sections.is_empty() || (sections.len() == 1 && sections[0] == "default") {
            DEFAULT.contains(&name)
        } else {
            (all && name != "commandstats")
                || sections.iter().any(|s| s == name)
                || (name == "commandstats"
                    && sections
                        .iter()
                        .any(|s| s == "everything" || s == "commandstats"))
        }
    };
    let m = &shared.metrics;
    let mut o = String::new();
    let line = |o: &mut String, k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(o, "{k}:{v}\r\n");
    };
    let uptime = shared.started.elapsed().as_secs();
    if want("server") {
        o.push_str("# Server\r\n");
        line(&mut o, "redis_version", &crate::REDIS_COMPAT_VERSION);
        line(&mut o, "cascade_version", &env!("CARGO_PKG_VERSION"));
        line(&mut o, "redis_mode", &"standalone");
        line(&mut o, "os", &std::env::consts::OS);
        line(&mut o, "arch_bits", &64);
        line(&mut o, "multiplexing_api", &"epoll");
        line(&mut o, "process_id", &std::process::id());
        line(&mut o, "run_id", &shared.run_id);
        line(&mut o, "tcp_port", &shared.port);
        line(
            &mut o,
            "server_time_usec",
            &(crate::keyspace::now_ms() * 1000),
        );
        line(&mut o, "uptime_in_seconds", &uptime);
        line(&mut o, "uptime_in_days", &(uptime / 86400));
        line(&mut o, "io_threads_active", &0);
        line(&mut o, "cascade_worker_threads", &shared.fixed.threads);
        o.push_str("\r\n");
    }
    if want("clients") {
        o.push_str("# Clients\r\n");
        line(
            &mut o,
            "connected_clients",
            &m.connected.load(Ordering::Relaxed),
        );
        line(
            &mut o,
            "maxclients",
            &shared.config.maxclients.load(Ordering::Relaxed),
        );
        line(&mut o, "blocked_clients", &0);
        o.push_str("\r\n");
    }
    let st = shared.store.db().stats();
    if want("memory") {
        let heap = (shared.fixed.heap_bytes)();
        let rss = rss_bytes();
        o.push_str("# Memory\r\n");
        line(&mut o, "used_memory", &heap);
        line(&mut o, "used_memory_human", &human(heap));
        line(&mut o, "used_memory_rss", &rss);
        line(&mut o, "used_memory_rss_human", &human(rss));
        line(&mut o, "maxmemory", &0);
        line(
            &mut o,
            "cascade_index_dram_bytes",
            &(st.faststore_dram_bytes + st.buffer_dram_bytes + st.stable_dram_bytes),
        );
        line(&mut o, "cascade_pool_bytes_used", &st.pool_bytes_used);
        line(&mut o, "cascade_pool_bytes_total", &st.pool_bytes_total);
        o.push_str("\r\n");
    }
    if want("persistence") {
        let rec = shared.store.db().recovery_info();
        o.push_str("# Persistence\r\n");
        line(&mut o, "loading", &0);
        line(&mut o, "aof_enabled", &1);
        line(&mut o, "appendfsync", &shared.config.appendfsync());
        line(
            &mut o,
            "cascade_group_commits",
            &m.sum(|w| &w.group_commits),
        );
        line(
            &mut o,
            "cascade_previous_shutdown_clean",
            &u8::from(rec.clean_shutdown),
        );
        line(&mut o, "cascade_recovered_records", &rec.records);
        line(&mut o, "cascade_recovery_micros", &rec.replay_micros);
        o.push_str("\r\n");
    }
    let n = shared.commands.specs.len();
    if want("stats") {
        let errors: u64 = (0..n).map(|i| m.cmd(i).errors).sum::<u64>() + m.sum(|w| &w.unknown);
        o.push_str("# Stats\r\n");
        line(
            &mut o,
            "total_connections_received",
            &m.total_connections.load(Ordering::Relaxed),
        );
        line(&mut o, "total_commands_processed", &m.total_commands(n));
        line(&mut o, "instantaneous_ops_per_sec", &shared.ops_per_sec());
        line(&mut o, "total_net_input_bytes", &m.sum(|w| &w.bytes_in));
        line(&mut o, "total_net_output_bytes", &m.sum(|w| &w.bytes_out));
        line(
            &mut o,
            "rejected_connections",
            &m.rejected.load(Ordering::Relaxed),
        );
        line(
            &mut o,
            "expired_keys",
            &shared.store.expired_keys.load(Ordering::Relaxed),
        );
        line(&mut o, "total_error_replies", &errors);
        line(
            &mut o,
            "cascade_idle_timeouts",
            &m.timed_out.load(Ordering::Relaxed),
        );
        line(
            &mut o,
            "cascade_protocol_errors",
            &m.sum(|w| &w.protocol_errors),
        );
        o.push_str("\r\n");
    }
    if want("replication") {
        o.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n\r\n");
    }
    if want("commandstats") {
        o.push_str("# Commandstats\r\n");
        for (i, s) in shared.commands.specs.iter().enumerate() {
            let t = m.cmd(i);
            if t.calls > 0 {
                let per = t.usec as f64 / t.calls as f64;
                let _ = write!(
                    o,
                    "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls=0,failed_calls={}\r\n",
                    s.name, t.calls, t.usec, t.errors
                );
            }
        }
        o.push_str("\r\n");
    }
    if want("keyspace") {
        o.push_str("# Keyspace\r\n");
        let keys = shared.store.key_count();
        if keys > 0 {
            let _ = write!(
                o,
                "db0:keys={keys},expires={},avg_ttl=0\r\n",
                shared.store.expires_count()
            );
        }
        o.push_str("\r\n");
    }
    if want("cascade") {
        o.push_str("# Cascade\r\n");
        for (k, v) in st.rows() {
            line(&mut o, k, &v);
        }
        o.push_str("\r\n");
    }
    while o.ends_with("\r\n\r\n") {
        o.truncate(o.len() - 2);
    }
    o
}

/// Engine stats that only grow (Prometheus counters); the rest are gauges.
const ENGINE_COUNTERS: &[&str] = &[
    "faststore_switches",
    "flushes",
    "flush_bytes",
    "flush_micros",
    "compactions",
    "compaction_bytes",
    "compaction_micros",
    "moved_tables",
    "log_bytes_written",
    "user_bytes_written",
    "stalls",
    "stall_micros",
    "reads",
    "writes",
];

/// The `/metrics` page.
pub fn prometheus(shared: &Shared) -> String {
    let m = &shared.metrics;
    let mut p = Prom::default();
    let specs = &shared.commands.specs;
    let totals: Vec<_> = (0..specs.len()).map(|i| m.cmd(i)).collect();
    p.family(
        "cascade_commands_total",
        "counter",
        "Commands processed, by command.",
    );
    for (s, t) in specs.iter().zip(&totals) {
        if t.calls > 0 {
            p.sample(
                "cascade_commands_total",
                &format!("cmd=\"{}\"", s.name),
                t.calls,
            );
        }
    }
    p.family(
        "cascade_command_errors_total",
        "counter",
        "Commands that replied with an error, by command.",
    );
    for (s, t) in specs.iter().zip(&totals) {
        if t.calls > 0 {
            p.sample(
                "cascade_command_errors_total",
                &format!("cmd=\"{}\"", s.name),
                t.errors,
            );
        }
    }
    p.single(
        "cascade_unknown_commands_total",
        "counter",
        "Unknown commands.",
        m.sum(|w| &w.unknown),
    );
    p.family(
        "cascade_command_duration_seconds",
        "histogram",
        "Command execution time on the worker, by command.",
    );
    for (s, t) in specs.iter().zip(&totals) {
        if t.calls > 0 {
            p.histogram(
                "cascade_command_duration_seconds",
                &format!("cmd=\"{}\"", s.name),
                t,
            );
        }
    }
    p.single(
        "cascade_connected_clients",
        "gauge",
        "Connected clients.",
        m.connected.load(Ordering::Relaxed),
    );
    p.single(
        "cascade_connections_total",
        "counter",
        "Connections accepted.",
        m.total_connections.load(Ordering::Relaxed),
    );
    p.single(
        "cascade_rejected_connections_total",
        "counter",
        "Connections refused at maxclients.",
        m.rejected.load(Ordering::Relaxed),
    );
    p.single(
        "cascade_idle_timeouts_total",
        "counter",
        "Clients closed for idleness.",
        m.timed_out.load(Ordering::Relaxed),
    );
    p.single(
        "cascade_protocol_errors_total",
        "counter",
        "Clients closed for protocol errors.",
        m.sum(|w| &w.protocol_errors),
    );
    p.single(
        "cascade_net_input_bytes_total",
        "counter",
        "Bytes read from clients.",
        m.sum(|w| &w.bytes_in),
    );
    p.single(
        "cascade_net_output_bytes_total",
        "counter",
        "Bytes written to clients.",
        m.sum(|w| &w.bytes_out),
    );
    p.single(
        "cascade_group_commits_total",
        "counter",
        "Log persists covering a round of writes (sync durability).",
        m.sum(|w| &w.group_commits),
    );
    p.single(
        "cascade_keys",
        "gauge",
        "Keys (DBSIZE).",
        shared.store.key_count(),
    );
    p.single(
        "cascade_keys_with_expiry",
        "gauge",
        "Keys with a time to live.",
        shared.store.expires_count(),
    );
    p.single(
        "cascade_expired_keys_total",
        "counter",
        "Keys deleted by expiry.",
        shared.store.expired_keys.load(Ordering::Relaxed),
    );
    p.single(
        "cascade_heap_bytes",
        "gauge",
        "Heap bytes allocated by the server process.",
        (shared.fixed.heap_bytes)(),
    );
    p.single(
        "cascade_resident_bytes",
        "gauge",
        "Resident set size of the server process.",
        rss_bytes(),
    );
    p.single(
        "cascade_uptime_seconds",
        "gauge",
        "Seconds since start.",
        shared.started.elapsed().as_secs(),
    );
    for (k, v) in shared.store.db().stats().rows() {
        let kind = if ENGINE_COUNTERS.contains(&k) {
            "counter"
        } else {
            "gauge"
        };
        let name = if kind == "counter" {
            format!("cascade_engine_{k}_total")
        } else {
            format!("cascade_engine_{k}")
        };
        p.single(&name, kind, &format!("Engine statistic {k}."), v);
    }
    p.finish()
}
