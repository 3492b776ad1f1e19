//! A worker thread: one mio event loop serving many connections.
//!
//! Each round the worker (1) takes new connections from its inbox, (2) reads from
//! every ready connection, parses and executes the complete commands it holds
//! (pipelining: many per read), appending replies to the connection's output buffer,
//! (3) if any command wrote and the server runs with sync durability, makes the round
//! durable, and only then (4) writes the replies. A server started with `--durability
//! sync` shares one engine log among its workers: the round asks the persister threads
//! for a ticket (`commit.rs`) and its replies are held — the worker goes on serving —
//! until a persist that began after the round ends (with `--sync-persisters 0`, or
//! when switched to sync at run time, the worker persists itself at the round's end).
//! A connection that only ran keyed reads of durable writes is answered at once, one
//! that only read writes a running persist covers waits for that persist without a
//! ticket (`visible.rs`; `Conn::reads` tracks this per round). A connection with held
//! replies is not served until they are sent, so held rounds, each a disjoint set of
//! connections, may be released in any order. Which connections of a round wait and
//! for what is `held.rs`; running a connection's commands (and parking blocking ones)
//! is `exec.rs`; its socket reads, writes and input buffer are `io.rs`; its arrival,
//! idle trimming, timeout and release are `conns.rs`; where each worker's loop is (so
//! that blocked clients are served in arrival order) is `presence.rs`.
//! Otherwise all engine writes of this worker's clients go to this thread's exclusive
//! log.
//!
//! Bounds per connection: the unparsed input may not exceed the query-buffer limit
//! (the client is closed); a connection whose unsent output exceeds [`OUT_HIGH`] is not
//! read or executed until the client drains it, so a client that never reads its
//! replies only pins about `OUT_HIGH` plus one reply; a connection reads at most
//! [`READ_BUDGET`] bytes per round, so one fast client cannot starve the others.
//!
//! Only this thread touches its connections; other threads reach it through the
//! [`Inbox`] and its waker.

mod conns;
mod exec;
mod held;
mod io;
pub(crate) mod presence;

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Poll, Token, Waker};
use parking_lot::Mutex;

use self::exec::{execute, retry_parked, take_mail, take_script_reply, Env};
use self::io::{check_query_buffer, fit_input, read_some, write_some};
use crate::clients::Live;
use crate::cmd::{Client, Commands};
use crate::inbuf::InBuf;
use crate::linger::Linger;
use crate::metrics::WorkerStats;
use crate::resp::parse::Command;
use crate::resp::parse::{Limits, Parser};
use crate::resp::reply::Out;
use crate::shared::Shared;

/// Unsent output at which a connection stops being served until it drains.
pub(crate) const OUT_HIGH: usize = 4 << 20;
/// Bytes read from one connection per round.
pub(crate) const READ_BUDGET: usize = 1 << 20;
const WAKE: Token = Token(0);
/// What a client that has not authenticated may send (Redis's limits): 10 arguments of
/// 16 KiB at most.
const UNAUTHED: Limits = Limits {
    max_bulk: 16 * 1024,
    max_args: 10,
};

/// Hands accepted sockets to a worker.
#[derive(Clone)]
pub(crate) struct Inbox {
    queue: Arc<Mutex<Vec<(TcpStream, SocketAddr, u64)>>>,
    waker: Arc<Waker>,
}

impl Inbox {
    /// Queues a connection and wakes the worker.
    pub(crate) fn send(&self, sock: TcpStream, peer: SocketAddr, id: u64) {
        self.queue.lock().push((sock, peer, id));
        let _ = self.waker.wake();
    }
}

