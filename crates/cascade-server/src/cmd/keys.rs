//! Keyspace commands: `DEL UNLINK EXISTS TYPE DBSIZE KEYS SCAN FLUSHDB FLUSHALL` and
//! the native ordered range `CASCADE.RANGE`.
//!
//! `SCAN` walks keys in key order (a range scan of namespace 1). Redis cursors are
//! integers, so the server keeps a table from cursor numbers to the last key returned;
//! a cursor is valid until 100 000 newer cursors or 64 MiB of newer cursor keys
//! displace it, or the server restarts (then `SCAN` answers `ERR invalid cursor`).
//! Every key that exists for the whole scan is returned exactly once.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Bound;

use parking_lot::Mutex;

use super::{int_arg, is, spec, Ctx, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::glob;
use crate::keyspace::{meta_key, now_ms, prefix_end, Meta, NS_META};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Txn;

/// The keyspace commands.
pub static SPECS: &[Spec] = &[
    spec("del", -2, W, (1, -1, 1), "generic", "Deletes keys.", del),
    spec("unlink", -2, W, (1, -1, 1), "generic", "Deletes keys.", del),
    spec("exists", -2, R, (1, -1, 1), "generic", "Counts existing keys.", exists),
    spec("type", 2, R, KEY1, "generic", "Returns the type of a key.", type_),
    spec("dbsize", 1, R, (0, 0, 0), "server", "Returns the number of keys.", dbsize),
    spec("keys", 2, R, (0, 0, 0), "generic", "Returns keys matching a pattern.", keys),
    spec("scan", -2, R, (0, 0, 0), "generic", "Iterates keys in key order.", scan),
    spec("flushdb", -1, W, (0, 0, 0), "server", "Deletes every key.", flushdb),
    spec("flushall", -1, W, (0, 0, 0), "server", "Deletes every key.", flushdb),
    spec(
        "cascade.range",
        -3,
        R,
        (1, 2, 1),
        "cascade",
        "CASCADE.RANGE start end [LIMIT n]: string keys in [start, end) with values, in key order; '-' and '+' are unbounded.",
        cascade_range,
    ),
];

const MAX_CURSORS: usize = 100_000;
const MAX_CURSOR_BYTES: usize = 64 << 20;

/// SCAN cursors: number → the last key returned.
#[derive(Debug, Default)]
pub struct Cursors {
    inner: Mutex<CursorInner>,
}

#[derive(Debug, Default)]
struct CursorInner {
    next: u64,
    map: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Cursors {
    /// A table whose cursor numbers start at a value derived from `seed`, so cursors
    /// of a previous server run are (almost certainly) not valid in this one.
    pub fn new(seed: u64) -> Cursors {
        let c = Cursors::default();
        c.inner.lock().next = (seed % (1 << 40)).max(1) << 16;
        c
    }

    fn put(&self, key: Vec<u8>) -> u64 {
        let mut g = self.inner.lock();
        g.next += 1;
        let id = g.next;
        g.bytes += key.len();
        g.map.insert(id, key);
        g.order.push_back(id);
        while g.order.len() > MAX_CURSORS || g.bytes > MAX_CURSOR_BYTES {
            let Some(old) = g.order.pop_front() else {
                break;
            };
            if let Some(k) = g.map.remove(&old) {
                g.bytes -= k.len();
            }
        }
        id
    }

    fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.inner.lock().map.get(&id).cloned()
    }
}

fn del(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let keys: Vec<&[u8]> = {
        let mut seen = HashSet::new();
        c.args().skip(1).filter(|k| seen.insert(*k)).collect()
    };
    let store = &ctx.shared.store;
    let _g = store.lock_many(keys.iter().copied());
    let mut txn = Txn::default();
    let mut n = 0;
    for k in keys {
        if let Some(m) = store.begin(&mut txn, k)? {
            store.remove(&mut txn, k, &m)?;
            n += 1;
        }
    }
    store.commit(txn)?;
    reply::int(ctx.out, n);
    Ok(())
}

fn exists(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let mut n = 0;
    for k in c.args().skip(1) {
        n += i64::from(ctx.shared.store.meta(k)?.is_some());
    }
    reply::int(ctx.out, n);
    Ok(())
}

fn type_(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let m = ctx.shared.store.meta(c.arg(1))?;
    reply::simple(ctx.out, m.map_or("none", |m| m.ty.name()));
    Ok(())
}

fn dbsize(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    reply::int(ctx.out, ctx.shared.store.key_count());
    Ok(())
}

/// Walks live keys (with metadata) after `from` (or from the first key starting with
/// `prefix`), keys starting with `prefix` only, examining at most `budget` entries.
/// Returns the last examined key if more keys follow.
fn walk(
    ctx: &Ctx<'_>,
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
    let now = now_ms();
    let mut last: Option<Vec<u8>> = None;
    for (examined, kv) in ctx.shared.store.db().iter_bounds(lo, hi)?.enumerate() {
        let (k, v) = kv?;
        if examined == budget {
            return Ok(last);
        }
        let m = Meta::decode(&v)?;
        if !m.expired(now) {
            f(&k[1..], &m);
        }
        last = Some(k[1..].to_vec());
    }
    Ok(None)
}

fn keys(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let pat = c.arg(1);
    let prefix = glob::literal_prefix(pat);
    let mut out: Vec<Vec<u8>> = Vec::new();
    walk(ctx, &prefix, None, usize::MAX, |k, _| {
        if glob::matches(pat, k, false) {
            out.push(k.to_vec());
        }
    })?;
    reply::bulk_array(ctx.out, out.iter().map(|k| &k[..]));
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
            let n = int_arg(v)?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = n as usize;
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
                .cursors
                .get(cursor)
                .ok_or_else(|| CmdError::err("invalid cursor"))?,
        )
    };
    let prefix = pat.map(glob::literal_prefix).unwrap_or_default();
    let mut found: Vec<Vec<u8>> = Vec::new();
    let last = walk(ctx, &prefix, from.as_deref(), count, |k, m| {
        let type_ok = ty.is_none_or(|t| t.eq_ignore_ascii_case(m.ty.name().as_bytes()));
        let pat_ok = pat.is_none_or(|p| glob::matches(p, k, false));
        if type_ok && pat_ok {
            found.push(k.to_vec());
        }
    })?;
    let next = match last {
        Some(k) => ctx.shared.cursors.put(k),
        None => 0,
    };
    reply::array_header(ctx.out, 2);
    reply::bulk(ctx.out, next.to_string().as_bytes());
    reply::bulk_array(ctx.out, found.iter().map(|k| &k[..]));
    Ok(())
}

