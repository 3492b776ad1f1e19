//! SIGKILL test: no acknowledged write is lost when the writing process dies at a
//! random moment (an expected-state oracle in the style of RocksDB's `db_stress`).
//!
//! The parent test re-executes this binary as a child (`child_writer`, ignored unless
//! `CKV_KILL_DIR` is set). The child opens the store (so kills also land during
//! recovery) and runs writer threads (two; `KILL_THREADS`) doing `Durability::Sync`
//! puts, deletes and batches on keys they own. Before each write a thread appends
//! PENDING entries to the oracle file, after the write returns Ok it appends ACK
//! entries; each append is one
//! `write_all` of whole 32-byte entries, which lives in the kernel once it returns and
//! so survives SIGKILL. The parent kills the child at a random moment, opens the store
//! and checks every key against the oracle:
//!
//! * the value is exactly the state of one version the oracle allows: the last acked
//!   version, a newer version whose PENDING entry exists, or — for keys not written
//!   since the previous check — what that check observed (recovered state never moves
//!   backwards or resurrects a write that recovery already dropped);
//! * a batch is all-or-nothing; an acked batch is wholly there;
//! * a full `scan` returns exactly the keys and values `get` returns.
//!
//! `KILL_CYCLES` (default 50) sets the number of kill/verify cycles, `KILL_SEED` the
//! seed of the parent's and children's random choices (kill times stay
//! timing-dependent: one cycle in three kills before the time the previous child took
//! to open the store, mostly inside the open, the others 1–200 ms after the child
//! reports its open; an even seed also gives the store a slow tier, and a seed
//! divisible by 4 runs it with popularity placement, one that is 2 mod 8 with gets
//! reading it through `O_DIRECT`; writers also read their keys
//! back and check them against their last acknowledged write), `KILL_THREADS` the
//! number of writer threads (default 2), `KILL_TRACE=1`
//! prints one timing line per cycle. On failure the
//! store and oracle are kept and their path printed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cascadekv::{Db, Durability, Error, Options, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Names the test's root directory (store, oracle, marker) in the child.
const ENV_DIR: &str = "CKV_KILL_DIR";
/// Seed of the child's writer threads.
const ENV_SEED: &str = "CKV_KILL_SEED";

/// Key ids; thread `t` owns the ids with `id % threads() == t`. Enough distinct keys
/// that the 256 KiB FastStore capacity is reached and stages switch.
const KEYS: u32 = 4000;
/// Half of all single writes go to these ids, so keys also get many versions.
const HOT: u32 = 200;
/// Writer threads: 2, or `KILL_THREADS` (1–32; the child inherits it). With 4 or more
/// and an odd seed, groups reach the size at which a group-commit leader lingers for
/// more writers (`faststore/group.rs`).
fn threads() -> u32 {
    static THREADS: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::env::var("KILL_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|t| (1..=32).contains(t))
            .unwrap_or(2)
    })
}
const MAX_VALUE: u64 = 300;

const ENTRY: usize = 32;
const MAGIC: u8 = 0xC7;
const PENDING: u8 = 1;
const ACK: u8 = 2;
const OP_PUT: u8 = 1;
const OP_DEL: u8 = 2;

/// Marker file: this run's store has a slow tier (the parent decides by its seed, the
/// child reads it, so both open the store with the same options).
const SLOW_MARKER: &str = "slow-tier";
/// Marker file: the slow tier runs popularity placement (pinning, MSC victims,
/// promotions; issue #15) — seeds divisible by 4.
const PLACE_MARKER: &str = "placement";
/// Marker file: gets read the slow tier with `O_DIRECT` (`slow_direct_reads`) — seeds
/// that are 2 mod 8, where the file system takes it.
const DIRECT_MARKER: &str = "direct-reads";

/// Marker file: the store runs without the sync journal (`sync_journal: Some(false)`:
/// logs are fenced with `msync`) — seeds that are 3 mod 4; the others use the default
/// (the journal, on a disk).
const FENCE_MARKER: &str = "no-journal";

/// True if a file in `dir` opens with `O_DIRECT`.
fn direct_io_works(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("direct-probe");
    let ok = std::fs::write(&probe, [0u8; 4096]).is_ok()
        && std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe)
            .is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Small stages so that kills land during flushes and compactions too. Runs with an
