//! Executing a connection's commands: parsing what its input holds and dispatching
//! each command (`cmd::dispatch`) while its output is below [`OUT_HIGH`], `CLIENT
//! REPLY` modes, pub/sub mail and script replies that follow a reply in order, and
//! blocking commands — a command that found nothing parks its client on its keys
//! (`notify.rs`) and runs again when one of them changes or its deadline passes.
//!
//! Only the worker thread that owns a connection calls these (`worker/mod.rs`); the
//! round around them (`serve_round`) decides when replies may leave.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;

use super::io::to_usize;
use super::{Conn, Park, Parked, OUT_HIGH};
use crate::cmd::server::command::note_last;
use crate::cmd::{dispatch, Client, Commands, Ctx, ReplyMode};
use crate::metrics::WorkerStats;
use crate::notify::WakeFn;
use crate::resp::parse::{Command, Limits, ProtocolError};
use crate::resp::reply::{self, Out};
use crate::shared::Shared;

/// A script's reply came back from the script thread: it goes out in order. Returns
/// whether one did.
pub(super) fn take_script_reply(c: &mut Conn, shared: &Shared) -> bool {
    let Some(r) = c.client.script.as_ref().and_then(|s| s.take()) else {
        return false;
    };
    shared.metrics.count_error(&r);
    c.out.buf.extend_from_slice(&r);
    c.client.script = None;
    c.reads = None;
    true
}

/// `CLIENT REPLY OFF|SKIP`: takes back the reply the command just wrote after `mark`
/// (pub/sub confirmations are pushes and always sent, as in Redis).
pub(super) fn apply_reply_mode(
    client: &mut Client,
    out: &mut Out,
    before: ReplyMode,
    mark: usize,
    idx: Option<usize>,
    commands: &Commands,
) {
    let push = idx.is_some_and(|i| commands.specs[i].flags.contains(&"pubsub"))
        && idx.is_some_and(|i| commands.specs[i].name.contains("subscribe"));
    // Whatever the mode before, a command that left replies on is answered: CLIENT
    // REPLY ON right after CLIENT REPLY SKIP ends the skip and answers OK, as in Redis.
    let silent = client.reply_mode != ReplyMode::On;
    if silent && !push {
        out.buf.truncate(mark);
    }
    client.reply_mode = match (before, client.reply_mode) {
        // The command after CLIENT REPLY SKIP has run without its reply.
        (ReplyMode::SkipThis, ReplyMode::SkipThis) => ReplyMode::On,
        // CLIENT REPLY SKIP itself: the next command is the one skipped.
        (_, ReplyMode::Skip) => ReplyMode::SkipThis,
        (_, m) => m,
    };
}

/// Moves the connection's pub/sub messages to its output (while the output is below
/// the mark; the rest waits in the mailbox, bounded by the pub/sub output limit). A
/// mailbox over its limit closes the connection, as Redis closes such a subscriber.
/// Returns true if messages were moved (they may reveal writes, `visible.rs`).
pub(super) fn take_mail(c: &mut Conn) -> bool {
    let mb = &c.client.mailbox;
    if mb.killed() {
        if !c.dead {
            eprintln!(
                "cascade: closing client {} ({}): CLIENT KILL, or pub/sub output over client-output-buffer-limit",
                c.client.id, c.client.addr
            );
        }
        c.dead = true;
        false
    } else if mb.has_mail() && c.pending_out() < OUT_HIGH {
        mb.take_into(&mut c.out.buf);
        true
    } else {
        false
    }
}

/// What executing a connection's commands needs from its worker.
pub(super) struct Env<'a> {
    pub(super) shared: &'a Shared,
    pub(super) commands: &'a Commands,
    pub(super) stats: &'a WorkerStats,
    pub(super) is_write: &'a [bool],
    pub(super) park: &'a Park,
    pub(super) token: Token,
    /// The worker's index (`presence.rs`).
    pub(super) lane: usize,
}