#[expect(
    clippy::struct_excessive_bools,
    reason = "independent connection states, each checked on its own"
)]
struct Conn {
    sock: TcpStream,
    client: Client,
    parser: Parser,
    inbuf: InBuf,
    rpos: usize,
    out: Out,
    wpos: usize,
    last_active: Instant,
    /// Peer closed its sending side (or a read failed): no more input.
    eof: bool,
    /// Drop without writing (write failed, or a group commit failed).
    dead: bool,
    /// Executed a write command in the current round.
    wrote: bool,
    /// Its replies are held for a group-commit ticket (`commit.rs`), or kept back
    /// before one is asked for (`linger.rs`); it is not served until they are sent.
    awaiting: bool,
    /// Its last served round wrote (a writer that may join a commit delay).
    writer: bool,
    /// This round: `Some(need)` while everything it ran was a keyed read that could
    /// see writes numbered up to `need` (`visible.rs`), `None` once anything else ran
    /// or was delivered to it.
    reads: Option<u64>,
    /// Complete commands are waiting (output was full).
    backlog: bool,
    /// Parked in a blocking command.
    parked: Option<Parked>,
    /// Its replies wait until the clients its writes woke have run (`notify.rs`).
    hold: bool,
    /// What CLIENT LIST shows of it (`clients.rs`).
    live: Arc<Live>,
    /// When it was adopted (`live.active_ms` counts from here).
    created: Instant,
    /// The most input buffered at once since `last_resize`.
    peak: usize,
    /// When the input buffer was last fitted to its recent peak.
    last_resize: Instant,
    /// When the kernel received the bytes of its latest read (ns since the epoch).
    rx_ns: u64,
}

/// A client waiting in a blocking command.
struct Parked {
    cmd: Command,
    /// Its place in the queue of parked clients (`notify.rs`).
    seq: u64,
    deadline: Option<Instant>,
    /// When it parked (`presence.rs`: a quick wake lets the other workers catch up).
    since: Instant,
    /// When its command arrived (ns since the epoch).
    arrival: u64,
    /// It waited for the other workers once already.
    caught_up: bool,
}

/// How a parked client is woken: its token goes to `woken` and the poll is woken.
#[derive(Clone)]
struct Park {
    woken: Arc<Mutex<Vec<Token>>>,
    waker: Arc<Waker>,
}

impl Conn {
    fn pending_out(&self) -> usize {
        self.out.buf.len() - self.wpos
    }
}

/// One worker thread's state.
pub(crate) struct Worker {
    shared: Arc<Shared>,
    commands: Arc<Commands>,
    stats: Arc<WorkerStats>,
    poll: Poll,
    waker: Arc<Waker>,
    queue: Arc<Mutex<Vec<(TcpStream, SocketAddr, u64)>>>,
    conns: HashMap<Token, Conn>,
    next_token: usize,
    park: Park,
    parked: usize,
    is_write: Vec<bool>,
    /// This worker's lane of the reply barrier (`durable.rs`).
    lane: usize,
    /// Rounds whose replies wait for a persist (`commit.rs`), oldest first.
    held: Vec<held::Held>,
    /// Connections kept back before their ticket is asked for (`linger.rs`).
    linger: Linger,
}

