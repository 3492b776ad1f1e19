//! Counter commands on strings: `INCR DECR INCRBY DECRBY INCRBYFLOAT`. The value is
//! parsed as a 64-bit integer (or a float), changed and written back in place, keeping
//! the key's expiry; one read and one write of the key's `0x01` entry. Data commands:
//! the dispatcher holds the key's lock.

use super::float_text;
use crate::cmd::args::parse_f64;
use crate::cmd::{int_arg, parse_i64, spec, Run::Data, Spec, KEY1, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The counter commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "incr",
        2,
        W,
        KEY1,
        "string",
        "Increments an integer by one.",
        Data(incr),
    ),
    spec(
        "decr",
        2,
        W,
        KEY1,
        "string",
        "Decrements an integer by one.",
        Data(decr),
    ),
    spec(
        "incrby",
        3,
        W,
        KEY1,
        "string",
        "Increments an integer.",
        Data(incrby),
    ),
    spec(
        "decrby",
        3,
        W,
        KEY1,
        "string",
        "Decrements an integer.",
        Data(decrby),
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
];

fn incr_by(tx: &mut Tx<'_>, out: &mut Out, key: &[u8], by: i64) -> CmdResult<()> {
    let old = tx.begin_typed(key, Type::String)?;
    let cur = match &old {
        Some(m) => parse_i64(&m.payload).ok_or(CmdError::NotInteger)?,
        None => 0,
    };
    let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    let expire_at = old.as_ref().and_then(|m| m.expire_at);
    let meta = Meta::string(new.to_string().as_bytes(), expire_at);
    tx.set_meta(key, old.as_ref(), &meta);
    reply::int(out, new);
    Ok(())
}

fn incr(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    incr_by(tx, out, c.arg(1), 1)
}

fn decr(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    incr_by(tx, out, c.arg(1), -1)
}

fn incrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = int_arg(c.arg(2))?;
    incr_by(tx, out, c.arg(1), by)
}

fn decrby(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let by = int_arg(c.arg(2))?;
    let neg = by
        .checked_neg()
        .ok_or_else(|| CmdError::err("decrement would overflow"))?;
    incr_by(tx, out, c.arg(1), neg)
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

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn integer_counters() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "3"]);
        k.expect(&["INCR", "n"], ":1\r\n");
        k.expect(&["INCRBY", "n", "10"], ":11\r\n");
        k.expect(&["DECR", "n"], ":10\r\n");
        k.expect(&["DECRBY", "n", "20"], ":-10\r\n");
        k.expect(&["INCR", "a"], ":4\r\n");
        k.ok(&["SET", "s", "abc"]);
        k.expect(
            &["INCR", "s"],
            "-ERR value is not an integer or out of range\r\n",
        );
        k.ok(&["SET", "big", "9223372036854775807"]);
        k.expect(
            &["INCR", "big"],
            "-ERR increment or decrement would overflow\r\n",
        );
        k.expect(
            &["DECRBY", "n", "-9223372036854775808"],
            "-ERR decrement would overflow\r\n",
        );
    }

    #[test]
    fn float_counter() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "Hello"]);
        k.expect(&["INCRBYFLOAT", "f", "10.5"], "$4\r\n10.5\r\n");
        k.expect(&["INCRBYFLOAT", "f", "0.1"], "$4\r\n10.6\r\n");
        k.expect(
            &["INCRBYFLOAT", "s", "1"],
            "-ERR value is not a valid float\r\n",
        );
    }
}
