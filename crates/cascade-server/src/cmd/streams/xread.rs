//! XREAD and XREADGROUP, blocking or not, and the consumer-group read counter
//! (`entries-read`, lag) they advance.
//!
//! Blocking uses the server's machinery for parked clients (`notify.rs`): a command
//! that finds nothing returns [`CmdError::Block`] and is run again whenever one of
//! its stream keys changes. XREAD's `$` means "the last id when the command was
//! issued", so a command with `$` parks as [`CmdError::BlockAs`] with each `$`
//! replaced by that id. A parked XREADGROUP whose key is deleted or changes type
//! answers Redis's `UNBLOCKED` error; one whose group is destroyed answers NOGROUP.
//! No shared state: the stripe locks of every named key are held.

use std::time::Duration;

use super::id::{self, StreamId};
use super::layout::{self, Group, Info, Nack};
use crate::cmd::{int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// What a stream is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// Entries after this id.
    After(StreamId),
    /// XREADGROUP `>`: entries never delivered to the group.
    New,
}

/// True if the stream has an XDEL tombstone at or after `start`.
pub(crate) fn has_tombstones(s: &Info, start: StreamId) -> bool {
    s.length > 0 && !s.max_deleted.is_zero() && s.first <= s.max_deleted && start <= s.max_deleted
}

/// The number of entries added before and including `id`, when it can be known.
pub(crate) fn estimate_read(s: &Info, id: StreamId) -> Option<u64> {
    if s.added == 0 {
        return Some(0);
    }
    if s.length == 0 && id <= s.last {
        return Some(s.added);
    }
    if id == s.last {
        return Some(s.added);
    } else if id > s.last {
        return None;
    }
    if s.max_deleted.is_zero() || s.max_deleted < s.first {
        if id < s.first {
            return Some(s.added - s.length);
        } else if id == s.first {
            return Some(s.added - s.length + 1);
        }
    }
    None
}

/// A group's lag (entries not yet delivered), when it can be known.
pub(crate) fn lag(s: &Info, g: &Group) -> Option<u64> {
    if s.added == 0 {
        return Some(0);
    }
    if let Some(read) = g.entries_read.filter(|_| !has_tombstones(s, g.last)) {
        return Some(s.added.saturating_sub(read));
    }
    estimate_read(s, g.last).map(|read| s.added.saturating_sub(read))
}

/// XREAD [COUNT n] [BLOCK ms] STREAMS key ... id ...
pub(crate) fn xread(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read(tx, c, out, false)
}

