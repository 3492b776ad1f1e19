//! Simulated-device crash test: a small multi-threaded `Sync` workload on a device
//! that tracks every 64 B line. At every fence, before it takes effect, several crash
//! images are taken (all unfenced lines dropped, all kept, random subsets with 8 B
//! tears); each is recovered and checked: every write acknowledged before the crash is
//! present (or superseded by a later write of the same key), and every visible value is
//! one that was really written, whole.
//!
//! With the sync journal on (`Options::sync_journal`, the `*_journal` cases), log
//! ranges become durable as journal blocks, each durable when its write returns and a
//! fence for the hook; the images then pair the pool with the journal as of that
//! instant, and recovery must redo the journal into the pool (the pool's log lines
//! are fenced only by the journal's checkpoints).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cascadekv::{CrashMode, Db, Durability, Options, SimDevice, WriteBatch};
use parking_lot::Mutex;

const THREADS: u64 = 2;
const KEYS_PER_THREAD: u64 = 12;

fn opts(dev: Arc<SimDevice>, journal: bool) -> Options {
    Options {
        sync_journal: Some(journal),
        // Eight slots of 64 KiB: the ring wraps many times (checkpoints free slots),
        // and the 20 KB values exceed a block, so their ranges take the fence path.
        journal_size: 512 << 10,
        chunk_size: 16 << 10,
        pool_size: 0, // the device size decides
        faststore_capacity: 64 << 10,
        inline_threshold: 24,
        log_slots: 4,
        recovery_threads: 1,
        sim_device: Some(dev),
        block_size: 256,
        table_max_bytes: 2048,
        compaction_threads: 2,
        // Flushes and compactions are triggered by the workload itself, so that
        // crashes land at every fence of them too.
        background: false,
        ..Options::default()
    }
}

fn key(t: u64, k: u64) -> Vec<u8> {
    format!("t{t}-k{k:02}").into_bytes()
}

/// Value of version `v` of a key: self-describing, with sizes that cross the inline
/// threshold and, now and then, a chunk (a jumbo segment).
fn value(key: &[u8], v: u64) -> Vec<u8> {
    let len = match v % 9 {
        0 => 20_000,
        1 | 2 => 100,
        _ => 10,
    };
    let mut out = format!("{}:{v}:", String::from_utf8_lossy(key)).into_bytes();
    let mut x = v.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.len() as u64;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(x as u8);
    }
    out
}

fn parse_version(key: &[u8], val: &[u8]) -> Option<u64> {
    let s = String::from_utf8_lossy(val);
    let mut parts = s.splitn(3, ':');
    let k = parts.next()?;
    let v: u64 = parts.next()?.parse().ok()?;
    (k.as_bytes() == key && value(key, v) == val).then_some(v)
}

/// Journal blocks redone by the recoveries of this test binary (they run in parallel
/// tests, so each journal case only asks that some were).
static REDONE: AtomicU64 = AtomicU64::new(0);

#[derive(Default)]
struct Oracle {
    /// Per key: highest acknowledged version (0 = none); `u64::MAX` bit marks deleted.
    acked: HashMap<Vec<u8>, (u64, bool)>,
    /// Per key: highest version issued so far.
    issued: HashMap<Vec<u8>, u64>,
}

/// What the workload does besides writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upkeep {
    /// Writes only.
    None,
    /// Flushes and compactions.
    Stages,
    /// Flushes, compactions and log cleanings until no victims are left.
    Cleaning,
}

#[test]
fn recovers_every_acknowledged_write_at_every_fence() {
    run(Upkeep::None);
}

#[test]
fn recovers_at_every_fence_of_flushes_and_compactions() {
    run(Upkeep::Stages);
}

#[test]
fn recovers_at_every_fence_of_log_cleaning() {
    run(Upkeep::Cleaning);
}

/// Synchronous writes batched across the writer threads (a leader appends both
/// threads' records to its own log and fences once: FlatStore §3.3).
#[test]
fn recovers_at_every_fence_with_writes_batched_across_threads() {
    run_with(Upkeep::None, 2);
}

/// Threads sharing one log slot (`set_thread_log_slot`), as the server's workers do
/// under `--durability sync`: buffered writes, acknowledged after `sync_thread`, whose
/// fences run without the slot's lock and cover the other thread's records too.
#[test]
fn recovers_at_every_fence_with_a_shared_log_slot() {
    run_shared(Upkeep::Stages, false);
}

#[test]
fn recovers_at_every_fence_and_journal_write_journal() {
    run_full(Upkeep::Stages, 1, false, true);
}

