//! Connection commands: `PING ECHO HELLO AUTH SELECT QUIT CLIENT`.

use crate::cmd::{int_arg, is, spec, unknown_subcommand, Ctx, Keys, ReplyMode, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

/// The connection commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "ping",
        -1,
        A,
        Keys::None,
        "connection",
        "Returns PONG, or the argument.",
        Ctl(ping),
    ),
    spec(
        "echo",
        2,
        A,
        Keys::None,
        "connection",
        "Returns the argument.",
        Ctl(echo),
    ),
    spec(
        "hello",
        -1,
        A,
        Keys::None,
        "connection",
        "Handshake: protocol 2 or 3, AUTH, SETNAME.",
        Ctl(hello),
    ),
    spec(
        "auth",
        -2,
        A,
        Keys::None,
        "connection",
        "Authenticates the connection.",
        Ctl(auth),
    ),
    spec(
        "select",
        2,
        A,
        Keys::None,
        "connection",
        "Selects the database of later commands.",
        Ctl(select),
    ),
    spec(
        "quit",
        -1,
        A,
        Keys::None,
        "connection",
        "Closes the connection.",
        Ctl(quit),
    ),
    spec(
        "client",
        -2,
        A,
        Keys::None,
        "connection",
        "CLIENT ID|SETNAME|GETNAME|LIST|INFO|SETINFO|REPLY|UNBLOCK|TRACKING|CACHING|GETREDIR|TRACKINGINFO.",
        Ctl(client),
    ),
];

fn ping(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if ctx.client.subs.active() && !ctx.out.resp3 && c.len() <= 2 {
        let arg = if c.len() == 2 { c.arg(1) } else { b"" };
        crate::cmd::pubsub::subscribed_ping(&mut ctx.out.buf, arg);
        return Ok(());
    }
    match c.len() {
        1 => reply::simple(ctx.out, "PONG"),
        2 => reply::bulk(ctx.out, c.arg(1)),
        _ => return Err(CmdError::Msg(crate::cmd::arity_error("ping"))),
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
        ctx.client.mailbox.set_resp3(p == 3);
        ctx.shared
            .clients
            .set_resp(ctx.client.id, if p == 3 { 3 } else { 2 });
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
    reply::int(out, i64::try_from(ctx.client.id).unwrap_or(i64::MAX));
    reply::bulk(out, b"mode");
    reply::bulk(out, b"standalone");
    reply::bulk(out, b"role");
    reply::bulk(out, b"master");
    reply::bulk(out, b"modules");
    reply::array_header(out, 0);
    Ok(())
}

fn select(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    ctx.client.db = super::databases::db_index(ctx.shared, c.arg(1))?;
    reply::ok(ctx.out);
    Ok(())
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

/// CLIENT LIST's filters: `TYPE normal|master|replica|slave|pubsub` and `ID id ...`.
#[derive(Debug, Default)]
struct ListFilter {
    /// `Some(true)`: pub/sub clients only; `Some(false)`: the others; a replica or
    /// master link is never in the list (the replication threads own those sockets).
    pubsub: Option<bool>,
    links: bool,
    ids: Option<Vec<u64>>,
}

impl ListFilter {
    /// Whether CLIENT LIST shows client `id` (`pubsub`: it is subscribed).
    fn admits(&self, id: u64, pubsub: bool) -> bool {
        !self.links
            && self.pubsub.is_none_or(|p| p == pubsub)
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&id))
    }
}

