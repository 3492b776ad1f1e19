//! `BITFIELD` and `BITFIELD_RO`: GET, SET and INCRBY of signed (`i1`..`i64`) and
//! unsigned (`u1`..`u63`) integers at bit offsets (`#n` = n times the width) of a
//! string, with `OVERFLOW WRAP|SAT|FAIL` applying to the operations after it. The
//! arithmetic is `types/bitfield.rs`. Data commands: one read of the string and, when
//! a SET or INCRBY is present, one write of it grown with zero bytes to the farthest
//! bit written (the key is created even if every write fails, as in Redis).

use crate::cmd::{is, parse_i64, spec, Run::Data, Spec, KEY1, R};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::bitfield::{
    get_signed, get_unsigned, set_signed, set_unsigned, signed_overflow, unsigned_overflow,
    Overflow,
};

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "bitfield",
        -2,
        &["write", "denyoom"],
        KEY1,
        "bitmap",
        "Reads and writes integer fields of a string.",
        Data(bitfield),
    ),
    spec(
        "bitfield_ro",
        -2,
        R,
        KEY1,
        "bitmap",
        "Reads integer fields of a string.",
        Data(bitfield_ro),
    ),
];

/// Redis's 512 MB string limit, in bits.
const MAX_BITS: u64 = 512 * 1024 * 1024 * 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Code {
    Get,
    Set,
    Incr,
}

struct FieldOp {
    code: Code,
    signed: bool,
    bits: u32,
    offset: u64,
    arg: i64,
    ow: Overflow,
}

