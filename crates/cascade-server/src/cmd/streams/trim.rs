//! Stream trimming (XTRIM, and XADD's MAXLEN/MINID options): argument parsing with
//! Redis's error texts, exact trimming, and approximate (`~`) trimming that removes
//! only whole "nodes" as Redis removes whole radix-tree nodes.
//!
//! A node is the run of entries whose ordinal (entries-added when each was added,
//! stored in the entry) falls in one block of `stream-node-max-entries`
//! ([`crate::config::STREAM_NODE_MAX_ENTRIES`], read once per command): the entries
//! Redis would have appended to one listpack. So `MAXLEN ~ n` leaves the same
//! length as Redis does for a stream built by appends. No shared state beyond that
//! setting.

use std::sync::atomic::Ordering;

use super::id::{self, Given, StreamId};
use super::layout::{self, entry_key, entry_ordinal, Info};
use crate::cmd::{int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::store::Tx;

/// The trimming strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this id.
    MinId(StreamId),
}

/// A parsed trim request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trim {
    /// What to keep.
    pub(crate) strategy: Strategy,
    /// `~`: whole nodes only.
    pub(crate) approx: bool,
    /// Most entries removed (0: no limit).
    pub(crate) limit: u64,
}

/// XADD's or XTRIM's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AddArgs {
    /// The trim request, if any.
    pub(crate) trim: Option<Trim>,
    /// NOMKSTREAM.
    pub(crate) no_mkstream: bool,
    /// XADD: the id argument's position and its value (`None`: `*`).
    pub(crate) id_at: usize,
    /// The given id.
    pub(crate) id: Option<Given>,
}

fn node_max() -> u64 {
    crate::config::STREAM_NODE_MAX_ENTRIES.load(Ordering::Relaxed)
}

const BOTH: &str = "syntax error, MAXLEN and MINID options at the same time are not compatible";

/// Parses options from argument 2 on; for XADD up to and including the id.
pub(crate) fn parse_args(c: &Command, xadd: bool) -> CmdResult<AddArgs> {
    let mut strategy = None;
    let mut approx = false;
    let mut limit: Option<i64> = None;
    let mut no_mkstream = false;
    let mut id = None;
    let mut i = 2;
    while i < c.len() {
        let more = c.len() - 1 - i;
        let opt = c.arg(i);
        if xadd && opt == b"*" {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if strategy.is_some() {
                return Err(CmdError::err(BOTH));
            }
            approx = false;
            let next = c.arg(i + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                i += 1;
            }
            let val = c.arg(i + 1);
            strategy = Some(if is(opt, "maxlen") {
                let num = int_arg(val)?;
                let num = u64::try_from(num)
                    .map_err(|_| CmdError::err("The MAXLEN argument must be >= 0."))?;
                Strategy::MaxLen(num)
            } else {
                Strategy::MinId(id::strict(val)?)
            });
            i += 2;
            continue;
        } else if is(opt, "limit") && more > 0 {
            let num = int_arg(c.arg(i + 1))?;
            if num < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            limit = Some(num);
            i += 2;
            continue;
        } else if xadd && is(opt, "nomkstream") {
            no_mkstream = true;
        } else if xadd {
            id = Some(id::parse(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if limit.is_some_and(|l| l > 0) && strategy.is_none() {
        return Err(CmdError::err(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && strategy.is_none() {
        return Err(CmdError::err(
            "syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    let limit = match limit {
        Some(_) if !approx => {
            return Err(CmdError::err(
                "syntax error, LIMIT cannot be used without the special ~ option",
            ))
        }
        Some(l) => u64::try_from(l).unwrap_or(0),
        None if approx => match node_max().saturating_mul(100) {
            0 => 10_000,
            l => l.min(1_000_000),
        },
        None => 0,
    };
    Ok(AddArgs {
        trim: strategy.map(|strategy| Trim {
            strategy,
            approx,
            limit,
        }),
        no_mkstream,
        id_at: i,
        id,
    })
}

/// Trims the stream `key` (header `info`, updated in place). Returns entries removed.
pub(crate) fn trim(tx: &mut Tx<'_>, key: &[u8], info: &mut Info, req: &Trim) -> CmdResult<u64> {
    if info.length == 0 {
        return Ok(0);
    }
    let nm = node_max().max(1);
    // How far to look: every candidate entry, plus one node to see where it ends.
    let (hi, want) = match req.strategy {
        Strategy::MaxLen(len) if info.length <= len => return Ok(0),
        Strategy::MaxLen(len) => (StreamId::MAX, info.length - len),
        Strategy::MinId(m) if m.is_zero() => return Ok(0),
        Strategy::MinId(_) if req.approx => (StreamId::MAX, info.length),
        Strategy::MinId(m) => (m.decr().unwrap_or(StreamId::MIN), info.length),
    };
    let mut look = want;
    if req.limit > 0 {
        look = look.min(req.limit);
    }
    if req.approx {
        look = look.saturating_add(nm);
    }
    let look = usize::try_from(look).unwrap_or(usize::MAX);
    let entries = layout::range(tx, key, StreamId::MIN, hi, false, look)?;
    let keep = |id: StreamId, left: u64| match req.strategy {
        Strategy::MaxLen(len) => left <= len,
        Strategy::MinId(m) => id >= m,
    };
    let mut removed = 0u64;
    let mut i = 0;
    while i < entries.len() {
        if req.approx {
            // The node starting here: entries with the same ordinal block.
            let node = (entry_ordinal(&entries[i].1).saturating_sub(1)) / nm;
            let mut end = i;
            while end < entries.len()
                && (entry_ordinal(&entries[end].1).saturating_sub(1)) / nm == node
            {
                end += 1;
            }
            let len = (end - i) as u64;
            let left = info.length - removed;
            let stop = match req.strategy {
                Strategy::MaxLen(max) => left - len < max,
                Strategy::MinId(m) => entries[end - 1].0 >= m,
            };
            if stop || (req.limit > 0 && removed + len > req.limit) {
                break;
            }
            for (id, _) in &entries[i..end] {
                tx.delete(entry_key(key, *id));
            }
            removed += len;
            i = end;
        } else {
            let (id, _) = entries[i];
            if keep(id, info.length - removed) {
                break;
            }
            tx.delete(entry_key(key, id));
            removed += 1;
            i += 1;
        }
    }
    if removed > 0 {
        info.length -= removed;
        info.first = match entries.get(i) {
            _ if info.length == 0 => StreamId::MIN,
            Some((id, _)) => *id,
            None => layout::edge_id(tx, key, false)?,
        };
    }
    Ok(removed)
}
