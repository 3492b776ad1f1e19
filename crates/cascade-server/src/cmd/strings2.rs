//! More string commands: `GETEX GETRANGE SETRANGE INCRBYFLOAT MSETNX SETBIT GETBIT
//! BITCOUNT`. Each reads and rewrites the one `0x01` entry of its key (O(value size));
//! SETRANGE and SETBIT grow the value with zero bytes, up to Redis's 512 MB limit and
//! the engine's value limit. Data commands.

use super::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::cmd::args::{len_i64, parse_f64};
use crate::cmd::strings::{expire_arg, put_string};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "getex",
        -2,
        W,
        KEY1,
        "string",
        "Returns a string and sets or clears its expiry.",
        Data(getex),
    ),
    spec(
        "getrange",
        4,
        R,
        KEY1,
        "string",
        "A substring.",
        Data(getrange),
    ),
    spec(
        "substr",
        4,
        R,
        KEY1,
        "string",
        "A substring (old name of GETRANGE).",
        Data(getrange),
    ),
    spec(
        "setrange",
        4,
        W,
        KEY1,
        "string",
        "Overwrites part of a string.",
        Data(setrange),
    ),
    spec(
        "incrbyfloat",
        3,
        W,
        KEY1,
        "string",
        "Increments a float.",
        Data(incrbyfloat),
    ),
    spec(
        "msetnx",
        -3,
        W,
        Keys::Range(1, -1, 2),
        "string",
        "Sets keys only if none exists.",
        Data(msetnx),
    ),
    spec("setbit", 4, W, KEY1, "string", "Sets a bit.", Data(setbit)),
    spec("getbit", 3, R, KEY1, "string", "Reads a bit.", Data(getbit)),
    spec(
        "bitcount",
        -2,
        R,
        KEY1,
        "string",
        "Counts set bits.",
        Data(bitcount),
    ),
];

const MAX_STRING: u64 = 512 * 1024 * 1024;