/// even seed add a slow tier under a 64 KiB fast budget with merges of two runs, so
/// kills also land during demotions, slow-tier merges and the slow tier's part of
/// recovery (issue #14); odd seeds keep everything in the pool.
fn options(root: &Path) -> Options {
    let base = Options {
        pool_size: 256 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: 256 << 10,
        inline_threshold: 64,
        block_size: 256,
        table_max_bytes: 4096,
        buffer_trees_write_heavy: 2,
        sync_journal: root.join(FENCE_MARKER).exists().then_some(false),
        ..Options::default()
    };
    if !root.join(SLOW_MARKER).exists() {
        return base;
    }
    let slow = Options {
        slow_dir: Some(root.join("slow")),
        fast_budget: 64 << 10,
        slow_block_size: 512,
        slow_merge_width: 2,
        slow_partition_bytes: 1 << 20,
        slow_direct_reads: root.join(DIRECT_MARKER).exists(),
        ..base
    };
    if !root.join(PLACE_MARKER).exists() {
        return slow;
    }
    Options {
        pin_fraction: 0.7,
        demotion_policy: cascadekv::DemotionPolicy::Msc,
        promote_epoch_ops: 2000,
        promote_cooldown_ops: 10_000,
        ..slow
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key_of(id: u32) -> Vec<u8> {
    format!("key{id:06}").into_bytes()
}

fn id_of(key: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(key.strip_prefix(b"key")?).ok()?;
    if s.len() != 6 {
        return None;
    }
    s.parse().ok().filter(|id| *id < KEYS)
}

/// The value written as version `v` of key `id`: 1..=300 bytes starting with
/// `id` (u32 LE) and `v` (u64 LE), truncated if shorter, then pseudo-random bytes.
fn value_of(id: u32, v: u64) -> Vec<u8> {
    let seed = splitmix((u64::from(id) << 40) ^ v);
    let len = 1 + (seed % MAX_VALUE) as usize;
    let mut out = Vec::with_capacity(len + 8);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&v.to_le_bytes());
    let mut s = seed;
    while out.len() < len {
        s = splitmix(s);
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn describe_value(v: &Option<Vec<u8>>) -> String {
    match v {
        None => "absent".to_string(),
        Some(b) if b.len() >= 12 => {
            let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let mut ver = [0u8; 8];
            ver.copy_from_slice(&b[4..12]);
            format!(
                "{} bytes claiming (key id {id}, version {})",
                b.len(),
                u64::from_le_bytes(ver)
            )
        }
        Some(b) => format!("{} bytes {:02x?}", b.len(), b),
    }
}

// ---------------------------------------------------------------------------------
// Oracle file
// ---------------------------------------------------------------------------------

/// One oracle entry; `batch == 0` means a single write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    kind: u8,
    op: u8,
    thread: u8,
    key: u32,
    version: u64,
    batch: u64,
    batch_len: u32,
}

fn fnv32(b: &[u8]) -> u32 {
    b.iter().fold(0x811C_9DC5u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY] {
        let mut b = [0u8; ENTRY];
        b[0] = MAGIC;
        b[1] = self.kind;
        b[2] = self.op;
        b[3] = self.thread;
        b[4..8].copy_from_slice(&self.key.to_le_bytes());
        b[8..16].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&self.batch.to_le_bytes());
        b[24..28].copy_from_slice(&self.batch_len.to_le_bytes());
        let sum = fnv32(&b[..28]);
        b[28..32].copy_from_slice(&sum.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Entry> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        if b.len() != ENTRY || b[0] != MAGIC || fnv32(&b[..28]) != u32_at(28) {
            return None;
        }
        let e = Entry {
            kind: b[1],
            op: b[2],
            thread: b[3],
            key: u32_at(4),
            version: u64_at(8),
            batch: u64_at(16),
            batch_len: u32_at(24),
        };
        let ok = matches!(e.kind, PENDING | ACK) && matches!(e.op, OP_PUT | OP_DEL);
        (ok && e.key < KEYS && e.version > 0).then_some(e)
    }
}

/// Reads all whole entries; returns them and the length they cover (a torn tail
/// fragment is ignored; a damaged whole entry is an error).
fn read_oracle(path: &Path) -> Result<(Vec<Entry>, u64), String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("reading oracle {}: {e}", path.display())),
    };
    let whole = bytes.len() / ENTRY * ENTRY;
    let mut out = Vec::with_capacity(whole / ENTRY);
    for (i, chunk) in bytes[..whole].chunks_exact(ENTRY).enumerate() {
        out.push(Entry::decode(chunk).ok_or_else(|| {
            format!(
                "oracle entry {i} (offset {}) is damaged: {chunk:02x?}",
                i * ENTRY
            )
        })?);
    }
    Ok((out, whole as u64))
}

// ---------------------------------------------------------------------------------
// Child
// ---------------------------------------------------------------------------------

