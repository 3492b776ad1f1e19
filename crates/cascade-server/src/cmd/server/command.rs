//! `COMMAND`: the command table as clients and proxies read it — COUNT, LIST (with
//! subcommands as `container|sub`, as Redis 7 lists them), INFO, DOCS, GETKEYS and
//! GETKEYSANDFLAGS.
//!
//! Invariants: COUNT counts top-level commands only; LIST names every top-level
//! command and, after each container, the subcommands its handler serves
//! ([`SUBCOMMANDS`]). GETKEYS and GETKEYSANDFLAGS name the keys in key-spec order
//! (a destination before the sources it is computed from), the order [`Keys::of`]
//! gives; each key's flags come from [`key_flags::KEY_FLAGS`] (Redis's key specs).
//!
//! No shared state: the table is immutable.

use super::key_flags::KEY_FLAGS;
use crate::cmd::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};

/// `COMMAND`.
pub(crate) static SPECS: &[Spec] = &[spec(
    "command",
    -1,
    A,
    Keys::None,
    "server",
    "COMMAND [COUNT|INFO|DOCS|LIST|GETKEYS|GETKEYSANDFLAGS]: the command table.",
    Ctl(command),
)];

/// The subcommands each container command serves (what its handler accepts; keep in
/// step with the handlers and their HELP).
pub(crate) const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "client",
        &[
            "caching",
            "getname",
            "getredir",
            "help",
            "id",
            "info",
            "kill",
            "list",
            "reply",
            "setinfo",
            "setname",
            "tracking",
            "trackinginfo",
            "unblock",
        ],
    ),
    (
        "cluster",
        &[
            "countkeysinslot",
            "getkeysinslot",
            "help",
            "info",
            "keyslot",
            "myid",
            "nodes",
            "shards",
            "slots",
        ],
    ),
    (
        "command",
        &[
            "count",
            "docs",
            "getkeys",
            "getkeysandflags",
            "help",
            "info",
            "list",
        ],
    ),
    ("config", &["get", "help", "resetstat", "rewrite", "set"]),
    (
        "function",
        &[
            "delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats",
        ],
    ),
    ("memory", &["help", "usage"]),
    (
        "object",
        &["encoding", "freq", "help", "idletime", "refcount"],
    ),
    (
        "pubsub",
        &[
            "channels",
            "help",
            "numpat",
            "numsub",
            "shardchannels",
            "shardnumsub",
        ],
    ),
    ("script", &["exists", "flush", "help", "kill", "load"]),
    (
        "xgroup",
        &[
            "create",
            "createconsumer",
            "delconsumer",
            "destroy",
            "help",
            "setid",
        ],
    ),
    ("xinfo", &["consumers", "groups", "help", "stream"]),
];

fn subcommands(name: &str) -> &'static [&'static str] {
    SUBCOMMANDS
        .iter()
        .find(|(c, _)| *c == name)
        .map_or(&[], |(_, subs)| *subs)
}

/// The index of subcommand `arg` of container command `name` (CLIENT LIST's `cmd`).
pub(crate) fn subcommand_index(name: &str, arg: &[u8]) -> Option<usize> {
    let subs = subcommands(name);
    if subs.is_empty() {
        return None;
    }
    subs.iter()
        .position(|s| s.as_bytes().eq_ignore_ascii_case(arg))
}

/// Notes that `live`'s connection ran `cmd` (table index `idx`) in database `db`.
pub(crate) fn note_last(
    live: &crate::clients::Live,
    commands: &crate::cmd::Commands,
    cmd: &Command,
    idx: usize,
    db: usize,
) {
    let Some(spec) = commands.specs.get(idx) else {
        return;
    };
    let sub = (cmd.len() > 1)
        .then(|| subcommand_index(spec.name, cmd.arg(1)))
        .flatten();
    live.note_cmd(idx, sub, db);
}

/// CLIENT LIST's `cmd` field from `Live::cmd`: `NULL`, `get`, or `client|list`.
pub(crate) fn cmd_field(commands: &crate::cmd::Commands, packed: u64) -> String {
    let idx = usize::try_from(packed & 0xffff_ffff).unwrap_or(0);
    let Some(spec) = idx.checked_sub(1).and_then(|i| commands.specs.get(i)) else {
        return "NULL".into();
    };
    let sub = usize::try_from(packed >> 32).unwrap_or(0);
    match sub
        .checked_sub(1)
        .and_then(|s| subcommands(spec.name).get(s))
    {
        Some(s) => format!("{}|{s}", spec.name),
        None => spec.name.to_string(),
    }
}

