//! Taking members from the ends of sorted sets, and sampling them: ZPOPMIN ZPOPMAX
//! ZMPOP, their blocking forms BZPOPMIN BZPOPMAX BZMPOP, and ZRANDMEMBER
//! (`keyspace/random.rs`).
//!
//! A pop reads the first (or last) entries of the score index — one range scan of the
//! members popped — and deletes both entries of each, with the count, in one batch.
//! The blocking forms run the same code; when every key is empty they return
//! [`CmdError::Block`] and the worker parks the client until a write to one of the
//! keys or the timeout (inside MULTI they answer at once, like Redis).

use std::ops::Bound;

use super::{delete_member, reply_scored, split_index, Scored};
use crate::cmd::args::pop_count;
use crate::cmd::lists::{mpop_args, timeout_arg};
use crate::cmd::{is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{prefix_end, sub_prefix, Type, NS_ZSCORE};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// Flags of a blocking write command.
const BW: &[&str] = &["write", "blocking"];

/// The pop and sampling commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "zpopmin",
        -2,
        W,
        KEY1,
        "sorted-set",
        "Removes and returns the lowest-scored members.",
        Data(zpopmin),
    ),
    spec(
        "zpopmax",
        -2,
        W,
        KEY1,
        "sorted-set",
        "Removes and returns the highest-scored members.",
        Data(zpopmax),
    ),
    spec(
        "bzpopmin",
        -3,
        BW,
        Keys::Range(1, -2, 1),
        "sorted-set",
        "ZPOPMIN, waiting for a member.",
        Data(bzpopmin),
    ),
    spec(
        "bzpopmax",
        -3,
        BW,
        Keys::Range(1, -2, 1),
        "sorted-set",
        "ZPOPMAX, waiting for a member.",
        Data(bzpopmax),
    ),
    spec(
        "zmpop",
        -4,
        W,
        Keys::Num { at: 1, dest: false },
        "sorted-set",
        "Pops from the first non-empty sorted set.",
        Data(zmpop),
    ),
    spec(
        "bzmpop",
        -5,
        BW,
        Keys::Num { at: 2, dest: false },
        "sorted-set",
        "ZMPOP, waiting for a member.",
        Data(bzmpop),
    ),
    spec(
        "zrandmember",
        -2,
        R,
        KEY1,
        "sorted-set",
        "Random members.",
        Data(zrandmember),
    ),
];

/// Pops up to `n` members from the low (`max`: high) end of the zset `key`.
fn pop(tx: &mut Tx<'_>, key: &[u8], max: bool, n: usize) -> CmdResult<Vec<Scored>> {
    let Some(old) = tx.begin_typed(key, Type::ZSet)? else {
        return Ok(Vec::new());
    };
    let prefix = sub_prefix(NS_ZSCORE, key);
    let lo = Bound::Included(prefix.clone());
    let hi = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let keys: Vec<Vec<u8>> = if max {
        tx.range_rev(lo, hi)?
            .take(n)
            .map(|kv| kv.map(|(k, _)| k))
            .collect::<CmdResult<_>>()?
    } else {
        let end = prefix_end(&prefix);
        tx.scan_first(&prefix, end.as_deref(), n)?
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    let items: Vec<Scored> = keys
        .iter()
        .filter_map(|k| split_index(prefix.len(), k))
        .collect();
    for (m, s) in &items {
        delete_member(tx, key, m, *s);
    }
    tx.shrink(key, &old, u64::try_from(items.len()).unwrap_or(u64::MAX))?;
    Ok(items)
}

fn pop_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, max: bool) -> CmdResult<()> {
    let count = pop_count(c, CmdError::Syntax)?;
    let n = usize::try_from(count.unwrap_or(1)).unwrap_or(usize::MAX);
    let items = pop(tx, c.arg(1), max, n)?;
    if count.is_some() {
        reply_scored(out, &items, true);
    } else {
        // Without COUNT: one flat [member, score] pair (or nothing) in both protocols.
        reply::array_header(out, items.len() * 2);
        for (m, s) in &items {
            reply::bulk(out, m);
            reply::double(out, *s);
        }
    }
    Ok(())
}

fn zpopmin(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    pop_cmd(tx, c, out, false)
}

fn zpopmax(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    pop_cmd(tx, c, out, true)
}