#[test]
#[ignore = "child process of kill_child_at_random_moments; runs only with CKV_KILL_DIR set"]
fn child_writer() {
    let Some(root) = std::env::var_os(ENV_DIR) else {
        return;
    };
    if let Err(e) = child_main(Path::new(&root)) {
        eprintln!("CHILD FAILURE: {e}");
        std::process::exit(2);
    }
}

fn child_main(root: &Path) -> Result<(), String> {
    let seed: u64 = std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let t0 = Instant::now();
    let oracle_path = root.join("oracle");
    let (entries, valid_len) = read_oracle(&oracle_path)?;
    let oracle = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&oracle_path)
        .map_err(|e| format!("opening oracle: {e}"))?;
    oracle
        .set_len(valid_len)
        .map_err(|e| format!("trimming oracle: {e}"))?;
    // Continue every key's numbering above anything already pending.
    let mut next = vec![1u64; KEYS as usize];
    let mut max_batch = 0;
    for e in &entries {
        let n = &mut next[e.key as usize];
        *n = (*n).max(e.version + 1);
        max_batch = max_batch.max(e.batch);
    }
    let batch_ids = AtomicU64::new(max_batch + 1);

    let oracle_ms = t0.elapsed().as_millis();
    let t_open = Instant::now();
    // Odd seeds batch the two writers' synchronous writes across threads (a leader
    // appends both to a group log and persists once: FlatStore §3.3).
    let group = if seed % 2 == 1 { 4 } else { 1 };
    let opts = Options {
        sync_group_size: group,
        ..options(root)
    };
    // Seeds 2 mod 3 close the store cleanly every few hundred writes and reopen it, so
    // kills also land inside a clean close (seals, the FastStore checkpoint, the clean
    // flag) and inside an open that loads a checkpoint.
    let sessions = seed % 3 == 2;
    let mut db = Db::open(root.join("store"), opts.clone()).map_err(|e| format!("open: {e}"))?;
    std::fs::write(
        root.join("opened"),
        format!(
            "oracle {oracle_ms} ms, open {} ms",
            t_open.elapsed().as_millis()
        ),
    )
    .map_err(|e| format!("creating marker: {e}"))?;

    let mut nexts: Vec<Vec<u64>> = (0..threads()).map(|_| next.clone()).collect();
    for session in 0u64.. {
        let limit = sessions.then(|| 100 + splitmix(seed ^ session) % 400);
        std::thread::scope(|s| {
            let handles: Vec<_> = nexts
                .iter_mut()
                .enumerate()
                .map(|(t, next)| {
                    let (db, oracle, batch_ids) = (&db, &oracle, &batch_ids);
                    let t = u32::try_from(t).unwrap_or(0);
                    s.spawn(move || {
                        let Err(e) = writer(db, oracle, t, next, batch_ids, seed, limit) else {
                            return;
                        };
                        eprintln!("CHILD FAILURE (thread {t}): {e}");
                        std::process::exit(2);
                    })
                })
                .collect();
            for h in handles {
                let _ = h.join();
            }
        });
        db.close().map_err(|e| format!("close: {e}"))?;
        drop(db);
        db = Db::open(root.join("store"), opts.clone()).map_err(|e| format!("reopen: {e}"))?;
    }
    Ok(())
}

fn pick_key(rng: &mut StdRng, t: u32) -> u32 {
    let range = if rng.gen_bool(0.5) { HOT } else { KEYS };
    rng.gen_range(0..range / threads()) * threads() + t
}

fn append(oracle: &File, buf: &[u8]) -> Result<(), String> {
    let mut f = oracle;
    f.write_all(buf)
        .map_err(|e| format!("appending to oracle: {e}"))
}

