//! Sorted-set algebra: ZUNION ZINTER ZDIFF (and their STORE forms) and ZINTERCARD,
//! with WEIGHTS and AGGREGATE SUM|MIN|MAX. Inputs may be sorted sets or sets (whose
//! members score 1, as in Redis).
//!
//! Cost: one range scan of each input's member index (`0x03`, or `0x06` for a set),
//! the result built in memory and sorted by (score, member); a STORE form writes the
//! result (and deletes what the destination held) in one batch.

use std::collections::HashMap;

use super::{reply_scored, score_of, store_zset, Scored};
use crate::cmd::args::len_i64;
use crate::cmd::{float_arg, int_arg, is, parse_i64, spec, Keys, Run::Data, Spec, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_prefix, Type, NS_SET, NS_ZMEMBER};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

const INPUTS: Keys = Keys::Num { at: 1, dest: false };
const STORE: Keys = Keys::Num { at: 2, dest: true };

/// The algebra commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "zunion",
        -3,
        R,
        INPUTS,
        "sorted-set",
        "Union of sorted sets.",
        Data(zunion),
    ),
    spec(
        "zinter",
        -3,
        R,
        INPUTS,
        "sorted-set",
        "Intersection of sorted sets.",
        Data(zinter),
    ),
    spec(
        "zdiff",
        -3,
        R,
        INPUTS,
        "sorted-set",
        "Difference of sorted sets.",
        Data(zdiff),
    ),
    spec(
        "zunionstore",
        -4,
        W,
        STORE,
        "sorted-set",
        "Stores the union of sorted sets.",
        Data(zunionstore),
    ),
    spec(
        "zinterstore",
        -4,
        W,
        STORE,
        "sorted-set",
        "Stores the intersection of sorted sets.",
        Data(zinterstore),
    ),
    spec(
        "zdiffstore",
        -4,
        W,
        STORE,
        "sorted-set",
        "Stores the difference of sorted sets.",
        Data(zdiffstore),
    ),
    spec(
        "zintercard",
        -3,
        R,
        INPUTS,
        "sorted-set",
        "Size of the intersection of sorted sets.",
        Data(zintercard),
    ),
];

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// Parsed arguments.
struct Args<'a> {
    keys: Vec<&'a [u8]>,
    weights: Vec<f64>,
    agg: Agg,
    withscores: bool,
    /// ZINTERCARD's LIMIT (0: none).
    limit: usize,
}