fn bpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out, max: bool) -> CmdResult<()> {
    let timeout = timeout_arg(c.arg(c.len() - 1))?;
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    for i in 1..c.len() - 1 {
        let key = c.arg(i);
        if tx.skip_on_retry(key, Type::ZSet)? {
            continue;
        }
        if let Some((m, s)) = pop(tx, key, max, 1)?.pop() {
            reply::array_header(out, 3);
            reply::bulk(out, key);
            reply::bulk(out, &m);
            reply::double(out, s);
            return Ok(());
        }
    }
    tx.block(timeout, out)
}

fn bzpopmin(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    bpop(tx, c, out, false)
}

fn bzpopmax(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    bpop(tx, c, out, true)
}

/// `MIN` or `MAX` (true).
fn which_end(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "min") {
        Ok(false)
    } else if is(arg, "max") {
        Ok(true)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Pops from the first non-empty zset of `keys` and replies `[key, [[m, s]...]]`;
/// false (nothing written) when all are empty.
fn mpop(tx: &mut Tx<'_>, keys: &[&[u8]], max: bool, n: u64, out: &mut Out) -> CmdResult<bool> {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    for k in keys {
        if tx.skip_on_retry(k, Type::ZSet)? {
            continue;
        }
        let items = pop(tx, k, max, n)?;
        if !items.is_empty() {
            reply::array_header(out, 2);
            reply::bulk(out, k);
            reply::array_header(out, items.len());
            for (m, s) in &items {
                reply::array_header(out, 2);
                reply::bulk(out, m);
                reply::double(out, *s);
            }
            return Ok(true);
        }
    }
    Ok(false)
}

fn zmpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (keys, max, count) = mpop_args(c, 1, which_end)?;
    if !mpop(tx, &keys, max, count, out)? {
        reply::nil_array(out);
    }
    Ok(())
}

fn bzmpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let timeout = timeout_arg(c.arg(1))?;
    let (keys, max, count) = mpop_args(c, 2, which_end)?;
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    if mpop(tx, &keys, max, count, out)? {
        Ok(())
    } else {
        tx.block(timeout, out)
    }
}

fn zrandmember(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    crate::cmd::keyspace::random::random_cmd(tx, c, out, Type::ZSet)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn pops() {
        let mut k = Kit::new();
        k.int(&["ZADD", "z", "-1", "a", "1", "b", "2", "c", "3", "d"]);
        k.expect(&["ZPOPMIN", "z"], "*2\r\n$1\r\na\r\n$2\r\n-1\r\n");
        k.expect(
            &["ZPOPMAX", "z", "2"],
            "*4\r\n$1\r\nd\r\n$1\r\n3\r\n$1\r\nc\r\n$1\r\n2\r\n",
        );
        k.expect(&["ZPOPMIN", "z", "0"], "*0\r\n");
        k.expect(
            &["ZPOPMIN", "z", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        );
        k.expect(&["ZPOPMIN", "nokey"], "*0\r\n");
        k.expect(
            &["ZMPOP", "2", "nokey", "z", "MAX", "COUNT", "5"],
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n1\r\n",
        );
        k.expect(&["EXISTS", "z"], ":0\r\n");
        k.expect(&["ZMPOP", "1", "z", "MIN"], "*-1\r\n");
        k.expect(&["ZMPOP", "1", "z", "LEFT"], "-ERR syntax error\r\n");
        k.expect(
            &["ZMPOP", "1", "z", "MIN", "COUNT", "a"],
            "-ERR count should be greater than 0\r\n",
        );
        k.expect(
            &["ZMPOP", "0", "z", "MIN"],
            "-ERR numkeys should be greater than 0\r\n",
        );
    }

    #[test]
    fn blocking_pops() {
        let mut k = Kit::new();
        k.expect(&["BZPOPMIN", "z", "0"], "(blocked 0)");
        k.int(&["ZADD", "z", "1", "a", "2", "b"]);
        k.expect(
            &["BZPOPMAX", "y", "z", "0"],
            "*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n",
        );
        k.expect(
            &["BZMPOP", "1", "1", "z", "MIN"],
            "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        );
        k.expect(&["BZMPOP", "0.5", "1", "z", "MIN"], "(blocked 0.5)");
        k.ok(&["SET", "s", "x"]);
        k.expect(
            &["BZPOPMIN", "s", "0"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        k.expect(&["BZPOPMIN", "z", "-1"], "-ERR timeout is negative\r\n");
    }
}
