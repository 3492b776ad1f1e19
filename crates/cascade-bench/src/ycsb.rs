//! YCSB core workloads A–F: their definitions and a per-thread operation stream.
//!
//! [`spec`] returns the parameters of YCSB's `workloads/workloada` … `workloadf`
//! files (brianfrankcooper/YCSB); [`OpGenerator`] draws operations as
//! `CoreWorkload.doTransaction` does: the operation by proportion (YCSB's
//! `DiscreteGenerator`, in the order read, update, insert, scan, read-modify-write),
//! then the key number from the request distribution ([`KeyChooser`]), redrawn
//! while it is beyond the last insert (`nextKeynum`'s
//! `while (keynum > transactioninsertkeysequence.lastValue())`), then for scans the
//! length (uniform or Zipfian over `min_scan_len..=max_scan_len`). The zipfian key
//! chooser covers `record_count + expected_new_keys` keys like YCSB, with
//! `expected_new_keys = op_count * insert_proportion * 2`. The `zipfian` and `latest`
//! choosers use [`WorkloadSpec::zipf_constant`] (YCSB's `zipfianconstant`, 0.99 by
//! default; see [`KeyChooser::with_theta`] for another value).
//!
//! Inserts take their key number from a shared [`AtomicU64`] that starts at
//! `record_count` (the load phase writes `0..record_count`). YCSB's
//! `AcknowledgedCounterGenerator` only exposes a key as "last inserted" once its
//! insert has been acknowledged; here that is simplified to
//! `last inserted = counter - 1`, so with several threads a read may pick a key
//! whose insert was handed out but has not completed yet (and miss it).
//!
//! Thread safety: an [`OpGenerator`] is owned by one thread (`&mut self`, `Send`);
//! threads share only the insert counter (an `Arc<AtomicU64>`, relaxed atomics: the
//! counter numbers inserts, it orders nothing). [`Workload`] builds the counter and
//! one key-chooser prototype, cloned into each thread's generator.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::gen::{next_f64, Distribution, KeyChooser, Uniform, Zipfian, ZIPFIAN_CONSTANT};
use crate::keys::Rng;

/// `CoreWorkload`'s default `maxscanlength` (workload E sets 100).
pub const DEFAULT_MAX_SCAN_LEN: usize = 1000;

/// `scanlengthdistribution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScanLenDistribution {
    /// Uniform over `min..=max` (YCSB default).
    Uniform,
    /// YCSB `ZipfianGenerator(min, max)`: short scans favoured.
    Zipfian,
}

/// The parameters of one YCSB core workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadSpec {
    /// "a" … "f" for the standard workloads.
    pub name: String,
    /// `readproportion`.
    pub read: f64,
    /// `updateproportion`.
    pub update: f64,
    /// `insertproportion`.
    pub insert: f64,
    /// `scanproportion`.
    pub scan: f64,
    /// `readmodifywriteproportion`.
    pub read_modify_write: f64,
    /// `requestdistribution`.
    pub distribution: Distribution,
    /// Zipfian constant of the `zipfian` and `latest` key choosers (default
    /// [`ZIPFIAN_CONSTANT`]; validate others with [`crate::gen::check_zipf_constant`]).
    pub zipf_constant: f64,
    /// `minscanlength` (default 1).
    pub min_scan_len: usize,
    /// `maxscanlength` (100 in workload E; default 1000, unused without scans).
    pub max_scan_len: usize,
    /// `scanlengthdistribution` (default uniform).
    pub scan_len_distribution: ScanLenDistribution,
}

impl WorkloadSpec {
    /// A spec with these proportions (read, update, insert, scan, rmw) and YCSB's
    /// defaults for the rest.
    #[must_use]
    pub fn new(name: &str, props: [f64; 5], distribution: Distribution) -> Self {
        WorkloadSpec {
            name: name.to_string(),
            read: props[0],
            update: props[1],
            insert: props[2],
            scan: props[3],
            read_modify_write: props[4],
            distribution,
            zipf_constant: ZIPFIAN_CONSTANT,
            min_scan_len: 1,
            max_scan_len: DEFAULT_MAX_SCAN_LEN,
            scan_len_distribution: ScanLenDistribution::Uniform,
        }
    }

