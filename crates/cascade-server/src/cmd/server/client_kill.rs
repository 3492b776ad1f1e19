//! `CLIENT KILL`: the old form `CLIENT KILL addr:port` and the filter form
//! (`ID`, `TYPE normal|pubsub|replica|slave|master`, `ADDR`, `LADDR`, `SKIPME`), as
//! Sentinel sends `CLIENT KILL TYPE normal` and `TYPE pubsub` after a role change.
//!
//! A client connection is closed by its own worker (its mailbox is marked killed and
//! the worker woken); a replica link is closed by its replication thread.

use std::sync::atomic::Ordering;

use crate::cmd::{is, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

#[derive(Default)]
struct Filter {
    id: Option<u64>,
    ty: Option<String>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
}

fn parse(cmd: &Command) -> CmdResult<Filter> {
    let mut f = Filter {
        skipme: true,
        ..Filter::default()
    };
    let mut at = 2;
    while at < cmd.len() {
        if at + 1 >= cmd.len() {
            return Err(CmdError::Syntax);
        }
        let opt = cmd.arg(at);
        let text = String::from_utf8_lossy(cmd.arg(at + 1)).into_owned();
        if is(opt, "id") {
            f.id = Some(
                text.parse()
                    .map_err(|_| CmdError::err("client-id should be greater than 0"))?,
            );
        } else if is(opt, "type") {
            let t = text.to_ascii_lowercase();
            if !["normal", "pubsub", "replica", "slave", "master"].contains(&t.as_str()) {
                return Err(CmdError::err(format!("Unknown client type '{text}'")));
            }
            f.ty = Some(if t == "slave" { "replica".into() } else { t });
        } else if is(opt, "addr") {
            f.addr = Some(text);
        } else if is(opt, "laddr") {
            f.laddr = Some(text);
        } else if is(opt, "skipme") {
            f.skipme = match text.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => return Err(CmdError::Syntax),
            };
        } else {
            return Err(CmdError::Syntax);
        }
        at += 2;
    }
    Ok(f)
}

/// `CLIENT KILL ...`.
pub(crate) fn kill(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let old_form = c.len() == 3;
    let f = if old_form {
        Filter {
            addr: Some(String::from_utf8_lossy(c.arg(2)).into_owned()),
            skipme: false,
            ..Filter::default()
        }
    } else {
        parse(c)?
    };
    let mut n = 0i64;
    let ty = f.ty.as_deref();
    if matches!(ty, None | Some("normal" | "pubsub")) {
        for (id, addr, laddr, pubsub) in ctx.shared.clients.summary() {
            let kind = if pubsub { "pubsub" } else { "normal" };
            if (f.skipme && id == ctx.client.id)
                || f.id.is_some_and(|x| x != id)
                || ty.is_some_and(|t| t != kind)
                || f.addr.as_ref().is_some_and(|a| *a != addr)
                || f.laddr.as_ref().is_some_and(|a| *a != laddr)
            {
                continue;
            }
            if id == ctx.client.id {
                ctx.client.close_after_reply = true;
                n += 1;
            } else if let Some(mb) = ctx.shared.store.tracking().mailbox(id) {
                mb.kill();
                n += 1;
            }
        }
    }
    if matches!(ty, None | Some("replica")) {
        for p in ctx.shared.repl.peers() {
            let addr = format!("{}:{}", p.ip, p.port);
            if f.id.is_some_and(|x| x != p.id) || f.addr.as_ref().is_some_and(|a| *a != addr) {
                continue;
            }
            p.kill.store(true, Ordering::Release);
            n += 1;
        }
    }
    if old_form {
        if n == 0 {
            return Err(CmdError::err("No such client"));
        }
        reply::ok(ctx.out);
    } else {
        reply::int(ctx.out, n);
    }
    Ok(())
}