/// COMMAND HELP. The first line has the shape every Redis HELP reply has (clients and
/// Redis's own tests look for it).
const HELP: &[&[u8]] = &[
    b"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"(no subcommand)",
    b"    Every command this server knows, with its arity, flags and keys.",
    b"COUNT",
    b"    How many commands there are.",
    b"LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
    b"    The command names, optionally filtered.",
    b"INFO [<name> ...]",
    b"    The details of the named commands (all without names).",
    b"DOCS [<name> ...]",
    b"    The documentation of the named commands (all without names).",
    b"GETKEYS <full-command>",
    b"    The keys a full command would use.",
    b"GETKEYSANDFLAGS <full-command>",
    b"    The keys a full command would use, with their access flags.",
    b"HELP",
    b"    This text.",
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
        list(ctx.out, specs, c)?;
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
    } else if (is(sub, "getkeys") || is(sub, "getkeysandflags")) && c.len() >= 3 {
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
            Keys::All | Keys::None => Vec::new(),
            _ if spec.name == "sort" || spec.name == "sort_ro" => sort_keys(&target),
            k => k.of(&target),
        };
        if keys.is_empty() && !movable(spec) {
            return Err(CmdError::err("The command has no key arguments"));
        }
        if is(sub, "getkeys") {
            reply::bulk_array(ctx.out, keys.into_iter());
        } else {
            let out = &mut *ctx.out;
            reply::array_header(out, keys.len());
            for (i, k) in keys.iter().enumerate() {
                let flags = flags_of(spec.name, &target, i);
                reply::array_header(out, 2);
                reply::bulk(out, k);
                reply::set_header(out, flags.len());
                for f in flags {
                    reply::simple(out, f);
                }
            }
        }
    } else if is(sub, "help") {
        reply::bulk_array(ctx.out, HELP.iter().copied());
    } else {
        return Err(unknown_subcommand(sub, "command"));
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE m | ACLCAT cat | PATTERN glob]. No modules exist; a
/// command's ACL category is its group here, and a subcommand's is its container's.
fn list(out: &mut Out, specs: &[Spec], c: &Command) -> CmdResult<()> {
    let filter = match c.len() {
        2 => None,
        5 if is(c.arg(2), "filterby") => Some((c.arg(3).to_ascii_lowercase(), c.arg(4))),
        _ => return Err(CmdError::err("syntax error")),
    };
    if let Some((by, _)) = &filter {
        if !matches!(by.as_slice(), b"pattern" | b"aclcat" | b"module") {
            return Err(CmdError::err("syntax error"));
        }
    }
    let keep = |s: &Spec, name: &[u8]| match &filter {
        None => true,
        Some((by, arg)) => match by.as_slice() {
            b"pattern" => crate::glob::matches(arg, name, true),
            b"aclcat" => s.group.as_bytes().eq_ignore_ascii_case(arg),
            _ => false,
        },
    };
    let mut names: Vec<Vec<u8>> = Vec::new();
    for s in specs {
        let name = s.name.as_bytes();
        if keep(s, name) {
            names.push(name.to_vec());
        }
        for sub in subcommands(s.name) {
            let full = format!("{}|{sub}", s.name).into_bytes();
            if keep(s, &full) {
                names.push(full);
            }
        }
    }
    reply::bulk_array(out, names.iter().map(Vec::as_slice));
    Ok(())
}

