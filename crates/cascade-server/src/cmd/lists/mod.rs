//! List commands. Element `i` of a list is the engine entry `0x07 len key (head + i)`
//! (u64 BE index), and the metadata holds the count and `head`, so a push or pop at
//! either end is one write plus the metadata, and `LINDEX`/`LSET` are one point access.
//!
//! Costs: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LINDEX LSET LLEN LMOVE RPOPLPUSH LMPOP:
//! O(elements pushed or popped). LRANGE: one range scan of the elements returned.
//! LTRIM: O(elements removed). LPOS: a scan from the head (or tail) until enough
//! matches. LINSERT and LREM shift elements: they rewrite the list, O(N).
//!
//! The blocking forms (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP) run the same code; when
//! every list is empty they return [`CmdError::Block`] and the worker parks the client
//! until a write to one of the keys (or the timeout). Inside MULTI they do not block.
//!
//! Files: this one holds the table, the element layout (`elem_key`, `read`, `push`,
//! `pop`) and the commands on the ends and by index (LPUSH RPUSH LPUSHX RPUSHX LPOP
//! RPOP LLEN LRANGE LINDEX LSET) and the argument parsers the zset pops share
//! (`mpop_args`, `timeout_arg`); `edit.rs` the commands that scan or rewrite the
//! middle (LINSERT LREM LTRIM LPOS); `moves.rs` LMOVE RPOPLPUSH LMPOP and the blocking
//! forms. Every command is a data command: the dispatcher holds the stripe locks of
//! its keys; no state of its own.

mod edit;
mod moves;

use std::ops::Bound;

use super::args::pop_count;
use super::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_key, Meta, Type, LIST_START, NS_LIST};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use edit::{linsert, lpos, lrem, ltrim};
use moves::{blmove, blmpop, blpop, brpop, brpoplpush, lmove, lmpop, rpoplpush};

const BW: &[&str] = &["write", "blocking"];

/// The list commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "lpush",
        -3,
        W,
        KEY1,
        "list",
        "Prepends elements.",
        Data(lpush),
    ),
    spec(
        "rpush",
        -3,
        W,
        KEY1,
        "list",
        "Appends elements.",
        Data(rpush),
    ),
    spec(
        "lpushx",
        -3,
        W,
        KEY1,
        "list",
        "Prepends elements to an existing list.",
        Data(lpushx),
    ),
    spec(
        "rpushx",
        -3,
        W,
        KEY1,
        "list",
        "Appends elements to an existing list.",
        Data(rpushx),
    ),
    spec(
        "lpop",
        -2,
        W,
        KEY1,
        "list",
        "Removes and returns the first elements.",
        Data(lpop),
    ),
    spec(
        "rpop",
        -2,
        W,
        KEY1,
        "list",
        "Removes and returns the last elements.",
        Data(rpop),
    ),
    spec("llen", 2, R, KEY1, "list", "Length of a list.", Data(llen)),
    spec(
        "lrange",
        4,
        R,
        KEY1,
        "list",
        "A range of elements.",
        Data(lrange),
    ),
    spec(
        "lindex",
        3,
        R,
        KEY1,
        "list",
        "The element at an index.",
        Data(lindex),
    ),
    spec(
        "lset",
        4,
        W,
        KEY1,
        "list",
        "Sets the element at an index.",
        Data(lset),
    ),
    spec(
        "linsert",
        5,
        W,
        KEY1,
        "list",
        "Inserts before or after a pivot.",
        Data(linsert),
    ),
    spec(
        "lrem",
        4,
        W,
        KEY1,
        "list",
        "Removes elements equal to a value.",
        Data(lrem),
    ),
    spec(
        "ltrim",
        4,
        W,
        KEY1,
        "list",
        "Keeps only a range.",
        Data(ltrim),
    ),
    spec(
        "lpos",
        -3,
        R,
        KEY1,
        "list",
        "Positions of matching elements.",
        Data(lpos),
    ),
    spec(
        "lmove",
        5,
        W,
        Keys::Range(1, 2, 1),
        "list",
        "Moves an element between lists.",
        Data(lmove),
    ),
    spec(
        "rpoplpush",
        3,
        W,
        Keys::Range(1, 2, 1),
        "list",
        "Moves the last element to the head of another list.",
        Data(rpoplpush),
    ),
    spec(
        "lmpop",
        -4,
        W,
        Keys::Num { at: 1, dest: false },
        "list",
        "Pops from the first non-empty list.",
        Data(lmpop),
    ),
    spec(
        "blpop",
        -3,
        BW,
        Keys::Range(1, -2, 1),
        "list",
        "LPOP, waiting for an element.",
        Data(blpop),
    ),
    spec(
        "brpop",
        -3,
        BW,
        Keys::Range(1, -2, 1),
        "list",
        "RPOP, waiting for an element.",
        Data(brpop),
    ),
    spec(
        "blmove",
        6,
        BW,
        Keys::Range(1, 2, 1),
        "list",
        "LMOVE, waiting for an element.",
        Data(blmove),
    ),
    spec(
        "brpoplpush",
        4,
        BW,
        Keys::Range(1, 2, 1),
        "list",
        "RPOPLPUSH, waiting for an element.",
        Data(brpoplpush),
    ),
    spec(
        "blmpop",
        -5,
        BW,
        Keys::Num { at: 2, dest: false },
        "list",
        "LMPOP, waiting for an element.",
        Data(blmpop),
    ),
];

