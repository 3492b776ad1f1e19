//! More keyspace commands: `RENAME RENAMENX COPY RANDOMKEY EXPIRETIME PEXPIRETIME
//! OBJECT`. RENAME and COPY move or copy every element entry of the key: O(N) for a
//! collection of N elements, in one atomic batch. RANDOMKEY reads a keyspace of up to
//! 4096 keys whole and picks uniformly; above that it seeks to a random point of
//! namespace 1 (bounded work; keys are not equally likely). OBJECT reports what means
//! something here: the type's single encoding, refcount 1, idle time 0.

use std::ops::Bound;

use crate::cmd::{is, spec, unknown_subcommand, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sub_prefix, Meta, Type, NS_META};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "rename",
        3,
        W,
        Keys::Range(1, 2, 1),
        "generic",
        "Renames a key.",
        Data(rename),
    ),
    spec(
        "renamenx",
        3,
        W,
        Keys::Range(1, 2, 1),
        "generic",
        "Renames a key if the new name is free.",
        Data(renamenx),
    ),
    spec(
        "copy",
        -3,
        W,
        Keys::Range(1, 2, 1),
        "generic",
        "Copies a key.",
        Data(copy),
    ),
    spec(
        "randomkey",
        1,
        R,
        Keys::None,
        "generic",
        "A random key.",
        Data(randomkey),
    ),
    spec(
        "expiretime",
        2,
        R,
        KEY1,
        "generic",
        "Absolute expiry in Unix seconds.",
        Data(expiretime),
    ),
    spec(
        "pexpiretime",
        2,
        R,
        KEY1,
        "generic",
        "Absolute expiry in Unix milliseconds.",
        Data(pexpiretime),
    ),
    spec(
        "object",
        -2,
        R,
        Keys::Range(2, 2, 1),
        "generic",
        "OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key.",
        Data(object),
    ),
    spec(
        "memory",
        -2,
        R,
        Keys::Range(2, 2, 1),
        "server",
        "MEMORY USAGE key: an estimate of the bytes the key takes.",
        Data(memory),
    ),
];

/// The element entries of `src` (metadata `m`), keyed as `dst`'s.
fn entries_as(tx: &Tx<'_>, src: &[u8], dst: &[u8], m: &Meta) -> CmdResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    for &ns in m.ty.spaces() {
        let from = sub_prefix(ns, src);
        let to = sub_prefix(ns, dst);
        for (k, v) in tx.prefix_scan(&from, usize::MAX)? {
            let mut nk = to.clone();
            nk.extend_from_slice(&k[from.len()..]);
            out.push((nk, v));
        }
    }
    Ok(out)
}

/// Writes a copy of `src` (metadata `m`) at `dst`, which the caller has cleared.
fn copy_entries(tx: &mut Tx<'_>, src: &[u8], dst: &[u8], m: &Meta) -> CmdResult<()> {
    for (k, v) in entries_as(tx, src, dst, m)? {
        tx.put(k, v);
    }
    tx.set_meta(dst, None, m);
    Ok(())
}

/// RENAME: returns false if `nx` and `dst` exists.
fn do_rename(tx: &mut Tx<'_>, c: &Command, nx: bool) -> CmdResult<bool> {
    let (src, dst) = (c.arg(1), c.arg(2));
    let Some(m) = tx.begin(src)? else {
        return Err(CmdError::err("no such key"));
    };
    if src == dst {
        return Ok(!nx);
    }
    if let Some(old) = tx.begin(dst)? {
        if nx {
            return Ok(false);
        }
        tx.remove(dst, &old)?;
    }
    copy_entries(tx, src, dst, &m)?;
    tx.remove(src, &m)?;
    Ok(true)
}

fn rename(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    do_rename(tx, c, false)?;
    reply::ok(out);
    Ok(())
}

fn renamenx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let done = do_rename(tx, c, true)?;
    reply::int(out, i64::from(done));
    Ok(())
}

