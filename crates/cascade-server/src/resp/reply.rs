//! Reply encoding into a connection's output buffer, in RESP2 or (after `HELLO 3`)
//! RESP3.
//!
//! Every function appends one complete reply (or, for [`array_header`] and
//! [`map_header`], the header of an aggregate whose elements the caller appends next).
//! The protocols differ only where RESP3 has a richer type: null (`_`), maps (`%`),
//! doubles (`,`). Output is binary-safe; simple strings and errors must not contain
//! `\r` or `\n` (callers pass fixed texts; user bytes in error messages go through
//! [`sanitize`]).

use std::io::Write;

/// A connection's output buffer and the protocol it speaks.
#[derive(Debug, Default)]
pub struct Out {
    /// Encoded replies not yet written to the socket.
    pub buf: Vec<u8>,
    /// The client switched to RESP3 with `HELLO 3`.
    pub resp3: bool,
}

impl Out {
    /// An empty RESP2 buffer.
    pub fn new() -> Out {
        Out::default()
    }
}

/// `+OK`.
pub fn ok(out: &mut Out) {
    out.buf.extend_from_slice(b"+OK\r\n");
}

/// A simple string `+s`.
pub fn simple(out: &mut Out, s: &str) {
    out.buf.push(b'+');
    out.buf.extend_from_slice(s.as_bytes());
    out.buf.extend_from_slice(b"\r\n");
}

/// An error reply. `msg` starts with its code (`ERR ...`, `WRONGTYPE ...`).
pub fn error(out: &mut Out, msg: &str) {
    out.buf.push(b'-');
    out.buf.extend_from_slice(sanitize(msg).as_bytes());
    out.buf.extend_from_slice(b"\r\n");
}

/// An integer reply `:n`.
pub fn int(out: &mut Out, n: i64) {
    out.buf.push(b':');
    let _ = write!(out.buf, "{n}");
    out.buf.extend_from_slice(b"\r\n");
}

/// A bulk string `$len\r\n...\r\n`.
pub fn bulk(out: &mut Out, b: &[u8]) {
    out.buf.push(b'$');
    let _ = write!(out.buf, "{}", b.len());
    out.buf.extend_from_slice(b"\r\n");
    out.buf.extend_from_slice(b);
    out.buf.extend_from_slice(b"\r\n");
}

/// The null bulk string (`$-1`; RESP3 `_`).
pub fn nil(out: &mut Out) {
    out.buf
        .extend_from_slice(if out.resp3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// The null array (`*-1`; RESP3 `_`).
pub fn nil_array(out: &mut Out) {
    out.buf
        .extend_from_slice(if out.resp3 { b"_\r\n" } else { b"*-1\r\n" });
}

/// The header of a map of `n` key-value pairs (RESP2: an array of `2n`).
pub fn map_header(out: &mut Out, n: usize) {
    if out.resp3 {
        out.buf.push(b'%');
        let _ = write!(out.buf, "{n}");
        out.buf.extend_from_slice(b"\r\n");
    } else {
        array_header(out, n * 2);
    }
}

/// `Some(b)` as a bulk string, `None` as nil.
pub fn opt_bulk(out: &mut Out, b: Option<&[u8]>) {
    match b {
        Some(b) => bulk(out, b),
        None => nil(out),
    }
}

/// The header of an array of `n` elements.
pub fn array_header(out: &mut Out, n: usize) {
    out.buf.push(b'*');
    let _ = write!(out.buf, "{n}");
    out.buf.extend_from_slice(b"\r\n");
}

/// An array of bulk strings.
pub fn bulk_array<'a>(out: &mut Out, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    array_header(out, items.len());
    for b in items {
        bulk(out, b);
    }
}

/// A double: RESP2 a bulk string (`inf`, `-inf`, shortest round-trip decimal), RESP3
/// the `,` type.
pub fn double(out: &mut Out, d: f64) {
    if out.resp3 {
        out.buf.push(b',');
        out.buf.extend_from_slice(format_double(d).as_bytes());
        out.buf.extend_from_slice(b"\r\n");
    } else {
        bulk(out, format_double(d).as_bytes());
    }
}

/// Formats a double the way Redis replies with it.
pub fn format_double(d: f64) -> String {
    if d.is_infinite() {
        if d > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else if d == d.trunc() && d.abs() < 1e17 {
        format!("{}", d as i64)
    } else {
        format!("{d}")
    }
}

/// Replaces CR and LF (which would break the framing) by spaces.
pub fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\r', '\n']) {
        s.replace(['\r', '\n'], " ").into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp3_shapes() {
        let mut o = Out {
            resp3: true,
            ..Out::default()
        };
        nil(&mut o);
        map_header(&mut o, 2);
        double(&mut o, 2.5);
        double(&mut o, f64::INFINITY);
        assert_eq!(o.buf, b"_\r\n%2\r\n,2.5\r\n,inf\r\n");
        let mut o = Out::new();
        map_header(&mut o, 2);
        assert_eq!(o.buf, b"*4\r\n");
    }

    #[test]
    fn shapes() {
        let mut o = Out::new();
        ok(&mut o);
        int(&mut o, -5);
        bulk(&mut o, b"a\r\nb");
        nil(&mut o);
        array_header(&mut o, 2);
        error(&mut o, "ERR bad\r\nthing");
        double(&mut o, 1.5);
        double(&mut o, 3.0);
        double(&mut o, f64::NEG_INFINITY);
        assert_eq!(
            o.buf,
            b"+OK\r\n:-5\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n-ERR bad  thing\r\n$3\r\n1.5\r\n$1\r\n3\r\n$4\r\n-inf\r\n"
        );
    }
}