fn elem_key(key: &[u8], idx: u64) -> Vec<u8> {
    sub_key(NS_LIST, key, &idx.to_be_bytes())
}

/// Reads elements `from..to` (positions) of the list `key` with metadata `m`.
fn read(tx: &Tx<'_>, key: &[u8], m: &Meta, from: u64, to: u64) -> CmdResult<Vec<Vec<u8>>> {
    if from >= to {
        return Ok(Vec::new());
    }
    let head = m.list_head();
    let lo = elem_key(key, head.wrapping_add(from));
    let hi = elem_key(key, head.wrapping_add(to));
    let cap = usize::try_from(to - from).unwrap_or(0).min(1 << 16);
    let mut out = Vec::with_capacity(cap);
    for kv in tx.range(Bound::Included(lo), Bound::Excluded(hi))? {
        out.push(kv?.1);
    }
    Ok(out)
}

/// Pushes `vals` onto `key`; returns the new length, or `None` (nothing pushed) when
/// `only_existing` and the list does not exist.
pub(crate) fn push(
    tx: &mut Tx<'_>,
    key: &[u8],
    vals: &[&[u8]],
    left: bool,
    only_existing: bool,
) -> CmdResult<Option<u64>> {
    let old = tx.begin_typed(key, Type::List)?;
    if old.is_none() && only_existing {
        return Ok(None);
    }
    let (mut count, mut head) = old
        .as_ref()
        .map_or((0, LIST_START), |m| (m.count(), m.list_head()));
    for v in vals {
        if left {
            head = head.wrapping_sub(1);
            tx.put(elem_key(key, head), v.to_vec());
        } else {
            tx.put(elem_key(key, head.wrapping_add(count)), v.to_vec());
        }
        count += 1;
    }
    let exp = old.as_ref().and_then(|m| m.expire_at);
    tx.set_meta(key, old.as_ref(), &Meta::list(count, head, exp));
    Ok(Some(count))
}