    /// The same workload with another request distribution.
    #[must_use]
    pub fn with_distribution(mut self, distribution: Distribution) -> Self {
        self.distribution = distribution;
        self
    }

    /// The same workload with another Zipfian constant for its key chooser.
    #[must_use]
    pub fn with_zipf_constant(mut self, theta: f64) -> Self {
        self.zipf_constant = theta;
        self
    }

    /// The key chooser of this workload (built as YCSB's `CoreWorkload.init` does).
    fn key_chooser(&self, record_count: u64, op_count: u64) -> KeyChooser {
        KeyChooser::with_theta(
            self.distribution,
            record_count,
            self.expected_new_keys(op_count),
            self.zipf_constant,
        )
    }

    /// YCSB's `expectednewkeys = (int) (opcount * insertproportion * 2.0)`.
    #[must_use]
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "YCSB's (int) cast of a non-negative product: truncating and saturating"
    )]
    pub fn expected_new_keys(&self, op_count: u64) -> u64 {
        (op_count as f64 * self.insert * 2.0) as u64
    }

    /// Proportions normalised to sum 1, in YCSB's order, zero ones left out.
    fn op_table(&self) -> Vec<(f64, OpKind)> {
        let all = [
            (self.read, OpKind::Read),
            (self.update, OpKind::Update),
            (self.insert, OpKind::Insert),
            (self.scan, OpKind::Scan),
            (self.read_modify_write, OpKind::ReadModifyWrite),
        ];
        let present: Vec<(f64, OpKind)> = all.into_iter().filter(|(w, _)| *w > 0.0).collect();
        let sum: f64 = present.iter().map(|(w, _)| w).sum();
        if present.is_empty() || !sum.is_finite() {
            return vec![(1.0, OpKind::Read)];
        }
        present.into_iter().map(|(w, k)| (w / sum, k)).collect()
    }
}

/// The YCSB core workload `name`: "a" … "f" (also "workloada", "ycsb-a"; any case).
///
/// * a: read 0.5, update 0.5, zipfian — update heavy
/// * b: read 0.95, update 0.05, zipfian — read mostly
/// * c: read 1, zipfian — read only
/// * d: read 0.95, insert 0.05, latest — read latest
/// * e: scan 0.95, insert 0.05, zipfian, maxscanlength 100, uniform lengths — short ranges
/// * f: read 0.5, read-modify-write 0.5, zipfian
#[must_use]
pub fn spec(name: &str) -> Option<WorkloadSpec> {
    let lower = name.trim().to_ascii_lowercase();
    let short = ["workload", "ycsb-", "ycsb_", "ycsb"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .unwrap_or(&lower);
    let z = Distribution::Zipfian;
    let s = match short {
        "a" => WorkloadSpec::new("a", [0.5, 0.5, 0.0, 0.0, 0.0], z),
        "b" => WorkloadSpec::new("b", [0.95, 0.05, 0.0, 0.0, 0.0], z),
        "c" => WorkloadSpec::new("c", [1.0, 0.0, 0.0, 0.0, 0.0], z),
        "d" => WorkloadSpec::new("d", [0.95, 0.0, 0.05, 0.0, 0.0], Distribution::Latest),
        "e" => WorkloadSpec {
            max_scan_len: 100,
            ..WorkloadSpec::new("e", [0.0, 0.0, 0.05, 0.95, 0.0], z)
        },
        "f" => WorkloadSpec::new("f", [0.5, 0.0, 0.0, 0.0, 0.5], z),
        _ => return None,
    };
    Some(s)
}

/// Operation kinds, in `CoreWorkload.createOperationGenerator` order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// READ
    Read,
    /// UPDATE
    Update,
    /// INSERT
    Insert,
    /// SCAN
    Scan,
    /// READMODIFYWRITE
    ReadModifyWrite,
}

/// One operation on a key number (turn it into a key with [`crate::gen::key_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read the record.
    Read(u64),
    /// Overwrite the record.
    Update(u64),
    /// Insert a new record (key numbers from `record_count` up).
    Insert(u64),
    /// Scan this many records from the key.
    Scan(u64, usize),
    /// Read the record, then write it back.
    ReadModifyWrite(u64),
}

