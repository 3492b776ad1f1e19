//! Expiry commands, for keys of every type: `TTL PTTL EXPIRE PEXPIRE EXPIREAT
//! PEXPIREAT PERSIST`. Expiry is real: an absolute Unix-millisecond time in the key's
//! metadata plus one entry in the expiry queue (`keyspace.rs`); an expired key reads as
//! absent at once and is deleted by the sweeper (`Store::sweep_expired`) or by the
//! next write to it.

use super::{int_arg, is, spec, Ctx, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{now_ms, Meta};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::store::Txn;

/// The expiry commands.
pub static SPECS: &[Spec] = &[
    spec(
        "ttl",
        2,
        R,
        KEY1,
        "generic",
        "Remaining time to live in seconds.",
        ttl,
    ),
    spec(
        "pttl",
        2,
        R,
        KEY1,
        "generic",
        "Remaining time to live in milliseconds.",
        pttl,
    ),
    spec(
        "expire",
        -3,
        W,
        KEY1,
        "generic",
        "Sets a time to live in seconds.",
        expire,
    ),
    spec(
        "pexpire",
        -3,
        W,
        KEY1,
        "generic",
        "Sets a time to live in milliseconds.",
        pexpire,
    ),
    spec(
        "expireat",
        -3,
        W,
        KEY1,
        "generic",
        "Sets an expiry as a Unix time.",
        expireat,
    ),
    spec(
        "pexpireat",
        -3,
        W,
        KEY1,
        "generic",
        "Sets an expiry as Unix milliseconds.",
        pexpireat,
    ),
    spec(
        "persist",
        2,
        W,
        KEY1,
        "generic",
        "Removes the expiry of a key.",
        persist,
    ),
];

fn ttl_ms(ctx: &mut Ctx<'_>, key: &[u8]) -> CmdResult<i64> {
    Ok(match ctx.shared.store.meta(key)? {
        None => -2,
        Some(Meta {
            expire_at: None, ..
        }) => -1,
        Some(Meta {
            expire_at: Some(t), ..
        }) => t.saturating_sub(now_ms()) as i64,
    })
}

fn ttl(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let t = ttl_ms(ctx, c.arg(1))?;
    reply::int(ctx.out, if t < 0 { t } else { (t + 500) / 1000 });
    Ok(())
}

fn pttl(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let t = ttl_ms(ctx, c.arg(1))?;
    reply::int(ctx.out, t);
    Ok(())
}

/// EXPIRE and friends: `when` is the new absolute expiry (may be in the past).
fn expire_generic(
    ctx: &mut Ctx<'_>,
    c: &Command,
    unit_ms: i64,
    absolute: bool,
    name: &str,
) -> CmdResult<()> {
    let n = int_arg(c.arg(2))?;
    let invalid = || CmdError::err(format!("invalid expire time in '{name}' command"));
    let ms = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    let when = if absolute {
        ms
    } else {
        (now_ms() as i64).checked_add(ms).ok_or_else(invalid)?
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in c.args().skip(3) {
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "gt") {
            gt = true;
        } else if is(a, "lt") {
            lt = true;
        } else {
            return Err(CmdError::err(format!(
                "Unsupported option {}",
                String::from_utf8_lossy(a)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let Some(old) = store.begin(&mut txn, key)? else {
        store.commit(txn)?;
        reply::int(ctx.out, 0);
        return Ok(());
    };
    let cur = old.expire_at.map(|t| t as i64);
    let ok = match cur {
        None => !xx && !gt, // no TTL counts as infinite for GT/LT
        Some(t) => !nx && (!gt || when > t) && (!lt || when < t),
    };
    if !ok {
        store.commit(txn)?;
        reply::int(ctx.out, 0);
        return Ok(());
    }
    if when <= now_ms() as i64 {
        store.remove(&mut txn, key, &old)?;
    } else {
        let new = Meta {
            expire_at: Some(when as u64),
            ..old.clone()
        };
        store.set_meta(&mut txn, key, Some(&old), &new);
    }
    store.commit(txn)?;
    reply::int(ctx.out, 1);
    Ok(())
}

fn expire(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    expire_generic(ctx, c, 1000, false, "expire")
}

fn pexpire(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    expire_generic(ctx, c, 1, false, "pexpire")
}

fn expireat(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    expire_generic(ctx, c, 1000, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    expire_generic(ctx, c, 1, true, "pexpireat")
}

fn persist(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let store = &ctx.shared.store;
    let key = c.arg(1);
    let _g = store.lock(key);
    let mut txn = Txn::default();
    let old = store.begin(&mut txn, key)?;
    let n = match &old {
        Some(m) if m.expire_at.is_some() => {
            let new = Meta {
                expire_at: None,
                ..m.clone()
            };
            store.set_meta(&mut txn, key, Some(m), &new);
            1
        }
        _ => 0,
    };
    store.commit(txn)?;
    reply::int(ctx.out, n);
    Ok(())
}
