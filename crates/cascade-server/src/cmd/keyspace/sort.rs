//! SORT and `SORT_RO`: the elements of a list, set or sorted set, sorted as numbers or
//! (ALPHA) as bytes, optionally by weights read from other keys (`BY weight_*`,
//! `BY obj_*->field`, `BY nosort`), limited (LIMIT), projected (`GET #`, `GET
//! pattern`) and stored as a list (STORE).
//!
//! Cost: one range scan of the source, one point read per element for each BY/GET
//! pattern, O(N log N) in memory; STORE writes the result list in one batch. Keys
//! named by patterns are read without their stripe locks (like SCAN, each read is
//! consistent on its own). Numbers that tie are ordered by their bytes, as in Redis.

use std::cmp::Ordering;

use crate::cmd::args::{len_i64, parse_f64};
use crate::cmd::lists::push;
use crate::cmd::{int_arg, is, spec, Keys, Run::Data, Spec, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_key, sub_prefix, Type, NS_HASH, NS_LIST, NS_SET, NS_ZSCORE};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// Read commands here that read keys they do not lock (`BY`/`GET` patterns): their
/// replies always wait for a persist under sync durability (`visible.rs`). SORT is a
/// write command and waits anyway.
pub(crate) const READS_UNLOCKED: &[&str] = &["sort_ro"];

/// The commands. SORT's STORE destination is locked with the source.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "sort",
        -2,
        W,
        Keys::Range(1, -1, 1),
        "generic",
        "Sorts a list, set or sorted set.",
        Data(sort),
    ),
    spec(
        "sort_ro",
        -2,
        R,
        Keys::Range(1, 1, 1),
        "generic",
        "SORT without STORE.",
        Data(sort_ro),
    ),
];

