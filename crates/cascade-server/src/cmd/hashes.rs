//! Hash commands, stored as one engine entry per field under the key's prefix
//! (`0x02 len key field`), plus a count in the key's metadata. `HGETALL` is one range
//! scan; `HSET` of a new field costs one point read (is the field new?) and one
//! atomic batch with the metadata. This is how go-ycsb and Java YCSB store records.
//! All are data commands on one key.

use super::{int_arg, spec, Ctx, Run::Ctl, Run::Data, Spec, KEY1, R, W};
use crate::cmd::args::len_i64;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_key, sub_prefix, Meta, Type, NS_HASH};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The hash commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "hset",
        -4,
        W,
        KEY1,
        "hash",
        "Sets fields of a hash; returns how many were added.",
        Data(hset),
    ),
    spec(
        "hmset",
        -4,
        W,
        KEY1,
        "hash",
        "Sets fields of a hash.",
        Data(hmset),
    ),
    spec(
        "hsetnx",
        4,
        W,
        KEY1,
        "hash",
        "Sets a field only if it does not exist.",
        Data(hsetnx),
    ),
    spec(
        "hget",
        3,
        R,
        KEY1,
        "hash",
        "Returns the value of a field.",
        Data(hget),
    ),
    spec(
        "hmget",
        -3,
        R,
        KEY1,
        "hash",
        "Returns the values of several fields.",
        Data(hmget),
    ),
    spec(
        "hgetall",
        2,
        R,
        KEY1,
        "hash",
        "Returns all fields and values.",
        Data(hgetall),
    ),
    spec("hdel", -3, W, KEY1, "hash", "Deletes fields.", Data(hdel)),
    spec(
        "hrandfield",
        -2,
        R,
        KEY1,
        "hash",
        "Random fields.",
        Data(hrandfield),
    ),
    spec(
        "hexists",
        3,
        R,
        KEY1,
        "hash",
        "Tells whether a field exists.",
        Data(hexists),
    ),
    spec(
        "hlen",
        2,
        R,
        KEY1,
        "hash",
        "Returns the number of fields.",
        Data(hlen),
    ),
    spec(
        "hkeys",
        2,
        R,
        KEY1,
        "hash",
        "Returns all field names.",
        Data(hkeys),
    ),
    spec(
        "hvals",
        2,
        R,
        KEY1,
        "hash",
        "Returns all values.",
        Data(hvals),
    ),
    spec(
        "hstrlen",
        3,
        R,
        KEY1,
        "hash",
        "Returns the length of a field's value.",
        Data(hstrlen),
    ),
    spec(
        "hincrby",
        4,
        W,
        KEY1,
        "hash",
        "Increments an integer field.",
        Data(hincrby),
    ),
    spec(
        "hscan",
        -3,
        R,
        KEY1,
        "hash",
        "Iterates fields and values.",
        Ctl(hscan),
    ),
    spec(
        "hincrbyfloat",
        4,
        W,
        KEY1,
        "hash",
        "Increments a float field.",
        Data(hincrbyfloat),
    ),
];

