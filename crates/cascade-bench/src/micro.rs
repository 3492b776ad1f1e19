//! db_bench-style micro workloads on any [`Engine`]: `fillseq`, `fillrandom`,
//! `overwrite`, `readrandom`, `readseq`, `readmissing`, `seekrandom`, `deleterandom`,
//! plus `settle` (move everything to its final stage).
//!
//! Key number `i` becomes a key through [`crate::keys`] (`fillseq`: in order;
//! otherwise through a bijective mixer, so random loads never collide); values are
//! `value_size` bytes (or a random size in a range) derived from the key number.

use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::keys::{make_key, make_value, mix};
use crate::report::Report;
use crate::runner::{run_phase, Amount, Ctx, Outcome, Phase};

/// Settings shared by the workloads of one run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Keys loaded (the key space).
    pub num: u64,
    /// Operations for non-load workloads (default: `num`).
    pub ops: Option<u64>,
    /// Run each non-load workload for this long instead of a count.
    pub duration: Option<Duration>,
    /// Worker threads.
    pub threads: usize,
    /// Key size in bytes (binary keys; at least 8).
    pub key_size: usize,
    /// Value size range (inclusive); fixed when equal.
    pub value_size: (usize, usize),
    /// Seed for random choices.
    pub seed: u64,
    /// Entries read by one `seekrandom` / YCSB scan upper bound.
    pub scan_len: usize,
    /// Pairs per write batch in `fillbatch`.
    pub write_batch: usize,
    /// YCSB-style keys (`user` + hashed number) instead of fixed-width binary keys.
    pub ycsb_keys: bool,
    /// Request distribution override for YCSB workloads ("zipfian", "uniform", "latest").
    pub distribution: Option<String>,
    /// Zipfian constant of the YCSB `zipfian` and `latest` request distributions
    /// ([`crate::gen::ZIPFIAN_CONSTANT`], 0.99, unless `--zipf-constant`; see
    /// [`crate::gen::KeyChooser::with_theta`]).
    pub zipf_constant: f64,
    /// Show a progress line on stderr.
    pub progress: bool,
}

impl BenchConfig {
    /// The amount of a non-load phase.
    #[must_use]
    pub fn amount(&self) -> Amount {
        match self.duration {
            Some(d) => Amount::Duration(d),
            None => Amount::Ops(self.ops.unwrap_or(self.num)),
        }
    }

    /// The value length for key number `n`.
    #[must_use]
    pub fn value_len(&self, n: u64) -> usize {
        let (lo, hi) = self.value_size;
        if hi <= lo {
            lo
        } else {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "the remainder is below `hi - lo + 1`, a usize"
            )]
            let offset = (mix(n ^ self.seed) % (hi - lo + 1) as u64) as usize;
            lo + offset
        }
    }

    /// Writes the key of number `n` into `out`.
    pub fn key(&self, n: u64, out: &mut Vec<u8>) {
        if self.ycsb_keys {
            crate::gen::key_name(n, crate::gen::KeyMode::Hashed, self.key_size, out);
        } else {
            make_key(n, self.key_size, out);
        }
    }
}

/// Resident set size of this process, from /proc/self/statm.
#[must_use]
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn put(
    e: &dyn Engine,
    cfg: &BenchConfig,
    ctx: &mut Ctx,
    n: u64,
    keynum: u64,
) -> Result<Outcome, String> {
    cfg.key(keynum, &mut ctx.key);
    make_value(n ^ cfg.seed, cfg.value_len(n), &mut ctx.value);
    e.put(&ctx.key, &ctx.value)?;
    Ok(Outcome::default())
}

/// Writes key numbers `range` (mixed) as one atomic batch.
fn put_batch(
    e: &dyn Engine,
    cfg: &BenchConfig,
    ctx: &mut Ctx,
    range: std::ops::Range<u64>,
) -> Result<Outcome, String> {
    let mut pairs = Vec::new();
    for j in range {
        cfg.key(mix(j), &mut ctx.key);
        make_value(j ^ cfg.seed, cfg.value_len(j), &mut ctx.value);
        pairs.push((ctx.key.clone(), ctx.value.clone()));
    }
    e.put_batch(&pairs)?;
    Ok(Outcome {
        found: true,
        entries: pairs.len() as u64,
        stop: false,
    })
}

