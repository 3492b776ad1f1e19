//! Chooses the concurrent in-DRAM ordered index for FastStore (FluidKV §5.1,
//! Algorithm 1: a put replaces a key's value only if its LSN is newer).
//!
//! Every candidate maps `Box<[u8]>` keys to a slot `Mutex<Version>` and is
//! driven with the engine's access pattern: `put_validate` (find or insert
//! the slot, then lock it and replace only on a newer LSN), `get` (find,
//! lock, read) and ordered `scan` of n entries. LSNs come from 256 striped
//! counters chosen by key hash. Heap use is measured with the counting
//! global allocator.
//!
//! Usage: `index_candidates [--num N] [--threads T] [--candidates a,b,c,d,e,f,g]
//! [--key-sizes 8,24]`
//! with a = crossbeam `SkipMap`, b = scc `TreeIndex`, c = 64 sharded
//! `RwLock<BTreeMap>` (naive baseline), d = CascadeKV's own B-link tree, e = the
//! optimistic tree in CascadeKV's hybrid index (HiKV: a hash index beside it), f = the
//! `masstree` crate, g = CascadeKV's optimistic B+-tree (the FastStore index module
//! `faststore/olc` alone).

#![deny(
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hint::black_box;
use std::io::Write;
use std::ops::{Bound, Range};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use cascade_bench::alloc::{self, CountingAlloc};
use crossbeam_skiplist::SkipMap;
use parking_lot::{Mutex, RwLock};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use scc::{Guard, TreeIndex};

/// Counts heap bytes, for the heap-per-key column.
#[global_allocator]
static A: CountingAlloc = CountingAlloc(std::alloc::System);

/// Striped LSN counters, one picked per key by its hash.
const LSN_STRIPES: usize = 256;
/// Shards of the naive `RwLock<BTreeMap>` baseline.
const SHARDS: usize = 64;
/// Entries read by one scan.
const SCAN_LEN: usize = 100;

/// What a key currently maps to: its newest LSN and an 8 B inline value or log address.
#[derive(Debug, Clone, Copy)]
struct Version {
    /// Log sequence number of this version.
    lsn: u64,
    /// The 8-byte inline value or log address.
    value: u64,
}

/// Per-key slot; mutated in place under its own lock.
type Slot = Mutex<Version>;

/// A fresh slot holding `value` at `lsn`.
fn new_slot(lsn: u64, value: u64) -> Slot {
    Mutex::new(Version { lsn, value })
}

/// Algorithm 1's validation step: replace only if `lsn` is newer. Returns whether it replaced.
fn validate(slot: &Slot, lsn: u64, value: u64) -> bool {
    let mut v = slot.lock();
    if lsn > v.lsn {
        *v = Version { lsn, value };
        true
    } else {
        false
    }
}

/// The operations FastStore needs from its ordered index.
trait Index: Sync {
    /// Inserts or validates-and-replaces; returns true if the stored version was replaced.
    fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool;
    /// The value stored for `key`, if any.
    fn get(&self, key: &[u8]) -> Option<u64>;
    /// Reads up to `n` entries in key order from the first key >= `start`; returns how many.
    fn scan(&self, start: &[u8], n: usize) -> usize;
    /// Finishes work the puts left behind (the hybrid index's queued tree updates), so
    /// that it is timed with the writes that caused it.
    fn settle(&self) {}
}

/// (a) crossbeam-skiplist; the slot lives in the node and is mutated in place.
struct SkipList(SkipMap<Box<[u8]>, Slot>);

impl Index for SkipList {
    fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool {
        if let Some(entry) = self.0.get(key) {
            return validate(entry.value(), lsn, value);
        }
        let entry = self.0.get_or_insert(key.into(), new_slot(lsn, value));
        // If another thread inserted first, validate against its slot; if ours won this is a no-op.
        validate(entry.value(), lsn, value);
        false
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.get(key).map(|e| e.value().lock().value)
    }