/// Sets `pairs` (in order: a repeated field's last value wins) in hash `key`; returns
/// the fields added. With `only_new`, existing fields are left alone.
fn set_fields(
    tx: &mut Tx<'_>,
    key: &[u8],
    pairs: &[(&[u8], &[u8])],
    only_new: bool,
) -> CmdResult<u64> {
    let old = tx.begin_typed(key, Type::Hash)?;
    let mut added = 0u64;
    for &(f, v) in pairs {
        let fk = sub_key(NS_HASH, key, f);
        let exists = (old.is_some() || added > 0) && tx.contains(&fk)?;
        if exists && only_new {
            continue;
        }
        added += u64::from(!exists);
        tx.put(fk, v.to_vec());
    }
    if added > 0 {
        let count = old.as_ref().map_or(0, Meta::count) + added;
        let expire_at = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(
            key,
            old.as_ref(),
            &Meta::collection(Type::Hash, count, expire_at),
        );
    }
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

fn hset(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let p = pairs(c, "hset")?;
    let n = set_fields(tx, c.arg(1), &p, false)?;
    reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

fn hmset(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let p = pairs(c, "hmset")?;
    set_fields(tx, c.arg(1), &p, false)?;
    reply::ok(out);
    Ok(())
}

fn hsetnx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let n = set_fields(tx, c.arg(1), &[(c.arg(2), c.arg(3))], true)?;
    reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

/// The value of field `f` of the live hash `key` (`None` if either is missing).
fn field(tx: &Tx<'_>, key: &[u8], f: &[u8]) -> CmdResult<Option<Vec<u8>>> {
    match tx.typed(key, Type::Hash)? {
        Some(_) => tx.get(&sub_key(NS_HASH, key, f)),
        None => Ok(None),
    }
}

fn hget(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let v = field(tx, c.arg(1), c.arg(2))?;
    reply::opt_bulk(out, v.as_deref());
    Ok(())
}

fn hmget(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let live = tx.typed(key, Type::Hash)?.is_some();
    let mut vals = Vec::with_capacity(c.len() - 2);
    for f in c.args().skip(2) {
        vals.push(if live {
            tx.get(&sub_key(NS_HASH, key, f))?
        } else {
            None
        });
    }
    reply::array_header(out, vals.len());
    for v in vals {
        reply::opt_bulk(out, v.as_deref());
    }
    Ok(())
}

/// All (field, value) pairs of a live hash, in field order.
pub(crate) fn all(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
    if tx.typed(key, Type::Hash)?.is_none() {
        return Ok(Vec::new());
    }
    let prefix = sub_prefix(NS_HASH, key);
    let mut kvs = tx.prefix_scan(&prefix, usize::MAX)?;
    for (k, _) in &mut kvs {
        k.drain(..prefix.len());
    }
    Ok(kvs)
}

fn hgetall(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let kvs = all(tx, c.arg(1))?;
    reply::map_header(out, kvs.len());
    for (f, v) in &kvs {
        reply::bulk(out, f);
        reply::bulk(out, v);
    }
    Ok(())
}

fn hkeys(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let kvs = all(tx, c.arg(1))?;
    reply::bulk_array(out, kvs.iter().map(|(f, _)| &f[..]));
    Ok(())
}

fn hvals(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let kvs = all(tx, c.arg(1))?;
    reply::bulk_array(out, kvs.iter().map(|(_, v)| &v[..]));
    Ok(())
}

fn hdel(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let Some(old) = tx.begin_typed(key, Type::Hash)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut removed = 0u64;
    for f in c.args().skip(2) {
        let fk = sub_key(NS_HASH, key, f);
        if tx.contains(&fk)? {
            tx.delete(fk);
            removed += 1;
        }
    }
    tx.shrink(key, &old, removed)?;
    reply::int(out, i64::try_from(removed).unwrap_or(i64::MAX));
    Ok(())
}

fn hexists(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let e = field(tx, c.arg(1), c.arg(2))?.is_some();
    reply::int(out, i64::from(e));
    Ok(())
}

fn hlen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::Hash)?;
    reply::int(
        out,
        m.map_or(0, |m| i64::try_from(m.count()).unwrap_or(i64::MAX)),
    );
    Ok(())
}

fn hstrlen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let n = field(tx, c.arg(1), c.arg(2))?.map_or(0, |v| v.len());
    reply::int(out, len_i64(n));
    Ok(())
}

fn hincrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = int_arg(c.arg(3))?;
    let (key, f) = (c.arg(1), c.arg(2));
    let old = tx.begin_typed(key, Type::Hash)?;
    let fk = sub_key(NS_HASH, key, f);
    let cur = match &old {
        Some(_) => tx.get(&fk)?,
        None => None,
    };
    let n = match &cur {
        Some(v) => {
            super::parse_i64(v).ok_or_else(|| CmdError::err("hash value is not an integer"))?
        }
        None => 0,
    };
    let new = n.checked_add(by).ok_or(CmdError::Overflow)?;
    tx.put(fk, new.to_string().into_bytes());
    if cur.is_none() {
        let count = old.as_ref().map_or(0, Meta::count) + 1;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::collection(Type::Hash, count, exp));
    }
    reply::int(out, new);
    Ok(())
}

