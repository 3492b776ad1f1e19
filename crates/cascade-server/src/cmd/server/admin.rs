//! Server commands: `COMMAND CONFIG INFO SHUTDOWN TIME SAVE BGSAVE`.

use std::sync::atomic::Ordering;

use crate::cmd::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::resp::parse::Command;
use crate::resp::reply;

/// The server commands.
pub(crate) static SPECS: &[Spec] = &[
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
        let sl = &ctx.shared.slowlog;
        params.push((
            "slowlog-log-slower-than",
            sl.slower_than
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        ));
        params.push((
            "slowlog-max-len",
            sl.max_len
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        ));
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
        ctx.shared.store.reset_lookups();
        reply::ok(ctx.out);
    } else if is(sub, "rewrite") && c.len() == 2 {
        crate::replication::config_rewrite(ctx.shared)?;
        reply::ok(ctx.out);
    } else if is(sub, "help") && c.len() == 2 {
        let lines: &[&[u8]] = &[
            b"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"GET <pattern>",
            b"    Return parameters matching the glob-like <pattern> and their values.",
            b"SET <directive> <value> [<directive> <value> ...]",
            b"    Set the configuration <directive> to <value>.",
            b"RESETSTAT",
            b"    Reset statistics reported by the INFO command.",
            b"REWRITE",
            b"    Rewrite the configuration file given with --config.",
            b"HELP",
            b"    Print this help.",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
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
    let int = || {
        String::from_utf8_lossy(v)
            .parse::<i64>()
            .map_err(|_| invalid("argument couldn't be parsed into an integer"))
    };
    match name {
        "slowlog-log-slower-than" => {
            shared
                .slowlog
                .slower_than
                .store(int()?, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        "slowlog-max-len" => {
            let n = u64::try_from(int()?).map_err(|_| {
                invalid("argument must be between 0 and 9223372036854775807 inclusive")
            })?;
            shared.slowlog.set_max_len(n);
            Ok(())
        }
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
    use crate::cmd::testkit::Kit;

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
