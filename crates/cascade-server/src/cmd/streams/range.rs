//! XRANGE and XREVRANGE: one range scan of the stream's `0x08` entries between two
//! ids (inclusive, or exclusive with `(`), at most COUNT. No shared state.

use super::id;
use super::layout;
use crate::cmd::{int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

fn range_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, rev: bool) -> CmdResult<()> {
    let (from, to) = if rev {
        (c.arg(3), c.arg(2))
    } else {
        (c.arg(2), c.arg(3))
    };
    let start = id::range_start(from)?;
    let end = id::range_end(to)?;
    let mut count: Option<i64> = None;
    let mut i = 4;
    while i < c.len() {
        if is(c.arg(i), "count") && i + 1 < c.len() {
            count = Some(int_arg(c.arg(i + 1))?.max(0));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(_) = layout::load(tx, c.arg(1))? else {
        reply::array_header(out, 0);
        return Ok(());
    };
    if count == Some(0) {
        reply::nil_array(out);
        return Ok(());
    }
    let n = count.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let entries = layout::range(tx, c.arg(1), start, end, rev, n)?;
    reply::array_header(out, entries.len());
    for (id, v) in &entries {
        layout::reply_entry(out, *id, v)?;
    }
    Ok(())
}

/// XRANGE key start end [COUNT n]
pub(crate) fn xrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, false)
}

/// XREVRANGE key end start [COUNT n]
pub(crate) fn xrevrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    range_cmd(tx, c, out, true)
}
