//! String commands that read or write a whole value: `GET SET SETNX SETEX PSETEX GETSET
//! GETDEL GETEX MGET MSET MSETNX`. A string is one engine entry: its `0x01` metadata
//! holds the bytes (see `keyspace.rs`), so `GET` is one point read and `SET` one read
//! (the old type and expiry) plus one write. Expiry options of `SET` and `GETEX` are
//! real (`keyspace/expire.rs`). Every handler is a data command: it gets the
//! transaction, the arguments and the reply buffer; the dispatcher holds the keys' locks.

use super::{expire_arg, put_string};
use crate::cmd::{is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The string commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "get",
        2,
        R,
        KEY1,
        "string",
        "Returns the string value of a key.",
        Data(get),
    ),
    spec(
        "set",
        -3,
        W,
        KEY1,
        "string",
        "Sets the string value of a key, ignoring its type.",
        Data(set),
    ),
    spec(
        "setnx",
        3,
        W,
        KEY1,
        "string",
        "Sets a key only if it does not exist.",
        Data(setnx),
    ),
    spec(
        "setex",
        4,
        W,
        KEY1,
        "string",
        "Sets a key with an expiry in seconds.",
        Data(setex),
    ),
    spec(
        "psetex",
        4,
        W,
        KEY1,
        "string",
        "Sets a key with an expiry in milliseconds.",
        Data(psetex),
    ),
    spec(
        "getset",
        3,
        W,
        KEY1,
        "string",
        "Sets a key and returns its old value.",
        Data(getset),
    ),
    spec(
        "getdel",
        2,
        W,
        KEY1,
        "string",
        "Returns a string and deletes the key.",
        Data(getdel),
    ),
    spec(
        "mget",
        -2,
        R,
        Keys::Range(1, -1, 1),
        "string",
        "Returns the values of several keys.",
        Data(mget),
    ),
    spec(
        "mset",
        -3,
        W,
        Keys::Range(1, -1, 2),
        "string",
        "Sets several keys atomically.",
        Data(mset),
    ),
    spec(
        "getex",
        -2,
        W,
        KEY1,
        "string",
        "Returns a string and sets or clears its expiry.",
        Data(getex),
    ),
    spec(
        "msetnx",
        -3,
        W,
        Keys::Range(1, -1, 2),
        "string",
        "Sets keys only if none exists.",
        Data(msetnx),
    ),
];

fn get(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::String)?;
    reply::opt_bulk(out, m.as_ref().map(|m| &m.payload[..]));
    Ok(())
}

/// Options of SET.
#[derive(Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent SET flags, as Redis names them"
)]
pub(crate) struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expire_at: Option<u64>,
}