/// True if `name` is a micro workload.
#[must_use]
pub fn is_micro(name: &str) -> bool {
    matches!(
        name,
        "fillseq"
            | "fillrandom"
            | "fillbatch"
            | "overwrite"
            | "readrandom"
            | "readseq"
            | "readmissing"
            | "seekrandom"
            | "deleterandom"
            | "settle"
    )
}

/// Runs micro workload `name` on `e`.
///
/// # Errors
///
/// An unknown workload name, or the engine's error from `settle`. Errors of single
/// operations are counted in the report instead.
pub fn run(e: &dyn Engine, name: &str, cfg: &BenchConfig) -> Result<Report, String> {
    let num = cfg.num;
    let phase = |amount: Amount, op: &(dyn Fn(&mut Ctx, u64) -> Result<Outcome, String> + Sync)| {
        let p = Phase {
            engine: e,
            workload: name,
            threads: cfg.threads,
            num,
            amount,
            seed: cfg.seed,
            progress: cfg.progress,
        };
        run_phase(&p, op)
    };
    let r = match name {
        "fillseq" => phase(Amount::Ops(num), &|c, i| put(e, cfg, c, i, i)),
        "fillrandom" => phase(Amount::Ops(num), &|c, i| put(e, cfg, c, i, mix(i))),
        "fillbatch" => {
            // `num` random keys in atomic batches of `write_batch` pairs; like db_bench
            // every pair counts as an operation (latencies are per batch).
            let per = cfg.write_batch.max(1) as u64;
            let mut r = phase(Amount::Ops(num.div_ceil(per)), &|c, i| {
                put_batch(e, cfg, c, i * per..((i + 1) * per).min(num))
            });
            r.ops = r.entries;
            r.ops_per_sec = r.ops as f64 / r.seconds.max(1e-9);
            r
        }
        "overwrite" => phase(cfg.amount(), &|c, i| {
            let n = c.rng.below(num.max(1));
            put(e, cfg, c, i, mix(n))
        }),
        "readrandom" => phase(cfg.amount(), &|c, _| {
            let n = c.rng.below(num.max(1));
            cfg.key(mix(n), &mut c.key);
            Ok(Outcome {
                found: e.get_into(&c.key, &mut c.got)?,
                ..Outcome::default()
            })
        }),
        "readmissing" => phase(cfg.amount(), &|c, _| {
            // Numbers past the key space map to keys that were never written.
            let n = num + c.rng.below(num.max(1));
            cfg.key(mix(n), &mut c.key);
            Ok(Outcome {
                found: e.get_into(&c.key, &mut c.got)?,
                ..Outcome::default()
            })
        }),
        "seekrandom" => phase(cfg.amount(), &|c, _| {
            let n = c.rng.below(num.max(1));
            cfg.key(mix(n), &mut c.key);
            let got = e.scan(&c.key, cfg.scan_len, &mut c.last)?;
            Ok(Outcome {
                found: got > 0,
                entries: got as u64,
                stop: false,
            })
        }),
        "readseq" => {
            // Every thread reads the whole key space in order, `scan_len` at a time;
            // one operation = one batch.
            let mut r = phase(Amount::Ops(u64::MAX), &|c, _| {
                // Resume just after the last key read (`last ++ [0]` is the smallest
                // key above it); the first batch starts at the empty key.
                let mut start = std::mem::take(&mut c.last);
                if !start.is_empty() {
                    start.push(0);
                }
                let got = e.scan(&start, cfg.scan_len, &mut c.last)?;
                Ok(Outcome {
                    found: got > 0,
                    entries: got as u64,
                    stop: got == 0,
                })
            });
            // db_bench counts every entry read as an operation.
            r.ops = r.entries;
            r.ops_per_sec = r.ops as f64 / r.seconds.max(1e-9);
            r
        }
        "deleterandom" => phase(cfg.amount(), &|c, _| {
            let n = c.rng.below(num.max(1));
            cfg.key(mix(n), &mut c.key);
            e.delete(&c.key)?;
            Ok(Outcome::default())
        }),
        "settle" => {
            let start = Instant::now();
            e.settle()?;
            let p = Phase {
                engine: e,
                workload: name,
                threads: 1,
                num,
                amount: Amount::Ops(0),
                seed: cfg.seed,
                progress: false,
            };
            let mut r = run_phase(&p, |_: &mut Ctx, _: u64| Ok(Outcome::default()));
            r.seconds = start.elapsed().as_secs_f64();
            r
        }
        other => return Err(format!("unknown workload {other:?}")),
    };
    Ok(r)
}
