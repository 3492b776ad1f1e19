//! Transactions: `MULTI EXEC DISCARD WATCH UNWATCH`, with Redis's semantics.
//!
//! After MULTI the dispatcher queues commands (`+QUEUED`); a command that fails to
//! queue (unknown, wrong arity) makes EXEC answer `EXECABORT`. EXEC takes the stripe
//! locks of every key of every queued command (all stripes if one is FLUSHDB), runs
//! them in order on one [`Tx`] — each sees the writes of those before it — and commits
//! them as one atomic engine batch, so the whole block is durable as one. A command
//! that fails inside EXEC replies its error in the array and the others still run, as
//! in Redis. Blocking commands do not block inside EXEC.
//!
//! WATCH registers the client's dirty flag for each key (`notify.rs`) and remembers
//! whether the key was live; EXEC answers the null array if a watched key was changed
//! (by any client, FLUSHDB, a write inside another EXEC) or expired since WATCH.
//! Control handlers: they use the connection's state.

use std::sync::atomic::Ordering;

use super::{spec, Ctx, Keys, Run, Run::Ctl, Spec, A, KEY1};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Tx;

/// The transaction commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "multi",
        1,
        A,
        Keys::None,
        "transactions",
        "Starts a transaction.",
        Ctl(multi),
    ),
    spec(
        "exec",
        1,
        &["noscript"],
        Keys::None,
        "transactions",
        "Runs the queued commands atomically.",
        Ctl(exec),
    ),
    spec(
        "discard",
        1,
        A,
        Keys::None,
        "transactions",
        "Drops the queued commands.",
        Ctl(discard),
    ),
    spec(
        "watch",
        -2,
        A,
        Keys::Range(1, -1, 1),
        "transactions",
        "Aborts the next EXEC if these keys change.",
        Ctl(watch),
    ),
    spec(
        "unwatch",
        1,
        A,
        KEY1,
        "transactions",
        "Forgets every watched key.",
        Ctl(unwatch),
    ),
];

/// Commands refused inside MULTI (Redis's `no-multi` flag); the transaction then
/// fails at EXEC.
pub(crate) const NOT_IN_MULTI: &[&str] = &["save", "shutdown"];

/// Commands that run at once inside MULTI instead of being queued.
pub(crate) const IMMEDIATE: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

fn multi(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Vec::new());
    ctx.client.multi_failed = false;
    reply::ok(ctx.out);
    Ok(())
}

fn discard(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    if ctx.client.multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client.multi_failed = false;
    ctx.client.unwatch(&ctx.shared.store);
    reply::ok(ctx.out);
    Ok(())
}

fn watch(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if ctx.client.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let store = &ctx.shared.store;
    let db = ctx.client.db;
    // Under the keys' stripe locks: SWAPDB (all stripes) cannot change the database
    // map between qualifying a key and registering it.
    let _locks = store.lock_many(c.args().skip(1));
    let probe = Tx::in_db(store, db);
    for k in c.args().skip(1) {
        if ctx
            .client
            .watched
            .iter()
            .any(|(d, w, _)| *d == db && w == k)
        {
            continue;
        }
        let live = probe.meta(k)?.is_some();
        store
            .notify()
            .watch(ctx.client.id, &store.qualify(db, k), &ctx.client.dirty);
        ctx.client.watched.push((db, k.to_vec(), live));
    }
    reply::ok(ctx.out);
    Ok(())
}

fn unwatch(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    ctx.client.unwatch(&ctx.shared.store);
    reply::ok(ctx.out);
    Ok(())
}

