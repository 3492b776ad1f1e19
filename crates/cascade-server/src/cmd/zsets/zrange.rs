//! Sorted-set ranges: ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZRANGESTORE,
//! ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZCOUNT,
//! ZLEXCOUNT and ZREMRANGEBYRANK/SCORE/LEX.
//!
//! Each is one range scan of the score index (`zselect.rs` has the costs). ZCOUNT and ZLEXCOUNT walk the range they count; ZREMRANGEBY* delete what the same
//! walk returns (O(removed)), in one batch.

use super::zselect::{lex_end, score_end, select, By, Query};
use super::{delete_member, reply_scored, store_zset};
use crate::cmd::args::len_i64;
use crate::cmd::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The range commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "zrange",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members in a range of ranks, scores or names.",
        Data(zrange),
    ),
    spec(
        "zrangestore",
        -5,
        W,
        Keys::Range(1, 2, 1),
        "sorted-set",
        "Stores a range of a sorted set.",
        Data(zrangestore),
    ),
    spec(
        "zrevrange",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members in a range of ranks, highest score first.",
        Data(zrevrange),
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
        "zrevrangebyscore",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members with scores in a range, highest first.",
        Data(zrevrangebyscore),
    ),
    spec(
        "zrangebylex",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members in a range of names.",
        Data(zrangebylex),
    ),
    spec(
        "zrevrangebylex",
        -4,
        R,
        KEY1,
        "sorted-set",
        "Members in a range of names, in reverse.",
        Data(zrevrangebylex),
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
        "zlexcount",
        4,
        R,
        KEY1,
        "sorted-set",
        "Counts members in a range of names.",
        Data(zlexcount),
    ),
    spec(
        "zremrangebyrank",
        4,
        W,
        KEY1,
        "sorted-set",
        "Removes members in a range of ranks.",
        Data(zremrangebyrank),
    ),
    spec(
        "zremrangebyscore",
        4,
        W,
        KEY1,
        "sorted-set",
        "Removes members in a range of scores.",
        Data(zremrangebyscore),
    ),
    spec(
        "zremrangebylex",
        4,
        W,
        KEY1,
        "sorted-set",
        "Removes members in a range of names.",
        Data(zremrangebylex),
    ),
];

/// Which ZRANGE form a command is: fixed direction and range type, or chosen by
/// the REV / BYSCORE / BYLEX arguments (`None`).
#[derive(Clone, Copy)]
struct Form {
    rev: Option<bool>,
    kind: Option<Kind>,
    store: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Rank,
    Score,
    Lex,
}

/// Parses `min max [options]` at argument `at` (Redis's order of checks).
fn parse(c: &Command, at: usize, form: Form) -> CmdResult<(Query, bool)> {
    let (mut rev, mut kind) = (form.rev, form.kind);
    let (mut withscores, mut limit) = (false, None);
    let mut j = at + 2;
    while j < c.len() {
        let a = c.arg(j);
        if !form.store && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && j + 2 < c.len() {
            limit = Some((int_arg(c.arg(j + 1))?, int_arg(c.arg(j + 2))?));
            j += 2;
        } else if form.rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if form.kind.is_none() && is(a, "bylex") {
            kind = Some(Kind::Lex);
        } else if form.kind.is_none() && is(a, "byscore") {
            kind = Some(Kind::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let kind = kind.unwrap_or(Kind::Rank);
    if limit.is_some() && kind == Kind::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == Kind::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut lo, mut hi) = (c.arg(at), c.arg(at + 1));
    if rev && kind != Kind::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let by = match kind {
        Kind::Rank => By::Rank(int_arg(lo)?, int_arg(hi)?),
        Kind::Score => By::Score(score_end(lo)?, score_end(hi)?),
        Kind::Lex => By::Lex(lex_end(lo)?, lex_end(hi)?),
    };
    let (offset, limit) = match limit {
        Some((o, n)) => (o, usize::try_from(n).ok()),
        None => (0, None),
    };
    Ok((
        Query {
            by,
            rev,
            offset,
            limit,
        },
        withscores,
    ))
}

fn range_cmd(tx: &Tx<'_>, c: &Command, out: &mut Out, form: Form) -> CmdResult<()> {
    let (q, withscores) = parse(c, 2, form)?;
    let mut items = Vec::new();
    select(tx, c.arg(1), &q, |m, s| items.push((m, s)))?;
    reply_scored(out, &items, withscores);
    Ok(())
}

const fn form(rev: Option<bool>, kind: Option<Kind>) -> Form {
    Form {
        rev,
        kind,
        store: false,
    }
}

fn zrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(None, None))
}