fn parse_set_opts(now: u64, c: &Command) -> CmdResult<SetOpts> {
    let mut o = SetOpts::default();
    let mut i = 3;
    let mut has_expire = false;
    while i < c.len() {
        let a = c.arg(i);
        let next = c.len() > i + 1;
        if is(a, "nx") && !o.xx {
            o.nx = true;
        } else if is(a, "xx") && !o.nx {
            o.xx = true;
        } else if is(a, "get") {
            o.get = true;
        } else if is(a, "keepttl") && !has_expire {
            o.keepttl = true;
            has_expire = true;
        } else if !has_expire && next && ["ex", "px", "exat", "pxat"].iter().any(|k| is(a, k)) {
            let (unit, abs) = if is(a, "ex") {
                (1000, false)
            } else if is(a, "px") {
                (1, false)
            } else if is(a, "exat") {
                (1000, true)
            } else {
                (1, true)
            };
            i += 1;
            o.expire_at = Some(expire_arg(now, c.arg(i), unit, abs, "set")?);
            has_expire = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// Applies SET with parsed options. Returns whether the value was written and (with
/// `GET`) the previous value.
fn apply_set(
    tx: &mut Tx<'_>,
    key: &[u8],
    value: &[u8],
    o: &SetOpts,
) -> CmdResult<(bool, Option<Vec<u8>>)> {
    let old = tx.begin(key)?;
    if o.get && old.as_ref().is_some_and(|m| m.ty != Type::String) {
        return Err(CmdError::WrongType);
    }
    let old_value = if o.get {
        old.as_ref().map(|m| m.payload.clone())
    } else {
        None
    };
    let skip = (o.nx && old.is_some()) || (o.xx && old.is_none());
    if !skip {
        let expire_at = if o.keepttl {
            old.as_ref().and_then(|m| m.expire_at)
        } else {
            o.expire_at
        };
        put_string(tx, key, old, value, expire_at)?;
    }
    Ok((!skip, old_value))
}

/// SET with parsed options, replying as SET does.
fn set_with(
    tx: &mut Tx<'_>,
    out: &mut Out,
    key: &[u8],
    value: &[u8],
    o: &SetOpts,
) -> CmdResult<()> {
    let (written, old_value) = apply_set(tx, key, value, o)?;
    if o.get {
        reply::opt_bulk(out, old_value.as_deref());
    } else if !written {
        reply::nil(out);
    } else {
        reply::ok(out);
    }
    Ok(())
}

fn set(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let o = parse_set_opts(tx.now(), c)?;
    set_with(tx, out, c.arg(1), c.arg(2), &o)
}

fn setnx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let o = SetOpts {
        nx: true,
        ..SetOpts::default()
    };
    let (written, _) = apply_set(tx, c.arg(1), c.arg(2), &o)?;
    reply::int(out, i64::from(written));
    Ok(())
}

fn setex_unit(tx: &mut Tx<'_>, c: &Command, out: &mut Out, unit: i64, name: &str) -> CmdResult<()> {
    let o = SetOpts {
        expire_at: Some(expire_arg(tx.now(), c.arg(2), unit, false, name)?),
        ..SetOpts::default()
    };
    set_with(tx, out, c.arg(1), c.arg(3), &o)
}

fn setex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    setex_unit(tx, c, out, 1000, "setex")
}

fn psetex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    setex_unit(tx, c, out, 1, "psetex")
}

fn getset(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let o = SetOpts {
        get: true,
        ..SetOpts::default()
    };
    set_with(tx, out, c.arg(1), c.arg(2), &o)
}

fn getdel(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let old = tx.begin_typed(key, Type::String)?;
    if let Some(m) = &old {
        tx.remove(key, m)?;
    }
    reply::opt_bulk(out, old.as_ref().map(|m| &m.payload[..]));
    Ok(())
}

fn mget(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut vals = Vec::with_capacity(c.len() - 1);
    for k in c.args().skip(1) {
        vals.push(tx.meta(k)?.filter(|m| m.ty == Type::String));
    }
    reply::array_header(out, vals.len());
    for v in vals {
        reply::opt_bulk(out, v.as_ref().map(|m| &m.payload[..]));
    }
    Ok(())
}

fn mset(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if c.len().is_multiple_of(2) {
        return Err(CmdError::Msg(crate::cmd::arity_error("mset")));
    }
    // In argument order: the last value of a repeated key wins.
    for i in (1..c.len()).step_by(2) {
        let (k, v) = (c.arg(i), c.arg(i + 1));
        let old = tx.begin(k)?;
        put_string(tx, k, old, v, None)?;
    }
    reply::ok(out);
    Ok(())
}