impl Op {
    /// The key number.
    #[must_use]
    pub fn keynum(&self) -> u64 {
        match *self {
            Op::Read(k)
            | Op::Update(k)
            | Op::Insert(k)
            | Op::Scan(k, _)
            | Op::ReadModifyWrite(k) => k,
        }
    }

    /// The kind.
    #[must_use]
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Read(_) => OpKind::Read,
            Op::Update(_) => OpKind::Update,
            Op::Insert(_) => OpKind::Insert,
            Op::Scan(..) => OpKind::Scan,
            Op::ReadModifyWrite(_) => OpKind::ReadModifyWrite,
        }
    }

    /// YCSB's name for the operation.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read(_) => "READ",
            Op::Update(_) => "UPDATE",
            Op::Insert(_) => "INSERT",
            Op::Scan(..) => "SCAN",
            Op::ReadModifyWrite(_) => "READ-MODIFY-WRITE",
        }
    }
}

#[derive(Debug, Clone)]
enum ScanLen {
    Uniform(Uniform),
    Zipfian(Zipfian),
}

/// A workload's shared state: the spec, the insert counter and a key-chooser
/// prototype (built once: the `latest` chooser costs `O(record_count)` for zeta).
#[derive(Debug)]
pub struct Workload {
    spec: WorkloadSpec,
    record_count: u64,
    op_count: u64,
    insert_counter: Arc<AtomicU64>,
    chooser: KeyChooser,
}

impl Workload {
    /// `record_count` records loaded (`0..record_count`, at least 1), `op_count`
    /// operations planned over all threads (sizes the zipfian key space).
    #[must_use]
    pub fn new(spec: WorkloadSpec, record_count: u64, op_count: u64) -> Self {
        let record_count = record_count.max(1);
        let chooser = spec.key_chooser(record_count, op_count);
        Workload {
            spec,
            record_count,
            op_count,
            insert_counter: Arc::new(AtomicU64::new(record_count)),
            chooser,
        }
    }

    /// A generator for one thread, seeded with `seed`.
    #[must_use]
    pub fn generator(&self, seed: u64) -> OpGenerator {
        OpGenerator::with_chooser(
            &self.spec,
            self.chooser.clone(),
            Arc::clone(&self.insert_counter),
            seed,
        )
    }

    /// The spec.
    #[must_use]
    pub fn spec(&self) -> &WorkloadSpec {
        &self.spec
    }

    /// Records loaded before the run.
    #[must_use]
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Operations planned.
    #[must_use]
    pub fn op_count(&self) -> u64 {
        self.op_count
    }

    /// The shared insert counter (next key number to insert).
    #[must_use]
    pub fn insert_counter(&self) -> &Arc<AtomicU64> {
        &self.insert_counter
    }

    /// Key numbers that exist now: loaded plus inserted (`0..records()`).
    #[must_use]
    pub fn records(&self) -> u64 {
        self.insert_counter.load(Ordering::Relaxed)
    }
}

/// One thread's stream of YCSB operations.
#[derive(Debug, Clone)]
pub struct OpGenerator {
    ops: Vec<(f64, OpKind)>,
    chooser: KeyChooser,
    scan_len: ScanLen,
    insert_counter: Arc<AtomicU64>,
    rng: Rng,
}

impl OpGenerator {
    /// A generator building its own key chooser (`insert_counter` must start at
    /// `record_count` and be shared by all threads of the run).
    pub fn new(
        spec: &WorkloadSpec,
        record_count: u64,
        op_count: u64,
        insert_counter: Arc<AtomicU64>,
        seed: u64,
    ) -> Self {
        let chooser = spec.key_chooser(record_count, op_count);
        Self::with_chooser(spec, chooser, insert_counter, seed)
    }