/// Writes until killed, or `limit` writes when given (a session of the child).
fn writer(
    db: &Db,
    oracle: &File,
    t: u32,
    next: &mut [u64],
    batch_ids: &AtomicU64,
    seed: u64,
    limit: Option<u64>,
) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(splitmix(
        seed ^ u64::from(t + 1) ^ next.iter().sum::<u64>().rotate_left(17),
    ));
    let mut ops: Vec<Entry> = Vec::with_capacity(5);
    let mut buf: Vec<u8> = Vec::with_capacity(5 * ENTRY);
    // This process's last acknowledged write of each key (version, deleted): reads
    // check them (read-your-writes through demotions and promotions, issue #15).
    let mut last: std::collections::HashMap<u32, (u64, bool)> = std::collections::HashMap::new();
    for _ in 0..limit.unwrap_or(u64::MAX) {
        if rng.gen_bool(0.3) {
            let id = pick_key(&mut rng, t);
            let got = db
                .get(&key_of(id))
                .map_err(|e| format!("get of key {id} failed: {e}"))?;
            if let Some(&(v, del)) = last.get(&id) {
                let want = (!del).then(|| value_of(id, v));
                if got != want {
                    return Err(format!(
                        "key {id}: read {:?} after acknowledged version {v} (deleted: {del})",
                        got.map(|g| String::from_utf8_lossy(&g).into_owned())
                    ));
                }
            }
        }
        ops.clear();
        let roll = rng.gen_range(0..100);
        let batch = roll < 20;
        let (n, bid) = if batch {
            let n = rng.gen_range(2..=5usize);
            (n, batch_ids.fetch_add(1, Ordering::SeqCst))
        } else {
            (1, 0)
        };
        while ops.len() < n {
            let id = pick_key(&mut rng, t);
            if ops.iter().any(|e| e.key == id) {
                continue;
            }
            let del = if batch { rng.gen_bool(0.25) } else { roll < 40 };
            let version = next[id as usize];
            next[id as usize] += 1;
            ops.push(Entry {
                kind: PENDING,
                op: if del { OP_DEL } else { OP_PUT },
                thread: t as u8,
                key: id,
                version,
                batch: bid,
                batch_len: if batch { n as u32 } else { 0 },
            });
        }
        buf.clear();
        for e in &ops {
            buf.extend_from_slice(&e.encode());
        }
        append(oracle, &buf)?;

        let res = if batch {
            let mut b = WriteBatch::new();
            for e in &ops {
                if e.op == OP_PUT {
                    b.put(key_of(e.key), value_of(e.key, e.version));
                } else {
                    b.delete(key_of(e.key));
                }
            }
            db.write_with(&b, Durability::Sync)
        } else {
            let e = ops[0];
            if e.op == OP_PUT {
                db.put_with(
                    &key_of(e.key),
                    &value_of(e.key, e.version),
                    Durability::Sync,
                )
            } else {
                db.delete_with(&key_of(e.key), Durability::Sync)
            }
        };
        res.map_err(|e| format!("write of {ops:?} failed: {e}"))?;

        buf.clear();
        for e in &ops {
            buf.extend_from_slice(&Entry { kind: ACK, ..*e }.encode());
            last.insert(e.key, (e.version, e.op == OP_DEL));
        }
        append(oracle, &buf)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Verifier
// ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct VerInfo {
    op: u8,
    batch: u64,
    acked: bool,
}

#[derive(Debug, Default)]
struct BatchInfo {
    len: u32,
    members: Vec<(u32, u64)>,
    acked: bool,
}

#[derive(Debug, Clone)]
struct KeyState {
    /// Versions the previous check's observation is consistent with (0 = never written).
    possible: Vec<u64>,
    /// Largest version in the oracle at the previous check.
    resolved_upto: u64,
}

#[derive(Debug, Default)]
struct Totals {
    acked_key_writes: u64,
    acked_ops: u64,
    unacked_recovered: u64,
    unacked_dropped: u64,
    batches_checked: u64,
    keys_verified: u64,
    live_keys: u64,
}

struct Model {
    keys: Vec<KeyState>,
    checked_batches: HashSet<u64>,
}

impl Model {
    fn new() -> Self {
        Model {
            keys: vec![
                KeyState {
                    possible: vec![0],
                    resolved_upto: 0,
                };
                KEYS as usize
            ],
            checked_batches: HashSet::new(),
        }
    }

    fn verify(&mut self, db: &Db, entries: &[Entry]) -> Result<Totals, String> {
        let mut tot = Totals::default();
        // History per key and per batch.
        let mut hist: Vec<BTreeMap<u64, VerInfo>> = vec![BTreeMap::new(); KEYS as usize];
        let mut batches: HashMap<u64, BatchInfo> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let h = &mut hist[e.key as usize];
            match e.kind {
                PENDING => {
                    let info = VerInfo {
                        op: e.op,
                        batch: e.batch,
                        acked: false,
                    };
                    if h.insert(e.version, info).is_some() {
                        return Err(format!("oracle entry {i}: duplicate PENDING {e:?}"));
                    }
                    if e.batch != 0 {
                        let b = batches.entry(e.batch).or_default();
                        b.len = e.batch_len;
                        b.members.push((e.key, e.version));
                    }
                }
                _ => {
                    let Some(info) = h.get_mut(&e.version) else {
                        return Err(format!("oracle entry {i}: ACK without PENDING {e:?}"));
                    };
                    if info.op != e.op || info.batch != e.batch || info.acked {
                        return Err(format!("oracle entry {i}: ACK mismatch {e:?} vs {info:?}"));
                    }
                    info.acked = true;
                    tot.acked_key_writes += 1;
                    if e.batch == 0 {
                        tot.acked_ops += 1;
                    } else if let Some(b) = batches.get_mut(&e.batch) {
                        if !b.acked {
                            tot.acked_ops += 1;
                        }
                        b.acked = true;
                    }
                }
            }
        }
        for (id, b) in &batches {
            if b.acked && b.members.len() != b.len as usize {
                return Err(format!(
                    "oracle: acked batch {id} has incomplete PENDING entries"
                ));
            }
        }
        // A version could have been written iff its PENDING entries are complete.
        let valid = |v: &VerInfo| {
            v.batch == 0
                || batches
                    .get(&v.batch)
                    .is_some_and(|b| b.members.len() == b.len as usize)
        };

