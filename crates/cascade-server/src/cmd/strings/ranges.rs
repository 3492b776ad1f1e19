//! Commands on part of a string: `APPEND STRLEN GETRANGE SUBSTR SETRANGE`. Each reads
//! (and APPEND/SETRANGE rewrite) the one `0x01` entry of its key, O(value size);
//! SETRANGE grows the value with zero bytes, up to Redis's 512 MB limit
//! ([`MAX_STRING`]) and the engine's value limit. Data commands: the dispatcher holds
//! the key's lock.

use super::MAX_STRING;
use crate::cmd::args::len_i64;
use crate::cmd::{int_arg, spec, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The range commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "append",
        3,
        W,
        KEY1,
        "string",
        "Appends to a string.",
        Data(append),
    ),
    spec(
        "strlen",
        2,
        R,
        KEY1,
        "string",
        "Returns the length of a string.",
        Data(strlen),
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
];

fn append(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let old = tx.begin_typed(key, Type::String)?;
    let mut v = old.as_ref().map(|m| m.payload.clone()).unwrap_or_default();
    v.extend_from_slice(c.arg(2));
    let len = v.len();
    let meta = Meta {
        ty: Type::String,
        expire_at: old.as_ref().and_then(|m| m.expire_at),
        payload: v,
    };
    tx.set_meta(key, old.as_ref(), &meta);
    reply::int(out, len_i64(len));
    Ok(())
}

fn strlen(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let m = tx.typed(c.arg(1), Type::String)?;
    reply::int(out, m.map_or(0, |m| len_i64(m.payload.len())));
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

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn getrange_setrange() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "Hello World"]);
        k.expect(&["GETRANGE", "s", "0", "4"], "$5\r\nHello\r\n");
        k.expect(&["GETRANGE", "s", "-5", "-1"], "$5\r\nWorld\r\n");
        k.expect(&["GETRANGE", "s", "5", "2"], "$0\r\n\r\n");
        k.expect(&["SETRANGE", "s", "6", "Redis"], ":11\r\n");
        k.expect(&["GET", "s"], "$11\r\nHello Redis\r\n");
        k.expect(&["SETRANGE", "n", "2", "x"], ":3\r\n");
        k.expect(&["GET", "n"], "$3\r\n\0\0x\r\n");
    }

    #[test]
    fn append_strlen() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "abc"]);
        k.expect(&["APPEND", "s", "de"], ":5\r\n");
        k.expect(&["APPEND", "new", "xy"], ":2\r\n");
        k.expect(&["STRLEN", "s"], ":5\r\n");
        k.expect(&["STRLEN", "none"], ":0\r\n");
    }
}
