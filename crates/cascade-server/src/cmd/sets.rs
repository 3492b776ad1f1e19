//! Set commands. A member is one engine entry `0x06 len key member` (empty value); the
//! member count is in the key's metadata, so `SCARD` is one read and `SADD`/`SREM`
//! cost one point read per member. Members come back in byte order.
//!
//! Costs: SADD SREM SISMEMBER SMISMEMBER SMOVE: O(members named). SMEMBERS, SINTER,
//! SUNION, SDIFF (and STORE), SINTERCARD: one range scan per input set. SPOP and
//! SRANDMEMBER: sets up to [`SAMPLE_ALL`] members are read whole and sampled
//! uniformly; larger sets are sampled by seeking to random member prefixes (bounded
//! work, but not uniform). All are data commands except SSCAN (cursor table).

use std::collections::BTreeSet;
use std::ops::Bound;

use super::{int_arg, is, spec, Ctx, Keys, Run::Ctl, Run::Data, Spec, ALLKEYS, KEY1, R, W};
use crate::cmd::args::len_i64;
use crate::error::{CmdError, CmdResult};
use crate::hash::random_below;
use crate::keyspace::{prefix_end, sub_key, sub_prefix, Meta, Type, NS_SET};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// Sets up to this size are sampled uniformly by SPOP and SRANDMEMBER.
pub(crate) const SAMPLE_ALL: u64 = 4096;

/// The set commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "sadd",
        -3,
        W,
        KEY1,
        "set",
        "Adds members to a set.",
        Data(sadd),
    ),
    spec(
        "srem",
        -3,
        W,
        KEY1,
        "set",
        "Removes members from a set.",
        Data(srem),
    ),
    spec(
        "smembers",
        2,
        R,
        KEY1,
        "set",
        "All members of a set.",
        Data(smembers),
    ),
    spec(
        "sismember",
        3,
        R,
        KEY1,
        "set",
        "Is a member in the set?",
        Data(sismember),
    ),
    spec(
        "smismember",
        -3,
        R,
        KEY1,
        "set",
        "Are these members in the set?",
        Data(smismember),
    ),
    spec(
        "scard",
        2,
        R,
        KEY1,
        "set",
        "Number of members.",
        Data(scard),
    ),
    spec(
        "spop",
        -2,
        W,
        KEY1,
        "set",
        "Removes and returns random members.",
        Data(spop),
    ),
    spec(
        "srandmember",
        -2,
        R,
        KEY1,
        "set",
        "Returns random members.",
        Data(srandmember),
    ),
    spec(
        "smove",
        4,
        W,
        Keys::Range(1, 2, 1),
        "set",
        "Moves a member between sets.",
        Data(smove),
    ),
    spec(
        "sinter",
        -2,
        R,
        ALLKEYS,
        "set",
        "Intersection of sets.",
        Data(sinter),
    ),
    spec(
        "sunion",
        -2,
        R,
        ALLKEYS,
        "set",
        "Union of sets.",
        Data(sunion),
    ),
    spec(
        "sdiff",
        -2,
        R,
        ALLKEYS,
        "set",
        "Difference of sets.",
        Data(sdiff),
    ),
    spec(
        "sinterstore",
        -3,
        W,
        ALLKEYS,
        "set",
        "Stores an intersection.",
        Data(sinterstore),
    ),
    spec(
        "sunionstore",
        -3,
        W,
        ALLKEYS,
        "set",
        "Stores a union.",
        Data(sunionstore),
    ),
    spec(
        "sdiffstore",
        -3,
        W,
        ALLKEYS,
        "set",
        "Stores a difference.",
        Data(sdiffstore),
    ),
    spec(
        "sintercard",
        -3,
        R,
        Keys::Num { at: 1, dest: false },
        "set",
        "Size of an intersection.",
        Data(sintercard),
    ),
    spec("sscan", -3, R, KEY1, "set", "Iterates members.", Ctl(sscan)),
];

