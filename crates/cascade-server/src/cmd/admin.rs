//! Server commands: `COMMAND CONFIG INFO SHUTDOWN TIME SAVE BGSAVE`.

use std::sync::atomic::Ordering;

use super::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};

/// The server commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "command",
        -1,
        A,
        Keys::None,
        "server",
        "COMMAND [COUNT|INFO|DOCS|LIST]: the command table.",
        Ctl(command),
    ),
    spec(
        "config",
        -2,
        A,
        Keys::None,
        "server",
        "CONFIG GET|SET|RESETSTAT|REWRITE.",
        Ctl(config),
    ),
    spec(
        "info",
        -1,
        A,
        Keys::None,
        "server",
        "Server, client, memory, persistence, stats, keyspace and engine information.",
        Ctl(info),
    ),
    spec(
        "shutdown",
        -1,
        A,
        Keys::None,
        "server",
        "Stops the server after in-flight requests; everything acknowledged stays durable.",
        Ctl(shutdown),
    ),
    spec(
        "time",
        1,
        A,
        Keys::None,
        "server",
        "Server time: seconds and microseconds.",
        Ctl(time),
    ),
    spec(
        "save",
        1,
        A,
        Keys::None,
        "server",
        "Persists every log now.",
        Ctl(save),
    ),
    spec(
        "bgsave",
        -1,
        A,
        Keys::None,
        "server",
        "Persists every log now (synchronously).",
        Ctl(bgsave),
    ),
];

