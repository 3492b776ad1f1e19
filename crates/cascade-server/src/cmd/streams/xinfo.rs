//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO HELP, with
//! Redis 7.0's field names and order. `radix-tree-keys`/`-nodes` report the nodes
//! approximate trimming sees (`trim.rs`), as Redis reports its listpack nodes. No
//! shared state.

use std::sync::atomic::Ordering;

use super::groups::nogroup_for_key;
use super::id::StreamId;
use super::layout::{self, entry_ordinal, Stream};
use super::xread::lag;
use crate::cmd::{arity_error, int_arg, is, unknown_subcommand};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

const HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Print this help.",
];

fn n(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn id_field(out: &mut Out, name: &str, id: StreamId) {
    reply::bulk(out, name.as_bytes());
    reply::bulk(out, id.fmt().as_bytes());
}

fn int_field(out: &mut Out, name: &str, v: i64) {
    reply::bulk(out, name.as_bytes());
    reply::int(out, v);
}

fn opt_field(out: &mut Out, name: &str, v: Option<u64>) {
    reply::bulk(out, name.as_bytes());
    match v {
        Some(v) => reply::int(out, n(v)),
        None => reply::nil(out),
    }
}

/// XINFO subcommand key ...
pub(crate) fn xinfo(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let sub = String::from_utf8_lossy(&c.arg(1).to_ascii_lowercase()).into_owned();
    let ok = match sub.as_str() {
        "help" => c.len() == 2,
        "consumers" => c.len() == 4,
        "groups" => c.len() == 3,
        "stream" => c.len() >= 3,
        _ => return Err(unknown_subcommand(c.arg(1), "xinfo")),
    };
    if !ok {
        return Err(CmdError::Msg(arity_error(&format!("xinfo|{sub}"))));
    }
    if sub == "help" {
        reply::bulk_array(out, HELP.iter().map(|l| l.as_bytes()));
        return Ok(());
    }
    let key = c.arg(2);
    let Some(s) = layout::load(tx, key)? else {
        return Err(CmdError::err("no such key"));
    };
    match sub.as_str() {
        "consumers" => {
            let g = c.arg(3);
            if layout::get_group(tx, key, g)?.is_none() {
                return Err(nogroup_for_key(g, key));
            }
            let now = tx.now();
            let list = layout::consumers(tx, key, g)?;
            reply::array_header(out, list.len());
            for cons in list {
                reply::map_header(out, 3);
                reply::bulk(out, b"name");
                reply::bulk(out, &cons.name);
                int_field(out, "pending", n(cons.pending));
                int_field(out, "idle", n(now.saturating_sub(cons.seen)));
            }
            Ok(())
        }
        "groups" => {
            let groups = layout::groups(tx, key)?;
            reply::array_header(out, groups.len());
            for (name, g) in groups {
                reply::map_header(out, 6);
                reply::bulk(out, b"name");
                reply::bulk(out, &name);
                int_field(
                    out,
                    "consumers",
                    n(layout::consumers(tx, key, &name)?.len() as u64),
                );
                int_field(out, "pending", n(layout::pel_count(tx, key, &name)?));
                id_field(out, "last-delivered-id", g.last);
                opt_field(out, "entries-read", g.entries_read);
                opt_field(out, "lag", lag(&s.info, &g));
            }
            Ok(())
        }
        _ => stream(tx, c, key, &s, out),
    }
}

/// The node count approximate trimming would see between the first and last entry.
fn nodes(tx: &Tx<'_>, key: &[u8]) -> CmdResult<u64> {
    let nm = crate::config::STREAM_NODE_MAX_ENTRIES
        .load(Ordering::Relaxed)
        .max(1);
    let first = layout::range(tx, key, StreamId::MIN, StreamId::MAX, false, 1)?;
    let last = layout::range(tx, key, StreamId::MIN, StreamId::MAX, true, 1)?;
    Ok(match (first.first(), last.first()) {
        (Some((_, a)), Some((_, b))) => {
            let (a, b) = (
                entry_ordinal(a).saturating_sub(1) / nm,
                entry_ordinal(b).saturating_sub(1) / nm,
            );
            b.saturating_sub(a) + 1
        }
        _ => 0,
    })
}

#[expect(
    clippy::too_many_lines,
    reason = "Redis's XINFO STREAM reply, field by field"
)]
fn stream(tx: &mut Tx<'_>, c: &Command, key: &[u8], s: &Stream, out: &mut Out) -> CmdResult<()> {
    let syntax = || {
        CmdError::err(
            "unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.",
        )
    };
    let opts = c.len() - 3;
    let full = opts > 0;
    let mut count: u64 = 10;
    if full {
        if (opts != 1 && opts != 3) || !is(c.arg(3), "full") {
            return Err(syntax());
        }
        if opts == 3 {
            if !is(c.arg(4), "count") {
                return Err(syntax());
            }
            count = u64::try_from(int_arg(c.arg(5))?).unwrap_or(10);
        }
    }
    let info = s.info;
    let keys = nodes(tx, key)?;
    reply::map_header(out, if full { 9 } else { 10 });
    int_field(out, "length", n(info.length));
    int_field(out, "radix-tree-keys", n(keys));
    int_field(out, "radix-tree-nodes", n(keys.saturating_mul(2).max(1)));
    id_field(out, "last-generated-id", info.last);
    id_field(out, "max-deleted-entry-id", info.max_deleted);
    int_field(out, "entries-added", n(info.added));
    id_field(out, "recorded-first-entry-id", info.first);
    let groups = layout::groups(tx, key)?;
    if !full {
        int_field(out, "groups", n(groups.len() as u64));
        for (name, rev) in [("first-entry", false), ("last-entry", true)] {
            reply::bulk(out, name.as_bytes());
            match layout::range(tx, key, StreamId::MIN, StreamId::MAX, rev, 1)?.first() {
                Some((id, v)) => layout::reply_entry(out, *id, v)?,
                None => reply::nil(out),
            }
        }
        return Ok(());
    }
    let limit = usize::try_from(count).unwrap_or(usize::MAX);
    reply::bulk(out, b"entries");
    let entries = layout::range(tx, key, StreamId::MIN, StreamId::MAX, false, limit)?;
    reply::array_header(out, entries.len());
    for (id, v) in &entries {
        layout::reply_entry(out, *id, v)?;
    }
    reply::bulk(out, b"groups");
    reply::array_header(out, groups.len());
    for (name, g) in groups {
        let pel = layout::pel_range(tx, key, &name, StreamId::MIN, StreamId::MAX, 0)?;
        reply::map_header(out, 7);
        reply::bulk(out, b"name");
        reply::bulk(out, &name);
        id_field(out, "last-delivered-id", g.last);
        opt_field(out, "entries-read", g.entries_read);
        opt_field(out, "lag", lag(&info, &g));
        int_field(out, "pel-count", n(pel.len() as u64));
        reply::bulk(out, b"pending");
        let shown = if limit == 0 {
            pel.len()
        } else {
            pel.len().min(limit)
        };
        reply::array_header(out, shown);
        for (id, nack) in pel.iter().take(shown) {
            reply::array_header(out, 4);
            reply::bulk(out, id.fmt().as_bytes());
            reply::bulk(out, &nack.consumer);
            reply::int(out, n(nack.time));
            reply::int(out, n(nack.count));
        }
        let consumers = layout::consumers(tx, key, &name)?;
        reply::bulk(out, b"consumers");
        reply::array_header(out, consumers.len());
        for cons in consumers {
            reply::map_header(out, 4);
            reply::bulk(out, b"name");
            reply::bulk(out, &cons.name);
            int_field(out, "seen-time", n(cons.seen));
            int_field(out, "pel-count", n(cons.pending));
            reply::bulk(out, b"pending");
            let ids = layout::consumer_pel(
                tx,
                key,
                &name,
                &cons.name,
                StreamId::MIN,
                StreamId::MAX,
                limit,
            )?;
            reply::array_header(out, ids.len());
            for id in ids {
                let nack = layout::get_nack(tx, key, &name, id)?;
                reply::array_header(out, 3);
                reply::bulk(out, id.fmt().as_bytes());
                reply::int(out, n(nack.as_ref().map_or(0, |x| x.time)));
                reply::int(out, n(nack.as_ref().map_or(0, |x| x.count)));
            }
        }
    }
    Ok(())
}