fn getex(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let now = tx.now();
    let mut new_exp: Option<Option<u64>> = None;
    let mut i = 2;
    while i < c.len() {
        let a = c.arg(i);
        if is(a, "persist") && new_exp.is_none() {
            new_exp = Some(None);
            i += 1;
        } else if i + 1 < c.len() && new_exp.is_none() {
            let (unit, abs) = if is(a, "ex") {
                (1000, false)
            } else if is(a, "px") {
                (1, false)
            } else if is(a, "exat") {
                (1000, true)
            } else if is(a, "pxat") {
                (1, true)
            } else {
                return Err(CmdError::Syntax);
            };
            new_exp = Some(Some(expire_arg(now, c.arg(i + 1), unit, abs, "getex")?));
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(m) = tx.begin_typed(key, Type::String)? else {
        reply::nil(out);
        return Ok(());
    };
    if let Some(exp) = new_exp {
        if exp.is_some_and(|t| t <= now) {
            tx.remove(key, &m)?;
        } else if exp != m.expire_at {
            let new = Meta {
                expire_at: exp,
                ..m.clone()
            };
            tx.set_meta(key, Some(&m), &new);
        }
    }
    reply::bulk(out, &m.payload);
    Ok(())
}

fn getrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (start, end) = (int_arg(c.arg(2))?, int_arg(c.arg(3))?);
    let v = tx
        .typed(c.arg(1), Type::String)?
        .map(|m| m.payload)
        .unwrap_or_default();
    let len = len_i64(v.len());
    if len == 0 || (start < 0 && end < 0 && start > end) {
        reply::bulk(out, b"");
        return Ok(());
    }
    let s = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let e = if end < 0 {
        (len + end).max(0)
    } else {
        end.min(len - 1)
    };
    if s > e || s >= len {
        reply::bulk(out, b"");
        return Ok(());
    }
    let (s, e) = (
        usize::try_from(s).unwrap_or(0),
        usize::try_from(e).unwrap_or(0),
    );
    reply::bulk(out, &v[s..=e]);
    Ok(())
}

fn setrange(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let off =
        u64::try_from(int_arg(c.arg(2))?).map_err(|_| CmdError::err("offset is out of range"))?;
    let val = c.arg(3);
    let old = tx.begin_typed(key, Type::String)?;
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    if val.is_empty() {
        reply::int(out, len_i64(v.len()));
        return Ok(());
    }
    if off + u64::try_from(val.len()).unwrap_or(u64::MAX) > MAX_STRING {
        return Err(CmdError::err(
            "string exceeds maximum allowed size (proto-max-bulk-len)",
        ));
    }
    let off = usize::try_from(off).map_err(|_| CmdError::err("offset is out of range"))?;
    if v.len() < off + val.len() {
        v.resize(off + val.len(), 0);
    }
    v[off..off + val.len()].copy_from_slice(val);
    let exp = old.as_ref().and_then(|m| m.expire_at);
    tx.set_meta(key, old.as_ref(), &Meta::string(&v, exp));
    reply::int(out, len_i64(v.len()));
    Ok(())
}

/// A float result as Redis prints INCRBYFLOAT's (shortest form that reads back).
pub(crate) fn float_text(f: f64) -> String {
    format!("{f}")
}

fn incrbyfloat(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let by = parse_f64(c.arg(2)).ok_or(CmdError::NotFloat)?;
    let old = tx.begin_typed(key, Type::String)?;
    let cur = match &old {
        Some(m) => parse_f64(&m.payload).ok_or(CmdError::NotFloat)?,
        None => 0.0,
    };
    let new = cur + by;
    if !new.is_finite() {
        return Err(CmdError::err("increment would produce NaN or Infinity"));
    }
    let text = float_text(new);
    let exp = old.as_ref().and_then(|m| m.expire_at);
    tx.set_meta(key, old.as_ref(), &Meta::string(text.as_bytes(), exp));
    reply::bulk(out, text.as_bytes());
    Ok(())
}

fn msetnx(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if c.len().is_multiple_of(2) {
        return Err(CmdError::Msg(super::arity_error("msetnx")));
    }
    for i in (1..c.len()).step_by(2) {
        if tx.meta(c.arg(i))?.is_some() {
            reply::int(out, 0);
            return Ok(());
        }
    }
    for i in (1..c.len()).step_by(2) {
        let old = tx.begin(c.arg(i))?;
        put_string(tx, c.arg(i), old, c.arg(i + 1), None)?;
    }
    reply::int(out, 1);
    Ok(())
}

fn bit_offset(arg: &[u8]) -> CmdResult<u64> {
    let bad = || CmdError::err("bit offset is not an integer or out of range");
    let n = u64::try_from(int_arg(arg).map_err(|_| bad())?).map_err(|_| bad())?;
    if n >= MAX_STRING * 8 {
        return Err(bad());
    }
    Ok(n)
}

fn setbit(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let off = bit_offset(c.arg(2))?;
    let on = match c.arg(3) {
        b"1" => true,
        b"0" => false,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let old = tx.begin_typed(key, Type::String)?;
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    let byte = usize::try_from(off / 8)
        .map_err(|_| CmdError::err("bit offset is not an integer or out of range"))?;
    if v.len() <= byte {
        v.resize(byte + 1, 0);
    }
    let mask = 0x80u8 >> (off % 8);
    let was = v[byte] & mask != 0;
    if on {
        v[byte] |= mask;
    } else {
        v[byte] &= !mask;
    }
    let exp = old.as_ref().and_then(|m| m.expire_at);
    tx.set_meta(key, old.as_ref(), &Meta::string(&v, exp));
    reply::int(out, i64::from(was));
    Ok(())
}

fn getbit(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let off = bit_offset(c.arg(2))?;
    let v = tx
        .typed(c.arg(1), Type::String)?
        .map(|m| m.payload)
        .unwrap_or_default();
    let byte = usize::try_from(off / 8).unwrap_or(usize::MAX);
    let bit = v.get(byte).is_some_and(|b| b & (0x80u8 >> (off % 8)) != 0);
    reply::int(out, i64::from(bit));
    Ok(())
}

#[expect(
    clippy::many_single_char_names,
    reason = "s, e, n, v, i: start, end, count, value, index"
)]
fn bitcount(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let v = tx
        .typed(c.arg(1), Type::String)?
        .map(|m| m.payload)
        .unwrap_or_default();
    let (mut s, mut e, mut bits) = (0i64, -1i64, false);
    match c.len() {
        2 => {}
        4 | 5 => {
            s = int_arg(c.arg(2))?;
            e = int_arg(c.arg(3))?;
            if c.len() == 5 {
                if is(c.arg(4), "bit") {
                    bits = true;
                } else if !is(c.arg(4), "byte") {
                    return Err(CmdError::Syntax);
                }
            }
        }
        _ => return Err(CmdError::Syntax),
    }
    if s < 0 && e < 0 && s > e {
        // Redis answers 0 for a reversed negative range before clamping it.
        reply::int(out, 0);
        return Ok(());
    }
    let total = len_i64(v.len()) * if bits { 8 } else { 1 };
    let norm = |x: i64| if x < 0 { (total + x).max(0) } else { x };
    let (s, e) = (norm(s), norm(e).min(total - 1));
    let mut n = 0i64;
    if total > 0 && s <= e {
        for i in s..=e {
            let i = usize::try_from(i).unwrap_or(0);
            n += if bits {
                i64::from(v[i / 8] & (0x80u8 >> (i % 8)) != 0)
            } else {
                i64::from(v[i].count_ones())
            };
        }
    }
    reply::int(out, n);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn ranges_bits_floats() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "Hello World"]);
        k.expect(&["GETRANGE", "s", "0", "4"], "$5\r\nHello\r\n");
        k.expect(&["GETRANGE", "s", "-5", "-1"], "$5\r\nWorld\r\n");
        k.expect(&["GETRANGE", "s", "5", "2"], "$0\r\n\r\n");
        k.expect(&["SETRANGE", "s", "6", "Redis"], ":11\r\n");
        k.expect(&["GET", "s"], "$11\r\nHello Redis\r\n");
        k.expect(&["SETRANGE", "n", "2", "x"], ":3\r\n");
        k.expect(&["GET", "n"], "$3\r\n\0\0x\r\n");
        k.expect(&["INCRBYFLOAT", "f", "10.5"], "$4\r\n10.5\r\n");
        k.expect(&["INCRBYFLOAT", "f", "0.1"], "$4\r\n10.6\r\n");
        k.expect(
            &["INCRBYFLOAT", "s", "1"],
            "-ERR value is not a valid float\r\n",
        );
        k.expect(&["SETBIT", "b", "7", "1"], ":0\r\n");
        k.expect(&["GETBIT", "b", "7"], ":1\r\n");
        k.expect(&["GETBIT", "b", "100"], ":0\r\n");
        k.expect(
            &["SETBIT", "b", "7", "2"],
            "-ERR bit is not an integer or out of range\r\n",
        );
        k.expect(&["BITCOUNT", "s"], ":40\r\n");
        k.expect(&["BITCOUNT", "b", "0", "0", "BIT"], ":0\r\n");
        k.expect(&["BITCOUNT", "s", "-6", "-7"], ":0\r\n");
        k.expect(&["MSETNX", "x1", "1", "s", "2"], ":0\r\n");
        k.expect(&["MSETNX", "x1", "1", "x2", "2"], ":1\r\n");
        k.expect(&["GETEX", "x1", "EX", "100"], "$1\r\n1\r\n");
        k.expect(&["TTL", "x1"], ":100\r\n");
        k.expect(&["GETEX", "x1", "PERSIST"], "$1\r\n1\r\n");
        k.expect(&["TTL", "x1"], ":-1\r\n");
    }
}