fn count_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// All members of the live set `key` (empty if missing).
pub(crate) fn members(tx: &Tx<'_>, key: &[u8]) -> CmdResult<BTreeSet<Vec<u8>>> {
    if tx.typed(key, Type::Set)?.is_none() {
        return Ok(BTreeSet::new());
    }
    let prefix = sub_prefix(NS_SET, key);
    Ok(tx
        .prefix_scan(&prefix, usize::MAX)?
        .into_iter()
        .map(|(mut k, _)| k.split_off(prefix.len()))
        .collect())
}

/// Adds `items` to set `key`; returns how many were new.
pub(crate) fn add(tx: &mut Tx<'_>, key: &[u8], items: &[&[u8]]) -> CmdResult<u64> {
    let old = tx.begin_typed(key, Type::Set)?;
    let mut added = 0u64;
    for m in items {
        let mk = sub_key(NS_SET, key, m);
        if (old.is_none() && added == 0) || !tx.contains(&mk)? {
            tx.put(mk, Vec::new());
            added += 1;
        }
    }
    if added > 0 {
        let count = old.as_ref().map_or(0, Meta::count) + added;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::collection(Type::Set, count, exp));
    }
    Ok(added)
}

/// Removes `items` from set `key`; returns how many were there.
fn remove(tx: &mut Tx<'_>, key: &[u8], items: &[&[u8]]) -> CmdResult<u64> {
    let Some(old) = tx.begin_typed(key, Type::Set)? else {
        return Ok(0);
    };
    let mut removed = 0u64;
    for m in items {
        let mk = sub_key(NS_SET, key, m);
        if tx.contains(&mk)? {
            tx.delete(mk);
            removed += 1;
        }
    }
    tx.shrink(key, &old, removed)?;
    Ok(removed)
}

fn sadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let items: Vec<&[u8]> = c.args().skip(2).collect();
    let n = add(tx, c.arg(1), &items)?;
    reply::int(out, count_i64(n));
    Ok(())
}

fn srem(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let items: Vec<&[u8]> = c.args().skip(2).collect();
    let n = remove(tx, c.arg(1), &items)?;
    reply::int(out, count_i64(n));
    Ok(())
}

/// A set reply (RESP3 `~`, RESP2 array).
fn set_reply<'a>(out: &mut Out, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    reply::set_header(out, items.len());
    for m in items {
        reply::bulk(out, m);
    }
}

fn smembers(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = members(tx, c.arg(1))?;
    set_reply(out, m.iter().map(Vec::as_slice));
    Ok(())
}

fn is_member(tx: &Tx<'_>, key: &[u8], m: &[u8]) -> CmdResult<bool> {
    tx.contains(&sub_key(NS_SET, key, m))
}

fn sismember(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let live = tx.typed(c.arg(1), Type::Set)?.is_some();
    let yes = live && is_member(tx, c.arg(1), c.arg(2))?;
    reply::int(out, i64::from(yes));
    Ok(())
}

fn smismember(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let live = tx.typed(c.arg(1), Type::Set)?.is_some();
    let mut flags = Vec::with_capacity(c.len() - 2);
    for m in c.args().skip(2) {
        flags.push(live && is_member(tx, c.arg(1), m)?);
    }
    reply::array_header(out, flags.len());
    for f in flags {
        reply::int(out, i64::from(f));
    }
    Ok(())
}

fn scard(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::Set)?;
    reply::int(out, m.map_or(0, |m| count_i64(m.count())));
    Ok(())
}

/// Up to `n` distinct random members of the set `key` with `card` members.
fn sample(tx: &Tx<'_>, key: &[u8], card: u64, n: usize) -> CmdResult<Vec<Vec<u8>>> {
    Ok(sample_entries(tx, NS_SET, key, card, n)?
        .into_iter()
        .map(|(m, _)| m)
        .collect())
}