/// The flags of the `i`th key of `c` (command `name`): each key belongs to the
/// key spec of its position, the last spec taking the rest (ZUNIONSTORE's sources).
/// Commands whose flags depend on their arguments are resolved as Redis does.
fn flags_of(name: &str, c: &Command, i: usize) -> &'static [&'static str] {
    // OBJECT ENCODING key and the like: the subcommand's spec.
    let sub = (c.len() > 1).then(|| {
        format!(
            "{name}|{}",
            String::from_utf8_lossy(c.arg(1)).to_ascii_lowercase()
        )
    });
    let lookup = |n: &str| {
        KEY_FLAGS
            .binary_search_by(|(k, _)| (*k).cmp(n))
            .ok()
            .map(|at| KEY_FLAGS[at].1)
    };
    let Some(specs) = sub.as_deref().and_then(lookup).or_else(|| lookup(name)) else {
        return &[];
    };
    match name {
        // SET without GET overwrites; with GET it reads the old value first.
        "set" if c.args().skip(3).any(|a| is(a, "get")) => &["RW", "access", "update"],
        "set" => &["OW", "update"],
        // BITFIELD with only GET operations reads.
        "bitfield" if !c.args().skip(2).any(|a| is(a, "set") || is(a, "incrby")) => {
            &["RO", "access"]
        }
        "bitfield" => &["RW", "access", "update"],
        // SORT: the source (spec 0) and the STORE target (the last spec); the middle
        // spec describes BY/GET patterns, which name no key here.
        "sort" | "sort_ro" if i > 0 => specs.last().copied().unwrap_or(&[]),
        _ => specs
            .get(i.min(specs.len().saturating_sub(1)))
            .copied()
            .unwrap_or(&[]),
    }
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
fn movable(s: &Spec) -> bool {
    matches!(s.keys, Keys::Num { .. } | Keys::Streams { .. })
        || matches!(
            s.name,
            "sort" | "sort_ro" | "migrate" | "georadius" | "georadiusbymember"
        )
}

fn command_info(out: &mut Out, specs: &[Spec], which: &[Option<usize>]) {
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

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::{Kit, Value};

    #[test]
    fn command_table() {
        let mut k = Kit::new();
        let n = k.int(&["COMMAND", "COUNT"]);
        assert!(n > 50, "{n}");
        let names = k.strings(&["COMMAND", "LIST"]);
        // COUNT counts top-level commands; LIST adds the subcommands after each.
        let top = names.iter().filter(|n| !n.contains('|')).count();
        assert_eq!(i64::try_from(top).expect("fits"), n);
        assert!(names.contains(&"zadd".to_string()));
        assert!(names.contains(&"client|list".to_string()));
        assert_eq!(
            k.strings(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config|*re*"]),
            ["config|resetstat", "config|rewrite"]
        );
        let scripting = k.strings(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "scripting"]);
        assert!(
            scripting.contains(&"script|kill".to_string()),
            "{scripting:?}"
        );
        assert!(!scripting.contains(&"set".to_string()));
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
            ["d", "a", "b"]
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
    fn command_getkeysandflags() {
        let mut k = Kit::new();
        let flags = |k: &mut Kit, args: &[&str]| -> String {
            let mut a = vec!["COMMAND", "GETKEYSANDFLAGS"];
            a.extend_from_slice(args);
            format!("{:?}", k.value(&a))
        };
        let pair = |key: &str, f: &[&str]| {
            let f: Vec<Value> = f.iter().map(|s| Value::Str((*s).into())).collect();
            Value::Arr(vec![Value::Str(key.into()), Value::Arr(f)])
        };
        let want = |v: Vec<Value>| format!("{:?}", Value::Arr(v));
        assert_eq!(
            flags(&mut k, &["set", "k1", "v1"]),
            want(vec![pair("k1", &["OW", "update"])])
        );
        assert_eq!(
            flags(&mut k, &["set", "k1", "v1", "get"]),
            want(vec![pair("k1", &["RW", "access", "update"])])
        );
        assert_eq!(
            flags(&mut k, &["lmove", "k1", "k2", "left", "right"]),
            want(vec![
                pair("k1", &["RW", "access", "delete"]),
                pair("k2", &["RW", "insert"])
            ])
        );
        assert_eq!(
            flags(&mut k, &["sort", "k1", "store", "k2"]),
            want(vec![
                pair("k1", &["RO", "access"]),
                pair("k2", &["OW", "update"])
            ])
        );
        assert_eq!(
            flags(&mut k, &["zunionstore", "d", "2", "a", "b"]),
            want(vec![
                pair("d", &["OW", "update"]),
                pair("a", &["RO", "access"]),
                pair("b", &["RO", "access"])
            ])
        );
    }

    /// Every container in [`super::SUBCOMMANDS`] is a command, lists `help`, and
    /// its HELP does not answer "unknown subcommand".
    #[test]
    fn listed_subcommands_exist() {
        let mut k = Kit::new();
        let top = k.strings(&["COMMAND", "LIST"]);
        for (container, subs) in super::SUBCOMMANDS {
            assert!(top.contains(&(*container).to_string()), "{container}");
            assert!(subs.contains(&"help"), "{container}");
            let v = k.value(&[container, "help"]);
            assert!(matches!(v, Value::Arr(_)), "{container} HELP: {v:?}");
        }
    }
}
