//! The scripting commands' table entries: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`,
//! `SCRIPT`, `FUNCTION`, `FCALL`, `FCALL_RO`. The work happens on the script thread (`scripting/`):
//! these handlers hand the command over and leave the connection waiting for the
//! reply (`Client::script`), or, without a worker to wake (tests, EXEC), wait in
//! place. `SCRIPT KILL`, `FUNCTION KILL`, `FUNCTION STATS` and the HELP texts are
//! answered here at once: the script thread may be busy with the very script they
//! are about.

use std::sync::Arc;

use super::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::scripting::gate::{Kill, BUSY_EVAL, BUSY_FUNCTION};
use crate::scripting::{Job, Slot};

const F: &[&str] = &["noscript", "skip_monitor", "movablekeys"];
const NUMKEYS: Keys = Keys::Num { at: 2, dest: false };

/// The scripting commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "eval",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Runs a Lua script.",
        Ctl(submit),
    ),
    spec(
        "evalsha",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Runs a cached Lua script.",
        Ctl(submit),
    ),
    spec(
        "eval_ro",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Runs a read-only Lua script.",
        Ctl(submit),
    ),
    spec(
        "evalsha_ro",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Runs a cached read-only Lua script.",
        Ctl(submit),
    ),
    spec(
        "fcall",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Calls a function.",
        Ctl(submit),
    ),
    spec(
        "fcall_ro",
        -3,
        F,
        NUMKEYS,
        "scripting",
        "Calls a read-only function.",
        Ctl(submit),
    ),
    spec(
        "script",
        -2,
        &["noscript"],
        Keys::None,
        "scripting",
        "Manages the script cache.",
        Ctl(script),
    ),
    spec(
        "function",
        -2,
        &["noscript"],
        Keys::None,
        "scripting",
        "Manages function libraries.",
        Ctl(function),
    ),
];

/// Commands that still run while a script is busy (Redis's `allow-busy`); SCRIPT and
/// FUNCTION check their subcommand themselves.
pub(crate) const ALLOW_BUSY: &[&str] = &[
    "auth", "hello", "discard", "multi", "watch", "unwatch", "quit", "reset", "shutdown", "script",
    "function",
];

/// True for the commands the script thread runs.
pub(crate) fn is_script_command(name: &str) -> bool {
    SPECS.iter().any(|s| s.name == name)
}

/// Hands `c` to the script thread.
fn submit(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let slot = Arc::new(Slot::new(ctx.client.wake.clone()));
    let job = Job {
        cmd: c.clone(),
        resp3: ctx.out.resp3,
        db: ctx.client.db,
        caller: ctx.client.id,
        remember: ctx.client.tracking.remembers(),
        slot: slot.clone(),
    };
    if !ctx.shared.scripts.send(job) {
        return Err(CmdError::err("the script engine is not running"));
    }
    if ctx.client.wake.is_some() {
        ctx.client.script = Some(slot);
    } else {
        let r = slot.wait();
        ctx.out.buf.extend_from_slice(&r);
    }
    Ok(())
}

fn kill(ctx: &mut Ctx<'_>, function: bool) -> CmdResult<()> {
    match ctx.shared.store.gate().kill(function) {
        Kill::Killed => {
            reply::ok(ctx.out);
            Ok(())
        }
        Kill::NotBusy => Err(CmdError::Msg(
            "NOTBUSY No scripts in execution right now.".into(),
        )),
        Kill::Unkillable => Err(CmdError::Msg(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. \
             You can either wait the script termination or kill the server in a hard way using \
             the SHUTDOWN NOSAVE command."
                .into(),
        )),
        Kill::WrongKind => Err(CmdError::Msg(
            if function { BUSY_EVAL } else { BUSY_FUNCTION }.into(),
        )),
    }
}

fn help(ctx: &mut Ctx<'_>, lines: &[&str]) {
    reply::array_header(ctx.out, lines.len());
    for l in lines {
        reply::simple(ctx.out, l);
    }
}

