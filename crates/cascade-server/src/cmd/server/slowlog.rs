//! `SLOWLOG GET [count] | LEN | RESET | HELP`: the log itself is `crate::slowlog`
//! (filled by the workers as commands finish). No state of its own.

use crate::cmd::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

/// The command.
pub(crate) static SPECS: &[Spec] = &[spec(
    "slowlog",
    -2,
    A,
    Keys::None,
    "server",
    "SLOWLOG GET [count] | LEN | RESET | HELP: commands that ran longer than slowlog-log-slower-than µs.",
    Ctl(slowlog),
)];

fn slowlog(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    let log = &ctx.shared.slowlog;
    if is(sub, "get") && c.len() <= 3 {
        let count = if c.len() == 3 {
            let n = crate::cmd::int_arg(c.arg(2))?;
            if n < -1 {
                return Err(CmdError::err("count should be greater than or equal to -1"));
            }
            usize::try_from(n).ok()
        } else {
            Some(10)
        };
        let entries = log.newest(count);
        reply::array_header(ctx.out, entries.len());
        for e in entries {
            reply::array_header(ctx.out, 6);
            reply::int(ctx.out, i64::try_from(e.id).unwrap_or(i64::MAX));
            reply::int(ctx.out, i64::try_from(e.at).unwrap_or(i64::MAX));
            reply::int(ctx.out, i64::try_from(e.micros).unwrap_or(i64::MAX));
            reply::bulk_array(ctx.out, e.args.iter().map(Vec::as_slice));
            reply::bulk(ctx.out, e.addr.as_bytes());
            reply::bulk(ctx.out, &e.name);
        }
    } else if is(sub, "len") && c.len() == 2 {
        reply::int(ctx.out, i64::try_from(log.len()).unwrap_or(i64::MAX));
    } else if is(sub, "reset") && c.len() == 2 {
        log.reset();
        reply::ok(ctx.out);
    } else if is(sub, "help") && c.len() == 2 {
        let lines: &[&[u8]] = &[
            b"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"GET [<count>]",
            b"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            b"    Entries are made of:",
            b"    id, timestamp, time in microseconds, arguments array, client IP and port,",
            b"    client name",
            b"LEN",
            b"    Return the length of the slowlog.",
            b"RESET",
            b"    Reset the slowlog.",
            b"HELP",
            b"    Print this help.",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else if is(sub, "get") || is(sub, "len") || is(sub, "reset") {
        let s = String::from_utf8_lossy(sub).to_ascii_lowercase();
        return Err(CmdError::err(format!(
            "wrong number of arguments for 'slowlog|{s}' command"
        )));
    } else {
        return Err(unknown_subcommand(sub, "slowlog"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn get_len_reset_and_settings() {
        let mut k = Kit::new();
        k.expect(&["SLOWLOG", "LEN"], ":0\r\n");
        k.ok(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        k.ok(&["CONFIG", "SET", "slowlog-max-len", "3"]);
        k.expect(
            &["CONFIG", "GET", "slowlog-*"],
            "*4\r\n$23\r\nslowlog-log-slower-than\r\n$1\r\n0\r\n$15\r\nslowlog-max-len\r\n$1\r\n3\r\n",
        );
        k.expect(
            &["SLOWLOG", "GET", "-2"],
            "-ERR count should be greater than or equal to -1\r\n",
        );
        k.expect(
            &["SLOWLOG", "NOPE"],
            "-ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.\r\n",
        );
        k.expect(
            &["CONFIG", "SET", "slowlog-log-slower-than", "x"],
            "-ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - argument couldn't be parsed into an integer\r\n",
        );
    }
}
