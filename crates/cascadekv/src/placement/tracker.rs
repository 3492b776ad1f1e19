//! The popularity tracker (PrismDB §4.3, §6 "Tracker and mapper"): a bounded map from
//! key to a 2-bit clock value and a location bit, updated on every get that finds a
//! key and every put, with clock eviction.
//!
//! * A key enters with clock 0; any later access sets it to 3 (PrismDB §6: one access
//!   says little, a second says the key is in use).
//! * When its shard is full, the clock hand sweeps the shard: a slot with clock > 0 is
//!   decremented, the first with clock 0 is evicted and reused. A key untouched for
//!   three sweeps is gone.
//! * The location bit says which tier served the key's last access: `slow` for a get
//!   answered by the slow tier, `fast` for every other get and every put (puts land in
//!   the FastStore). Promotion looks for hot keys whose bit says `slow`.
//! * The mapper's input — how many tracked keys hold each clock value — is kept in
//!   four atomics beside the shards, updated under the shard lock with every change.
//!
//! Invariants: a shard holds at most `per_shard` slots; `table` maps the hash of each
//! slot's key to its index, one entry per slot; `clocks[c]` is the number of slots
//! with clock `c` over all shards (exact once every shard lock is released).
//!
//! Thread-safety: any thread may call every method. Each shard is a `parking_lot`
//! mutex, held for one touch (a hash probe, and on a miss at a full shard one clock
//! sweep, amortized O(1)) or one look-up; the counters are relaxed atomics read by the
//! mapper without the locks (a snapshot that may be a few updates old).

use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::coding::hash64;

/// Shards: a touch locks one, chosen by the key hash's top bits.
const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
/// The clock value a re-accessed key gets (2-bit clock).
pub(crate) const MAX_CLOCK: u8 = 3;

#[derive(Debug)]
struct Slot {
    key: Box<[u8]>,
    hash: u64,
    clock: u8,
    slow: bool,
}

#[derive(Debug, Default)]
struct Shard {
    /// Slot indexes by key hash.
    table: HashTable<u32>,
    slots: Vec<Slot>,
    /// The clock hand: next slot the sweep looks at.
    hand: usize,
}

/// A bounded clock tracker (see the module docs).
#[derive(Debug)]
pub(crate) struct Tracker {
    shards: Box<[Mutex<Shard>]>,
    per_shard: usize,
    /// Tracked keys by clock value (the mapper's distribution).
    clocks: [AtomicU64; 4],
    /// Tracked keys whose last access was served by the slow tier.
    in_slow: AtomicU64,
    /// Keys evicted so far.
    evictions: AtomicU64,
}

