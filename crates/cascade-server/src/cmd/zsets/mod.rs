//! Sorted-set commands on members: ZADD ZINCRBY ZREM ZCARD ZSCORE ZMSCORE ZRANK
//! ZREVRANK ZSCAN, and the helpers the other zset modules share (`zrange.rs`,
//! `zpop.rs`, `zsetops.rs`).
//!
//! A member is two engine entries: member → score (`0x03 len key member`) for point
//! lookups, and `0x04 len key sortable(score) member` (empty value) whose memcmp order
//! is Redis's order (score, then member bytes), so a range by score is one range scan.
//!
//! Costs: ZADD ZINCRBY ZREM ZSCORE ZMSCORE: O(members named) point reads plus one
//! batch. ZCARD: the metadata. ZRANK/ZREVRANK: one point read and a walk of the score
//! index from both ends up to the member, O(min(rank, N - rank)): the layout keeps no
//! per-position counts.

pub(crate) mod zpop;
pub(crate) mod zrange;
pub(crate) mod zselect;
pub(crate) mod zsetops;

use std::ops::Bound;

use super::{float_arg, is, spec, Ctx, Run::Ctl, Run::Data, Spec, KEY1, R, W};
use crate::cmd::args::len_i64;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    prefix_end, sortable_score, sub_key, sub_prefix, unsortable_score, Meta, Type, NS_ZMEMBER,
    NS_ZSCORE,
};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// A member and its score.
pub(crate) type Scored = (Vec<u8>, f64);

/// The sorted-set commands on members.
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
        "zincrby",
        4,
        W,
        KEY1,
        "sorted-set",
        "Increments a member's score.",
        Data(zincrby),
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
        "zmscore",
        -3,
        R,
        KEY1,
        "sorted-set",
        "Scores of several members.",
        Data(zmscore),
    ),
    spec(
        "zrank",
        3,
        R,
        KEY1,
        "sorted-set",
        "Position of a member, lowest score first.",
        Data(zrank),
    ),
    spec(
        "zrevrank",
        3,
        R,
        KEY1,
        "sorted-set",
        "Position of a member, highest score first.",
        Data(zrevrank),
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

/// Decodes a stored score.
pub(crate) fn score_of(v: &[u8]) -> CmdResult<f64> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| CmdError::Engine("ERR corrupt zset score in the store".into()))?;
    Ok(f64::from_le_bytes(b))
}

/// The score-index entry of `member` with `score`.
pub(crate) fn score_key(key: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut sk = sub_prefix(NS_ZSCORE, key);
    sk.extend_from_slice(&sortable_score(score));
    sk.extend_from_slice(member);
    sk
}

/// Splits a score-index entry (after its `prefix`) into member and score.
pub(crate) fn split_index(prefix_len: usize, k: &[u8]) -> Option<Scored> {
    let (sb, member) = k.get(prefix_len..)?.split_first_chunk::<8>()?;
    Some((member.to_vec(), unsortable_score(*sb)))
}

/// The score of `member` in the zset `key` (which exists).
pub(crate) fn member_score(tx: &Tx<'_>, key: &[u8], member: &[u8]) -> CmdResult<Option<f64>> {
    tx.get(&sub_key(NS_ZMEMBER, key, member))?
        .map(|v| score_of(&v))
        .transpose()
}

/// Sets `member`'s score (replacing `prev`).
pub(crate) fn put_member(
    tx: &mut Tx<'_>,
    key: &[u8],
    member: &[u8],
    prev: Option<f64>,
    score: f64,
) {
    if let Some(p) = prev {
        tx.delete(score_key(key, p, member));
    }
    tx.put(score_key(key, score, member), Vec::new());
    tx.put(
        sub_key(NS_ZMEMBER, key, member),
        score.to_le_bytes().to_vec(),
    );
}

/// Deletes `member` (with `score`) from the zset `key`; the caller fixes the count.
pub(crate) fn delete_member(tx: &mut Tx<'_>, key: &[u8], member: &[u8], score: f64) {
    tx.delete(score_key(key, score, member));
    tx.delete(sub_key(NS_ZMEMBER, key, member));
}

/// Replaces `dst` (any type) with a zset of `items` (deleted when empty).
pub(crate) fn store_zset(tx: &mut Tx<'_>, dst: &[u8], items: &[Scored]) -> CmdResult<()> {
    if let Some(old) = tx.begin(dst)? {
        tx.remove(dst, &old)?;
    }
    if !items.is_empty() {
        for (m, s) in items {
            put_member(tx, dst, m, None, *s);
        }
        let n = u64::try_from(items.len()).unwrap_or(u64::MAX);
        tx.set_meta(dst, None, &Meta::collection(Type::ZSet, n, None));
    }
    Ok(())
}

/// Replies with members, and their scores when `withscores`: RESP2 a flat array,
/// RESP3 (like Redis 7) an array of `[member, score]` pairs.
pub(crate) fn reply_scored(out: &mut Out, items: &[Scored], withscores: bool) {
    let nested = withscores && out.resp3;
    let flat = if withscores && !nested { 2 } else { 1 };
    reply::array_header(out, items.len() * flat);
    for (m, s) in items {
        if nested {
            reply::array_header(out, 2);
        }
        reply::bulk(out, m);
        if withscores {
            reply::double(out, *s);
        }
    }
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

pub(crate) fn zadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
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
    add(tx, c.arg(1), &f, &pairs, out)
}

fn zincrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let f = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let by = float_arg(c.arg(2))?;
    add(tx, c.arg(1), &f, &[(by, c.arg(3))], out)
}

