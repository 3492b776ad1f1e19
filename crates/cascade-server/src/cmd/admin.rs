//! Server commands: `COMMAND CONFIG INFO SHUTDOWN TIME SAVE BGSAVE`.

use std::sync::atomic::Ordering;

use super::{is, spec, unknown_subcommand, Ctx, Spec, A, NOKEYS};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};

/// The server commands.
pub static SPECS: &[Spec] = &[
    spec(
        "command",
        -1,
        A,
        NOKEYS,
        "server",
        "COMMAND [COUNT|INFO|DOCS|LIST]: the command table.",
        command,
    ),
    spec(
        "config",
        -2,
        A,
        NOKEYS,
        "server",
        "CONFIG GET|SET|RESETSTAT|REWRITE.",
        config,
    ),
    spec(
        "info",
        -1,
        A,
        NOKEYS,
        "server",
        "Server, client, memory, persistence, stats, keyspace and engine information.",
        info,
    ),
    spec(
        "shutdown",
        -1,
        A,
        NOKEYS,
        "server",
        "Stops the server after in-flight requests; everything acknowledged stays durable.",
        shutdown,
    ),
    spec(
        "time",
        1,
        A,
        NOKEYS,
        "server",
        "Server time: seconds and microseconds.",
        time,
    ),
    spec(
        "save",
        1,
        A,
        NOKEYS,
        "server",
        "Persists every log now.",
        save,
    ),
    spec(
        "bgsave",
        -1,
        A,
        NOKEYS,
        "server",
        "Persists every log now (synchronously).",
        bgsave,
    ),
];

fn command(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let specs = &ctx.shared.commands.specs;
    let pick = |names: &mut dyn Iterator<Item = &[u8]>| -> Vec<Option<usize>> {
        names.map(|n| ctx.shared.commands.lookup(n)).collect()
    };
    if c.len() == 1 {
        let all: Vec<Option<usize>> = (0..specs.len()).map(Some).collect();
        command_info(ctx.out, specs, &all);
        return Ok(());
    }
    let sub = c.arg(1);
    if is(sub, "count") && c.len() == 2 {
        reply::int(ctx.out, specs.len() as i64);
    } else if is(sub, "list") && c.len() == 2 {
        reply::bulk_array(ctx.out, specs.iter().map(|s| s.name.as_bytes()));
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
    } else if is(sub, "help") {
        let lines: &[&[u8]] = &[
            b"COMMAND",
            b"COMMAND COUNT",
            b"COMMAND LIST",
            b"COMMAND INFO [<name> ...]",
            b"COMMAND DOCS [<name> ...]",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else {
        return Err(unknown_subcommand(sub, "command"));
    }
    Ok(())
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
        reply::array_header(out, s.flags.len());
        for f in s.flags {
            reply::simple(out, f);
        }
        reply::int(out, i64::from(s.keys.0));
        reply::int(out, i64::from(s.keys.1));
        reply::int(out, i64::from(s.keys.2));
    }
}

fn config(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    let cfg = &ctx.shared.config;
    if is(sub, "get") && c.len() >= 3 {
        let params = cfg.params(&ctx.shared.fixed);
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
            cfg.set(&name, c.arg(i + 1))?;
        }
        reply::ok(ctx.out);
    } else if is(sub, "resetstat") && c.len() == 2 {
        ctx.shared.metrics.reset();
        reply::ok(ctx.out);
    } else if is(sub, "rewrite") && c.len() == 2 {
        return Err(CmdError::err("The server is running without a config file"));
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
