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
            let rows: Vec<(&str, String)> = vec![
                ("backend", s.backend.to_string()),
                ("index_entries", s.index_entries.to_string()),
                ("faststore_dram_bytes", s.faststore_dram_bytes.to_string()),
                ("active_generation", s.active_generation.to_string()),
                ("immutable_faststores", s.immutable_faststores.to_string()),
                ("log_segments", s.log_segments.to_string()),
                ("pool_bytes_total", s.pool_bytes_total.to_string()),
                ("pool_bytes_used", s.pool_bytes_used.to_string()),
                ("pool_bytes_free", s.pool_bytes_free.to_string()),
                ("chunk_size", s.chunk_size.to_string()),
                ("max_lsn", s.max_lsn.to_string()),
                ("recovered_clean", info.clean_shutdown.to_string()),
                ("recovered_logs", info.logs.to_string()),
                ("recovered_records", info.records.to_string()),
                ("recovery_micros", info.replay_micros.to_string()),
                ("heap_bytes", cascade_bench::alloc::heap_bytes().to_string()),
            ];
            for (k, v) in rows {
                writeln!(out, "{k}: {v}").map_err(io)?;
            }
        }
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
