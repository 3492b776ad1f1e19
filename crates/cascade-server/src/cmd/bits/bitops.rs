//! Bitmap commands over strings: `BITOP AND|OR|XOR|NOT` and `BITPOS` (SETBIT, GETBIT
//! and BITCOUNT are in this family's `mod.rs`). Data
//! commands; each reads whole values (O(value size)) and BITOP writes one.
//! A missing key is an empty string (all zero bits), as in Redis.

use crate::cmd::args::len_i64;
use crate::cmd::strings::put_string;
use crate::cmd::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::bitfield::first_bit;

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "bitop",
        -4,
        W,
        Keys::Range(2, -1, 1),
        "bitmap",
        "Bitwise AND, OR, XOR or NOT of strings into a key.",
        Data(bitop),
    ),
    spec(
        "bitpos",
        -3,
        R,
        KEY1,
        "bitmap",
        "Position of the first 0 or 1 bit in a string.",
        Data(bitpos),
    ),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let name = c.arg(1);
    let op = if is(name, "and") {
        Op::And
    } else if is(name, "or") {
        Op::Or
    } else if is(name, "xor") {
        Op::Xor
    } else if is(name, "not") {
        Op::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == Op::Not && c.len() != 4 {
        return Err(CmdError::err(
            "BITOP NOT must be called with a single source key.",
        ));
    }
    let mut srcs = Vec::with_capacity(c.len() - 3);
    for k in c.args().skip(3) {
        srcs.push(
            tx.typed(k, Type::String)?
                .map(|m| m.payload)
                .unwrap_or_default(),
        );
    }
    let maxlen = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let mut res = vec![0u8; maxlen];
    for (j, r) in res.iter_mut().enumerate() {
        let byte = |s: &Vec<u8>| s.get(j).copied().unwrap_or(0);
        let mut o = byte(&srcs[0]);
        match op {
            Op::Not => o = !o,
            Op::And => srcs[1..].iter().for_each(|s| o &= byte(s)),
            Op::Or => srcs[1..].iter().for_each(|s| o |= byte(s)),
            Op::Xor => srcs[1..].iter().for_each(|s| o ^= byte(s)),
        }
        *r = o;
    }
    let dst = c.arg(2);
    let old = tx.begin(dst)?;
    if maxlen > 0 {
        put_string(tx, dst, old, &res, None)?;
    } else if let Some(m) = old {
        tx.remove(dst, &m)?;
    }
    reply::int(out, len_i64(maxlen));
    Ok(())
}

