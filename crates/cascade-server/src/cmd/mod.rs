//! The command table and dispatch.
//!
//! Each command is a [`Spec`]: its name, Redis arity (positive = exact argument count
//! including the name, negative = at least that many), key positions (for `COMMAND`)
//! and a handler. [`dispatch`] checks authentication and arity with Redis's exact
//! error texts, runs the handler, and turns a [`CmdError`] into an error reply. A
//! handler either writes one complete reply into `ctx.out` and returns `Ok`, or writes
//! nothing and returns `Err`.
//!
//! Handlers run on worker threads; everything they share lives in [`Shared`].

pub mod admin;
pub mod conn;
pub mod expire;
pub mod hashes;
pub mod keys;
pub mod strings;
pub mod zsets;

use std::collections::HashMap;

use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::server::Shared;

/// Per-connection state that commands read and change.
#[derive(Debug)]
pub struct Client {
    /// Unique id (`CLIENT ID`).
    pub id: u64,
    /// Peer address.
    pub addr: String,
    /// `CLIENT SETNAME`.
    pub name: Option<Vec<u8>>,
    /// Authenticated (always true without `--requirepass`).
    pub authed: bool,
    /// Close after the pending replies are written (`QUIT`, protocol error).
    pub close_after_reply: bool,
}

/// What a handler works with.
pub struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Shared,
    /// This connection.
    pub client: &'a mut Client,
    /// Reply buffer.
    pub out: &'a mut Out,
}

/// A handler.
pub type Handler = fn(&mut Ctx<'_>, &Command) -> CmdResult<()>;

/// One command.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity.
    pub arity: i32,
    /// `COMMAND` flags.
    pub flags: &'static [&'static str],
    /// First key argument, last (-1 = last argument), step.
    pub keys: (i32, i32, i32),
    /// `COMMAND DOCS` group.
    pub group: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// The handler.
    pub run: Handler,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Builds a [`Spec`] (for the modules' tables).
pub const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    group: &'static str,
    summary: &'static str,
    run: Handler,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        group,
        summary,
        run,
    }
}

/// Flags of a command that writes.
pub const W: &[&str] = &["write"];
/// Flags of a read-only command.
pub const R: &[&str] = &["readonly", "fast"];
/// Flags of an admin or connection command.
pub const A: &[&str] = &["fast"];
/// No keys.
pub const NOKEYS: (i32, i32, i32) = (0, 0, 0);
/// One key at position 1.
pub const KEY1: (i32, i32, i32) = (1, 1, 1);

/// Every command, from all modules.
pub fn table() -> Vec<Spec> {
    let mut t = Vec::new();
    t.extend_from_slice(strings::SPECS);
    t.extend_from_slice(expire::SPECS);
    t.extend_from_slice(hashes::SPECS);
    t.extend_from_slice(zsets::SPECS);
    t.extend_from_slice(keys::SPECS);
    t.extend_from_slice(conn::SPECS);
    t.extend_from_slice(admin::SPECS);
    t
}

/// Name → index into [`table`].
#[derive(Debug)]
pub struct Commands {
    /// The table.
    pub specs: Vec<Spec>,
    by_name: HashMap<&'static [u8], usize>,
}

impl Default for Commands {
    fn default() -> Self {
        let specs = table();
        let by_name = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_bytes(), i))
            .collect();
        Commands { specs, by_name }
    }
}

impl Commands {
    /// Looks a command name up, ignoring ASCII case.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        self.by_name.get(&*lower).copied()
    }
}

/// Commands allowed before `AUTH`.
const NO_AUTH: &[&str] = &["auth", "hello", "quit"];

/// Runs one command (non-empty). Returns the table index it ran (for metrics) and
/// whether it failed.
pub fn dispatch(ctx: &mut Ctx<'_>, cmd: &Command) -> (Option<usize>, bool) {
    let name = cmd.arg(0);
    let Some(i) = ctx.shared.commands.lookup(name) else {
        reply::error(ctx.out, &unknown_command(cmd));
        return (None, true);
    };
    let spec = &ctx.shared.commands.specs[i];
    if !ctx.client.authed && !NO_AUTH.contains(&spec.name) {
        reply::error(ctx.out, "NOAUTH Authentication required.");
        return (Some(i), true);
    }
    let n = cmd.len() as i64;
    let a = i64::from(spec.arity);
    if (a > 0 && n != a) || (a < 0 && n < -a) {
        reply::error(ctx.out, &arity_error(spec.name));
        return (Some(i), true);
    }
    match (spec.run)(ctx, cmd) {
        Ok(()) => (Some(i), false),
        Err(e) => {
            reply::error(ctx.out, &e.to_string());
            (Some(i), true)
        }
    }
}

/// `ERR wrong number of arguments for 'x' command`.
pub fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Redis 7.0's unknown-command text.
fn unknown_command(cmd: &Command) -> String {
    let mut args = String::new();
    for a in cmd.args().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let s = String::from_utf8_lossy(a);
        let s: String = s.chars().take(room).collect();
        args.push_str(&format!("'{s}' "));
    }
    let name = String::from_utf8_lossy(cmd.arg(0));
    let name: String = name.chars().take(128).collect();
    format!("ERR unknown command '{name}', with args beginning with: {args}")
}

/// `ERR unknown subcommand 'x'. Try CMD HELP.`
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> CmdError {
    let s = String::from_utf8_lossy(sub);
    let s: String = s.chars().take(128).collect();
    CmdError::Msg(format!(
        "ERR unknown subcommand '{s}'. Try {} HELP.",
        cmd.to_ascii_uppercase()
    ))
}

/// Parses a strict 64-bit integer (Redis `string2ll`: optional `-`, no `+`, no
/// spaces, no leading zeros).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

/// An integer argument (`ERR value is not an integer or out of range`).
pub fn int_arg(b: &[u8]) -> CmdResult<i64> {
    parse_i64(b).ok_or(CmdError::NotInteger)
}

/// A float argument as Redis reads it (`inf`, `-inf`, `+inf` accepted; NaN is not).
pub fn float_arg(b: &[u8]) -> CmdResult<f64> {
    let s = std::str::from_utf8(b).map_err(|_| CmdError::NotFloat)?;
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        t if t.is_empty()
            || t.starts_with(char::is_whitespace)
            || t.ends_with(char::is_whitespace) =>
        {
            return Err(CmdError::NotFloat)
        }
        t => t.parse::<f64>().map_err(|_| CmdError::NotFloat)?,
    };
    if v.is_nan() {
        return Err(CmdError::NotFloat);
    }
    Ok(v)
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn is(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1.0",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(float_arg(b"1.5"), Ok(1.5));
        assert_eq!(float_arg(b"-inf"), Ok(f64::NEG_INFINITY));
        assert_eq!(float_arg(b"+inf"), Ok(f64::INFINITY));
        assert!(float_arg(b"nan").is_err());
        assert!(float_arg(b"abc").is_err());
        assert!(float_arg(b"").is_err());
    }

    #[test]
    fn names_are_unique_and_lowercase() {
        let t = table();
        let mut seen = std::collections::HashSet::new();
        for s in &t {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(seen.insert(s.name), "duplicate {}", s.name);
        }
        let c = Commands::default();
        assert!(c.lookup(b"GeT").is_some());
        assert!(c.lookup(b"nope").is_none());
    }
}
