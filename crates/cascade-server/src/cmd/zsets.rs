//! The sorted-set subset Java YCSB uses for scans: `ZADD ZREM ZRANGEBYSCORE ZCARD
//! ZSCORE` (plus `ZCOUNT`). A member is two engine entries: member → score
//! (`0x03 len key member`) for point lookups, and `0x04 len key sortable(score)
//! member` whose memcmp order is score order, so `ZRANGEBYSCORE` is one range scan.

use std::ops::Bound;

use super::{float_arg, int_arg, is, spec, Ctx, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    prefix_end, sortable_score, sub_key, sub_prefix, unsortable_score, Meta, Type, NS_ZMEMBER,
    NS_ZSCORE,
};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Txn;

/// The sorted-set commands.
pub static SPECS: &[Spec] = &[
    spec(
        "zadd",
        -4,
        W,
        KEY1,
        "sorted-set",
        "Adds members with scores.",
        zadd,
    ),
    spec("zrem", -3, W, KEY1, "sorted-set", "Removes members.", zrem),
    spec(
        "zrangebyscore",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members with scores in a range, by score.",
        zrangebyscore,
    ),
    spec(
        "zcount",
        4,
        R,
        KEY1,
        "sorted-set",
        "Counts members with scores in a range.",
        zcount,
    ),
    spec(
        "zcard",
        2,
        R,
        KEY1,
        "sorted-set",
        "Number of members.",
        zcard,
    ),
    spec(
        "zscore",
        3,
        R,
        KEY1,
        "sorted-set",
        "Score of a member.",
        zscore,
    ),
];

fn score_of(v: &[u8]) -> CmdResult<f64> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| CmdError::Engine("ERR corrupt zset score in the store".into()))?;
    Ok(f64::from_le_bytes(b))
}