        let mut errors: Vec<String> = Vec::new();
        let mut from_get: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for id in 0..KEYS {
            let h = &hist[id as usize];
            let st = &self.keys[id as usize];
            let acked = h.iter().rev().find(|(_, i)| i.acked).map_or(0, |(v, _)| *v);
            let mut cands: Vec<u64> = st.possible.clone();
            cands.extend(
                h.range(st.resolved_upto + 1..)
                    .filter(|(_, i)| valid(i))
                    .map(|(v, _)| *v),
            );
            cands.retain(|v| *v >= acked);
            cands.sort_unstable();
            cands.dedup();
            let key = key_of(id);
            let actual = db
                .get(&key)
                .map_err(|e| format!("get(key id {id}) failed: {e}"))?;
            let state = |v: u64| -> Option<Vec<u8>> {
                match h.get(&v) {
                    Some(i) if i.op == OP_PUT => Some(value_of(id, v)),
                    _ => None,
                }
            };
            let matches: Vec<u64> = cands
                .iter()
                .copied()
                .filter(|v| state(*v) == actual)
                .collect();
            tot.keys_verified += 1;
            if matches.is_empty() {
                let seen_as: Vec<String> = h
                    .iter()
                    .filter(|(v, _)| state(**v) == actual)
                    .map(|(v, i)| {
                        format!(
                            "v{v} (acked {}, batch {}, valid {})",
                            i.acked,
                            i.batch,
                            valid(i)
                        )
                    })
                    .collect();
                let cand_desc: Vec<String> = cands
                    .iter()
                    .map(|v| match h.get(v) {
                        Some(i) => format!(
                            "v{v}:{}{}{}",
                            if i.op == OP_PUT { "put" } else { "del" },
                            if i.acked { ":acked" } else { ":pending" },
                            if i.batch != 0 {
                                format!(":batch{}", i.batch)
                            } else {
                                String::new()
                            }
                        ),
                        None => format!("v{v}:initial-absent"),
                    })
                    .collect();
                errors.push(format!(
                    "key id {id}: store shows {} (matches oracle versions {seen_as:?}); \
                     last acked v{acked}; allowed {cand_desc:?}; previous check allowed {:?}; \
                     newest version in oracle v{}",
                    describe_value(&actual),
                    st.possible,
                    h.keys().next_back().copied().unwrap_or(0),
                ));
                continue;
            }
            // The write in flight at the kill (if any): did recovery keep it?
            if let Some((v, _)) = h
                .range(st.resolved_upto + 1..)
                .find(|(_, i)| !i.acked && valid(i))
            {
                if !matches.contains(v) {
                    tot.unacked_dropped += 1;
                } else if matches.len() == 1 {
                    tot.unacked_recovered += 1;
                }
            }
            if let Some(v) = actual {
                from_get.insert(key, v);
                tot.live_keys += 1;
            }
            let st = &mut self.keys[id as usize];
            st.possible = matches;
            st.resolved_upto = h.keys().next_back().copied().unwrap_or(0);
        }