fn busy_check(ctx: &Ctx<'_>) -> CmdResult<()> {
    match ctx.shared.store.gate().busy() {
        Some(b) => Err(CmdError::Msg(b.into())),
        None => Ok(()),
    }
}

fn script(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "kill") && c.len() == 2 {
        return kill(ctx, false);
    }
    busy_check(ctx)?;
    if is(sub, "help") && c.len() == 2 {
        help(
            ctx,
            &[
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Print this help.",
            ],
        );
        return Ok(());
    }
    let known = (is(sub, "load") && c.len() == 3)
        || (is(sub, "exists") && c.len() >= 3)
        || (is(sub, "flush") && c.len() <= 3);
    if !known {
        return Err(unknown_subcommand(sub, "script"));
    }
    submit(ctx, c)
}

fn function(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "kill") && c.len() == 2 {
        return kill(ctx, true);
    }
    if is(sub, "stats") && c.len() == 2 {
        return stats(ctx);
    }
    busy_check(ctx)?;
    if is(sub, "help") && c.len() == 2 {
        help(
            ctx,
            &[
                "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "LOAD [REPLACE] <FUNCTION CODE>",
                "DELETE <LIBRARY NAME>",
                "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
                "FLUSH [ASYNC|SYNC]",
                "KILL",
                "STATS",
                "DUMP",
                "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
                "HELP",
                "    Print this help.",
            ],
        );
        return Ok(());
    }
    let arity: &[(&str, usize, usize)] = &[
        ("load", 3, usize::MAX),
        ("list", 2, usize::MAX),
        ("delete", 3, 3),
        ("flush", 2, 3),
        ("dump", 2, 2),
        ("restore", 3, 4),
    ];
    let Some(&(_, lo, hi)) = arity.iter().find(|(s, _, _)| is(sub, s)) else {
        return Err(unknown_subcommand(sub, "function"));
    };
    if c.len() < lo || c.len() > hi {
        return Err(CmdError::Msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(sub)
        )));
    }
    submit(ctx, c)
}