fn getex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let now = tx.now();
    let mut new_exp: Option<Option<u64>> = None;
    let mut i = 2;
    while i < c.len() {
        let a = c.arg(i);
        if is(a, "persist") && new_exp.is_none() {
            new_exp = Some(None);
            i += 1;
        } else if i + 1 < c.len() && new_exp.is_none() {
            let (unit, abs) = if is(a, "ex") {
                (1000, false)
            } else if is(a, "px") {
                (1, false)
            } else if is(a, "exat") {
                (1000, true)
            } else if is(a, "pxat") {
                (1, true)
            } else {
                return Err(CmdError::Syntax);
            };
            new_exp = Some(Some(expire_arg(now, c.arg(i + 1), unit, abs, "getex")?));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(m) = tx.begin_typed(key, Type::String)? else {
        reply::nil(out);
        return Ok(());
    };
    if let Some(exp) = new_exp {
        if exp.is_some_and(|t| t <= now) {
            tx.remove(key, &m)?;
        } else if exp != m.expire_at {
            let new = Meta {
                expire_at: exp,
                ..m.clone()
            };
            tx.set_meta(key, Some(&m), &new);
        }
    }
    reply::bulk(out, &m.payload);
    Ok(())
}

fn msetnx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if c.len().is_multiple_of(2) {
        return Err(CmdError::Msg(crate::cmd::arity_error("msetnx")));
    }
    for i in (1..c.len()).step_by(2) {
        if tx.meta(c.arg(i))?.is_some() {
            reply::int(out, 0);
            return Ok(());
        }
    }
    for i in (1..c.len()).step_by(2) {
        let old = tx.begin(c.arg(i))?;
        put_string(tx, c.arg(i), old, c.arg(i + 1), None)?;
    }
    reply::int(out, 1);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn set_get_and_options() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "1"]);
        k.expect(&["GET", "a"], "$1\r\n1\r\n");
        k.expect(&["GET", "missing"], "$-1\r\n");
        k.expect(&["SET", "a", "2", "NX"], "$-1\r\n");
        k.ok(&["SET", "a", "2", "XX"]);
        k.expect(&["SET", "b", "2", "XX"], "$-1\r\n");
        k.expect(&["SET", "a", "3", "GET"], "$1\r\n2\r\n");
        k.expect(&["SET", "a", "1", "NX", "XX"], "-ERR syntax error\r\n");
        k.expect(
            &["SET", "a", "1", "EX", "0"],
            "-ERR invalid expire time in 'set' command\r\n",
        );
        k.expect(
            &["SET", "a", "1", "EX", "x"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.ok(&["SET", "a", "1", "EX", "100"]);
        k.expect(&["TTL", "a"], ":100\r\n");
        k.ok(&["SET", "a", "2", "KEEPTTL"]);
        k.expect(&["TTL", "a"], ":100\r\n");
        k.ok(&["SET", "a", "2"]);
        k.expect(&["TTL", "a"], ":-1\r\n");
        k.expect(&["SETNX", "a", "x"], ":0\r\n");
        k.expect(&["SETNX", "n", "x"], ":1\r\n");
        k.expect(&["GETSET", "n", "y"], "$1\r\nx\r\n");
        k.expect(&["GETDEL", "n"], "$1\r\ny\r\n");
        k.expect(&["EXISTS", "n"], ":0\r\n");
        k.ok(&["SETEX", "e", "10", "v"]);
        k.expect(&["TTL", "e"], ":10\r\n");
        k.ok(&["PSETEX", "e", "10000", "v"]);
        k.expect(&["TTL", "e"], ":10\r\n");
        k.expect(
            &["SETEX", "e", "-1", "v"],
            "-ERR invalid expire time in 'setex' command\r\n",
        );
    }

    #[test]
    fn set_replaces_other_types_and_get_checks_them() {
        let mut k = Kit::new();
        k.expect(&["HSET", "h", "f", "v"], ":1\r\n");
        k.expect(
            &["GET", "h"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        k.expect(
            &["SET", "h", "x", "GET"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        k.ok(&["SET", "h", "x"]);
        k.expect(&["TYPE", "h"], "+string\r\n");
        k.expect(
            &["HGET", "h", "f"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
    }

    #[test]
    fn mget_mset() {
        let mut k = Kit::new();
        k.ok(&["MSET", "a", "1", "b", "2", "a", "3"]);
        k.expect(
            &["MGET", "a", "b", "c"],
            "*3\r\n$1\r\n3\r\n$1\r\n2\r\n$-1\r\n",
        );
        k.expect(
            &["MSET", "a", "1", "b"],
            "-ERR wrong number of arguments for 'mset' command\r\n",
        );
    }

    #[test]
    fn getex_and_msetnx() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "x"]);
        k.expect(&["MSETNX", "x1", "1", "s", "2"], ":0\r\n");
        k.expect(&["MSETNX", "x1", "1", "x2", "2"], ":1\r\n");
        k.expect(&["GETEX", "x1", "EX", "100"], "$1\r\n1\r\n");
        k.expect(&["TTL", "x1"], ":100\r\n");
        k.expect(&["GETEX", "x1", "PERSIST"], "$1\r\n1\r\n");
        k.expect(&["TTL", "x1"], ":-1\r\n");
    }
}