        // Batch atomicity, checked once, at the first check after the batch's run.
        let mut ids: Vec<u64> = batches
            .keys()
            .copied()
            .filter(|b| !self.checked_batches.contains(b))
            .collect();
        ids.sort_unstable();
        for bid in ids {
            self.checked_batches.insert(bid);
            let b = &batches[&bid];
            if b.members.len() != b.len as usize {
                continue; // never issued; its versions were never allowed
            }
            tot.batches_checked += 1;
            let (mut applied, mut missing) = (Vec::new(), Vec::new());
            for &(k, v) in &b.members {
                let p = &self.keys[k as usize].possible;
                if p.is_empty() {
                    continue; // already reported
                }
                // Applied: only the batch's version fits. Not applied: only older
                // versions fit. Otherwise (a later write superseded it, or several
                // versions look alike) this key cannot tell.
                if p.iter().all(|x| *x < v) {
                    missing.push((k, v, p.clone()));
                } else if p == &[v] {
                    applied.push((k, v));
                }
            }
            if !applied.is_empty() && !missing.is_empty() {
                errors.push(format!(
                    "batch {bid} (acked {}, {} ops) is torn: keys showing the batch's version \
                     (id, version) {applied:?}; keys not showing it (id, batch version, \
                     versions the store is consistent with) {missing:?}",
                    b.acked, b.len
                ));
                continue;
            }
            // Narrow ambiguous members (e.g. a delete of an absent key) to the
            // batch's outcome.
            for &(k, v) in &b.members {
                let p = &mut self.keys[k as usize].possible;
                if !applied.is_empty() {
                    p.retain(|x| *x >= v);
                } else if !missing.is_empty() {
                    p.retain(|x| *x < v);
                }
            }
        }

        // A full scan agrees with the gets.
        let scanned = db
            .scan(None, None, usize::MAX)
            .map_err(|e| format!("scan failed: {e}"))?;
        let mut scan_map = BTreeMap::new();
        for (k, v) in scanned {
            if id_of(&k).is_none() {
                errors.push(format!("scan returned unknown key {k:02x?}"));
            }
            if scan_map.insert(k.clone(), v).is_some() {
                errors.push(format!("scan returned key {k:02x?} twice"));
            }
        }
        if scan_map != from_get {
            let only_scan: Vec<_> = scan_map
                .keys()
                .filter(|k| !from_get.contains_key(*k))
                .collect();
            let only_get: Vec<_> = from_get
                .keys()
                .filter(|k| !scan_map.contains_key(*k))
                .collect();
            let differ: Vec<_> = scan_map
                .iter()
                .filter(|(k, v)| from_get.get(*k).is_some_and(|g| g != *v))
                .map(|(k, _)| k)
                .collect();
            errors.push(format!(
                "scan disagrees with get: {} keys only in scan (first {:?}), {} only in gets \
                 (first {:?}), {} with different values (first {:?})",
                only_scan.len(),
                only_scan.first().map(|k| String::from_utf8_lossy(k)),
                only_get.len(),
                only_get.first().map(|k| String::from_utf8_lossy(k)),
                differ.len(),
                differ.first().map(|k| String::from_utf8_lossy(k)),
            ));
        }

        if errors.is_empty() {
            Ok(tot)
        } else {
            let n = errors.len();
            errors.truncate(20);
            Err(format!(
                "{n} verification error(s):\n  {}",
                errors.join("\n  ")
            ))
        }
    }
}

// ---------------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------------

