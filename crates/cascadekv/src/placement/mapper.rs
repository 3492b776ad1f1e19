//! The mapper (PrismDB §4.3 "Mapper" and "Pinning threshold algorithm"): turns the
//! tracker's clock distribution and a pinning target into a per-key decision — stays
//! in the fast tier, or may sink.
//!
//! The target is a number of keys (the caller derives it from the fast budget, see
//! `Placement::pin_target`). Clock values are taken from 3 down: a value whose keys
//! all fit under what remains of the target is pinned whole; the first that does not
//! fit is pinned with probability remaining / count; lower values and untracked keys
//! are not pinned. Example from the paper: 10 % at 3, 10 % at 2, 30 % at 1, a target of
//! 15 %: every 3 is pinned, a 2 with probability 0.5, no 1 or 0.
//!
//! The "random" choice is a hash of the key mixed with a per-decision seed, so one
//! demotion decides the same way for the same key each time it meets it.
//!
//! Thread-safety: a [`Pinning`] is a plain value computed by the demotion or promotion
//! job from an atomic snapshot of the distribution.

use crate::coding::hash64;

/// A pinning decision rule: keys with clock above `level` are pinned, at `level` with
/// probability `prob`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pinning {
    /// Lowest clock value pinned at all (4: none).
    pub level: u8,
    /// Probability a key at `level` is pinned.
    pub prob: f64,
    /// Mixes into the key hash for the random choice.
    pub seed: u64,
}

impl Pinning {
    /// Pins nothing.
    pub(crate) const NONE: Pinning = Pinning {
        level: 4,
        prob: 0.0,
        seed: 0,
    };

    /// The rule that pins at most `target` of the tracked keys counted by `dist`
    /// (keys by clock value 0–3), the most popular first.
    pub(crate) fn new(dist: [u64; 4], target: u64, seed: u64) -> Pinning {
        let mut left = target;
        for level in (0..=3u8).rev() {
            let n = dist[usize::from(level)];
            if n == 0 {
                continue;
            }
            if left >= n {
                left -= n;
                continue;
            }
            #[expect(
                clippy::cast_precision_loss,
                reason = "a probability: counts far below 2^52 in practice"
            )]
            let prob = left as f64 / n as f64;
            return Pinning { level, prob, seed };
        }
        // Every tracked key fits.
        Pinning {
            level: 0,
            prob: 1.0,
            seed,
        }
    }

    /// Whether a key tracked with `clock` stays in the fast tier (`None`: untracked,
    /// never pinned).
    pub(crate) fn pins(&self, key: &[u8], clock: Option<u8>) -> bool {
        let Some(c) = clock else {
            return false;
        };
        if c > self.level {
            return true;
        }
        if c < self.level || self.prob <= 0.0 {
            return false;
        }
        if self.prob >= 1.0 {
            return true;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "a uniform draw in [0, 1): 53 bits are plenty"
        )]
        let u = (hash64(key) ^ self.seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) as f64
            / 18_446_744_073_709_551_616.0;
        u < self.prob
    }

    /// Expected fraction of keys at clock `c` that are pinned.
    pub(crate) fn share(&self, c: u8) -> f64 {
        match c.cmp(&self.level) {
            std::cmp::Ordering::Greater => 1.0,
            std::cmp::Ordering::Equal => self.prob,
            std::cmp::Ordering::Less => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's example: 10 % at 3, 10 % at 2, 30 % at 1, 50 % at 0, target 15 %.
    #[test]
    fn paper_example() {
        let p = Pinning::new([500, 300, 100, 100], 150, 7);
        assert_eq!(p.level, 2);
        assert!((p.prob - 0.5).abs() < 1e-9);
        assert!(p.pins(b"k", Some(3)));
        assert!(!p.pins(b"k", Some(1)));
        assert!(!p.pins(b"k", None));
        let pinned = (0..10_000u32)
            .filter(|i| p.pins(&i.to_be_bytes(), Some(2)))
            .count();
        assert!((4500..5500).contains(&pinned), "{pinned}");
        // Same key, same answer.
        assert_eq!(p.pins(b"x", Some(2)), p.pins(b"x", Some(2)));
    }

    /// Targets at the edges: nothing, exactly one level, everything.
    #[test]
    fn edges() {
        let d = [10, 10, 10, 10];
        assert!(!Pinning::new(d, 0, 0).pins(b"a", Some(3)));
        let p = Pinning::new(d, 10, 0);
        assert!(p.pins(b"a", Some(3)) && !p.pins(b"a", Some(2)));
        let all = Pinning::new(d, 1000, 0);
        assert!(all.pins(b"a", Some(0)));
        assert!(!Pinning::NONE.pins(b"a", Some(3)));
        assert!((Pinning::new(d, 15, 0).share(2) - 0.5).abs() < 1e-9);
    }
}