#[test]
fn recovers_at_every_journal_write_with_writes_batched_journal() {
    run_full(Upkeep::None, 2, false, true);
}

#[test]
fn recovers_at_every_journal_write_with_a_shared_log_slot_journal() {
    run_shared(Upkeep::Stages, true);
}

fn run(upkeep: Upkeep) {
    run_with(upkeep, 1);
}

fn run_with(upkeep: Upkeep, group: usize) {
    run_full(upkeep, group, false, false);
}

fn run_shared(upkeep: Upkeep, journal: bool) {
    run_full(upkeep, 1, true, journal);
}

#[expect(clippy::too_many_lines, reason = "one workload, one oracle, one check")]
fn run_full(upkeep: Upkeep, group: usize, shared: bool, journal: bool) {
    let stages = upkeep != Upkeep::None;
    let dev = Arc::new(SimDevice::new(4 << 20));
    let oracle = Arc::new(Mutex::new(Oracle::default()));
    let checked = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let check_dir = std::env::temp_dir().join(format!(
        "ckv-simcrash-check-{}-{upkeep:?}-{group}-{shared}-{journal}",
        std::process::id()
    ));
    {
        let (oracle, checked, failures, check_dir) = (
            oracle.clone(),
            checked.clone(),
            failures.clone(),
            check_dir.clone(),
        );
        let serial = Mutex::new(());
        dev.set_fence_hook(Some(Box::new(move |d: &SimDevice, n: u64| {
            // Two writers may fence at once. With a shared slot their fences must be
            // free to end in any order (each check gets its own directory); otherwise
            // checks share one directory, one at a time.
            let _one_at_a_time = (!shared).then(|| serial.lock());
            let check_dir = if shared {
                check_dir.join(n.to_string())
            } else {
                check_dir.clone()
            };
            // Acknowledgements recorded before the image is taken were fenced earlier;
            // versions issued are read after it, so the image holds nothing newer.
            let acked = oracle.lock().acked.clone();
            let modes = [
                CrashMode::DropAll,
                CrashMode::KeepAll,
                CrashMode::Random(n),
                CrashMode::Random(n ^ 0xABCD),
            ];
            for mode in modes {
                let img = d.crash_images(mode);
                let issued = oracle.lock().issued.clone();
                if let Err(e) = verify(img, journal, &check_dir, &acked, &issued) {
                    failures.lock().push(format!("fence {n} {mode:?}: {e}"));
                }
                checked.fetch_add(1, Ordering::Relaxed);
            }
            if shared {
                let _ = std::fs::remove_dir_all(&check_dir);
            }
        })));
    }
    let dir = std::env::temp_dir().join(format!(
        "ckv-simcrash-{}-{upkeep:?}-{group}-{shared}-{journal}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let writer_opts = Options {
        sync_group_size: group,
        ..opts(dev.clone(), journal)
    };
    let db = Arc::new(Db::open(&dir, writer_opts).expect("open"));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, oracle) = (db.clone(), oracle.clone());
            std::thread::spawn(move || {
                if shared {
                    cascadekv::set_thread_log_slot(0);
                }
                let durability = if shared {
                    Durability::Buffered
                } else {
                    Durability::Sync
                };
                for i in 0..120u64 {
                    // Cleaning runs flush twice as often: more garbage, more cleanings.
                    let every = if upkeep == Upkeep::Cleaning { 10 } else { 20 };
                    if stages && t == 0 && i % every == every - 1 {
                        db.flush_faststore().expect("flush");
                        if i % 40 == 39 {
                            db.compact().expect("compact");
                        }
                        // `Db::compact` with no buffer-tree waiting runs a cleaning.
                        if upkeep == Upkeep::Cleaning {
                            while db.compact().expect("cleaning") {}
                        }
                    }
                    let k = key(t, (i * 5) % KEYS_PER_THREAD);
                    let k2 = key(t, (i * 5 + 1) % KEYS_PER_THREAD);
                    let (v, v2) = {
                        let mut o = oracle.lock();
                        let v = o.issued.get(&k).copied().unwrap_or(0) + 1;
                        o.issued.insert(k.clone(), v);
                        let v2 = o.issued.get(&k2).copied().unwrap_or(0) + 1;
                        o.issued.insert(k2.clone(), v2);
                        (v, v2)
                    };
                    let res = match i % 7 {
                        3 => db
                            .delete_with(&k, durability)
                            .map(|_| vec![(k.clone(), v, true)]),
                        5 => {
                            let mut b = WriteBatch::new();
                            b.put(k.clone(), value(&k, v))
                                .put(k2.clone(), value(&k2, v2));
                            db.write_with(&b, durability)
                                .map(|_| vec![(k.clone(), v, false), (k2.clone(), v2, false)])
                        }
                        _ => db
                            .put_with(&k, &value(&k, v), durability)
                            .map(|_| vec![(k.clone(), v, false)]),
                    };
                    let done = res.expect("write");
                    if shared {
                        // Acknowledged only once the shared log is durable this far.
                        if let Err(e) = db.sync_thread() {
                            panic!("sync_thread: {e}");
                        }
                    }
                    let mut o = oracle.lock();
                    for (k, v, del) in done {
                        let e = o.acked.entry(k).or_insert((0, false));
                        if v > e.0 {
                            *e = (v, del);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread");
    }
    // Crashes land at every fence of the clean close too: its syncs, seals and the
    // FastStore checkpoint (written before the clean flag; an image with the
    // checkpoint but without the flag must replay).
    let stats_before_close = db.stats();
    db.close().expect("close");
    dev.set_fence_hook(None);
    let fences = dev.fence_count();
    // After the close: the clean image is opened from its checkpoint.
    let acked = oracle.lock().acked.clone();
    let issued = oracle.lock().issued.clone();
    match verify(
        dev.crash_images(CrashMode::DropAll),
        journal,
        &check_dir,
        &acked,
        &issued,
    ) {
        Ok(true) => {}
        Ok(false) => failures
            .lock()
            .push("after the clean close: the checkpoint was not used".into()),
        Err(e) => failures.lock().push(format!("after the clean close: {e}")),
    }
    let f = failures.lock().clone();
    assert!(
        f.is_empty(),
        "{} of {} crash images failed, first: {:?}",
        f.len(),
        checked.load(Ordering::Relaxed),
        f.first()
    );
    assert!(fences > 200, "workload too small: {fences} fences");
    if stages {
        let s = &stats_before_close;
        assert!(
            s.flushes >= 5 && s.compactions >= 2 && s.stable_tables > 0,
            "{s:?}"
        );
    }
    if journal {
        // The journal carried the log ranges, wrapped (checkpoints freed its slots),
        // and recoveries had blocks to redo.
        let s = &stats_before_close;
        assert!(s.log_durability.starts_with("journal"), "{s:?}");
        assert!(
            s.journal_blocks > 100 && s.journal_checkpoints >= 2,
            "{s:?}"
        );
        assert!(
            REDONE.load(Ordering::Relaxed) > 0,
            "no recovery redid a block"
        );
    }
    if upkeep == Upkeep::Cleaning {
        let s = &stats_before_close;
        assert!(
            s.vlog_cleanings >= 2 && s.vlog_released_segments > 0,
            "{s:?}"
        );
    }
    assert_eq!(checked.load(Ordering::Relaxed), fences * 4);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&check_dir);
}

fn verify(
    (img, journal_img): (Vec<u8>, Vec<u8>),
    journal: bool,
    dir: &std::path::Path,
    acked: &HashMap<Vec<u8>, (u64, bool)>,
    issued: &HashMap<Vec<u8>, u64>,
) -> Result<bool, String> {
    let dev = Arc::new(SimDevice::from_images(img, journal_img));
    let db = Db::open(dir, opts(dev, journal)).map_err(|e| format!("recovery failed: {e}"))?;
    REDONE.fetch_add(db.recovery_info().journal_blocks_redone, Ordering::Relaxed);
    let from_checkpoint = db.recovery_info().from_checkpoint;
    for t in 0..THREADS {
        for k in 0..KEYS_PER_THREAD {
            let key = key(t, k);
            let got = db.get(&key).map_err(|e| format!("get: {e}"))?;
            let (ack_v, ack_del) = acked.get(&key).copied().unwrap_or((0, false));
            let max_v = issued.get(&key).copied().unwrap_or(0);
            match got {
                Some(val) => {
                    let v = parse_version(&key, &val)
                        .ok_or_else(|| format!("{key:?}: torn or foreign value"))?;
                    if v < ack_v || v > max_v {
                        return Err(format!(
                            "{key:?}: version {v}, acked {ack_v}, issued {max_v}"
                        ));
                    }
                }
                None => {
                    // Absent is fine if nothing was acknowledged, the acknowledged
                    // state is a delete, or a later (unacknowledged) delete landed.
                    if ack_v > 0 && !ack_del && ack_v == max_v {
                        return Err(format!("{key:?}: acknowledged version {ack_v} lost"));
                    }
                }
            }
        }
    }
    Ok(from_checkpoint)
}
