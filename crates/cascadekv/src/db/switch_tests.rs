//! What a writer does when the active FastStore is full but another transition holds
//! the stage lock (`Engine::switch`, `Db::write_ops`).
//!
//! Invariant under test: the active FastStore never grows past twice its capacity
//! (plus the bytes each log slot keeps unpublished): past that, the writer waits for
//! the lock instead of writing on. One loaded CI run (session 18) put ~10× the
//! capacity into one FastStore while its background thread held the lock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Db, Options};
use crate::error::{Error, Result};

const CAPACITY: u64 = 64 << 10;
const PUTS: u32 = 5000;

#[test]
fn a_writer_waits_for_a_held_stage_lock_once_the_faststore_is_twice_full() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("cascade-switch-wait-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        pool_size: 64 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: CAPACITY,
        background: false,
        ..Options::default()
    };
    let db = Arc::new(Db::open(&dir, opts)?);
    let done = Arc::new(AtomicU32::new(0));
    let held = db.engine.stages.hold_lock();
    let writer = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 0..PUTS {
                db.put(&i.to_be_bytes(), &i.to_le_bytes())?;
                done.store(i + 1, Ordering::Release);
            }
            Ok::<(), Error>(())
        })
    };
    // Wait until the writer stops making progress (it is blocked on the lock) or
    // has finished (it never waited: the defect).
    let mut last = u32::MAX;
    let mut still_since = Instant::now();
    loop {
        let now = done.load(Ordering::Acquire);
        if now == PUTS {
            break;
        }
        if now != last {
            (last, still_since) = (now, Instant::now());
        } else if still_since.elapsed() > Duration::from_millis(300) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let written = done.load(Ordering::Acquire);
    let active = db.engine.stages.load().active.dram_bytes();
    let slack = super::engine::publish_bytes(CAPACITY) * db.engine.opts.log_slots as u64;
    drop(held);
    writer
        .join()
        .map_err(|_| Error::Internal("writer thread panicked".into()))??;
    assert!(
        written < PUTS,
        "the writer finished all {PUTS} puts while the stage lock was held"
    );
    assert!(
        active <= 2 * CAPACITY + slack,
        "active FastStore held {active} bytes (capacity {CAPACITY})"
    );
    // Once the lock is free the writer switches and goes on; nothing is lost.
    assert!(db.stats().faststore_switches >= 3, "{:?}", db.stats());
    for i in 0..PUTS {
        assert_eq!(db.get(&i.to_be_bytes())?, Some(i.to_le_bytes().to_vec()));
    }
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))
}
