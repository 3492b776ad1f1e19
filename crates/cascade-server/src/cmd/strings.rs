//! String commands. A string is one engine entry: its `0x01` metadata holds the
//! bytes (see `keyspace.rs`), so `GET` is one point read and `SET` one read (the old
//! type and expiry) plus one write. Expiry options of `SET` are real (`expire.rs`).

use super::{int_arg, is, parse_i64, spec, Ctx, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{now_ms, Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Txn;

/// The string and expiry commands.
pub static SPECS: &[Spec] = &[
    spec(
        "get",
        2,
        R,
        KEY1,
        "string",
        "Returns the string value of a key.",
        get,
    ),
    spec(
        "set",
        -3,
        W,
        KEY1,
        "string",
        "Sets the string value of a key, ignoring its type.",
        set,
    ),
    spec(
        "setnx",
        3,
        W,
        KEY1,
        "string",
        "Sets a key only if it does not exist.",
        setnx,
    ),
    spec(
        "setex",
        4,
        W,
        KEY1,
        "string",
        "Sets a key with an expiry in seconds.",
        setex,
    ),
    spec(
        "psetex",
        4,
        W,
        KEY1,
        "string",
        "Sets a key with an expiry in milliseconds.",
        psetex,
    ),
    spec(
        "getset",
        3,
        W,
        KEY1,
        "string",
        "Sets a key and returns its old value.",
        getset,
    ),
    spec(
        "getdel",
        2,
        W,
        KEY1,
        "string",
        "Returns a string and deletes the key.",
        getdel,
    ),
    spec(
        "mget",
        -2,
        R,
        (1, -1, 1),
        "string",
        "Returns the values of several keys.",
        mget,
    ),
    spec(
        "mset",
        -3,
        W,
        (1, -1, 2),
        "string",
        "Sets several keys atomically.",
        mset,
    ),
    spec(
        "incr",
        2,
        W,
        KEY1,
        "string",
        "Increments an integer by one.",
        incr,
    ),
    spec(
        "decr",
        2,
        W,
        KEY1,
        "string",
        "Decrements an integer by one.",
        decr,
    ),
    spec(
        "incrby",
        3,
        W,
        KEY1,
        "string",
        "Increments an integer.",
        incrby,
    ),
    spec(
        "decrby",
        3,
        W,
        KEY1,
        "string",
        "Decrements an integer.",
        decrby,
    ),
    spec(
        "append",
        3,
        W,
        KEY1,
        "string",
        "Appends to a string.",
        append,
    ),
    spec(
        "strlen",
        2,
        R,
        KEY1,
        "string",
        "Returns the length of a string.",
        strlen,
    ),
];

fn get(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let m = ctx.shared.store.typed(c.arg(1), Type::String)?;
    reply::opt_bulk(ctx.out, m.as_ref().map(|m| &m.payload[..]));
    Ok(())
}

#[derive(Default)]
struct SetOpts {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    expire_at: Option<u64>,
}

/// Converts a relative or absolute expiry argument to Unix milliseconds.
fn expire_arg(arg: &[u8], unit_ms: u64, absolute: bool, cmd: &str) -> CmdResult<u64> {
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let n = int_arg(arg)?;
    if n <= 0 {
        return Err(invalid());
    }
    // As Redis: the absolute time in ms must fit a signed 64-bit integer.
    let ms = n.checked_mul(unit_ms as i64).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        (now_ms() as i64).checked_add(ms).ok_or_else(invalid)?
    };
    Ok(at as u64)
}

fn parse_set_opts(c: &Command) -> CmdResult<SetOpts> {
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
            o.expire_at = Some(expire_arg(c.arg(i), unit, abs, "set")?);
            has_expire = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// SET with parsed options; returns the reply it wrote.
/// Applies SET with parsed options. Returns whether the value was written and (with
/// `GET`) the previous value.
fn apply_set(
    store: &crate::store::Store,
    key: &[u8],
    value: &[u8],
    o: &SetOpts,
) -> CmdResult<(bool, Option<Vec<u8>>)> {
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin(&mut txn, key)?;
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
        let old = match old {
            Some(m) if m.ty != Type::String => {
                store.remove(&mut txn, key, &m)?;
                None
            }
            m => m,
        };
        store.set_meta(&mut txn, key, old.as_ref(), &Meta::string(value, expire_at));
        store.commit(txn)?;
    }
    Ok((!skip, old_value))
}

/// SET with parsed options, replying as SET does.
fn set_with(ctx: &mut Ctx<'_>, key: &[u8], value: &[u8], o: &SetOpts) -> CmdResult<()> {
    let (written, old_value) = apply_set(&ctx.shared.store, key, value, o)?;
    if o.get {
        reply::opt_bulk(ctx.out, old_value.as_deref());
    } else if !written {
        reply::nil(ctx.out);
    } else {
        reply::ok(ctx.out);
    }
    Ok(())
}

fn set(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let o = parse_set_opts(c)?;
    set_with(ctx, c.arg(1), c.arg(2), &o)
}

fn setnx(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let o = SetOpts {
        nx: true,
        ..SetOpts::default()
    };
    let (written, _) = apply_set(&ctx.shared.store, c.arg(1), c.arg(2), &o)?;
    reply::int(ctx.out, i64::from(written));
    Ok(())
}

fn setex_unit(ctx: &mut Ctx<'_>, c: &Command, unit: u64, name: &str) -> CmdResult<()> {
    let o = SetOpts {
        expire_at: Some(expire_arg(c.arg(2), unit, false, name)?),
        ..SetOpts::default()
    };
    set_with(ctx, c.arg(1), c.arg(3), &o)
}

fn setex(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    setex_unit(ctx, c, 1000, "setex")
}

fn psetex(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    setex_unit(ctx, c, 1, "psetex")
}

fn getset(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let o = SetOpts {
        get: true,
        ..SetOpts::default()
    };
    set_with(ctx, c.arg(1), c.arg(2), &o)
}

fn getdel(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::String)?;
    if let Some(m) = &old {
        store.remove(&mut txn, key, m)?;
    }
    store.commit(txn)?;
    reply::opt_bulk(ctx.out, old.as_ref().map(|m| &m.payload[..]));
    Ok(())
}

