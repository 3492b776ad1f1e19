//! The `redis.*` API's Rust side: the command runner behind `redis.call` and
//! `redis.pcall` ([`call`]), and the helpers the prelude (`prelude.lua`) wraps
//! (`sha1hex`, `log`, `setresp`, `set_repl`, `acl_check_cmd`, the kill probe).
//!
//! A script's commands run on the script's one [`Tx`] (no stripe locks: the script
//! holds the gate exclusively, `gate.rs`), with a fake client of its own as Redis's
//! Lua client, and their replies are encoded in the script's RESP version
//! (`redis.setresp`) and parsed back into Lua values (`convert.rs`). The runner never
//! raises a Lua error itself: it returns `(ok, value)` and the Lua wrapper raises
//! (redis.call) or returns (redis.pcall) the error table.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Lua, MultiValue, Table, Value};

use super::convert;
use crate::cmd::{Client, Commands, Ctx, Run};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;
use crate::store::Tx;

/// Commands a script may not call (Redis's `noscript` flag).
const NOSCRIPT: &[&str] = &[
    "cluster",
    "clusterx",
    "auth",
    "hello",
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "reset",
    "quit",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "function",
    "script",
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "bzpopmin",
    "bzpopmax",
    "client",
    "config",
    "debug",
    "save",
    "bgsave",
    "bgrewriteaof",
    "shutdown",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "latency",
    "acl",
];

/// What a running script's commands work with.
pub(crate) struct RunCtx<'s> {
    /// The script's reads and pending writes (committed once at the end).
    pub(crate) tx: Tx<'s>,
    /// Server state (control commands).
    pub(crate) shared: &'s Shared,
    /// The command table.
    pub(crate) commands: &'s Commands,
    /// The fake client control commands run as.
    pub(crate) client: Client,
    /// `EVAL_RO` / `FCALL_RO` / a `no-writes` script: write commands are refused.
    pub(crate) read_only: bool,
    /// A read-only command ran (client-side caching remembers the declared keys).
    pub(crate) read_any: bool,
    /// The script's RESP version is 3 (`redis.setresp(3)`).
    pub(crate) resp3: Rc<Cell<bool>>,
}

/// `redis.call`/`redis.pcall`'s runner: `(true, reply)` or `(false, {err=...})`.
pub(crate) fn call(
    lua: &Lua,
    run: &RefCell<RunCtx<'_>>,
    (n, args): (usize, Table),
) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| -> mlua::Result<(bool, Value)> {
        Ok((
            false,
            Value::Table(convert::error_table(lua, msg.as_bytes())?),
        ))
    };
    if n == 0 {
        return fail("Please specify at least one argument for this redis lib call");
    }
    let mut words: Vec<Vec<u8>> = Vec::with_capacity(n);
    for i in 1..=n {
        match &args.raw_get::<Value>(i)? {
            Value::String(s) => words.push(s.as_bytes().to_vec()),
            Value::Number(n) => words.push(reply::format_double(*n).into_bytes()),
            Value::Integer(n) => words.push(n.to_string().into_bytes()),
            _ => return fail("Lua redis lib command arguments must be strings or integers"),
        }
    }
    let mut run = run.borrow_mut();
    let run = &mut *run;
    let Some(i) = run.commands.lookup(&words[0]) else {
        // CLUSTER is refused in scripts by Redis (noscript) before it is looked at.
        if words[0].eq_ignore_ascii_case(b"cluster") {
            return fail("This Redis command is not allowed from script");
        }
        return fail("Unknown Redis command called from script");
    };
    let spec = run.commands.specs[i];
    let n = i64::try_from(words.len()).unwrap_or(i64::MAX);
    let a = i64::from(spec.arity);
    if (a > 0 && n != a) || (a < 0 && n < -a) {
        return fail("Wrong number of args calling Redis command from script");
    }
    if NOSCRIPT.contains(&spec.name) {
        return fail("This Redis command is not allowed from script");
    }
    if run.read_only && spec.writes() {
        return fail("Write commands are not allowed from read-only scripts.");
    }
    // A script cannot wait: XREAD/XREADGROUP refuse BLOCK there, as in Redis.
    if matches!(spec.name, "xread" | "xreadgroup")
        && words
            .iter()
            .skip(1)
            .take_while(|w| !w.eq_ignore_ascii_case(b"streams"))
            .any(|w| w.eq_ignore_ascii_case(b"block"))
    {
        return fail(&format!(
            "{} command is not allowed with BLOCK option from scripts",
            spec.name
        ));
    }
    let cmd = Command::from_args(&words);
    let mut out = Out {
        buf: Vec::new(),
        resp3: run.resp3.get(),
    };
    let res = match spec.run {
        // Keyspace notifications of a script's writes, as for the same command sent
        // by a client (published at the script's commit).
        Run::Data(f) => f(&mut run.tx, &cmd, &mut out)
            .map(|()| crate::cmd::events::record(&mut run.tx, &spec, &cmd)),
        Run::Ctl(f) => {
            let mut ctx = Ctx {
                shared: run.shared,
                commands: run.commands,
                client: &mut run.client,
                out: &mut out,
            };
            let ran = f(&mut ctx, &cmd);
            // SELECT inside a script: its later commands use that database (the
            // caller's own stays as it was, as in Redis 7).
            let selected = run.client.db;
            run.tx.switch_db(selected);
            ran
        }
    };
    match res {
        Err(e) => {
            out.buf.clear();
            reply::error(&mut out, &e.to_string());
        }
        Ok(()) => run.shared.store.access().after(run.tx.db(), &spec, &cmd),
    }
    if out.buf.first() == Some(&b'-') {
        let end = out.buf.len().saturating_sub(2);
        return Ok((
            false,
            Value::Table(convert::error_table(lua, &out.buf[..end])?),
        ));
    }
    if spec.writes() {
        run.shared.store.gate().note_write();
    }
    if spec.flags.contains(&"readonly") {
        run.read_any = true;
    }
    let v = convert::reply_to_lua(lua, &out.buf, &mut 0)?;
    Ok((true, v))
}