/// Parses `numkeys key... [options]` with numkeys at `at`, as Redis does for `name`
/// (`store`: a destination precedes; `card`: ZINTERCARD, whose only option is LIMIT).
#[expect(
    clippy::many_single_char_names,
    reason = "c, n, a, j, v: the usual names in handlers"
)]
fn parse<'a>(
    c: &'a Command,
    at: usize,
    op: Op,
    name: &str,
    store: bool,
    card: bool,
) -> CmdResult<Args<'a>> {
    let n = int_arg(c.arg(at))?;
    if n < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{name}' command"
        )));
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n > c.len() - at - 1 {
        return Err(CmdError::Syntax);
    }
    let mut a = Args {
        keys: (at + 1..=at + n).map(|i| c.arg(i)).collect(),
        weights: vec![1.0; n],
        agg: Agg::Sum,
        withscores: false,
        limit: 0,
    };
    let mut j = at + 1 + n;
    while j < c.len() {
        let left = c.len() - j;
        let arg = c.arg(j);
        if card {
            if !(is(arg, "limit") && left >= 2) {
                return Err(CmdError::Syntax);
            }
            a.limit = parse_i64(c.arg(j + 1))
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            j += 2;
        } else if op != Op::Diff && is(arg, "weights") && left > n {
            for (w, i) in a.weights.iter_mut().zip(j + 1..) {
                *w = float_arg(c.arg(i))
                    .map_err(|_| CmdError::err("weight value is not a float"))?;
            }
            j += n + 1;
        } else if op != Op::Diff && is(arg, "aggregate") && left >= 2 {
            let v = c.arg(j + 1);
            a.agg = if is(v, "sum") {
                Agg::Sum
            } else if is(v, "min") {
                Agg::Min
            } else if is(v, "max") {
                Agg::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && is(arg, "withscores") {
            a.withscores = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(a)
}

/// Members and scores of the zset or set `key` (`None`: no such key).
fn read(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Option<HashMap<Vec<u8>, f64>>> {
    let Some(m) = tx.meta(key)? else {
        return Ok(None);
    };
    let ns = match m.ty {
        Type::ZSet => NS_ZMEMBER,
        Type::Set => NS_SET,
        _ => return Err(CmdError::WrongType),
    };
    let prefix = sub_prefix(ns, key);
    let mut out = HashMap::new();
    for (mut k, v) in tx.prefix_scan(&prefix, usize::MAX)? {
        let s = if ns == NS_SET { 1.0 } else { score_of(&v)? };
        out.insert(k.split_off(prefix.len()), s);
    }
    Ok(Some(out))
}

/// `w * s`, with Redis's rule that a NaN (0 × ±inf) counts as 0.
fn weighted(w: f64, s: f64) -> f64 {
    let v = w * s;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn aggregate(agg: Agg, acc: f64, v: f64) -> f64 {
    match agg {
        Agg::Sum => {
            let t = acc + v;
            if t.is_nan() {
                0.0
            } else {
                t
            }
        }
        Agg::Min => acc.min(v),
        Agg::Max => acc.max(v),
    }
}

/// Computes `op` over the inputs; the result sorted by (score, member).
fn compute(tx: &Tx<'_>, a: &Args<'_>, op: Op) -> CmdResult<Vec<Scored>> {
    let mut inputs = Vec::with_capacity(a.keys.len());
    for k in &a.keys {
        inputs.push(read(tx, k)?.unwrap_or_default());
    }
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    match op {
        Op::Union => {
            for (input, &w) in inputs.iter().zip(&a.weights) {
                for (m, &s) in input {
                    let v = weighted(w, s);
                    acc.entry(m.clone())
                        .and_modify(|t| *t = aggregate(a.agg, *t, v))
                        .or_insert(v);
                }
            }
        }
        Op::Inter => {
            if let Some((first, rest)) = inputs.split_first() {
                'members: for (m, &s) in first {
                    let mut t = weighted(a.weights[0], s);
                    for (input, &w) in rest.iter().zip(&a.weights[1..]) {
                        let Some(&s) = input.get(m) else {
                            continue 'members;
                        };
                        t = aggregate(a.agg, t, weighted(w, s));
                    }
                    acc.insert(m.clone(), t);
                }
            }
        }
        Op::Diff => {
            if let Some((first, rest)) = inputs.split_first() {
                for (m, &s) in first {
                    if !rest.iter().any(|i| i.contains_key(m)) {
                        acc.insert(m.clone(), s);
                    }
                }
            }
        }
    }
    let mut items: Vec<Scored> = acc.into_iter().collect();
    items.sort_by(|x, y| x.1.total_cmp(&y.1).then_with(|| x.0.cmp(&y.0)));
    Ok(items)
}

fn read_cmd(tx: &Tx<'_>, c: &Command, out: &mut Out, op: Op, name: &str) -> CmdResult<()> {
    let a = parse(c, 1, op, name, false, false)?;
    let items = compute(tx, &a, op)?;
    reply_scored(out, &items, a.withscores);
    Ok(())
}

fn store_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, op: Op, name: &str) -> CmdResult<()> {
    let a = parse(c, 2, op, name, true, false)?;
    let items = compute(tx, &a, op)?;
    store_zset(tx, c.arg(1), &items)?;
    reply::int(out, len_i64(items.len()));
    Ok(())
}

fn zunion(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_cmd(tx, c, out, Op::Union, "zunion")
}

fn zinter(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_cmd(tx, c, out, Op::Inter, "zinter")
}

fn zdiff(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read_cmd(tx, c, out, Op::Diff, "zdiff")
}

fn zunionstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_cmd(tx, c, out, Op::Union, "zunionstore")
}

fn zinterstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_cmd(tx, c, out, Op::Inter, "zinterstore")
}

fn zdiffstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    store_cmd(tx, c, out, Op::Diff, "zdiffstore")
}

