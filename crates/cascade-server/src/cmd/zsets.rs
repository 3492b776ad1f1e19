//! Sorted-set commands. A member is two engine entries: member → score
//! (`0x03 len key member`) for point lookups, and `0x04 len key sortable(score)
//! member` whose memcmp order is score order, so a range by score is one range scan.
//! All are data commands on one key.

use std::ops::Bound;

use super::{float_arg, int_arg, is, spec, Ctx, Run::Ctl, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    prefix_end, sortable_score, sub_key, sub_prefix, unsortable_score, Meta, Type, NS_ZMEMBER,
    NS_ZSCORE,
};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The sorted-set commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "zadd",
        -4,
        W,
        KEY1,
        "sorted-set",
        "Adds members with scores.",
        Data(zadd),
    ),
    spec(
        "zrem",
        -3,
        W,
        KEY1,
        "sorted-set",
        "Removes members.",
        Data(zrem),
    ),
    spec(
        "zrangebyscore",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members with scores in a range, by score.",
        Data(zrangebyscore),
    ),
    spec(
        "zcount",
        4,
        R,
        KEY1,
        "sorted-set",
        "Counts members with scores in a range.",
        Data(zcount),
    ),
    spec(
        "zcard",
        2,
        R,
        KEY1,
        "sorted-set",
        "Number of members.",
        Data(zcard),
    ),
    spec(
        "zscore",
        3,
        R,
        KEY1,
        "sorted-set",
        "Score of a member.",
        Data(zscore),
    ),
    spec(
        "zscan",
        -3,
        R,
        KEY1,
        "sorted-set",
        "Iterates members and scores.",
        Ctl(zscan),
    ),
];

fn score_of(v: &[u8]) -> CmdResult<f64> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| CmdError::Engine("ERR corrupt zset score in the store".into()))?;
    Ok(f64::from_le_bytes(b))
}

/// The score-index entry of `member` with `score`.
fn score_key(key: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut sk = sub_prefix(NS_ZSCORE, key);
    sk.extend_from_slice(&sortable_score(score));
    sk.extend_from_slice(member);
    sk
}

/// The score of `member` in the zset `key` (which exists).
fn member_score(tx: &Tx<'_>, key: &[u8], member: &[u8]) -> CmdResult<Option<f64>> {
    tx.get(&sub_key(NS_ZMEMBER, key, member))?
        .map(|v| score_of(&v))
        .transpose()
}

/// Sets `member`'s score (replacing `prev`).
fn put_member(tx: &mut Tx<'_>, key: &[u8], member: &[u8], prev: Option<f64>, score: f64) {
    if let Some(p) = prev {
        tx.delete(score_key(key, p, member));
    }
    tx.put(score_key(key, score, member), Vec::new());
    tx.put(
        sub_key(NS_ZMEMBER, key, member),
        score.to_le_bytes().to_vec(),
    );
}

#[derive(Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent ZADD flags, as Redis names them"
)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn zadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < c.len() {
        let a = c.arg(i);
        let flag = if is(a, "nx") {
            &mut f.nx
        } else if is(a, "xx") {
            &mut f.xx
        } else if is(a, "gt") {
            &mut f.gt
        } else if is(a, "lt") {
            &mut f.lt
        } else if is(a, "ch") {
            &mut f.ch
        } else if is(a, "incr") {
            &mut f.incr
        } else {
            break;
        };
        *flag = true;
        i += 1;
    }
    let rest = c.len() - i;
    if rest == 0 || !rest.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && rest != 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest / 2);
    for j in (i..c.len()).step_by(2) {
        pairs.push((float_arg(c.arg(j))?, c.arg(j + 1)));
    }
    let key = c.arg(1);
    let old = tx.begin_typed(key, Type::ZSet)?;
    let (mut added, mut changed) = (0u64, 0u64);
    let mut incr_result = None;
    for (score, member) in pairs {
        let prev = if old.is_some() || added > 0 {
            member_score(tx, key, member)?
        } else {
            None
        };
        let mut new = score;
        if f.incr {
            new = prev.unwrap_or(0.0) + score;
            if new.is_nan() {
                return Err(CmdError::err("resulting score is not a number (NaN)"));
            }
        }
        let allowed = match prev {
            None => !f.xx,
            Some(p) => !f.nx && (!f.gt || new > p) && (!f.lt || new < p),
        };
        if !allowed {
            continue;
        }
        incr_result = Some(new);
        if prev == Some(new) {
            continue;
        }
        if prev.is_some() {
            changed += 1;
        } else {
            added += 1;
        }
        put_member(tx, key, member, prev, new);
    }
    if added > 0 {
        let count = old.as_ref().map_or(0, Meta::count) + added;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::collection(Type::ZSet, count, exp));
    }
    if f.incr {
        match incr_result {
            Some(s) => reply::double(out, s),
            None => reply::nil(out),
        }
    } else {
        let n = added + if f.ch { changed } else { 0 };
        reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
    }
    Ok(())
}