fn field_type(a: &[u8]) -> CmdResult<(bool, u32)> {
    let bad = || {
        CmdError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (&s, rest) = a.split_first().ok_or_else(bad)?;
    let signed = match s {
        b'i' => true,
        b'u' => false,
        _ => return Err(bad()),
    };
    let n = parse_i64(rest).ok_or_else(bad)?;
    if n < 1 || (signed && n > 64) || (!signed && n > 63) {
        return Err(bad());
    }
    Ok((signed, u32::try_from(n).map_err(|_| bad())?))
}

fn field_offset(a: &[u8], bits: u32) -> CmdResult<u64> {
    let bad = || CmdError::err("bit offset is not an integer or out of range");
    let (hash, digits) = match a.strip_prefix(b"#") {
        Some(rest) => (true, rest),
        None => (false, a),
    };
    let mut n = parse_i64(digits).ok_or_else(bad)?;
    if hash {
        n = n.checked_mul(i64::from(bits)).ok_or_else(bad)?;
    }
    let n = u64::try_from(n).map_err(|_| bad())?;
    if n >= MAX_BITS {
        return Err(bad());
    }
    Ok(n)
}

fn parse(c: &Command) -> CmdResult<Vec<FieldOp>> {
    let mut ops = Vec::new();
    let mut ow = Overflow::Wrap;
    let mut j = 2;
    while j < c.len() {
        let rem = c.len() - j - 1;
        let sub = c.arg(j);
        let code = if is(sub, "get") && rem >= 2 {
            Code::Get
        } else if is(sub, "set") && rem >= 3 {
            Code::Set
        } else if is(sub, "incrby") && rem >= 3 {
            Code::Incr
        } else if is(sub, "overflow") && rem >= 1 {
            let t = c.arg(j + 1);
            ow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(c.arg(j + 1))?;
        let offset = field_offset(c.arg(j + 2), bits)?;
        let arg = if code == Code::Get {
            0
        } else {
            parse_i64(c.arg(j + 3)).ok_or(CmdError::NotInteger)?
        };
        ops.push(FieldOp {
            code,
            signed,
            bits,
            offset,
            arg,
            ow,
        });
        j += if code == Code::Get { 3 } else { 4 };
    }
    Ok(ops)
}

fn bitfield(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    run(tx, c, out, false)
}

fn bitfield_ro(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    run(tx, c, out, true)
}

fn run(tx: &mut Tx<'_>, c: &Command, out: &mut Out, ro: bool) -> CmdResult<()> {
    let ops = parse(c)?;
    let key = c.arg(1);
    let writes = ops.iter().any(|o| o.code != Code::Get);
    if writes && ro {
        return Err(CmdError::err(
            "BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let old = if writes {
        tx.begin_typed(key, Type::String)?
    } else {
        tx.typed(key, Type::String)?
    };
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    if writes {
        let highest = ops
            .iter()
            .filter(|o| o.code != Code::Get)
            .map(|o| o.offset + u64::from(o.bits) - 1)
            .max()
            .unwrap_or(0);
        let need = usize::try_from(highest / 8 + 1)
            .map_err(|_| CmdError::err("bit offset is not an integer or out of range"))?;
        if v.len() < need {
            v.resize(need, 0);
        }
    }
    reply::array_header(out, ops.len());
    for o in &ops {
        match (o.code, o.signed) {
            (Code::Get, true) => reply::int(out, get_signed(&v, o.offset, o.bits)),
            (Code::Get, false) => reply::int(
                out,
                i64::try_from(get_unsigned(&v, o.offset, o.bits)).unwrap_or(i64::MAX),
            ),
            (code, true) => {
                let oldv = get_signed(&v, o.offset, o.bits);
                let (ovf, newv, ret) = if code == Code::Incr {
                    let w = signed_overflow(oldv, o.arg, o.bits, o.ow);
                    let n = w.unwrap_or_else(|| oldv.wrapping_add(o.arg));
                    (w.is_some(), n, n)
                } else {
                    let w = signed_overflow(o.arg, 0, o.bits, o.ow);
                    (w.is_some(), w.unwrap_or(o.arg), oldv)
                };
                if ovf && o.ow == Overflow::Fail {
                    reply::nil(out);
                } else {
                    reply::int(out, ret);
                    set_signed(&mut v, o.offset, o.bits, newv);
                }
            }
            (code, false) => {
                let oldv = get_unsigned(&v, o.offset, o.bits);
                let arg_u = u64::from_ne_bytes(o.arg.to_ne_bytes());
                let (ovf, newv, ret) = if code == Code::Incr {
                    let w = unsigned_overflow(oldv, o.arg, o.bits, o.ow);
                    let n = w.unwrap_or_else(|| oldv.wrapping_add(arg_u));
                    (w.is_some(), n, n)
                } else {
                    let w = unsigned_overflow(arg_u, 0, o.bits, o.ow);
                    (w.is_some(), w.unwrap_or(arg_u), oldv)
                };
                if ovf && o.ow == Overflow::Fail {
                    reply::nil(out);
                } else {
                    reply::int(out, i64::from_ne_bytes(ret.to_ne_bytes()));
                    set_unsigned(&mut v, o.offset, o.bits, newv);
                }
            }
        }
    }
    if writes {
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::string(&v, exp));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn get_set_incr_overflow() {
        let mut k = Kit::new();
        k.expect(&["BITFIELD", "b", "SET", "u8", "0", "255"], "*1\r\n:0\r\n");
        k.expect(&["BITFIELD", "b", "GET", "u8", "0"], "*1\r\n:255\r\n");
        k.expect(&["BITFIELD", "b", "GET", "i8", "0"], "*1\r\n:-1\r\n");
        k.expect(
            &[
                "BITFIELD", "b", "INCRBY", "u8", "0", "10", "OVERFLOW", "SAT", "INCRBY", "u8", "0",
                "250",
            ],
            "*2\r\n:9\r\n:255\r\n",
        );
        k.expect(
            &[
                "BITFIELD", "b", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1",
            ],
            "*1\r\n$-1\r\n",
        );
        k.expect(
            &["BITFIELD", "c", "SET", "i8", "#1", "-100", "GET", "u8", "8"],
            "*2\r\n:0\r\n:156\r\n",
        );
        k.expect(&["STRLEN", "c"], ":2\r\n");
        k.expect(
            &["BITFIELD", "c", "INCRBY", "i8", "8", "-100"],
            "*1\r\n:56\r\n",
        );
        k.expect(&["BITFIELD_RO", "c", "GET", "i8", "8"], "*1\r\n:56\r\n");
        k.expect(&["BITFIELD_RO", "nokey", "GET", "u63", "0"], "*1\r\n:0\r\n");
        k.expect(
            &["BITFIELD_RO", "c", "SET", "u8", "0", "1"],
            "-ERR BITFIELD_RO only supports the GET subcommand\r\n",
        );
        k.expect(
            &["BITFIELD", "c", "GET", "u64", "0"],
            "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n",
        );
        k.expect(
            &["BITFIELD", "c", "GET", "u8", "-1"],
            "-ERR bit offset is not an integer or out of range\r\n",
        );
        k.expect(
            &["BITFIELD", "c", "OVERFLOW", "NOPE"],
            "-ERR Invalid OVERFLOW type specified\r\n",
        );
        k.expect(&["BITFIELD", "c", "GET", "u8"], "-ERR syntax error\r\n");
        k.expect(&["BITFIELD", "c"], "*0\r\n");
        k.expect(
            &["BITFIELD", "new", "OVERFLOW", "FAIL", "SET", "u2", "0", "9"],
            "*1\r\n$-1\r\n",
        );
        k.expect(&["STRLEN", "new"], ":1\r\n");
    }
}
