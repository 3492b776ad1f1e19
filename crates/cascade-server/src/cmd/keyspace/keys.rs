//! Keyspace commands: `DEL UNLINK EXISTS TYPE DBSIZE KEYS SCAN FLUSHDB FLUSHALL` and
//! the native ordered range `CASCADE.RANGE`.
//!
//! `SCAN` walks keys in key order (a range scan of namespace 1); its cursor numbers
//! map to the last key returned (`cursors.rs`), so it is the one control command here.
//! Every key that exists for the whole scan is returned exactly once.

use std::ops::Bound;

use crate::cmd::{int_arg, is, spec, Ctx, Keys, Run::Ctl, Run::Data, Spec, ALLKEYS, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{meta_key, prefix_end, Meta, Type, NS_META};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The keyspace commands.
pub(crate) static SPECS: &[Spec] = &[
    spec("del", -2, W, ALLKEYS, "generic", "Deletes keys.", Data(del)),
    spec("unlink", -2, W, ALLKEYS, "generic", "Deletes keys.", Data(del)),
    spec("exists", -2, R, ALLKEYS, "generic", "Counts existing keys.", Data(exists)),
    spec("touch", -2, R, ALLKEYS, "generic", "Counts existing keys (touches them).", Data(exists)),
    spec("type", 2, R, KEY1, "generic", "Returns the type of a key.", Data(type_)),
    spec("dbsize", 1, R, Keys::None, "server", "Returns the number of keys.", Data(dbsize)),
    spec("keys", 2, R, Keys::None, "generic", "Returns keys matching a pattern.", Data(keys)),
    spec("scan", -2, R, Keys::None, "generic", "Iterates keys in key order.", Ctl(scan)),
    spec("flushdb", -1, W, Keys::All, "server", "Deletes every key.", Data(flushdb)),
    spec("flushall", -1, W, Keys::All, "server", "Deletes every key of every database.", Data(flushall)),
    spec(
        "cascade.range",
        -3,
        R,
        Keys::None,
        "cascade",
        "CASCADE.RANGE start end [LIMIT n]: string keys in [start, end) with values, in key order; '-' and '+' are unbounded.",
        Data(cascade_range),
    ),
];

fn del(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut n = 0;
    for k in c.args().skip(1) {
        if let Some(m) = tx.begin(k)? {
            tx.remove(k, &m)?;
            n += 1;
        }
    }
    reply::int(out, n);
    Ok(())
}

fn exists(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut n = 0;
    for k in c.args().skip(1) {
        n += i64::from(tx.meta(k)?.is_some());
    }
    reply::int(out, n);
    Ok(())
}

fn type_(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.meta(c.arg(1))?;
    reply::simple(out, m.map_or("none", |m| m.ty.name()));
    Ok(())
}

fn dbsize(tx: &mut Tx<'_>, _c: &Command, out: &mut Out) -> CmdResult<()> {
    reply::int(out, tx.key_count());
    Ok(())
}

/// Walks live keys (with metadata) after `from` (or from the first key starting with
/// `prefix`), keys starting with `prefix` only, examining at most `budget` entries.
/// Returns the last examined key if more keys follow.
fn walk(
    tx: &Tx<'_>,
    prefix: &[u8],
    from: Option<&[u8]>,
    budget: usize,
    mut f: impl FnMut(&[u8], &Meta),
) -> CmdResult<Option<Vec<u8>>> {
    let lo = match from {
        Some(k) => Bound::Excluded(meta_key(k)),
        None => Bound::Included(meta_key(prefix)),
    };
    let hi = Bound::Excluded(prefix_end(&meta_key(prefix)).unwrap_or_else(|| vec![NS_META + 1]));
    let mut last: Option<Vec<u8>> = None;
    for (examined, kv) in tx.range(lo, hi)?.enumerate() {
        let (k, v) = kv?;
        if examined == budget {
            return Ok(last);
        }
        let m = Meta::decode(&v)?;
        if !m.expired(tx.now()) {
            f(&k[1..], &m);
        }
        last = Some(k[1..].to_vec());
    }
    Ok(None)
}

fn keys(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let pat = c.arg(1);
    let prefix = glob::literal_prefix(pat);
    let mut found: Vec<Vec<u8>> = Vec::new();
    walk(tx, &prefix, None, usize::MAX, |k, _| {
        if glob::matches(pat, k, false) {
            found.push(k.to_vec());
        }
    })?;
    reply::bulk_array(out, found.iter().map(|k| &k[..]));
    Ok(())
}

fn scan(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let cursor: u64 = std::str::from_utf8(c.arg(1))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (mut pat, mut count, mut ty) = (None, 10usize, None);
    let mut i = 2;
    while i < c.len() {
        if i + 1 >= c.len() {
            return Err(CmdError::Syntax);
        }
        let (a, v) = (c.arg(i), c.arg(i + 1));
        if is(a, "match") {
            pat = Some(v);
        } else if is(a, "count") {
            count = usize::try_from(int_arg(v)?)
                .ok()
                .filter(|&n| n >= 1)
                .ok_or(CmdError::Syntax)?;
        } else if is(a, "type") {
            ty = Some(v);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let from = if cursor == 0 {
        None
    } else {
        Some(
            ctx.shared
                .store
                .cursors()
                .get(cursor)
                .ok_or_else(|| CmdError::err("invalid cursor"))?,
        )
    };
    let prefix = pat.map(glob::literal_prefix).unwrap_or_default();
    let mut found: Vec<Vec<u8>> = Vec::new();
    let tx = Tx::in_db(&ctx.shared.store, ctx.client.db);
    let last = walk(&tx, &prefix, from.as_deref(), count, |k, m| {
        let type_ok = ty.is_none_or(|t| t.eq_ignore_ascii_case(m.ty.name().as_bytes()));
        let pat_ok = pat.is_none_or(|p| glob::matches(p, k, false));
        if type_ok && pat_ok {
            found.push(k.to_vec());
        }
    })?;
    let next = match last {
        Some(k) => ctx.shared.store.cursors().put(k),
        None => 0,
    };
    reply::array_header(ctx.out, 2);
    reply::bulk(ctx.out, next.to_string().as_bytes());
    reply::bulk_array(ctx.out, found.iter().map(|k| &k[..]));
    Ok(())
}

fn flushdb(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if c.len() > 2 || (c.len() == 2 && !is(c.arg(1), "async") && !is(c.arg(1), "sync")) {
        return Err(CmdError::Syntax);
    }
    // The dispatcher holds every stripe lock; the commit deletes everything.
    tx.flush();
    reply::ok(out);
    Ok(())
}

fn flushall(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    flushdb(tx, c, out)?;
    tx.flush_all();
    Ok(())
}

fn cascade_range(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut limit = usize::MAX;
    match c.len() {
        3 => {}
        5 if is(c.arg(3), "limit") => {
            limit = usize::try_from(int_arg(c.arg(4))?)
                .map_err(|_| CmdError::err("LIMIT must not be negative"))?;
        }
        _ => return Err(CmdError::Syntax),
    }
    let (start, end) = (c.arg(1), c.arg(2));
    let lo = Bound::Included(meta_key(if start == b"-" { b"" } else { start }));
    let hi = Bound::Excluded(if end == b"+" {
        vec![NS_META + 1]
    } else {
        meta_key(end)
    });
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if limit > 0 {
        for kv in tx.range(lo, hi)? {
            let (k, v) = kv?;
            let m = Meta::decode(&v)?;
            if m.ty == Type::String && !m.expired(tx.now()) {
                pairs.push((k[1..].to_vec(), m.payload));
                if pairs.len() == limit {
                    break;
                }
            }
        }
    }
    reply::array_header(out, pairs.len() * 2);
    for (k, v) in &pairs {
        reply::bulk(out, k);
        reply::bulk(out, v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn del_exists_type_dbsize() {
        let mut k = Kit::new();
        k.ok(&["MSET", "a", "1", "b", "2"]);
        k.expect(&["HSET", "h", "f", "v"], ":1\r\n");
        k.expect(&["ZADD", "z", "1", "m"], ":1\r\n");
        k.expect(&["DBSIZE"], ":4\r\n");
        k.expect(&["EXISTS", "a", "a", "x"], ":2\r\n");
        k.expect(&["TYPE", "a"], "+string\r\n");
        k.expect(&["TYPE", "h"], "+hash\r\n");
        k.expect(&["TYPE", "z"], "+zset\r\n");
        k.expect(&["TYPE", "x"], "+none\r\n");
        k.expect(&["DEL", "a", "a", "h", "x"], ":2\r\n");
        k.expect(&["UNLINK", "z"], ":1\r\n");
        k.expect(&["DBSIZE"], ":1\r\n");
        k.expect(&["HGETALL", "h"], "*0\r\n");
        k.ok(&["FLUSHDB"]);
        k.expect(&["DBSIZE"], ":0\r\n");
        k.expect(&["FLUSHALL", "bad"], "-ERR syntax error\r\n");
    }

    #[test]
    fn keys_scan_and_range() {
        let mut k = Kit::new();
        for i in 0..25 {
            k.ok(&["SET", &format!("user:{i:02}"), "v"]);
        }
        k.ok(&["SET", "other", "x"]);
        k.expect(&["HSET", "user:h", "f", "v"], ":1\r\n");
        let keys = k.strings(&["KEYS", "user:1*"]);
        assert_eq!(keys.len(), 10);
        assert_eq!(keys[0], "user:10");
        // SCAN visits every key once, in key order.
        let mut seen = Vec::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, keys) = k.scan(&["SCAN", &cursor, "MATCH", "user:*", "COUNT", "7"]);
            seen.extend(keys);
            if next == "0" {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 26);
        assert!(seen.windows(2).all(|w| w[0] < w[1]));
        let (_, hashes) = k.scan(&["SCAN", "0", "TYPE", "hash", "COUNT", "100"]);
        assert_eq!(hashes, vec!["user:h".to_string()]);
        k.expect(&["SCAN", "12345"], "-ERR invalid cursor\r\n");
        k.expect(&["SCAN", "0", "COUNT", "0"], "-ERR syntax error\r\n");
        k.expect(&["SCAN", "0", "COUNT"], "-ERR syntax error\r\n");
        k.expect(
            &["CASCADE.RANGE", "user:00", "user:02"],
            "*4\r\n$7\r\nuser:00\r\n$1\r\nv\r\n$7\r\nuser:01\r\n$1\r\nv\r\n",
        );
        k.expect(
            &["CASCADE.RANGE", "-", "+", "LIMIT", "1"],
            "*2\r\n$5\r\nother\r\n$1\r\nx\r\n",
        );
        k.expect(
            &["CASCADE.RANGE", "-", "+", "LIMIT", "-1"],
            "-ERR LIMIT must not be negative\r\n",
        );
    }
}
