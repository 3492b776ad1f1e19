//! Incremental parser for Redis requests: RESP2 multibulk (`*N\r\n$len\r\n<bytes>\r\n...`)
//! and Redis "inline" commands (`SET k "v"\r\n`).
//!
//! The behaviour follows Redis 7.0 (`networking.c`: `processMultibulkBuffer`,
//! `processInlineBuffer`, and `sdssplitargs` for inline argument splitting), including its
//! error messages, which [`ProtocolError`]'s `Display` reproduces.
//!
//! # Limits
//!
//! * [`Limits::max_args`] (default [`MAX_ARGS_DEFAULT`], 1 Mi): the largest multibulk count
//!   `*N`; larger counts are [`ProtocolError::InvalidMultibulkLength`].
//! * [`Limits::max_bulk`] (default [`MAX_BULK_DEFAULT`], 512 MiB, Redis'
//!   `proto-max-bulk-len`): the largest bulk length `$len`; larger (or negative) lengths are
//!   [`ProtocolError::InvalidBulkLength`].
//! * [`MAX_INLINE`] (64 KiB): the longest inline request line and the longest `*N` / `$len`
//!   header line. The line terminator must appear within the first `MAX_INLINE + 1` bytes of
//!   the line, otherwise the request fails with [`ProtocolError::TooBigInline`],
//!   [`ProtocolError::TooBigMbulkCount`] or [`ProtocolError::TooBigBulkCount`]. (Redis
//!   accepts a terminator further away if it happens to arrive in the same read; bounding the
//!   search window makes the outcome independent of how the input is split into reads.)
//!
//! # Memory
//!
//! Memory use is bounded by the bytes actually received, never by a declared length: a
//! `*1000000` or `$536870912` header reserves nothing. An argument is copied into the
//! [`Command`] arena only once its whole body is present in the caller's buffer, so the
//! arena never holds more than the bytes the peer has really sent (times the `Vec` growth
//! factor). The arena is reused from one command to the next; if one huge command made it
//! grow beyond 1 MiB it is released when the next command starts, so a single big request
//! does not pin memory for the rest of the connection.
//!
//! # Incrementality
//!
//! [`Parser::parse`] is called with the connection's unconsumed input each time more bytes
//! arrive. The parser remembers how far it got (the phase, the offset of the next header or
//! body, how far it already searched for a line terminator, the pending bulk length and the
//! arguments complete so far), so every byte is examined O(1) times: a request arriving one
//! byte per read costs O(total bytes), not O(n²).
//!
//! # Ownership
//!
//! One [`Parser`] belongs to one connection: its state describes that connection's input
//! stream. It is not meant to be shared between threads or connections (it is `Send`, so a
//! connection may move between threads, but it needs `&mut` for every call).

use std::fmt;

/// Default largest bulk length (Redis `proto-max-bulk-len`): 512 MiB.
pub const MAX_BULK_DEFAULT: usize = 512 << 20;
/// Default largest number of multibulk elements: 1 Mi.
pub const MAX_ARGS_DEFAULT: usize = 1024 * 1024;
/// Largest inline request line, and largest `*N` / `$len` header line: 64 KiB.
pub const MAX_INLINE: usize = 64 << 10;

/// Arena capacity (bytes) above which [`Command`] releases its buffer when reused.
const ARENA_RETAIN_MAX: usize = 1 << 20;
/// Span-vector capacity (entries, 16 bytes each: 1 MiB) above which it is released.
const SPANS_RETAIN_MAX: usize = 1 << 16;

/// Request size limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk length (`$len`), in bytes.
    pub max_bulk: usize,
    /// Largest accepted multibulk element count (`*N`).
    pub max_args: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: MAX_BULK_DEFAULT,
            max_args: MAX_ARGS_DEFAULT,
        }
    }
}

/// A protocol error: the connection gets `-ERR Protocol error: <Display>` and is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The `*N` count is not a strict decimal integer, or exceeds [`Limits::max_args`].
    InvalidMultibulkLength,
    /// The `$len` length is not a strict decimal integer, is negative, or exceeds
    /// [`Limits::max_bulk`].
    InvalidBulkLength,
    /// A multibulk element header did not start with `$`; holds the byte found instead.
    ExpectedDollar(u8),
    /// An inline request has an unterminated quote, or a closing quote not followed by
    /// whitespace or the end of the line.
    UnbalancedQuotes,
    /// No `\n` within [`MAX_INLINE`] bytes of an inline request.
    TooBigInline,
    /// No `\r` within [`MAX_INLINE`] bytes of a `*N` header.
    TooBigMbulkCount,
    /// No `\r` within [`MAX_INLINE`] bytes of a `$len` header.
    TooBigBulkCount,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedDollar(b) => write!(f, "expected '$', got '{}'", *b as char),
            ProtocolError::UnbalancedQuotes => f.write_str("unbalanced quotes in request"),
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::TooBigMbulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One parsed command: its arguments, stored in a reusable arena.
#[derive(Debug, Default, Clone)]
pub struct Command {
    /// All argument bytes, back to back.
    data: Vec<u8>,
    /// `(start, end)` of each argument in `data`.
    spans: Vec<(usize, usize)>,
}

