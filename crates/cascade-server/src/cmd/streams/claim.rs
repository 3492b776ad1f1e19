//! XCLAIM and XAUTOCLAIM: moving pending entries to another consumer. An entry that
//! was deleted from the stream meanwhile is dropped from the pending list (XAUTOCLAIM
//! reports those ids, as Redis 7 does). No shared state.

use super::groups::nogroup;
use super::id::{self, StreamId};
use super::layout::{self, Nack};
use crate::cmd::{int_arg, is, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

fn int_or(arg: &[u8], msg: &str) -> CmdResult<i64> {
    parse_i64(arg).ok_or_else(|| CmdError::err(msg))
}

/// XCLAIM key group consumer min-idle id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]
#[expect(
    clippy::too_many_lines,
    reason = "Redis's option parsing and claim loop, in its order"
)]
pub(crate) fn xclaim(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (key, gname, cname) = (c.arg(1), c.arg(2), c.arg(3));
    let group = match layout::load(tx, key)? {
        Some(_) => layout::get_group(tx, key, gname)?,
        None => None,
    };
    let Some(mut group) = group else {
        return Err(nogroup(key, gname));
    };
    let min_idle = int_or(c.arg(4), "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < c.len() {
        match id::strict(c.arg(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = i64::try_from(tx.now()).unwrap_or(i64::MAX);
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < c.len() {
        let more = c.len() - 1 - j;
        let a = c.arg(j);
        if is(a, "force") {
            force = true;
        } else if is(a, "justid") {
            justid = true;
        } else if is(a, "idle") && more > 0 {
            j += 1;
            delivery = Some(now - int_or(c.arg(j), "Invalid IDLE option argument for XCLAIM")?);
        } else if is(a, "time") && more > 0 {
            j += 1;
            delivery = Some(int_or(c.arg(j), "Invalid TIME option argument for XCLAIM")?);
        } else if is(a, "retrycount") && more > 0 {
            j += 1;
            retry = Some(int_or(
                c.arg(j),
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(a, "lastid") && more > 0 {
            j += 1;
            last_id = id::strict(c.arg(j))?;
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(a)
            )));
        }
        j += 1;
    }
    if last_id > group.last {
        group.last = last_id;
        layout::put_group(tx, key, gname, &group);
    }
    let delivery = match delivery {
        Some(d) if d >= 0 && d <= now => d,
        _ => now,
    };
    let delivery = u64::try_from(delivery).unwrap_or(0);
    let mut body = Out {
        buf: Vec::new(),
        resp3: out.resp3,
    };
    let mut n = 0usize;
    let mut consumer_ready = false;
    for id in ids {
        let old = layout::get_nack(tx, key, gname, id)?;
        let Some(entry) = layout::get_entry(tx, key, id)? else {
            if let Some(o) = old {
                layout::del_nack(tx, key, gname, id, &o);
            }
            continue;
        };
        let (mut nack, had_owner) = match &old {
            Some(o) => (o.clone(), true),
            None if force => (
                Nack {
                    time: 0,
                    count: 1,
                    consumer: Vec::new(),
                },
                false,
            ),
            None => continue,
        };
        if had_owner && min_idle > 0 {
            let idle = now - i64::try_from(nack.time).unwrap_or(i64::MAX);
            if idle < min_idle {
                continue;
            }
        }
        if !consumer_ready {
            layout::touch_consumer(tx, key, gname, cname, tx.now());
            consumer_ready = true;
        }
        nack.time = delivery;
        match retry {
            Some(r) if r >= 0 => nack.count = u64::try_from(r).unwrap_or(0),
            _ if !justid => nack.count += 1,
            _ => {}
        }
        nack.consumer = cname.to_vec();
        layout::put_nack(tx, key, gname, id, &nack, old.as_ref());
        if justid {
            reply::bulk(&mut body, id.fmt().as_bytes());
        } else {
            layout::reply_entry(&mut body, id, &entry)?;
        }
        n += 1;
    }
    reply::array_header(out, n);
    out.buf.extend_from_slice(&body.buf);
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID]
pub(crate) fn xautoclaim(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (key, gname, cname) = (c.arg(1), c.arg(2), c.arg(3));
    let min_idle = int_or(c.arg(4), "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = id::range_start(c.arg(5))?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < c.len() {
        let more = c.len() - 1 - j;
        if is(c.arg(j), "count") && more > 0 {
            let max = i64::MAX / 16;
            count = int_arg(c.arg(j + 1))
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| CmdError::err("COUNT must be > 0"))?;
            j += 1;
        } else if is(c.arg(j), "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let group = match layout::load(tx, key)? {
        Some(_) => layout::get_group(tx, key, gname)?,
        None => None,
    };
    if group.is_none() {
        return Err(nogroup(key, gname));
    }
    let mut count = u64::try_from(count).unwrap_or(100);
    let mut attempts = count.saturating_mul(10);
    let now = tx.now();
    let mut body = Out {
        buf: Vec::new(),
        resp3: out.resp3,
    };
    let mut claimed = 0usize;
    let mut deleted = Vec::new();
    let mut consumer_ready = false;
    // Enough pending entries for every attempt, plus the next one (the cursor).
    let look = usize::try_from(attempts.saturating_add(1)).unwrap_or(usize::MAX);
    let pel = layout::pel_range(tx, key, gname, start, StreamId::MAX, look)?;
    let mut next = StreamId::MIN;
    let mut it = pel.into_iter();
    while attempts > 0 && count > 0 {
        let Some((id, nack)) = it.next() else { break };
        attempts -= 1;
        let Some(entry) = layout::get_entry(tx, key, id)? else {
            layout::del_nack(tx, key, gname, id, &nack);
            deleted.push(id);
            count -= 1;
            continue;
        };
        if min_idle > 0 && now.saturating_sub(nack.time) < min_idle.unsigned_abs() {
            continue;
        }
        if !consumer_ready {
            layout::touch_consumer(tx, key, gname, cname, now);
            consumer_ready = true;
        }
        let mut new = nack.clone();
        new.time = now;
        if !justid {
            new.count += 1;
        }
        new.consumer = cname.to_vec();
        layout::put_nack(tx, key, gname, id, &new, Some(&nack));
        if justid {
            reply::bulk(&mut body, id.fmt().as_bytes());
        } else {
            layout::reply_entry(&mut body, id, &entry)?;
        }
        claimed += 1;
        count -= 1;
    }
    if let Some((id, _)) = it.next() {
        next = id;
    }
    reply::array_header(out, 3);
    reply::bulk(out, next.fmt().as_bytes());
    reply::array_header(out, claimed);
    out.buf.extend_from_slice(&body.buf);
    reply::array_header(out, deleted.len());
    for id in deleted {
        reply::bulk(out, id.fmt().as_bytes());
    }
    Ok(())
}