/// Pops up to `n` elements from one end of `key` (in pop order).
pub(crate) fn pop(tx: &mut Tx<'_>, key: &[u8], left: bool, n: u64) -> CmdResult<Vec<Vec<u8>>> {
    let Some(m) = tx.begin_typed(key, Type::List)? else {
        return Ok(Vec::new());
    };
    let n = n.min(m.count());
    let head = m.list_head();
    let (from, to) = if left {
        (0, n)
    } else {
        (m.count() - n, m.count())
    };
    let mut vals = read(tx, key, &m, from, to)?;
    for p in from..to {
        tx.delete(elem_key(key, head.wrapping_add(p)));
    }
    if !left {
        vals.reverse();
    }
    let count = m.count() - n;
    if count == 0 {
        tx.remove(key, &m)?;
    } else {
        let new_head = if left { head.wrapping_add(n) } else { head };
        tx.set_meta(key, Some(&m), &Meta::list(count, new_head, m.expire_at));
    }
    Ok(vals)
}

fn push_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, left: bool, x: bool) -> CmdResult<()> {
    let vals: Vec<&[u8]> = c.args().skip(2).collect();
    let n = push(tx, c.arg(1), &vals, left, x)?;
    reply::int(out, i64::try_from(n.unwrap_or(0)).unwrap_or(i64::MAX));
    Ok(())
}

fn lpush(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    push_cmd(tx, c, out, true, false)
}

fn rpush(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    push_cmd(tx, c, out, false, false)
}

fn lpushx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    push_cmd(tx, c, out, true, true)
}

fn rpushx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    push_cmd(tx, c, out, false, true)
}

fn pop_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, left: bool) -> CmdResult<()> {
    let name = if left { "lpop" } else { "rpop" };
    let count = pop_count(c, CmdError::Msg(super::arity_error(name)))?;
    let vals = pop(tx, c.arg(1), left, count.unwrap_or(1))?;
    match count {
        None => reply::opt_bulk(out, vals.first().map(Vec::as_slice)),
        Some(_) if vals.is_empty() && tx.typed(c.arg(1), Type::List)?.is_none() => {
            reply::nil_array(out);
        }
        Some(_) => reply::bulk_array(out, vals.iter().map(Vec::as_slice)),
    }
    Ok(())
}

fn lpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    pop_cmd(tx, c, out, true)
}

fn rpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    pop_cmd(tx, c, out, false)
}

fn llen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::List)?;
    reply::int(
        out,
        m.map_or(0, |m| i64::try_from(m.count()).unwrap_or(i64::MAX)),
    );
    Ok(())
}

/// Redis's start/stop normalisation: negative counts from the end; returns the
/// half-open position range (empty when out of range).
fn span(start: i64, stop: i64, len: u64) -> (u64, u64) {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        (start + len_i).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { stop + len_i } else { stop };
    if start > stop || start >= len_i || stop < 0 {
        return (0, 0);
    }
    let stop = stop.min(len_i - 1);
    (
        u64::try_from(start).unwrap_or(0),
        u64::try_from(stop + 1).unwrap_or(0),
    )
}

fn lrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (start, stop) = (int_arg(c.arg(2))?, int_arg(c.arg(3))?);
    let vals = match tx.typed(c.arg(1), Type::List)? {
        Some(m) => {
            let (from, to) = span(start, stop, m.count());
            read(tx, c.arg(1), &m, from, to)?
        }
        None => Vec::new(),
    };
    reply::bulk_array(out, vals.iter().map(Vec::as_slice));
    Ok(())
}

/// The position of index `i` (negative from the end) in a list of `len`.
fn position(i: i64, len: u64) -> Option<u64> {
    let len_i = i64::try_from(len).ok()?;
    let p = if i < 0 { i + len_i } else { i };
    (0..len_i)
        .contains(&p)
        .then(|| u64::try_from(p).ok())
        .flatten()
}

fn lindex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let i = int_arg(c.arg(2))?;
    let v = match tx.typed(c.arg(1), Type::List)? {
        Some(m) => match position(i, m.count()) {
            Some(p) => tx.get(&elem_key(c.arg(1), m.list_head().wrapping_add(p)))?,
            None => None,
        },
        None => None,
    };
    reply::opt_bulk(out, v.as_deref());
    Ok(())
}

