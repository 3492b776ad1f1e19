//! Popularity-aware placement across the two tiers (issue #15; PrismDB §4–6,
//! Appendix B): which data stays in the fast tier follows what is read and written,
//! not only age.
//!
//! * [`tracker`]: a bounded clock tracker of key popularity and last location (§4.3).
//! * [`mapper`]: the pinning threshold over the clock distribution (§4.3).
//! * [`msc`]: which key ranges a demotion takes — approx-MSC with power-of-k choices
//!   (§5.2–5.3), or the random / oldest-first / key-order baselines.
//! * [`epochs`]: read-triggered promotion epochs with monitoring and cool-down (§5.3).
//!
//! How it acts on data (`db/slow.rs`, `db/promote.rs`): a demotion keeps the entries
//! the mapper pins in StableStore (rewritten into new pool tables beside the slow-tier
//! run, in one manifest edit) and moves the rest down; a promotion copies hot keys last
//! served by the slow tier back into StableStore through an ordinary compaction. The
//! fast budget still bounds StableStore: the pinning target is a share
//! (`Options::pin_fraction`) of it, and a demotion that would free nothing demotes
//! its least-pinned range whole.
//!
//! Off by default (`Options::pin_fraction` 0 with key-order demotion: no tracker at
//! all): it measured slower than key order on this host (docs/benchmarks.md, session 5).
//!
//! Correctness does not depend on any of this: every placement decision only chooses
//! *which* correct move happens (see `docs/design.md` §13).
//!
//! Thread-safety: [`Placement`] is shared by every reader and writer (they call
//! [`Placement::note_get`] / [`Placement::note_put`]: one tracker shard lock and a
//! few relaxed atomics) and the slow-tier thread (which polls the read trigger under
//! its mutex and computes pinning rules).

pub(crate) mod epochs;
pub(crate) mod mapper;
pub(crate) mod msc;
pub(crate) mod tracker;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;

use crate::db::DemotionPolicy;
use epochs::{Mark, ReadTrigger};
use mapper::Pinning;
use tracker::Tracker;

/// Placement counters (relaxed atomics, monotonic since open).
#[derive(Debug, Default)]
pub(crate) struct PlaceCounters {
    /// Client operations seen (gets that found a key, and puts).
    pub ops: AtomicU64,
    /// Gets answered by the fast tier (any pool stage) and by the slow tier.
    pub fast_gets: AtomicU64,
    pub slow_gets: AtomicU64,
    /// Gets of keys the current pinning rule pins (the pinned set's share of gets).
    pub pinned_gets: AtomicU64,
    /// Entries and bytes demotions kept in the fast tier (pinned), and those they
    /// moved down; demotions forced to ignore pinning.
    pub kept_entries: AtomicU64,
    pub kept_bytes: AtomicU64,
    pub demoted_entries: AtomicU64,
    pub forced_demotions: AtomicU64,
    /// Promotion jobs, keys promoted and their value bytes.
    pub promotion_jobs: AtomicU64,
    pub promotions: AtomicU64,
    pub promoted_bytes: AtomicU64,
}

/// Share of the tracked keys the pinning target is (PrismDB §7: a pinning threshold
/// of 70 % of the tracker).
pub(crate) const PIN_SHARE_OF_TRACKER: f64 = 0.7;

/// Tracker size for a pinning target of `target` keys: the target over
/// [`PIN_SHARE_OF_TRACKER`], 1 Ki–4 Mi keys.
pub(crate) fn tracker_keys(target: u64) -> usize {
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a size estimate, clamped"
    )]
    let n = (target as f64 / PIN_SHARE_OF_TRACKER) as u64;
    usize::try_from(n.clamp(1 << 10, 4 << 20)).unwrap_or(4 << 20)
}

/// The current pinning rule, readable without a lock (for `pinned_gets`).
#[derive(Debug, Default)]
struct Rule {
    level: AtomicU8,
    prob: AtomicU64,
    seed: AtomicU64,
}

/// Placement state of an open store with a slow tier.
#[derive(Debug)]
pub(crate) struct Placement {
    pub tracker: Tracker,
    pub policy: DemotionPolicy,
    /// Share of the fast budget the pinned set may take (0: no pinning, no promotion).
    pub pin_fraction: f64,
    pub epoch_ops: u64,
    pub cooldown_ops: u64,
    /// The tracker follows the pinning target (`Options::tracker_keys` 0).
    pub auto_size: bool,
    pub counters: PlaceCounters,
    /// Read-trigger state; polled by the slow-tier thread.
    pub trigger: Mutex<ReadTrigger>,
    /// Candidate choice; taken by the demotion job.
    pub rng: Mutex<msc::Rng>,
    /// Mixed into the mapper's random draws (fixed).
    seed: u64,
    /// The last demotion kept every entry it read: the next one ignores pinning
    /// (set and read by the demotion job under `slow_lock`).
    pub force_next: std::sync::atomic::AtomicBool,
    rule: Rule,
}

