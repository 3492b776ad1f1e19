//! Commit delay under `--durability sync` (issue #30 item 2): a worker whose round
//! needs a persist may wait a little before asking for it, so that the clients about
//! to send their next write join the same persist.
//!
//! Why: with a closed loop of clients (each waits for its reply before it sends
//! again) and a device flush that costs more than a round, the clients split into
//! cohorts that take turns — the clients answered at the end of one persist send
//! their next request while the worker is already persisting the few that arrived
//! first, so each persist carries only part of the clients. Measured with go-ycsb A
//! (16 threads, half writes) on this host's disk, a persist carried 2.2 writes where
//! the clients offer up to 8 (docs/benchmarks.md, session 17); Redis's AOF with
//! `appendfsync always` splits too (its `fsync` ends each event-loop turn) and
//! carried 4; with the delay a persist carries 3.7.
//! FlatStore §3.3 batches the requests *that arrive while the previous batch is being
//! persisted*; this widens that window by a bounded wait when more writers are known
//! to be on their way, as Postgres's `commit_delay` does when `commit_siblings`
//! transactions are active.
//!
//! Rule ([`Linger::keep`]): a worker keeps its round's ticketed connections
//! (replies held, not served meanwhile) and goes on serving, without asking for a
//! ticket, while all of these hold:
//! * a persist has been measured, and fewer than [`BEGIN_BELOW`] were kept when the
//!   delay began;
//! * the first of them was kept less than half a recent persist's duration ago, and
//!   less than the cap (`CASCADE_SYNC_LINGER_US`, default [`DEFAULT_CAP_US`]; 0 turns
//!   the delay off);
//! * the *writers on their way* — the worker's connections whose last round with
//!   input wrote, active within four persists, not waiting for a reply — are at least
//!   half as many as those kept, and at least one; the worker counts none when it has
//!   more than 16 active connections (`worker/held.rs`): many clients arrive steadily, so
//!   the persist's own duration gathers them, and there a delay measured 10–20 %
//!   slower on redis-benchmark's 50 clients;
//! * delays pay: while recent ones ended with less than 1.5× the connections they
//!   began with (a moving average), only one chance in [`PROBE_EVERY`] begins one.
//!
//! A lone writer, or a writer beside readers only, never waits.
//!
//! Invariants: a kept connection is marked `awaiting` (not served, exactly like a
//! held one) and ends up in a held round with a ticket asked for *after* every write
//! it made, so design.md §10's rule is unchanged — delaying the ask only delays the
//! replies. The worker's poll timeout never passes [`Linger::deadline`], so a kept
//! connection waits at most the cap plus one round. Only its worker touches a
//! `Linger` (no lock).

use std::time::{Duration, Instant};

use mio::Token;

/// A delay begins only while fewer connections than this are kept: a persist that
/// already carries this many writes has spread its flush thin.
pub(crate) const BEGIN_BELOW: usize = 8;

/// Default cap of one commit delay, µs.
pub(crate) const DEFAULT_CAP_US: u64 = 200;

/// The cap in force (`CASCADE_SYNC_LINGER_US`, read once; 0 turns the delay off). A
/// value that is not a whole number of µs is reported and the default kept.
fn cap_us() -> u64 {
    static CAP: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| {
        std::env::var("CASCADE_SYNC_LINGER_US")
            .ok()
            .map_or(DEFAULT_CAP_US, |v| parse_cap(&v))
    })
}

fn parse_cap(v: &str) -> u64 {
    v.trim().parse().unwrap_or_else(|_| {
        eprintln!(
            "cascade: CASCADE_SYNC_LINGER_US={v:?} is not a whole number of microseconds; \
             using {DEFAULT_CAP_US}"
        );
        DEFAULT_CAP_US
    })
}

/// Connections kept back from asking for a ticket, and until when.
#[derive(Debug, Default)]
pub(crate) struct Linger {
    tokens: Vec<Token>,
    any_write: bool,
    /// When the current delay ends at the latest (`None`: no delay).
    until: Option<Instant>,
    /// Kept when the current delay began.
    began_with: usize,
    /// Moving average of what delays gathered — kept at their end ÷ kept at their
    /// beginning, in 16ths (`None`: no delay has ended yet).
    gain: Option<u32>,
    /// Chances to begin a delay passed up because recent ones gathered too little.
    passed: u32,
}

