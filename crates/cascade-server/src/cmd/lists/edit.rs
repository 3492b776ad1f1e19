//! List commands that scan or rewrite the middle of a list: `LINSERT LREM LTRIM LPOS`.
//! LINSERT and LREM shift elements, so they rewrite the list (O(N)); LTRIM deletes the
//! elements outside the range (O(elements removed)); LPOS scans from the head (or
//! tail) until enough matches. The element layout is `mod.rs`'s. Data commands: the
//! dispatcher holds the key's lock.

use super::{elem_key, read, span};
use crate::cmd::args::len_i64;
use crate::cmd::{int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// Replaces the whole list `key` (metadata `m`) with `vals`; deletes it when empty.
fn rewrite(tx: &mut Tx<'_>, key: &[u8], m: &Meta, vals: &[Vec<u8>]) -> CmdResult<()> {
    let head = m.list_head();
    for p in 0..m.count() {
        tx.delete(elem_key(key, head.wrapping_add(p)));
    }
    if vals.is_empty() {
        return tx.remove(key, m);
    }
    for (p, v) in (0u64..).zip(vals) {
        tx.put(elem_key(key, head.wrapping_add(p)), v.clone());
    }
    let n = u64::try_from(vals.len()).unwrap_or(u64::MAX);
    tx.set_meta(key, Some(m), &Meta::list(n, head, m.expire_at));
    Ok(())
}

pub(super) fn linsert(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let before = if is(c.arg(2), "before") {
        true
    } else if is(c.arg(2), "after") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let key = c.arg(1);
    let Some(m) = tx.begin_typed(key, Type::List)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut vals = read(tx, key, &m, 0, m.count())?;
    let Some(at) = vals.iter().position(|v| v == c.arg(3)) else {
        reply::int(out, -1);
        return Ok(());
    };
    vals.insert(if before { at } else { at + 1 }, c.arg(4).to_vec());
    rewrite(tx, key, &m, &vals)?;
    reply::int(out, len_i64(vals.len()));
    Ok(())
}

pub(super) fn lrem(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let n = int_arg(c.arg(2))?;
    let key = c.arg(1);
    let Some(m) = tx.begin_typed(key, Type::List)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut vals = read(tx, key, &m, 0, m.count())?;
    let target = c.arg(3);
    let limit = if n == 0 {
        usize::MAX
    } else {
        usize::try_from(n.unsigned_abs()).unwrap_or(usize::MAX)
    };
    let mut removed = 0usize;
    if n >= 0 {
        vals.retain(|v| {
            let drop = removed < limit && v == target;
            removed += usize::from(drop);
            !drop
        });
    } else {
        vals.reverse();
        vals.retain(|v| {
            let drop = removed < limit && v == target;
            removed += usize::from(drop);
            !drop
        });
        vals.reverse();
    }
    if removed > 0 {
        rewrite(tx, key, &m, &vals)?;
    }
    reply::int(out, len_i64(removed));
    Ok(())
}

pub(super) fn ltrim(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (start, stop) = (int_arg(c.arg(2))?, int_arg(c.arg(3))?);
    let key = c.arg(1);
    if let Some(m) = tx.begin_typed(key, Type::List)? {
        let (from, to) = span(start, stop, m.count());
        let head = m.list_head();
        if from >= to {
            tx.remove(key, &m)?;
        } else {
            for p in (0..from).chain(to..m.count()) {
                tx.delete(elem_key(key, head.wrapping_add(p)));
            }
            let new = Meta::list(to - from, head.wrapping_add(from), m.expire_at);
            tx.set_meta(key, Some(&m), &new);
        }
    }
    reply::ok(out);
    Ok(())
}

pub(super) fn lpos(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (mut rank, mut count, mut maxlen) = (1i64, None, 0u64);
    let mut i = 3;
    while i < c.len() {
        if i + 1 >= c.len() {
            return Err(CmdError::Syntax);
        }
        let v = int_arg(c.arg(i + 1))?;
        if is(c.arg(i), "rank") {
            if v == 0 || v == i64::MIN {
                return Err(CmdError::err("RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
            }
            rank = v;
        } else if is(c.arg(i), "count") {
            count = Some(u64::try_from(v).map_err(|_| CmdError::err("COUNT can't be negative"))?);
        } else if is(c.arg(i), "maxlen") {
            maxlen = u64::try_from(v).map_err(|_| CmdError::err("MAXLEN can't be negative"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut found: Vec<u64> = Vec::new();
    if let Some(m) = tx.typed(c.arg(1), Type::List)? {
        let len = m.count();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let (from, to) = if rank > 0 {
            (0, scan)
        } else {
            (len - scan, len)
        };
        let vals = read(tx, c.arg(1), &m, from, to)?;
        let want = match count {
            Some(0) => u64::MAX,
            Some(n) => n,
            None => 1,
        };
        let mut skip = rank.unsigned_abs() - 1;
        let pairs: Vec<(u64, &Vec<u8>)> = (from..).zip(vals.iter()).collect();
        let positions: Box<dyn Iterator<Item = (u64, &Vec<u8>)>> = if rank > 0 {
            Box::new(pairs.into_iter())
        } else {
            Box::new(pairs.into_iter().rev())
        };
        for (p, v) in positions {
            if v != c.arg(2) {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(p);
            if u64::try_from(found.len()).unwrap_or(u64::MAX) >= want {
                break;
            }
        }
    }
    let as_int = |p: u64| i64::try_from(p).unwrap_or(i64::MAX);
    if count.is_none() {
        match found.first() {
            Some(p) => reply::int(out, as_int(*p)),
            None => reply::nil(out),
        }
    } else {
        reply::array_header(out, found.len());
        for p in found {
            reply::int(out, as_int(p));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn insert_remove_trim_pos() {
        let mut k = Kit::new();
        k.int(&["RPUSH", "l", "a", "b", "a", "c", "a"]);
        k.expect(&["LINSERT", "l", "BEFORE", "c", "x"], ":6\r\n");
        k.expect(&["LINSERT", "l", "AFTER", "nope", "x"], ":-1\r\n");
        k.expect(
            &["LINSERT", "l", "MIDDLE", "c", "x"],
            "-ERR syntax error\r\n",
        );
        k.expect(&["LPOS", "l", "a"], ":0\r\n");
        k.expect(&["LPOS", "l", "a", "RANK", "-1"], ":5\r\n");
        k.expect(
            &["LPOS", "l", "a", "COUNT", "0"],
            "*3\r\n:0\r\n:2\r\n:5\r\n",
        );
        k.expect(&["LPOS", "l", "a", "RANK", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
        k.expect(&["LREM", "l", "-1", "a"], ":1\r\n");
        k.expect(
            &["LRANGE", "l", "0", "-1"],
            "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nc\r\n",
        );
        k.expect(&["LREM", "l", "0", "a"], ":2\r\n");
        k.ok(&["LTRIM", "l", "1", "-1"]);
        k.expect(&["LRANGE", "l", "0", "-1"], "*2\r\n$1\r\nx\r\n$1\r\nc\r\n");
        k.ok(&["LTRIM", "l", "5", "10"]);
        k.expect(&["EXISTS", "l"], ":0\r\n");
    }
}
