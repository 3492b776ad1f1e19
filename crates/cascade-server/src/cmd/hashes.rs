//! Hash commands, stored as one engine entry per field under the key's prefix
//! (`0x02 len key field`), plus a count in the key's metadata. `HGETALL` is one range
//! scan; `HSET` of a new field costs one point read (is the field new?) and one
//! atomic batch with the metadata. This is how go-ycsb and Java YCSB store records.

use std::collections::HashSet;

use super::{int_arg, parse_i64, spec, Ctx, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_key, sub_prefix, Meta, Type, NS_HASH};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Txn;

/// The hash commands.
pub static SPECS: &[Spec] = &[
    spec(
        "hset",
        -4,
        W,
        KEY1,
        "hash",
        "Sets fields of a hash; returns how many were added.",
        hset,
    ),
    spec(
        "hmset",
        -4,
        W,
        KEY1,
        "hash",
        "Sets fields of a hash.",
        hmset,
    ),
    spec(
        "hsetnx",
        4,
        W,
        KEY1,
        "hash",
        "Sets a field only if it does not exist.",
        hsetnx,
    ),
    spec(
        "hget",
        3,
        R,
        KEY1,
        "hash",
        "Returns the value of a field.",
        hget,
    ),
    spec(
        "hmget",
        -3,
        R,
        KEY1,
        "hash",
        "Returns the values of several fields.",
        hmget,
    ),
    spec(
        "hgetall",
        2,
        R,
        KEY1,
        "hash",
        "Returns all fields and values.",
        hgetall,
    ),
    spec("hdel", -3, W, KEY1, "hash", "Deletes fields.", hdel),
    spec(
        "hexists",
        3,
        R,
        KEY1,
        "hash",
        "Tells whether a field exists.",
        hexists,
    ),
    spec(
        "hlen",
        2,
        R,
        KEY1,
        "hash",
        "Returns the number of fields.",
        hlen,
    ),
    spec(
        "hkeys",
        2,
        R,
        KEY1,
        "hash",
        "Returns all field names.",
        hkeys,
    ),
    spec("hvals", 2, R, KEY1, "hash", "Returns all values.", hvals),
    spec(
        "hstrlen",
        3,
        R,
        KEY1,
        "hash",
        "Returns the length of a field's value.",
        hstrlen,
    ),
    spec(
        "hincrby",
        4,
        W,
        KEY1,
        "hash",
        "Increments an integer field.",
        hincrby,
    ),
];

/// Sets `pairs` (later duplicates win) in hash `key`; returns fields added. With
/// `only_new`, existing fields are left alone.
fn set_fields(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    pairs: &[(&[u8], &[u8])],
    only_new: bool,
) -> CmdResult<i64> {
    let store = &ctx.shared.store;
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::Hash)?;
    let mut seen = HashSet::new();
    let mut added = 0i64;
    for &(f, v) in pairs.iter().rev() {
        if !seen.insert(f) {
            continue;
        }
        let fk = sub_key(NS_HASH, key, f);
        let exists = old.is_some() && store.db().get(&fk)?.is_some();
        if exists && only_new {
            continue;
        }
        added += i64::from(!exists);
        txn.batch.put(fk, v.to_vec());
    }
    if added > 0 || old.is_none() {
        let count = old.as_ref().map_or(0, Meta::count) + added as u64;
        let expire_at = old.as_ref().and_then(|m| m.expire_at);
        if count > 0 {
            store.set_meta(
                &mut txn,
                key,
                old.as_ref(),
                &Meta::collection(Type::Hash, count, expire_at),
            );
        }
    }
    store.commit(txn)?;
    Ok(added)
}

fn pairs<'c>(c: &'c Command, name: &str) -> CmdResult<Vec<(&'c [u8], &'c [u8])>> {
    if !c.len().is_multiple_of(2) {
        return Err(CmdError::Msg(super::arity_error(name)));
    }
    Ok((2..c.len())
        .step_by(2)
        .map(|i| (c.arg(i), c.arg(i + 1)))
        .collect())
}

fn hset(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let p = pairs(c, "hset")?;
    let n = set_fields(ctx, c.arg(1), &p, false)?;
    reply::int(ctx.out, n);
    Ok(())
}

fn hmset(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let p = pairs(c, "hmset")?;
    set_fields(ctx, c.arg(1), &p, false)?;
    reply::ok(ctx.out);
    Ok(())
}

fn hsetnx(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let n = set_fields(ctx, c.arg(1), &[(c.arg(2), c.arg(3))], true)?;
    reply::int(ctx.out, n);
    Ok(())
}