/// Up to `n` distinct random elements (element, stored value) of the collection `key`
/// with `card` elements in namespace `ns`: uniform up to [`SAMPLE_ALL`] elements (or
/// when `n` is at least half of them), else by random seeks (bounded, not uniform).
pub(crate) fn sample_entries(
    tx: &Tx<'_>,
    ns: u8,
    key: &[u8],
    card: u64,
    n: usize,
) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let prefix = sub_prefix(ns, key);
    if card <= SAMPLE_ALL || u64::try_from(n).unwrap_or(u64::MAX) * 2 >= card {
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = tx
            .prefix_scan(&prefix, usize::MAX)?
            .into_iter()
            .map(|(mut k, v)| (k.split_off(prefix.len()), v))
            .collect();
        // Partial Fisher-Yates: the first n are a uniform sample.
        let n = n.min(all.len());
        for i in 0..n {
            let j = i + random_below(all.len() - i);
            all.swap(i, j);
        }
        all.truncate(n);
        return Ok(all);
    }
    let mut picked = std::collections::BTreeMap::new();
    let end = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let mut tries = 0;
    while picked.len() < n && tries < n * 8 + 16 {
        tries += 1;
        let mut seek = prefix.clone();
        seek.extend_from_slice(&crate::hash::random_u64().to_be_bytes());
        let next = tx
            .range(Bound::Included(seek), end.clone())?
            .next()
            .transpose()?;
        let first = match next {
            Some(kv) => Some(kv),
            None => tx
                .range(Bound::Included(prefix.clone()), end.clone())?
                .next()
                .transpose()?,
        };
        if let Some((k, v)) = first {
            picked.insert(k[prefix.len()..].to_vec(), v);
        }
    }
    Ok(picked.into_iter().collect())
}

/// The optional count argument of SPOP and SRANDMEMBER.
fn count_arg(c: &Command) -> CmdResult<Option<i64>> {
    match c.len() {
        2 => Ok(None),
        3 => int_arg(c.arg(2)).map(Some),
        _ => Err(CmdError::Syntax),
    }
}

fn spop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let count = count_arg(c)?;
    if count.is_some_and(|n| n < 0) {
        return Err(CmdError::err("value is out of range, must be positive"));
    }
    let Some(old) = tx.begin_typed(key, Type::Set)? else {
        match count {
            Some(_) => set_reply(out, std::iter::empty()),
            None => reply::nil(out),
        }
        return Ok(());
    };
    let want = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    let picked = sample(tx, key, old.count(), want)?;
    let refs: Vec<&[u8]> = picked.iter().map(Vec::as_slice).collect();
    remove(tx, key, &refs)?;
    match count {
        Some(_) => set_reply(out, refs.iter().copied()),
        None => reply::opt_bulk(out, refs.first().copied()),
    }
    Ok(())
}

fn srandmember(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let count = count_arg(c)?;
    let Some(m) = tx.typed(key, Type::Set)? else {
        match count {
            Some(_) => reply::array_header(out, 0),
            None => reply::nil(out),
        }
        return Ok(());
    };
    match count {
        None => {
            let picked = sample(tx, key, m.count(), 1)?;
            reply::opt_bulk(out, picked.first().map(Vec::as_slice));
        }
        Some(n) if n >= 0 => {
            let picked = sample(tx, key, m.count(), usize::try_from(n).unwrap_or(usize::MAX))?;
            reply::bulk_array(out, picked.iter().map(Vec::as_slice));
        }
        Some(n) => {
            // Negative: |n| members, repeats allowed.
            let n = usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX);
            if u64::try_from(n).unwrap_or(u64::MAX) > 16 * 1024 * 1024 {
                return Err(CmdError::err("value is out of range"));
            }
            let pool = sample(
                tx,
                key,
                m.count(),
                usize::try_from(m.count().min(SAMPLE_ALL)).unwrap_or(usize::MAX),
            )?;
            reply::array_header(out, if pool.is_empty() { 0 } else { n });
            if !pool.is_empty() {
                for _ in 0..n {
                    reply::bulk(out, &pool[random_below(pool.len())]);
                }
            }
        }
    }
    Ok(())
}