/// ZADD's work once the arguments are parsed (ZINCRBY is ZADD INCR).
fn add(
    tx: &mut Tx<'_>,
    key: &[u8],
    f: &AddFlags,
    pairs: &[(f64, &[u8])],
    out: &mut Out,
) -> CmdResult<()> {
    let old = tx.begin_typed(key, Type::ZSet)?;
    let (mut added, mut changed) = (0u64, 0u64);
    let mut incr_result = None;
    for &(score, member) in pairs {
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
    } else if changed > 0 {
        // Scores changed: a change for WATCH and for clients blocked on the key.
        if let Some(m) = old.as_ref() {
            tx.set_meta(key, Some(m), m);
        }
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
            delete_member(tx, key, member, s);
            removed += 1;
        }
    }
    tx.shrink(key, &old, removed)?;
    reply::int(out, i64::try_from(removed).unwrap_or(i64::MAX));
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

fn zmscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let live = tx.typed(key, Type::ZSet)?.is_some();
    reply::array_header(out, c.len() - 2);
    for member in c.args().skip(2) {
        match live
            .then(|| member_score(tx, key, member))
            .transpose()?
            .flatten()
        {
            Some(s) => reply::double(out, s),
            None => reply::nil(out),
        }
    }
    Ok(())
}

/// The rank of `member` counted from the low end (`rev`: from the high end). Walks
/// the score index from both ends at once and stops when either end reaches the
/// member: O(min(rank, N - rank)) entries.
fn rank(tx: &Tx<'_>, key: &[u8], member: &[u8], rev: bool) -> CmdResult<Option<usize>> {
    let Some(meta) = tx.typed(key, Type::ZSet)? else {
        return Ok(None);
    };
    let Some(s) = member_score(tx, key, member)? else {
        return Ok(None);
    };
    let n = usize::try_from(meta.count()).unwrap_or(usize::MAX);
    let prefix = sub_prefix(NS_ZSCORE, key);
    let at = score_key(key, s, member);
    let hi = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let mut below = tx.range(Bound::Included(prefix), Bound::Excluded(at.clone()))?;
    let mut above = tx.range_rev(Bound::Excluded(at), hi)?;
    let (mut nb, mut na) = (0usize, 0usize);
    let from_low = loop {
        match below.next() {
            None => break nb,
            Some(kv) => {
                kv?;
                nb += 1;
            }
        }
        match above.next() {
            None => break n.saturating_sub(1).saturating_sub(na),
            Some(kv) => {
                kv?;
                na += 1;
            }
        }
    };
    Ok(Some(if rev {
        n.saturating_sub(1).saturating_sub(from_low)
    } else {
        from_low
    }))
}

fn rank_cmd(tx: &Tx<'_>, c: &Command, out: &mut Out, rev: bool) -> CmdResult<()> {
    match rank(tx, c.arg(1), c.arg(2), rev)? {
        Some(r) => reply::int(out, len_i64(r)),
        None => reply::nil(out),
    }
    Ok(())
}

fn zrank(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    rank_cmd(tx, c, out, false)
}

fn zrevrank(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    rank_cmd(tx, c, out, true)
}

fn zscan(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    super::keyspace::scan::collection(ctx, c, Type::ZSet)
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

    #[test]
    fn incr_mscore_rank() {
        let mut k = Kit::new();
        k.expect(&["ZINCRBY", "z", "1.5", "a"], "$3\r\n1.5\r\n");
        k.expect(
            &["ZINCRBY", "z", "x", "a"],
            "-ERR value is not a valid float\r\n",
        );
        k.int(&["ZADD", "z", "1", "b", "3", "c", "3", "d"]);
        k.expect(&["ZINCRBY", "z", "+inf", "e"], "$3\r\ninf\r\n");
        k.expect(
            &["ZINCRBY", "z", "-inf", "e"],
            "-ERR resulting score is not a number (NaN)\r\n",
        );
        k.expect(
            &["ZMSCORE", "z", "a", "nope", "c"],
            "*3\r\n$3\r\n1.5\r\n$-1\r\n$1\r\n3\r\n",
        );
        k.expect(&["ZMSCORE", "none", "a"], "*1\r\n$-1\r\n");
        // Order: b(1) a(1.5) c(3) d(3) e(inf).
        k.expect(&["ZRANK", "z", "b"], ":0\r\n");
        k.expect(&["ZRANK", "z", "d"], ":3\r\n");
        k.expect(&["ZREVRANK", "z", "e"], ":0\r\n");
        k.expect(&["ZREVRANK", "z", "c"], ":2\r\n");
        k.expect(&["ZRANK", "z", "nope"], "$-1\r\n");
        k.expect(&["ZRANK", "none", "a"], "$-1\r\n");
        k.ok(&["SET", "s", "x"]);
        k.expect(
            &["ZRANK", "s", "a"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
    }

    #[test]
    fn ranks_match_positions() {
        let mut k = Kit::new();
        for i in 0..41 {
            // Scores repeat, so ties are ordered by member.
            k.int(&["ZADD", "z", &((i * 7) % 5).to_string(), &format!("m{i}")]);
        }
        let order = k.strings(&["ZRANGE", "z", "0", "-1"]);
        assert_eq!(order.len(), 41);
        for (pos, m) in order.iter().enumerate() {
            assert_eq!(k.int(&["ZRANK", "z", m]), i64::try_from(pos).unwrap_or(0));
            assert_eq!(
                k.int(&["ZREVRANK", "z", m]),
                i64::try_from(40 - pos).unwrap_or(0)
            );
        }
    }
}