/// XREADGROUP GROUP g consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key ... id ...
pub(crate) fn xreadgroup(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    read(tx, c, out, true)
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::Msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass over Redis's argument order: options, then each stream"
)]
fn read(tx: &mut Tx<'_>, c: &Command, out: &mut Out, xgroup: bool) -> CmdResult<()> {
    let mut block: Option<f64> = None;
    let mut count = 0u64;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut noack = false;
    let mut at = 0;
    let mut i = 1;
    while i < c.len() {
        let more = c.len() - 1 - i;
        let opt = c.arg(i);
        if is(opt, "block") && more > 0 {
            let ms = super::timeout_ms(c.arg(i + 1))?;
            block = Some(Duration::from_millis(ms).as_secs_f64());
            i += 1;
        } else if is(opt, "count") && more > 0 {
            count = u64::try_from(int_arg(c.arg(i + 1))?).unwrap_or(0);
            i += 1;
        } else if is(opt, "streams") && more > 0 {
            at = i + 1;
            if !(c.len() - at).is_multiple_of(2) {
                return Err(CmdError::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            break;
        } else if is(opt, "group") && more >= 2 {
            if !xgroup {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((c.arg(i + 1), c.arg(i + 2)));
            i += 2;
        } else if is(opt, "noack") {
            if !xgroup {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if at == 0 {
        return Err(CmdError::Syntax);
    }
    if xgroup && group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }
    let nstreams = (c.len() - at) / 2;
    let retry = tx.retrying();
    // Resolve every stream and id first (errors in argument order, as Redis).
    let mut plan: Vec<(usize, Option<layout::Stream>, From, Option<Group>)> =
        Vec::with_capacity(nstreams);
    let mut rewrite: Option<Vec<Vec<u8>>> = None;
    for idx in 0..nstreams {
        let key = c.arg(at + idx);
        let id_arg = c.arg(at + nstreams + idx);
        let s = if retry && tx.skip_on_retry(key, Type::Stream)? {
            if group.is_some() {
                return Err(CmdError::Msg(
                    "UNBLOCKED the stream key no longer exists".into(),
                ));
            }
            None
        } else {
            layout::load(tx, key)?
        };
        let mut grp = None;
        if let Some((gname, _)) = group {
            if retry && s.is_none() {
                return Err(CmdError::Msg(
                    "UNBLOCKED the stream key no longer exists".into(),
                ));
            }
            grp = match &s {
                Some(_) => layout::get_group(tx, key, gname)?,
                None => None,
            };
            if grp.is_none() {
                return Err(nogroup(key, gname));
            }
        }
        let from = if id_arg == b"$" {
            if xgroup {
                return Err(CmdError::err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            let last = s.as_ref().map_or(StreamId::MIN, |s| s.info.last);
            let args = rewrite.get_or_insert_with(|| c.to_vecs());
            args[at + nstreams + idx] = last.fmt().into_bytes();
            From::After(last)
        } else if id_arg == b">" {
            if !xgroup {
                return Err(CmdError::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            From::New
        } else {
            From::After(id::strict(id_arg)?)
        };
        plan.push((at + idx, s, from, grp));
    }
    if block.is_some() && tx.must_queue() {
        return park(tx, block.unwrap_or(0.0), rewrite, out);
    }
    if retry && count == 0 {
        count = 1000;
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut body = Out {
        buf: Vec::new(),
        resp3: out.resp3,
    };
    let mut served = 0usize;
    let now = tx.now();
    for (ki, s, from, grp) in plan {
        let Some(s) = s else { continue };
        let key = c.arg(ki);
        match (group, grp) {
            (None, _) => {
                let From::After(gt) = from else { continue };
                let Some(start) = gt.incr() else { continue };
                let entries = layout::range(tx, key, start, StreamId::MAX, false, count)?;
                if entries.is_empty() {
                    continue;
                }
                open_stream(&mut body, key);
                reply::array_header(&mut body, entries.len());
                for (id, v) in &entries {
                    layout::reply_entry(&mut body, *id, v)?;
                }
            }
            (Some((gname, cname)), Some(mut grp)) => match from {
                From::After(gt) => {
                    layout::touch_consumer(tx, key, gname, cname, now);
                    open_stream(&mut body, key);
                    history(tx, key, gname, cname, gt, count, now, &mut body)?;
                }
                From::New => {
                    let Some(start) = grp.last.incr() else {
                        continue;
                    };
                    let entries = layout::range(tx, key, start, StreamId::MAX, false, count)?;
                    if entries.is_empty() {
                        continue;
                    }
                    layout::touch_consumer(tx, key, gname, cname, now);
                    open_stream(&mut body, key);
                    reply::array_header(&mut body, entries.len());
                    for (id, v) in &entries {
                        deliver(&s.info, &mut grp, *id);
                        layout::reply_entry(&mut body, *id, v)?;
                        if !noack {
                            let old = layout::get_nack(tx, key, gname, *id)?;
                            let pending = Nack {
                                time: now,
                                count: 1,
                                consumer: cname.to_vec(),
                            };
                            layout::put_nack(tx, key, gname, *id, &pending, old.as_ref());
                        }
                    }
                    layout::put_group(tx, key, gname, &grp);
                }
            },
            (Some(_), None) => continue,
        }
        served += 1;
    }
    if served > 0 {
        if out.resp3 {
            reply::map_header(out, served);
        } else {
            reply::array_header(out, served);
        }
        out.buf.extend_from_slice(&body.buf);
        return Ok(());
    }
    if let Some(secs) = block {
        return park(tx, secs, rewrite, out);
    }
    reply::nil_array(out);
    Ok(())
}

/// Parks the client (with `$` rewritten when there was one).
fn park(tx: &Tx<'_>, timeout: f64, rewrite: Option<Vec<Vec<u8>>>, out: &mut Out) -> CmdResult<()> {
    match (tx.block(timeout, out), rewrite) {
        (Err(CmdError::Block(t)), Some(args)) => Err(CmdError::BlockAs(t, args)),
        (r, _) => r,
    }
}

/// One stream's part of the reply: RESP2 `[key, entries]`, RESP3 a map key.
fn open_stream(body: &mut Out, key: &[u8]) {
    if !body.resp3 {
        reply::array_header(body, 2);
    }
    reply::bulk(body, key);
}

/// Advances a group's last id and read counter past a delivered entry.
fn deliver(s: &Info, g: &mut Group, id: StreamId) {
    if id <= g.last {
        return;
    }
    if g.entries_read.is_some() && !has_tombstones(s, id) {
        g.entries_read = g.entries_read.map(|n| n + 1);
    } else if s.added > 0 {
        g.entries_read = estimate_read(s, id);
    }
    g.last = id;
}

/// A consumer's own pending entries after `gt`: deleted ones as `[id, nil]`.
#[expect(clippy::too_many_arguments, reason = "the read's whole context")]
fn history(
    tx: &mut Tx<'_>,
    key: &[u8],
    gname: &[u8],
    cname: &[u8],
    gt: StreamId,
    count: usize,
    now: u64,
    body: &mut Out,
) -> CmdResult<()> {
    let Some(start) = gt.incr() else {
        reply::array_header(body, 0);
        return Ok(());
    };
    let ids = layout::consumer_pel(tx, key, gname, cname, start, StreamId::MAX, count)?;
    reply::array_header(body, ids.len());
    for id in ids {
        let Some(v) = layout::get_entry(tx, key, id)? else {
            reply::array_header(body, 2);
            reply::bulk(body, id.fmt().as_bytes());
            reply::nil_array(body);
            continue;
        };
        layout::reply_entry(body, id, &v)?;
        if let Some(mut nack) = layout::get_nack(tx, key, gname, id)? {
            let old = nack.clone();
            nack.time = now;
            nack.count += 1;
            layout::put_nack(tx, key, gname, id, &nack, Some(&old));
        }
    }
    Ok(())
}