/// Delays must gather at least this much on average (16ths: 1.5×) to go on beginning.
const MIN_GAIN: u32 = 24;
/// While they do not, one chance in this many still begins one (to notice a change).
const PROBE_EVERY: u32 = 16;

/// What [`Linger::keep`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A delay begins: keep the connections.
    Begin,
    /// The delay goes on.
    Keep,
    /// Ask for the ticket now (no delay, or the rest would add little).
    Ask,
    /// Ask for the ticket now: the delay reached its deadline.
    Expired,
}

impl Decision {
    /// Whether the connections stay kept.
    pub(crate) fn kept(self) -> bool {
        matches!(self, Decision::Begin | Decision::Keep)
    }
}

impl Linger {
    /// Whether connections are kept.
    pub(crate) fn active(&self) -> bool {
        self.until.is_some()
    }

    /// When the current delay ends at the latest (`None`: no delay).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.until
    }

    /// How recently a connection must have been active to count as a writer on its
    /// way, for persists of `persist_us`.
    pub(crate) fn window(persist_us: u64) -> Duration {
        Duration::from_micros(persist_us.saturating_mul(4).clamp(500, 20_000))
    }

    /// Adds a round's connections that need a ticket.
    pub(crate) fn add(&mut self, tokens: &mut Vec<Token>, any_write: bool) {
        self.tokens.append(tokens);
        self.any_write |= any_write;
    }

    /// Whether to keep the connections added so far (module docs' rule), `coming`
    /// counting the writers on their way (called only when the rule needs it) and
    /// `persist_us` the recent persist duration.
    pub(crate) fn keep(
        &mut self,
        now: Instant,
        persist_us: u64,
        coming: impl FnOnce() -> usize,
    ) -> Decision {
        self.keep_with(now, persist_us, coming, cap_us())
    }

    fn keep_with(
        &mut self,
        now: Instant,
        persist_us: u64,
        coming: impl FnOnce() -> usize,
        cap: u64,
    ) -> Decision {
        if self.tokens.is_empty() || cap == 0 || persist_us == 0 {
            return Decision::Ask;
        }
        match self.until {
            Some(until) if now >= until => return Decision::Expired,
            None if self.tokens.len() >= BEGIN_BELOW => return Decision::Ask,
            _ => {}
        }
        let coming = coming();
        if coming == 0 || coming * 2 < self.tokens.len() {
            return Decision::Ask;
        }
        if self.until.is_some() {
            return Decision::Keep;
        }
        if self.gain.is_some_and(|g| g < MIN_GAIN) {
            self.passed = self.passed.wrapping_add(1);
            if !self.passed.is_multiple_of(PROBE_EVERY) {
                return Decision::Ask;
            }
        }
        self.until = Some(now + Duration::from_micros((persist_us / 2).min(cap)));
        self.began_with = self.tokens.len();
        Decision::Begin
    }

    /// Ends the delay: the kept connections, and whether any of them wrote.
    pub(crate) fn take(&mut self) -> (Vec<Token>, bool) {
        if self.until.take().is_some() {
            let got = u32::try_from(self.tokens.len() * 16 / self.began_with.max(1))
                .unwrap_or(u32::MAX)
                .min(64);
            self.gain = Some(self.gain.map_or(got, |g| (g * 7 + got) / 8));
        }
        let any = std::mem::take(&mut self.any_write);
        (std::mem::take(&mut self.tokens), any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(n: usize) -> Vec<Token> {
        (0..n).map(Token).collect()
    }

    #[test]
    fn waits_only_for_enough_writers_and_never_past_the_limit() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        // Nothing kept, no measured persist, or no cap: no delay.
        assert_eq!(l.keep_with(t0, 300, || 8, 200), Decision::Ask);
        l.add(&mut toks(6), true);
        assert_eq!(l.keep_with(t0, 0, || 8, 200), Decision::Ask);
        assert_eq!(l.keep_with(t0, 300, || 8, 0), Decision::Ask);
        // Fewer writers on their way than half of those kept: no delay.
        assert_eq!(l.keep_with(t0, 300, || 2, 200), Decision::Ask);
        assert!(!l.active());
        // Enough: the delay begins, limited to half a persist (150 µs < cap 200).
        assert_eq!(l.keep_with(t0, 300, || 3, 200), Decision::Begin);
        assert_eq!(l.deadline(), Some(t0 + Duration::from_micros(150)));
        // More arrive (10 kept); 5 more on their way is still worth it, before the
        // deadline.
        l.add(&mut toks(4), true);
        let d = l.keep_with(t0 + Duration::from_micros(100), 300, || 5, 200);
        assert!(d.kept());
        assert_eq!(d, Decision::Keep);
        // At the deadline it ends whatever is on its way.
        let d = l.keep_with(t0 + Duration::from_micros(150), 300, || 100, 200);
        assert_eq!(d, Decision::Expired);
        assert!(!d.kept());
        let (kept, wrote) = l.take();
        assert_eq!(kept.len(), 10);
        assert!(wrote);
        assert!(!l.active());
        assert_eq!(l.deadline(), None);
    }

    #[test]
    fn ends_early_once_the_rest_would_add_little() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        l.add(&mut toks(6), false);
        assert_eq!(l.keep_with(t0, 10_000, || 6, 200), Decision::Begin);
        // The cap bounds a slow device's half persist.
        assert_eq!(l.deadline(), Some(t0 + Duration::from_micros(200)));
        l.add(&mut toks(5), false);
        // 11 kept, 1 more on its way: not worth waiting for.
        let d = l.keep_with(t0 + Duration::from_micros(20), 10_000, || 1, 200);
        assert_eq!(d, Decision::Ask);
        let (kept, wrote) = l.take();
        assert_eq!(kept.len(), 11);
        assert!(!wrote);
    }

    #[test]
    fn a_large_group_does_not_wait() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        l.add(&mut toks(BEGIN_BELOW), true);
        assert_eq!(l.keep_with(t0, 300, || 50, 200), Decision::Ask);
        assert!(!l.active());
        assert_eq!(l.take().0.len(), BEGIN_BELOW);
        l.add(&mut toks(BEGIN_BELOW - 1), true);
        assert_eq!(l.keep_with(t0, 300, || 50, 200), Decision::Begin);
        // Once begun, a delay may gather past the bound.
        l.add(&mut toks(BEGIN_BELOW), true);
        assert_eq!(l.keep_with(t0, 300, || 50, 200), Decision::Keep);
    }

    #[test]
    fn delays_that_gather_nothing_stop_beginning() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        // A delay that ends with what it began with.
        l.add(&mut toks(2), true);
        assert_eq!(l.keep_with(t0, 300, || 4, 200), Decision::Begin);
        assert_eq!(l.take().0.len(), 2);
        let mut begun = 0;
        for _ in 0..(2 * PROBE_EVERY) {
            l.add(&mut toks(2), true);
            if l.keep_with(t0, 300, || 4, 200) == Decision::Begin {
                begun += 1;
                // This probe gathers a lot: delays pay again.
                l.add(&mut toks(6), true);
            }
            l.take();
        }
        assert_eq!(begun, 2);
        // Two probes that gathered 4× lift the average (16 -> 22 -> 27, in 16ths):
        // delays begin again.
        l.add(&mut toks(2), true);
        assert_eq!(l.keep_with(t0, 300, || 4, 200), Decision::Begin);
    }

    #[test]
    fn a_bad_cap_keeps_the_default() {
        assert_eq!(parse_cap("0"), 0);
        assert_eq!(parse_cap(" 350 "), 350);
        assert_eq!(parse_cap("200us"), DEFAULT_CAP_US);
        assert_eq!(parse_cap("-1"), DEFAULT_CAP_US);
    }

    #[test]
    fn window_scales_with_the_persist() {
        assert_eq!(Linger::window(10), Duration::from_micros(500));
        assert_eq!(Linger::window(1_000), Duration::from_millis(4));
        assert_eq!(Linger::window(1_000_000), Duration::from_millis(20));
    }
}