    /// A generator with a given key chooser.
    pub fn with_chooser(
        spec: &WorkloadSpec,
        chooser: KeyChooser,
        insert_counter: Arc<AtomicU64>,
        seed: u64,
    ) -> Self {
        let (lo, hi) = (
            spec.min_scan_len as u64,
            spec.max_scan_len.max(spec.min_scan_len) as u64,
        );
        let scan_len = match spec.scan_len_distribution {
            ScanLenDistribution::Uniform => ScanLen::Uniform(Uniform::new(lo, hi)),
            ScanLenDistribution::Zipfian => ScanLen::Zipfian(Zipfian::with_range(lo, hi)),
        };
        OpGenerator {
            ops: spec.op_table(),
            chooser,
            scan_len,
            insert_counter,
            rng: Rng::new(seed),
        }
    }

    /// The last inserted key number (`counter - 1`; see the module docs).
    #[must_use]
    pub fn last_inserted(&self) -> u64 {
        self.insert_counter
            .load(Ordering::Relaxed)
            .saturating_sub(1)
    }

    /// `operationchooser.nextString()`.
    fn choose_kind(&mut self) -> OpKind {
        let mut val = next_f64(&mut self.rng);
        for &(w, kind) in &self.ops {
            if val < w {
                return kind;
            }
            val -= w;
        }
        // Rounding left `val` just above the last cumulative weight.
        self.ops.last().map_or(OpKind::Read, |&(_, k)| k)
    }

    /// `nextKeynum()`: a key number no greater than the last insert.
    pub fn next_keynum(&mut self) -> u64 {
        loop {
            let last = self.last_inserted();
            let k = self.chooser.next(&mut self.rng, last);
            if k <= last {
                return k;
            }
        }
    }

    /// The next operation (`doTransaction`).
    pub fn next_op(&mut self) -> Op {
        match self.choose_kind() {
            OpKind::Read => Op::Read(self.next_keynum()),
            OpKind::Update => Op::Update(self.next_keynum()),
            OpKind::Insert => Op::Insert(self.insert_counter.fetch_add(1, Ordering::Relaxed)),
            OpKind::Scan => {
                let k = self.next_keynum();
                let len = match &mut self.scan_len {
                    ScanLen::Uniform(g) => g.next(&mut self.rng),
                    ScanLen::Zipfian(g) => g.next(&mut self.rng),
                };
                // Drawn from `min_scan_len..=max_scan_len`, both `usize`.
                Op::Scan(k, usize::try_from(len).unwrap_or(usize::MAX))
            }
            OpKind::ReadModifyWrite => Op::ReadModifyWrite(self.next_keynum()),
        }
    }
}

impl Iterator for OpGenerator {
    type Item = Op;