impl Command {
    /// Number of arguments (the command name included).
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True if the command has no arguments (a blank inline line, `*0`, `*-1`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`; an empty slice if `i >= len()` (never panics).
    #[must_use]
    pub fn arg(&self, i: usize) -> &[u8] {
        self.spans
            .get(i)
            .and_then(|&(s, e)| self.data.get(s..e))
            .unwrap_or(&[])
    }

    /// The arguments, in order.
    pub fn args(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .map(move |&(s, e)| self.data.get(s..e).unwrap_or(&[]))
    }

    /// A command made of `args` (tests, a blocking command parked with rewritten
    /// arguments, GEOADD, which runs ZADD, and `redis.call` in scripts).
    pub(crate) fn from_args<A: AsRef<[u8]>>(args: &[A]) -> Command {
        let mut c = Command::default();
        for a in args {
            c.push_arg(a.as_ref());
        }
        c
    }

    /// The arguments as owned vectors.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.args().map(<[u8]>::to_vec).collect()
    }

    /// Empties the command, keeping the arena's capacity unless it grew beyond the
    /// retention bound.
    fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        if self.data.capacity() > ARENA_RETAIN_MAX {
            self.data = Vec::new();
        }
        if self.spans.capacity() > SPANS_RETAIN_MAX {
            self.spans = Vec::new();
        }
    }

    /// Appends one complete argument.
    fn push_arg(&mut self, bytes: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.spans.push((start, self.data.len()));
    }
}

/// Where the parser is within the pending command.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// At a command boundary; the command type is not known yet.
    #[default]
    Start,
    /// Inline request: searching for `\n`.
    Inline,
    /// Multibulk: searching for the `\r` ending the `*N` line.
    Count,
    /// Multibulk: searching for the `\r` ending a `$len` line.
    BulkHeader,
    /// Multibulk: waiting for a body of this many bytes plus its 2-byte terminator.
    BulkBody(usize),
}

/// Incremental request parser for one connection. See the [module docs](self).
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    phase: Phase,
    /// Offset in the caller's buffer of the next unparsed header line or bulk body.
    pos: usize,
    /// Offset from which to continue searching for the current line's terminator
    /// (everything in `pos..scan` is known not to contain it).
    scan: usize,
    /// Multibulk elements still to be read.
    remaining: usize,
    /// Length of the buffer passed to the last `parse` call.
    seen: usize,
    /// The command being assembled, or the last completed one.
    cmd: Command,
}

impl Parser {
    /// Changes the limits (from the next command on).
    pub(crate) fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// A parser enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Parser {
        Parser {
            limits,
            ..Parser::default()
        }
    }

    /// Parses the next command from `buf`, which holds the connection's unconsumed input,
    /// beginning at a command boundary. Returns Ok(None) if `buf` does not yet hold a
    /// complete command (the caller appends more bytes and calls again with the SAME prefix
    /// plus the new bytes; the parser remembers how far it got so that work is not redone:
    /// a command arriving one byte per call costs O(total bytes), not O(n^2)).
    /// Returns Ok(Some(consumed)) when a command is complete: the caller drops `consumed`
    /// bytes from the front of its buffer; the command is then available via `command()`
    /// until the next `parse` call. A command may have zero arguments (blank inline line,
    /// `*0\r\n`, `*-1\r\n`): the caller ignores it, as Redis does.
    ///
    /// # Errors
    /// A [`ProtocolError`] for malformed input or input over the limits.
    ///
    /// On `Err` the connection must be closed; the parser is reset to a command boundary.
    /// If `buf` is shorter than the buffer of the previous incomplete call (a broken
    /// contract), the pending command is discarded and parsing restarts at `buf`'s start.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        if self.phase == Phase::Start || buf.len() < self.seen {
            self.reset();
        }
        self.seen = buf.len();
        match self.step(buf) {
            Ok(Some(consumed)) => {
                // The command stays readable in `cmd` until the next call.
                self.phase = Phase::Start;
                self.pos = 0;
                self.scan = 0;
                self.remaining = 0;
                self.seen = 0;
                Ok(Some(consumed))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.reset();
                Err(e)
            }
        }
    }

    /// The last completed command (valid after `parse` returned `Ok(Some(_))`, until the
    /// next `parse` call).
    #[must_use]
    pub fn command(&self) -> &Command {
        &self.cmd
    }

    /// Bytes the parser currently expects before the pending command can complete, if known
    /// (for a partially received bulk: remaining bulk bytes + 2). Lets the caller size reads.
    #[must_use]
    pub fn pending_hint(&self) -> Option<usize> {
        match self.phase {
            Phase::BulkBody(len) => {
                let end = self.pos.checked_add(len)?.checked_add(2)?;
                Some(end.saturating_sub(self.seen))
            }
            _ => None,
        }
    }

    /// Back to a command boundary with an empty command.
    fn reset(&mut self) {
        self.phase = Phase::Start;
        self.pos = 0;
        self.scan = 0;
        self.remaining = 0;
        self.seen = 0;
        self.cmd.clear();
    }

    /// Advances through `buf` as far as possible; `Ok(Some(consumed))` once the command is
    /// complete.
    fn step(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        loop {
            match self.phase {
                Phase::Start => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    self.phase = if first == b'*' {
                        Phase::Count
                    } else {
                        Phase::Inline
                    };
                }
                Phase::Inline => {
                    let Some(nl) = self.find(buf, b'\n', ProtocolError::TooBigInline)? else {
                        return Ok(None);
                    };
                    let line = buf.get(self.pos..nl).unwrap_or(&[]);
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    split_inline(line, &mut self.cmd)?;
                    return Ok(Some(nl.saturating_add(1)));
                }
                Phase::Count => {
                    let Some(cr) = self.find_crlf(buf, ProtocolError::TooBigMbulkCount)? else {
                        return Ok(None);
                    };
                    let digits = buf.get(self.pos.saturating_add(1)..cr).unwrap_or(&[]);
                    let n = parse_i64(digits).ok_or(ProtocolError::InvalidMultibulkLength)?;
                    self.advance(cr.saturating_add(2));
                    if n <= 0 {
                        return Ok(Some(self.pos));
                    }
                    let n = usize::try_from(n)
                        .ok()
                        .filter(|&n| n <= self.limits.max_args)
                        .ok_or(ProtocolError::InvalidMultibulkLength)?;
                    self.remaining = n;
                    self.phase = Phase::BulkHeader;
                }
                Phase::BulkHeader => {
                    let Some(cr) = self.find_crlf(buf, ProtocolError::TooBigBulkCount)? else {
                        return Ok(None);
                    };
                    let first = buf.get(self.pos).copied().unwrap_or(b'\r');
                    if first != b'$' {
                        return Err(ProtocolError::ExpectedDollar(first));
                    }
                    let digits = buf.get(self.pos.saturating_add(1)..cr).unwrap_or(&[]);
                    let len = parse_i64(digits)
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n <= self.limits.max_bulk)
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    let body = cr.saturating_add(2);
                    // The end offset must be representable (only an issue on 32-bit targets).
                    body.checked_add(len)
                        .and_then(|e| e.checked_add(2))
                        .ok_or(ProtocolError::InvalidBulkLength)?;
                    self.advance(body);
                    self.phase = Phase::BulkBody(len);
                }
                Phase::BulkBody(len) => {
                    let body_end = self.pos.saturating_add(len);
                    let end = body_end.saturating_add(2);
                    if buf.len() < end {
                        return Ok(None);
                    }
                    // Like Redis, the two bytes after the body are skipped unchecked.
                    let body = buf.get(self.pos..body_end).unwrap_or(&[]);
                    self.cmd.push_arg(body);
                    self.advance(end);
                    self.remaining = self.remaining.saturating_sub(1);
                    if self.remaining == 0 {
                        return Ok(Some(self.pos));
                    }
                    self.phase = Phase::BulkHeader;
                }
            }
        }
    }

    /// Moves to the next header line or body at `to`.
    fn advance(&mut self, to: usize) {
        self.pos = to;
        self.scan = to;
    }

    /// Searches for `needle` in the line starting at `self.pos`, within the first
    /// `MAX_INLINE + 1` bytes of the line, resuming where the previous search stopped.
    /// Returns its offset in `buf`; `Ok(None)` if not present yet; `Err(too_big)` if the
    /// window is full without it.
    fn find(
        &mut self,
        buf: &[u8],
        needle: u8,
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        let window_end = buf
            .len()
            .min(self.pos.saturating_add(MAX_INLINE).saturating_add(1));
        let from = self.scan.max(self.pos);
        let hay = buf.get(from..window_end).unwrap_or(&[]);
        if let Some(off) = hay.iter().position(|&b| b == needle) {
            let at = from.saturating_add(off);
            self.scan = at;
            return Ok(Some(at));
        }
        self.scan = window_end.max(from);
        if buf.len().saturating_sub(self.pos) > MAX_INLINE {
            return Err(too_big);
        }
        Ok(None)
    }

    /// Like [`Parser::find`] for `\r`, but also requires the byte after it (the `\n`, which
    /// Redis skips without checking) to be present.
    fn find_crlf(
        &mut self,
        buf: &[u8],
        too_big: ProtocolError,
    ) -> Result<Option<usize>, ProtocolError> {
        match self.find(buf, b'\r', too_big)? {
            Some(cr) if cr.saturating_add(1) < buf.len() => Ok(Some(cr)),
            _ => Ok(None),
        }
    }
}

/// Parses a strict decimal `i64` as Redis `string2ll` does: an optional `-`, then digits
/// with no leading zero (`0` itself is allowed, `-0` is not), no sign `+`, no spaces.
fn parse_i64(s: &[u8]) -> Option<i64> {
    match s {
        [b'0'] => Some(0),
        [b'-', digits @ ..] => {
            let m = parse_magnitude(digits)?;
            if m == 1u64 << 63 {
                Some(i64::MIN)
            } else {
                i64::try_from(m).ok().map(|v| -v)
            }
        }
        _ => i64::try_from(parse_magnitude(s)?).ok(),
    }
}

/// Digits `[1-9][0-9]*` as a `u64`; `None` if empty, malformed or overflowing.
fn parse_magnitude(s: &[u8]) -> Option<u64> {
    let (&first, _) = s.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// C `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Value of an ASCII hex digit.
fn hex_val(b: Option<u8>) -> Option<u8> {
    let b = b?;
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline request line (without its line terminator) into arguments, appending
/// them to `cmd`, like Redis `sdssplitargs`:
///
/// * arguments are separated by whitespace (`isspace`);
/// * `"..."` supports `\n \r \t \b \a \xHH` and `\<any>` (= that byte);
/// * `'...'` supports only `\'`;
/// * a quote may open mid-argument (`a"b c"` is `ab c`), but a closing quote must be
///   followed by whitespace or the end of the line;
/// * an unterminated quote is an error.
///
/// Unlike the C code, a NUL byte is an ordinary byte (C stops at it).
fn split_inline(line: &[u8], cmd: &mut Command) -> Result<(), ProtocolError> {
    let at = |i: usize| line.get(i).copied();
    // A closing quote at `i` must be followed by whitespace or the end.
    let close_ok = |i: usize| !matches!(at(i.saturating_add(1)), Some(b) if !is_space(b));
    let mut p = 0usize;
    loop {
        while at(p).is_some_and(is_space) {
            p = p.saturating_add(1);
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = cmd.data.len();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            let c = at(p);
            if in_double {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') => {
                        let next = at(p.saturating_add(1));
                        let hi = hex_val(at(p.saturating_add(2)));
                        let lo = hex_val(at(p.saturating_add(3)));
                        match (next, hi, lo) {
                            (Some(b'x'), Some(hi), Some(lo)) => {
                                cmd.data.push(hi.wrapping_mul(16).wrapping_add(lo));
                                p = p.saturating_add(4);
                            }
                            (Some(e), _, _) => {
                                cmd.data.push(match e {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => 0x08,
                                    b'a' => 0x07,
                                    other => other,
                                });
                                p = p.saturating_add(2);
                            }
                            // A trailing backslash: kept, then the quote is unterminated.
                            (None, _, _) => {
                                cmd.data.push(b'\\');
                                p = p.saturating_add(1);
                            }
                        }
                    }
                    Some(b'"') => {
                        if !close_ok(p) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        p = p.saturating_add(1);
                        break;
                    }
                    Some(b) => {
                        cmd.data.push(b);
                        p = p.saturating_add(1);
                    }
                }
            } else if in_single {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') if at(p.saturating_add(1)) == Some(b'\'') => {
                        cmd.data.push(b'\'');
                        p = p.saturating_add(2);
                    }
                    Some(b'\'') => {
                        if !close_ok(p) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        p = p.saturating_add(1);
                        break;
                    }
                    Some(b) => {
                        cmd.data.push(b);
                        p = p.saturating_add(1);
                    }
                }
            } else {
                match c {
                    None => break,
                    // Only these end an unquoted argument (not \v or \f), as in Redis.
                    Some(b' ' | b'\n' | b'\r' | b'\t') => {
                        p = p.saturating_add(1);
                        break;
                    }
                    Some(b'"') => {
                        in_double = true;
                        p = p.saturating_add(1);
                    }
                    Some(b'\'') => {
                        in_single = true;
                        p = p.saturating_add(1);
                    }
                    Some(b) => {
                        cmd.data.push(b);
                        p = p.saturating_add(1);
                    }
                }
            }
        }
        cmd.spans.push((start, cmd.data.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What parsing a byte stream produced, in order.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Outcome {
        Cmd(Vec<Vec<u8>>),
        Err(ProtocolError),
        /// Input ended with this many bytes of an incomplete command.
        Incomplete(usize),
    }

    /// Feeds `data` to a fresh parser: the visible input grows by `next_chunk()` bytes at a
    /// time (always a prefix of the unconsumed data: consumed bytes are dropped from the
    /// front), until everything is parsed, an error occurs, or the data runs out.
    fn feed(data: &[u8], limits: Limits, mut next_chunk: impl FnMut() -> usize) -> Vec<Outcome> {
        let mut p = Parser::new(limits);
        let mut out = Vec::new();
        let (mut start, mut end) = (0usize, 0usize);
        loop {
            match p.parse(&data[start..end]) {
                Ok(Some(n)) => {
                    assert!(n > 0, "a command consumed no bytes");
                    assert!(start + n <= end, "consumed more than was given");
                    out.push(Outcome::Cmd(p.command().to_vecs()));
                    assert_eq!(p.command().len(), p.command().args().count());
                    start += n;
                }
                Ok(None) => {
                    if end == data.len() {
                        if start < end {
                            out.push(Outcome::Incomplete(end - start));
                        }
                        return out;
                    }
                    end = (end + next_chunk().max(1)).min(data.len());
                }
                Err(e) => {
                    out.push(Outcome::Err(e));
                    return out;
                }
            }
        }
    }

    fn one_shot(data: &[u8], limits: Limits) -> Vec<Outcome> {
        feed(data, limits, || usize::MAX)
    }

    fn bytewise(data: &[u8], limits: Limits) -> Vec<Outcome> {
        feed(data, limits, || 1)
    }

    fn chunked(data: &[u8], limits: Limits, sizes: &[usize]) -> Vec<Outcome> {
        let mut i = 0;
        feed(data, limits, || {
            let s = sizes.get(i % sizes.len().max(1)).copied().unwrap_or(1);
            i += 1;
            s
        })
    }

    fn cmd(args: &[&[u8]]) -> Outcome {
        Outcome::Cmd(args.iter().map(|a| a.to_vec()).collect())
    }

    fn encode_multibulk(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Inline encoding with every argument double-quoted and every byte `\xHH`-escaped.
    fn encode_inline(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'"');
            for b in a {
                out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
            out.push(b'"');
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    fn parse_all(data: &[u8]) -> Vec<Outcome> {
        let all = one_shot(data, Limits::default());
        assert_eq!(all, bytewise(data, Limits::default()), "bytewise differs");
        all
    }

    fn err_of(data: &[u8], limits: Limits) -> ProtocolError {
        let mut p = Parser::new(limits);
        match p.parse(data) {
            Err(e) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn basic_multibulk() {
        let data = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.parse(data), Ok(Some(data.len())));
        let c = p.command();
        assert_eq!(c.len(), 3);
        assert!(!c.is_empty());
        assert_eq!(c.arg(0), b"SET");
        assert_eq!(c.arg(1), b"key");
        assert_eq!(c.arg(2), b"value");
        assert_eq!(c.arg(3), b"");
        assert_eq!(
            c.args().collect::<Vec<_>>(),
            vec![&b"SET"[..], b"key", b"value"]
        );
        assert_eq!(
            c.to_vecs(),
            vec![b"SET".to_vec(), b"key".to_vec(), b"value".to_vec()]
        );
        // Empty input at a boundary: nothing to do.
        assert_eq!(p.parse(b""), Ok(None));
        assert!(p.command().is_empty());
    }

    #[test]
    fn incomplete_then_complete() {
        let data = b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n";
        let mut p = Parser::new(Limits::default());
        for end in 0..data.len() {
            assert_eq!(p.parse(&data[..end]), Ok(None), "prefix {end}");
        }
        assert_eq!(p.parse(data), Ok(Some(data.len())));
        assert_eq!(
            p.command().to_vecs(),
            vec![b"ECHO".to_vec(), b"hi".to_vec()]
        );
    }

    #[test]
    fn pipelined() {
        let data =
            b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nECHO x\n*1\r\n$1\r\n";
        assert_eq!(
            parse_all(data),
            vec![
                cmd(&[b"PING"]),
                cmd(&[b"GET", b"k"]),
                cmd(&[b"PING"]),
                cmd(&[b"ECHO", b"x"]),
                Outcome::Incomplete(8),
            ]
        );
        // Consumed counts are exact.
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.parse(data), Ok(Some(14)));
        assert_eq!(p.parse(&data[14..]), Ok(Some(20)));
        assert_eq!(p.parse(&data[34..]), Ok(Some(6)));
        assert_eq!(p.parse(&data[40..]), Ok(Some(7)));
        assert_eq!(p.parse(&data[47..]), Ok(None));
        assert_eq!(data.len(), 55);
    }

    #[test]
    fn inline_plain_and_quoted() {
        assert_eq!(
            parse_all(b"SET  key\tvalue \r\n"),
            vec![cmd(&[b"SET", b"key", b"value"])]
        );
        // Bare \n terminator; \r inside the line separates.
        assert_eq!(parse_all(b"a\rb\n"), vec![cmd(&[b"a", b"b"])]);
        assert_eq!(
            parse_all(b"SET \"a b\" 'c d'\r\n"),
            vec![cmd(&[b"SET", b"a b", b"c d"])]
        );
        assert_eq!(
            parse_all(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\x41\\xfF\\q\\x4\"\n"),
            vec![cmd(&[b"\n\r\t\x08\x07\\\"A\xffqx4"])]
        );
        assert_eq!(
            parse_all(b"'it\\'s' '\\n\\x41'\n"),
            vec![cmd(&[b"it's", b"\\n\\x41"])]
        );
        // Quotes opening mid-argument; empty quoted arguments.
        assert_eq!(
            parse_all(b"ab\"c d\" '' \"\"\n"),
            vec![cmd(&[b"abc d", b"", b""])]
        );
        // \v and \f separate leading blanks but do not end an unquoted argument.
        assert_eq!(parse_all(b"\x0ba\x0cb\n"), vec![cmd(&[b"a\x0cb"])]);
        // A closing quote followed by \v is fine (isspace).
        assert_eq!(parse_all(b"\"a\"\x0bb\n"), vec![cmd(&[b"a", b"b"])]);
        // NUL is an ordinary byte; high bytes too.
        assert_eq!(parse_all(b"a\0b \xff\n"), vec![cmd(&[b"a\0b", b"\xff"])]);
    }

    #[test]
    fn empty_commands() {
        assert_eq!(
            parse_all(b"\r\n\n   \r\n*0\r\n*-1\r\n*-100\r\n"),
            vec![cmd(&[]), cmd(&[]), cmd(&[]), cmd(&[]), cmd(&[]), cmd(&[])]
        );
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.parse(b"*0\r\n"), Ok(Some(4)));
        assert!(p.command().is_empty());
        assert_eq!(p.command().len(), 0);
        // A bulk of length 0.
        assert_eq!(parse_all(b"*1\r\n$0\r\n\r\n"), vec![cmd(&[b""])]);
    }

    #[test]
    fn binary_safe_bulk() {
        let args = vec![
            b"\0\r\n\0".to_vec(),
            b"*1\r\n$3\r\n".to_vec(),
            vec![0xff; 3],
        ];
        let data = encode_multibulk(&args);
        assert_eq!(parse_all(&data), vec![Outcome::Cmd(args)]);
    }

    #[test]
    fn bulk_terminator_is_skipped_unchecked() {
        // Like Redis: the 2 bytes after a bulk body and the byte after a header's '\r' are
        // not inspected.
        assert_eq!(parse_all(b"*1\rX$2\rYabZZ"), vec![cmd(&[b"ab"])]);
    }

    #[test]
    fn error_display() {
        let cases: &[(ProtocolError, &str)] = &[
            (
                ProtocolError::InvalidMultibulkLength,
                "invalid multibulk length",
            ),
            (ProtocolError::InvalidBulkLength, "invalid bulk length"),
            (ProtocolError::ExpectedDollar(b'x'), "expected '$', got 'x'"),
            (
                ProtocolError::UnbalancedQuotes,
                "unbalanced quotes in request",
            ),
            (ProtocolError::TooBigInline, "too big inline request"),
            (
                ProtocolError::TooBigMbulkCount,
                "too big mbulk count string",
            ),
            (ProtocolError::TooBigBulkCount, "too big bulk count string"),
        ];
        for (e, s) in cases {
            assert_eq!(e.to_string(), *s);
        }
        let e: Box<dyn std::error::Error> = Box::new(ProtocolError::TooBigInline);
        assert_eq!(e.to_string(), "too big inline request");
    }

    #[test]
    fn error_invalid_multibulk_length() {
        let l = Limits::default();
        for bad in [
            &b"*\r\n"[..],
            b"*x\r\n",
            b"*1x\r\n",
            b"*+1\r\n",
            b"*01\r\n",
            b"*-0\r\n",
            b"*-\r\n",
            b"* 1\r\n",
            b"*1 \r\n",
            b"*9223372036854775808\r\n",
            b"*99999999999999999999999\r\n",
            b"*1\0\r\n",
        ] {
            assert_eq!(
                err_of(bad, l),
                ProtocolError::InvalidMultibulkLength,
                "{bad:?}"
            );
        }
        // i64::MIN is a valid (empty) count.
        let mut p = Parser::new(l);
        assert_eq!(p.parse(b"*-9223372036854775808\r\n"), Ok(Some(23)));
        assert!(p.command().is_empty());
    }

    #[test]
    fn error_invalid_bulk_length() {
        let l = Limits::default();
        for bad in [
            &b"*1\r\n$\r\n"[..],
            b"*1\r\n$-1\r\n",
            b"*1\r\n$-0\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$a\r\n",
            b"*1\r\n$+3\r\n",
            b"*1\r\n$9223372036854775807\r\n",
            b"*2\r\n$1\r\na\r\n$x\r\n",
        ] {
            assert_eq!(err_of(bad, l), ProtocolError::InvalidBulkLength, "{bad:?}");
        }
    }

    #[test]
    fn error_expected_dollar() {
        let l = Limits::default();
        assert_eq!(
            err_of(b"*1\r\n:3\r\n", l),
            ProtocolError::ExpectedDollar(b':')
        );
        assert_eq!(
            err_of(b"*1\r\n\r\n", l),
            ProtocolError::ExpectedDollar(b'\r')
        );
        assert_eq!(
            err_of(b"*2\r\n$1\r\na\r\nGET\r\n", l),
            ProtocolError::ExpectedDollar(b'G')
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(b'G').to_string(),
            "expected '$', got 'G'"
        );
        // Like Redis, the '$' is checked once the whole header line is present.
        let mut p = Parser::new(l);
        assert_eq!(p.parse(b"*1\r\nX"), Ok(None));
        assert_eq!(
            p.parse(b"*1\r\nX\r\n"),
            Err(ProtocolError::ExpectedDollar(b'X'))
        );
    }

    #[test]
    fn error_unbalanced_quotes() {
        let l = Limits::default();
        for bad in [
            &b"\"abc\n"[..],
            b"'abc\n",
            b"\"abc\"def\n",
            b"'abc'def\n",
            b"\"abc\\\"\n",
            b"'abc\\'\n",
            b"\"\\\n",
            b"a \"b\"\"c\"\n",
        ] {
            assert_eq!(err_of(bad, l), ProtocolError::UnbalancedQuotes, "{bad:?}");
        }
    }

    #[test]
    fn error_too_big_inline() {
        let l = Limits::default();
        let mut data = vec![b'a'; MAX_INLINE];
        let mut p = Parser::new(l);
        assert_eq!(p.parse(&data), Ok(None));
        data.push(b'a');
        assert_eq!(p.parse(&data), Err(ProtocolError::TooBigInline));
        // A newline just inside the window is accepted...
        let mut ok = vec![b'a'; MAX_INLINE];
        ok.push(b'\n');
        assert_eq!(Parser::new(l).parse(&ok), Ok(Some(MAX_INLINE + 1)));
        // ...one byte further it is not, even when present in the same read.
        let mut far = vec![b'a'; MAX_INLINE + 1];
        far.push(b'\n');
        assert_eq!(err_of(&far, l), ProtocolError::TooBigInline);
        assert_eq!(one_shot(&far, l), bytewise(&far, l));
    }

    #[test]
    fn error_too_big_mbulk_count() {
        let l = Limits::default();
        let mut data = b"*".to_vec();
        data.resize(MAX_INLINE, b'1');
        let mut p = Parser::new(l);
        assert_eq!(p.parse(&data), Ok(None));
        data.push(b'1');
        assert_eq!(p.parse(&data), Err(ProtocolError::TooBigMbulkCount));
        // A '\r' inside the window makes it a (malformed) count instead.
        let mut inside = b"*".to_vec();
        inside.resize(MAX_INLINE, b'1');
        inside.extend_from_slice(b"\r\n");
        assert_eq!(err_of(&inside, l), ProtocolError::InvalidMultibulkLength);
    }

    #[test]
    fn error_too_big_bulk_count() {
        let l = Limits::default();
        let mut data = b"*1\r\n$".to_vec();
        data.resize(4 + MAX_INLINE, b'1');
        let mut p = Parser::new(l);
        assert_eq!(p.parse(&data), Ok(None));
        data.push(b'1');
        assert_eq!(p.parse(&data), Err(ProtocolError::TooBigBulkCount));
        assert_eq!(one_shot(&data, l), bytewise(&data, l));
    }

    #[test]
    fn default_limits() {
        let l = Limits::default();
        assert_eq!(l.max_bulk, 512 << 20);
        assert_eq!(l.max_args, 1 << 20);
        assert_eq!(Parser::default().limits, l);

        let mut p = Parser::new(l);
        assert_eq!(p.parse(b"*1048576\r\n"), Ok(None));
        assert_eq!(
            err_of(b"*1048577\r\n", l),
            ProtocolError::InvalidMultibulkLength
        );

        let max = format!("*1\r\n${}\r\n", 512 << 20);
        let mut p = Parser::new(l);
        assert_eq!(p.parse(max.as_bytes()), Ok(None));
        assert_eq!(p.pending_hint(), Some((512 << 20) + 2));
        let over = format!("*1\r\n${}\r\n", (512 << 20) + 1);
        assert_eq!(err_of(over.as_bytes(), l), ProtocolError::InvalidBulkLength);
    }

    #[test]
    fn custom_limits() {
        let l = Limits {
            max_bulk: 4,
            max_args: 2,
        };
        assert_eq!(
            one_shot(b"*2\r\n$4\r\nabcd\r\n$0\r\n\r\n", l),
            vec![cmd(&[b"abcd", b""])]
        );
        assert_eq!(err_of(b"*3\r\n", l), ProtocolError::InvalidMultibulkLength);
        assert_eq!(err_of(b"*1\r\n$5\r\n", l), ProtocolError::InvalidBulkLength);
        let zero = Limits {
            max_bulk: 0,
            max_args: 0,
        };
        assert_eq!(one_shot(b"*0\r\n", zero), vec![cmd(&[])]);
        assert_eq!(
            err_of(b"*1\r\n", zero),
            ProtocolError::InvalidMultibulkLength
        );
        // Inline requests are bounded by MAX_INLINE only.
        assert_eq!(
            one_shot(b"a b c d\n", l),
            vec![cmd(&[b"a", b"b", b"c", b"d"])]
        );
    }

    #[test]
    fn declared_sizes_do_not_allocate() {
        let mut p = Parser::new(Limits::default());
        let data = b"*1048576\r\n$536870912\r\nabc";
        assert_eq!(p.parse(data), Ok(None));
        assert_eq!(p.pending_hint(), Some(536_870_912 + 2 - 3));
        assert!(p.cmd.data.capacity() < 1024, "{}", p.cmd.data.capacity());
        assert!(p.cmd.spans.capacity() < 1024, "{}", p.cmd.spans.capacity());

        // Complete args are copied, the partial one is not.
        let mut p = Parser::new(Limits::default());
        let data = b"*3\r\n$1\r\na\r\n$536870912\r\nxyz";
        assert_eq!(p.parse(data), Ok(None));
        assert_eq!(p.cmd.data.len(), 1);
        assert!(p.cmd.data.capacity() < 1024);
    }

    #[test]
    fn arena_reused_and_shrunk() {
        let mut p = Parser::new(Limits::default());
        let small = encode_multibulk(&[vec![b'x'; 1000]]);
        assert_eq!(p.parse(&small), Ok(Some(small.len())));
        let cap = p.cmd.data.capacity();
        assert!(cap >= 1000);
        assert_eq!(p.parse(&small), Ok(Some(small.len())));
        assert_eq!(p.cmd.data.capacity(), cap, "arena reused");

        let big = encode_multibulk(&[vec![b'y'; 2 << 20]]);
        assert_eq!(p.parse(&big), Ok(Some(big.len())));
        assert_eq!(p.command().arg(0).len(), 2 << 20);
        assert!(p.cmd.data.capacity() >= 2 << 20);
        assert_eq!(p.parse(&small), Ok(Some(small.len())));
        assert!(p.cmd.data.capacity() <= ARENA_RETAIN_MAX);
        assert_eq!(p.command().to_vecs(), vec![vec![b'x'; 1000]]);
    }

    #[test]
    fn pending_hint_tracks_bulk() {
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.pending_hint(), None);
        assert_eq!(p.parse(b"*2\r\n$10\r\n"), Ok(None));
        assert_eq!(p.pending_hint(), Some(12));
        assert_eq!(p.parse(b"*2\r\n$10\r\n0123"), Ok(None));
        assert_eq!(p.pending_hint(), Some(8));
        assert_eq!(p.parse(b"*2\r\n$10\r\n0123456789\r"), Ok(None));
        assert_eq!(p.pending_hint(), Some(1));
        assert_eq!(p.parse(b"*2\r\n$10\r\n0123456789\r\n$"), Ok(None));
        assert_eq!(p.pending_hint(), None);
    }

    #[test]
    fn large_inputs_bytewise() {
        // A 1 MiB bulk and a near-limit inline line, one byte per call (O(n) overall).
        let big = encode_multibulk(&[b"SET".to_vec(), vec![7u8; 1 << 20]]);
        assert_eq!(
            bytewise(&big, Limits::default()),
            vec![Outcome::Cmd(vec![b"SET".to_vec(), vec![7u8; 1 << 20]])]
        );
        let mut line = vec![b'z'; MAX_INLINE - 2];
        line.extend_from_slice(b"\r\n");
        assert_eq!(
            bytewise(&line, Limits::default()),
            vec![Outcome::Cmd(vec![vec![b'z'; MAX_INLINE - 2]])]
        );
    }

    #[test]
    fn error_resets_parser() {
        let mut p = Parser::new(Limits::default());
        assert_eq!(
            p.parse(b"*1\r\n$x\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert!(p.command().is_empty());
        assert_eq!(p.parse(b"PING\r\n"), Ok(Some(6)));
        assert_eq!(p.command().to_vecs(), vec![b"PING".to_vec()]);
    }

    #[test]
    fn shrunk_buffer_restarts() {
        // Contract violation: a shorter buffer mid-command restarts parsing, no panic.
        let mut p = Parser::new(Limits::default());
        assert_eq!(p.parse(b"*2\r\n$3\r\nabc\r\n$2\r\nx"), Ok(None));
        assert_eq!(p.parse(b"*1\r\n$1\r\nq\r\n"), Ok(Some(11)));
        assert_eq!(p.command().to_vecs(), vec![b"q".to_vec()]);
    }

    /// Bytes biased towards protocol tokens.
    fn protocolish() -> impl Strategy<Value = Vec<u8>> {
        let token = prop_oneof![
            Just(b"*".to_vec()),
            Just(b"$".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"-".to_vec()),
            Just(b"\"".to_vec()),
            Just(b"'".to_vec()),
            Just(b"\\".to_vec()),
            Just(b"\\x".to_vec()),
            Just(b" ".to_vec()),
            (0u8..10).prop_map(|d| vec![b'0' + d]),
            (0u32..20).prop_map(|n| n.to_string().into_bytes()),
            any::<u8>().prop_map(|b| vec![b]),
        ];
        prop::collection::vec(token, 0..120).prop_map(|v| v.concat())
    }

    fn arb_commands() -> impl Strategy<Value = Vec<(bool, Vec<Vec<u8>>)>> {
        let arg = prop::collection::vec(any::<u8>(), 0..24);
        let command = (any::<bool>(), prop::collection::vec(arg, 0..6));
        prop::collection::vec(command, 0..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn encoded_commands_roundtrip(
            cmds in arb_commands(),
            sizes in prop::collection::vec(1usize..40, 1..16),
        ) {
            let mut data = Vec::new();
            let mut expected = Vec::new();
            for (inline, args) in &cmds {
                if *inline {
                    data.extend_from_slice(&encode_inline(args));
                } else {
                    data.extend_from_slice(&encode_multibulk(args));
                }
                expected.push(Outcome::Cmd(args.clone()));
            }
            let l = Limits::default();
            let all = one_shot(&data, l);
            prop_assert_eq!(&all, &expected);
            prop_assert_eq!(&bytewise(&data, l), &expected);
            prop_assert_eq!(&chunked(&data, l, &sizes), &expected);
        }

        #[test]
        fn arbitrary_bytes_consistent(
            data in prop_oneof![prop::collection::vec(any::<u8>(), 0..512), protocolish()],
            sizes in prop::collection::vec(1usize..40, 1..16),
            small in any::<bool>(),
        ) {
            let l = if small {
                Limits { max_bulk: 8, max_args: 3 }
            } else {
                Limits::default()
            };
            let all = one_shot(&data, l);
            prop_assert_eq!(&bytewise(&data, l), &all);
            prop_assert_eq!(&chunked(&data, l, &sizes), &all);
        }
    }
}
