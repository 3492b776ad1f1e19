//! Read-triggered promotion (PrismDB §5.3 "Read-triggered Compactions"): in a
//! read-heavy workload the fast tier fills slowly, so demotions — which decide what
//! stays — are rare and cannot follow a popularity shift. Three stages:
//!
//! 1. **Detection**: many of the tracked keys were last served by the slow tier
//!    (at least [`DETECT_SHARE`] of them, and [`MIN_HOT`] keys).
//! 2. **Invocation**: promotions run for an epoch of `epoch_ops` client operations
//!    (PrismDB: 1 M), at most [`EPOCH_SHARE`] of the fast budget per epoch: each
//!    promoted byte pushes a colder one down (a demotion, and later slow-tier merges),
//!    so an epoch that promoted the whole budget would rewrite it all (measured: 1.5 M
//!    gets of YCSB C promoted 42 MB into a 40 MB budget and wrote 711 MB to the slow
//!    tier, for no gain in the fast tier's share of gets).
//! 3. **Monitoring**: at the end of an epoch, the share of gets the fast tier served
//!    during it is compared with the share before it; an improvement of at least
//!    [`MIN_GAIN`] (one point) starts another epoch, anything less a cool-down of
//!    `cooldown_ops` operations (PrismDB: 10 M), after which detection resumes.
//!
//! Thread-safety: the state lives behind a mutex in [`super::Placement`], polled by the
//! slow-tier background thread only; the counters it reads are relaxed atomics.

/// Share of tracked keys last served by the slow tier that starts promotion epochs.
pub(crate) const DETECT_SHARE: f64 = 0.05;
/// Fewest such keys worth an epoch.
pub(crate) const MIN_HOT: u64 = 64;
/// Most of the fast budget one epoch promotes.
pub(crate) const EPOCH_SHARE: f64 = 0.125;
/// Improvement of the fast tier's share of gets that earns another epoch.
pub(crate) const MIN_GAIN: f64 = 0.01;

/// Operation and get counts at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub ops: u64,
    pub fast_gets: u64,
    pub slow_gets: u64,
    /// Bytes promoted so far (an epoch promotes at most a share of the budget).
    pub promoted: u64,
}

impl Mark {
    /// Share of gets the fast tier served between `self` (earlier) and `now`; `None`
    /// without gets.
    fn fast_share(&self, now: &Mark) -> Option<f64> {
        let f = now.fast_gets.saturating_sub(self.fast_gets);
        let s = now.slow_gets.saturating_sub(self.slow_gets);
        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
        let r = (f + s > 0).then(|| f as f64 / (f + s) as f64);
        r
    }
}

/// Where the state machine is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase {
    /// Watching; `since` starts the window the pre-epoch share is measured over.
    Detect { since: Mark },
    /// Promoting until `start.ops + len`; `base`: the fast share before it.
    Epoch { start: Mark, base: f64 },
    /// Not promoting until `until` operations.
    Cooldown { until: u64 },
}

/// The read-trigger state machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ReadTrigger {
    pub phase: Phase,
    /// Epochs started, and cool-downs entered, since open.
    pub epochs: u64,
    pub cooldowns: u64,
}

impl Default for ReadTrigger {
    fn default() -> Self {
        ReadTrigger {
            phase: Phase::Detect {
                since: Mark::default(),
            },
            epochs: 0,
            cooldowns: 0,
        }
    }
}

impl ReadTrigger {
    /// Bytes promoted since the epoch in progress began (0 outside epochs).
    pub(crate) fn promoted_in_epoch(&self, now: &Mark) -> u64 {
        match self.phase {
            Phase::Epoch { start, .. } => now.promoted.saturating_sub(start.promoted),
            _ => 0,
        }
    }

    /// Advances the machine to `now`; `hot_in_slow` says whether detection's
    /// condition holds. Returns whether promotions should run now.
    pub(crate) fn poll(
        &mut self,
        now: Mark,
        hot_in_slow: bool,
        epoch_ops: u64,
        cooldown_ops: u64,
    ) -> bool {
        match self.phase {
            Phase::Detect { since } => {
                if hot_in_slow {
                    let base = since.fast_share(&now).unwrap_or(0.0);
                    self.phase = Phase::Epoch { start: now, base };
                    self.epochs += 1;
                    return true;
                }
                // Keep the window about one epoch long.
                if now.ops.saturating_sub(since.ops) > epoch_ops {
                    self.phase = Phase::Detect { since: now };
                }
                false
            }
            Phase::Epoch { start, base } => {
                if now.ops.saturating_sub(start.ops) < epoch_ops {
                    return true;
                }
                let share = start.fast_share(&now).unwrap_or(base);
                if share >= base + MIN_GAIN && hot_in_slow {
                    self.phase = Phase::Epoch {
                        start: now,
                        base: share,
                    };
                    self.epochs += 1;
                    true
                } else {
                    self.phase = Phase::Cooldown {
                        until: now.ops.saturating_add(cooldown_ops),
                    };
                    self.cooldowns += 1;
                    false
                }
            }
            Phase::Cooldown { until } => {
                if now.ops >= until {
                    self.phase = Phase::Detect { since: now };
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ops: u64, fast: u64, slow: u64) -> Mark {
        Mark {
            ops,
            fast_gets: fast,
            slow_gets: slow,
            promoted: 0,
        }
    }

    /// Detect → epoch; an epoch that raised the fast share by more than a point
    /// earns another; one that did not ends in a cool-down, then detection again.
    #[test]
    fn epochs_monitoring_and_cooldown() {
        let mut t = ReadTrigger::default();
        assert!(!t.poll(m(10, 5, 5), false, 100, 1000));
        assert!(t.poll(m(20, 10, 10), true, 100, 1000));
        assert_eq!(t.epochs, 1);
        assert!(t.poll(m(60, 40, 20), true, 100, 1000));
        // Epoch over: 90 fast of 100 gets vs 0.5 before → another epoch.
        assert!(t.poll(m(120, 100, 20), true, 100, 1000));
        assert_eq!(t.epochs, 2);
        // Next epoch gains nothing (0.9 → 0.9): cool-down.
        assert!(!t.poll(m(220, 190, 30), true, 100, 1000));
        assert_eq!(t.cooldowns, 1);
        assert!(!t.poll(m(900, 800, 30), true, 100, 1000));
        assert!(!t.poll(m(1300, 900, 30), true, 100, 1000));
        assert!(matches!(t.phase, Phase::Detect { .. }));
        assert!(t.poll(m(1310, 905, 35), true, 100, 1000));
    }
}