/// Runs a parked client's command again (a key changed, or its deadline passed).
pub(super) fn retry_parked(c: &mut Conn, env: &Env<'_>) {
    let (shared, commands, stats, is_write) = (env.shared, env.commands, env.stats, env.is_write);
    let lane = env.lane;
    let Some(mut p) = c.parked.take() else {
        return;
    };
    let notify = shared.store.notify();
    if !p.caught_up && p.since.elapsed() < super::presence::RECENT && notify.touched_turn(p.seq) {
        // Woken right after it parked: a client whose command arrived earlier may
        // not be parked yet on another worker (`presence.rs`).
        p.caught_up = true;
        shared.presence.let_others_catch_up(lane, p.arrival);
    }
    if let Some(error) = notify.unblocked(p.seq) {
        if error {
            let mark = c.out.buf.len();
            reply::error(&mut c.out, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
            shared.metrics.count_error(&c.out.buf[mark..]);
        } else {
            reply::nil_array(&mut c.out);
        }
        notify.unwait(p.seq);
        shared.metrics.blocked.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let expired = p.deadline.is_some_and(|d| d <= Instant::now());
    if !expired && !notify.may_retry(p.seq) {
        // An earlier client parked on the same key goes first; we are woken after.
        c.parked = Some(p);
        return;
    }
    let t = Instant::now();
    let mut ctx = Ctx {
        shared,
        commands,
        client: &mut c.client,
        out: &mut c.out,
    };
    ctx.client.retrying = true;
    let mark = ctx.out.buf.len();
    let ran = dispatch(&mut ctx, &p.cmd);
    ctx.client.retrying = false;
    // INFO errorstats: a woken command's error counts like any other.
    if let Some(r) = ctx.out.buf.get(mark..) {
        shared.metrics.count_error(r);
    }
    // A parked command has no `$` left to rewrite; drop any request to.
    ctx.client.park_as = None;
    if ran.block.is_some() {
        if expired || p.deadline.is_some_and(|d| d <= Instant::now()) {
            reply::nil_array(&mut c.out);
        } else {
            notify.retried(p.seq);
            c.parked = Some(p);
            return;
        }
    }
    notify.unwait(p.seq);
    shared.metrics.blocked.fetch_sub(1, Ordering::Relaxed);
    let took = t.elapsed();
    stats.record(ran.idx, ran.failed, took);
    // The blocked command as the client sent it, timed by the run that completed it.
    note_slow(shared, &c.client, &p.cmd, took, ran.idx, commands);
    if ran
        .idx
        .is_some_and(|i| is_write.get(i).copied().unwrap_or(false))
    {
        c.wrote = true;
    }
}

/// The parser limits of an authenticated connection (`proto-max-bulk-len`, the most
/// arguments).
fn authed_limits(shared: &Shared) -> Limits {
    Limits {
        max_bulk: to_usize(shared.config.max_bulk.load(Ordering::Relaxed)),
        max_args: to_usize(shared.config.max_args.load(Ordering::Relaxed)),
    }
}

/// SLOWLOG: `cmd` ran for `took` (`crate::slowlog`). EXEC itself is not logged, as in
/// Redis (which logs the commands inside it; here they are not logged one by one).
fn note_slow(
    shared: &Shared,
    client: &crate::cmd::Client,
    cmd: &Command,
    took: Duration,
    idx: Option<usize>,
    commands: &Commands,
) {
    if idx
        .and_then(|i| commands.specs.get(i))
        .is_some_and(|s| s.name == "exec")
    {
        return;
    }
    shared
        .slowlog
        .note(cmd, took, &client.addr, client.name.as_deref());
}

/// Parks `client` on the keys of `cmd` (a blocking command that found nothing).
pub(super) fn park(c: &mut Conn, env: &Env<'_>, cmd: &Command, idx: usize, timeout: f64) {
    let keys: Vec<Vec<u8>> = env.commands.specs[idx]
        .keys
        .of(cmd)
        .into_iter()
        .map(|k| env.shared.store.qualify(c.client.db, k))
        .collect();
    let deadline = (timeout > 0.0)
        .then(|| Instant::now().checked_add(Duration::from_secs_f64(timeout.min(1e9))))
        .flatten();
    let (woken, waker, token) = (env.park.woken.clone(), env.park.waker.clone(), env.token);
    let wake: WakeFn = Arc::new(move || {
        woken.lock().push(token);
        let _ = waker.wake();
    });
    let arrival = if c.rx_ns == 0 {
        super::io::now_ns()
    } else {
        c.rx_ns
    };
    let seq = env
        .shared
        .store
        .notify()
        .wait(c.client.id, &keys, &wake, arrival);
    env.shared.metrics.blocked.fetch_add(1, Ordering::Relaxed);
    // A push between the command's unlock and this registration: try once more.
    wake();
    c.parked = Some(Parked {
        cmd: cmd.clone(),
        seq,
        deadline,
        since: Instant::now(),
        arrival,
        caught_up: false,
    });
}

/// Executes complete commands while the output is below the mark. Returns true if
/// complete commands are left (output full).
pub(super) fn execute(c: &mut Conn, env: &Env<'_>) -> bool {
    let (shared, commands, stats, is_write) = (env.shared, env.commands, env.stats, env.is_write);
    let Conn {
        parser,
        inbuf,
        rpos,
        out,
        wpos,
        client,
        wrote,
        dead,
        reads,
        live,
        ..
    } = c;
    let mut blocked = None;
    while !*dead && !client.close_after_reply {
        if out.buf.len() - *wpos >= OUT_HIGH {
            return *rpos < inbuf.len();
        }
        match parser.parse(&inbuf.bytes()[*rpos..]) {
            Ok(Some(n)) => {
                *rpos += n;
                let cmd = parser.command();
                if cmd.is_empty() {
                    continue;
                }
                let t = Instant::now();
                let mut ctx = Ctx {
                    shared,
                    commands,
                    client,
                    out,
                };
                let was_authed = ctx.client.authed;
                let (mode, mark) = (ctx.client.reply_mode, ctx.out.buf.len());
                let ran = dispatch(&mut ctx, cmd);
                if let Some(i) = ran.idx {
                    note_last(live, commands, cmd, i, ctx.client.db);
                }
                crate::visible::fold_read(reads);
                // INFO errorstats: an error reply, whichever way the handler wrote it.
                if let Some(r) = ctx.out.buf.get(mark..) {
                    shared.metrics.count_error(r);
                }
                if mode != ReplyMode::On || client.reply_mode != ReplyMode::On {
                    apply_reply_mode(client, out, mode, mark, ran.idx, commands);
                }
                // Messages that arrived while the command ran (an invalidation its own
                // write caused, a publish) follow its reply, before the next one's.
                if client.mailbox.has_mail() && out.buf.len() - *wpos < OUT_HIGH {
                    client.mailbox.take_into(&mut out.buf);
                    *reads = None;
                }
                let raise = !was_authed && client.authed;
                if client.repl.psync.is_some() || client.script.is_some() {
                    // PSYNC: the connection becomes a replica link (`hand_over`); or
                    // handed to the script thread: the rest waits for its reply.
                    stats.record(ran.idx, ran.failed, t.elapsed());
                    break;
                }
                if let (Some(timeout), Some(idx)) = (ran.block, ran.idx) {
                    let cmd = client.park_as.take().unwrap_or_else(|| cmd.clone());
                    blocked = Some((cmd, idx, timeout));
                    break;
                }
                let took = t.elapsed();
                stats.record(ran.idx, ran.failed, took);
                note_slow(shared, client, cmd, took, ran.idx, commands);
                if ran
                    .idx
                    .is_some_and(|i| is_write.get(i).copied().unwrap_or(false))
                {
                    *wrote = true;
                }
                if raise {
                    parser.set_limits(authed_limits(shared));
                }
            }
            Ok(None) => break,
            Err(e) => {
                let e = match e {
                    ProtocolError::InvalidBulkLength if !client.authed => {
                        "unauthenticated bulk length".to_string()
                    }
                    ProtocolError::InvalidMultibulkLength if !client.authed => {
                        "unauthenticated multibulk length".to_string()
                    }
                    e => e.to_string(),
                };
                reply::error(out, &format!("ERR Protocol error: {e}"));
                stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
                client.close_after_reply = true;
                *rpos = inbuf.len();
            }
        }
    }
    if let Some((cmd, idx, timeout)) = blocked {
        park(c, env, &cmd, idx, timeout);
        return false;
    }
    if *rpos == inbuf.len() {
        inbuf.clear();
        *rpos = 0;
    }
    false
}
