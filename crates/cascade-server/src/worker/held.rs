//! A worker's held rounds under `--durability sync`: which connections of a served
//! round may be answered now, which wait for a persist (a group-commit ticket,
//! `commit.rs`, or a running persist that covers what they read, `visible.rs`), which
//! are kept back for a commit delay (`linger.rs`), and, without persisters, the round
//! made durable before its replies (`durable.rs`). See the parent module for the round
//! itself.
//!
//! Invariants: a connection is in at most one held round (or the delay) and is not
//! served while there (`Conn::awaiting`), so held rounds may end in any order; a reply
//! leaves only after a persist that covers everything its round wrote or read (design.md
//! §10). Only the worker's thread touches this state.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mio::Token;

use super::{Conn, Worker};
use crate::linger::{Decision, Linger};

/// A worker with more connections than this never delays a commit (`linger.rs`):
/// counting the writers on their way would cost more than it saves.
const COMING_SCAN_MAX: usize = 512;
/// A worker with more active connections than this never delays a commit: with 25
/// redis-benchmark clients per worker a delay measured 10–20 % slower (session 17),
/// with 8 go-ycsb clients per worker 1.2–1.4× faster.
const COMING_ACTIVE_MAX: usize = 16;

/// A round's connections whose replies wait for a persist.
pub(super) struct Held {
    /// The group-commit ticket they wait for (0: none, they wait for `seq`).
    ticket: u64,
    /// Keyed reads only: the newest write they could see (`visible.rs`), covered by a
    /// persist that had begun when they were held.
    seq: u64,
    tokens: Vec<Token>,
}

impl Worker {
    /// Whether a round's replies wait for a persister (`commit.rs`): the shared log
    /// under sync durability, with persisters.
    pub(super) fn gathers(&self) -> bool {
        self.shared.fixed.sync
            && self.shared.config.sync.load(Ordering::Relaxed)
            && self.shared.fixed.sync_persisters > 0
    }

    /// The connections whose replies may go out now: with persisters (`gather`), this
    /// round is held — except connections that only read keys whose writes are durable
    /// (`visible.rs`) — and those of earlier rounds whose persist ended are returned;
    /// without, the round (and any round still held) is made durable first.
    pub(super) fn durable_tokens(
        &mut self,
        tokens: &[Token],
        again: &mut Vec<Token>,
        any_write: bool,
        shared_log: bool,
        gather: bool,
    ) -> Vec<Token> {
        if gather {
            let now = self.hold_round(tokens, any_write);
            let mut done = self.take_durable();
            // Input that arrived while a connection's replies were held was not read
            // (edge-triggered: no new event comes for it): serve it again.
            again.extend_from_slice(&done);
            done.extend(now);
            return done;
        }
        let mut all: Vec<Token> = self.held.drain(..).flat_map(|h| h.tokens).collect();
        // Connections kept for a commit delay are made durable with this round.
        all.append(&mut self.linger.take().0);
        all.extend_from_slice(tokens);
        for tok in &all {
            if let Some(c) = self.conns.get_mut(tok) {
                c.awaiting = false;
            }
        }
        all.sort_unstable();
        all.dedup();
        let any_write = any_write
            || all
                .iter()
                .any(|t| self.conns.get(t).is_some_and(|c| c.wrote));
        self.make_round_durable(&all, any_write, shared_log);
        all
    }

    /// Sorts a served round's connections (`visible.rs`): those that only read writes
    /// already durable are returned (their replies go out now); those that only read
    /// writes a running persist covers wait for it; the rest wait for a ticket.
    fn hold_round(&mut self, tokens: &[Token], any_write: bool) -> Vec<Token> {
        let durable = self.shared.store.seqs().durable();
        let (mut now, mut reads, mut ticketed) = (Vec::new(), Vec::new(), Vec::new());
        let (mut seq, mut unheld) = (0u64, 0u64);
        for t in tokens {
            let Some(c) = self.conns.get(t) else {
                continue;
            };
            match c.reads {
                // Nothing to send: nothing to count or hold.
                Some(_) if c.pending_out() == 0 => now.push(*t),
                Some(n) if n <= durable => {
                    unheld += 1;
                    now.push(*t);
                }
                Some(n) => {
                    seq = seq.max(n);
                    reads.push(*t);
                }
                None => ticketed.push(*t),
            }
        }
        if !reads.is_empty() && !self.shared.commit.covering(seq) {
            ticketed.append(&mut reads);
        }
        self.stats.reads_unheld.fetch_add(unheld, Ordering::Relaxed);
        self.stats
            .reads_no_ticket
            .fetch_add(reads.len() as u64, Ordering::Relaxed);
        if !ticketed.is_empty() || self.linger.active() {
            // Kept back while writers on their way may join the persist (`linger.rs`);
            // a kept connection is not served, as a held one.
            for tok in &ticketed {
                if let Some(c) = self.conns.get_mut(tok) {
                    c.awaiting = true;
                }
            }
            self.linger.add(&mut ticketed, any_write);
            let persist_us = self.shared.commit.recent_persist_us();
            let now = Instant::now();
            let conns = &self.conns;
            let decision = self
                .linger
                .keep(now, persist_us, || writers_coming(conns, now, persist_us));
            match decision {
                Decision::Begin => {
                    self.stats.sync_delays.fetch_add(1, Ordering::Relaxed);
                }
                Decision::Expired => {
                    self.stats
                        .sync_delays_expired
                        .fetch_add(1, Ordering::Relaxed);
                }
                Decision::Keep | Decision::Ask => {}
            }
            if !decision.kept() {
                let (kept, wrote) = self.linger.take();
                if wrote {
                    self.stats.group_commits.fetch_add(1, Ordering::Relaxed);
                }
                // A worker bound to the shared log persists it itself when that is
                // cheaper than a hand-off (`Commit::ask_inline`).
                let shared = &self.shared;
                let ticket = shared.commit.ask_inline(shared.store.seqs(), || {
                    crate::server::persist_shared_log(shared)
                });
                self.hold(ticket, 0, kept);
            }
        }
        if !reads.is_empty() {
            self.hold(0, seq, reads);
        }
        now
    }