impl Worker {
    /// A worker (not yet running).
    pub(crate) fn new(
        shared: Arc<Shared>,
        commands: Arc<Commands>,
        stats: Arc<WorkerStats>,
        lane: usize,
    ) -> std::io::Result<Worker> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
        let is_write = commands
            .specs
            .iter()
            .map(crate::cmd::Spec::writes)
            .collect();
        let park = Park {
            woken: Arc::new(Mutex::new(Vec::new())),
            waker: waker.clone(),
        };
        Ok(Worker {
            shared,
            commands,
            stats,
            poll,
            waker,
            park,
            parked: 0,
            queue: Arc::new(Mutex::new(Vec::new())),
            conns: HashMap::new(),
            next_token: 1,
            is_write,
            lane,
            held: Vec::new(),
            linger: Linger::default(),
        })
    }

    /// Where the acceptor sends connections.
    pub(crate) fn inbox(&self) -> Inbox {
        Inbox {
            queue: self.queue.clone(),
            waker: self.waker.clone(),
        }
    }

    /// The waker (for shutdown).
    pub(crate) fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// Runs until shutdown, then answers what was received and closes every client.
    pub(crate) fn run(mut self) {
        self.shared.gate.enter(self.lane);
        self.shared.commit.enter(self.lane, self.waker.clone());
        if self.shared.fixed.sync {
            // Started with `--durability sync`: every worker appends to one shared log,
            // so one persist covers the rounds of all of them (durable.rs).
            cascadekv::set_thread_log_slot(0);
        }
        let mut events = Events::with_capacity(1024);
        // Connections with work left over from the previous round.
        let mut ready: Vec<Token> = Vec::new();
        let mut round: Vec<Token> = Vec::new();
        let mut seen: HashSet<Token> = HashSet::new();
        let mut last_idle_check = Instant::now();
        loop {
            let mut timeout = if ready.is_empty() {
                Duration::from_millis(250)
            } else {
                Duration::ZERO
            };
            if self.parked > 0 {
                let now = Instant::now();
                for c in self.conns.values() {
                    if let Some(d) = c.parked.as_ref().and_then(|p| p.deadline) {
                        timeout = timeout.min(d.saturating_duration_since(now));
                    }
                }
            }
            // A commit delay ends by its deadline even if nothing arrives.
            if let Some(d) = self.linger.deadline() {
                timeout = timeout.min(d.saturating_duration_since(Instant::now()));
            }
            self.shared.presence.idle(self.lane, io::now_ns());
            let polled = self.poll.poll(&mut events, Some(timeout));
            self.shared.presence.busy(self.lane);
            let began = io::now_ns();
            if let Err(e) = polled {
                if e.kind() != ErrorKind::Interrupted {
                    eprintln!("cascade: worker poll failed: {e}");
                    self.shared.request_shutdown("worker failure");
                }
            }
            if self.shared.shutting_down() {
                break;
            }
            // Order of service, as Redis's single event loop would have it: woken
            // blocked clients first (Redis serves them before the next command), then
            // connections with input left over, then new input in the order the
            // kernel reported it ready (not by token: an older connection must not
            // overtake a request that arrived before its own).
            round.clear();
            round.append(&mut self.park.woken.lock());
            round.append(&mut ready);
            if self.parked > 0 {
                let now = Instant::now();
                for (t, c) in &self.conns {
                    if c.parked
                        .as_ref()
                        .and_then(|p| p.deadline)
                        .is_some_and(|d| d <= now)
                    {
                        round.push(*t);
                    }
                }
            }
            for ev in &events {
                if ev.token() == WAKE {
                    let new = self.adopt();
                    round.extend(new);
                } else {
                    round.push(ev.token());
                }
            }
            seen.clear();
            round.retain(|t| seen.insert(*t));
            self.serve_round(&round, &mut ready, true);
            self.shared.presence.round_done(self.lane, began);
            if last_idle_check.elapsed() >= Duration::from_secs(1) {
                last_idle_check = Instant::now();
                self.trim_idle();
                self.close_idle();
            }
        }
        self.drain();
        // Serving is over: nobody may wait for this worker's lane any more.
        self.shared.gate.stop();
    }

    /// Reads, executes, group-commits, writes. Connections with work left are pushed
    /// to `again`.
    fn serve_round(&mut self, tokens: &[Token], again: &mut Vec<Token>, read: bool) {
        let mut any_write = false;
        let shared_log = self.shared.fixed.sync;
        let gather = read && self.gathers();
        let round_start = Instant::now();
        if shared_log && !gather {
            self.shared.gate.round_begins(self.lane);
        }
        let mut served = Vec::with_capacity(tokens.len());
        for t in tokens {
            let Some(c) = self.conns.get_mut(t) else {
                continue;
            };
            if gather && c.awaiting {
                // Its replies wait for a ticket: nothing more of it runs before they go
                // out (they would go out with them, ahead of their own persist). It is
                // served again once they are sent.
                continue;
            }
            served.push(*t);
            c.reads = Some(0);
            let mut more = false;
            if read && !c.dead && !c.client.close_after_reply && c.pending_out() < OUT_HIGH {
                more |= read_some(c, &self.stats);
            }
            if take_mail(c) {
                c.reads = None;
            }
            let env = Env {
                shared: &self.shared,
                commands: &self.commands,
                stats: &self.stats,
                is_write: &self.is_write,
                park: &self.park,
                token: *t,
                lane: self.lane,
            };
            let was_parked = c.parked.is_some();
            if was_parked {
                c.reads = None;
                retry_parked(c, &env);
            }
            more |= take_script_reply(c, &self.shared);
            c.backlog = c.parked.is_none() && c.client.script.is_none() && execute(c, &env);
            // Messages published while the commands ran follow their replies.
            if take_mail(c) || c.wrote || c.parked.is_some() || c.client.script.is_some() {
                c.reads = None;
            }
            match (was_parked, c.parked.is_some()) {
                (false, true) => self.parked += 1,
                (true, false) => self.parked -= 1,
                _ => {}
            }
            more |= c.backlog;
            check_query_buffer(c, &self.shared);
            fit_input(c);
            any_write |= c.wrote;
            note_writer(c, round_start);
            if more {
                again.push(*t);
            }
        }
        let tokens = self.durable_tokens(&served, again, any_write, shared_log, gather);
        for t in &tokens {
            let Some(c) = self.conns.get_mut(t) else {
                continue;
            };
            // As in Redis, clients blocked on the keys a write changed are served
            // before its writer hears back (only while serving, not in shutdown).
            c.hold =
                read && !c.dead && (c.wrote || c.hold) && self.shared.store.notify().any_woken();
            c.wrote = false;
            if c.hold {
                again.push(*t);
                continue;
            }
            if !c.dead && c.pending_out() > 0 {
                let was_blocked = c.pending_out() >= OUT_HIGH;
                write_some(c, &self.stats);
                // Drained below the mark: serve it again (input may be waiting; a
                // token listed twice is deduplicated at the start of the round).
                if was_blocked && c.pending_out() < OUT_HIGH {
                    again.push(*t);
                }
            }
            if c.client.subs.active() {
                // What a subscriber has not read counts against its output limit.
                c.client.mailbox.set_unsent(c.pending_out());
                if c.client.mailbox.has_mail() && c.pending_out() < OUT_HIGH {
                    again.push(*t);
                }
            }
            if c.client.repl.psync.is_some() && !c.dead {
                if let Some(c) = self.conns.remove(t) {
                    self.hand_over(c);
                }
                continue;
            }
            let finished = c.dead
                || (c.pending_out() == 0 && (c.client.close_after_reply || (c.eof && !c.backlog)));
            if finished {
                if let Some(mut c) = self.conns.remove(t) {
                    let _ = self.poll.registry().deregister(&mut c.sock);
                    self.release(&mut c);
                }
                // A closed token left in `again` is skipped: it has no connection.
            }
        }
    }

    /// Shutdown: answer every complete request already received, persist, flush
    /// replies (for up to two seconds), close.
    fn drain(&mut self) {
        let _ = self.adopt();
        let tokens: Vec<Token> = self.conns.keys().copied().collect();
        for c in self.conns.values_mut() {
            c.eof = true;
        }
        let mut again = Vec::new();
        self.serve_round(&tokens, &mut again, false);
        // The store's close persists every log, so buffered-mode replies sent below
        // are durable by the time the process exits cleanly.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.conns.is_empty() && Instant::now() < deadline {
            let mut open = false;
            for c in self.conns.values_mut() {
                if !c.dead && c.pending_out() > 0 {
                    write_some(c, &self.stats);
                    open |= c.pending_out() > 0 && !c.dead;
                }
            }
            if !open {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let conns: Vec<Conn> = self.conns.drain().map(|(_, c)| c).collect();
        for mut c in conns {
            self.release(&mut c);
        }
    }
}

/// Sets `c.writer` after a round (`linger.rs`): whether it wrote. A round that read
/// nothing new (served again after its replies went out) leaves the flag as its last
/// round with input set it.
fn note_writer(c: &mut Conn, round_start: Instant) {
    if c.wrote || c.last_active >= round_start {
        c.writer = c.wrote;
    }
}