fn zrem(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let Some(old) = tx.begin_typed(key, Type::ZSet)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut removed = 0u64;
    for member in c.args().skip(2) {
        if let Some(s) = member_score(tx, key, member)? {
            tx.delete(score_key(key, s, member));
            tx.delete(sub_key(NS_ZMEMBER, key, member));
            removed += 1;
        }
    }
    tx.shrink(key, &old, removed)?;
    reply::int(out, i64::try_from(removed).unwrap_or(i64::MAX));
    Ok(())
}

/// A score bound: `(1.5` is exclusive, `-inf`/`+inf` unbounded.
fn bound(arg: &[u8]) -> CmdResult<(f64, bool)> {
    let bad = || CmdError::err("min or max is not a float");
    match arg.strip_prefix(b"(") {
        Some(rest) => Ok((float_arg(rest).map_err(|_| bad())?, true)),
        None => Ok((float_arg(arg).map_err(|_| bad())?, false)),
    }
}

/// Members of `key` with scores in `[min, max]`, in score order, skipping `offset`
/// and stopping after `count` (negative: all). Calls `f(member, score)`.
fn for_range(
    tx: &Tx<'_>,
    key: &[u8],
    min: (f64, bool),
    max: (f64, bool),
    offset: usize,
    count: i64,
    mut f: impl FnMut(Vec<u8>, f64),
) -> CmdResult<()> {
    if tx.typed(key, Type::ZSet)?.is_none() || min.0 > max.0 || count == 0 {
        return Ok(());
    }
    let prefix = sub_prefix(NS_ZSCORE, key);
    let mut lo = prefix.clone();
    lo.extend_from_slice(&sortable_score(min.0));
    let mut hi_p = prefix.clone();
    hi_p.extend_from_slice(&sortable_score(max.0));
    let hi = prefix_end(&hi_p).map_or(Bound::Unbounded, Bound::Excluded);
    let (mut skipped, mut taken) = (0usize, 0i64);
    for kv in tx.range(Bound::Included(lo), hi)? {
        let (k, _) = kv?;
        let rest = &k[prefix.len()..];
        let Some((sb, member)) = rest.split_first_chunk::<8>() else {
            continue;
        };
        let s = unsortable_score(*sb);
        if (min.1 && s <= min.0) || (max.1 && s >= max.0) {
            continue;
        }
        if skipped < offset {
            skipped += 1;
            continue;
        }
        f(member.to_vec(), s);
        taken += 1;
        if count > 0 && taken >= count {
            break;
        }
    }
    Ok(())
}