fn mget(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let mut vals = Vec::with_capacity(c.len() - 1);
    for k in c.args().skip(1) {
        vals.push(ctx.shared.store.meta(k)?.filter(|m| m.ty == Type::String));
    }
    reply::array_header(ctx.out, vals.len());
    for v in vals {
        reply::opt_bulk(ctx.out, v.as_ref().map(|m| &m.payload[..]));
    }
    Ok(())
}

fn mset(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if c.len().is_multiple_of(2) {
        return Err(CmdError::Msg(super::arity_error("mset")));
    }
    // The last value of a repeated key wins.
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::with_capacity(c.len() / 2);
    for i in (1..c.len()).step_by(2) {
        pairs.push((c.arg(i), c.arg(i + 1)));
    }
    let mut seen = std::collections::HashSet::new();
    let mut unique: Vec<(&[u8], &[u8])> = Vec::with_capacity(pairs.len());
    for p in pairs.into_iter().rev() {
        if seen.insert(p.0) {
            unique.push(p);
        }
    }
    let store = &ctx.shared.store;
    let _g = store.lock_many(unique.iter().map(|p| p.0));
    let mut txn = Txn::default();
    for (k, v) in unique {
        let old = match store.begin(&mut txn, k)? {
            Some(m) if m.ty != Type::String => {
                store.remove(&mut txn, k, &m)?;
                None
            }
            m => m,
        };
        store.set_meta(&mut txn, k, old.as_ref(), &Meta::string(v, None));
    }
    store.commit(txn)?;
    reply::ok(ctx.out);
    Ok(())
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], by: i64) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::String)?;
    let cur = match &old {
        Some(m) => parse_i64(&m.payload).ok_or(CmdError::NotInteger)?,
        None => 0,
    };
    let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    let expire_at = old.as_ref().and_then(|m| m.expire_at);
    let meta = Meta::string(new.to_string().as_bytes(), expire_at);
    store.set_meta(&mut txn, key, old.as_ref(), &meta);
    store.commit(txn)?;
    reply::int(ctx.out, new);
    Ok(())
}

fn incr(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    incr_by(ctx, c.arg(1), 1)
}

fn decr(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    incr_by(ctx, c.arg(1), -1)
}

fn incrby(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    incr_by(ctx, c.arg(1), int_arg(c.arg(2))?)
}

fn decrby(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let by = int_arg(c.arg(2))?;
    let neg = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_by(ctx, c.arg(1), neg)
}

fn append(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::String)?;
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    v.extend_from_slice(c.arg(2));
    let len = v.len();
    let meta = Meta {
        ty: Type::String,
        expire_at: old.as_ref().and_then(|m| m.expire_at),
        payload: v,
    };
    store.set_meta(&mut txn, key, old.as_ref(), &meta);
    store.commit(txn)?;
    reply::int(ctx.out, len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let m = ctx.shared.store.typed(c.arg(1), Type::String)?;
    reply::int(ctx.out, m.map_or(0, |m| m.payload.len() as i64));
    Ok(())
}