/// Parsed options.
#[derive(Default)]
struct Opts<'a> {
    by: Option<&'a [u8]>,
    gets: Vec<&'a [u8]>,
    limit: Option<(i64, i64)>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn parse(c: &Command, allow_store: bool) -> CmdResult<Opts<'_>> {
    let mut o = Opts::default();
    let mut j = 2;
    while j < c.len() {
        let a = c.arg(j);
        let left = c.len() - j - 1;
        if is(a, "asc") {
            o.desc = false;
        } else if is(a, "desc") {
            o.desc = true;
        } else if is(a, "alpha") {
            o.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            o.limit = Some((int_arg(c.arg(j + 1))?, int_arg(c.arg(j + 2))?));
            j += 2;
        } else if is(a, "store") && left >= 1 && allow_store {
            o.store = Some(c.arg(j + 1));
            j += 1;
        } else if is(a, "by") && left >= 1 {
            o.by = Some(c.arg(j + 1));
            j += 1;
        } else if is(a, "get") && left >= 1 {
            o.gets.push(c.arg(j + 1));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// The elements of `key` in its own order (list order, set byte order, zset score
/// order).
fn elements(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Vec<Vec<u8>>> {
    let Some(m) = tx.meta(key)? else {
        return Ok(Vec::new());
    };
    let (ns, skip) = match m.ty {
        Type::List => (NS_LIST, None),
        Type::Set => (NS_SET, Some(0)),
        Type::ZSet => (NS_ZSCORE, Some(8)),
        _ => return Err(CmdError::WrongType),
    };
    let prefix = sub_prefix(ns, key);
    Ok(tx
        .prefix_scan(&prefix, usize::MAX)?
        .into_iter()
        .map(|(k, v)| match skip {
            None => v,
            Some(s) => k.get(prefix.len() + s..).unwrap_or_default().to_vec(),
        })
        .collect())
}

/// The value `pattern` names for `elem`: `#` is the element; the first `*` is
/// replaced by it; `key->field` reads a hash field. `None`: missing.
fn lookup(tx: &Tx<'_>, pattern: &[u8], elem: &[u8]) -> CmdResult<Option<Vec<u8>>> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let arrow = pattern
        .windows(2)
        .rposition(|w| w == b"->")
        .filter(|&p| p > star && p + 2 < pattern.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = pattern[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let Some(m) = tx.meta(&key)? else {
        return Ok(None);
    };
    match (arrow, m.ty) {
        (None, Type::String) => Ok(Some(m.payload)),
        (Some(p), Type::Hash) => tx.get(&sub_key(NS_HASH, &key, &pattern[p + 2..])),
        _ => Ok(None),
    }
}

/// The sort key of one element.
enum Weight {
    Num(f64),
    Bytes(Option<Vec<u8>>),
}

/// Sorts and projects; the reply items (`None`: a missing GET value).
fn run(tx: &Tx<'_>, key: &[u8], o: &Opts<'_>) -> CmdResult<Vec<Option<Vec<u8>>>> {
    let elems = elements(tx, key)?;
    let nosort = o.by.is_some_and(|b| !b.contains(&b'*'));
    let mut items: Vec<(Vec<u8>, Weight)> = Vec::with_capacity(elems.len());
    for e in elems {
        let w = if nosort {
            Weight::Num(0.0)
        } else {
            let v = match o.by {
                Some(p) => lookup(tx, p, &e)?,
                None => Some(e.clone()),
            };
            if o.alpha {
                Weight::Bytes(v)
            } else {
                let n = match v {
                    Some(v) => parse_f64(&v).ok_or_else(|| {
                        CmdError::err("One or more scores can't be converted into double")
                    })?,
                    None => 0.0,
                };
                Weight::Num(n)
            }
        };
        items.push((e, w));
    }
    if nosort {
        // BY nosort keeps a list's or sorted set's own order; DESC reverses it
        // (Redis walks it from the tail). A set has no order to reverse.
        if o.desc && tx.meta(key)?.is_some_and(|m| m.ty != Type::Set) {
            items.reverse();
        }
    } else {
        items.sort_by(|(ea, wa), (eb, wb)| {
            let ord = match (wa, wb) {
                (Weight::Num(a), Weight::Num(b)) => a.total_cmp(b).then_with(|| ea.cmp(eb)),
                (Weight::Bytes(a), Weight::Bytes(b)) => a.cmp(b),
                _ => Ordering::Equal,
            };
            if o.desc {
                ord.reverse()
            } else {
                ord
            }
        });
    }
    let n = items.len();
    let (start, count) = match o.limit {
        Some((off, cnt)) => {
            let s = usize::try_from(off.max(0)).unwrap_or(usize::MAX).min(n);
            let c = usize::try_from(cnt).unwrap_or(n);
            (s, c.min(n - s))
        }
        None => (0, n),
    };
    let mut out = Vec::new();
    for (e, _) in items.into_iter().skip(start).take(count) {
        if o.gets.is_empty() {
            out.push(Some(e));
        } else {
            for g in &o.gets {
                out.push(lookup(tx, g, &e)?);
            }
        }
    }
    Ok(out)
}

fn sort_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, allow_store: bool) -> CmdResult<()> {
    let o = parse(c, allow_store)?;
    let items = run(tx, c.arg(1), &o)?;
    if let Some(dst) = o.store {
        if let Some(old) = tx.begin(dst)? {
            tx.remove(dst, &old)?;
        }
        if !items.is_empty() {
            let vals: Vec<&[u8]> = items.iter().map(|v| v.as_deref().unwrap_or(b"")).collect();
            push(tx, dst, &vals, false, false)?;
        }
        reply::int(out, len_i64(items.len()));
    } else {
        reply::array_header(out, items.len());
        for v in &items {
            reply::opt_bulk(out, v.as_deref());
        }
    }
    Ok(())
}

fn sort(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    sort_cmd(tx, c, out, true)
}

fn sort_ro(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    sort_cmd(tx, c, out, false)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn sorts() {
        let mut k = Kit::new();
        k.int(&["RPUSH", "l", "3", "1", "2", "10"]);
        assert_eq!(k.strings(&["SORT", "l"]), ["1", "2", "3", "10"]);
        assert_eq!(k.strings(&["SORT", "l", "ALPHA"]), ["1", "10", "2", "3"]);
        assert_eq!(
            k.strings(&["SORT", "l", "DESC", "LIMIT", "1", "2"]),
            ["3", "2"]
        );
        k.ok(&["SET", "w_1", "9"]);
        k.ok(&["SET", "w_2", "5"]);
        assert_eq!(k.strings(&["SORT", "l", "BY", "w_*"])[2..], ["2", "1"]);
        k.int(&["HSET", "o_3", "name", "three"]);
        assert_eq!(
            k.strings(&[
                "SORT",
                "l",
                "GET",
                "#",
                "GET",
                "o_*->name",
                "LIMIT",
                "2",
                "1"
            ]),
            ["3", "three"]
        );
        assert_eq!(
            k.strings(&["SORT", "l", "BY", "nosort"]),
            ["3", "1", "2", "10"]
        );
        assert_eq!(
            k.strings(&["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "0", "2"]),
            ["10", "2"]
        );
        k.expect(&["SORT", "l", "STORE", "dst"], ":4\r\n");
        assert_eq!(
            k.strings(&["LRANGE", "dst", "0", "-1"]),
            ["1", "2", "3", "10"]
        );
        k.expect(&["SORT", "empty", "STORE", "dst"], ":0\r\n");
        k.expect(&["EXISTS", "dst"], ":0\r\n");
        k.int(&["RPUSH", "bad", "x"]);
        k.expect(
            &["SORT", "bad"],
            "-ERR One or more scores can't be converted into double\r\n",
        );
        k.expect(&["SORT_RO", "l", "STORE", "x"], "-ERR syntax error\r\n");
        k.int(&["ZADD", "z", "2", "b", "1", "c"]);
        assert_eq!(k.strings(&["SORT", "z", "ALPHA"]), ["b", "c"]);
    }
}
