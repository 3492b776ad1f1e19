//! Server settings: fixed at start ([`ServerConfig`]) and changeable at run time with
//! `CONFIG SET` ([`RuntimeConfig`], atomics read by every worker).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{CmdError, CmdResult};
use crate::resp::parse::{MAX_ARGS_DEFAULT, MAX_BULK_DEFAULT};

/// How `cascade serve` was started.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Data directory.
    pub dir: PathBuf,
    /// Address to listen on.
    pub bind: String,
    /// Port (0: pick a free one; the chosen port is printed).
    pub port: u16,
    /// Persist every write before its reply (group commit per event-loop round).
    pub sync: bool,
    /// With buffered durability: persist all logs every this many ms (0 = never;
    /// like Redis `appendfsync everysec` at 1000).
    pub sync_interval_ms: u64,
    /// Worker threads (each owns an engine log).
    pub threads: usize,
    /// With `sync`: threads that persist the workers' shared log while the workers
    /// go on serving (group commit across workers, `commit.rs`); 0: each worker
    /// persists at the end of its own round and waits.
    pub sync_persisters: usize,
    /// Prometheus `/metrics` port.
    pub metrics_port: Option<u16>,
    /// `--requirepass`.
    pub requirepass: Option<String>,
    /// Close clients idle this many seconds (0 = never).
    pub timeout_secs: u64,
    /// Most concurrent clients.
    pub maxclients: u64,
    /// Numbered databases (`SELECT 0` to `databases - 1`), Redis's `databases`.
    pub databases: usize,
    /// Engine options.
    pub engine: cascadekv::Options,
    /// Heap bytes in use (the binary's counting allocator), for INFO and metrics.
    pub heap_bytes: fn() -> u64,
    /// `--replicaof HOST PORT`: start as a replica of that primary.
    pub replicaof: Option<(String, u16)>,
    /// `--config FILE`: replication settings are read from it at start and written
    /// back by `CONFIG REWRITE` (Redis syntax).
    pub config_file: Option<PathBuf>,
    /// Cluster mode (`--cluster-enabled`): the topology comes from `CLUSTERX`.
    pub cluster_enabled: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            dir: PathBuf::from("./cascade-data"),
            bind: "127.0.0.1".into(),
            port: 6380,
            sync: false,
            sync_interval_ms: 1000,
            threads: std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            sync_persisters: 2,
            metrics_port: None,
            requirepass: None,
            timeout_secs: 0,
            maxclients: 10_000,
            databases: 16,
            engine: cascadekv::Options::default(),
            heap_bytes: || 0,
            replicaof: None,
            config_file: None,
            cluster_enabled: false,
        }
    }
}