fn zrangebyscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (min, max) = (bound(c.arg(2))?, bound(c.arg(3))?);
    let (mut withscores, mut offset, mut count) = (false, 0usize, -1i64);
    let mut i = 4;
    while i < c.len() {
        if is(c.arg(i), "withscores") {
            withscores = true;
            i += 1;
        } else if is(c.arg(i), "limit") && i + 2 < c.len() {
            let o = int_arg(c.arg(i + 1))?;
            count = int_arg(c.arg(i + 2))?;
            let Ok(o) = usize::try_from(o) else {
                // Redis answers an empty array for a negative offset.
                reply::array_header(out, 0);
                return Ok(());
            };
            offset = o;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut items = Vec::new();
    for_range(tx, c.arg(1), min, max, offset, count, |m, s| {
        items.push((m, s));
    })?;
    // RESP3 (like Redis 7) nests each member with its score.
    let nested = withscores && out.resp3;
    let flat = if withscores && !nested { 2 } else { 1 };
    reply::array_header(out, items.len() * flat);
    for (m, s) in items {
        if nested {
            reply::array_header(out, 2);
        }
        reply::bulk(out, &m);
        if withscores {
            reply::double(out, s);
        }
    }
    Ok(())
}

fn zcount(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (min, max) = (bound(c.arg(2))?, bound(c.arg(3))?);
    let mut n = 0i64;
    for_range(tx, c.arg(1), min, max, 0, -1, |_, _| n += 1)?;
    reply::int(out, n);
    Ok(())
}

fn zcard(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::ZSet)?;
    reply::int(
        out,
        m.map_or(0, |m| i64::try_from(m.count()).unwrap_or(i64::MAX)),
    );
    Ok(())
}

fn zscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let s = match tx.typed(key, Type::ZSet)? {
        Some(_) => member_score(tx, key, c.arg(2))?,
        None => None,
    };
    match s {
        Some(s) => reply::double(out, s),
        None => reply::nil(out),
    }
    Ok(())
}

fn zscan(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    super::scan::collection(ctx, c, Type::ZSet)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn add_and_range() {
        let mut k = Kit::new();
        k.expect(&["ZADD", "z", "1", "a", "2", "b", "3", "c"], ":3\r\n");
        k.expect(&["ZADD", "z", "1", "a", "5", "b"], ":0\r\n");
        k.expect(&["ZADD", "z", "CH", "1", "a", "2", "b"], ":1\r\n");
        k.expect(&["ZCARD", "z"], ":3\r\n");
        k.expect(&["ZSCORE", "z", "b"], "$1\r\n2\r\n");
        k.expect(&["ZSCORE", "z", "x"], "$-1\r\n");
        k.expect(
            &["ZRANGEBYSCORE", "z", "-inf", "+inf"],
            "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        );
        k.expect(
            &["ZRANGEBYSCORE", "z", "(1", "3", "WITHSCORES"],
            "*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n",
        );
        k.expect(
            &["ZRANGEBYSCORE", "z", "1", "3", "LIMIT", "1", "1"],
            "*1\r\n$1\r\nb\r\n",
        );
        k.expect(
            &["ZRANGEBYSCORE", "z", "x", "3"],
            "-ERR min or max is not a float\r\n",
        );
        k.expect(&["ZCOUNT", "z", "2", "+inf"], ":2\r\n");
        k.expect(&["ZADD", "z", "INCR", "2.5", "a"], "$3\r\n3.5\r\n");
        k.expect(
            &["ZADD", "z", "NX", "XX", "1", "a"],
            "-ERR XX and NX options at the same time are not compatible\r\n",
        );
        k.expect(
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        );
        k.expect(&["ZADD", "z", "1", "a", "2"], "-ERR syntax error\r\n");
        k.expect(
            &["ZADD", "z", "x", "a"],
            "-ERR value is not a valid float\r\n",
        );
        k.expect(&["ZADD", "z", "GT", "1", "a"], ":0\r\n");
        k.expect(&["ZSCORE", "z", "a"], "$3\r\n3.5\r\n");
        k.expect(&["ZREM", "z", "a", "x"], ":1\r\n");
        k.expect(&["ZREM", "z", "b", "c"], ":2\r\n");
        k.expect(&["EXISTS", "z"], ":0\r\n");
    }
}
