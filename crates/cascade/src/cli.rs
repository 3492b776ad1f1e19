//! Argument parsing and the store subcommands.

use std::io::Write;
use std::path::PathBuf;

use cascadekv::{Db, Durability, Options};
use clap::{Args, Parser, Subcommand};

/// CascadeKV: a persistent key-value store for ultra-fast storage.
#[derive(Debug, Parser)]
#[command(name = "cascade", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

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
}

impl StoreArgs {
    fn options(&self) -> Options {
        Options {
            pool_size: self.pool_size,
            durability: if self.sync {
                Durability::Sync
            } else {
                Durability::Buffered
            },
            ..Options::default()
        }
    }
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Set KEY to VALUE.
    Put {
        /// Key.
        key: String,
        /// Value.
        value: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the value of KEY (exit code 1 if missing).
    Get {
        /// Key.
        key: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete KEY.
    Delete {
        /// Key.
        key: String,
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
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print engine statistics.
    Stats {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Run benchmark workloads (see docs/benchmarks.md).
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Comma-separated workloads: fillseq, fillrandom, overwrite, readrandom, settle
    /// (flush everything and compact it into StableStore).
    #[arg(long, default_value = "fillrandom,readrandom")]
    workloads: String,
    /// Store directory (wiped first unless --reuse).
    #[arg(long, default_value = "/dev/shm/cascade-bench")]
    dir: PathBuf,
    /// Keep the existing store and measure opening (recovery) it first.
    #[arg(long)]
    reuse: bool,
    /// Keys loaded.
    #[arg(long, default_value_t = 1_000_000)]
    num: u64,
    /// Operations for read/overwrite workloads (default: --num).
    #[arg(long)]
    ops: Option<u64>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Key size in bytes (at least 8).
    #[arg(long, default_value_t = 8)]
    key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 8)]
    value_size: usize,
    /// buffered or sync.
    #[arg(long, default_value = "buffered")]
    durability: String,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Pool size (e.g. 8G).
    #[arg(long, default_value = "8G", value_parser = parse_size)]
    pool_size: u64,
    /// FastStore capacity before a switch (e.g. 1G).
    #[arg(long, default_value = "4G", value_parser = parse_size)]
    faststore_capacity: u64,
    /// After the workloads, SIGKILL this process (to measure recovery with --reuse).
    #[arg(long)]
    kill_at_end: bool,
    /// Keep data in the FastStore under read-only load (no flush of a partly full
    /// FastStore), to measure FastStore reads.
    #[arg(long)]
    keep_faststore: bool,
    /// LST block size in bytes.
    #[arg(long, default_value_t = 512)]
    block_size: usize,
}

fn bench(a: BenchArgs) -> Result<i32, cascadekv::Error> {
    use cascade_bench::micro;
    let durability = match a.durability.as_str() {
        "buffered" => Durability::Buffered,
        "sync" => Durability::Sync,
        other => {
            return Err(cascadekv::Error::invalid(format!(
                "--durability {other:?}: use buffered or sync"
            )))
        }
    };
    if !a.reuse {
        let _ = std::fs::remove_dir_all(&a.dir);
    }
    let cfg = micro::Config {
        dir: a.dir.clone(),
        num: a.num,
        ops: a.ops,
        threads: a.threads,
        key_size: a.key_size.max(8),
        value_size: a.value_size,
        durability,
        seed: a.seed,
        options: Options {
            pool_size: a.pool_size,
            faststore_capacity: a.faststore_capacity,
            flush_when_read_only: !a.keep_faststore,
            block_size: a.block_size,
            ..Options::default()
        },
    };
    let mut reports = Vec::new();
    let db = if a.reuse {
        let (db, r) = micro::recover(&cfg).map_err(cascadekv::Error::invalid)?;
        reports.push(r);
        db
    } else {
        Db::open(&cfg.dir, cfg.options.clone())?
    };
    for w in a
        .workloads
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
    {
        eprintln!("running {w} ...");
        reports.push(micro::run(&db, &cfg, w).map_err(cascadekv::Error::invalid)?);
    }
    println!("{}", micro::table(&cfg, &reports));
    if a.kill_at_end {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        // Ask the OS to SIGKILL us, exactly like `kill -9` from a shell.
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    db.close()?;
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
    match exec(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn printable(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

fn exec(cmd: Cmd) -> Result<i32, cascadekv::Error> {
    if let Cmd::Bench(a) = cmd {
        return bench(a);
    }
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
            match db.get(key.as_bytes())? {
                Some(v) => {
                    out.write_all(&v).map_err(io)?;
                    writeln!(out).map_err(io)?;
                }
                None => {
                    eprintln!("(nil)");
                    return Ok(1);
                }
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
        Cmd::Bench(_) => {}
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
