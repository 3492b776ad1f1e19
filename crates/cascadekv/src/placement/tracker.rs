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
//! Keys are told apart by their 64-bit hash alone (`coding::hash64`): comparing the
//! stored key too cost one more cache miss per touch, and two keys sharing a hash
//! (about 2^-64 per pair) would only share a popularity estimate — placement, never
//! correctness.
//!
//! Invariants: a shard holds at most `per_shard` slots (more only just after a
//! resize, until misses evict the excess); `table` holds `(hash, index)` of every
//! slot, one entry per slot; `clocks[c]` is the number of slots
//! with clock `c` over all shards (exact once every shard lock is released).
//!
//! Thread-safety: any thread may call every method. Each shard is a `parking_lot`
//! mutex, held for one touch (a hash probe, and on a miss at a full shard one clock
//! sweep, amortized O(1)) or one look-up; the counters are relaxed atomics read by the
//! mapper without the locks (a snapshot that may be a few updates old).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::coding::hash64;

/// Shards: a touch locks one, chosen by the key hash's top bits.
const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
/// The clock value a re-accessed key gets (2-bit clock).
pub(crate) const MAX_CLOCK: u8 = 3;
/// Bit of a slot's `meta` byte: the last access was served by the slow tier.
const SLOW: u8 = 4;

/// One shard. Slot `i` is `keys[i]`, `hashes[i]`, `meta[i]` (clock in bits 0–1,
/// [`SLOW`]); `table` holds `(hash, i)` for every slot, so a touch of a tracked key
/// reads one table entry and one byte of the dense `meta` array (perf: two cache
/// misses per touch, the table's and a 40-byte slot's, were 8 % of YCSB C).
#[derive(Debug, Default)]
struct Shard {
    table: HashTable<(u64, u32)>,
    keys: Vec<Box<[u8]>>,
    hashes: Vec<u64>,
    meta: Vec<u8>,
    /// The clock hand: next slot the sweep looks at.
    hand: usize,
}

impl Shard {
    fn find(&self, hash: u64) -> Option<usize> {
        self.table.find(hash, |e| e.0 == hash).map(|e| e.1 as usize)
    }
}

/// A bounded clock tracker (see the module docs).
#[derive(Debug)]
pub(crate) struct Tracker {
    shards: Box<[Mutex<Shard>]>,
    /// Slots per shard; changed by [`Tracker::resize`] (a shard over it shrinks by
    /// one eviction per touch that misses).
    per_shard: AtomicUsize,
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
        Tracker {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            per_shard: AtomicUsize::new(capacity.div_ceil(SHARDS).max(1)),
            clocks: Default::default(),
            in_slow: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// Most keys tracked at once.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.per_shard.load(Ordering::Relaxed) * SHARDS
    }

    /// Sets the capacity to about `capacity` keys. Clock values only tell hot from
    /// lukewarm keys while the tracker is smaller than the set of keys in use (misses
    /// drive the sweep that lowers them), so placement sizes it from the pinning
    /// target (`Placement::pinning`).
    pub(crate) fn resize(&self, capacity: usize) {
        self.per_shard
            .store(capacity.div_ceil(SHARDS).max(1), Ordering::Relaxed);
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        let i = usize::try_from(hash >> (64 - SHARD_BITS)).unwrap_or(0);
        &self.shards[i % SHARDS]
    }