#[expect(
    clippy::many_single_char_names,
    reason = "c, p, n, x: command, payload, length, position"
)]
fn bitpos(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let bit = match int_arg(c.arg(2))? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::err("The bit argument must be 1 or 0.")),
    };
    let Some(m) = tx.typed(c.arg(1), Type::String)? else {
        reply::int(out, if bit { -1 } else { 0 });
        return Ok(());
    };
    let p = m.payload;
    let len = len_i64(p.len());
    // The range as bit positions first..=last, Redis's way.
    let (first, last, end_given) = match c.len() {
        3 => (0, len * 8 - 1, false),
        4..=6 => {
            let mut start = int_arg(c.arg(3))?;
            let isbit = if c.len() == 6 {
                if is(c.arg(5), "bit") {
                    true
                } else if is(c.arg(5), "byte") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                }
            } else {
                false
            };
            let total = if isbit { len * 8 } else { len };
            let mut end = if c.len() >= 5 {
                int_arg(c.arg(4))?
            } else {
                total - 1
            };
            if start < 0 {
                start = start.saturating_add(total);
            }
            if end < 0 {
                end = end.saturating_add(total);
            }
            start = start.max(0);
            end = end.max(0).min(total - 1);
            if start > end {
                reply::int(out, -1);
                return Ok(());
            }
            if isbit {
                (start, end, c.len() >= 5)
            } else {
                (start * 8, end * 8 + 7, c.len() >= 5)
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    if first > last {
        reply::int(out, -1);
        return Ok(());
    }
    let (sb, eb) = (
        usize::try_from(first / 8).unwrap_or(0),
        usize::try_from(last / 8).unwrap_or(0),
    );
    let mut bytes = p[sb..=eb].to_vec();
    // Bits outside the range read as the opposite of what is sought.
    let head = u32::try_from(first % 8).unwrap_or(0);
    let tail = u32::try_from(7 - last % 8).unwrap_or(0);
    let head_mask = !(0xffu8.checked_shr(head).unwrap_or(0));
    let tail_mask = (1u8 << tail) - 1;
    let n = bytes.len();
    for (i, mask) in [(0, head_mask), (n - 1, tail_mask)] {
        if bit {
            bytes[i] &= !mask;
        } else {
            bytes[i] |= mask;
        }
    }
    let pos = match first_bit(&bytes, bit) {
        None => -1,
        Some(x) if !bit && end_given && x == u64::try_from(n).unwrap_or(0) * 8 => -1,
        Some(x) => i64::try_from(x).unwrap_or(i64::MAX) + len_i64(sb) * 8,
    };
    reply::int(out, pos);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn bitop_and_bitpos() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "\u{7f}"]);
        k.ok(&["SET", "b", "\u{1}\u{2}"]);
        k.expect(&["BITOP", "AND", "d", "a", "b"], ":2\r\n");
        k.expect(&["GET", "d"], "$2\r\n\u{1}\0\r\n");
        k.expect(&["BITOP", "OR", "d", "a", "b", "missing"], ":2\r\n");
        k.expect(&["GET", "d"], "$2\r\n\u{7f}\u{2}\r\n");
        k.expect(&["BITOP", "XOR", "d", "a", "b"], ":2\r\n");
        k.expect(&["GET", "d"], "$2\r\n\u{7e}\u{2}\r\n");
        k.expect(&["BITOP", "NOT", "d", "a"], ":1\r\n");
        k.expect(&["BITPOS", "d", "1"], ":0\r\n");
        k.expect(&["BITPOS", "d", "0"], ":1\r\n");
        k.expect(
            &["BITOP", "NOT", "d", "a", "b"],
            "-ERR BITOP NOT must be called with a single source key.\r\n",
        );
        k.expect(&["BITOP", "NAND", "d", "a"], "-ERR syntax error\r\n");
        k.expect(&["BITOP", "AND", "d", "nokey"], ":0\r\n");
        k.expect(&["EXISTS", "d"], ":0\r\n");
        k.expect(&["LPUSH", "l", "x"], ":1\r\n");
        k.expect(
            &["BITOP", "AND", "d", "l"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );

        k.expect(&["BITPOS", "nokey", "1"], ":-1\r\n");
        k.expect(&["BITPOS", "nokey", "0"], ":0\r\n");
        k.ok(&["SET", "f", "\u{7f}"]);
        // "\xff\xf0\x00" via SETRANGE-free bytes: use SETBIT.
        for i in 0..12 {
            k.expect(&["SETBIT", "s", &i.to_string(), "1"], ":0\r\n");
        }
        k.expect(&["SETBIT", "s", "23", "0"], ":0\r\n");
        k.expect(&["BITPOS", "s", "0"], ":12\r\n");
        k.expect(&["BITPOS", "s", "1", "1"], ":8\r\n");
        k.expect(&["BITPOS", "s", "0", "0", "0"], ":-1\r\n");
        k.expect(&["BITPOS", "s", "0", "0"], ":12\r\n");
        k.expect(&["BITPOS", "s", "1", "2"], ":-1\r\n");
        k.expect(&["BITPOS", "s", "1", "5", "10", "BIT"], ":5\r\n");
        k.expect(&["BITPOS", "s", "0", "5", "11", "BIT"], ":-1\r\n");
        k.expect(&["BITPOS", "s", "0", "5", "12", "BIT"], ":12\r\n");
        k.expect(&["BITPOS", "s", "1", "-12", "-1", "BIT"], ":-1\r\n");
        k.expect(&["BITPOS", "s", "0", "2", "1"], ":-1\r\n");
        k.expect(
            &["BITPOS", "s", "2"],
            "-ERR The bit argument must be 1 or 0.\r\n",
        );
        k.expect(
            &["BITPOS", "s", "1", "0", "1", "WORD"],
            "-ERR syntax error\r\n",
        );
    }
}
