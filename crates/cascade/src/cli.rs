//! Argument parsing and the store subcommands.
//!
//! The doc comments of `Cli` and of the arguments and subcommand variants below are
//! clap's `--help` text.

use std::io::Write;
use std::path::PathBuf;

use cascadekv::{Db, Durability, Options};
use clap::{Args, Parser, Subcommand};

/// CascadeKV: a persistent key-value store for ultra-fast storage.
#[derive(Debug, Parser)]
#[command(name = "cascade", version, about)]
struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    cmd: Cmd,
}

/// Where the store is and how it is opened, for the store subcommands.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Data directory.
    #[arg(long, default_value = "./cascade-data", global = true)]
    pub dir: PathBuf,
    /// Fast-tier pool size used when creating the store (e.g. 4G, 512M).
    #[arg(long, default_value = "4G", value_parser = parse_size, global = true)]
    pub pool_size: u64,
    /// Persist each write before returning (survives power loss).
    #[arg(long, global = true)]
    pub sync: bool,
    /// Slow-tier directory: required to open a store that keeps data in a slow tier
    /// (one served with `cascade serve --slow-dir`).
    #[arg(long, global = true)]
    pub slow_dir: Option<PathBuf>,
    /// With --slow-dir: bytes of StableStore data kept in the pool before key ranges
    /// move to the slow tier (e.g. 1G; 0 = a quarter of the pool).
    #[arg(long, default_value = "0", value_parser = parse_size, global = true)]
    pub fast_budget: u64,
}

