//! Connection commands: `PING ECHO HELLO AUTH SELECT QUIT CLIENT`.

use super::{int_arg, is, spec, unknown_subcommand, Ctx, Spec, A, NOKEYS};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

/// The connection commands.
pub static SPECS: &[Spec] = &[
    spec(
        "ping",
        -1,
        A,
        NOKEYS,
        "connection",
        "Returns PONG, or the argument.",
        ping,
    ),
    spec(
        "echo",
        2,
        A,
        NOKEYS,
        "connection",
        "Returns the argument.",
        echo,
    ),
    spec(
        "hello",
        -1,
        A,
        NOKEYS,
        "connection",
        "Handshake: protocol 2 or 3, AUTH, SETNAME.",
        hello,
    ),
    spec(
        "auth",
        -2,
        A,
        NOKEYS,
        "connection",
        "Authenticates the connection.",
        auth,
    ),
    spec(
        "select",
        2,
        A,
        NOKEYS,
        "connection",
        "Selects database 0 (the only one).",
        select,
    ),
    spec(
        "quit",
        -1,
        A,
        NOKEYS,
        "connection",
        "Closes the connection.",
        quit,
    ),
    spec(
        "client",
        -2,
        A,
        NOKEYS,
        "connection",
        "CLIENT ID|SETNAME|GETNAME|LIST|INFO|SETINFO.",
        client,
    ),
];

fn ping(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    match c.len() {
        1 => reply::simple(ctx.out, "PONG"),
        2 => reply::bulk(ctx.out, c.arg(1)),
        _ => return Err(CmdError::Msg(super::arity_error("ping"))),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    reply::bulk(ctx.out, c.arg(1));
    Ok(())
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Checks a password (user must be `default`).
fn check_auth(ctx: &mut Ctx<'_>, user: Option<&[u8]>, pass: &[u8]) -> CmdResult<()> {
    let want = ctx.shared.config.requirepass.lock().clone();
    let Some(want) = want else {
        if user.is_some_and(|u| u != b"default") {
            return Err(CmdError::Msg(WRONGPASS.into()));
        }
        if user.is_none() {
            return Err(CmdError::err(
                "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        ctx.client.authed = true;
        return Ok(());
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    // Constant-time comparison of the password.
    let same = want.len() == pass.len()
        && want.iter().zip(pass).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if user_ok && same {
        ctx.client.authed = true;
        Ok(())
    } else {
        Err(CmdError::Msg(WRONGPASS.into()))
    }
}

fn auth(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    match c.len() {
        2 => check_auth(ctx, None, c.arg(1))?,
        3 => check_auth(ctx, Some(c.arg(1)), c.arg(2))?,
        _ => return Err(CmdError::Syntax),
    }
    reply::ok(ctx.out);
    Ok(())
}

fn hello(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let mut i = 1;
    let mut proto = None;
    if c.len() > 1 {
        let v = int_arg(c.arg(1))
            .map_err(|_| CmdError::err("Protocol version is not an integer or out of range"))?;
        if v != 2 && v != 3 {
            return Err(CmdError::Msg("NOPROTO unsupported protocol version".into()));
        }
        proto = Some(v);
        i = 2;
    }
    let mut name = None;
    while i < c.len() {
        if is(c.arg(i), "auth") && i + 2 < c.len() {
            check_auth(ctx, Some(c.arg(i + 1)), c.arg(i + 2))?;
            i += 3;
        } else if is(c.arg(i), "setname") && i + 1 < c.len() {
            name = Some(c.arg(i + 1).to_vec());
            i += 2;
        } else {
            return Err(CmdError::err(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(c.arg(i))
            )));
        }
    }
    if !ctx.client.authed {
        return Err(CmdError::Msg(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into(),
        ));
    }
    if let Some(n) = name {
        set_name(ctx, n)?;
    }
    if let Some(p) = proto {
        ctx.out.resp3 = p == 3;
        ctx.shared.clients.set_resp(ctx.client.id, p as u8);
    }
    let resp = if ctx.out.resp3 { 3 } else { 2 };
    let out = &mut *ctx.out;
    reply::map_header(out, 7);
    reply::bulk(out, b"server");
    reply::bulk(out, b"redis");
    reply::bulk(out, b"version");
    reply::bulk(out, crate::REDIS_COMPAT_VERSION.as_bytes());
    reply::bulk(out, b"proto");
    reply::int(out, resp);
    reply::bulk(out, b"id");
    reply::int(out, ctx.client.id as i64);
    reply::bulk(out, b"mode");
    reply::bulk(out, b"standalone");
    reply::bulk(out, b"role");
    reply::bulk(out, b"master");
    reply::bulk(out, b"modules");
    reply::array_header(out, 0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    match int_arg(c.arg(1))? {
        0 => {
            reply::ok(ctx.out);
            Ok(())
        }
        _ => Err(CmdError::err("DB index is out of range")),
    }
}

fn quit(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    ctx.client.close_after_reply = true;
    reply::ok(ctx.out);
    Ok(())
}

fn set_name(ctx: &mut Ctx<'_>, name: Vec<u8>) -> CmdResult<()> {
    if name.iter().any(|&b| b <= b' ' || b > b'~') {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    let name = (!name.is_empty()).then_some(name);
    ctx.shared.clients.set_name(ctx.client.id, name.clone());
    ctx.client.name = name;
    Ok(())
}

fn client(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "id") && c.len() == 2 {
        reply::int(ctx.out, ctx.client.id as i64);
    } else if is(sub, "setname") && c.len() == 3 {
        set_name(ctx, c.arg(2).to_vec())?;
        reply::ok(ctx.out);
    } else if is(sub, "getname") && c.len() == 2 {
        reply::opt_bulk(ctx.out, ctx.client.name.as_deref());
    } else if is(sub, "list") && c.len() == 2 {
        let text = ctx.shared.clients.list(ctx.client.id);
        reply::bulk(ctx.out, text.as_bytes());
    } else if is(sub, "info") && c.len() == 2 {
        let text = ctx.shared.clients.info_line(ctx.client.id);
        reply::bulk(ctx.out, text.as_bytes());
    } else if is(sub, "setinfo") && c.len() == 4 {
        // Client libraries announce their name and version; accepted and ignored.
        reply::ok(ctx.out);
    } else if is(sub, "help") {
        let lines: &[&[u8]] = &[
            b"CLIENT <subcommand> [<arg> ...]. Subcommands are:",
            b"ID",
            b"SETNAME <name>",
            b"GETNAME",
            b"LIST",
            b"INFO",
            b"SETINFO <attr> <value>",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else {
        return Err(unknown_subcommand(sub, "client"));
    }
    Ok(())
}
