//! Stream entry ids (`<ms>-<seq>`, two u64): parsing with Redis's rules, formatting,
//! and the 16-byte big-endian form that sorts like the ids in engine keys.
//!
//! Invariant: `StreamId`'s derived order (ms, then seq) equals the byte order of
//! [`StreamId::to_bytes`], so a range scan of namespace `0x08` visits entries in id
//! order. No shared state.

use crate::error::{CmdError, CmdResult};

/// A stream entry id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub(crate) struct StreamId {
    /// Milliseconds part.
    pub(crate) ms: u64,
    /// Sequence part.
    pub(crate) seq: u64,
}

/// Redis's error for an id it cannot parse.
pub(crate) fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

impl StreamId {
    /// The smallest id.
    pub(crate) const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The largest id.
    pub(crate) const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    pub(crate) const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// True for `0-0`.
    pub(crate) fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// The next id (`None` after the largest).
    pub(crate) fn incr(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_add(1).map(|ms| StreamId::new(ms, 0)),
        }
    }

    /// The previous id (`None` before the smallest).
    pub(crate) fn decr(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_sub(1).map(|ms| StreamId::new(ms, u64::MAX)),
        }
    }

    /// Big-endian bytes (engine key order).
    pub(crate) fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// Inverse of [`StreamId::to_bytes`] (`None`: not 16 bytes).
    pub(crate) fn from_bytes(b: &[u8]) -> Option<StreamId> {
        let ms: [u8; 8] = b.get(..8)?.try_into().ok()?;
        let seq: [u8; 8] = b.get(8..16)?.try_into().ok()?;
        (b.len() == 16).then(|| StreamId::new(u64::from_be_bytes(ms), u64::from_be_bytes(seq)))
    }

    /// `ms-seq` text.
    pub(crate) fn fmt(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }
}

/// A decimal u64 with nothing else (Redis's `string2ull`).
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// How an id argument was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Given {
    /// A full id (`ms-seq`, or `ms` with the default sequence).
    Full(StreamId),
    /// `ms-*`: the sequence is to be generated (XADD only).
    AutoSeq(u64),
}

/// Parses an id. `missing_seq` is the sequence of a bare `ms`; `strict` refuses `-`
/// and `+`; `auto_seq` accepts `ms-*`.
pub(crate) fn parse(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    auto_seq: bool,
) -> CmdResult<Given> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    match arg {
        b"-" if !strict => return Ok(Given::Full(StreamId::MIN)),
        b"+" if !strict => return Ok(Given::Full(StreamId::MAX)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&c| c == b'-') {
        Some(i) => (&arg[..i], Some(&arg[i + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid_id)?;
    match seq {
        None => Ok(Given::Full(StreamId::new(ms, missing_seq))),
        Some(b"*") if auto_seq => Ok(Given::AutoSeq(ms)),
        Some(s) => {
            let seq = parse_u64(s).ok_or_else(invalid_id)?;
            Ok(Given::Full(StreamId::new(ms, seq)))
        }
    }
}

/// A full id (`ms-*` refused).
pub(crate) fn parse_id(arg: &[u8], missing_seq: u64, strict: bool) -> CmdResult<StreamId> {
    match parse(arg, missing_seq, strict, false)? {
        Given::Full(id) => Ok(id),
        Given::AutoSeq(_) => Err(invalid_id()),
    }
}

/// A strict id (no `-`/`+`), bare `ms` meaning `ms-0`.
pub(crate) fn strict(arg: &[u8]) -> CmdResult<StreamId> {
    parse_id(arg, 0, true)
}

/// The start of a range (`-`, an id, or `(id` exclusive), as an inclusive id.
pub(crate) fn range_start(arg: &[u8]) -> CmdResult<StreamId> {
    match arg.strip_prefix(b"(") {
        Some(rest) if !rest.is_empty() => parse_id(rest, 0, true)?
            .incr()
            .ok_or_else(|| CmdError::err("invalid start ID for the interval")),
        _ => parse_id(arg, 0, false),
    }
}

/// The end of a range (`+`, an id, or `(id` exclusive), as an inclusive id.
pub(crate) fn range_end(arg: &[u8]) -> CmdResult<StreamId> {
    match arg.strip_prefix(b"(") {
        Some(rest) if !rest.is_empty() => parse_id(rest, u64::MAX, true)?
            .decr()
            .ok_or_else(|| CmdError::err("invalid end ID for the interval")),
        _ => parse_id(arg, u64::MAX, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_order() {
        assert_eq!(strict(b"5").expect("ok"), StreamId::new(5, 0));
        assert_eq!(
            parse_id(b"5", u64::MAX, false).expect("ok"),
            StreamId::new(5, u64::MAX)
        );
        assert_eq!(parse(b"7-*", 0, true, true).expect("ok"), Given::AutoSeq(7));
        assert!(strict(b"7-*").is_err());
        assert!(strict(b"-").is_err());
        assert!(strict(b"1-2-3").is_err());
        assert!(strict(b"18446744073709551616").is_err());
        assert!(strict(b"").is_err());
        assert_eq!(range_start(b"-").expect("ok"), StreamId::MIN);
        assert_eq!(range_end(b"+").expect("ok"), StreamId::MAX);
        assert_eq!(range_start(b"(1-5").expect("ok"), StreamId::new(1, 6));
        // As Redis: a bare `ms` end is `ms-MAX`, so `(2` ends at `2-(MAX-1)`.
        assert_eq!(
            range_end(b"(2").expect("ok"),
            StreamId::new(2, u64::MAX - 1)
        );
        assert_eq!(range_end(b"(2-0").expect("ok"), StreamId::new(1, u64::MAX));
        assert!(range_start(b"(-").is_err());
        assert!(range_end(b"(0-0").is_err());
        assert!(range_start(b"(18446744073709551615-18446744073709551615").is_err());
        let (a, b) = (StreamId::new(1, u64::MAX), StreamId::new(2, 0));
        assert!(a < b && a.to_bytes() < b.to_bytes());
        assert_eq!(StreamId::from_bytes(&b.to_bytes()), Some(b));
        assert_eq!(a.incr(), Some(b));
        assert_eq!(b.decr(), Some(a));
        assert_eq!(StreamId::MAX.incr(), None);
        assert_eq!(b.fmt(), "2-0");
    }
}