fn zrevrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(Some(true), Some(Kind::Rank)))
}

fn zrangebyscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(Some(false), Some(Kind::Score)))
}

fn zrevrangebyscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(Some(true), Some(Kind::Score)))
}

fn zrangebylex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(Some(false), Some(Kind::Lex)))
}

fn zrevrangebylex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, form(Some(true), Some(Kind::Lex)))
}

fn zrangestore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let f = Form {
        rev: None,
        kind: None,
        store: true,
    };
    let (q, _) = parse(c, 3, f)?;
    let mut items = Vec::new();
    select(tx, c.arg(2), &q, |m, s| items.push((m, s)))?;
    store_zset(tx, c.arg(1), &items)?;
    reply::int(out, len_i64(items.len()));
    Ok(())
}

/// The whole range of `By` at arguments 2 and 3, ascending, no limit.
fn plain(by: By) -> Query {
    Query {
        by,
        rev: false,
        offset: 0,
        limit: None,
    }
}

fn count_cmd(tx: &Tx<'_>, c: &Command, out: &mut Out, by: By) -> CmdResult<()> {
    let mut n = 0usize;
    select(tx, c.arg(1), &plain(by), |_, _| n += 1)?;
    reply::int(out, len_i64(n));
    Ok(())
}

fn zcount(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = By::Score(score_end(c.arg(2))?, score_end(c.arg(3))?);
    count_cmd(tx, c, out, by)
}

fn zlexcount(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = By::Lex(lex_end(c.arg(2))?, lex_end(c.arg(3))?);
    count_cmd(tx, c, out, by)
}

fn remove_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, by: By) -> CmdResult<()> {
    let key = c.arg(1);
    let Some(old) = tx.begin_typed(key, Type::ZSet)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut items = Vec::new();
    select(tx, key, &plain(by), |m, s| items.push((m, s)))?;
    for (m, s) in &items {
        delete_member(tx, key, m, *s);
    }
    tx.shrink(key, &old, u64::try_from(items.len()).unwrap_or(u64::MAX))?;
    reply::int(out, len_i64(items.len()));
    Ok(())
}

fn zremrangebyrank(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = By::Rank(int_arg(c.arg(2))?, int_arg(c.arg(3))?);
    remove_cmd(tx, c, out, by)
}

fn zremrangebyscore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = By::Score(score_end(c.arg(2))?, score_end(c.arg(3))?);
    remove_cmd(tx, c, out, by)
}