impl Placement {
    /// Placement for a store whose tracker holds `tracker_keys` keys (0: sized from
    /// the pinning target, starting at `initial_keys`).
    pub(crate) fn new(
        tracker_keys: usize,
        initial_keys: usize,
        policy: DemotionPolicy,
        pin_fraction: f64,
        epoch_ops: u64,
        cooldown_ops: u64,
        seed: u64,
    ) -> Self {
        let p = Placement {
            tracker: Tracker::new(if tracker_keys == 0 {
                initial_keys
            } else {
                tracker_keys
            }),
            auto_size: tracker_keys == 0,
            policy,
            pin_fraction,
            epoch_ops,
            cooldown_ops,
            counters: PlaceCounters::default(),
            trigger: Mutex::new(ReadTrigger::default()),
            rng: Mutex::new(msc::Rng(seed)),
            seed: msc::Rng(seed ^ 0xA5A5).next(),
            force_next: std::sync::atomic::AtomicBool::new(false),
            rule: Rule::default(),
        };
        p.set_rule(Pinning::NONE);
        p
    }

    /// Records a get that found `key` in the slow tier (`slow`) or the fast tier.
    pub(crate) fn note_get(&self, key: &[u8], slow: bool) {
        let c = &self.counters;
        c.ops.fetch_add(1, Ordering::Relaxed);
        if slow {
            c.slow_gets.fetch_add(1, Ordering::Relaxed);
        } else {
            c.fast_gets.fetch_add(1, Ordering::Relaxed);
        }
        let clock = self.tracker.touch(key, slow);
        if self.rule().pins(key, clock) {
            c.pinned_gets.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records a put (or delete) of `key`: it now lives in the fast tier. A write
    /// refreshes a tracked key but does not add an untracked one — unlike PrismDB,
    /// which tracks every write: a load inserting keys once would otherwise pay a
    /// tracker insertion and eviction per put (measured: load 0.30–0.34 against
    /// 0.41–0.45 Mops/s without placement). Keys enter on their first read; a
    /// key written often and never read keeps its newest version in the FastStore
    /// anyway.
    pub(crate) fn note_put(&self, key: &[u8]) {
        self.counters.ops.fetch_add(1, Ordering::Relaxed);
        self.tracker.refresh(key);
    }

    /// The pinning rule for a fast tier holding `entries` StableStore entries in
    /// `bytes` (tables and separated values) under a budget of `budget` bytes: the
    /// pinned set may take `pin_fraction` of the budget, in keys at the current
    /// average entry size. Also becomes the rule `pinned_gets` counts by.
    pub(crate) fn pinning(&self, budget: u64, bytes: u64, entries: u64) -> Pinning {
        if self.pin_fraction <= 0.0 || entries == 0 {
            self.set_rule(Pinning::NONE);
            return Pinning::NONE;
        }
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an estimate in keys, non-negative and far below 2^52"
        )]
        let target = {
            let per_entry = (bytes as f64 / entries as f64).max(1.0);
            (self.pin_fraction * budget as f64 / per_entry) as u64
        };
        if self.auto_size {
            self.tracker.resize(tracker_keys(target));
        }
        // One seed for the life of the store: a key's random draw at the boundary
        // clock value is the same in every rule, so a key pinned by one demotion is
        // not demoted by the next for a new draw (and promoted back after).
        let p = Pinning::new(self.tracker.distribution(), target, self.seed);
        self.set_rule(p);
        p
    }

    fn set_rule(&self, p: Pinning) {
        self.rule.level.store(p.level, Ordering::Relaxed);
        self.rule.prob.store(p.prob.to_bits(), Ordering::Relaxed);
        self.rule.seed.store(p.seed, Ordering::Relaxed);
    }

    /// The rule last computed.
    pub(crate) fn rule(&self) -> Pinning {
        Pinning {
            level: self.rule.level.load(Ordering::Relaxed),
            prob: f64::from_bits(self.rule.prob.load(Ordering::Relaxed)),
            seed: self.rule.seed.load(Ordering::Relaxed),
        }
    }

    /// Polls the read trigger: the bytes promotions may still bring into the fast
    /// tier now (0: none), at most [`epochs::EPOCH_SHARE`] of `budget` per epoch.
    pub(crate) fn promote_now(&self, budget: u64) -> u64 {
        if self.pin_fraction <= 0.0 {
            return 0;
        }
        let c = &self.counters;
        let now = Mark {
            ops: c.ops.load(Ordering::Relaxed),
            fast_gets: c.fast_gets.load(Ordering::Relaxed),
            slow_gets: c.slow_gets.load(Ordering::Relaxed),
            promoted: c.promoted_bytes.load(Ordering::Relaxed),
        };
        let t = &self.tracker;
        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
        let hot = t.in_slow() >= epochs::MIN_HOT
            && t.in_slow() as f64 >= epochs::DETECT_SHARE * t.len() as f64;
        let mut trig = self.trigger.lock();
        if !trig.poll(now, hot, self.epoch_ops, self.cooldown_ops) {
            return 0;
        }
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a byte allowance"
        )]
        let cap = (budget as f64 * epochs::EPOCH_SHARE) as u64;
        cap.saturating_sub(trig.promoted_in_epoch(&now))
    }
}
