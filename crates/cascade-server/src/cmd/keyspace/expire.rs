//! Expiry commands, for keys of every type: `TTL PTTL EXPIRE PEXPIRE EXPIREAT
//! PEXPIREAT PERSIST`. Expiry is real: an absolute Unix-millisecond time in the key's
//! metadata plus one entry in the expiry queue (`keyspace.rs`); an expired key reads as
//! absent at once and is deleted by the sweeper (`Store::sweep_expired`) or by the
//! next write to it. All are data commands on one key.

use crate::cmd::{int_arg, is, spec, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Meta;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The expiry commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "ttl",
        2,
        R,
        KEY1,
        "generic",
        "Remaining time to live in seconds.",
        Data(ttl),
    ),
    spec(
        "pttl",
        2,
        R,
        KEY1,
        "generic",
        "Remaining time to live in milliseconds.",
        Data(pttl),
    ),
    spec(
        "expire",
        -3,
        W,
        KEY1,
        "generic",
        "Sets a time to live in seconds.",
        Data(expire),
    ),
    spec(
        "pexpire",
        -3,
        W,
        KEY1,
        "generic",
        "Sets a time to live in milliseconds.",
        Data(pexpire),
    ),
    spec(
        "expireat",
        -3,
        W,
        KEY1,
        "generic",
        "Sets an expiry as a Unix time.",
        Data(expireat),
    ),
    spec(
        "pexpireat",
        -3,
        W,
        KEY1,
        "generic",
        "Sets an expiry as Unix milliseconds.",
        Data(pexpireat),
    ),
    spec(
        "persist",
        2,
        W,
        KEY1,
        "generic",
        "Removes the expiry of a key.",
        Data(persist),
    ),
];

/// Remaining ms, -1 without expiry, -2 for a missing key.
fn ttl_ms(tx: &Tx<'_>, key: &[u8]) -> CmdResult<i64> {
    Ok(match tx.meta(key)? {
        None => -2,
        Some(Meta {
            expire_at: None, ..
        }) => -1,
        Some(Meta {
            expire_at: Some(t), ..
        }) => i64::try_from(t.saturating_sub(tx.now())).unwrap_or(i64::MAX),
    })
}

fn ttl(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let t = ttl_ms(tx, c.arg(1))?;
    reply::int(out, if t < 0 { t } else { (t + 500) / 1000 });
    Ok(())
}

fn pttl(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let t = ttl_ms(tx, c.arg(1))?;
    reply::int(out, t);
    Ok(())
}

/// EXPIRE and friends: the new absolute expiry may be in the past (the key goes).
fn expire_generic(
    tx: &mut Tx<'_>,
    c: &Command,
    out: &mut Out,
    unit_ms: i64,
    absolute: bool,
    name: &str,
) -> CmdResult<()> {
    let n = int_arg(c.arg(2))?;
    let invalid = || CmdError::err(format!("invalid expire time in '{name}' command"));
    let now = i64::try_from(tx.now()).map_err(|_| invalid())?;
    let ms = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    let when = if absolute {
        ms
    } else {
        now.checked_add(ms).ok_or_else(invalid)?
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
    let key = c.arg(1);
    let Some(old) = tx.begin(key)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let cur = old.expire_at.and_then(|t| i64::try_from(t).ok());
    let ok = match cur {
        None => !xx && !gt, // no TTL counts as infinite for GT/LT
        Some(t) => !nx && (!gt || when > t) && (!lt || when < t),
    };
    if !ok {
        reply::int(out, 0);
        return Ok(());
    }
    match u64::try_from(when) {
        Ok(at) if when > now => {
            let new = Meta {
                expire_at: Some(at),
                ..old.clone()
            };
            tx.set_meta(key, Some(&old), &new);
        }
        _ => tx.remove(key, &old)?,
    }
    reply::int(out, 1);
    Ok(())
}

fn expire(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    expire_generic(tx, c, out, 1000, false, "expire")
}

fn pexpire(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    expire_generic(tx, c, out, 1, false, "pexpire")
}

fn expireat(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    expire_generic(tx, c, out, 1000, true, "expireat")
}

fn pexpireat(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    expire_generic(tx, c, out, 1, true, "pexpireat")
}

fn persist(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let old = tx.begin(key)?;
    let n = match &old {
        Some(m) if m.expire_at.is_some() => {
            let new = Meta {
                expire_at: None,
                ..m.clone()
            };
            tx.set_meta(key, Some(m), &new);
            1
        }
        _ => 0,
    };
    reply::int(out, n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn ttl_lifecycle() {
        let mut k = Kit::new();
        k.expect(&["TTL", "k"], ":-2\r\n");
        k.expect(&["EXPIRE", "k", "10"], ":0\r\n");
        k.ok(&["SET", "k", "v"]);
        k.expect(&["TTL", "k"], ":-1\r\n");
        k.expect(&["EXPIRE", "k", "100"], ":1\r\n");
        k.expect(&["TTL", "k"], ":100\r\n");
        k.expect(&["EXPIRE", "k", "50", "GT"], ":0\r\n");
        k.expect(&["EXPIRE", "k", "200", "GT"], ":1\r\n");
        k.expect(&["EXPIRE", "k", "300", "LT"], ":0\r\n");
        k.expect(&["EXPIRE", "k", "300", "NX"], ":0\r\n");
        k.expect(&["EXPIRE", "k", "300", "XX"], ":1\r\n");
        k.expect(
            &["EXPIRE", "k", "1", "NX", "XX"],
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
        );
        k.expect(
            &["EXPIRE", "k", "1", "GT", "LT"],
            "-ERR GT and LT options at the same time are not compatible\r\n",
        );
        k.expect(
            &["EXPIRE", "k", "1", "YY"],
            "-ERR Unsupported option YY\r\n",
        );
        k.expect(&["PERSIST", "k"], ":1\r\n");
        k.expect(&["PERSIST", "k"], ":0\r\n");
        k.expect(&["PTTL", "k"], ":-1\r\n");
        k.expect(&["PEXPIRE", "k", "100000"], ":1\r\n");
        let pttl = k.int(&["PTTL", "k"]);
        assert!((99_000..=100_000).contains(&pttl), "{pttl}");
        k.expect(
            &["EXPIRE", "k", "9223372036854775807"],
            "-ERR invalid expire time in 'expire' command\r\n",
        );
        // An expiry in the past deletes the key.
        k.expect(&["EXPIREAT", "k", "1"], ":1\r\n");
        k.expect(&["EXISTS", "k"], ":0\r\n");
        k.expect(&["DBSIZE"], ":0\r\n");
    }

    #[test]
    fn expired_keys_vanish_and_are_swept() {
        let mut k = Kit::new();
        k.ok(&["SET", "k", "v", "PX", "1"]);
        k.expect(&["HSET", "h", "f", "v"], ":1\r\n");
        k.expect(&["PEXPIRE", "h", "1"], ":1\r\n");
        std::thread::sleep(std::time::Duration::from_millis(5));
        k.expect(&["GET", "k"], "$-1\r\n");
        k.expect(&["HGETALL", "h"], "*0\r\n");
        k.expect(&["EXISTS", "k", "h"], ":0\r\n");
        assert_eq!(k.sweep(), 2);
        k.expect(&["DBSIZE"], ":0\r\n");
        // A write to an expired key starts from scratch.
        k.ok(&["SET", "k", "v", "PX", "1"]);
        std::thread::sleep(std::time::Duration::from_millis(5));
        k.expect(&["APPEND", "k", "x"], ":1\r\n");
        k.expect(&["TTL", "k"], ":-1\r\n");
    }
}