    fn scan(&self, start: &[u8], n: usize) -> usize {
        let range = (Bound::Included(start), Bound::Unbounded);
        self.0
            .range::<[u8], _>(range)
            .take(n)
            .inspect(|e| {
                black_box(e.value().lock().value);
            })
            .count()
    }
}

/// Implements [`Index`] for a wrapper whose `.0` has the engine index's method names
/// (`put_validate`, `get`, `collect_range`) and whose `.1` is its `Snapshots`: [`Own`]
/// (with `settle`) and [`Alone`] over either tree. Values are stored inline.
macro_rules! cascade_index {
    ($t:ty $(, $settle:expr)?) => {
        impl Index for $t {
            fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool {
                let v = cascadekv::internals::Version {
                    lsn,
                    epoch: 1,
                    val: cascadekv::internals::Val::inline(&value.to_le_bytes()),
                };
                self.0.put_validate(key, v, &self.1) == cascadekv::internals::PutOutcome::Replaced
            }

            fn get(&self, key: &[u8]) -> Option<u64> {
                let v = self.0.get(key)?;
                let b = v.val.inline_bytes()?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b.get(..8)?);
                Some(u64::from_le_bytes(a))
            }

            fn scan(&self, start: &[u8], n: usize) -> usize {
                let mut out = Vec::with_capacity(n);
                self.0.collect_range(
                    Bound::Included(start),
                    Bound::Unbounded,
                    u64::MAX,
                    n,
                    &mut out,
                );
                black_box(&out);
                out.len()
            }

            $(fn settle(&self) {
                let f: fn(&Self) = $settle;
                f(self);
            })?
        }
    };
}

/// (e) CascadeKV's `Index` in its hybrid form (HiKV): a partitioned hash index beside
/// the optimistic B+-tree, which backend threads update from per-writer queues.
struct Own(
    cascadekv::internals::Index,
    Arc<cascadekv::internals::Snapshots>,
);

cascade_index!(Own, |o: &Own| o.0.wait_for_updates());

/// (f) the `masstree` crate (Masstree: a trie of B+-trees over 8-byte key slices,
/// optimistic version-validated reads that write nothing, epoch reclamation). Boxed
/// values (`MassTree15`), since a slot is mutated in place under its own lock.
struct Mass(masstree::MassTree15<Slot>);

impl Index for Mass {
    fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool {
        let g = self.0.guard();
        if let Some(s) = self.0.get_ref(key, &g) {
            return validate(&s, lsn, value);
        }
        let mut fresh = false;
        let slot = self.0.entry_with_guard(key, &g).or_insert_with(|| {
            fresh = true;
            new_slot(lsn, value)
        });
        !fresh && validate(&slot, lsn, value)
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        let g = self.0.guard();
        self.0.get_ref(key, &g).map(|s| s.lock().value)
    }

    fn scan(&self, start: &[u8], n: usize) -> usize {
        let g = self.0.guard();
        let mut seen = 0;
        self.0.scan(
            masstree::RangeBound::Included(start),
            masstree::RangeBound::Unbounded,
            |k, s| {
                black_box((k, s.lock().value));
                seen += 1;
                seen < n
            },
            &g,
        );
        seen
    }
}

/// (b) scc B+tree. Values are `Arc`ed because leaves are copied on split, so a
/// slot stored inline could be mutated in a stale copy.
struct Tree(TreeIndex<Box<[u8]>, Arc<Slot>>);

impl Index for Tree {
    fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool {
        if let Some(replaced) = self.0.peek_with(key, |_, s| validate(s, lsn, value)) {
            return replaced;
        }
        if self
            .0
            .insert_sync(key.into(), Arc::new(new_slot(lsn, value)))
            .is_err()
        {
            // Lost an insert race: validate against the winner's slot.
            self.0.peek_with(key, |_, s| validate(s, lsn, value));
        }
        false
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.peek_with(key, |_, s| s.lock().value)
    }

    fn scan(&self, start: &[u8], n: usize) -> usize {
        let guard = Guard::new();
        let range = (Bound::Included(start), Bound::Unbounded);
        self.0
            .range::<[u8], _>(range, &guard)
            .take(n)
            .inspect(|(_, s)| {
                black_box(s.lock().value);
            })
            .count()
    }
}