    /// Holds `tokens`' replies until ticket `ticket` (or, without one, the write
    /// numbered `seq`) is durable.
    fn hold(&mut self, ticket: u64, seq: u64, tokens: Vec<Token>) {
        for tok in &tokens {
            if let Some(c) = self.conns.get_mut(tok) {
                c.awaiting = true;
            }
        }
        self.held.push(Held {
            ticket,
            seq,
            tokens,
        });
    }

    /// The connections of held rounds whose persist ended (`commit.rs`); those of a
    /// round a failed persist covered are closed unanswered, readers too. If rounds are still held, the
    /// worker is woken when the first of them is done. Each connection is in at most
    /// one held round (it is not served while held), so rounds may end in any order.
    fn take_durable(&mut self) -> Vec<Token> {
        let mut out = Vec::new();
        loop {
            let p = self.shared.commit.progress();
            let mut i = 0;
            while i < self.held.len() {
                let h = &self.held[i];
                let ended = if h.ticket == 0 {
                    h.seq <= p.settled
                } else {
                    h.ticket <= p.done
                };
                if !ended {
                    i += 1;
                    continue;
                }
                let h = self.held.remove(i);
                // A failed persist answers none of the rounds it covered, readers
                // included: what they read may never become durable (design.md §10).
                let failed = if h.ticket == 0 {
                    h.seq <= p.settled_failed
                } else {
                    h.ticket <= p.failed
                };
                if failed {
                    eprintln!("cascade: persisting the log failed");
                }
                for tok in &h.tokens {
                    if let Some(c) = self.conns.get_mut(tok) {
                        c.awaiting = false;
                        if failed {
                            c.dead = true;
                        }
                    }
                }
                out.extend(h.tokens);
            }
            if self.held.is_empty() {
                break;
            }
            let (mut ticket, mut seq) = (u64::MAX, u64::MAX);
            for h in &self.held {
                if h.ticket == 0 {
                    seq = seq.min(h.seq);
                } else {
                    ticket = ticket.min(h.ticket);
                }
            }
            let none = |v: u64| if v == u64::MAX { 0 } else { v };
            let (ticket, seq) = (none(ticket), none(seq));
            if !self.shared.commit.wait_for(self.lane, ticket, seq) {
                break;
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Under `--durability sync`, makes the round's writes — and, with the shared log,
    /// every write the round could have read — durable before any reply goes out
    /// (`durable.rs`). A failed persist closes every client of the round unanswered.
    fn make_round_durable(&mut self, tokens: &[Token], any_write: bool, shared_log: bool) {
        let sync = self.shared.config.sync.load(Ordering::Relaxed);
        // Every write this worker started is in its log: the persist covers them.
        let issued = self.shared.gate.issued(self.lane);
        let unpersisted = self.shared.gate.behind(self.lane, issued);
        // With the shared log every round persists it (or waits for the persist already
        // covering it): what this round read of the other workers' writes is in it.
        if shared_log {
            self.shared.gate.rendezvous(self.lane);
        }
        if sync && (any_write || unpersisted || shared_log) {
            if any_write {
                self.stats.group_commits.fetch_add(1, Ordering::Relaxed);
            }
            if let Err(e) = self.shared.store.db().sync_thread() {
                // Nothing written this round may be acknowledged, and nothing read in
                // it shown: it may never become durable.
                eprintln!("cascade: persisting the log failed: {e}");
                for t in tokens {
                    if let Some(c) = self.conns.get_mut(t) {
                        c.dead = true;
                    }
                }
            }
        }
        self.shared.gate.round_done(self.lane, issued);
        if sync && !shared_log {
            // No reply before the other workers' writes this round could have read
            // are durable too (as Redis replies only after its fsync).
            self.shared.gate.wait_others(self.lane);
        }
    }
}

/// Writers on their way (`linger.rs`): connections whose last round wrote, active
/// within a few persists, not waiting for a reply. None on a worker with more
/// than [`COMING_ACTIVE_MAX`] active connections: many clients arrive steadily,
/// so a persist's own duration gathers them (and counting them costs).
fn writers_coming(conns: &HashMap<Token, Conn>, now: Instant, persist_us: u64) -> usize {
    if conns.len() > COMING_SCAN_MAX {
        return 0;
    }
    let window = Linger::window(persist_us);
    let (mut active, mut coming) = (0usize, 0usize);
    for c in conns.values() {
        if c.dead || c.parked.is_some() || now.saturating_duration_since(c.last_active) >= window {
            continue;
        }
        active += 1;
        coming += usize::from(c.writer && !c.awaiting);
    }
    if active > COMING_ACTIVE_MAX {
        0
    } else {
        coming
    }
}
