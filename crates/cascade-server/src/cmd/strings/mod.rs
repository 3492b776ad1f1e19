//! String commands, by what they do to the value:
//!
//! - `set.rs`: whole values (GET SET and its variants, GETEX, MGET MSET MSETNX);
//! - `counters.rs`: INCR DECR INCRBY DECRBY INCRBYFLOAT;
//! - `ranges.rs`: APPEND STRLEN GETRANGE SUBSTR SETRANGE;
//! - `lcs.rs`: LCS.
//!
//! The bit commands over strings are the `bits` family (`cmd/bits/`). This module holds
//! what the string commands (and others that write strings: BITOP, HINCRBYFLOAT)
//! share: the expiry argument, the string write, the float format and the size limit.
//!
//! A string is one engine entry: its `0x01` metadata holds the bytes (`keyspace.rs`).
//! Every handler is a data command; the dispatcher holds the keys' stripe locks, and
//! nothing here has state of its own.

pub(crate) mod counters;
pub(crate) mod lcs;
pub(crate) mod ranges;
pub(crate) mod set;

use crate::cmd::int_arg;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::store::Tx;

/// Redis's largest string, 512 MB (`proto-max-bulk-len`'s default): SETRANGE and
/// SETBIT refuse to grow a value past it.
pub(crate) const MAX_STRING: u64 = 512 * 1024 * 1024;

/// Converts a relative or absolute expiry argument to Unix milliseconds.
pub(crate) fn expire_arg(
    now: u64,
    arg: &[u8],
    unit_ms: i64,
    absolute: bool,
    cmd: &str,
) -> CmdResult<u64> {
    let invalid = || CmdError::err(format!("invalid expire time in '{cmd}' command"));
    let n = int_arg(arg)?;
    if n <= 0 {
        return Err(invalid());
    }
    // As Redis: the absolute time in ms must fit a signed 64-bit integer.
    let ms = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    let at = if absolute {
        ms
    } else {
        i64::try_from(now)
            .ok()
            .and_then(|now| now.checked_add(ms))
            .ok_or_else(invalid)?
    };
    u64::try_from(at).map_err(|_| invalid())
}

/// Writes string `value` at `key` replacing whatever is there (any type).
pub(crate) fn put_string(
    tx: &mut Tx<'_>,
    key: &[u8],
    old: Option<Meta>,
    value: &[u8],
    expire_at: Option<u64>,
) -> CmdResult<()> {
    let old = match old {
        Some(m) if m.ty != Type::String => {
            tx.remove(key, &m)?;
            None
        }
        m => m,
    };
    tx.set_meta(key, old.as_ref(), &Meta::string(value, expire_at));
    Ok(())
}

/// A float result as Redis prints INCRBYFLOAT's (shortest form that reads back).
pub(crate) fn float_text(f: f64) -> String {
    format!("{f}")
}