#[test]
fn kill_child_at_random_moments() {
    if std::env::var_os(ENV_DIR).is_some() {
        return;
    }
    let cycles: u32 = std::env::var("KILL_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen());
    let root = std::env::temp_dir().join(format!("ckv-kill-{}-{seed:016x}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("create the test directory");
    if seed.is_multiple_of(2) {
        std::fs::write(root.join(SLOW_MARKER), b"").expect("create the slow-tier marker");
    }
    if seed.is_multiple_of(4) {
        std::fs::write(root.join(PLACE_MARKER), b"").expect("create the placement marker");
    }
    if seed % 4 == 3 {
        std::fs::write(root.join(FENCE_MARKER), b"").expect("create the no-journal marker");
    }
    if seed % 8 == 2 && direct_io_works(&root) {
        std::fs::write(root.join(DIRECT_MARKER), b"").expect("create the direct-reads marker");
    }
    match run(&root, cycles, seed) {
        Ok(()) => {
            let _ = std::fs::remove_dir_all(&root);
        }
        Err(e) => panic!(
            "{e}\nreproduce with: KILL_SEED={seed} KILL_CYCLES={cycles} cargo test --release \
             -p cascadekv --test kill -- --nocapture kill_child\nstore and oracle kept in {}",
            root.display()
        ),
    }
}

fn run(root: &Path, cycles: u32, seed: u64) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let store: PathBuf = root.join("store");
    let oracle = root.join("oracle");
    let marker = root.join("opened");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let start = Instant::now();
    let (mut kills_in_open, mut torn_batch_records, mut max_replay_ms) = (0u32, 0u64, 0u64);
    let mut last = Totals::default();
    let (mut inflight_kept, mut inflight_dropped, mut batches) = (0u64, 0u64, 0u64);
    eprintln!(
        "kill test: {cycles} cycles, seed {seed}, dir {}, slow tier {}",
        root.display(),
        if root.join(PLACE_MARKER).exists() {
            "on, with placement"
        } else if root.join(DIRECT_MARKER).exists() {
            "on, gets read it with O_DIRECT"
        } else if root.join(SLOW_MARKER).exists() {
            "on"
        } else {
            "off"
        }
    );
    let mut max_tables = 0u64;
    let (mut max_slow_files, mut demoted) = (0u64, false);
    // How the logs were made durable, and journal blocks redone by the recoveries.
    let (mut durability, mut redone) = ("", 0u64);
    // Pool bytes in use after each recovery: must not grow with the cycles.
    let mut used: Vec<u64> = Vec::new();
    let mut last_live = 0u64;
    // How long the last child took from its spawn to an open store (early kills aim
    // inside it).
    let mut to_open = Duration::from_millis(50);
    for cycle in 1..=cycles {
        let fail = |msg: String| format!("cycle {cycle}: {msg}");
        let _ = std::fs::remove_file(&marker);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_writer",
                "--nocapture",
                "--include-ignored",
            ])
            .env(ENV_DIR, root)
            .env(ENV_SEED, splitmix(seed ^ u64::from(cycle)).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("spawning the child: {e}")))?;
        let t_spawn = Instant::now();
        if cycle % 3 == 0 {
            // One cycle in three kills at a random moment before the time the last
            // child took to start and open the store: mostly inside the open (a
            // recovery interrupted by a kill).
            let us = u64::try_from(to_open.as_micros())
                .unwrap_or(u64::MAX)
                .max(1_000);
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..=us)));
        } else {
            // The others kill 1–200 ms into the workload: wait for the child's open
            // (at most 5 s; a child that has not opened by then is killed in its open).
            let deadline = t_spawn + Duration::from_secs(5);
            while !marker.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(500));
            }
            if marker.exists() {
                to_open = t_spawn.elapsed();
            }
            std::thread::sleep(Duration::from_millis(rng.gen_range(1..=200)));
        }
        let alive_ms = t_spawn.elapsed().as_millis();
        let early = child
            .try_wait()
            .map_err(|e| fail(format!("try_wait: {e}")))?;
        let opened = marker.exists();
        if early.is_none() && opened {
            // The live child holds the store: a second open must be refused.
            match Db::open(&store, options(root)) {
                Err(Error::Locked(_)) => {}
                Ok(db) => {
                    std::mem::forget(db); // do not touch the child's store further
                    let _ = child.kill();
                    return Err(fail("opened the store while the child held it".into()));
                }
                Err(e) => {
                    let _ = child.kill();
                    return Err(fail(format!(
                        "open during the child's run: {e} (wanted Locked)"
                    )));
                }
            }
        }
        if early.is_none() {
            child.kill().map_err(|e| fail(format!("kill: {e}")))?;
        }
        let status = child.wait().map_err(|e| fail(format!("wait: {e}")))?;
        let mut stderr = String::new();
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut stderr);
        }
        if status.signal() != Some(libc::SIGKILL) || stderr.contains("CHILD FAILURE") {
            return Err(fail(format!(
                "child did not die by our SIGKILL ({status}); its stderr:\n{stderr}"
            )));
        }
        if !opened {
            kills_in_open += 1;
        }

        let (entries, _) = read_oracle(&oracle).map_err(fail)?;
        let t_open = Instant::now();
        let db = Db::open(&store, options(root))
            .map_err(|e| fail(format!("opening the store after the kill failed: {e}")))?;
        let open_ms = t_open.elapsed().as_millis();
        let t_verify = Instant::now();
        let info = db.recovery_info().clone();
        max_tables = max_tables.max(info.tables);
        torn_batch_records += info.torn_batch_records;
        max_replay_ms = max_replay_ms.max(info.replay_micros / 1000);
        let tot = model.verify(&db, &entries).map_err(|e| {
            fail(format!(
                "{e}\n(recovery: {info:?}; kill landed {} open)",
                if opened { "after" } else { "before/during" }
            ))
        })?;
        let verify_ms = t_verify.elapsed().as_millis();
        let st = db.stats();
        used.push(st.pool_bytes_used);
        durability = st.log_durability;
        redone += info.journal_blocks_redone;
        max_slow_files = max_slow_files.max(st.slow_tier_files);
        demoted |= st.slow_tier_files > 0;
        last_live = st.live_bytes;
        let t_close = Instant::now();
        db.close()
            .map_err(|e| fail(format!("closing the verified store: {e}")))?;
        drop(db);
        if root.join(SLOW_MARKER).exists() {
            check_slow_files(&store, root).map_err(&fail)?;
        }
        if std::env::var_os("KILL_TRACE").is_some() {
            let child_says =
                std::fs::read_to_string(&marker).unwrap_or_else(|_| "not opened".into());
            let close_ms = t_close.elapsed().as_millis();
            eprintln!(
                "  cycle {cycle}: killed after {alive_ms} ms (child: {child_says}); verifier: \
                 open {open_ms} ms (replay {} ms, {} logs, {} records), verify {verify_ms} ms, \
                 close {close_ms} ms; acked {}",
                info.replay_micros / 1000,
                info.logs,
                info.records,
                tot.acked_key_writes
            );
        }
        inflight_kept += tot.unacked_recovered;
        inflight_dropped += tot.unacked_dropped;
        batches += tot.batches_checked;
        last = tot;
        if cycle % 10 == 0 || cycle == cycles {
            eprintln!(
                "cycle {cycle:4}: {:7} acked key writes ({} ops) verified, {} keys verified \
                 ({} live), batches checked {batches}, kills before open done {kills_in_open}, \
                 max replay {max_replay_ms} ms, {:.1} s",
                last.acked_key_writes,
                last.acked_ops,
                last.keys_verified,
                last.live_keys,
                start.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!(
        "kill test passed: {cycles} cycles, {} acked key writes ({} ops), in-flight writes \
         kept {inflight_kept} / dropped {inflight_dropped}, recovery dropped \
         {torn_batch_records} torn batch records, {:.1} s",
        last.acked_key_writes,
        last.acked_ops,
        start.elapsed().as_secs_f64()
    );
    if cycles >= 10 && max_tables == 0 {
        return Err("no flush ever reached the manifest: kills never landed amid stages".into());
    }
    if cycles >= 10 && !demoted && root.join(SLOW_MARKER).exists() {
        return Err("no recovery found slow-tier data: kills never landed amid demotions".into());
    }
    eprintln!(
        "  most tables seen at a recovery: {max_tables}; most slow-tier files: {max_slow_files}"
    );
    eprintln!("  logs made durable by: {durability}; journal blocks redone: {redone}");
    eprintln!(
        "  last recovery: pool in use {:.1} MB, live bytes {:.1} MB",
        used.last().copied().unwrap_or(0) as f64 / 1e6,
        last_live as f64 / 1e6
    );
    space_stays_bounded(&used)
}

/// After a clean close, the slow directory holds exactly the files the manifest names:
/// every job either finished (its inputs unlinked once obsolete) or never started.
fn check_slow_files(store: &Path, root: &Path) -> Result<(), String> {
    let quiet = Options {
        background: false,
        ..options(root)
    };
    let db = Db::open(store, quiet).map_err(|e| format!("reopen after close: {e}"))?;
    let (orphans, named) = (db.recovery_info().slow_orphans, db.stats().slow_tier_files);
    let on_disk = count_ssts(&root.join("slow"))?;
    db.close().map_err(|e| format!("close: {e}"))?;
    if orphans != 0 || on_disk != named {
        return Err(format!(
            "after a clean close: {orphans} orphan slow-tier files, {on_disk} on disk, {named} named"
        ));
    }
    Ok(())
}

/// Slow-tier table files in `dir` (none if it does not exist yet).
fn count_ssts(dir: &Path) -> Result<u64, String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let mut n = 0;
    for e in rd {
        let e = e.map_err(|e| format!("listing {}: {e}", dir.display()))?;
        n += u64::from(e.file_name().to_string_lossy().ends_with(".sst"));
    }
    Ok(n)
}

/// The pool in use after a recovery must not grow with the number of cycles: over the
/// last quarter it stays within twice the first quarter's peak (plus 16 MiB: the
/// FastStore logs' bound and a few table chunks), whatever the live data does — the
/// oracle's key space is fixed, so live bytes are bounded too.
fn space_stays_bounded(used: &[u64]) -> Result<(), String> {
    let q = used.len() / 4;
    if q < 10 {
        return Ok(());
    }
    let first = used[..q].iter().copied().max().unwrap_or(0);
    let last = used[used.len() - q..].iter().copied().max().unwrap_or(0);
    eprintln!(
        "  pool in use after recovery: first quarter peak {:.1} MB, last quarter peak {:.1} MB",
        first as f64 / 1e6,
        last as f64 / 1e6
    );
    if last > 2 * first + (16 << 20) {
        return Err(format!(
            "the pool grows with the cycles: {first} bytes peak early, {last} late"
        ));
    }
    Ok(())
}
