//! SSCAN, HSCAN and ZSCAN: walk one collection's elements in byte order, `COUNT` at a
//! time. The cursor number maps to the last element returned (the cursor table in
//! `cursors.rs`, shared with SCAN), so every element present for the whole iteration
//! is returned exactly once. Control handlers: they use the cursor table, and take the
//! key's stripe lock themselves for the read.

use std::ops::Bound;

use crate::cmd::{int_arg, is, Ctx};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{prefix_end, sub_prefix, Type, NS_HASH, NS_SET, NS_ZMEMBER};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Tx;

/// `XSCAN key cursor [MATCH pattern] [COUNT n]` over a collection of type `ty`.
#[expect(
    clippy::many_single_char_names,
    reason = "c, k, v, ty: the usual names in handlers"
)]
pub(crate) fn collection(ctx: &mut Ctx<'_>, c: &Command, ty: Type) -> CmdResult<()> {
    let key = c.arg(1);
    let cursor: u64 = std::str::from_utf8(c.arg(2))
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CmdError::err("invalid cursor"))?;
    let (mut pat, mut count) = (None, 10usize);
    let mut i = 3;
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
    let store = &ctx.shared.store;
    let _lock = store.lock_many([key]);
    let tx = Tx::in_db(store, ctx.client.db);
    let mut items: Vec<Vec<u8>> = Vec::new();
    let mut next = 0;
    if tx.typed(key, ty)?.is_some() {
        let ns = match ty {
            Type::Hash => NS_HASH,
            Type::ZSet => NS_ZMEMBER,
            _ => NS_SET,
        };
        let prefix = sub_prefix(ns, key);
        let lo = match &from {
            Some(last) => {
                let mut k = prefix.clone();
                k.extend_from_slice(last);
                Bound::Excluded(k)
            }
            None => Bound::Included(prefix.clone()),
        };
        let hi = prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded);
        let mut last = None;
        for (seen, kv) in tx.range(lo, hi)?.enumerate() {
            let (k, v) = kv?;
            if seen == count {
                if let Some(l) = last.take() {
                    next = ctx.shared.store.cursors().put(l);
                }
                break;
            }
            let elem = &k[prefix.len()..];
            if pat.is_none_or(|p| glob::matches(p, elem, false)) {
                items.push(elem.to_vec());
                match ty {
                    Type::Hash => items.push(v),
                    Type::ZSet => {
                        let s: [u8; 8] = v.as_slice().try_into().map_err(|_| {
                            CmdError::Engine("ERR corrupt zset score in the store".into())
                        })?;
                        let s = reply::format_double(f64::from_le_bytes(s));
                        items.push(s.into_bytes());
                    }
                    _ => {}
                }
            }
            last = Some(elem.to_vec());
        }
    }
    reply::array_header(ctx.out, 2);
    reply::bulk(ctx.out, next.to_string().as_bytes());
    reply::bulk_array(ctx.out, items.iter().map(Vec::as_slice));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn scans_visit_every_element_once() {
        let mut k = Kit::new();
        for i in 0..30 {
            k.int(&["SADD", "s", &format!("m{i:02}")]);
            k.int(&["HSET", "h", &format!("f{i:02}"), "v"]);
            k.int(&["ZADD", "z", &i.to_string(), &format!("z{i:02}")]);
        }
        for (cmd, key, per) in [("SSCAN", "s", 1), ("HSCAN", "h", 2), ("ZSCAN", "z", 2)] {
            let mut seen = Vec::new();
            let mut cursor = "0".to_string();
            loop {
                let (next, items) = k.scan(&[cmd, key, &cursor, "COUNT", "7"]);
                seen.extend(items);
                if next == "0" {
                    break;
                }
                cursor = next;
            }
            assert_eq!(seen.len(), 30 * per, "{cmd}");
        }
        let (_, m) = k.scan(&["SSCAN", "s", "0", "MATCH", "m1*", "COUNT", "100"]);
        assert_eq!(m.len(), 10);
        let (_, z) = k.scan(&["ZSCAN", "z", "0", "MATCH", "z03"]);
        assert_eq!(z, vec!["z03".to_string(), "3".to_string()]);
        k.expect(&["SSCAN", "nokey", "0"], "*2\r\n$1\r\n0\r\n*0\r\n");
        k.expect(&["SSCAN", "s", "x"], "-ERR invalid cursor\r\n");
        k.expect(
            &["HSCAN", "s", "0"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
    }
}