/// Settings `CONFIG SET` may change while the server runs.
#[derive(Debug)]
pub(crate) struct RuntimeConfig {
    /// Password, if any.
    pub(crate) requirepass: Mutex<Option<Vec<u8>>>,
    /// Idle timeout in seconds (0 = none).
    pub(crate) timeout_secs: AtomicU64,
    /// Most clients.
    pub(crate) maxclients: AtomicU64,
    /// Group-commit every write before replying.
    pub(crate) sync: AtomicBool,
    /// Background persist interval in buffered mode (ms, 0 = never).
    pub(crate) sync_interval_ms: AtomicU64,
    /// Largest bulk string accepted (applies to new connections).
    pub(crate) max_bulk: AtomicU64,
    /// Most elements in a request (applies to new connections).
    pub(crate) max_args: AtomicU64,
    /// Most unparsed bytes buffered per client.
    pub(crate) query_buffer_limit: AtomicU64,
    /// `busy-reply-threshold` (alias `lua-time-limit`): ms a script runs before other
    /// clients get `-BUSY` and SCRIPT KILL may stop it (0: never busy).
    pub(crate) busy_reply_ms: AtomicU64,
    /// Redis settings accepted for compatibility that tune nothing here (encodings,
    /// lazy freeing, ...): their last value, for CONFIG GET.
    pub(crate) inert: Mutex<Vec<(&'static str, String)>>,
}

/// Redis settings that CONFIG SET accepts and that change nothing in this server: the
/// compact-encoding thresholds (`CascadeKV` has one layout per type, `keyspace.rs`),
/// lazy freeing, memory policy and persistence knobs of Redis's own files. Defaults
/// are Redis 7.0's.
const INERT: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "128"),
    ("hash-max-ziplist-value", "64"),
    ("hash-max-listpack-entries", "128"),
    ("hash-max-listpack-value", "64"),
    ("zset-max-ziplist-entries", "128"),
    ("zset-max-ziplist-value", "64"),
    ("zset-max-listpack-entries", "128"),
    ("zset-max-listpack-value", "64"),
    ("set-max-intset-entries", "512"),
    ("list-max-ziplist-size", "-2"),
    ("list-max-listpack-size", "-2"),
    ("list-compress-depth", "0"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("lazyfree-lazy-user-del", "no"),
    ("lazyfree-lazy-user-flush", "no"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("min-replicas-to-write", "0"),
    ("replica-serve-stale-data", "yes"),
    ("replica-read-only", "yes"),
    ("rdb-key-save-delay", "0"),
    ("activerehashing", "yes"),
    ("hz", "10"),
    ("latency-tracking", "no"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
];

/// `stream-node-max-entries`: how many entries approximate (`~`) stream trimming
/// treats as one node, as Redis's radix-tree nodes (`cmd/streams/trim.rs`). Any thread.
pub(crate) static STREAM_NODE_MAX_ENTRIES: AtomicU64 = AtomicU64::new(100);

impl RuntimeConfig {
    /// From the start-up settings.
    pub(crate) fn new(c: &ServerConfig) -> RuntimeConfig {
        RuntimeConfig {
            requirepass: Mutex::new(c.requirepass.clone().map(String::into_bytes)),
            timeout_secs: AtomicU64::new(c.timeout_secs),
            maxclients: AtomicU64::new(c.maxclients),
            sync: AtomicBool::new(c.sync),
            sync_interval_ms: AtomicU64::new(c.sync_interval_ms),
            max_bulk: AtomicU64::new(MAX_BULK_DEFAULT as u64),
            max_args: AtomicU64::new(MAX_ARGS_DEFAULT as u64),
            query_buffer_limit: AtomicU64::new(1 << 30),
            busy_reply_ms: AtomicU64::new(5000),
            inert: Mutex::new(INERT.iter().map(|(k, v)| (*k, (*v).to_string())).collect()),
        }
    }

    /// `appendfsync` as Redis names the mode.
    pub(crate) fn appendfsync(&self) -> &'static str {
        if self.sync.load(Ordering::Relaxed) {
            "always"
        } else if self.sync_interval_ms.load(Ordering::Relaxed) > 0 {
            "everysec"
        } else {
            "no"
        }
    }

    /// Every parameter and its value, in a stable order (CONFIG GET).
    pub(crate) fn params(&self, fixed: &ServerConfig) -> Vec<(&'static str, String)> {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        let mut p = vec![
            ("bind", fixed.bind.clone()),
            ("port", fixed.port.to_string()),
            ("dir", fixed.dir.display().to_string()),
            ("databases", fixed.databases.to_string()),
            (
                "cluster-enabled",
                if fixed.cluster_enabled { "yes" } else { "no" }.into(),
            ),
            ("save", String::new()),
            ("appendonly", "yes".into()),
            ("appendfsync", self.appendfsync().into()),
            (
                "requirepass",
                self.requirepass
                    .lock()
                    .as_ref()
                    .map(|p| String::from_utf8_lossy(p).into_owned())
                    .unwrap_or_default(),
            ),
            ("timeout", l(&self.timeout_secs)),
            ("maxclients", l(&self.maxclients)),
            ("proto-max-bulk-len", l(&self.max_bulk)),
            ("client-query-buffer-limit", l(&self.query_buffer_limit)),
            (
                "cascade-durability",
                if self.sync.load(Ordering::Relaxed) {
                    "sync"
                } else {
                    "buffered"
                }
                .into(),
            ),
            ("cascade-sync-interval-ms", l(&self.sync_interval_ms)),
            ("lua-time-limit", l(&self.busy_reply_ms)),
            ("busy-reply-threshold", l(&self.busy_reply_ms)),
            ("cascade-threads", fixed.threads.to_string()),
            ("cascade-pool-size", fixed.engine.pool_size.to_string()),
            (
                "cascade-faststore-capacity",
                fixed.engine.faststore_capacity.to_string(),
            ),
            (
                "cascade-max-value-len",
                fixed.engine.max_value_len.to_string(),
            ),
            // The slow tier (`--slow-dir`; empty: none). The fast budget is the one in
            // effect (a quarter of the pool for `--fast-budget 0`).
            (
                "cascade-slow-dir",
                fixed
                    .engine
                    .slow_dir
                    .as_ref()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default(),
            ),
            (
                "cascade-fast-budget",
                fixed.engine.effective_fast_budget().to_string(),
            ),
            (
                "cascade-slow-write-rate",
                fixed.engine.slow_write_rate.to_string(),
            ),
            (
                "cascade-slow-direct-reads",
                if fixed.engine.slow_direct_reads {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            ),
        ];
        p.extend(self.inert.lock().iter().map(|(k, v)| (*k, v.clone())));
        p
    }

    /// CONFIG SET one parameter.
    pub(crate) fn set(&self, name: &str, value: &[u8]) -> CmdResult<()> {
        let v = String::from_utf8_lossy(value).into_owned();
        let invalid = |why: &str| {
            CmdError::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        let num = || -> CmdResult<u64> {
            parse_mem(&v).ok_or_else(|| invalid("argument couldn't be parsed into an integer"))
        };
        if name == "stream-node-max-entries" {
            // Also kept (as text) with the inert settings below, for CONFIG GET.
            STREAM_NODE_MAX_ENTRIES.store(num()?, Ordering::Relaxed);
        }
        match name {
            "timeout" => self.timeout_secs.store(num()?, Ordering::Relaxed),
            "lua-time-limit" | "busy-reply-threshold" => {
                self.busy_reply_ms.store(num()?, Ordering::Relaxed);
            }
            "maxclients" => self.maxclients.store(num()?.max(1), Ordering::Relaxed),
            "proto-max-bulk-len" => {
                let n = num()?;
                if n < 1024 {
                    return Err(invalid("argument must be a memory value of at least 1kb"));
                }
                self.max_bulk.store(n, Ordering::Relaxed);
            }
            "client-query-buffer-limit" => {
                let n = num()?;
                if n < 1024 * 1024 {
                    return Err(invalid("argument must be a memory value of at least 1mb"));
                }
                self.query_buffer_limit.store(n, Ordering::Relaxed);
            }
            "requirepass" => {
                *self.requirepass.lock() = (!value.is_empty()).then(|| value.to_vec());
            }
            "appendfsync" => match v.to_ascii_lowercase().as_str() {
                "always" => self.sync.store(true, Ordering::Relaxed),
                "everysec" => {
                    self.sync.store(false, Ordering::Relaxed);
                    self.sync_interval_ms.store(1000, Ordering::Relaxed);
                }
                "no" => {
                    self.sync.store(false, Ordering::Relaxed);
                    self.sync_interval_ms.store(0, Ordering::Relaxed);
                }
                _ => {
                    return Err(invalid(
                        "argument(s) must be one of the following: always, everysec, no",
                    ))
                }
            },
            "cascade-durability" => match v.to_ascii_lowercase().as_str() {
                "sync" => self.sync.store(true, Ordering::Relaxed),
                "buffered" => self.sync.store(false, Ordering::Relaxed),
                _ => {
                    return Err(invalid(
                        "argument(s) must be one of the following: buffered, sync",
                    ))
                }
            },
            // Redis's own snapshot and AOF switches: the engine is always persistent.
            "save" | "appendonly" => {}
            "cascade-sync-interval-ms" => self.sync_interval_ms.store(num()?, Ordering::Relaxed),
            "bind"
            | "port"
            | "dir"
            | "databases"
            | "cluster-enabled"
            | "cascade-threads"
            | "cascade-pool-size"
            | "cascade-faststore-capacity"
            | "cascade-max-value-len"
            | "cascade-slow-dir"
            | "cascade-fast-budget"
            | "cascade-slow-write-rate"
            | "cascade-slow-direct-reads" => return Err(invalid("can't set immutable config")),
            _ => {
                let mut inert = self.inert.lock();
                let Some(slot) = inert.iter_mut().find(|(k, _)| *k == name) else {
                    return Err(CmdError::err(format!(
                        "Unknown option or number of arguments for CONFIG SET - '{name}'"
                    )));
                };
                // Values are checked as Redis checks them, though they tune nothing.
                let default = INERT.iter().find(|(k, _)| *k == name).map_or("", |d| d.1);
                let numeric = default.parse::<i64>().is_ok();
                if numeric && v.parse::<i64>().is_err() && parse_mem(&v).is_none() {
                    return Err(invalid("argument couldn't be parsed into an integer"));
                }
                if matches!(default, "yes" | "no") && !matches!(v.as_str(), "yes" | "no") {
                    return Err(invalid("argument must be 'yes' or 'no'"));
                }
                slot.1 = v;
            }
        }
        Ok(())
    }
}

/// Parses `123`, `64kb`, `512mb`, `1gb` (Redis memory units, 1024-based).
pub(crate) fn parse_mem(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = if let Some(n) = s.strip_suffix("gb") {
        (n, 1u64 << 30)
    } else if let Some(n) = s.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = s.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = s.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = s.strip_suffix('k') {
        (n, 1000)
    } else {
        (s.as_str(), 1)
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_mem("10"), Some(10));
        assert_eq!(parse_mem("64kb"), Some(65536));
        assert_eq!(parse_mem("512mb"), Some(512 << 20));
        assert_eq!(parse_mem("1gb"), Some(1 << 30));
        assert_eq!(parse_mem("x"), None);
    }

    #[test]
    fn set_and_get() {
        let c = ServerConfig::default();
        let r = RuntimeConfig::new(&c);
        r.set("appendfsync", b"always").expect("set");
        assert_eq!(r.appendfsync(), "always");
        r.set("timeout", b"30").expect("set");
        assert!(r.set("port", b"1").is_err());
        assert!(r.set("nope", b"1").is_err());
        assert!(r.set("proto-max-bulk-len", b"10").is_err());
        let p = r.params(&c);
        assert!(p.contains(&("timeout", "30".to_string())));
    }

    #[test]
    fn slow_tier_settings_are_listed_and_fixed() {
        let mut c = ServerConfig::default();
        let r = RuntimeConfig::new(&c);
        let p = r.params(&c);
        assert!(p.contains(&("cascade-slow-dir", String::new())));
        let quarter = (c.engine.pool_size / 4).to_string();
        assert!(p.contains(&("cascade-fast-budget", quarter)));
        assert!(p.contains(&("cascade-slow-write-rate", "0".to_string())));
        assert!(p.contains(&("cascade-slow-direct-reads", "no".to_string())));
        c.engine.slow_dir = Some(PathBuf::from("/mnt/ssd/slow"));
        c.engine.fast_budget = 1 << 20;
        c.engine.slow_write_rate = 8 << 20;
        c.engine.slow_direct_reads = true;
        let p = r.params(&c);
        assert!(p.contains(&("cascade-slow-dir", "/mnt/ssd/slow".to_string())));
        assert!(p.contains(&("cascade-fast-budget", (1u64 << 20).to_string())));
        assert!(p.contains(&("cascade-slow-write-rate", (8u64 << 20).to_string())));
        assert!(p.contains(&("cascade-slow-direct-reads", "yes".to_string())));
        for name in [
            "cascade-slow-dir",
            "cascade-fast-budget",
            "cascade-slow-write-rate",
            "cascade-slow-direct-reads",
        ] {
            assert!(r.set(name, b"1").is_err(), "{name} is fixed at start");
        }
    }
}