fn zintercard(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let a = parse(c, 1, Op::Inter, "zintercard", false, true)?;
    let n = compute(tx, &a, Op::Inter)?.len();
    let n = if a.limit > 0 { n.min(a.limit) } else { n };
    reply::int(out, len_i64(n));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    fn setup(k: &mut Kit) {
        k.int(&["ZADD", "a", "1", "a", "2", "b", "3", "c"]);
        k.int(&["ZADD", "b", "1", "b", "2", "c", "3", "d"]);
    }

    #[test]
    fn union_inter_diff() {
        let mut k = Kit::new();
        setup(&mut k);
        assert_eq!(
            k.strings(&["ZUNION", "2", "a", "b", "WITHSCORES"]),
            ["a", "1", "b", "3", "d", "3", "c", "5"]
        );
        assert_eq!(
            k.strings(&["ZUNION", "2", "a", "b", "WEIGHTS", "2", "3", "WITHSCORES"]),
            ["a", "2", "b", "7", "d", "9", "c", "12"]
        );
        assert_eq!(
            k.strings(&["ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES"]),
            ["b", "1", "c", "2"]
        );
        assert_eq!(
            k.strings(&["ZDIFF", "2", "a", "b", "WITHSCORES"]),
            ["a", "1"]
        );
        k.expect(&["ZINTERCARD", "2", "a", "b"], ":2\r\n");
        k.expect(&["ZINTERCARD", "2", "a", "b", "LIMIT", "1"], ":1\r\n");
        k.expect(
            &["ZINTERCARD", "1", "a", "LIMIT", "-1"],
            "-ERR LIMIT can't be negative\r\n",
        );
        k.expect(
            &["ZUNION", "0", "a"],
            "-ERR at least 1 input key is needed for 'zunion' command\r\n",
        );
        k.expect(&["ZUNION", "3", "a", "b"], "-ERR syntax error\r\n");
        k.expect(
            &["ZINTER", "2", "a", "b", "WEIGHTS", "nan", "1"],
            "-ERR weight value is not a float\r\n",
        );
        k.expect(
            &["ZDIFF", "2", "a", "b", "AGGREGATE", "MIN"],
            "-ERR syntax error\r\n",
        );
    }

    #[test]
    fn store_forms_and_sets() {
        let mut k = Kit::new();
        setup(&mut k);
        k.int(&["SADD", "s", "a", "b"]);
        k.expect(
            &["ZUNIONSTORE", "dst", "2", "s", "b", "WEIGHTS", "2", "3"],
            ":4\r\n",
        );
        assert_eq!(
            k.strings(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
            ["a", "2", "b", "5", "c", "6", "d", "9"]
        );
        k.expect(&["ZINTERSTORE", "dst", "2", "a", "missing"], ":0\r\n");
        k.expect(&["EXISTS", "dst"], ":0\r\n");
        k.expect(
            &["ZUNIONSTORE", "dst", "1", "a", "WITHSCORES"],
            "-ERR syntax error\r\n",
        );
        k.ok(&["SET", "str", "x"]);
        k.expect(
            &["ZUNION", "2", "a", "str"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        // 0 * -inf is NaN: Redis counts it as 0.
        k.int(&["ZADD", "inf", "-inf", "m"]);
        k.expect(
            &["ZUNIONSTORE", "dst", "1", "inf", "WEIGHTS", "0"],
            ":1\r\n",
        );
        k.expect(&["ZSCORE", "dst", "m"], "$1\r\n0\r\n");
        k.expect(&["ZDIFFSTORE", "dst", "2", "a", "a"], ":0\r\n");
    }
}
