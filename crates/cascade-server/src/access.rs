//! Last-access times of keys: what `OBJECT IDLETIME` answers (Redis keeps a 24-bit LRU
//! clock in each object; the engine's records have no room for one, and a read must
//! not write the engine).
//!
//! A key is recorded by the hash of its database and name, with the second (since the
//! clock started) of its last access. Memory is bounded: each of [`SHARDS`] shards
//! holds two generations of at most [`GEN_CAP`] entries; when the current one fills it
//! becomes the previous one and the oldest generation is dropped.
//!
//! Invariants:
//! - A key found in a generation was last accessed at the recorded second (or later
//!   only if another key with the same 64-bit hash was).
//! - A key in neither generation was not accessed since the previous generation
//!   started, so `now - prev_start` is a lower bound of its idle time, and exact for a
//!   key untouched since the server started (Redis likewise counts from the load).
//! - As in Redis (`LOOKUP_NOTOUCH`), TYPE, TTL, PTTL, EXPIRETIME, PEXPIRETIME, EXISTS and
//!   OBJECT do not touch a key; every other command that names a key does, once it
//!   ran without error; RESTORE ... IDLETIME sets the time it gives.
//!
//! Locking: each shard's [`Gens`] is guarded by its own mutex; no other lock is taken
//! while one is held.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use crate::cmd::{is, Spec};
use crate::resp::parse::Command;

/// Shards (a power of two): commands on different keys rarely share a lock.
const SHARDS: usize = 64;
/// Entries per generation and shard: 2 × 64 × 4096 keys are tracked exactly (about
/// 16 B each, ~8 MiB in all).
const GEN_CAP: usize = 4096;

/// The clock reads this at start, so that an access `ago` seconds before the start
/// (RESTORE ... IDLETIME) is still representable (~34 years of headroom each way).
const EPOCH: u32 = 1 << 30;

/// Commands that read a key without touching it.
const NO_TOUCH: &[&str] = &[
    "type",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "exists",
    "object",
];

#[derive(Default)]
struct Gens {
    cur: HashMap<u64, u32>,
    prev: HashMap<u64, u32>,
    /// When `prev` started (seconds on the clock).
    prev_start: u32,
    /// When `cur` started.
    cur_start: u32,
}

/// The server's access clock (one per [`crate::store::Store`]).
pub(crate) struct AccessClock {
    start: Instant,
    shards: Box<[Mutex<Gens>]>,
}

impl std::fmt::Debug for AccessClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessClock").finish_non_exhaustive()
    }
}

impl Default for AccessClock {
    fn default() -> Self {
        let gens = || {
            Mutex::new(Gens {
                prev_start: EPOCH,
                cur_start: EPOCH,
                ..Gens::default()
            })
        };
        AccessClock {
            start: Instant::now(),
            shards: (0..SHARDS).map(|_| gens()).collect(),
        }
    }
}

fn id(db: usize, key: &[u8]) -> u64 {
    crate::hash::hash64(key) ^ crate::hash::mix(db as u64 + 1)
}

impl AccessClock {
    fn now(&self) -> u32 {
        let secs = u32::try_from(self.start.elapsed().as_secs()).unwrap_or(u32::MAX);
        EPOCH.saturating_add(secs)
    }

    fn shard(&self, h: u64) -> &Mutex<Gens> {
        // The low bits pick the shard; the map hashes the whole word again.
        #[expect(clippy::cast_possible_truncation, reason = "masked to SHARDS")]
        let i = (h as usize) & (SHARDS - 1);
        &self.shards[i]
    }

    /// Records an access to `key` of database `db`, `ago` seconds in the past.
    pub(crate) fn touch(&self, db: usize, key: &[u8], ago: u32) {
        let h = id(db, key);
        let now = self.now();
        let t = now.saturating_sub(ago);
        let mut g = self.shard(h).lock();
        if g.cur.len() >= GEN_CAP && !g.cur.contains_key(&h) {
            let cur = std::mem::take(&mut g.cur);
            g.prev = cur;
            g.prev_start = g.cur_start;
            g.cur_start = now;
        }
        g.cur.insert(h, t);
    }

    /// Seconds since `key` of database `db` was last accessed (see the invariants).
    pub(crate) fn idle(&self, db: usize, key: &[u8]) -> u64 {
        let h = id(db, key);
        let now = self.now();
        let g = self.shard(h).lock();
        let t = g
            .cur
            .get(&h)
            .or_else(|| g.prev.get(&h))
            .copied()
            .unwrap_or(g.prev_start);
        u64::from(now.saturating_sub(t))
    }

    /// After `cmd` (spec `spec`) ran without error on database `db`: touches its keys.
    pub(crate) fn after(&self, db: usize, spec: &Spec, cmd: &Command) {
        if NO_TOUCH.contains(&spec.name) {
            return;
        }
        if spec.name == "restore" {
            // RESTORE key ttl payload [... IDLETIME seconds ...]
            let ago = (4..cmd.len().saturating_sub(1))
                .find(|&i| is(cmd.arg(i), "idletime"))
                .and_then(|i| crate::cmd::parse_i64(cmd.arg(i + 1)))
                .map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX));
            self.touch(db, cmd.arg(1), ago);
            return;
        }
        for k in spec.keys.of(cmd) {
            self.touch(db, k, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_bound_memory_and_keep_a_lower_bound() {
        let c = AccessClock::default();
        c.touch(0, b"a", 100);
        assert_eq!(c.idle(0, b"a"), 100);
        assert_eq!(c.idle(1, b"a"), 0, "another database's key is another key");
        c.touch(0, b"old", 5_000_000);
        assert_eq!(
            c.idle(0, b"old"),
            5_000_000,
            "RESTORE IDLETIME before the start"
        );
        // Fill every shard several times over: memory stays bounded, and `a`, dropped
        // with its generation, reports the time since the older kept generation
        // began (a lower bound within this test's run), not its recorded 100 s.
        let t = Instant::now();
        for i in 0..(SHARDS * GEN_CAP * 3) {
            c.touch(0, format!("k{i}").as_bytes(), 0);
        }
        for s in &c.shards {
            let g = s.lock();
            assert!(g.cur.len() <= GEN_CAP && g.prev.len() <= GEN_CAP);
        }
        let idle = c.idle(0, b"a");
        assert!(idle <= t.elapsed().as_secs() + 1, "{idle}");
        c.touch(0, b"b", 7);
        assert_eq!(c.idle(0, b"b"), 7);
    }
}
