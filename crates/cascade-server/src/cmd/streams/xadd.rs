//! The commands that add, delete and count entries and move the last id: XADD, XLEN,
//! XDEL, XTRIM, XSETID. Each reads the header once, writes the entries it changes
//! and the new header in the command's one engine batch. No shared state.

use super::id::{self, Given, StreamId};
use super::layout::{self, entry_key, Info};
use super::trim;
use crate::cmd::{arity_error, int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The id a new entry gets, or Redis's error.
fn next_id(last: StreamId, given: Option<Given>, now: u64) -> CmdResult<StreamId> {
    let smaller = || {
        CmdError::err(
            "The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    match given {
        None => {
            if now > last.ms {
                Ok(StreamId::new(now, 0))
            } else {
                last.incr().ok_or_else(smaller)
            }
        }
        Some(Given::Full(id)) if id > last => Ok(id),
        Some(Given::AutoSeq(ms)) if ms > last.ms => Ok(StreamId::new(ms, 0)),
        Some(Given::AutoSeq(ms)) if ms == last.ms => last
            .seq
            .checked_add(1)
            .map(|seq| StreamId::new(ms, seq))
            .ok_or_else(smaller),
        Some(Given::Full(_) | Given::AutoSeq(_)) => Err(smaller()),
    }
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
pub(crate) fn xadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let args = trim::parse_args(c, true)?;
    let fields = args.id_at + 1;
    if c.len() < fields + 2 || (c.len() - fields) % 2 == 1 {
        return Err(CmdError::Msg(arity_error("xadd")));
    }
    if args.id == Some(Given::Full(StreamId::MIN)) {
        return Err(CmdError::err(
            "The ID specified in XADD must be greater than 0-0",
        ));
    }
    let old = layout::begin(tx, key)?;
    if old.is_none() && args.no_mkstream {
        reply::nil(out);
        return Ok(());
    }
    let mut info = old.as_ref().map(|s| s.info).unwrap_or_default();
    if info.last == StreamId::MAX {
        return Err(CmdError::err(
            "The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let id = next_id(info.last, args.id, tx.now())?;
    info.added += 1;
    let value = layout::encode_entry(info.added, (fields..c.len()).map(|i| c.arg(i)));
    tx.put(entry_key(key, id), value);
    if info.length == 0 {
        info.first = id;
    }
    info.length += 1;
    info.last = id;
    if let Some(t) = args.trim {
        trim::trim(tx, key, &mut info, &t)?;
    }
    layout::save(tx, key, old.as_ref(), &info);
    reply::bulk(out, id.fmt().as_bytes());
    Ok(())
}

/// XLEN key
pub(crate) fn xlen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let n = layout::load(tx, c.arg(1))?.map_or(0, |s| s.info.length);
    reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub(crate) fn xtrim(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let args = trim::parse_args(c, false)?;
    let Some(old) = layout::begin(tx, key)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut info = old.info;
    let removed = match args.trim {
        Some(t) => trim::trim(tx, key, &mut info, &t)?,
        None => 0,
    };
    if removed > 0 {
        layout::save(tx, key, Some(&old), &info);
    }
    reply::int(out, i64::try_from(removed).unwrap_or(i64::MAX));
    Ok(())
}

/// XDEL key id [id ...]
pub(crate) fn xdel(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let ids = (2..c.len())
        .map(|i| id::strict(c.arg(i)))
        .collect::<CmdResult<Vec<_>>>()?;
    let Some(old) = layout::begin(tx, key)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut info = old.info;
    let mut deleted = 0u64;
    let mut first_gone = false;
    for id in ids {
        let k = entry_key(key, id);
        if tx.contains(&k)? {
            tx.delete(k);
            deleted += 1;
            first_gone |= id == info.first;
            info.max_deleted = info.max_deleted.max(id);
        }
    }
    if deleted > 0 {
        info.length -= deleted.min(info.length);
        if info.length == 0 {
            info.first = StreamId::MIN;
        } else if first_gone {
            info.first = layout::edge_id(tx, key, false)?;
        }
        layout::save(tx, key, Some(&old), &info);
    }
    reply::int(out, i64::try_from(deleted).unwrap_or(i64::MAX));
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]
pub(crate) fn xsetid(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let id = id::strict(c.arg(2))?;
    let mut added: Option<u64> = None;
    let mut max_del = StreamId::MIN;
    let mut i = 3;
    while i < c.len() {
        let more = c.len() - 1 - i;
        if is(c.arg(i), "entriesadded") && more > 0 {
            let n = int_arg(c.arg(i + 1))?;
            added = Some(
                u64::try_from(n).map_err(|_| CmdError::err("entries_added must be positive"))?,
            );
        } else if is(c.arg(i), "maxdeletedid") && more > 0 {
            max_del = id::strict(c.arg(i + 1))?;
            if id < max_del {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let Some(old) = layout::begin(tx, key)? else {
        return Err(CmdError::err("no such key"));
    };
    let mut info: Info = old.info;
    if info.length > 0 {
        let top = layout::edge_id(tx, key, true)?;
        if id < top {
            return Err(CmdError::err(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if added.is_some_and(|a| info.length > a) {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    info.last = id;
    if let Some(a) = added {
        info.added = a;
    }
    if !max_del.is_zero() {
        info.max_deleted = max_del;
    }
    layout::save(tx, key, Some(&old), &info);
    reply::ok(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_generated_as_redis_does() {
        let last = StreamId::new(10, 5);
        assert_eq!(next_id(last, None, 20).expect("ok"), StreamId::new(20, 0));
        assert_eq!(next_id(last, None, 3).expect("ok"), StreamId::new(10, 6));
        assert_eq!(
            next_id(StreamId::new(10, u64::MAX), None, 3).expect("ok"),
            StreamId::new(11, 0)
        );
        assert_eq!(
            next_id(last, Some(Given::AutoSeq(10)), 0).expect("ok"),
            StreamId::new(10, 6)
        );
        assert_eq!(
            next_id(last, Some(Given::AutoSeq(11)), 0).expect("ok"),
            StreamId::new(11, 0)
        );
        assert!(next_id(last, Some(Given::AutoSeq(9)), 0).is_err());
        assert!(next_id(last, Some(Given::Full(last)), 0).is_err());
        assert!(next_id(StreamId::new(1, u64::MAX), Some(Given::AutoSeq(1)), 0).is_err());
    }
}