    /// Moves one key from clock `from` to clock `to` in the distribution.
    fn move_clock(&self, from: Option<u8>, to: Option<u8>) {
        if from == to {
            return;
        }
        if let Some(c) = from {
            self.clocks[usize::from(c & MAX_CLOCK)].fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(c) = to {
            self.clocks[usize::from(c & MAX_CLOCK)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sets slot `i`'s meta byte, keeping the counters in step.
    fn set_meta(&self, s: &mut Shard, i: usize, new: u8) {
        let Some(m) = s.meta.get_mut(i) else { return };
        let old = *m;
        *m = new;
        self.move_clock(Some(old & MAX_CLOCK), Some(new & MAX_CLOCK));
        match (old & SLOW != 0, new & SLOW != 0) {
            (false, true) => {
                self.in_slow.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                self.in_slow.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Records an access to `key`, served by the slow tier if `slow`. Returns the
    /// key's clock before this access (`None`: it was not tracked).
    pub(crate) fn touch(&self, key: &[u8], slow: bool) -> Option<u8> {
        let hash = hash64(key);
        let mut guard = self.shard(hash).lock();
        let s = &mut *guard;
        let flag = if slow { SLOW } else { 0 };
        if let Some(i) = s.find(hash) {
            let before = s.meta.get(i).map_or(0, |m| m & MAX_CLOCK);
            self.set_meta(s, i, MAX_CLOCK | flag);
            return Some(before);
        }
        let per_shard = self.per_shard.load(Ordering::Relaxed);
        // Over capacity after a resize: one more eviction, so the shard shrinks.
        if s.keys.len() > per_shard {
            let i = self.sweep(s);
            self.remove(s, i);
        }
        let i = if s.keys.len() < per_shard {
            s.keys.push(key.into());
            s.hashes.push(hash);
            s.meta.push(0);
            self.move_clock(None, Some(0));
            s.keys.len() - 1
        } else {
            let i = self.sweep(s);
            let old = s.hashes[i];
            let ix = u32::try_from(i).unwrap_or(u32::MAX);
            if let Ok(e) = s.table.find_entry(old, |e| e.1 == ix) {
                e.remove();
            }
            self.set_meta(s, i, 0);
            s.keys[i] = key.into();
            s.hashes[i] = hash;
            self.evictions.fetch_add(1, Ordering::Relaxed);
            i
        };
        let ix = u32::try_from(i).unwrap_or(u32::MAX);
        s.table.insert_unique(hash, (hash, ix), |e| e.0);
        self.set_meta(s, i, flag);
        None
    }

    /// Evicts slot `i` and moves the last slot into its place.
    fn remove(&self, s: &mut Shard, i: usize) {
        let last = s.keys.len() - 1;
        let ix = u32::try_from(i).unwrap_or(u32::MAX);
        let lx = u32::try_from(last).unwrap_or(u32::MAX);
        if let Ok(e) = s.table.find_entry(s.hashes[i], |e| e.1 == ix) {
            e.remove();
        }
        if i != last {
            if let Some(e) = s.table.find_mut(s.hashes[last], |e| e.1 == lx) {
                e.1 = ix;
            }
        }
        self.set_meta(s, i, 0);
        self.move_clock(Some(0), None);
        s.keys.swap_remove(i);
        s.hashes.swap_remove(i);
        s.meta.swap_remove(i);
        self.evictions.fetch_add(1, Ordering::Relaxed);
        if s.hand >= s.keys.len() {
            s.hand = 0;
        }
    }

    /// Advances the clock hand of a full shard to a slot with clock 0 (decrementing
    /// every other slot it passes) and returns it. Ends within four turns: each turn
    /// lowers every clock by one.
    fn sweep(&self, s: &mut Shard) -> usize {
        let n = s.meta.len();
        loop {
            let i = s.hand % n;
            s.hand = (i + 1) % n;
            let m = s.meta[i];
            if m & MAX_CLOCK == 0 {
                return i;
            }
            self.set_meta(s, i, m - 1);
        }
    }

    /// The clock value of `key` and whether its last access was slow; `None` if the
    /// key is not tracked.
    pub(crate) fn get(&self, key: &[u8]) -> Option<(u8, bool)> {
        let hash = hash64(key);
        let s = self.shard(hash).lock();
        let m = *s.meta.get(s.find(hash)?)?;
        Some((m & MAX_CLOCK, m & SLOW != 0))
    }

    /// Records a write of `key` if it is tracked (clock to 3, location fast); an
    /// untracked key is not added. Returns whether it was tracked.
    pub(crate) fn refresh(&self, key: &[u8]) -> bool {
        let hash = hash64(key);
        let mut guard = self.shard(hash).lock();
        let s = &mut *guard;
        let Some(i) = s.find(hash) else {
            return false;
        };
        self.set_meta(s, i, MAX_CLOCK);
        true
    }

    /// Marks `key` (if tracked) as now held by the fast tier (it was promoted, or a
    /// fast stage holds a newer version).
    pub(crate) fn mark_fast(&self, key: &[u8]) {
        let hash = hash64(key);
        let mut guard = self.shard(hash).lock();
        let s = &mut *guard;
        if let Some(i) = s.find(hash) {
            let m = s.meta.get(i).map_or(0, |m| m & MAX_CLOCK);
            self.set_meta(s, i, m);
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
            for (k, m) in s.keys.iter().zip(&s.meta) {
                if out.len() >= limit {
                    return out;
                }
                if m & SLOW != 0 && hot(m & MAX_CLOCK, k) {
                    out.push(k.clone());
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

    /// Estimated DRAM bytes: keys, hashes, meta bytes and table entries.
    pub(crate) fn dram_bytes(&self) -> u64 {
        let mut b = 0u64;
        for shard in &*self.shards {
            let s = shard.lock();
            b += (s.keys.capacity() * (16 + 8 + 1 + 17)) as u64;
            b += s.keys.iter().map(|k| k.len() as u64).sum::<u64>();
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

    /// A smaller capacity takes effect as misses evict; lookups stay exact.
    #[test]
    fn resize_shrinks_as_misses_come() {
        let t = Tracker::new(64 * 100);
        for i in 0..6400u32 {
            t.touch(&i.to_be_bytes(), i % 2 == 0);
        }
        assert!(t.len() > 5000 && t.len() <= 6400, "{}", t.len());
        t.resize(64 * 10);
        for i in 10_000..30_000u32 {
            t.touch(&i.to_be_bytes(), false);
        }
        assert!(t.len() <= 640, "{}", t.len());
        let mut n = 0;
        let mut slow = 0;
        for i in (0..6400u32).chain(10_000..30_000) {
            if let Some((_, s)) = t.get(&i.to_be_bytes()) {
                n += 1;
                slow += u64::from(s);
            }
        }
        assert_eq!(n, t.len());
        assert_eq!(slow, t.in_slow());
        assert_eq!(t.distribution().iter().sum::<u64>(), t.len());
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