fn command(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let commands = ctx.commands;
    let specs = &commands.specs;
    let pick = |names: &mut dyn Iterator<Item = &[u8]>| -> Vec<Option<usize>> {
        names.map(|n| commands.lookup(n)).collect()
    };
    if c.len() == 1 {
        let all: Vec<Option<usize>> = (0..specs.len()).map(Some).collect();
        command_info(ctx.out, specs, &all);
        return Ok(());
    }
    let sub = c.arg(1);
    if is(sub, "count") && c.len() == 2 {
        reply::int(ctx.out, crate::cmd::args::len_i64(specs.len()));
    } else if is(sub, "list") {
        // COMMAND LIST [FILTERBY MODULE m | ACLCAT cat | PATTERN glob]. No modules
        // exist; a command's ACL category is its group here.
        let filter = match c.len() {
            2 => None,
            5 if is(c.arg(2), "filterby") => Some((c.arg(3).to_ascii_lowercase(), c.arg(4))),
            _ => return Err(CmdError::err("syntax error")),
        };
        let keep = |s: &super::Spec| match &filter {
            None => true,
            Some((by, arg)) => match by.as_slice() {
                b"pattern" => crate::glob::matches(arg, s.name.as_bytes(), true),
                b"aclcat" => s.group.as_bytes().eq_ignore_ascii_case(arg),
                _ => false,
            },
        };
        if let Some((by, _)) = &filter {
            if !matches!(by.as_slice(), b"pattern" | b"aclcat" | b"module") {
                return Err(CmdError::err("syntax error"));
            }
        }
        let names: Vec<&[u8]> = specs
            .iter()
            .filter(|s| keep(s))
            .map(|s| s.name.as_bytes())
            .collect();
        reply::bulk_array(ctx.out, names.into_iter());
    } else if is(sub, "info") {
        let which = if c.len() == 2 {
            (0..specs.len()).map(Some).collect()
        } else {
            pick(&mut c.args().skip(2))
        };
        command_info(ctx.out, specs, &which);
    } else if is(sub, "docs") {
        let which: Vec<usize> = if c.len() == 2 {
            (0..specs.len()).collect()
        } else {
            pick(&mut c.args().skip(2)).into_iter().flatten().collect()
        };
        let out = &mut *ctx.out;
        reply::map_header(out, which.len());
        for i in which {
            let s = &specs[i];
            reply::bulk(out, s.name.as_bytes());
            reply::map_header(out, 3);
            reply::bulk(out, b"summary");
            reply::bulk(out, s.summary.as_bytes());
            reply::bulk(out, b"since");
            reply::bulk(out, b"1.0.0");
            reply::bulk(out, b"group");
            reply::bulk(out, s.group.as_bytes());
        }
    } else if is(sub, "getkeys") && c.len() >= 3 {
        let target = Command::from_args(&c.to_vecs()[2..]);
        let Some(idx) = commands.lookup(target.arg(0)) else {
            return Err(CmdError::err("Invalid command specified"));
        };
        let spec = &specs[idx];
        let n = i64::try_from(target.len()).unwrap_or(i64::MAX);
        let a = i64::from(spec.arity);
        if (a > 0 && n != a) || (a < 0 && n < -a) {
            return Err(CmdError::err(
                "Invalid number of arguments specified for command",
            ));
        }
        // A command with a key count (EVAL 0) may name no key: an empty list. One
        // without key arguments at all is an error.
        let keys = match spec.keys {
            super::Keys::All | super::Keys::None => Vec::new(),
            _ if spec.name == "sort" => sort_keys(&target),
            k => k.of(&target),
        };
        if keys.is_empty() && !movable(spec) {
            return Err(CmdError::err("The command has no key arguments"));
        }
        reply::bulk_array(ctx.out, keys.into_iter());
    } else if is(sub, "help") {
        let lines: &[&[u8]] = &[
            b"COMMAND",
            b"COMMAND COUNT",
            b"COMMAND LIST",
            b"COMMAND INFO [<name> ...]",
            b"COMMAND DOCS [<name> ...]",
            b"COMMAND GETKEYS <full-command>",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else {
        return Err(unknown_subcommand(sub, "command"));
    }
    Ok(())
}

/// SORT's keys as Redis names them: the source and the last `STORE` target (the
/// arguments of LIMIT, BY and GET are skipped).
fn sort_keys(c: &Command) -> Vec<&[u8]> {
    let mut keys = vec![c.arg(1)];
    let mut store = None;
    let mut i = 2;
    while i < c.len() {
        let a = c.arg(i);
        if is(a, "limit") {
            i += 2;
        } else if is(a, "by") || is(a, "get") {
            i += 1;
        } else if is(a, "store") && i + 1 < c.len() {
            store = Some(c.arg(i + 1));
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// Redis's `movablekeys`: where the keys are cannot be told from first/last/step
/// alone (a key count, a `STREAMS` keyword, or an optional `STORE` key).
fn movable(s: &super::Spec) -> bool {
    matches!(
        s.keys,
        super::Keys::Num { .. } | super::Keys::Streams { .. }
    ) || matches!(
        s.name,
        "sort" | "sort_ro" | "migrate" | "georadius" | "georadiusbymember"
    )
}

fn command_info(out: &mut Out, specs: &[super::Spec], which: &[Option<usize>]) {
    reply::array_header(out, which.len());
    for w in which {
        let Some(s) = w.map(|i| &specs[i]) else {
            reply::nil_array(out);
            continue;
        };
        reply::array_header(out, 6);
        reply::bulk(out, s.name.as_bytes());
        reply::int(out, i64::from(s.arity));
        let mov = movable(s);
        reply::array_header(out, s.flags.len() + usize::from(mov));
        for f in s.flags {
            reply::simple(out, f);
        }
        if mov {
            reply::simple(out, "movablekeys");
        }
        let (first, last, step) = s.keys.triple();
        reply::int(out, i64::from(first));
        reply::int(out, i64::from(last));
        reply::int(out, i64::from(step));
    }
}

fn config(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    let cfg = &ctx.shared.config;
    if is(sub, "get") && c.len() >= 3 {
        let mut params = cfg.params(&ctx.shared.fixed);
        let ps = ctx.shared.store.pubsub();
        params.push(("notify-keyspace-events", ps.events.letters()));
        params.push((
            "tracking-table-max-keys",
            ctx.shared.store.tracking().max_keys().to_string(),
        ));
        params.extend(crate::replication::config_params(ctx.shared));
        let l = ps.limit();
        params.push((
            "client-output-buffer-limit",
            format!(
                "normal 0 0 0 slave 268435456 67108864 60 pubsub {} {} {}",
                l.hard, l.soft, l.soft_secs
            ),
        ));
        let mut hits: Vec<(&str, &String)> = Vec::new();
        for (name, v) in &params {
            if c.args()
                .skip(2)
                .any(|p| glob::matches(p, name.as_bytes(), true))
            {
                hits.push((name, v));
            }
        }
        reply::map_header(ctx.out, hits.len());
        for (n, v) in hits {
            reply::bulk(ctx.out, n.as_bytes());
            reply::bulk(ctx.out, v.as_bytes());
        }
    } else if is(sub, "set") && c.len() >= 4 && c.len().is_multiple_of(2) {
        for i in (2..c.len()).step_by(2) {
            let name = String::from_utf8_lossy(c.arg(i)).to_ascii_lowercase();
            set_param(ctx.shared, &name, c.arg(i + 1))?;
        }
        reply::ok(ctx.out);
    } else if is(sub, "resetstat") && c.len() == 2 {
        ctx.shared.metrics.reset();
        reply::ok(ctx.out);
    } else if is(sub, "rewrite") && c.len() == 2 {
        crate::replication::config_rewrite(ctx.shared)?;
        reply::ok(ctx.out);
    } else if is(sub, "get") || is(sub, "set") || is(sub, "resetstat") || is(sub, "rewrite") {
        let s = String::from_utf8_lossy(sub).to_ascii_lowercase();
        return Err(CmdError::err(format!(
            "wrong number of arguments for 'config|{s}' command"
        )));
    } else {
        return Err(unknown_subcommand(sub, "config"));
    }
    Ok(())
}

/// CONFIG SET of one parameter: the pub/sub and tracking ones here, the rest in `RuntimeConfig`.
fn set_param(shared: &crate::shared::Shared, name: &str, v: &[u8]) -> CmdResult<()> {
    let invalid = |why: &str| {
        CmdError::err(format!(
            "CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let ps = shared.store.pubsub();
    match name {
        "tracking-table-max-keys" => {
            let n = String::from_utf8_lossy(v)
                .parse::<u64>()
                .ok()
                .filter(|&n| i64::try_from(n).is_ok())
                .ok_or_else(|| invalid("argument couldn't be parsed into an integer"))?;
            shared.store.tracking().set_max_keys(ps, n);
            Ok(())
        }
        "notify-keyspace-events" => ps
            .events
            .set(v)
            .ok_or_else(|| invalid("Invalid event class character. Use 'Ag$lshzxeKEtmd'.")),
        "client-output-buffer-limit" => {
            let text = String::from_utf8_lossy(v);
            let words: Vec<&str> = text.split_whitespace().collect();
            if words.is_empty() || !words.len().is_multiple_of(4) {
                return Err(invalid(
                    "Wrong number of arguments in buffer limit configuration.",
                ));
            }
            let mut limit = None;
            for w in words.chunks(4) {
                let class = w[0].to_ascii_lowercase();
                if !["normal", "slave", "replica", "pubsub"].contains(&class.as_str()) {
                    return Err(invalid(
                        "Invalid client class specified in buffer limit configuration.",
                    ));
                }
                let num = |s: &str| {
                    crate::config::parse_mem(s)
                        .ok_or_else(|| invalid("Error in hard, soft or soft_seconds setting in buffer limit configuration."))
                };
                let l = crate::pubsub::Limit {
                    hard: num(w[1])?,
                    soft: num(w[2])?,
                    soft_secs: num(w[3])?,
                };
                if class == "pubsub" {
                    limit = Some(l);
                }
            }
            if let Some(l) = limit {
                ps.set_limit(l);
            }
            Ok(())
        }
        n if crate::replication::settings::NAMES.contains(&n) => {
            crate::replication::config_set(shared, n, v)
        }
        _ => shared.config.set(name, v),
    }
}

fn info(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sections: Vec<String> = c
        .args()
        .skip(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    let text = crate::info::info(ctx.shared, &sections);
    reply::bulk(ctx.out, text.as_bytes());
    Ok(())
}

fn shutdown(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    for a in c.args().skip(1) {
        if !["nosave", "save", "now", "force"].iter().any(|k| is(a, k)) {
            return Err(CmdError::Syntax);
        }
    }
    // Like Redis: no reply; the connection closes and the server exits cleanly.
    ctx.client.close_after_reply = true;
    ctx.shared.request_shutdown("SHUTDOWN command");
    Ok(())
}

fn time(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply::array_header(ctx.out, 2);
    reply::bulk(ctx.out, d.as_secs().to_string().as_bytes());
    reply::bulk(ctx.out, d.subsec_micros().to_string().as_bytes());
    Ok(())
}

fn save(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    ctx.shared.store.db().sync()?;
    ctx.shared
        .last_save
        .store(crate::keyspace::now_ms() / 1000, Ordering::Relaxed);
    reply::ok(ctx.out);
    Ok(())
}

fn bgsave(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    ctx.shared.store.db().sync()?;
    ctx.shared
        .last_save
        .store(crate::keyspace::now_ms() / 1000, Ordering::Relaxed);
    reply::simple(ctx.out, "Background saving started");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::{Kit, Value};

    #[test]
    fn unknown_commands_and_arity() {
        let mut k = Kit::new();
        k.expect(
            &["NOSUCH", "a", "b"],
            "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n",
        );
        k.expect(
            &["GET"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        );
        k.expect(
            &["GET", "a", "b"],
            "-ERR wrong number of arguments for 'get' command\r\n",
        );
        k.expect(
            &["HSET", "h"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        );
    }

    #[test]
    fn command_table() {
        let mut k = Kit::new();
        let n = k.int(&["COMMAND", "COUNT"]);
        assert!(n > 50, "{n}");
        let names = k.strings(&["COMMAND", "LIST"]);
        assert_eq!(i64::try_from(names.len()).expect("fits"), n);
        assert!(names.contains(&"zadd".to_string()));
        let v = k.value(&["COMMAND", "INFO", "get", "nope", "mset"]);
        let Value::Arr(items) = v else {
            panic!("{v:?}")
        };
        assert_eq!(items[1], Value::Nil);
        let Value::Arr(mset) = &items[2] else {
            panic!()
        };
        assert_eq!(mset[0], Value::Str("mset".into()));
        assert_eq!(mset[1], Value::Int(-3));
        assert_eq!(&mset[3..6], &[Value::Int(1), Value::Int(-1), Value::Int(2)]);
        k.expect(
            &["COMMAND", "BAD"],
            "-ERR unknown subcommand 'BAD'. Try COMMAND HELP.\r\n",
        );
    }

    #[test]
    fn command_getkeys() {
        let mut k = Kit::new();
        let keys = |k: &mut Kit, args: &[&str]| -> Vec<String> {
            let mut a = vec!["COMMAND", "GETKEYS"];
            a.extend_from_slice(args);
            k.strings(&a)
        };
        assert_eq!(keys(&mut k, &["mset", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(
            keys(&mut k, &["fcall", "f", "2", "x", "y", "arg"]),
            ["x", "y"]
        );
        assert_eq!(
            keys(&mut k, &["zunionstore", "d", "2", "a", "b"]),
            ["a", "b", "d"]
        );
        assert!(keys(&mut k, &["eval", "return 1", "0"]).is_empty());
        assert_eq!(
            keys(
                &mut k,
                &["sort", "abc", "store", "x", "limit", "0", "1", "store", "def"]
            ),
            ["abc", "def"]
        );
        assert_eq!(
            k.strings(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "zunion*"]),
            ["zunion", "zunionstore"]
        );
        assert!(k
            .strings(&["COMMAND", "LIST", "FILTERBY", "MODULE", "m"])
            .is_empty());
        k.expect(&["COMMAND", "LIST", "x"], "-ERR syntax error\r\n");
        assert_eq!(
            keys(&mut k, &["xread", "streams", "s", "t", "0", "0"]),
            ["s", "t"]
        );
        k.expect(
            &["COMMAND", "GETKEYS", "nosuch", "a"],
            "-ERR Invalid command specified\r\n",
        );
        k.expect(
            &["COMMAND", "GETKEYS", "get"],
            "-ERR Invalid number of arguments specified for command\r\n",
        );
        k.expect(
            &["COMMAND", "GETKEYS", "ping"],
            "-ERR The command has no key arguments\r\n",
        );
    }

    #[test]
    fn config_get_set() {
        let mut k = Kit::new();
        k.expect(
            &["CONFIG", "GET", "timeout"],
            "*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n",
        );
        k.ok(&["CONFIG", "SET", "timeout", "30"]);
        k.expect(
            &["CONFIG", "GET", "timeout"],
            "*2\r\n$7\r\ntimeout\r\n$2\r\n30\r\n",
        );
        let all = k.strings(&["CONFIG", "GET", "*max*"]);
        assert!(all.contains(&"maxclients".to_string()), "{all:?}");
        k.expect(
            &["CONFIG", "SET", "maxmemory", "bla"],
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument couldn't be parsed into an integer\r\n",
        );
        k.ok(&["CONFIG", "SET", "maxmemory", "100mb"]);
        k.expect(&["CONFIG", "SET", "port", "1"], "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n");
        k.expect(
            &["CONFIG", "SET", "nosuch", "1"],
            "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n",
        );
        k.expect(
            &["CONFIG", "GET"],
            "-ERR wrong number of arguments for 'config|get' command\r\n",
        );
        k.expect(
            &["CONFIG", "REWRITE"],
            "-ERR The server is running without a config file\r\n",
        );
        k.ok(&["CONFIG", "RESETSTAT"]);
        k.expect(
            &["CONFIG", "NOPE"],
            "-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n",
        );
    }

    #[test]
    fn time_save_shutdown() {
        let mut k = Kit::new();
        let t = k.strings(&["TIME"]);
        let secs: u64 = t[0].parse().expect("seconds");
        assert!(secs > 1_600_000_000);
        k.ok(&["SAVE"]);
        k.expect(&["BGSAVE"], "+Background saving started\r\n");
        k.expect(&["SHUTDOWN", "BOGUS"], "-ERR syntax error\r\n");
        assert!(!k.shared.shutting_down());
        k.expect(&["SHUTDOWN", "NOSAVE"], "");
        assert!(k.shared.shutting_down());
        assert!(k.client.close_after_reply);
    }
}
