//! Replication commands: `REPLICAOF`/`SLAVEOF`, `REPLCONF`, `PSYNC`/`SYNC`, `WAIT`
//! and `ROLE`. The machinery is `crate::replication`; these only parse and answer.

use std::net::ToSocketAddrs;
use std::sync::Arc;

use super::{is, spec, Ctx, Keys, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::replication::{self, info};
use crate::resp::parse::Command;
use crate::resp::reply;

/// Flags of the commands that change the role.
const ADMIN: &[&str] = &["admin", "noscript", "stale", "no-async-loading"];

/// The replication commands.
pub(crate) static SPECS: &[Spec] = &[
    spec("replicaof", 3, ADMIN, Keys::None, "server", "Makes the server a replica of another instance, or promotes it to primary.", super::Run::Ctl(replicaof)),
    spec("slaveof", 3, ADMIN, Keys::None, "server", "Makes the server a replica of another instance, or promotes it to primary.", super::Run::Ctl(replicaof)),
    spec("replconf", -1, ADMIN, Keys::None, "server", "An internal command for configuring the replication stream.", super::Run::Ctl(replconf)),
    spec("psync", -3, ADMIN, Keys::None, "server", "An internal command used in replication.", super::Run::Ctl(psync)),
    spec("sync", 1, ADMIN, Keys::None, "server", "An internal command used in replication.", super::Run::Ctl(sync)),
    spec("wait", 3, &["noscript"], Keys::None, "generic", "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", super::Run::Ctl(wait)),
    spec("role", 1, A, Keys::None, "server", "Returns the replication role.", super::Run::Ctl(role)),
];

/// True when `host:port` is this server itself.
fn is_self(ctx: &Ctx<'_>, host: &str, port: u16) -> bool {
    if port != ctx.shared.port {
        return false;
    }
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    let bind = ctx.shared.fixed.bind.as_str();
    let bound: Vec<std::net::IpAddr> = (bind, port)
        .to_socket_addrs()
        .map(|a| a.map(|x| x.ip()).collect())
        .unwrap_or_default();
    addrs.into_iter().any(|a| {
        let ip = a.ip();
        ip.is_loopback() || ip.is_unspecified() || bound.contains(&ip)
    })
}

fn replicaof(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let (host, port) = (c.arg(1), c.arg(2));
    if is(host, "no") && is(port, "one") {
        replication::become_primary(ctx.shared)?;
        eprintln!("cascade: MASTER MODE enabled (REPLICAOF NO ONE)");
        reply::ok(ctx.out);
        return Ok(());
    }
    let port: u16 = std::str::from_utf8(port)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("Invalid master port"))?;
    let host = String::from_utf8_lossy(host).into_owned();
    if is_self(ctx, &host, port) {
        return Err(CmdError::err(
            "Can't replicate from myself: that address is this server",
        ));
    }
    let same = ctx
        .shared
        .repl
        .with_state(|s| s.master.as_ref() == Some(&(host.clone(), port)));
    if same {
        reply::simple(ctx.out, "OK Already connected to specified master");
        return Ok(());
    }
    let Some(shared) = ctx.shared.repl.shared() else {
        return Err(CmdError::err("replication is not running in this process"));
    };
    replication::become_replica(&shared, host.clone(), port);
    eprintln!("cascade: REPLICAOF {host}:{port} enabled");
    reply::ok(ctx.out);
    Ok(())
}

fn replconf(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if c.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut i = 1;
    while i + 1 < c.len() {
        let (opt, v) = (c.arg(i), c.arg(i + 1));
        if is(opt, "listening-port") {
            ctx.client.repl.listening_port = std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| CmdError::err("value is not an integer or out of range"))?;
        } else if is(opt, "ip-address") {
            ctx.client.repl.ip = Some(String::from_utf8_lossy(v).into_owned());
        } else if is(opt, "ack") || is(opt, "getack") {
            // Acks arrive on the replica link itself; on a normal connection (or a
            // GETACK, whose ack the link sends every second anyway) there is no reply.
            return Ok(());
        } else if !is(opt, "capa") && !is(opt, "rdb-only") && !is(opt, "rdb-filter-only") {
            return Err(CmdError::err(format!(
                "Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(opt)
            )));
        }
        i += 2;
    }
    reply::ok(ctx.out);
    Ok(())
}

fn psync(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if ctx.client.multi.is_some() || ctx.client.wake.is_none() {
        return Err(CmdError::err("Replica can't interact with the keyspace"));
    }
    if ctx.shared.repl.loading() {
        return Err(CmdError::Msg(
            "NOMASTERLINK Can't SYNC while not connected with my master".into(),
        ));
    }
    let offset = std::str::from_utf8(c.arg(2))
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or(-1);
    ctx.client.repl.psync = Some((String::from_utf8_lossy(c.arg(1)).into_owned(), offset));
    Ok(())
}

fn sync(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    if ctx.client.wake.is_none() {
        return Err(CmdError::err("Replica can't interact with the keyspace"));
    }
    ctx.client.repl.psync = Some(("?".into(), -1));
    Ok(())
}

fn wait(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let n = super::int_arg(c.arg(1))?;
    let t = super::int_arg(c.arg(2))?;
    if t < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ctx.shared.store.feed().is_replica() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 \
             if a replica is configured to be writable (which is not the default) writes to \
             replicas are just local and are not propagated.",
        ));
    }
    let target = ctx.shared.store.feed().offset();
    let have = ctx.shared.repl.acked(target);
    let need = usize::try_from(n).unwrap_or(0);
    if have >= need || ctx.client.wake.is_none() || ctx.client.multi.is_some() {
        reply::int(ctx.out, i64::try_from(have).unwrap_or(0));
        return Ok(());
    }
    let slot = Arc::new(crate::scripting::Slot::new(ctx.client.wake.clone()));
    ctx.client.script = Some(slot.clone());
    ctx.shared
        .repl
        .park_wait(slot, target, need, u64::try_from(t).unwrap_or(0));
    Ok(())
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "every handler has the table's signature"
)]
fn role(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    info::role(ctx.shared, ctx.out);
    Ok(())
}
