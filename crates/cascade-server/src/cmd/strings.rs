//! String commands. A string is one engine entry: its `0x01` metadata holds the
//! bytes (see `keyspace.rs`), so `GET` is one point read and `SET` one read (the old
//! type and expiry) plus one write. Expiry options of `SET` are real (`expire.rs`).
//! Every handler is a data command: it gets the transaction, the arguments and the
//! reply buffer; the dispatcher holds the keys' locks.

use super::{int_arg, is, parse_i64, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::cmd::args::len_i64;
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
        "incr",
        2,
        W,
        KEY1,
        "string",
        "Increments an integer by one.",
        Data(incr),
    ),
    spec(
        "decr",
        2,
        W,
        KEY1,
        "string",
        "Decrements an integer by one.",
        Data(decr),
    ),
    spec(
        "incrby",
        3,
        W,
        KEY1,
        "string",
        "Increments an integer.",
        Data(incrby),
    ),
    spec(
        "decrby",
        3,
        W,
        KEY1,
        "string",
        "Decrements an integer.",
        Data(decrby),
    ),
    spec(
        "append",
        3,
        W,
        KEY1,
        "string",
        "Appends to a string.",
        Data(append),
    ),
    spec(
        "strlen",
        2,
        R,
        KEY1,
        "string",
        "Returns the length of a string.",
        Data(strlen),
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

/// Converts a relative or absolute expiry argument to Unix milliseconds.
pub(crate) fn expire_arg(
    now: u64,
    arg: &[u8],
    unit_ms: i64,
    absolute: bool,
    cmd: &str,
) -> CmdResult<u64> {
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let n = int_arg(arg)?;
    if n <= 0 {
        return Err(invalid());
    }
    // As Redis: the absolute time in ms must fit a signed 64-bit integer.
    let ms = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        i64::try_from(now)
            .ok()
            .and_then(|now| now.checked_add(ms))
            .ok_or_else(invalid)?
    };
    u64::try_from(at).map_err(|_| invalid())
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

/// Writes string `value` at `key` replacing whatever is there (any type).
pub(crate) fn put_string(
    tx: &mut Tx<'_>,
    key: &[u8],
    old: Option<Meta>,
    value: &[u8],
    expire_at: Option<u64>,
) -> CmdResult<()> {
    let old = match old {
        Some(m) if m.ty != Type::String => {
            tx.remove(key, &m)?;
            None
        }
        m => m,
    };
    tx.set_meta(key, old.as_ref(), &Meta::string(value, expire_at));
    Ok(())
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
        return Err(CmdError::Msg(super::arity_error("mset")));
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

fn incr_by(tx: &mut Tx<'_>, out: &mut Out, key: &[u8], by: i64) -> CmdResult<()> {
    let old = tx.begin_typed(key, Type::String)?;
    let cur = match &old {
        Some(m) => parse_i64(&m.payload).ok_or(CmdError::NotInteger)?,
        None => 0,
    };
    let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    let expire_at = old.as_ref().and_then(|m| m.expire_at);
    let meta = Meta::string(new.to_string().as_bytes(), expire_at);
    tx.set_meta(key, old.as_ref(), &meta);
    reply::int(out, new);
    Ok(())
}

fn incr(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    incr_by(tx, out, c.arg(1), 1)
}

fn decr(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    incr_by(tx, out, c.arg(1), -1)
}

fn incrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = int_arg(c.arg(2))?;
    incr_by(tx, out, c.arg(1), by)
}

fn decrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = int_arg(c.arg(2))?;
    let neg = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_by(tx, out, c.arg(1), neg)
}

fn append(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let old = tx.begin_typed(key, Type::String)?;
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    v.extend_from_slice(c.arg(2));
    let len = v.len();
    let meta = Meta {
        ty: Type::String,
        expire_at: old.as_ref().and_then(|m| m.expire_at),
        payload: v,
    };
    tx.set_meta(key, old.as_ref(), &meta);
    reply::int(out, len_i64(len));
    Ok(())
}

fn strlen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::String)?;
    reply::int(out, m.map_or(0, |m| len_i64(m.payload.len())));
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
    fn multi_key_and_counters() {
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
        k.expect(&["INCR", "n"], ":1\r\n");
        k.expect(&["INCRBY", "n", "10"], ":11\r\n");
        k.expect(&["DECR", "n"], ":10\r\n");
        k.expect(&["DECRBY", "n", "20"], ":-10\r\n");
        k.expect(&["INCR", "a"], ":4\r\n");
        k.ok(&["SET", "s", "abc"]);
        k.expect(
            &["INCR", "s"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.ok(&["SET", "big", "9223372036854775807"]);
        k.expect(
            &["INCR", "big"],
            "-ERR increment or decrement would overflow\r\n",
        );
        k.expect(
            &["DECRBY", "n", "-9223372036854775808"],
            "-ERR decrement would overflow\r\n",
        );
        k.expect(&["APPEND", "s", "de"], ":5\r\n");
        k.expect(&["APPEND", "new", "xy"], ":2\r\n");
        k.expect(&["STRLEN", "s"], ":5\r\n");
        k.expect(&["STRLEN", "none"], ":0\r\n");
    }
}