impl StoreArgs {
    /// Engine options for these arguments.
    fn options(&self) -> Options {
        Options {
            pool_size: self.pool_size,
            slow_dir: self.slow_dir.clone(),
            fast_budget: self.fast_budget,
            durability: if self.sync {
                Durability::Sync
            } else {
                Durability::Buffered
            },
            ..Options::default()
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Serve the store over the Redis protocol (RESP2) until SIGINT/SIGTERM/SHUTDOWN.
    Serve(Box<ServeArgs>),
    /// Set KEY to VALUE.
    Put {
        /// Key.
        key: String,
        /// Value.
        value: String,
        /// Where the store is and how it is opened.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the value of KEY (exit code 1 if missing).
    Get {
        /// Key.
        key: String,
        /// Where the store is and how it is opened.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete KEY.
    Delete {
        /// Key.
        key: String,
        /// Where the store is and how it is opened.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print keys and values in key order (tab-separated).
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        start: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        end: Option<String>,
        /// Most pairs to print.
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// Where the store is and how it is opened.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print engine statistics.
    Stats {
        /// Where the store is and how it is opened.
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Read every structure of a store and list each damaged record (offset,
    /// structure, key when readable) without changing anything. Exit status: 0 clean,
    /// 1 damaged, 2 could not be read (not a store, in use, I/O error).
    Verify {
        /// Data directory.
        #[arg(long, default_value = "./cascade-data")]
        dir: PathBuf,
        /// The store's slow-tier directory (needed when it keeps data in a slow tier;
        /// its files are checked too, and only read).
        #[arg(long)]
        slow_dir: Option<PathBuf>,
    },
    /// Salvage a damaged store: keep every intact version, drop what is damaged, keep
    /// the damaged store as DIR.damaged-TIMESTAMP and write REPAIR-REPORT.txt there
    /// listing exactly what was lost. Never run automatically. Exit status: 0 repaired
    /// (or nothing to repair), 2 failed.
    Repair {
        /// Data directory.
        #[arg(long, default_value = "./cascade-data")]
        dir: PathBuf,
        /// The store's slow-tier directory (needed when it keeps data in a slow tier):
        /// its intact keys are salvaged too, the damaged one is kept beside it with a
        /// .damaged-TIMESTAMP suffix and the repaired store gets a new one in its place.
        #[arg(long)]
        slow_dir: Option<PathBuf>,
        /// With --slow-dir: the repaired store's fast budget, as the store is served
        /// with (e.g. 1G; 0 = a quarter of the pool).
        #[arg(long, default_value = "0", value_parser = parse_size)]
        fast_budget: u64,
    },
    /// Run benchmark workloads (see docs/benchmarks.md).
    Bench(Box<BenchArgs>),
}

/// `cascade serve`.
#[derive(Debug, Args)]
struct ServeArgs {
    /// Data directory (created if missing).
    #[arg(long, default_value = "./cascade-data")]
    dir: PathBuf,
    /// Address to listen on (loopback by default; use 0.0.0.0 to expose).
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// TCP port (0 picks a free one; the chosen address is printed).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// buffered: a write survives a crash of the server process at once and power
    /// loss after the next periodic persist (--sync-interval-ms, like Redis
    /// appendfsync everysec); sync: every write is persisted before its reply
    /// (group commit per event-loop round, like appendfsync always).
    #[arg(long, default_value = "buffered")]
    durability: String,
    /// With buffered durability, persist all logs every this many ms (0 = only at
    /// shutdown and SAVE).
    #[arg(long, default_value_t = 1000)]
    sync_interval_ms: u64,
    /// Worker threads (each owns an engine log). Default: the number of cores.
    #[arg(long)]
    threads: Option<usize>,
    /// With --durability sync: threads that persist the workers' shared log while the
    /// workers go on serving, used while persists take 0.5 ms or more on average (a
    /// worker persists itself when they are faster; 0: each worker persists at the end
    /// of its own round).
    #[arg(long, default_value_t = 2)]
    sync_persisters: usize,
    /// Serve Prometheus metrics on http://BIND:PORT/metrics.
    #[arg(long)]
    metrics_port: Option<u16>,
    /// Require AUTH with this password.
    #[arg(long)]
    requirepass: Option<String>,
    /// Close clients idle for this many seconds (0 = never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// Most concurrent clients.
    #[arg(long, default_value_t = 10_000)]
    maxclients: u64,
    /// Numbered databases (SELECT 0 to N-1), as Redis's `databases`. A store keeps
    /// the number it was last opened with (SWAPDB's map records it).
    #[arg(long, default_value_t = 16)]
    databases: usize,
    /// Cluster mode, as Redis Cluster's `cluster-enabled yes`: the topology is set by
    /// a controller with CLUSTERX (SETNODEID, SETNODES, SETSLOT, MIGRATE) as in
    /// Apache Kvrocks; clients get MOVED/CROSSSLOT/CLUSTERDOWN; only database 0.
    #[arg(long)]
    cluster_enabled: bool,
    /// Fast-tier pool size used when creating the store (e.g. 4G).
    #[arg(long, default_value = "4G", value_parser = parse_size)]
    pool_size: u64,
    /// FastStore capacity (DRAM index bytes) before it is flushed (e.g. 256M).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    faststore_capacity: u64,
    /// Scrub in the background: re-verify every table block and separated value at
    /// most this many bytes per second (0 = off). Gets verify a table block on its
    /// first read after start only; the scrubber catches a flip after that (README
    /// "Guarantees"). Findings show in INFO.
    #[arg(long, default_value = "16M", value_parser = parse_size)]
    scrub_rate: u64,
    /// Slow (capacity) tier directory, on ordinary SSD: StableStore data beyond
    /// --fast-budget moves to table files here. A store with slow-tier data must
    /// always be opened with its slow directory.
    #[arg(long)]
    slow_dir: Option<PathBuf>,
    /// With --slow-dir: bytes of StableStore data (tables and the values they point
    /// to) kept in the pool before key ranges are demoted (e.g. 1G; 0 = a quarter of
    /// the pool).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    fast_budget: u64,
    /// With --slow-dir: most bytes per second demotions and slow-tier merges write
    /// (e.g. 64M; 0 = unlimited).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    slow_write_rate: u64,
    #[command(flatten)]
    placement: PlacementArgs,
    /// Start as a replica of the primary at HOST PORT (as Redis's `replicaof`).
    #[arg(long, num_args = 2, value_names = ["HOST", "PORT"])]
    replicaof: Option<Vec<String>>,
    /// Redis-syntax config file: replication settings (replicaof, replica-priority,
    /// replica-announce-ip/port, masterauth, repl-timeout, repl-backlog-size) are read
    /// from it at start, and CONFIG REWRITE writes them back to it.
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Popularity placement over the slow tier (issue #15), for `serve` and `bench`
/// (where the `cascade-place` engine turns it on unless these flags do).
#[derive(Debug, Args, Clone, Copy)]
struct PlacementArgs {
    /// With --slow-dir: how demotions choose key ranges: key-order (round robin over
    /// the key space), msc (PrismDB's cost-benefit metric), msc-exact, random or
    /// oldest.
    #[arg(long, default_value = "key-order")]
    demotion_policy: cascadekv::DemotionPolicy,
    /// With --slow-dir: share of the fast budget that keys read often may keep
    /// pinned in the fast tier, with promotions of hot slow-tier keys (PrismDB; e.g.
    /// 0.7). 0, the default, is popularity off.
    #[arg(long, default_value_t = 0.0)]
    pin_fraction: f64,
    /// With --slow-dir: a get's slow-tier reads bypass the page cache (direct I/O), so
    /// each costs a device read, as on an SSD much larger than memory. The slow
    /// directory's file system must support direct I/O (tmpfs before Linux 6.6 does
    /// not; on a newer tmpfs direct reads are still memory copies).
    #[arg(long)]
    slow_direct_reads: bool,
}

/// Runs the server until it stops; the process exit code (1 if the server failed).
fn serve(a: ServeArgs) -> Result<i32, cascadekv::Error> {
    let sync = match a.durability.as_str() {
        "buffered" => false,
        "sync" => true,
        other => {
            return Err(cascadekv::Error::invalid(format!(
                "--durability {other:?}: use buffered or sync"
            )))
        }
    };
    let replicaof = match a.replicaof.as_deref() {
        None => None,
        Some([host, port]) => Some((
            host.clone(),
            port.parse::<u16>().map_err(|_| {
                cascadekv::Error::invalid(format!(
                    "--replicaof {host} {port}: the port must be 1-65535"
                ))
            })?,
        )),
        Some(_) => return Err(cascadekv::Error::invalid("--replicaof takes HOST PORT")),
    };
    let defaults = cascade_server::ServerConfig::default();
    let cfg = cascade_server::ServerConfig {
        dir: a.dir,
        bind: a.bind,
        port: a.port,
        sync,
        sync_interval_ms: a.sync_interval_ms,
        threads: a.threads.unwrap_or(defaults.threads).max(1),
        sync_persisters: a.sync_persisters,
        metrics_port: a.metrics_port,
        requirepass: a.requirepass,
        timeout_secs: a.timeout,
        maxclients: a.maxclients.max(1),
        databases: a.databases,
        engine: Options {
            pool_size: a.pool_size,
            faststore_capacity: a.faststore_capacity,
            scrub_bytes_per_sec: a.scrub_rate,
            slow_dir: a.slow_dir,
            fast_budget: a.fast_budget,
            slow_write_rate: a.slow_write_rate,
            demotion_policy: a.placement.demotion_policy,
            pin_fraction: a.placement.pin_fraction,
            slow_direct_reads: a.placement.slow_direct_reads,
            ..Options::default()
        },
        heap_bytes: || cascade_bench::alloc::heap_bytes() as u64,
        replicaof,
        config_file: a.config,
        cluster_enabled: a.cluster_enabled,
    };
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| cascadekv::Error::io(format!("creating {}", cfg.dir.display()), e))?;
    match cascade_server::run(cfg) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}

/// `cascade bench`.
#[derive(Debug, Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each bool is an independent command-line switch"
)]
struct BenchArgs {
    /// Engines, run one after another on the same settings: cascade,
    /// cascade-nocleaning (log cleaning off), cascade-vb (each thread persists its own
    /// synchronous writes: no batching across threads), cascade-plain (a log record per
    /// operation: no packed records), cascade-sf (Bloom filters on StableStore tables
    /// too), cascade-hikv (HiKV's hybrid hash + tree FastStore index), cascade-fast
    /// (--slow-dir ignored: everything in the pool), cascade-place (slow tier with
    /// PrismDB's popularity placement), dram-index (the FastStore alone), dram-hikv (the FastStore alone with the hybrid index),
    /// rocksdb (needs a build with `--features rocksdb`). Ratios are against the first.
    #[arg(long, default_value = "cascade")]
    engine: String,
    /// Workloads in order. YCSB: load, a, b, c, d, e, f. Micro: fillseq, fillrandom, fillbatch,
    /// overwrite, readrandom, readseq, readmissing, seekrandom, deleterandom. Also
    /// settle (flush + compact everything).
    #[arg(long, default_value = "fillrandom,readrandom")]
    workloads: String,
    /// Base directory; each engine gets `<dir>/<engine>` (wiped first unless --reuse).
    #[arg(long, default_value = "/dev/shm/cascade-bench")]
    dir: PathBuf,
    /// Keep existing stores; for cascade, measure opening (recovery) first.
    #[arg(long)]
    reuse: bool,
    /// Records loaded (the key space).
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Operations per non-load workload (default: --num).
    #[arg(long)]
    ops: Option<u64>,
    /// Seconds per non-load workload instead of --ops.
    #[arg(long)]
    duration: Option<f64>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Key size in bytes for binary keys (at least 8).
    #[arg(long, default_value_t = 8)]
    key_size: usize,
    /// Value size in bytes, fixed ("100") or a range ("100-1000").
    #[arg(long, default_value = "8")]
    value_size: String,
    /// Keys: binary (fixed width) or ycsb ("user" + hashed number). Default: ycsb when
    /// a YCSB workload is run, else binary.
    #[arg(long)]
    key_mode: Option<String>,
    /// YCSB request distribution override: zipfian, uniform, latest.
    #[arg(long)]
    distribution: Option<String>,
    /// YCSB Zipfian constant (theta) of the zipfian and latest request distributions,
    /// above 0 and below 1 (at most 0.999999). 0.99, the default, is YCSB's: zipfian
    /// hashes a Zipfian over 1e10 items with YCSB's precomputed zeta onto the records.
    /// Any other value: zipfian hashes (same FNV hash) a Zipfian over the records
    /// (plus expected inserts) with zeta computed for that count; latest uses a
    /// Zipfian with this theta.
    #[arg(long, value_parser = parse_zipf_constant)]
    zipf_constant: Option<f64>,
    /// Entries per seekrandom / readseq batch.
    #[arg(long, default_value_t = 100)]
    scan_len: usize,
    /// Pairs per atomic write batch in `fillbatch`.
    #[arg(long, default_value_t = 16)]
    write_batch: usize,
    /// buffered or sync.
    #[arg(long, default_value = "buffered")]
    durability: String,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Pool size (e.g. 8G).
    #[arg(long, default_value = "8G", value_parser = parse_size)]
    pool_size: u64,
    /// FastStore capacity before a switch (e.g. 64M).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    faststore_capacity: u64,
    /// FastStore log bytes before a switch (0: automatic, 1/16 of the pool, at most
    /// 256 MiB); raise it with --faststore-capacity to keep a large load in the FastStore.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    faststore_log_capacity: u64,
    /// While writes dominate, switch the FastStore only at this many times its
    /// capacities (FluidKV §4.4 load-awareness: loads flush and compact less; 1 = off).
    #[arg(long, default_value_t = 1)]
    faststore_write_heavy_factor: u32,
    /// Keep data in the FastStore under read-only load (measure FastStore reads).
    #[arg(long)]
    keep_faststore: bool,
    /// LST block size in bytes.
    #[arg(long, default_value_t = 512)]
    block_size: usize,
    /// Slow-tier base directory (on the capacity device): each engine gets
    /// `<slow-dir>/<engine>` (wiped first unless --reuse). The cascade engines demote
    /// StableStore data beyond --fast-budget there; RocksDB gets `db_paths` = [its
    /// directory with --fast-budget bytes, this one]. The dram-* engines ignore it.
    #[arg(long)]
    slow_dir: Option<PathBuf>,
    /// With --slow-dir: bytes kept on the fast tier before data moves to the slow
    /// tier (e.g. 1G; 0 = a quarter of --pool-size).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    fast_budget: u64,
    /// With --slow-dir: most bytes per second the cascade engines' demotions and
    /// slow-tier merges write (e.g. 64M; 0 = unlimited).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    slow_write_rate: u64,
    #[command(flatten)]
    placement: PlacementArgs,
    /// RocksDB block cache (default: the DRAM the cascade engine reported, else 64M).
    #[arg(long, value_parser = parse_size)]
    block_cache: Option<u64>,
    /// Write every report as JSON (an array of objects) to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write PNG charts (throughput, latency CDF, timeline) into this directory.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print each engine's own statistics to stderr after its workloads.
    #[arg(long)]
    engine_stats: bool,
    /// No progress line on stderr.
    #[arg(long)]
    quiet: bool,
    /// After the workloads, SIGKILL this process (to measure recovery with --reuse).
    #[arg(long)]
    kill_at_end: bool,
}

/// Parses `--value-size`: a size (`100`) or an inclusive range (`100-1000`).
fn parse_range(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--value-size {s:?}: use a size like 100 or a range like 100-1000");
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a > b {
            return Err(bad());
        }
        Ok((a, b))
    } else {
        let v = s.trim().parse().map_err(|_| bad())?;
        Ok((v, v))
    }
}

/// Parses `--zipf-constant`: a number in `(0, 1)`, see
/// [`cascade_bench::gen::check_zipf_constant`].
fn parse_zipf_constant(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    cascade_bench::gen::check_zipf_constant(v)
}

/// Opens engine `name` (`cascade`, `cascade-nocleaning`, `cascade-vb`, `dram-index` or
/// `rocksdb`) in `dir`, with its slow tier in `opts.slow_dir` if set (the `dram-*`
/// engines never use one).
fn open_engine(
    name: &str,
    dir: &std::path::Path,
    opts: &Options,
    block_cache: u64,
) -> Result<Box<dyn cascade_bench::engine::Engine>, String> {
    use cascade_bench::engine::CascadeEngine;
    // A CascadeKV variant: `opts` changed by `tune`, reported as `name`.
    let variant =
        |tune: fn(&mut Options)| -> Result<Box<dyn cascade_bench::engine::Engine>, String> {
            let mut o = opts.clone();
            tune(&mut o);
            Ok(Box::new(CascadeEngine::open(name, dir, o)?))
        };
    match name {
        "cascade" => variant(|_| {}),
        // The same engine with log cleaning off: what cleaning costs and saves.
        "cascade-nocleaning" => variant(|o| o.vlog_cleaning = false),
        // Each thread persists its own synchronous writes ("vertical batching"), against
        // `cascade`'s batching across threads (FlatStore §3.3, Fig. 12).
        "cascade-vb" => variant(|o| o.sync_group_size = 1),
        // A record per operation, against `cascade`'s packed records (FlatStore §3.2).
        "cascade-plain" => variant(|o| o.pack_log_entries = false),
        // Bloom filters on StableStore tables too (misses read no block there; hits
        // pay one more cache miss), against `cascade`'s buffer-tree filters only.
        "cascade-sf" => variant(|o| o.stable_filters = true),
        // HiKV's hybrid FastStore index (hash part for point operations, the tree
        // updated in the background), against `cascade`'s tree alone.
        "cascade-hikv" => variant(|o| o.hash_index = true),
        // Everything in the fast tier, --slow-dir ignored: what a slow tier costs.
        "cascade-fast" => variant(|o| o.slow_dir = None),
        // The slow tier with popularity placement (issue #15, PrismDB): hot entries
        // pinned at 0.7 of the budget, MSC victims, promotions — unless the flags set
        // them — against `cascade`'s default (key order, nothing pinned).
        "cascade-place" => variant(|o| {
            if o.pin_fraction <= 0.0 {
                o.pin_fraction = 0.7;
            }
            if o.demotion_policy == cascadekv::DemotionPolicy::KeyOrder {
                o.demotion_policy = cascadekv::DemotionPolicy::Msc;
            }
        }),
        "dram-index" => Ok(Box::new(CascadeEngine::open_dram_index(dir, opts.clone())?)),
        // The FastStore alone with the hybrid index (against `dram-index`).
        "dram-hikv" => {
            let opts = Options {
                hash_index: true,
                ..opts.clone()
            };
            Ok(Box::new(CascadeEngine::open_dram_index_named(
                "dram-hikv",
                dir,
                opts,
            )?))
        }
        "rocksdb" => open_rocksdb(
            dir,
            opts.durability == Durability::Sync,
            block_cache,
            opts.slow_dir
                .as_deref()
                .map(|slow| (slow, opts.effective_fast_budget())),
            opts.slow_direct_reads,
        ),
        other => Err(format!(
            "unknown engine {other:?} (cascade, cascade-nocleaning, cascade-vb, cascade-plain, \
             cascade-sf, cascade-hikv, cascade-fast, cascade-place, dram-index, dram-hikv, \
             rocksdb)"
        )),
    }
}

/// Opens RocksDB in `dir` with a block cache of `block_cache` bytes; with `slow` =
/// (slow directory, fast budget), its SST files go to `dir` up to the budget and to
/// the slow directory beyond it.
#[cfg(feature = "rocksdb")]
fn open_rocksdb(
    dir: &std::path::Path,
    sync: bool,
    block_cache: u64,
    slow: Option<(&std::path::Path, u64)>,
    direct_reads: bool,
) -> Result<Box<dyn cascade_bench::engine::Engine>, String> {
    Ok(Box::new(cascade_bench_rocksdb::open_tiered(
        dir,
        sync,
        usize::try_from(block_cache).unwrap_or(usize::MAX),
        slow,
        direct_reads,
    )?))
}

/// Without the `rocksdb` feature: an error saying how to build with it.
#[cfg(not(feature = "rocksdb"))]
fn open_rocksdb(
    _: &std::path::Path,
    _: bool,
    _: u64,
    _: Option<(&std::path::Path, u64)>,
    _: bool,
) -> Result<Box<dyn cascade_bench::engine::Engine>, String> {
    Err("this cascade was built without RocksDB: cargo build --release -p cascade --features rocksdb".into())
}

/// The workloads, workload settings and engine options `a` asks for, validated.
fn bench_settings(
    a: &BenchArgs,
) -> Result<(Vec<String>, cascade_bench::micro::BenchConfig, Options), cascadekv::Error> {
    use cascade_bench::{micro, ycsb_run};
    let inval = cascadekv::Error::invalid;
    let durability = match a.durability.as_str() {
        "buffered" => Durability::Buffered,
        "sync" => Durability::Sync,
        other => {
            return Err(inval(format!(
                "--durability {other:?}: use buffered or sync"
            )))
        }
    };
    let workloads: Vec<String> = a
        .workloads
        .split(',')
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty())
        .collect();
    for w in &workloads {
        if !micro::is_micro(w) && !ycsb_run::is_ycsb(w) {
            return Err(inval(format!("unknown workload {w:?}")));
        }
    }
    let any_ycsb = workloads.iter().any(|w| ycsb_run::is_ycsb(w));
    let ycsb_keys = match a.key_mode.as_deref() {
        Some("ycsb") => true,
        Some("binary") => false,
        Some(other) => return Err(inval(format!("--key-mode {other:?}: use binary or ycsb"))),
        None => any_ycsb,
    };
    let cfg = micro::BenchConfig {
        num: a.num,
        ops: a.ops,
        duration: a
            .duration
            .map(|secs| {
                std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
                    inval(format!(
                        "--duration {secs}: use a non-negative number of seconds"
                    ))
                })
            })
            .transpose()?,
        threads: a.threads,
        key_size: a.key_size.max(8),
        value_size: parse_range(&a.value_size).map_err(inval)?,
        seed: a.seed,
        scan_len: a.scan_len.max(1),
        write_batch: a.write_batch.max(1),
        ycsb_keys,
        distribution: a.distribution.clone(),
        zipf_constant: a
            .zipf_constant
            .unwrap_or(cascade_bench::gen::ZIPFIAN_CONSTANT),
        progress: !a.quiet,
    };
    let opts = Options {
        pool_size: a.pool_size,
        faststore_capacity: a.faststore_capacity,
        faststore_log_capacity: a.faststore_log_capacity,
        faststore_write_heavy_factor: a.faststore_write_heavy_factor,
        flush_when_read_only: !a.keep_faststore,
        block_size: a.block_size,
        durability,
        fast_budget: a.fast_budget,
        slow_write_rate: a.slow_write_rate,
        demotion_policy: a.placement.demotion_policy,
        pin_fraction: a.placement.pin_fraction,
        slow_direct_reads: a.placement.slow_direct_reads,
        ..Options::default()
    };
    if a.slow_dir.as_ref().is_some_and(|s| *s == a.dir) {
        return Err(inval(
            "--slow-dir must differ from --dir (each engine gets a subdirectory of both)"
                .to_string(),
        ));
    }
    Ok((workloads, cfg, opts))
}

/// The line above the table noting a non-default YCSB Zipfian constant `theta`, when
/// a report used it (it is in the JSON of every YCSB zipfian/latest report anyway).
fn zipf_note(reports: &[cascade_bench::report::Report], theta: f64) -> Option<String> {
    let used = reports.iter().any(|r| r.zipf_constant.is_some());
    (used && !cascade_bench::gen::is_default_zipf_constant(theta))
        .then(|| format!("YCSB Zipfian constant: {theta}"))
}

/// Creates `dir`, emptied first unless `reuse`.
fn fresh_dir(dir: &std::path::Path, reuse: bool) -> Result<(), cascadekv::Error> {
    if !reuse {
        let _ = std::fs::remove_dir_all(dir);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| cascadekv::Error::io(format!("creating {}", dir.display()), e))
}

/// `--engine-stats`: every statistic of engine `name`, to stderr.
fn print_engine_stats(name: &str, engine: &dyn cascade_bench::engine::Engine) {
    for (k, v) in engine.stat_rows() {
        eprintln!("  {name} {k} = {v}");
    }
}

/// Runs every engine of `a` through its workloads, then prints the table and writes
/// the JSON and charts asked for; the process exit code.
fn bench(a: &BenchArgs, thp_off: bool) -> Result<i32, String> {
    use cascade_bench::{micro, report, ycsb_run};
    let (workloads, cfg, opts) = bench_settings(a).map_err(|e| e.to_string())?;
    let mut reports: Vec<report::Report> = Vec::new();
    for name in a.engine.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let dir = a.dir.join(name);
        fresh_dir(&dir, a.reuse).map_err(|e| e.to_string())?;
        // The dram-* engines never flush, so never use a slow tier.
        let slow_dir = a
            .slow_dir
            .as_ref()
            .filter(|_| !name.starts_with("dram-"))
            .map(|s| s.join(name));
        if let Some(slow) = &slow_dir {
            fresh_dir(slow, a.reuse).map_err(|e| e.to_string())?;
        }
        let opts = Options {
            slow_dir,
            ..opts.clone()
        };
        let cache = a.block_cache.unwrap_or_else(|| {
            reports
                .iter()
                .find(|r| r.engine == "cascade")
                .map_or(64 << 20, |r| r.engine_dram_bytes.max(8 << 20))
        });
        let started = std::time::Instant::now();
        let engine = open_engine(name, &dir, &opts, cache).map_err(|e| format!("{name}: {e}"))?;
        if a.reuse {
            let st = engine.stats();
            reports.push(report::Report {
                engine: name.to_string(),
                workload: "open".into(),
                threads: 1,
                num: a.num,
                seconds: started.elapsed().as_secs_f64(),
                heap_bytes_peak: cascade_bench::alloc::peak_heap_bytes() as u64,
                heap_bytes_end: cascade_bench::alloc::heap_bytes() as u64,
                rss_bytes: micro::rss_bytes(),
                fast_tier_bytes: st.fast_tier_bytes,
                slow_tier_bytes: st.slow_tier_bytes,
                engine_dram_bytes: st.engine_dram_bytes,
                write_amp: st.write_amp,
                fast_write_amp: st.fast_write_amp,
                slow_write_amp: st.slow_write_amp,
                ..report::Report::default()
            });
        }
        for w in &workloads {
            let r = if ycsb_run::is_ycsb(w) {
                ycsb_run::run(engine.as_ref(), w, &cfg)
            } else {
                micro::run(engine.as_ref(), w, &cfg)
            }
            .map_err(|e| format!("{name} {w}: {e}"))?;
            if r.errors > 0 {
                eprintln!("  {name} {w}: {} operations failed", r.errors);
            }
            reports.push(r);
        }
        if a.engine_stats {
            print_engine_stats(name, engine.as_ref());
        }
        if a.kill_at_end {
            // Not closed: the SIGKILL below must find the store open (a crash).
            std::mem::forget(engine);
        } else {
            drop(engine);
        }
    }
    if let Some(note) = zipf_note(&reports, cfg.zipf_constant) {
        println!("{note}");
    }
    if thp_off {
        println!(
            "transparent huge pages were off in this process (as in `cascade serve`; \
             CASCADE_THP=on keeps them)"
        );
    }
    println!("{}", report::table(&reports));
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    if let Some(dir) = &a.plot {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let files = cascade_bench::plot::write_plots(&reports, dir)?;
        for f in files {
            eprintln!("  wrote {}", f.display());
        }
    }
    if a.kill_at_end {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        // Ask the OS to SIGKILL us, exactly like `kill -9` from a shell.
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    Ok(0)
}

/// Parses sizes like `4096`, `64K`, `512M`, `4G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("unknown size suffix in {s:?} (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
    n.checked_mul(mul)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Runs the CLI and returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    // Before any thread starts: transparent huge pages off for the server, as Redis
    // does, and for benchmarks of durable writes, which run as the server does; kept
    // for the rest (`cascade_bench::alloc`; `CASCADE_THP=on|off` decides).
    let thp_off = match &cli.cmd {
        Cmd::Serve(_) => true,
        Cmd::Bench(a) => a.durability == "sync",
        _ => false,
    };
    let thp_off = cascade_bench::alloc::choose_transparent_huge_pages(thp_off);
    // The bench reports its engines' errors as text, already labelled.
    let r = match cli.cmd {
        Cmd::Bench(a) => bench(&a, thp_off),
        cmd => exec(cmd).map_err(|e| e.to_string()),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// `b` as text for a terminal: lossy UTF-8 with control characters escaped.
fn printable(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

/// Runs `cmd`; the process exit code.
fn exec(cmd: Cmd) -> Result<i32, cascadekv::Error> {
    let cmd = match cmd {
        Cmd::Serve(a) => return serve(*a),
        Cmd::Verify { dir, slow_dir } => return verify(&dir, slow_dir),
        Cmd::Repair {
            dir,
            slow_dir,
            fast_budget,
        } => return repair(&dir, slow_dir, fast_budget),
        other => other,
    };
    let out = std::io::stdout();
    let mut out = out.lock();
    let io = |e| cascadekv::Error::io("writing to stdout", e);
    match cmd {
        Cmd::Put { key, value, store } => {
            let db = Db::open(&store.dir, store.options())?;
            db.put(key.as_bytes(), value.as_bytes())?;
            db.close()?;
            writeln!(out, "OK").map_err(io)?;
        }
        Cmd::Get { key, store } => {
            let db = Db::open(&store.dir, store.options())?;
            if let Some(v) = db.get(key.as_bytes())? {
                out.write_all(&v).map_err(io)?;
                writeln!(out).map_err(io)?;
            } else {
                eprintln!("(nil)");
                return Ok(1);
            }
        }
        Cmd::Delete { key, store } => {
            let db = Db::open(&store.dir, store.options())?;
            db.delete(key.as_bytes())?;
            db.close()?;
            writeln!(out, "OK").map_err(io)?;
        }
        Cmd::Scan {
            start,
            end,
            limit,
            store,
        } => {
            let db = Db::open(&store.dir, store.options())?;
            let pairs = db.scan(
                start.as_deref().map(str::as_bytes),
                end.as_deref().map(str::as_bytes),
                limit,
            )?;
            for (k, v) in pairs {
                writeln!(out, "{}\t{}", printable(&k), printable(&v)).map_err(io)?;
            }
        }
        Cmd::Stats { store } => {
            let db = Db::open(&store.dir, store.options())?;
            let s = db.stats();
            let info = db.recovery_info();
            let mut rows = s.rows();
            rows.push(("recovered_logs", info.logs.to_string()));
            rows.push(("heap_bytes", cascade_bench::alloc::heap_bytes().to_string()));
            for (k, v) in rows {
                writeln!(out, "{k}: {v}").map_err(io)?;
            }
        }
        Cmd::Bench(_) | Cmd::Serve(_) | Cmd::Verify { .. } | Cmd::Repair { .. } => {}
    }
    Ok(0)
}

/// `cascade verify`: findings on stdout, exit 1 if there are any.
fn verify(dir: &std::path::Path, slow_dir: Option<PathBuf>) -> Result<i32, cascadekv::Error> {
    let slow_arg = slow_dir
        .as_ref()
        .map(|s| format!(" --slow-dir {}", s.display()))
        .unwrap_or_default();
    let opts = Options {
        slow_dir,
        ..Options::default()
    };
    let r = cascadekv::integrity::verify_with(dir, &opts)?;
    let s = &r.stats;
    for f in &r.findings {
        println!("DAMAGED {f}");
    }
    println!(
        "checked {} chunks, {} logs ({} records), {} tables ({} blocks, {} entries), {} \
         separated values, {} bytes; {} keys read through open",
        s.chunks,
        s.logs,
        s.log_records,
        s.tables,
        s.blocks,
        s.entries,
        s.values,
        s.bytes,
        r.keys_read
    );
    if r.is_clean() {
        println!("{}: clean", dir.display());
        Ok(0)
    } else {
        println!(
            "{}: {} damaged part(s); `cascade repair --dir {}{slow_arg}` salvages the rest",
            dir.display(),
            r.findings.len(),
            dir.display()
        );
        Ok(1)
    }
}

/// `cascade repair`: the report on stdout (and in the kept damaged directory).
fn repair(
    dir: &std::path::Path,
    slow_dir: Option<PathBuf>,
    fast_budget: u64,
) -> Result<i32, cascadekv::Error> {
    let opts = Options {
        slow_dir,
        fast_budget,
        ..Options::default()
    };
    let r = cascadekv::integrity::repair_with(dir, &opts)?;
    if r.kept_damaged.is_none() {
        println!("{}: no damage found, nothing changed", dir.display());
        return Ok(0);
    }
    print!("{}", cascadekv::integrity::render_repair(dir, &r));
    if let Some(f) = &r.report_file {
        println!("report written to {}", f.display());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