fn lset(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let i = int_arg(c.arg(2))?;
    let Some(m) = tx.begin_typed(c.arg(1), Type::List)? else {
        return Err(CmdError::err("no such key"));
    };
    let p = position(i, m.count()).ok_or_else(|| CmdError::err("index out of range"))?;
    tx.put(
        elem_key(c.arg(1), m.list_head().wrapping_add(p)),
        c.arg(3).to_vec(),
    );
    reply::ok(out);
    Ok(())
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT n]` starting at `at` (ZMPOP: `MIN|MAX`,
/// read by `end`).
pub(crate) fn mpop_args(
    c: &Command,
    at: usize,
    end: fn(&[u8]) -> CmdResult<bool>,
) -> CmdResult<(Vec<&[u8]>, bool, u64)> {
    let n = int_arg(c.arg(at)).map_err(|_| CmdError::err("numkeys should be greater than 0"))?;
    if n <= 0 {
        return Err(CmdError::err("numkeys should be greater than 0"));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > c.len().saturating_sub(at + 2) {
        return Err(CmdError::Syntax);
    }
    let keys: Vec<&[u8]> = (at + 1..=at + n).map(|i| c.arg(i)).collect();
    let left = end(c.arg(at + n + 1))?;
    let mut count = None;
    let mut i = at + n + 2;
    while i < c.len() {
        if is(c.arg(i), "count") && i + 1 < c.len() && count.is_none() {
            count = Some(
                super::parse_i64(c.arg(i + 1))
                    .and_then(|v| u64::try_from(v).ok())
                    .filter(|&v| v > 0)
                    .ok_or_else(|| CmdError::err("count should be greater than 0"))?,
            );
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((keys, left, count.unwrap_or(1)))
}

/// A blocking command's timeout argument in seconds (0 = forever).
pub(crate) fn timeout_arg(arg: &[u8]) -> CmdResult<f64> {
    let t = super::args::parse_f64(arg)
        .filter(|t| t.is_finite())
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    if t < 0.0 {
        return Err(CmdError::err("timeout is negative"));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn push_pop_range() {
        let mut k = Kit::new();
        k.expect(&["RPUSH", "l", "a", "b", "c"], ":3\r\n");
        k.expect(&["LPUSH", "l", "z", "y"], ":5\r\n");
        k.expect(
            &["LRANGE", "l", "0", "-1"],
            "*5\r\n$1\r\ny\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        );
        k.expect(
            &["LRANGE", "l", "-2", "100"],
            "*2\r\n$1\r\nb\r\n$1\r\nc\r\n",
        );
        k.expect(&["LRANGE", "l", "3", "1"], "*0\r\n");
        k.expect(&["LLEN", "l"], ":5\r\n");
        k.expect(&["LINDEX", "l", "-1"], "$1\r\nc\r\n");
        k.expect(&["LINDEX", "l", "9"], "$-1\r\n");
        k.ok(&["LSET", "l", "0", "Y"]);
        k.expect(&["LSET", "l", "9", "x"], "-ERR index out of range\r\n");
        k.expect(&["LSET", "nol", "0", "x"], "-ERR no such key\r\n");
        k.expect(&["LPOP", "l"], "$1\r\nY\r\n");
        k.expect(&["RPOP", "l", "2"], "*2\r\n$1\r\nc\r\n$1\r\nb\r\n");
        k.expect(&["LPOP", "nol", "2"], "*-1\r\n");
        k.expect(
            &["LPOP", "l", "-1"],
            "-ERR value is out of range, must be positive\r\n",
        );
        k.expect(&["LPUSHX", "nol", "a"], ":0\r\n");
        k.expect(&["RPUSHX", "l", "q"], ":3\r\n");
        k.expect(&["TYPE", "l"], "+list\r\n");
        k.expect(
            &["RPOP", "l", "10"],
            "*3\r\n$1\r\nq\r\n$1\r\na\r\n$1\r\nz\r\n",
        );
        k.expect(&["EXISTS", "l"], ":0\r\n");
    }
}