/// A Lua number (mlua hands integral numbers over as `Integer`).
#[expect(clippy::cast_precision_loss, reason = "Lua 5.1 numbers are doubles")]
pub(crate) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => Some(*n),
        Value::Integer(n) => Some(*n as f64),
        _ => None,
    }
}

/// A Lua error with `msg` as its text (the handler makes it `ERR msg`).
pub(crate) fn lua_err(msg: &str) -> mlua::Error {
    mlua::Error::external(msg.to_string())
}

/// The helpers table handed to the prelude.
#[expect(
    clippy::too_many_lines,
    reason = "one small closure per helper, in one table"
)]
pub(crate) fn helpers(
    lua: &Lua,
    shared: &Arc<Shared>,
    resp3: &Rc<Cell<bool>>,
) -> mlua::Result<Table> {
    let h = lua.create_table()?;
    h.set(
        "sha1hex",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(lua_err("wrong number of arguments"));
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                v => number(v)
                    .map(|n| reply::format_double(n).into_bytes())
                    .unwrap_or_default(),
            };
            Ok(sha1_hex(&bytes))
        })?,
    )?;
    h.set(
        "errtext",
        lua.create_function(|lua, s: mlua::LuaString| {
            lua.create_string(convert::error_text(&s.as_bytes()))
        })?,
    )?;
    h.set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            if args.len() < 2 {
                return Err(lua_err("redis.log() requires two arguments or more."));
            }
            let level = match number(&args[0]) {
                Some(n) if (0.0..=3.0).contains(&n) => n,
                _ => return Err(lua_err("Invalid debug level.")),
            };
            let mut line = String::new();
            for a in args.iter().skip(1) {
                if !line.is_empty() {
                    line.push(' ');
                }
                match a {
                    Value::String(s) => line.push_str(&s.to_string_lossy()),
                    v => {
                        if let Some(n) = number(v) {
                            line.push_str(&reply::format_double(n));
                        }
                    }
                }
            }
            if level >= 2.0 {
                eprintln!("cascade: script: {line}");
            }
            Ok(())
        })?,
    )?;
    let r3 = resp3.clone();
    h.set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
            if args.len() != 1 {
                return Err(lua_err("redis.setresp() requires one argument."));
            }
            match number(&args[0]) {
                Some(n) if matches!(n.to_bits(), b if b == 2f64.to_bits() || b == 3f64.to_bits()) =>
                {
                    r3.set(n.to_bits() == 3f64.to_bits());
                    Ok(())
                }
                _ => Err(lua_err("RESP version must be 2 or 3.")),
            }
        })?,
    )?;
    h.set(
        "set_repl",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(lua_err("redis.set_repl() requires two arguments."));
            }
            match number(&args[0]) {
                Some(n) if (0.0..=3.0).contains(&n) && n.fract() == 0.0 => Ok(()),
                _ => Err(lua_err(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                )),
            }
        })?,
    )?;
    let commands = Commands::default();
    h.set(
        "acl_check_cmd",
        lua.create_function(move |_, args: MultiValue| {
            let name = match args.front() {
                Some(Value::String(s)) => s.as_bytes().to_vec(),
                _ => {
                    return Err(lua_err(
                        "Please specify at least one argument for this redis lib call",
                    ))
                }
            };
            if commands.lookup(&name).is_none() {
                return Err(lua_err("Invalid command passed to redis.acl_check_cmd()"));
            }
            Ok(true)
        })?,
    )?;
    let s = Arc::downgrade(shared);
    h.set(
        "killed",
        lua.create_function(move |_, ()| {
            Ok(s.upgrade().is_some_and(|s| s.store.gate().kill_requested()))
        })?,
    )?;
    h.set(
        "where",
        lua.create_function(|lua, ()| {
            for level in 0..200 {
                let found = lua.inspect_stack(level, |d| {
                    let s = d.source();
                    let src = s.source.as_deref().unwrap_or("");
                    (s.what != "C" && src.starts_with("@user_"))
                        .then(|| (src.to_string(), d.current_line()))
                });
                match found {
                    None => break,
                    Some(Some((src, line))) => return Ok((Some(src), line)),
                    Some(None) => {}
                }
            }
            Ok((None, None))
        })?,
    )?;
    h.set("version", crate::REDIS_COMPAT_VERSION)?;
    h.set("version_num", version_num())?;
    Ok(h)
}

/// `REDIS_VERSION_NUM`: 0x00MMmmpp.
fn version_num() -> u32 {
    let mut n = 0u32;
    for part in crate::REDIS_COMPAT_VERSION.split('.') {
        n = (n << 8) | part.parse::<u32>().unwrap_or(0);
    }
    n
}

/// Lower-case hex SHA-1 (script ids, `redis.sha1hex`).
pub(crate) fn sha1_hex(b: &[u8]) -> String {
    sha1_smol::Sha1::from(b).digest().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_and_version() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1_hex(b"Pizza & Mandolino"),
            "74822d82031af7493c20eefa13bd07ec4fada82f"
        );
        assert_eq!(version_num(), 0x0007_000f);
    }
}