/// (c) Naive baseline: hash-sharded `RwLock<BTreeMap>`; scans k-way merge all shards.
struct Sharded(Vec<RwLock<BTreeMap<Box<[u8]>, Slot>>>);

impl Sharded {
    /// [`SHARDS`] empty shards.
    fn new() -> Self {
        Self((0..SHARDS).map(|_| RwLock::new(BTreeMap::new())).collect())
    }

    /// The shard `key` belongs to.
    fn shard(&self, key: &[u8]) -> &RwLock<BTreeMap<Box<[u8]>, Slot>> {
        // Top bits pick the shard; the low bits pick the LSN stripe.
        &self.0[(hash_key(key) >> 58) as usize % SHARDS]
    }
}

impl Index for Sharded {
    fn put_validate(&self, key: &[u8], lsn: u64, value: u64) -> bool {
        let shard = self.shard(key);
        if let Some(slot) = shard.read().get(key) {
            return validate(slot, lsn, value);
        }
        let mut map = shard.write();
        let slot = map
            .entry(key.into())
            .or_insert_with(|| new_slot(lsn, value));
        validate(slot, lsn, value);
        false
    }

    fn get(&self, key: &[u8]) -> Option<u64> {
        self.shard(key).read().get(key).map(|s| s.lock().value)
    }

    fn scan(&self, start: &[u8], n: usize) -> usize {
        let guards: Vec<_> = self.0.iter().map(|s| s.read()).collect();
        let range = (Bound::Included(start), Bound::Unbounded);
        let mut iters: Vec<_> = guards.iter().map(|g| g.range::<[u8], _>(range)).collect();
        let mut heads: Vec<Option<&Slot>> = vec![None; iters.len()];
        let mut heap = BinaryHeap::with_capacity(iters.len());
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some((k, s)) = it.next() {
                heads[i] = Some(s);
                heap.push(Reverse((k, i)));
            }
        }
        let mut seen = 0;
        while seen < n {
            let Some(Reverse((_, i))) = heap.pop() else {
                break;
            };
            if let Some(slot) = heads[i] {
                black_box(slot.lock().value);
            }
            seen += 1;
            if let Some((k, s)) = iters[i].next() {
                heads[i] = Some(s);
                heap.push(Reverse((k, i)));
            }
        }
        seen
    }
}

/// splitmix64 finalizer: a cheap, bijective 64-bit mixer.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A 64-bit hash of `key`: its length, then its 8-byte words (zero-padded), folded
/// through [`mix`].
fn hash_key(key: &[u8]) -> u64 {
    key.chunks(8).fold(key.len() as u64, |h, chunk| {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        mix(h ^ u64::from_le_bytes(word))
    })
}

/// `h % n` as an index: the same as `h as usize % n` where `usize` is 64 bits wide.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the remainder is below `n`, a usize"
)]
fn index_of(h: u64, n: usize) -> usize {
    (h % n as u64) as usize
}

/// `num` distinct random keys in random order: 8 raw bytes, or "user" + 20 decimal digits (24 B).
fn make_keys(num: usize, key_len: usize) -> Vec<Box<[u8]>> {
    let mut rng = StdRng::seed_from_u64(0x00c0_ffee ^ key_len as u64);
    let mut raw: Vec<u64> = (0..num).map(|_| rng.gen()).collect();
    raw.sort_unstable();
    raw.dedup();
    raw.shuffle(&mut rng);
    raw.into_iter()
        .map(|r| match key_len {
            8 => Box::from(r.to_be_bytes()),
            _ => format!("user{r:020}").into_bytes().into_boxed_slice(),
        })
        .collect()
}