fn list_filter(c: &Command) -> CmdResult<ListFilter> {
    let mut f = ListFilter::default();
    let mut i = 2;
    while i < c.len() {
        if is(c.arg(i), "type") && i + 1 < c.len() {
            let t = c.arg(i + 1).to_ascii_lowercase();
            match t.as_slice() {
                b"normal" => f.pubsub = Some(false),
                b"pubsub" => f.pubsub = Some(true),
                b"master" | b"replica" | b"slave" => f.links = true,
                _ => {
                    return Err(CmdError::err(format!(
                        "Unknown client type '{}'",
                        String::from_utf8_lossy(c.arg(i + 1))
                    )))
                }
            }
            i += 2;
        } else if is(c.arg(i), "id") && i + 1 < c.len() {
            let mut ids = Vec::new();
            i += 1;
            while i < c.len() {
                let id = std::str::from_utf8(c.arg(i))
                    .ok()
                    .and_then(|t| t.parse::<u64>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| CmdError::err("Invalid client ID"))?;
                ids.push(id);
                i += 1;
            }
            f.ids = Some(ids);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(f)
}

fn client(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    // TRACKING, CACHING, GETREDIR, TRACKINGINFO: client-side caching (`crate::tracking`).
    if let Some(res) = crate::tracking::client_command(ctx, c) {
        return res;
    }
    let sub = c.arg(1);
    if is(sub, "id") && c.len() == 2 {
        reply::int(ctx.out, i64::try_from(ctx.client.id).unwrap_or(i64::MAX));
    } else if is(sub, "setname") && c.len() == 3 {
        set_name(ctx, c.arg(2).to_vec())?;
        reply::ok(ctx.out);
    } else if is(sub, "getname") && c.len() == 2 {
        reply::opt_bulk(ctx.out, ctx.client.name.as_deref());
    } else if is(sub, "list") || (is(sub, "info") && c.len() == 2) {
        let keep = if is(sub, "list") {
            list_filter(c)?
        } else {
            ListFilter::default()
        };
        // The caller's own `cmd` is this command (the worker notes a command after it).
        let me = ctx.shared.clients.live(ctx.client.id);
        if let Some(i) = ctx.commands.lookup(c.arg(0)) {
            super::command::note_last(&me, ctx.commands, c, i, ctx.client.db);
        }
        let commands = ctx.commands;
        let names = |p: u64| super::command::cmd_field(commands, p);
        let text = if is(sub, "list") {
            ctx.shared
                .clients
                .list(&names, &|id, pubsub| keep.admits(id, pubsub))
        } else {
            ctx.shared.clients.info_line(ctx.client.id, &names)
        };
        reply::bulk(ctx.out, text.as_bytes());
    } else if is(sub, "unblock") && (c.len() == 3 || c.len() == 4) {
        let id = crate::cmd::int_arg(c.arg(2))?;
        let error = match c.len() {
            3 => false,
            _ if is(c.arg(3), "timeout") => false,
            _ if is(c.arg(3), "error") => true,
            _ => {
                return Err(CmdError::err(
                    "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                ))
            }
        };
        let done = u64::try_from(id).is_ok_and(|id| ctx.shared.store.notify().unblock(id, error));
        reply::int(ctx.out, i64::from(done));
    } else if is(sub, "reply") && c.len() == 3 {
        let mode = c.arg(2);
        ctx.client.reply_mode = if is(mode, "on") {
            ReplyMode::On
        } else if is(mode, "off") {
            ReplyMode::Off
        } else if is(mode, "skip") {
            ReplyMode::Skip
        } else {
            return Err(CmdError::Syntax);
        };
        if ctx.client.reply_mode == ReplyMode::On {
            reply::ok(ctx.out);
        }
    } else if is(sub, "kill") && c.len() >= 3 {
        return super::client_kill::kill(ctx, c);
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
            b"REPLY (ON|OFF|SKIP)",
            b"UNBLOCK <clientid> [TIMEOUT|ERROR]",
            b"KILL <ip:port>",
            b"KILL <option> <value> [<option> <value> [...]]: ID, TYPE (normal|master|replica|pubsub), ADDR, LADDR, SKIPME (yes|no)",
            b"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
            b"CACHING (YES|NO)",
            b"GETREDIR",
            b"TRACKINGINFO",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else {
        return Err(unknown_subcommand(sub, "client"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::{Kit, Value};

    #[test]
    fn ping_echo_select_quit() {
        let mut k = Kit::new();
        k.expect(&["PING"], "+PONG\r\n");
        k.expect(&["ping", "hi"], "$2\r\nhi\r\n");
        k.expect(
            &["PING", "a", "b"],
            "-ERR wrong number of arguments for 'ping' command\r\n",
        );
        k.expect(&["ECHO", "x"], "$1\r\nx\r\n");
        k.ok(&["SELECT", "0"]);
        k.ok(&["SELECT", "15"]);
        k.expect(&["SELECT", "16"], "-ERR DB index is out of range\r\n");
        k.expect(&["SELECT", "-1"], "-ERR DB index is out of range\r\n");
        k.expect(&["CLIENT", "UNBLOCK", "999"], ":0\r\n");
        k.expect(
            &["CLIENT", "UNBLOCK", "x"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.expect(
            &["CLIENT", "UNBLOCK", "1", "LATER"],
            "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
        );
        k.expect(
            &["SELECT", "x"],
            "-ERR value is not an integer or out of range\r\n",
        );
        assert!(!k.client.close_after_reply);
        k.ok(&["QUIT"]);
        assert!(k.client.close_after_reply);
    }

    #[test]
    fn hello_and_resp3() {
        let mut k = Kit::new();
        k.expect(&["HELLO", "4"], "-NOPROTO unsupported protocol version\r\n");
        k.expect(
            &["HELLO", "x"],
            "-ERR Protocol error: Protocol version is not an integer or out of range\r\n"
                .replace("Protocol error: ", "")
                .as_str(),
        );
        let v = k.value(&["HELLO", "3", "SETNAME", "me"]);
        let Value::Arr(fields) = v else {
            panic!("{v:?}")
        };
        assert_eq!(fields[0], Value::Str("server".into()));
        assert_eq!(fields[5], Value::Int(3));
        assert!(k.out.resp3);
        k.expect(&["CLIENT", "GETNAME"], "$2\r\nme\r\n");
        k.expect(&["GET", "missing"], "_\r\n");
        k.expect(&["HGETALL", "missing"], "%0\r\n");
        k.expect(
            &["HELLO", "2", "BOGUS"],
            "-ERR Syntax error in HELLO option 'BOGUS'\r\n",
        );
        k.value(&["HELLO", "2"]);
        assert!(!k.out.resp3);
    }

    #[test]
    fn auth_and_noauth() {
        let mut k = Kit::new();
        k.expect(&["AUTH", "pw"], "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
        k.ok(&["CONFIG", "SET", "requirepass", "secret"]);
        k.client.authed = false;
        k.expect(&["GET", "a"], "-NOAUTH Authentication required.\r\n");
        k.expect(
            &["AUTH", "wrong"],
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        );
        k.expect(
            &["AUTH", "other", "secret"],
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        );
        k.ok(&["AUTH", "default", "secret"]);
        k.expect(&["GET", "a"], "$-1\r\n");
    }

    #[test]
    fn client_subcommands() {
        let mut k = Kit::new();
        k.shared
            .clients
            .add(1, "127.0.0.1:50000".into(), "127.0.0.1:6380".into());
        k.expect(&["CLIENT", "ID"], ":1\r\n");
        k.expect(&["CLIENT", "GETNAME"], "$-1\r\n");
        k.expect(
            &["CLIENT", "SETNAME", "a b"],
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
        );
        k.ok(&["CLIENT", "SETNAME", "worker"]);
        let list = k.strings(&["CLIENT", "LIST"]).join("\n");
        assert!(
            list.contains("id=1 addr=127.0.0.1:50000 laddr=127.0.0.1:6380 "),
            "{list}"
        );
        assert!(list.contains(" name=worker "), "{list}");
        let info = k.strings(&["CLIENT", "INFO"]).join("\n");
        assert!(info.starts_with("id=1 "), "{info}");
        k.ok(&["CLIENT", "SETINFO", "lib-name", "x"]);
        k.expect(
            &["CLIENT", "NOPE"],
            "-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n",
        );
    }
}