/// COPY source destination [DB n] [REPLACE]. Into another database, the copy is
/// written there in the same batch (the transaction moves to that database for it and
/// back), and `copy_to` is raised there, as in Redis.
fn copy(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (src, dst) = (c.arg(1), c.arg(2));
    let here = tx.db();
    let mut to_db = here;
    let mut replace = false;
    let mut i = 3;
    while i < c.len() {
        if is(c.arg(i), "replace") {
            replace = true;
            i += 1;
        } else if is(c.arg(i), "db") && i + 1 < c.len() {
            let n = crate::cmd::int_arg(c.arg(i + 1))?;
            to_db = usize::try_from(n)
                .ok()
                .filter(|&n| n < tx.store().dbs().count())
                .ok_or_else(|| CmdError::err("DB index is out of range"))?;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if to_db != here && tx.store().cluster_mode() {
        return Err(CmdError::err(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    let Some(m) = tx.begin(src)? else {
        reply::int(out, 0);
        return Ok(());
    };
    if src == dst && to_db == here {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    if to_db == here {
        if let Some(old) = tx.begin(dst)? {
            if !replace {
                reply::int(out, 0);
                return Ok(());
            }
            tx.remove(dst, &old)?;
        }
        copy_entries(tx, src, dst, &m)?;
        reply::int(out, 1);
        return Ok(());
    }
    // Read here, write there.
    let entries = entries_as(tx, src, dst, &m)?;
    tx.switch_db(to_db);
    let copied = copy_there(tx, dst, &m, entries, replace);
    tx.switch_db(here);
    let copied = copied?;
    reply::int(out, i64::from(copied));
    Ok(())
}

/// COPY's write into the other database, which `tx` is on: false if `dst` exists
/// there and `replace` is off.
fn copy_there(
    tx: &mut Tx<'_>,
    dst: &[u8],
    m: &Meta,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    replace: bool,
) -> CmdResult<bool> {
    if let Some(old) = tx.begin(dst)? {
        if !replace {
            return Ok(false);
        }
        tx.remove(dst, &old)?;
    }
    for (k, v) in entries {
        tx.put(k, v);
    }
    tx.set_meta(dst, None, m);
    // Its event belongs to this database: raised here, not by `events::record`
    // after the handler (which names the client's database).
    tx.forget_changes_of(dst);
    tx.event(crate::pubsub::class::GENERIC, "copy_to", dst);
    Ok(true)
}

fn randomkey(tx: &mut Tx<'_>, _c: &Command, out: &mut Out) -> CmdResult<()> {
    let end = Bound::Excluded(vec![NS_META + 1]);
    if u64::try_from(tx.key_count()).unwrap_or(u64::MAX) <= crate::cmd::sets::SAMPLE_ALL {
        // A small keyspace is read whole: every live key is equally likely (a random
        // seek favours keys after wide gaps in the key order).
        let mut live = Vec::new();
        for kv in tx.range(Bound::Included(vec![NS_META]), end)? {
            let (k, v) = kv?;
            if !Meta::decode(&v)?.expired(tx.now()) {
                live.push(k);
            }
        }
        let pick = (!live.is_empty()).then(|| &live[crate::hash::random_below(live.len())][1..]);
        reply::opt_bulk(out, pick);
        return Ok(());
    }
    let mut seek = vec![NS_META];
    seek.extend_from_slice(&crate::hash::random_u64().to_be_bytes());
    let mut found = None;
    for lo in [Bound::Included(seek), Bound::Included(vec![NS_META])] {
        for kv in tx.range(lo, end.clone())? {
            let (k, v) = kv?;
            if !Meta::decode(&v)?.expired(tx.now()) {
                found = Some(k[1..].to_vec());
                break;
            }
        }
        if found.is_some() {
            break;
        }
    }
    reply::opt_bulk(out, found.as_deref());
    Ok(())
}

fn expire_time(tx: &Tx<'_>, key: &[u8]) -> CmdResult<i64> {
    Ok(match tx.meta(key)? {
        None => -2,
        Some(m) => m
            .expire_at
            .map_or(-1, |t| i64::try_from(t).unwrap_or(i64::MAX)),
    })
}

fn expiretime(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let t = expire_time(tx, c.arg(1))?;
    reply::int(out, if t < 0 { t } else { t / 1000 });
    Ok(())
}

fn pexpiretime(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let t = expire_time(tx, c.arg(1))?;
    reply::int(out, t);
    Ok(())
}

fn object(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "help") {
        let lines: &[&[u8]] = &[
            b"OBJECT <subcommand> [<arg> ...]. Subcommands are:",
            b"ENCODING <key>",
            b"FREQ <key>",
            b"IDLETIME <key>",
            b"REFCOUNT <key>",
        ];
        reply::bulk_array(out, lines.iter().copied());
        return Ok(());
    }
    if c.len() != 3 {
        return Err(unknown_subcommand(sub, "object"));
    }
    let m = tx.meta(c.arg(2))?;
    let Some(m) = m else {
        reply::nil(out);
        return Ok(());
    };
    if is(sub, "encoding") {
        let enc = match m.ty {
            Type::String if crate::cmd::parse_i64(&m.payload).is_some() => "int",
            Type::String => "raw",
            Type::Hash | Type::Set => "hashtable",
            Type::ZSet => "skiplist",
            Type::List => "quicklist",
            Type::Stream => "stream",
        };
        reply::bulk(out, enc.as_bytes());
    } else if is(sub, "refcount") {
        reply::int(out, 1);
    } else if is(sub, "idletime") {
        let idle = tx.store().access().idle(tx.db(), c.arg(2));
        reply::int(out, i64::try_from(idle).unwrap_or(i64::MAX));
    } else if is(sub, "freq") {
        // Access frequencies exist only under an LFU eviction policy, which a
        // persistent store has no use for (it does not evict).
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    } else {
        return Err(unknown_subcommand(sub, "object"));
    }
    Ok(())
}

/// MEMORY USAGE: key and value bytes plus the metadata, or 48 bytes per element of a
/// collection (an estimate: the engine shares blocks and indexes between keys).
fn memory(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if is(c.arg(1), "help") && c.len() == 2 {
        let lines: &[&[u8]] = &[
            b"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"USAGE <key> [SAMPLES <count>]",
            b"    Return memory in bytes used by <key> and its value.",
            b"HELP",
            b"    Print this help.",
        ];
        reply::bulk_array(out, lines.iter().copied());
        return Ok(());
    }
    if !is(c.arg(1), "usage") || c.len() < 3 {
        return Err(unknown_subcommand(c.arg(1), "memory"));
    }
    match tx.meta(c.arg(2))? {
        None => reply::nil(out),
        Some(m) => {
            let base = c.arg(2).len() + m.payload.len() + 16;
            let per = usize::try_from(m.count()).unwrap_or(0).saturating_mul(48);
            let n = if m.ty == Type::String {
                base
            } else {
                base + per
            };
            reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn rename_copy_random() {
        let mut k = Kit::new();
        k.expect(&["RENAME", "a", "b"], "-ERR no such key\r\n");
        k.int(&["RPUSH", "l", "1", "2"]);
        k.ok(&["SET", "s", "x", "EX", "100"]);
        k.ok(&["RENAME", "l", "m"]);
        k.expect(&["LRANGE", "m", "0", "-1"], "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        k.expect(&["EXISTS", "l"], ":0\r\n");
        k.expect(&["RENAMENX", "s", "m"], ":0\r\n");
        k.expect(&["RENAMENX", "s", "t"], ":1\r\n");
        k.expect(&["TTL", "t"], ":100\r\n");
        k.expect(&["COPY", "m", "n"], ":1\r\n");
        k.expect(&["COPY", "m", "n"], ":0\r\n");
        k.expect(&["COPY", "t", "n", "REPLACE"], ":1\r\n");
        k.expect(&["GET", "n"], "$1\r\nx\r\n");
        k.expect(&["DBSIZE"], ":3\r\n");
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.extend(k.strings(&["RANDOMKEY"]));
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        let t = k.int(&["EXPIRETIME", "t"]);
        assert!(t > 1_600_000_000);
        k.expect(&["PEXPIRETIME", "m"], ":-1\r\n");
        k.expect(&["EXPIRETIME", "zz"], ":-2\r\n");
        k.expect(&["OBJECT", "ENCODING", "m"], "$9\r\nquicklist\r\n");
        k.expect(&["OBJECT", "REFCOUNT", "m"], ":1\r\n");
        k.expect(&["OBJECT", "ENCODING", "zz"], "$-1\r\n");
        assert!(k.int(&["MEMORY", "USAGE", "m"]) > 0);
        k.ok(&["FLUSHDB"]);
        k.expect(&["RANDOMKEY"], "$-1\r\n");
    }
}