impl Tracker {
    /// A tracker of at most about `capacity` keys (at least one per shard).
    pub(crate) fn new(capacity: usize) -> Self {
        let per_shard = capacity.div_ceil(SHARDS).max(1);
        Tracker {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard,
            clocks: Default::default(),
            in_slow: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// Most keys tracked at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.per_shard * SHARDS
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        let i = usize::try_from(hash >> (64 - SHARD_BITS)).unwrap_or(0);
        &self.shards[i % SHARDS]
    }

    fn add_clock(&self, c: u8, n: i64) {
        let a = &self.clocks[usize::from(c.min(MAX_CLOCK))];
        if n >= 0 {
            a.fetch_add(n.unsigned_abs(), Ordering::Relaxed);
        } else {
            a.fetch_sub(n.unsigned_abs(), Ordering::Relaxed);
        }
    }

    fn set_slow(&self, slot: &mut Slot, slow: bool) {
        if slot.slow != slow {
            if slow {
                self.in_slow.fetch_add(1, Ordering::Relaxed);
            } else {
                self.in_slow.fetch_sub(1, Ordering::Relaxed);
            }
            slot.slow = slow;
        }
    }

    /// Records an access to `key`, served by the slow tier if `slow`. Returns the
    /// key's clock before this access (`None`: it was not tracked).
    pub(crate) fn touch(&self, key: &[u8], slow: bool) -> Option<u8> {
        let hash = hash64(key);
        let mut guard = self.shard(hash).lock();
        let s = &mut *guard;
        let found = s
            .table
            .find(hash, |&i| {
                s.slots
                    .get(i as usize)
                    .is_some_and(|x| x.hash == hash && *x.key == *key)
            })
            .copied();
        if let Some(slot) = found.and_then(|i| s.slots.get_mut(i as usize)) {
            let before = slot.clock;
            if before != MAX_CLOCK {
                self.add_clock(before, -1);
                self.add_clock(MAX_CLOCK, 1);
                slot.clock = MAX_CLOCK;
            }
            self.set_slow(slot, slow);
            return Some(before);
        }
        let slot = Slot {
            key: key.into(),
            hash,
            clock: 0,
            slow: false,
        };
        let i = if s.slots.len() < self.per_shard {
            s.slots.push(slot);
            s.slots.len() - 1
        } else {
            let i = self.sweep(s);
            let old = std::mem::replace(&mut s.slots[i], slot);
            let ix = u32::try_from(i).unwrap_or(u32::MAX);
            if let Ok(e) = s.table.find_entry(old.hash, |&j| j == ix) {
                e.remove();
            }
            self.add_clock(old.clock, -1);
            if old.slow {
                self.in_slow.fetch_sub(1, Ordering::Relaxed);
            }
            self.evictions.fetch_add(1, Ordering::Relaxed);
            i
        };
        self.add_clock(0, 1);
        let ix = u32::try_from(i).unwrap_or(u32::MAX);
        let Shard { table, slots, .. } = s;
        table.insert_unique(hash, ix, |&j| slots.get(j as usize).map_or(0, |x| x.hash));
        if let Some(slot) = slots.get_mut(i) {
            self.set_slow(slot, slow);
        }
        None
    }

    /// Advances the clock hand of a full shard to a slot with clock 0 (decrementing
    /// every other slot it passes) and returns it. Ends within four turns: each turn
    /// lowers every clock by one.
    fn sweep(&self, s: &mut Shard) -> usize {
        let n = s.slots.len();
        loop {
            let i = s.hand % n;
            s.hand = (i + 1) % n;
            let slot = &mut s.slots[i];
            if slot.clock == 0 {
                return i;
            }
            self.add_clock(slot.clock, -1);
            slot.clock -= 1;
            self.add_clock(slot.clock, 1);
        }
    }

    /// The clock value of `key` and whether its last access was slow; `None` if the
    /// key is not tracked.
    pub(crate) fn get(&self, key: &[u8]) -> Option<(u8, bool)> {
        let hash = hash64(key);
        let s = self.shard(hash).lock();
        let i = *s.table.find(hash, |&i| {
            s.slots
                .get(i as usize)
                .is_some_and(|x| x.hash == hash && *x.key == *key)
        })?;
        s.slots.get(i as usize).map(|x| (x.clock, x.slow))
    }

    /// Marks `key` (if tracked) as now held by the fast tier (it was promoted, or a
    /// fast stage holds a newer version).
    pub(crate) fn mark_fast(&self, key: &[u8]) {
        let hash = hash64(key);
        let mut guard = self.shard(hash).lock();
        let s = &mut *guard;
        let found = s
            .table
            .find(hash, |&i| {
                s.slots
                    .get(i as usize)
                    .is_some_and(|x| x.hash == hash && *x.key == *key)
            })
            .copied();
        if let Some(slot) = found.and_then(|i| s.slots.get_mut(i as usize)) {
            self.set_slow(slot, false);
        }
    }

    /// Up to `limit` tracked keys last served by the slow tier for which `hot(clock,
    /// key)` holds, one shard at a time (each lock held for one pass over its slots).
    pub(crate) fn hot_in_slow(
        &self,
        limit: usize,
        mut hot: impl FnMut(u8, &[u8]) -> bool,
    ) -> Vec<Box<[u8]>> {
        let mut out = Vec::new();
        if self.in_slow.load(Ordering::Relaxed) == 0 {
            return out;
        }
        for shard in &*self.shards {
            let s = shard.lock();
            for x in &s.slots {
                if out.len() >= limit {
                    return out;
                }
                if x.slow && hot(x.clock, &x.key) {
                    out.push(x.key.clone());
                }
            }
        }
        out
    }

    /// Tracked keys by clock value 0–3.
    pub(crate) fn distribution(&self) -> [u64; 4] {
        std::array::from_fn(|c| self.clocks[c].load(Ordering::Relaxed))
    }

    /// Keys tracked now.
    pub(crate) fn len(&self) -> u64 {
        self.distribution().iter().sum()
    }

    /// Tracked keys whose last access the slow tier served.
    pub(crate) fn in_slow(&self) -> u64 {
        self.in_slow.load(Ordering::Relaxed)
    }

    /// Keys evicted since open.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Estimated DRAM bytes: each slot, its key, and its table entry.
    pub(crate) fn dram_bytes(&self) -> u64 {
        let mut b = 0u64;
        for shard in &*self.shards {
            let s = shard.lock();
            b += (s.slots.capacity() * (std::mem::size_of::<Slot>() + 8)) as u64;
            b += s.slots.iter().map(|x| x.key.len() as u64).sum::<u64>();
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key enters at 0, a second access raises it to 3, the distribution follows,
    /// and the location bit is that of the last access.
    #[test]
    fn clock_values_and_location() {
        let t = Tracker::new(1024);
        t.touch(b"a", false);
        assert_eq!(t.get(b"a"), Some((0, false)));
        t.touch(b"a", true);
        assert_eq!(t.get(b"a"), Some((3, true)));
        assert_eq!(t.in_slow(), 1);
        t.touch(b"b", false);
        assert_eq!(t.distribution(), [1, 0, 0, 1]);
        assert_eq!(t.hot_in_slow(10, |c, _| c == 3), vec![Box::from(&b"a"[..])]);
        t.mark_fast(b"a");
        assert_eq!(t.get(b"a"), Some((3, false)));
        assert_eq!(t.in_slow(), 0);
        assert_eq!(t.get(b"zz"), None);
    }

    /// The tracker stays within its capacity; keys accessed again and again survive
    /// a stream of one-off keys, which are evicted.
    #[test]
    fn clock_eviction_keeps_hot_keys() {
        let t = Tracker::new(64 * 8);
        let hot: Vec<Vec<u8>> = (0..64u32).map(|i| format!("hot{i}").into_bytes()).collect();
        for round in 0..200u32 {
            for h in &hot {
                t.touch(h, false);
            }
            for j in 0..20u32 {
                t.touch(format!("cold{round}-{j}").as_bytes(), true);
            }
        }
        assert!(t.len() <= t.capacity() as u64);
        let kept = hot.iter().filter(|h| t.get(h).is_some()).count();
        assert!(kept >= 60, "{kept} of 64 hot keys tracked");
        assert!(t.evictions() > 3000);
        let d = t.distribution();
        assert_eq!(d.iter().sum::<u64>(), t.len());
        assert!(t.in_slow() <= t.len());
    }

    /// Concurrent touches keep the counters consistent with the slots.
    #[test]
    fn concurrent_touches_keep_counts_exact() {
        let t = std::sync::Arc::new(Tracker::new(2048));
        let hs: Vec<_> = (0..4u64)
            .map(|s| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        let k = (i * 7 + s) % 5000;
                        t.touch(&k.to_be_bytes(), i % 3 == 0);
                    }
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().is_ok());
        }
        let mut n = 0;
        let mut slow = 0;
        for k in 0..5000u64 {
            if let Some((_, s)) = t.get(&k.to_be_bytes()) {
                n += 1;
                slow += u64::from(s);
            }
        }
        assert_eq!(n, t.len());
        assert_eq!(slow, t.in_slow());
        assert!(n <= t.capacity() as u64);
    }
}