fn flushdb(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    if c.len() > 2 || (c.len() == 2 && !is(c.arg(1), "async") && !is(c.arg(1), "sync")) {
        return Err(CmdError::Syntax);
    }
    ctx.shared.store.flush_all()?;
    reply::ok(ctx.out);
    Ok(())
}

fn cascade_range(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let mut limit = usize::MAX;
    match c.len() {
        3 => {}
        5 if is(c.arg(3), "limit") => {
            let n = int_arg(c.arg(4))?;
            if n < 0 {
                return Err(CmdError::err("LIMIT must not be negative"));
            }
            limit = n as usize;
        }
        _ => return Err(CmdError::Syntax),
    }
    let (s, e) = (c.arg(1), c.arg(2));
    let lo = Bound::Included(meta_key(if s == b"-" { b"" } else { s }));
    let hi = Bound::Excluded(if e == b"+" {
        vec![NS_META + 1]
    } else {
        meta_key(e)
    });
    let now = now_ms();
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    if limit > 0 {
        for kv in ctx.shared.store.db().iter_bounds(lo, hi)? {
            let (k, v) = kv?;
            let m = Meta::decode(&v)?;
            if m.ty == crate::keyspace::Type::String && !m.expired(now) {
                pairs.push((k[1..].to_vec(), m.payload));
                if pairs.len() == limit {
                    break;
                }
            }
        }
    }
    reply::array_header(ctx.out, pairs.len() * 2);
    for (k, v) in &pairs {
        reply::bulk(ctx.out, k);
        reply::bulk(ctx.out, v);
    }
    Ok(())
}