fn smove(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (src, dst, m) = (c.arg(1), c.arg(2), c.arg(3));
    let src_live = tx.typed(src, Type::Set)?.is_some();
    tx.typed(dst, Type::Set)?;
    if !src_live || !is_member(tx, src, m)? {
        reply::int(out, 0);
        return Ok(());
    }
    if src != dst {
        remove(tx, src, &[m])?;
        add(tx, dst, &[m])?;
    }
    reply::int(out, 1);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// Combines the sets named by `keys` (missing keys are empty sets).
fn combine(tx: &Tx<'_>, keys: &[&[u8]], op: Op) -> CmdResult<BTreeSet<Vec<u8>>> {
    // Type-check every key first, as Redis does.
    for k in keys {
        tx.typed(k, Type::Set)?;
    }
    let Some((first, rest)) = keys.split_first() else {
        return Ok(BTreeSet::new());
    };
    let mut acc = members(tx, first)?;
    for k in rest {
        if op == Op::Inter && acc.is_empty() {
            break;
        }
        let s = members(tx, k)?;
        match op {
            Op::Inter => acc.retain(|m| s.contains(m)),
            Op::Union => acc.extend(s),
            Op::Diff => acc.retain(|m| !s.contains(m)),
        }
    }
    Ok(acc)
}

fn read_op(tx: &mut Tx<'_>, c: &Command, out: &mut Out, op: Op) -> CmdResult<()> {
    let keys: Vec<&[u8]> = c.args().skip(1).collect();
    let r = combine(tx, &keys, op)?;
    set_reply(out, r.iter().map(Vec::as_slice));
    Ok(())
}

/// Replaces `dst` (any type) with a set of `items` (deleted when empty).
pub(crate) fn store_set(tx: &mut Tx<'_>, dst: &[u8], items: &BTreeSet<Vec<u8>>) -> CmdResult<()> {
    if let Some(old) = tx.begin(dst)? {
        tx.remove(dst, &old)?;
    }
    if !items.is_empty() {
        for m in items {
            tx.put(sub_key(NS_SET, dst, m), Vec::new());
        }
        let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
        tx.set_meta(dst, None, &Meta::collection(Type::Set, n, None));
    }
    Ok(())
}

fn store_op(tx: &mut Tx<'_>, c: &Command, out: &mut Out, op: Op) -> CmdResult<()> {
    let keys: Vec<&[u8]> = c.args().skip(2).collect();
    let r = combine(tx, &keys, op)?;
    store_set(tx, c.arg(1), &r)?;
    reply::int(out, len_i64(r.len()));
    Ok(())
}

fn sinter(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_op(tx, c, out, Op::Inter)
}

fn sunion(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_op(tx, c, out, Op::Union)
}

fn sdiff(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_op(tx, c, out, Op::Diff)
}

fn sinterstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_op(tx, c, out, Op::Inter)
}

fn sunionstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_op(tx, c, out, Op::Union)
}

fn sdiffstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_op(tx, c, out, Op::Diff)
}

/// Parses `numkeys key... [LIMIT n]` at argument 1; returns (keys, limit; 0 = none).
pub(crate) fn numkeys_limit(c: &Command) -> CmdResult<(Vec<&[u8]>, usize)> {
    let n = super::parse_i64(c.arg(1))
        .filter(|&n| n > 0)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))?;
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > c.len() - 2 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let keys: Vec<&[u8]> = (2..2 + n).map(|i| c.arg(i)).collect();
    let mut limit = 0usize;
    let mut i = 2 + n;
    while i < c.len() {
        if is(c.arg(i), "limit") && i + 1 < c.len() {
            limit = super::parse_i64(c.arg(i + 1))
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, limit))
}

fn sintercard(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (keys, limit) = numkeys_limit(c)?;
    let r = combine(tx, &keys, Op::Inter)?;
    let n = if limit > 0 {
        r.len().min(limit)
    } else {
        r.len()
    };
    reply::int(out, len_i64(n));
    Ok(())
}