/// Splits `0..total` into `threads` contiguous ranges, runs `work` on each in
/// its own thread, and returns the summed results and the elapsed seconds.
fn parallel<F>(threads: usize, total: usize, work: F) -> (usize, f64)
where
    F: Fn(Range<usize>) -> usize + Sync,
{
    let per = total.div_ceil(threads.max(1));
    let start = Instant::now();
    let sum = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let range = (t * per).min(total)..((t + 1) * per).min(total);
                let work = &work;
                s.spawn(move || work(range))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .sum()
    });
    (sum, start.elapsed().as_secs_f64())
}

/// One table row: a candidate's results for one key size.
struct Row {
    /// Millions of inserts per second (empty index).
    load_mops: f64,
    /// Millions of newer-LSN replacements per second.
    update_mops: f64,
    /// Millions of point reads per second.
    get_mops: f64,
    /// Thousands of scans of [`SCAN_LEN`] entries per second.
    scan_kops: f64,
    /// Heap bytes the load added, per key.
    heap_per_key: f64,
}

/// Loads `keys` into `index`, updates them all, reads them all and runs scans,
/// each phase with `threads` threads; panics if a phase's results are wrong.
fn bench<I: Index>(index: &I, keys: &[Box<[u8]>], threads: usize) -> Row {
    let n = keys.len();
    let lsns: Vec<AtomicU64> = (0..LSN_STRIPES).map(|_| AtomicU64::new(0)).collect();
    let put_range = |range: Range<usize>| {
        range
            .filter(|&i| {
                let key = &keys[i];
                let stripe = index_of(hash_key(key), LSN_STRIPES);
                let lsn = lsns[stripe].fetch_add(1, Relaxed) + 1;
                index.put_validate(key, lsn, lsn ^ 0xabcd)
            })
            .count()
    };

    let heap_before = alloc::heap_bytes();
    let t = Instant::now();
    parallel(threads, n, put_range);
    index.settle();
    let load_s = t.elapsed().as_secs_f64();
    let heap_after = alloc::heap_bytes();

    let t = Instant::now();
    let (replaced, _) = parallel(threads, n, put_range);
    index.settle();
    let update_s = t.elapsed().as_secs_f64();
    assert_eq!(
        replaced, n,
        "every update carries a newer LSN and must replace"
    );

    let (hits, get_s) = parallel(threads, n, |range| {
        range
            .filter(|&i| index.get(&keys[index_of(mix(i as u64), n)]).is_some())
            .count()
    });
    assert_eq!(hits, n, "every loaded key must be found");

    let scan_ops = (n / 20).max(1_000);
    let (_, scan_s) = parallel(threads, scan_ops, |range| {
        range
            .map(|i| index.scan(&keys[index_of(mix(!(i as u64)), n)], SCAN_LEN))
            .sum()
    });

    #[expect(
        clippy::cast_precision_loss,
        reason = "operation counts far below 2^53"
    )]
    let mops = |ops: usize, secs: f64| ops as f64 / secs / 1e6;
    #[expect(
        clippy::cast_precision_loss,
        reason = "byte and key counts far below 2^53"
    )]
    let heap_per_key = heap_after.saturating_sub(heap_before) as f64 / n as f64;
    Row {
        load_mops: mops(n, load_s),
        update_mops: mops(n, update_s),
        get_mops: mops(n, get_s),
        scan_kops: mops(scan_ops, scan_s) * 1e3,
        heap_per_key,
    }
}

/// Command-line settings.
struct Args {
    /// Keys per key size (`--num`).
    num: usize,
    /// Worker threads (`--threads`).
    threads: usize,
    /// Candidates to run, by letter (`--candidates`).
    candidates: Vec<String>,
    /// Key sizes to run, 8 and/or 24 bytes (`--key-sizes`).
    key_sizes: Vec<usize>,
}

/// Prints `msg` and the usage line to stderr and exits with status 2.
fn usage_exit(msg: &str) -> ! {
    eprintln!(
        "{msg}\nusage: index_candidates [--num N] [--threads T] [--candidates a,b,c,d,e,f,g] [--key-sizes 8,24]"
    );
    std::process::exit(2);
}