#[expect(
    clippy::unnecessary_wraps,
    reason = "the subcommand handlers share one signature"
)]
fn stats(ctx: &mut Ctx<'_>) -> CmdResult<()> {
    let (libs, funcs) = *ctx.shared.scripts.counts.lock();
    let running = ctx.shared.scripts.running.lock().clone();
    let running = running.filter(|_| ctx.shared.store.gate().running().is_some());
    let out = &mut *ctx.out;
    reply::map_header(out, 2);
    reply::bulk(out, b"running_script");
    match running {
        None => reply::nil(out),
        Some((name, cmd)) => {
            let ms = ctx.shared.store.gate().running().map_or(0, |(_, ms)| ms);
            reply::map_header(out, 3);
            reply::bulk(out, b"name");
            reply::bulk(out, name.as_bytes());
            reply::bulk(out, b"command");
            reply::bulk_array(out, cmd.iter().map(Vec::as_slice));
            reply::bulk(out, b"duration_ms");
            reply::int(out, i64::try_from(ms).unwrap_or(i64::MAX));
        }
    }
    reply::bulk(out, b"engines");
    reply::map_header(out, 1);
    reply::bulk(out, b"LUA");
    reply::map_header(out, 2);
    reply::bulk(out, b"libraries_count");
    reply::int(out, i64::try_from(libs).unwrap_or(i64::MAX));
    reply::bulk(out, b"functions_count");
    reply::int(out, i64::try_from(funcs).unwrap_or(i64::MAX));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn eval_basics_and_conversions() {
        let mut k = Kit::new();
        k.expect(&["EVAL", "return 'hello'", "0"], "$5\r\nhello\r\n");
        k.expect(&["EVAL", "return 100.5", "0"], ":100\r\n");
        k.expect(&["EVAL", "return true", "0"], ":1\r\n");
        k.expect(&["EVAL", "return false", "0"], "$-1\r\n");
        k.expect(&["EVAL", "return {ok='fine'}", "0"], "+fine\r\n");
        k.expect(
            &["EVAL", "return {err='ERR this is an error'}", "0"],
            "-ERR this is an error\r\n",
        );
        k.expect(
            &["EVAL", "return {1,2,3,'ciao',{1,2}}", "0"],
            "*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n",
        );
        k.expect(
            &["EVAL", "return {KEYS[1],ARGV[1]}", "1", "a", "b"],
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        );
        k.ok(&["SET", "mykey", "myval"]);
        k.expect(
            &["EVAL", "return redis.call('get',KEYS[1])", "1", "mykey"],
            "$5\r\nmyval\r\n",
        );
        k.expect(
            &[
                "EVALSHA",
                "FD758D1589D044DD850A6F05D52F2EEFD27F033F",
                "1",
                "mykey",
            ],
            "$5\r\nmyval\r\n",
        );
        k.expect(
            &["EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"],
            "-NOSCRIPT No matching script. Please use EVAL.\r\n",
        );
        k.expect(
            &["EVAL", "return 1", "2", "a"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        );
        k.expect(
            &["EVAL", "return 1", "-1"],
            "-ERR Number of keys can't be negative\r\n",
        );
    }

    #[test]
    fn errors_sandbox_and_readonly() {
        let mut k = Kit::new();
        let e = k.raw(&["EVAL", "return a", "0"]);
        assert!(
            e.contains("Script attempted to access nonexistent global variable 'a'"),
            "{e}"
        );
        let e = k.raw(&["EVAL", "a = 10", "0"]);
        assert!(e.contains("Attempt to modify a readonly table"), "{e}");
        let e = k.raw(&["EVAL", "redis.call('nosuchcommand')", "0"]);
        assert!(
            e.starts_with("-ERR Unknown Redis command called from script script: f_"),
            "{e}"
        );
        k.ok(&["SET", "foo", "bar"]);
        let e = k.raw(&["EVAL", "redis.call('lpush',KEYS[1],'v')", "1", "foo"]);
        assert!(e.starts_with("-WRONGTYPE Operation against a key"), "{e}");
        k.expect(
            &[
                "EVAL",
                "local r = redis.pcall('incr',KEYS[1]); return {type(r), r['err']}",
                "1",
                "foo",
            ],
            "*2\r\n$5\r\ntable\r\n$43\r\nERR value is not an integer or out of range\r\n",
        );
        let e = k.raw(&["EVAL_RO", "return redis.call('set','x','1')", "0"]);
        assert!(
            e.starts_with("-ERR Write commands are not allowed from read-only scripts."),
            "{e}"
        );
        k.expect(
            &["EVAL", "return redis.pcall('blpop','x',0)['err']", "0"],
            "$49\r\nERR This Redis command is not allowed from script\r\n",
        );
        let e = k.raw(&["EVAL", "return os.time()", "0"]);
        assert!(e.contains("nonexistent global variable 'os'"), "{e}");
        let e = k.raw(&["EVAL", "retur 1", "0"]);
        assert!(
            e.starts_with("-ERR Error compiling script (new function): user_script:1:"),
            "{e}"
        );
        k.expect(
            &["EVAL", "return redis.sha1hex('')", "0"],
            "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n",
        );
        k.expect(
            &["EVAL", "return cjson.encode({1,'a'})", "0"],
            "$7\r\n[1,\"a\"]\r\n",
        );
        k.expect(&["EVAL", "return bit.bor(1,2,4)", "0"], ":7\r\n");
    }

    #[test]
    fn writes_commit_once_and_script_cache() {
        let mut k = Kit::new();
        k.expect(
            &["EVAL", "redis.call('set',KEYS[1],'1'); redis.call('incr',KEYS[1]); return redis.call('get',KEYS[1])", "1", "n"],
            "$1\r\n2\r\n",
        );
        k.expect(&["GET", "n"], "$1\r\n2\r\n");
        // A failed script keeps the writes it made before the error.
        let e = k.raw(&["EVAL", "redis.call('set','w','1'); error('boom')", "0"]);
        assert!(e.contains("boom"), "{e}");
        k.expect(&["GET", "w"], "$1\r\n1\r\n");
        k.expect(
            &["SCRIPT", "LOAD", "return 1"],
            "$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n",
        );
        k.expect(
            &[
                "SCRIPT",
                "EXISTS",
                "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
                "ff",
            ],
            "*2\r\n:1\r\n:0\r\n",
        );
        k.ok(&["SCRIPT", "FLUSH"]);
        k.expect(
            &[
                "SCRIPT",
                "EXISTS",
                "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
            ],
            "*1\r\n:0\r\n",
        );
        k.expect(
            &["SCRIPT", "KILL"],
            "-NOTBUSY No scripts in execution right now.\r\n",
        );
    }

    #[test]
    fn resp3_map_under_setresp() {
        let mut k = Kit::new();
        k.expect(&["HSET", "h", "f", "v"], ":1\r\n");
        let _ = k.raw(&["HELLO", "3"]);
        k.expect(
            &[
                "EVAL",
                "redis.setresp(3); return redis.call('hgetall', KEYS[1])",
                "1",
                "h",
            ],
            "%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
        );
        k.expect(
            &[
                "EVAL",
                "redis.setresp(2); return redis.call('hgetall', KEYS[1])",
                "1",
                "h",
            ],
            "*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        );
    }

    #[test]
    fn functions_load_call_list_delete() {
        let mut k = Kit::new();
        let lib = "#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('incr', keys[1]) end)\nredis.register_function{function_name='ro', callback=function() return 'x' end, flags={'no-writes'}}";
        k.expect(&["FUNCTION", "LOAD", lib], "$5\r\nmylib\r\n");
        k.expect(
            &["FUNCTION", "LOAD", lib],
            "-ERR Library 'mylib' already exists\r\n",
        );
        k.expect(&["FUNCTION", "LOAD", "REPLACE", lib], "$5\r\nmylib\r\n");
        k.expect(&["FCALL", "f1", "1", "c"], ":1\r\n");
        k.expect(&["FCALL_RO", "ro", "0"], "$1\r\nx\r\n");
        k.expect(
            &["FCALL_RO", "f1", "1", "c"],
            "-ERR Can not execute a script with write flag using *_ro command.\r\n",
        );
        k.expect(&["FCALL", "nope", "0"], "-ERR Function not found\r\n");
        let list = k.raw(&["FUNCTION", "LIST"]);
        assert!(
            list.contains("mylib") && list.contains("no-writes"),
            "{list}"
        );
        let dump = k.bytes(&[b"FUNCTION", b"DUMP"]);
        k.ok(&["FUNCTION", "FLUSH"]);
        k.expect(&["FCALL", "f1", "1", "c"], "-ERR Function not found\r\n");
        let payload = super::super::testkit::decode(&dump, &mut 0);
        let super::super::testkit::Value::Str(_) = payload else {
            panic!("dump")
        };
        let body_start = dump.iter().position(|&b| b == b'\n').expect("header") + 1;
        let body = &dump[body_start..dump.len() - 2];
        assert_eq!(k.bytes(&[b"FUNCTION", b"RESTORE", body]), b"+OK\r\n");
        k.expect(&["FCALL", "f1", "1", "c"], ":2\r\n");
        k.expect(
            &["FUNCTION", "RESTORE", "garbage-payload"],
            "-ERR DUMP payload version or checksum are wrong\r\n",
        );
        k.ok(&["FUNCTION", "DELETE", "mylib"]);
        k.expect(
            &["FUNCTION", "DELETE", "mylib"],
            "-ERR Library not found\r\n",
        );
        k.expect(
            &["FUNCTION", "LOAD", "return 1"],
            "-ERR Missing library metadata\r\n",
        );
        k.expect(
            &["FUNCTION", "LOAD", "#!lua name=x\nreturn 1"],
            "-ERR No functions registered\r\n",
        );
        let e = k.raw(&["FUNCTION", "LOAD", "#!lua name=x\nredis.call('ping')"]);
        assert!(e.starts_with("-ERR Error registering functions:"), "{e}");
    }
}
