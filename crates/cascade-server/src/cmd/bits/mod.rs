//! Bitmap commands over strings. This file: `SETBIT GETBIT BITCOUNT`, which read (and
//! SETBIT rewrites) the one `0x01` entry of a string key, O(value size); SETBIT grows
//! the value with zero bytes, up to Redis's 512 MB limit. The rest of the family:
//! `bitops.rs` (BITOP BITPOS) and `bitfield.rs` (`BITFIELD BITFIELD_RO`). Data commands:
//! the dispatcher holds the keys' locks. No state of its own.

pub(crate) mod bitfield;
pub(crate) mod bitops;

use crate::cmd::args::len_i64;
use crate::cmd::strings::MAX_STRING;
use crate::cmd::{int_arg, is, spec, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The single-bit commands and BITCOUNT.
pub(crate) static SPECS: &[Spec] = &[
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
    fn setbit_getbit_bitcount() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "Hello Redis"]);
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
    }
}
