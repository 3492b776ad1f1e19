//! Runs YCSB core workloads (`load`, `a`…`f`) on an [`Engine`], with YCSB's
//! generators from [`crate::gen`] and [`crate::ycsb`].
//!
//! A record is one value of `value_size` bytes (YCSB's default record is 10 fields of
//! 100 B; pass `--value-size 1000` for the same bytes in one value). Update and insert
//! write the whole value; read-modify-write reads, then writes; a scan reads up to its
//! drawn length from the key.

use crate::engine::Engine;
use crate::gen::{Distribution, KeyMode};
use crate::keys::make_value;
use crate::micro::BenchConfig;
use crate::report::Report;
use crate::runner::{run_phase, Amount, Ctx, Outcome, Phase};
use crate::ycsb::{self, Op, Workload};

/// True for `load` and `a`…`f`.
#[must_use]
pub fn is_ycsb(name: &str) -> bool {
    matches!(name, "load" | "a" | "b" | "c" | "d" | "e" | "f")
}

fn key(cfg: &BenchConfig, k: u64, out: &mut Vec<u8>) {
    let mode = if cfg.ycsb_keys {
        KeyMode::Hashed
    } else {
        KeyMode::Binary
    };
    crate::gen::key_name(k, mode, cfg.key_size, out);
}

fn write(
    e: &dyn Engine,
    cfg: &BenchConfig,
    c: &mut Ctx,
    k: u64,
    version: u64,
) -> Result<(), String> {
    key(cfg, k, &mut c.key);
    make_value(
        k.wrapping_mul(31) ^ version ^ cfg.seed,
        cfg.value_len(k),
        &mut c.value,
    );
    e.put(&c.key, &c.value)
}

fn phase<'a>(e: &'a dyn Engine, name: &'a str, cfg: &BenchConfig, amount: Amount) -> Phase<'a> {
    Phase {
        engine: e,
        workload: name,
        threads: cfg.threads,
        num: cfg.num,
        amount,
        seed: cfg.seed,
        progress: cfg.progress,
    }
}

/// Runs YCSB workload `name` on `e` (`load` inserts `num` records).
///
/// The `zipfian` and `latest` key choosers use `cfg.zipf_constant`, which the
/// report records (`zipf_constant`).
///
/// # Errors
///
/// An unknown workload or distribution name, or a Zipfian constant outside
/// [`crate::gen::check_zipf_constant`]'s range. Errors of single operations are
/// counted in the report instead.
pub fn run(e: &dyn Engine, name: &str, cfg: &BenchConfig) -> Result<Report, String> {
    if name == "load" {
        let p = phase(e, name, cfg, Amount::Ops(cfg.num));
        return Ok(run_phase(&p, |c: &mut Ctx, i: u64| {
            write(e, cfg, c, i, 0)?;
            Ok(Outcome::default())
        }));
    }
    let mut spec = ycsb::spec(name).ok_or_else(|| format!("unknown YCSB workload {name:?}"))?;
    if let Some(name) = &cfg.distribution {
        let dist =
            Distribution::parse(name).ok_or_else(|| format!("unknown distribution {name:?}"))?;
        spec = spec.with_distribution(dist);
    }
    let spec = spec.with_zipf_constant(crate::gen::check_zipf_constant(cfg.zipf_constant)?);
    let zipf_constant = (spec.distribution != Distribution::Uniform).then_some(spec.zipf_constant);
    let ops = cfg.ops.unwrap_or(cfg.num);
    let workload = Workload::new(spec, cfg.num, ops);
    let p = phase(e, name, cfg, cfg.amount());
    let mut report = run_phase(&p, |c: &mut Ctx, i: u64| {
        let seed = cfg.seed ^ 0x00C0_FFEE ^ (c.thread as u64) << 32;
        let op = c
            .ycsb
            .get_or_insert_with(|| workload.generator(seed))
            .next_op();
        match op {
            Op::Read(k) => {
                key(cfg, k, &mut c.key);
                Ok(Outcome {
                    found: e.get_into(&c.key, &mut c.got)?,
                    ..Outcome::default()
                })
            }
            Op::Update(k) | Op::Insert(k) => {
                write(e, cfg, c, k, i + 1)?;
                Ok(Outcome::default())
            }
            Op::Scan(k, n) => {
                key(cfg, k, &mut c.key);
                let got = e.scan(&c.key, n, &mut c.last)?;
                Ok(Outcome {
                    found: got > 0,
                    entries: got as u64,
                    stop: false,
                })
            }
            Op::ReadModifyWrite(k) => {
                key(cfg, k, &mut c.key);
                let found = e.get_into(&c.key, &mut c.got)?;
                write(e, cfg, c, k, i + 1)?;
                Ok(Outcome {
                    found,
                    ..Outcome::default()
                })
            }
        }
    });
    report.zipf_constant = zipf_constant;
    Ok(report)
}
