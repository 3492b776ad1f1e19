//! Redis streams: XADD, XLEN, XRANGE, XREVRANGE, XREAD (blocking), XDEL, XTRIM,
//! XSETID, XINFO and consumer groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM,
//! XAUTOCLAIM), over the ordered engine.
//!
//! - `id.rs`: ids (parse, format, order);
//! - `layout.rs`: the engine keys and values of a stream (namespaces `0x08`–`0x0B`,
//!   header in the `0x01` metadata), drawn in docs/formats.md;
//! - `trim.rs`: MAXLEN/MINID trimming, exact and approximate;
//! - `xadd.rs`, `range.rs`, `xread.rs`, `groups.rs`, `claim.rs`, `xinfo.rs`: the
//!   commands.
//!
//! Every command is a [`Run::Data`] handler: the dispatcher holds the stripe locks of
//! its keys and commits its writes as one engine batch. No state of its own.

mod claim;
mod groups;
pub(crate) mod id;
mod layout;
mod range;
mod trim;
mod xadd;
mod xinfo;
mod xread;

#[cfg(test)]
mod tests;

use super::{spec, Keys, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};

const RB: &[&str] = &["readonly", "blocking"];
const WB: &[&str] = &["write", "blocking"];
/// The key is argument 2 (XGROUP, XINFO: argument 1 is the subcommand).
const KEY2: Keys = Keys::Range(2, 2, 1);

/// The stream commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "xadd",
        -5,
        W,
        KEY1,
        "stream",
        "Appends an entry to a stream.",
        Data(xadd::xadd),
    ),
    spec(
        "xlen",
        2,
        R,
        KEY1,
        "stream",
        "Returns the number of entries in a stream.",
        Data(xadd::xlen),
    ),
    spec(
        "xdel",
        -3,
        W,
        KEY1,
        "stream",
        "Deletes entries from a stream.",
        Data(xadd::xdel),
    ),
    spec(
        "xtrim",
        -4,
        W,
        KEY1,
        "stream",
        "Trims a stream by length or id.",
        Data(xadd::xtrim),
    ),
    spec(
        "xsetid",
        -3,
        W,
        KEY1,
        "stream",
        "Sets a stream's last id.",
        Data(xadd::xsetid),
    ),
    spec(
        "xrange",
        -4,
        R,
        KEY1,
        "stream",
        "Returns entries in an id range.",
        Data(range::xrange),
    ),
    spec(
        "xrevrange",
        -4,
        R,
        KEY1,
        "stream",
        "Returns entries in an id range, newest first.",
        Data(range::xrevrange),
    ),
    spec(
        "xread",
        -4,
        RB,
        Keys::Streams { from: 1 },
        "stream",
        "Reads entries from streams, optionally blocking.",
        Data(xread::xread),
    ),
    spec(
        "xreadgroup",
        -7,
        WB,
        Keys::Streams { from: 4 },
        "stream",
        "Reads entries for a consumer group, optionally blocking.",
        Data(xread::xreadgroup),
    ),
    spec(
        "xgroup",
        -2,
        W,
        KEY2,
        "stream",
        "Manages consumer groups and consumers.",
        Data(groups::xgroup),
    ),
    spec(
        "xack",
        -4,
        W,
        KEY1,
        "stream",
        "Acknowledges pending entries.",
        Data(groups::xack),
    ),
    spec(
        "xpending",
        -3,
        R,
        KEY1,
        "stream",
        "Returns a group's pending entries.",
        Data(groups::xpending),
    ),
    spec(
        "xclaim",
        -6,
        W,
        KEY1,
        "stream",
        "Changes the owner of pending entries.",
        Data(claim::xclaim),
    ),
    spec(
        "xautoclaim",
        -6,
        W,
        KEY1,
        "stream",
        "Claims idle pending entries.",
        Data(claim::xautoclaim),
    ),
    spec(
        "xinfo",
        -2,
        R,
        KEY2,
        "stream",
        "Describes a stream, its groups or consumers.",
        Data(xinfo::xinfo),
    ),
];

/// A BLOCK argument in milliseconds (0: forever), with Redis's errors.
pub(crate) fn timeout_ms(arg: &[u8]) -> CmdResult<u64> {
    let t = super::parse_i64(arg)
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    u64::try_from(t).map_err(|_| CmdError::err("timeout is negative"))
}