    /// Endless: always `Some(self.next_op())`.
    fn next(&mut self) -> Option<Op> {
        Some(self.next_op())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::fnvhash64;
    use std::collections::{HashMap, HashSet};

    const RECORDS: u64 = 100_000;
    const OPS: u64 = 200_000;

    #[test]
    fn specs_match_the_ycsb_workload_files() {
        let p = |s: &WorkloadSpec| [s.read, s.update, s.insert, s.scan, s.read_modify_write];
        let want = [
            ("a", [0.5, 0.5, 0.0, 0.0, 0.0], Distribution::Zipfian),
            ("b", [0.95, 0.05, 0.0, 0.0, 0.0], Distribution::Zipfian),
            ("c", [1.0, 0.0, 0.0, 0.0, 0.0], Distribution::Zipfian),
            ("d", [0.95, 0.0, 0.05, 0.0, 0.0], Distribution::Latest),
            ("e", [0.0, 0.0, 0.05, 0.95, 0.0], Distribution::Zipfian),
            ("f", [0.5, 0.0, 0.0, 0.0, 0.5], Distribution::Zipfian),
        ];
        for (name, props, dist) in want {
            let s = spec(name).expect("standard workload");
            assert_eq!(s.name, name);
            #[expect(clippy::float_cmp, reason = "the spec holds these exact literals")]
            let same = p(&s) == props;
            assert!(same, "{name}: {:?} vs {props:?}", p(&s));
            assert_eq!(s.distribution, dist, "{name}");
            assert_eq!(s.min_scan_len, 1);
            assert_eq!(s.scan_len_distribution, ScanLenDistribution::Uniform);
            assert_eq!(s.max_scan_len, if name == "e" { 100 } else { 1000 });
        }
        assert_eq!(spec("workloadB"), spec("b"));
        assert_eq!(spec("ycsb-f"), spec("f"));
        assert!(spec("g").is_none());
        let u = spec("a")
            .expect("a")
            .with_distribution(Distribution::Uniform);
        assert_eq!(u.distribution, Distribution::Uniform);
        assert_eq!(spec("d").expect("d").expected_new_keys(OPS), 20_000);
        assert_eq!(spec("a").expect("a").expected_new_keys(OPS), 0);
    }

    /// Runs `OPS` operations of `spec` on one thread; checks keys never pass the
    /// last insert and inserts are sequential. Returns the ops.
    fn run(spec: WorkloadSpec, seed: u64) -> Vec<Op> {
        let w = Workload::new(spec, RECORDS, OPS);
        let mut g = w.generator(seed);
        let mut next_insert = RECORDS;
        let mut out = Vec::with_capacity(usize::try_from(OPS).expect("OPS fits in usize"));
        for _ in 0..OPS {
            let last = g.last_inserted();
            let op = g.next_op();
            match op {
                Op::Insert(k) => {
                    assert_eq!(k, next_insert);
                    next_insert += 1;
                }
                _ => assert!(op.keynum() <= last, "{op:?} beyond {last}"),
            }
            out.push(op);
        }
        assert_eq!(w.records(), next_insert);
        out
    }

    #[test]
    fn workload_mixes_match_their_proportions() {
        for (i, name) in ["a", "b", "c", "d", "e", "f"].into_iter().enumerate() {
            let s = spec(name).expect("standard workload");
            let ops = run(s.clone(), 100 + i as u64);
            let mut counts: HashMap<OpKind, u64> = HashMap::new();
            for op in &ops {
                *counts.entry(op.kind()).or_default() += 1;
            }
            let share = |k: OpKind| *counts.get(&k).unwrap_or(&0) as f64 / ops.len() as f64;
            let got = [
                share(OpKind::Read),
                share(OpKind::Update),
                share(OpKind::Insert),
                share(OpKind::Scan),
                share(OpKind::ReadModifyWrite),
            ];
            let want = [s.read, s.update, s.insert, s.scan, s.read_modify_write];
            eprintln!("workload {name}: read/update/insert/scan/rmw = {got:.4?}");
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 0.01, "{name}: {got:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn workload_e_scan_lengths_are_uniform_1_to_100() {
        let ops = run(spec("e").expect("e"), 7);
        let lens: Vec<usize> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Scan(_, len) => Some(*len),
                _ => None,
            })
            .collect();
        assert!(lens.iter().all(|l| (1..=100).contains(l)));
        let mean = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
        let mut per = [0u64; 101];
        for &l in &lens {
            per[l] += 1;
        }
        let (lo, hi) = (
            per[1..].iter().min().copied(),
            per[1..].iter().max().copied(),
        );
        eprintln!(
            "workload e: {} scans, mean length {mean:.3}, per-length count {lo:?}..{hi:?}",
            lens.len()
        );
        assert!((mean - 50.5).abs() < 0.3, "{mean}");
        let expect = lens.len() as f64 / 100.0;
        assert!(
            per[1..]
                .iter()
                .all(|&c| (c as f64 - expect).abs() < 0.1 * expect),
            "{per:?}"
        );
    }

    #[test]
    fn workload_d_reads_skew_to_recent_inserts() {
        let recent_share = |dist: Distribution| {
            let w = Workload::new(spec("d").expect("d").with_distribution(dist), RECORDS, OPS);
            let mut g = w.generator(3);
            let (mut reads, mut recent) = (0u64, 0u64);
            for _ in 0..OPS {
                let last = g.last_inserted();
                if let Op::Read(k) = g.next_op() {
                    reads += 1;
                    recent += u64::from(last - k < last / 100);
                }
            }
            recent as f64 / reads as f64
        };
        let latest = recent_share(Distribution::Latest);
        let uniform = recent_share(Distribution::Uniform);
        eprintln!("workload d: reads in the newest 1%: latest {latest:.4}, uniform {uniform:.4}");
        assert!(latest > 0.5, "{latest}");
        assert!(uniform < 0.02, "{uniform}");
    }

