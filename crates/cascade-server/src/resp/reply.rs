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
pub(crate) struct Out {
    /// Encoded replies not yet written to the socket.
    pub(crate) buf: Vec<u8>,
    /// The client switched to RESP3 with `HELLO 3`.
    pub(crate) resp3: bool,
}

impl Out {
    /// An empty RESP2 buffer.
    pub(crate) fn new() -> Out {
        Out::default()
    }
}

/// `+OK`.
pub(crate) fn ok(out: &mut Out) {
    out.buf.extend_from_slice(b"+OK\r\n");
}

/// A simple string `+s`.
pub(crate) fn simple(out: &mut Out, s: &str) {
    out.buf.push(b'+');
    out.buf.extend_from_slice(s.as_bytes());
    out.buf.extend_from_slice(b"\r\n");
}

/// An error reply. `msg` starts with its code (`ERR ...`, `WRONGTYPE ...`).
pub(crate) fn error(out: &mut Out, msg: &str) {
    out.buf.push(b'-');
    out.buf.extend_from_slice(sanitize(msg).as_bytes());
    out.buf.extend_from_slice(b"\r\n");
}

/// An integer reply `:n`.
pub(crate) fn int(out: &mut Out, n: i64) {
    out.buf.push(b':');
    let _ = write!(out.buf, "{n}");
    out.buf.extend_from_slice(b"\r\n");
}

/// A bulk string `$len\r\n...\r\n`.
pub(crate) fn bulk(out: &mut Out, b: &[u8]) {
    out.buf.push(b'$');
    let _ = write!(out.buf, "{}", b.len());
    out.buf.extend_from_slice(b"\r\n");
    out.buf.extend_from_slice(b);
    out.buf.extend_from_slice(b"\r\n");
}

/// The null bulk string (`$-1`; RESP3 `_`).
pub(crate) fn nil(out: &mut Out) {
    out.buf
        .extend_from_slice(if out.resp3 { b"_\r\n" } else { b"$-1\r\n" });
}

/// The null array (`*-1`; RESP3 `_`).
pub(crate) fn nil_array(out: &mut Out) {
    out.buf
        .extend_from_slice(if out.resp3 { b"_\r\n" } else { b"*-1\r\n" });
}

/// The header of a map of `n` key-value pairs (RESP2: an array of `2n`).
pub(crate) fn map_header(out: &mut Out, n: usize) {
    if out.resp3 {
        out.buf.push(b'%');
        let _ = write!(out.buf, "{n}");
        out.buf.extend_from_slice(b"\r\n");
    } else {
        array_header(out, n * 2);
    }
}

/// `Some(b)` as a bulk string, `None` as nil.
pub(crate) fn opt_bulk(out: &mut Out, b: Option<&[u8]>) {
    match b {
        Some(b) => bulk(out, b),
        None => nil(out),
    }
}

/// The header of an array of `n` elements.
pub(crate) fn array_header(out: &mut Out, n: usize) {
    out.buf.push(b'*');
    let _ = write!(out.buf, "{n}");
    out.buf.extend_from_slice(b"\r\n");
}

/// The header of a set of `n` elements (RESP3 `~`, RESP2 an array).
pub(crate) fn set_header(out: &mut Out, n: usize) {
    out.buf.push(if out.resp3 { b'~' } else { b'*' });
    let _ = write!(out.buf, "{n}");
    out.buf.extend_from_slice(b"\r\n");
}

/// An array of bulk strings.
pub(crate) fn bulk_array<'a>(out: &mut Out, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    array_header(out, items.len());
    for b in items {
        bulk(out, b);
    }
}

/// A double: RESP2 a bulk string (`inf`, `-inf`, shortest round-trip decimal), RESP3
/// the `,` type.
pub(crate) fn double(out: &mut Out, d: f64) {
    if out.resp3 {
        out.buf.push(b',');
        out.buf.extend_from_slice(format_double(d).as_bytes());
        out.buf.extend_from_slice(b"\r\n");
    } else {
        bulk(out, format_double(d).as_bytes());
    }
}

/// Formats a double as Redis 7.0 replies with it: C's `%.17g` (17 significant
/// digits, exponent form below 1e-4 and from 1e17), `inf` and `-inf`.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d.is_nan() {
        return "nan".into();
    }
    // Scientific form with 17 significant digits gives the decimal exponent after
    // rounding, which decides the form as `%g` does.
    let sci = format!("{d:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..17).contains(&exp) {
        let decimals = usize::try_from(16 - exp).unwrap_or(0);
        let fixed = format!("{d:.decimals$}");
        strip_zeros(&fixed).to_string()
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_zeros(mantissa), exp.unsigned_abs())
    }
}

/// Drops trailing zeros after a decimal point, and the point if nothing follows it.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Replaces CR and LF (which would break the framing) by spaces.
pub(crate) fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
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
    fn doubles_like_printf_17g() {
        for (d, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.5, "1.5"),
            (3.0, "3"),
            (-2.0, "-2"),
            (0.1, "0.10000000000000001"),
            (1.1, "1.1000000000000001"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(format_double(d), want, "{d:e}");
        }
    }

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