fn zadd(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 2;
    while i < c.len() {
        let a = c.arg(i);
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else if is(a, "ch") {
            ch = true;
        } else if is(a, "incr") {
            incr = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = c.len() - i;
    if rest == 0 || !rest.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if nx && xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if ((gt || lt) && nx) || (gt && lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && rest != 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let mut pairs = Vec::with_capacity(rest / 2);
    for j in (i..c.len()).step_by(2) {
        pairs.push((float_arg(c.arg(j))?, c.arg(j + 1)));
    }
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin_typed(&mut txn, key, Type::ZSet)?;
    // Scores decided so far in this command (a member may repeat).
    let mut cur: std::collections::HashMap<&[u8], Option<f64>> = std::collections::HashMap::new();
    let (mut added, mut changed) = (0u64, 0u64);
    let mut incr_result = None;
    for (score, member) in pairs {
        let mk = sub_key(NS_ZMEMBER, key, member);
        let prev = match cur.get(member) {
            Some(p) => *p,
            None if old.is_some() => store.db().get(&mk)?.map(|v| score_of(&v)).transpose()?,
            None => None,
        };
        let mut new = score;
        if incr {
            new = prev.unwrap_or(0.0) + score;
            if new.is_nan() {
                return Err(CmdError::err("resulting score is not a number (NaN)"));
            }
        }
        let allowed = match prev {
            None => !xx,
            Some(p) => !nx && (!gt || new > p) && (!lt || new < p),
        };
        if !allowed {
            continue;
        }
        incr_result = Some(new);
        if prev == Some(new) {
            continue;
        }
        if let Some(p) = prev {
            let mut sk = sub_prefix(NS_ZSCORE, key);
            sk.extend_from_slice(&sortable_score(p));
            sk.extend_from_slice(member);
            txn.batch.delete(sk);
            changed += 1;
        } else {
            added += 1;
        }
        let mut sk = sub_prefix(NS_ZSCORE, key);
        sk.extend_from_slice(&sortable_score(new));
        sk.extend_from_slice(member);
        txn.batch.put(sk, Vec::new());
        txn.batch.put(mk, new.to_le_bytes().to_vec());
        cur.insert(member, Some(new));
    }
    if added > 0 {
        let count = old.as_ref().map_or(0, Meta::count) + added;
        let exp = old.as_ref().and_then(|m| m.expire_at);
        store.set_meta(
            &mut txn,
            key,
            old.as_ref(),
            &Meta::collection(Type::ZSet, count, exp),
        );
    }
    store.commit(txn)?;
    if incr {
        match incr_result {
            Some(s) => reply::double(ctx.out, s),
            None => reply::nil(ctx.out),
        }
    } else {
        reply::int(ctx.out, (added + if ch { changed } else { 0 }) as i64);
    }
    Ok(())
}

fn zrem(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let Some(old) = store.begin_typed(&mut txn, key, Type::ZSet)? else {
        store.commit(txn)?;
        reply::int(ctx.out, 0);
        return Ok(());
    };
    let mut seen = std::collections::HashSet::new();
    let mut removed = 0u64;
    for member in c.args().skip(2) {
        if !seen.insert(member) {
            continue;
        }
        let mk = sub_key(NS_ZMEMBER, key, member);
        if let Some(v) = store.db().get(&mk)? {
            let mut sk = sub_prefix(NS_ZSCORE, key);
            sk.extend_from_slice(&sortable_score(score_of(&v)?));
            sk.extend_from_slice(member);
            txn.batch.delete(sk);
            txn.batch.delete(mk);
            removed += 1;
        }
    }
    store.shrink(&mut txn, key, &old, removed)?;
    store.commit(txn)?;
    reply::int(ctx.out, removed as i64);
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
    ctx: &Ctx<'_>,
    key: &[u8],
    min: (f64, bool),
    max: (f64, bool),
    offset: usize,
    count: i64,
    mut f: impl FnMut(Vec<u8>, f64),
) -> CmdResult<()> {
    if ctx.shared.store.typed(key, Type::ZSet)?.is_none() || min.0 > max.0 || count == 0 {
        return Ok(());
    }
    let prefix = sub_prefix(NS_ZSCORE, key);
    let mut lo = prefix.clone();
    lo.extend_from_slice(&sortable_score(min.0));
    let mut hi_p = prefix.clone();
    hi_p.extend_from_slice(&sortable_score(max.0));
    let hi = match prefix_end(&hi_p) {
        Some(h) => Bound::Excluded(h),
        None => Bound::Unbounded,
    };
    let it = ctx.shared.store.db().iter_bounds(Bound::Included(lo), hi)?;
    let (mut skipped, mut taken) = (0usize, 0i64);
    for kv in it {
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

fn zrangebyscore(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
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
            if o < 0 {
                // Redis answers an empty array for a negative offset.
                reply::array_header(ctx.out, 0);
                return Ok(());
            }
            offset = o as usize;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut items = Vec::new();
    for_range(ctx, c.arg(1), min, max, offset, count, |m, s| {
        items.push((m, s))
    })?;
    // RESP3 (like Redis 7) nests each member with its score.
    let nested = withscores && ctx.out.resp3;
    let flat = if withscores && !nested { 2 } else { 1 };
    reply::array_header(ctx.out, items.len() * flat);
    for (m, s) in items {
        if nested {
            reply::array_header(ctx.out, 2);
        }
        reply::bulk(ctx.out, &m);
        if withscores {
            reply::double(ctx.out, s);
        }
    }
    Ok(())
}

fn zcount(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let (min, max) = (bound(c.arg(2))?, bound(c.arg(3))?);
    let mut n = 0i64;
    for_range(ctx, c.arg(1), min, max, 0, -1, |_, _| n += 1)?;
    reply::int(ctx.out, n);
    Ok(())
}

fn zcard(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let m = ctx.shared.store.typed(c.arg(1), Type::ZSet)?;
    reply::int(ctx.out, m.map_or(0, |m| m.count() as i64));
    Ok(())
}

fn zscore(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let live = ctx.shared.store.typed(c.arg(1), Type::ZSet)?.is_some();
    let v = if live {
        ctx.shared
            .store
            .db()
            .get(&sub_key(NS_ZMEMBER, c.arg(1), c.arg(2)))?
    } else {
        None
    };
    match v {
        Some(v) => reply::double(ctx.out, score_of(&v)?),
        None => reply::nil(ctx.out),
    }
    Ok(())
}