    #[test]
    fn zipfian_workload_hot_keys_are_scrambled_and_uniform_override_is_flat() {
        let hottest = |s: WorkloadSpec| {
            let ops = run(s, 11);
            let mut counts: HashMap<u64, u64> = HashMap::new();
            for op in &ops {
                *counts.entry(op.keynum()).or_default() += 1;
            }
            counts
                .into_iter()
                .max_by_key(|&(k, c)| (c, k))
                .unwrap_or((0, 0))
        };
        // Workload C: keychooser over 0..=RECORDS (YCSB's inclusive max), no inserts.
        let (k, c) = hottest(spec("c").expect("c"));
        eprintln!(
            "workload c: hottest key {k} share {:.4}",
            c as f64 / OPS as f64
        );
        assert_eq!(k, fnvhash64(0) % (RECORDS + 1));
        assert!(c as f64 / OPS as f64 > 0.03);
        let (_, c) = hottest(
            spec("c")
                .expect("c")
                .with_distribution(Distribution::Uniform),
        );
        assert!((c as f64) < 30.0, "uniform hottest count {c}");
    }

    #[test]
    fn zipf_constant_reaches_the_key_chooser() {
        let keys = |s: WorkloadSpec| -> Vec<u64> {
            let w = Workload::new(s, RECORDS, OPS);
            let mut g = w.generator(5);
            (0..1000).map(|_| g.next_op().keynum()).collect()
        };
        for name in ["c", "d"] {
            let s = spec(name).expect("standard workload");
            assert_eq!(keys(s.clone()), keys(s.clone().with_zipf_constant(0.99)));
            assert_ne!(keys(s.clone()), keys(s.with_zipf_constant(0.7)));
        }
        let ops = run(spec("c").expect("c").with_zipf_constant(0.7), 11);
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for op in &ops {
            *counts.entry(op.keynum()).or_default() += 1;
        }
        let (k, _) = counts
            .into_iter()
            .max_by_key(|&(k, c)| (c, k))
            .unwrap_or((0, 0));
        assert_eq!(k, fnvhash64(0) % (RECORDS + 1));
    }

    #[test]
    fn threads_share_the_insert_counter() {
        let w = Workload::new(spec("d").expect("d"), RECORDS, OPS);
        let inserted: Vec<u64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|t| {
                    let mut g = w.generator(t);
                    s.spawn(move || {
                        (0..20_000)
                            .filter_map(|_| match g.next_op() {
                                Op::Insert(k) => Some(k),
                                op => {
                                    assert!(op.keynum() < RECORDS + 20_000);
                                    None
                                }
                            })
                            .collect::<Vec<u64>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("generator thread"))
                .collect()
        });
        let set: HashSet<u64> = inserted.iter().copied().collect();
        assert_eq!(set.len(), inserted.len());
        assert_eq!(w.records(), RECORDS + inserted.len() as u64);
        assert!(set.iter().all(|k| (RECORDS..w.records()).contains(k)));
    }

    #[test]
    fn zipfian_scan_lengths_and_degenerate_specs() {
        let s = WorkloadSpec {
            scan_len_distribution: ScanLenDistribution::Zipfian,
            max_scan_len: 100,
            ..WorkloadSpec::new("scan", [0.0, 0.0, 0.0, 1.0, 0.0], Distribution::Uniform)
        };
        let mut g = OpGenerator::new(&s, 1000, 1000, Arc::new(AtomicU64::new(1000)), 1);
        let mut ones = 0;
        for op in g.by_ref().take(10_000) {
            match op {
                Op::Scan(k, len) => {
                    assert!(k < 1000 && (1..=100).contains(&len));
                    ones += usize::from(len == 1);
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(ones > 1000, "{ones}");
        let empty = WorkloadSpec::new("none", [0.0; 5], Distribution::Uniform);
        let mut g = OpGenerator::new(&empty, 10, 10, Arc::new(AtomicU64::new(10)), 1);
        assert!(matches!(g.next_op(), Op::Read(k) if k < 10));
    }
}