fn hrandfield(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    super::keyspace::random::random_cmd(tx, c, out, Type::Hash)
}

fn hincrbyfloat(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = crate::cmd::args::parse_f64(c.arg(3)).ok_or(CmdError::NotFloat)?;
    if !by.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let (key, f) = (c.arg(1), c.arg(2));
    let old = tx.begin_typed(key, Type::Hash)?;
    let fk = sub_key(NS_HASH, key, f);
    let cur = match &old {
        Some(_) => tx.get(&fk)?,
        None => None,
    };
    let n = match &cur {
        Some(v) => crate::cmd::args::parse_f64(v)
            .ok_or_else(|| CmdError::err("hash value is not a float"))?,
        None => 0.0,
    };
    let new = n + by;
    if !new.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = crate::cmd::strings::float_text(new);
    tx.put(fk, text.clone().into_bytes());
    if cur.is_none() {
        let count = old.as_ref().map_or(0, Meta::count) + 1;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::collection(Type::Hash, count, exp));
    }
    reply::bulk(out, text.as_bytes());
    Ok(())
}

fn hscan(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    super::keyspace::scan::collection(ctx, c, Type::Hash)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn fields() {
        let mut k = Kit::new();
        k.expect(&["HSET", "h", "a", "1", "b", "2", "a", "3"], ":2\r\n");
        k.expect(&["HLEN", "h"], ":2\r\n");
        k.expect(&["HGET", "h", "a"], "$1\r\n3\r\n");
        k.expect(&["HGET", "h", "z"], "$-1\r\n");
        k.expect(
            &["HMGET", "h", "a", "z", "b"],
            "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n2\r\n",
        );
        k.expect(
            &["HGETALL", "h"],
            "*4\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n",
        );
        k.expect(&["HKEYS", "h"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
        k.expect(&["HVALS", "h"], "*2\r\n$1\r\n3\r\n$1\r\n2\r\n");
        k.expect(&["HEXISTS", "h", "a"], ":1\r\n");
        k.expect(&["HEXISTS", "h", "z"], ":0\r\n");
        k.expect(&["HSTRLEN", "h", "a"], ":1\r\n");
        k.expect(&["HSETNX", "h", "a", "x"], ":0\r\n");
        k.expect(&["HSETNX", "h", "c", "x"], ":1\r\n");
        k.ok(&["HMSET", "h", "d", "4"]);
        k.expect(
            &["HSET", "h", "a"],
            "-ERR wrong number of arguments for 'hset' command\r\n",
        );
        k.expect(&["HDEL", "h", "a", "a", "zz"], ":1\r\n");
        k.expect(&["HLEN", "h"], ":3\r\n");
        k.expect(&["HDEL", "h", "b", "c", "d"], ":3\r\n");
        k.expect(&["EXISTS", "h"], ":0\r\n");
        k.expect(&["HDEL", "h", "b"], ":0\r\n");
    }

    #[test]
    fn hincrby() {
        let mut k = Kit::new();
        k.expect(&["HINCRBY", "h", "n", "5"], ":5\r\n");
        k.expect(&["HINCRBY", "h", "n", "-7"], ":-2\r\n");
        k.expect(&["HSET", "h", "s", "x"], ":1\r\n");
        k.expect(
            &["HINCRBY", "h", "s", "1"],
            "-ERR hash value is not an integer\r\n",
        );
        k.expect(
            &["HINCRBY", "h", "n", "x"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.expect(&["HSET", "h", "m", "9223372036854775807"], ":1\r\n");
        k.expect(
            &["HINCRBY", "h", "m", "1"],
            "-ERR increment or decrement would overflow\r\n",
        );
        k.expect(&["HLEN", "h"], ":3\r\n");
    }
}