fn field(ctx: &Ctx<'_>, key: &[u8], f: &[u8]) -> CmdResult<Option<Vec<u8>>> {
    Ok(ctx.shared.store.db().get(&sub_key(NS_HASH, key, f))?)
}

fn hget(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let v = match ctx.shared.store.typed(c.arg(1), Type::Hash)? {
        Some(_) => field(ctx, c.arg(1), c.arg(2))?,
        None => None,
    };
    reply::opt_bulk(ctx.out, v.as_deref());
    Ok(())
}

fn hmget(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let live = ctx.shared.store.typed(c.arg(1), Type::Hash)?.is_some();
    let mut vals = Vec::with_capacity(c.len() - 2);
    for f in c.args().skip(2) {
        vals.push(if live { field(ctx, c.arg(1), f)? } else { None });
    }
    reply::array_header(ctx.out, vals.len());
    for v in vals {
        reply::opt_bulk(ctx.out, v.as_deref());
    }
    Ok(())
}

/// All (field, value) pairs of a live hash.
fn all(ctx: &Ctx<'_>, key: &[u8]) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
    if ctx.shared.store.typed(key, Type::Hash)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = sub_prefix(NS_HASH, key);
    let mut kvs = ctx.shared.store.prefix_scan(&prefix, usize::MAX)?;
    for (k, _) in &mut kvs {
        k.drain(..prefix.len());
    }
    Ok(kvs)
}

fn hgetall(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let kvs = all(ctx, c.arg(1))?;
    reply::map_header(ctx.out, kvs.len());
    for (f, v) in &kvs {
        reply::bulk(ctx.out, f);
        reply::bulk(ctx.out, v);
    }
    Ok(())
}

fn hkeys(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let kvs = all(ctx, c.arg(1))?;
    reply::bulk_array(ctx.out, kvs.iter().map(|(f, _)| &f[..]));
    Ok(())
}

fn hvals(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let kvs = all(ctx, c.arg(1))?;
    reply::bulk_array(ctx.out, kvs.iter().map(|(_, v)| &v[..]));
    Ok(())
}

fn hdel(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let Some(old) = store.begin_typed(&mut txn, key, Type::Hash)? else {
        store.commit(txn)?;
        reply::int(ctx.out, 0);
        return Ok(());
    };
    let mut seen = HashSet::new();
    let mut removed = 0u64;
    for f in c.args().skip(2) {
        if !seen.insert(f) {
            continue;
        }
        let fk = sub_key(NS_HASH, key, f);
        if store.db().get(&fk)?.is_some() {
            txn.batch.delete(fk);
            removed += 1;
        }
    }
    store.shrink(&mut txn, key, &old, removed)?;
    store.commit(txn)?;
    reply::int(ctx.out, removed as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let live = ctx.shared.store.typed(c.arg(1), Type::Hash)?.is_some();
    let e = live && field(ctx, c.arg(1), c.arg(2))?.is_some();
    reply::int(ctx.out, i64::from(e));
    Ok(())
}

fn hlen(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let m = ctx.shared.store.typed(c.arg(1), Type::Hash)?;
    reply::int(ctx.out, m.map_or(0, |m| m.count() as i64));
    Ok(())
}

fn hstrlen(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let live = ctx.shared.store.typed(c.arg(1), Type::Hash)?.is_some();
    let n = if live {
        field(ctx, c.arg(1), c.arg(2))?.map_or(0, |v| v.len())
    } else {
        0
    };
    reply::int(ctx.out, n as i64);
    Ok(())
}

fn hincrby(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let by = int_arg(c.arg(3))?;
    let store = &ctx.shared.store;
    let (key, f) = (c.arg(1), c.arg(2));
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::Hash)?;
    let fk = sub_key(NS_HASH, key, f);
    let cur = match &old {
        Some(_) => store.db().get(&fk)?,
        None => None,
    };
    let n = match &cur {
        Some(v) => parse_i64(v).ok_or_else(|| CmdError::err("hash value is not an integer"))?,
        None => 0,
    };
    let new = n.checked_add(by).ok_or(CmdError::Overflow)?;
    txn.batch.put(fk, new.to_string().into_bytes());
    if cur.is_none() {
        let count = old.as_ref().map_or(0, Meta::count) + 1;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        store.set_meta(
            &mut txn,
            key,
            old.as_ref(),
            &Meta::collection(Type::Hash, count, exp),
        );
    }
    store.commit(txn)?;
    reply::int(ctx.out, new);
    Ok(())
}