fn exec(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    let Some(queue) = ctx.client.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let failed = std::mem::take(&mut ctx.client.multi_failed);
    let shared = ctx.shared;
    let store = &shared.store;
    let commands = ctx.commands;
    let specs: Vec<_> = queue
        .iter()
        .map(|c| commands.lookup(c.arg(0)).map(|i| commands.specs[i]))
        .collect();
    let all = specs.iter().flatten().any(|s| s.keys == Keys::All);
    // Scripts queued here run on the script thread, which needs the gate itself:
    // such a block is isolated by its stripe locks only.
    let scripted = specs
        .iter()
        .flatten()
        .any(|s| crate::cmd::scripting::is_script_command(s.name));
    let _gate = if scripted {
        None
    } else {
        Some(store.gate().enter()?)
    };
    let _locks = if all {
        store.lock_all()
    } else {
        let mut keys: Vec<&[u8]> = Vec::new();
        for (c, s) in queue.iter().zip(&specs) {
            if let Some(s) = s {
                keys.extend(s.keys.of(c));
            }
        }
        // A watched key is qualified by its database: its stripe is the user key's.
        keys.extend(ctx.client.watched.iter().map(|(_, k, _)| k.as_slice()));
        store.lock_many(keys)
    };
    // Under the locks: no watched key can change between this check and the commit.
    let mut dirty = ctx.client.dirty.load(Ordering::Acquire);
    for (db, k, was_live) in &ctx.client.watched {
        if *was_live && Tx::in_db(store, *db).meta(k)?.is_none() {
            dirty = true;
        }
    }
    ctx.client.unwatch(store);
    if failed {
        return Err(CmdError::Msg(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    if dirty {
        reply::nil_array(ctx.out);
        return Ok(());
    }
    let start = ctx.out.buf.len();
    reply::array_header(ctx.out, queue.len());
    let mut tx = Tx::in_db(store, ctx.client.db);
    tx.set_origin(ctx.client.id);
    // Scripts inside EXEC answer in place (the connection is not left waiting).
    let wake = ctx.client.wake.take();
    for (c, s) in queue.iter().zip(specs) {
        let Some(s) = s else {
            reply::error(ctx.out, "ERR unknown command");
            continue;
        };
        let mark = ctx.out.buf.len();
        let res = match s.run {
            Run::Data(f) => f(&mut tx, c, ctx.out).map(|()| super::events::record(&mut tx, &s, c)),
            Run::Ctl(f) => f(ctx, c),
        };
        match res {
            Err(e) => {
                ctx.out.buf.truncate(mark);
                reply::error(ctx.out, &e.to_string());
            }
            // Client-side caching remembers what the block read as it reads (every
            // key is locked until the commit, whose invalidations come after).
            Ok(()) if tx.tracking() && matches!(s.run, Run::Data(_)) => {
                crate::tracking::after_read(store, ctx.client, &s, c);
            }
            Ok(()) => {}
        }
        // SELECT inside the transaction: the commands after it use the new database.
        tx.switch_db(ctx.client.db);
    }
    ctx.client.wake = wake;
    if let Err(e) = store.commit(tx) {
        ctx.out.buf.truncate(start);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn queue_and_exec() {
        let mut k = Kit::new();
        k.ok(&["MULTI"]);
        k.expect(&["SET", "a", "1"], "+QUEUED\r\n");
        k.expect(&["INCR", "a"], "+QUEUED\r\n");
        k.expect(&["LPUSH", "a", "x"], "+QUEUED\r\n");
        k.expect(&["GET", "a"], "+QUEUED\r\n");
        k.expect(&["MULTI"], "-ERR MULTI calls can not be nested\r\n");
        k.expect(
            &["EXEC"],
            "*4\r\n+OK\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n$1\r\n2\r\n",
        );
        k.expect(&["EXEC"], "-ERR EXEC without MULTI\r\n");
        k.expect(&["DISCARD"], "-ERR DISCARD without MULTI\r\n");
        k.ok(&["MULTI"]);
        k.expect(
            &["SET", "a"],
            "-ERR wrong number of arguments for 'set' command\r\n",
        );
        k.expect(
            &["NOSUCH"],
            "-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
        );
        k.expect(
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        );
        k.ok(&["MULTI"]);
        k.expect(&["SET", "a", "9"], "+QUEUED\r\n");
        k.ok(&["DISCARD"]);
        k.expect(&["GET", "a"], "$1\r\n2\r\n");
    }

    #[test]
    fn flush_inside_exec_is_ordered() {
        let mut k = Kit::new();
        k.ok(&["SET", "old", "1"]);
        k.ok(&["MULTI"]);
        k.expect(&["SET", "a", "1"], "+QUEUED\r\n");
        k.expect(&["FLUSHDB"], "+QUEUED\r\n");
        k.expect(&["SET", "b", "2"], "+QUEUED\r\n");
        k.expect(&["DBSIZE"], "+QUEUED\r\n");
        k.expect(&["EXEC"], "*4\r\n+OK\r\n+OK\r\n+OK\r\n:1\r\n");
        k.expect(&["KEYS", "*"], "*1\r\n$1\r\nb\r\n");
        k.expect(&["DBSIZE"], ":1\r\n");
    }

    #[test]
    fn watch_detects_changes() {
        let mut k = Kit::new();
        k.ok(&["SET", "w", "1"]);
        k.ok(&["WATCH", "w"]);
        k.ok(&["SET", "w", "2"]);
        k.ok(&["MULTI"]);
        k.expect(&["SET", "x", "1"], "+QUEUED\r\n");
        k.expect(&["EXEC"], "*-1\r\n");
        k.expect(&["EXISTS", "x"], ":0\r\n");
        // After EXEC nothing is watched.
        k.ok(&["MULTI"]);
        k.expect(&["SET", "x", "1"], "+QUEUED\r\n");
        k.expect(&["EXEC"], "*1\r\n+OK\r\n");
        // Unmodified: runs.
        k.ok(&["WATCH", "w", "nokey"]);
        k.ok(&["MULTI"]);
        k.expect(&["EXEC"], "*0\r\n");
        // UNWATCH forgets.
        k.ok(&["WATCH", "w"]);
        k.ok(&["UNWATCH"]);
        k.ok(&["SET", "w", "3"]);
        k.ok(&["MULTI"]);
        k.expect(&["EXEC"], "*0\r\n");
        // FLUSHDB touches watched keys that exist, not missing ones.
        k.ok(&["WATCH", "nokey"]);
        k.ok(&["FLUSHDB"]);
        k.ok(&["MULTI"]);
        k.expect(&["EXEC"], "*0\r\n");
        k.ok(&["SET", "w", "1"]);
        k.ok(&["WATCH", "w"]);
        k.ok(&["FLUSHALL"]);
        k.ok(&["MULTI"]);
        k.expect(&["EXEC"], "*-1\r\n");
        // Expiry after WATCH counts as a change.
        k.ok(&["SET", "e", "1", "PX", "20"]);
        k.ok(&["WATCH", "e"]);
        std::thread::sleep(std::time::Duration::from_millis(30));
        k.ok(&["MULTI"]);
        k.expect(&["EXEC"], "*-1\r\n");
        k.expect(&["MULTI"], "+OK\r\n");
        k.expect(
            &["WATCH", "a"],
            "-ERR WATCH inside MULTI is not allowed\r\n",
        );
        k.expect(
            &["SHUTDOWN"],
            "-ERR Command not allowed inside a transaction\r\n",
        );
        k.expect(
            &["EXEC"],
            "-EXECABORT Transaction discarded because of previous errors.\r\n",
        );
    }
}