fn sscan(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    super::keyspace::scan::collection(ctx, c, Type::Set)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn members_and_counts() {
        let mut k = Kit::new();
        k.expect(&["SADD", "s", "b", "a", "b"], ":2\r\n");
        k.expect(&["SADD", "s", "c"], ":1\r\n");
        k.expect(&["SCARD", "s"], ":3\r\n");
        k.expect(
            &["SMEMBERS", "s"],
            "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        );
        k.expect(&["SISMEMBER", "s", "a"], ":1\r\n");
        k.expect(&["SISMEMBER", "s", "z"], ":0\r\n");
        k.expect(&["SMISMEMBER", "s", "a", "z"], "*2\r\n:1\r\n:0\r\n");
        k.expect(&["SREM", "s", "a", "z"], ":1\r\n");
        k.expect(&["TYPE", "s"], "+set\r\n");
        k.expect(&["SREM", "s", "b", "c"], ":2\r\n");
        k.expect(&["EXISTS", "s"], ":0\r\n");
        k.ok(&["SET", "str", "x"]);
        k.expect(
            &["SADD", "str", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
    }

    #[test]
    fn algebra_and_store() {
        let mut k = Kit::new();
        k.int(&["SADD", "a", "1", "2", "3"]);
        k.int(&["SADD", "b", "2", "3", "4"]);
        k.expect(&["SINTER", "a", "b"], "*2\r\n$1\r\n2\r\n$1\r\n3\r\n");
        k.expect(
            &["SUNION", "a", "b", "none"],
            "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n",
        );
        k.expect(&["SDIFF", "a", "b"], "*1\r\n$1\r\n1\r\n");
        k.expect(&["SINTERSTORE", "d", "a", "b"], ":2\r\n");
        k.expect(&["SMEMBERS", "d"], "*2\r\n$1\r\n2\r\n$1\r\n3\r\n");
        k.expect(&["SDIFFSTORE", "d", "a", "a"], ":0\r\n");
        k.expect(&["EXISTS", "d"], ":0\r\n");
        k.expect(&["SUNIONSTORE", "a", "a", "b"], ":4\r\n");
        k.expect(&["SINTERCARD", "2", "a", "b"], ":3\r\n");
        k.expect(&["SINTERCARD", "2", "a", "b", "LIMIT", "1"], ":1\r\n");
        k.expect(
            &["SINTERCARD", "0", "a"],
            "-ERR numkeys should be greater than 0\r\n",
        );
        k.expect(
            &["SINTERCARD", "3", "a"],
            "-ERR Number of keys can't be greater than number of args\r\n",
        );
        k.expect(
            &["SINTERCARD", "1", "a", "LIMIT", "-1"],
            "-ERR LIMIT can't be negative\r\n",
        );
        k.expect(&["SMOVE", "a", "c", "1"], ":1\r\n");
        k.expect(&["SMOVE", "a", "c", "1"], ":0\r\n");
        k.expect(&["SMEMBERS", "c"], "*1\r\n$1\r\n1\r\n");
    }

    #[test]
    fn random_members() {
        let mut k = Kit::new();
        k.int(&["SADD", "s", "a", "b", "c", "d"]);
        let two = k.strings(&["SRANDMEMBER", "s", "2"]);
        assert_eq!(two.len(), 2);
        assert_ne!(two[0], two[1]);
        assert_eq!(k.strings(&["SRANDMEMBER", "s", "10"]).len(), 4);
        assert_eq!(k.strings(&["SRANDMEMBER", "s", "-10"]).len(), 10);
        let popped = k.strings(&["SPOP", "s", "3"]);
        assert_eq!(popped.len(), 3);
        k.expect(&["SCARD", "s"], ":1\r\n");
        k.expect(
            &["SPOP", "s", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        );
        let last = k.strings(&["SMEMBERS", "s"]);
        k.expect(&["SPOP", "s"], &format!("$1\r\n{}\r\n", last[0]));
        k.expect(&["SPOP", "s"], "$-1\r\n");
        k.expect(&["SRANDMEMBER", "s"], "$-1\r\n");
    }
}
