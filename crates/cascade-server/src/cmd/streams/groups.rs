//! Consumer-group management and acknowledgement: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER, HELP), XACK and XPENDING. Groups, pending entries
//! and consumers live in namespaces `0x09`–`0x0B` (`layout.rs`). XGROUP DESTROY
//! rewrites the stream's header so that clients parked in XREADGROUP on it are woken
//! (and answer NOGROUP). No shared state.

use super::id::{self, StreamId};
use super::layout::{self, Group};
use crate::cmd::{arity_error, int_arg, is, unknown_subcommand};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// `NOGROUP No such consumer group 'g' for key name 'k'`.
pub(crate) fn nogroup_for_key(group: &[u8], key: &[u8]) -> CmdError {
    CmdError::Msg(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// `NOGROUP No such key 'k' or consumer group 'g'`.
pub(crate) fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

const HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Print this help.",
];

/// XGROUP subcommand ...
#[expect(
    clippy::too_many_lines,
    reason = "Redis's checks in Redis's order, then one arm per subcommand"
)]
pub(crate) fn xgroup(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let sub = c.arg(1).to_ascii_lowercase();
    let sub = String::from_utf8_lossy(&sub).into_owned();
    let (min, max) = match sub.as_str() {
        "help" => (2, 2),
        "create" => (5, 8),
        "setid" => (5, 7),
        "destroy" => (4, 4),
        "createconsumer" | "delconsumer" => (5, 5),
        _ => return Err(unknown_subcommand(c.arg(1), "xgroup")),
    };
    if c.len() < min || (c.len() > max && sub != "create" && sub != "setid") {
        return Err(CmdError::Msg(arity_error(&format!("xgroup|{sub}"))));
    }
    if sub == "help" {
        reply::bulk_array(out, HELP.iter().map(|l| l.as_bytes()));
        return Ok(());
    }
    let (key, gname) = (c.arg(2), c.arg(3));
    let syntax = || {
        CmdError::err(format!(
            "unknown subcommand or wrong number of arguments for '{sub}'. Try XGROUP HELP."
        ))
    };
    let mut mkstream = false;
    let mut entries_read: Option<u64> = None;
    let mut i = 5;
    while i < c.len() {
        if sub == "create" && is(c.arg(i), "mkstream") {
            mkstream = true;
            i += 1;
        } else if (sub == "create" || sub == "setid")
            && is(c.arg(i), "entriesread")
            && i + 1 < c.len()
        {
            let n = int_arg(c.arg(i + 1))?;
            if n < -1 {
                return Err(CmdError::err(
                    "value for ENTRIESREAD must be positive or -1",
                ));
            }
            entries_read = u64::try_from(n).ok();
            i += 2;
        } else {
            return Err(syntax());
        }
    }
    if c.len() > max || (sub == "setid" && c.len() == 6) {
        return Err(syntax());
    }
    let s = layout::begin(tx, key)?;
    if s.is_none() && !mkstream {
        return Err(CmdError::err(
            "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
        ));
    }
    let group = match &s {
        Some(_) => layout::get_group(tx, key, gname)?,
        None => None,
    };
    if group.is_none() && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer") {
        return Err(nogroup_for_key(gname, key));
    }
    let info = s.as_ref().map(|s| s.info).unwrap_or_default();
    match sub.as_str() {
        "create" => {
            let last = if c.arg(4) == b"$" {
                info.last
            } else {
                id::strict(c.arg(4))?
            };
            if group.is_some() {
                return Err(CmdError::Msg(
                    "BUSYGROUP Consumer Group name already exists".into(),
                ));
            }
            if s.is_none() {
                layout::save(tx, key, None, &info);
            }
            layout::put_group(tx, key, gname, &Group { last, entries_read });
            reply::ok(out);
        }
        "setid" => {
            let last = if c.arg(4) == b"$" {
                info.last
            } else {
                id::parse_id(c.arg(4), 0, false)?
            };
            layout::put_group(tx, key, gname, &Group { last, entries_read });
            reply::ok(out);
        }
        "destroy" => {
            if group.is_some() {
                layout::del_group(tx, key, gname)?;
                // A change of the key: parked XREADGROUP clients wake and see NOGROUP.
                layout::save(tx, key, s.as_ref(), &info);
                reply::int(out, 1);
            } else {
                reply::int(out, 0);
            }
        }
        "createconsumer" => {
            let name = c.arg(4);
            if layout::has_consumer(tx, key, gname, name)? {
                reply::int(out, 0);
            } else {
                layout::touch_consumer(tx, key, gname, name, tx.now());
                reply::int(out, 1);
            }
        }
        _ => {
            let name = c.arg(4);
            let n = if layout::has_consumer(tx, key, gname, name)? {
                layout::del_consumer(tx, key, gname, name)?
            } else {
                0
            };
            reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    Ok(())
}

/// XACK key group id [id ...]
pub(crate) fn xack(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (key, gname) = (c.arg(1), c.arg(2));
    let group = match layout::load(tx, key)? {
        Some(_) => layout::get_group(tx, key, gname)?,
        None => None,
    };
    if group.is_none() {
        reply::int(out, 0);
        return Ok(());
    }
    let ids = (3..c.len())
        .map(|i| id::strict(c.arg(i)))
        .collect::<CmdResult<Vec<_>>>()?;
    let mut acked = 0i64;
    for id in ids {
        if let Some(nack) = layout::get_nack(tx, key, gname, id)? {
            layout::del_nack(tx, key, gname, id, &nack);
            acked += 1;
        }
    }
    reply::int(out, acked);
    Ok(())
}

/// XPENDING key group [[IDLE min-idle] start end count [consumer]]
pub(crate) fn xpending(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (key, gname) = (c.arg(1), c.arg(2));
    let summary = c.len() == 3;
    if !summary && !(6..=9).contains(&c.len()) {
        return Err(CmdError::Syntax);
    }
    let (mut start, mut end, mut count, mut min_idle, mut consumer) =
        (StreamId::MIN, StreamId::MAX, 0usize, 0i64, None);
    if !summary {
        let mut at = 3;
        if is(c.arg(3), "idle") {
            min_idle = int_arg(c.arg(4))?;
            if c.len() < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        count = usize::try_from(int_arg(c.arg(at + 2))?.max(0)).unwrap_or(usize::MAX);
        start = id::range_start(c.arg(at))?;
        end = id::range_end(c.arg(at + 1))?;
        if at + 3 < c.len() {
            consumer = Some(c.arg(at + 3));
        }
    }
    let group = match layout::load(tx, key)? {
        Some(_) => layout::get_group(tx, key, gname)?,
        None => None,
    };
    if group.is_none() {
        return Err(nogroup(key, gname));
    }
    let now = tx.now();
    if summary {
        let all = layout::pel_range(tx, key, gname, StreamId::MIN, StreamId::MAX, 0)?;
        reply::array_header(out, 4);
        reply::int(out, i64::try_from(all.len()).unwrap_or(i64::MAX));
        let (Some((a, _)), Some((b, _))) = (all.first(), all.last()) else {
            reply::nil(out);
            reply::nil(out);
            reply::nil_array(out);
            return Ok(());
        };
        reply::bulk(out, a.fmt().as_bytes());
        reply::bulk(out, b.fmt().as_bytes());
        let owners: Vec<_> = layout::consumers(tx, key, gname)?
            .into_iter()
            .filter(|c| c.pending > 0)
            .collect();
        reply::array_header(out, owners.len());
        for o in owners {
            reply::array_header(out, 2);
            reply::bulk(out, &o.name);
            reply::bulk(out, o.pending.to_string().as_bytes());
        }
        return Ok(());
    }
    if count == 0 {
        reply::array_header(out, 0);
        return Ok(());
    }
    let entries: Vec<(StreamId, layout::Nack)> = match consumer {
        Some(name) => {
            let ids = layout::consumer_pel(tx, key, gname, name, start, end, 0)?;
            let mut v = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(n) = layout::get_nack(tx, key, gname, id)? {
                    v.push((id, n));
                }
            }
            v
        }
        None => layout::pel_range(tx, key, gname, start, end, 0)?,
    };
    let idle_of = |t: u64| i64::try_from(now.saturating_sub(t)).unwrap_or(i64::MAX);
    let shown: Vec<_> = entries
        .into_iter()
        .filter(|(_, n)| min_idle <= 0 || idle_of(n.time) >= min_idle)
        .take(count)
        .collect();
    reply::array_header(out, shown.len());
    for (id, n) in shown {
        reply::array_header(out, 4);
        reply::bulk(out, id.fmt().as_bytes());
        reply::bulk(out, &n.consumer);
        reply::int(out, idle_of(n.time));
        reply::int(out, i64::try_from(n.count).unwrap_or(i64::MAX));
    }
    Ok(())
}