/// Parses the command line (exits with a usage message on errors).
fn parse_args() -> Args {
    let mut args = Args {
        num: 4_000_000,
        threads: 2,
        candidates: vec!["a".into(), "b".into(), "c".into(), "d".into()],
        key_sizes: vec![8, 24],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| usage_exit(&format!("{flag} needs a value")));
        let bad = |_| usage_exit(&format!("bad value for {flag}: {value}"));
        match flag.as_str() {
            "--num" => args.num = value.parse().unwrap_or_else(bad),
            "--threads" => args.threads = value.parse().unwrap_or_else(bad),
            "--candidates" => args.candidates = value.split(',').map(str::to_owned).collect(),
            "--key-sizes" => {
                args.key_sizes = value
                    .split(',')
                    .map(|s| s.parse().unwrap_or_else(bad))
                    .collect();
            }
            _ => usage_exit(&format!("unknown argument {flag}")),
        }
    }
    if args.num == 0 || args.threads == 0 {
        usage_exit("--num and --threads must be positive");
    }
    args
}

/// (d) CascadeKV's former B-link tree (`cascadekv::internals::BLinkTree`: inline key
/// prefixes, per-leaf locks, copy-on-write inner nodes; kept only as this baseline) and
/// (g) the optimistic B+-tree the engine's `Index` uses (`cascadekv::internals::Olc`:
/// node versions instead of locks for readers, in-place splits, entries behind one
/// pointer), each on its own. Values are stored inline.
struct Alone<T>(T, cascadekv::internals::Snapshots);

cascade_index!(Alone<cascadekv::internals::Olc>);
cascade_index!(Alone<cascadekv::internals::BLinkTree>);

/// Runs every candidate on 8-byte and 24-byte keys and prints a markdown table.
fn main() {
    let args = parse_args();
    println!(
        "index candidates: num={} threads={} scan={SCAN_LEN} entries\n",
        args.num, args.threads
    );
    println!("| candidate | key size | load Mops/s | update Mops/s | get Mops/s | scan100 Kops/s | heap B/key |");
    println!("|---|---|---|---|---|---|---|");
    for &key_len in &args.key_sizes {
        let keys = make_keys(args.num, key_len);
        for c in &args.candidates {
            let (name, row) = match c.as_str() {
                "a" => (
                    "crossbeam SkipMap",
                    bench(&SkipList(SkipMap::new()), &keys, args.threads),
                ),
                "b" => (
                    "scc TreeIndex",
                    bench(&Tree(TreeIndex::new()), &keys, args.threads),
                ),
                "c" => (
                    "64x RwLock<BTreeMap>",
                    bench(&Sharded::new(), &keys, args.threads),
                ),
                "d" => (
                    "cascadekv B-link tree",
                    bench(
                        &Alone(
                            cascadekv::internals::BLinkTree::new(),
                            cascadekv::internals::Snapshots::default(),
                        ),
                        &keys,
                        args.threads,
                    ),
                ),
                "e" => {
                    let snaps = Arc::new(cascadekv::internals::Snapshots::default());
                    let cores = std::thread::available_parallelism().map_or(2, usize::from);
                    let hybrid = cascadekv::internals::Index::hybrid(
                        snaps.clone(),
                        args.threads,
                        cores.saturating_sub(1).max(1),
                    );
                    (
                        "cascadekv hybrid (HiKV)",
                        bench(&Own(hybrid, snaps), &keys, args.threads),
                    )
                }
                "f" => (
                    "masstree crate",
                    bench(&Mass(masstree::MassTree15::new()), &keys, args.threads),
                ),
                "g" => (
                    "cascadekv OLC B+-tree",
                    bench(
                        &Alone(
                            cascadekv::internals::Olc::new(),
                            cascadekv::internals::Snapshots::default(),
                        ),
                        &keys,
                        args.threads,
                    ),
                ),
                other => usage_exit(&format!("unknown candidate {other}")),
            };
            println!(
                "| {name} | {key_len} B | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |",
                row.load_mops, row.update_mops, row.get_mops, row.scan_kops, row.heap_per_key
            );
            std::io::stdout().flush().expect("flush stdout");
        }
    }
}