fn zremrangebylex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = By::Lex(lex_end(c.arg(2))?, lex_end(c.arg(3))?);
    remove_cmd(tx, c, out, by)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    fn abcd(k: &mut Kit) {
        k.int(&["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"]);
    }

    #[test]
    fn by_rank() {
        let mut k = Kit::new();
        abcd(&mut k);
        assert_eq!(k.strings(&["ZRANGE", "z", "0", "-1"]), ["a", "b", "c", "d"]);
        assert_eq!(k.strings(&["ZRANGE", "z", "-2", "-1"]), ["c", "d"]);
        assert_eq!(k.strings(&["ZRANGE", "z", "-5", "1"]), ["a", "b"]);
        assert!(k.strings(&["ZRANGE", "z", "5", "-1"]).is_empty());
        assert!(k.strings(&["ZRANGE", "z", "1", "-5"]).is_empty());
        assert_eq!(k.strings(&["ZREVRANGE", "z", "0", "1"]), ["d", "c"]);
        assert_eq!(k.strings(&["ZREVRANGE", "z", "-2", "-1"]), ["b", "a"]);
        assert_eq!(
            k.strings(&["ZRANGE", "z", "0", "1", "REV", "WITHSCORES"]),
            ["d", "4", "c", "3"]
        );
        assert!(k.strings(&["ZRANGE", "nokey", "0", "-1"]).is_empty());
        k.expect(
            &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
            "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX\r\n",
        );
        k.expect(
            &["ZREVRANGE", "z", "0", "-1", "BYSCORE"],
            "-ERR syntax error\r\n",
        );
        k.expect(
            &["ZRANGE", "z", "x", "1"],
            "-ERR value is not an integer or out of range\r\n",
        );
    }

    #[test]
    fn by_score() {
        let mut k = Kit::new();
        abcd(&mut k);
        k.int(&["ZADD", "z", "-inf", "lo", "+inf", "hi"]);
        assert_eq!(k.strings(&["ZRANGEBYSCORE", "z", "(1", "3"]), ["b", "c"]);
        assert_eq!(k.strings(&["ZREVRANGEBYSCORE", "z", "3", "(1"]), ["c", "b"]);
        assert_eq!(
            k.strings(&["ZRANGE", "z", "+inf", "0", "BYSCORE", "REV", "LIMIT", "1", "2"]),
            ["d", "c"]
        );
        assert_eq!(
            k.strings(&["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "2", "-1"]),
            ["b", "c", "d", "hi"]
        );
        assert!(k.strings(&["ZRANGEBYSCORE", "z", "2", "(2"]).is_empty());
        assert!(k
            .strings(&["ZRANGEBYSCORE", "z", "0", "9", "LIMIT", "-1", "2"])
            .is_empty());
        k.expect(&["ZCOUNT", "z", "(-inf", "(+inf"], ":4\r\n");
        k.expect(
            &["ZRANGEBYSCORE", "z", "1", "nan"],
            "-ERR min or max is not a float\r\n",
        );
        k.expect(
            &["ZRANGEBYSCORE", "z", "0", "1", "REV"],
            "-ERR syntax error\r\n",
        );
    }

    #[test]
    fn by_lex() {
        let mut k = Kit::new();
        k.int(&[
            "ZADD", "z", "0", "alpha", "0", "bar", "0", "cool", "0", "down", "0", "foo",
        ]);
        assert_eq!(
            k.strings(&["ZRANGEBYLEX", "z", "-", "[cool"]),
            ["alpha", "bar", "cool"]
        );
        assert_eq!(k.strings(&["ZRANGEBYLEX", "z", "(bar", "(down"]), ["cool"]);
        assert_eq!(
            k.strings(&["ZREVRANGEBYLEX", "z", "+", "[d", "LIMIT", "0", "1"]),
            ["foo"]
        );
        assert_eq!(k.strings(&["ZRANGE", "z", "[b", "[c", "BYLEX"]), ["bar"]);
        k.expect(&["ZLEXCOUNT", "z", "-", "+"], ":5\r\n");
        k.expect(&["ZLEXCOUNT", "z", "+", "-"], ":0\r\n");
        k.expect(&["ZLEXCOUNT", "z", "[bar", "(foo"], ":3\r\n");
        k.expect(
            &["ZRANGEBYLEX", "z", "foo", "+"],
            "-ERR min or max not valid string range item\r\n",
        );
        k.expect(
            &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
            "-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n",
        );
        // Mixed scores: a filtered scan.
        k.int(&["ZADD", "z", "5", "aaa"]);
        k.expect(&["ZLEXCOUNT", "z", "[b", "+"], ":4\r\n");
    }

    #[test]
    fn store_and_remove() {
        let mut k = Kit::new();
        abcd(&mut k);
        k.expect(&["ZRANGESTORE", "dst", "z", "1", "2"], ":2\r\n");
        assert_eq!(
            k.strings(&["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
            ["b", "2", "c", "3"]
        );
        k.expect(&["ZRANGESTORE", "dst", "z", "5", "6"], ":0\r\n");
        k.expect(&["EXISTS", "dst"], ":0\r\n");
        k.expect(
            &["ZRANGESTORE", "dst", "z", "0", "-1", "WITHSCORES"],
            "-ERR syntax error\r\n",
        );
        k.expect(&["ZREMRANGEBYRANK", "z", "0", "0"], ":1\r\n");
        k.expect(&["ZREMRANGEBYSCORE", "z", "(2", "3"], ":1\r\n");
        k.expect(&["ZREMRANGEBYLEX", "z", "-", "+"], ":2\r\n");
        k.expect(&["EXISTS", "z"], ":0\r\n");
        k.expect(&["ZREMRANGEBYRANK", "z", "0", "-1"], ":0\r\n");
    }

    #[test]
    fn resp3_nests_scores() {
        let mut k = Kit::new();
        abcd(&mut k);
        k.value(&["HELLO", "3"]);
        k.expect(
            &["ZRANGE", "z", "0", "0", "WITHSCORES"],
            "*1\r\n*2\r\n$1\r\na\r\n,1\r\n",
        );
    }
}
