//! Argument parsing shared by the handlers, with Redis's rules and error texts:
//! strict 64-bit integers (`string2ll`), doubles as Redis reads them (`inf` allowed,
//! NaN refused), and case-insensitive keywords. Pure functions; any thread.

use crate::error::{CmdError, CmdResult};

/// Parses a strict 64-bit integer (Redis `string2ll`: optional `-`, no `+`, no
/// spaces, no leading zeros).
pub(crate) fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || s == "-0"
    {
        return None;
    }
    s.parse().ok()
}

/// An integer argument (`ERR value is not an integer or out of range`).
pub(crate) fn int_arg(b: &[u8]) -> CmdResult<i64> {
    parse_i64(b).ok_or(CmdError::NotInteger)
}

/// Parses a double as Redis reads one (`strtold`): decimal or exponent form, `inf`,
/// `-inf`, `+inf`; NaN, empty input and surrounding spaces are refused.
pub(crate) fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        t if t.is_empty()
            || t.starts_with(char::is_whitespace)
            || t.ends_with(char::is_whitespace)
            || t.contains("nan")
            || t.contains("inf") =>
        {
            return None
        }
        t => t.parse::<f64>().ok()?,
    };
    (!v.is_nan()).then_some(v)
}

/// A float argument (`ERR value is not a valid float`).
pub(crate) fn float_arg(b: &[u8]) -> CmdResult<f64> {
    parse_f64(b).ok_or(CmdError::NotFloat)
}

/// The optional `count` at argument 2 of LPOP/RPOP/ZPOPMIN/ZPOPMAX (`None`: absent);
/// a negative count is out of range, more arguments are `too_many`.
pub(crate) fn pop_count(
    c: &crate::resp::parse::Command,
    too_many: CmdError,
) -> CmdResult<Option<u64>> {
    match c.len() {
        0..=2 => Ok(None),
        3 => u64::try_from(int_arg(c.arg(2))?)
            .map(Some)
            .map_err(|_| CmdError::err("value is out of range, must be positive")),
        _ => Err(too_many),
    }
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub(crate) fn is(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

/// Converts a length to a reply integer (lengths always fit).
pub(crate) fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b" 1",
            b"01",
            b"-0",
            b"1.0",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(float_arg(b"1.5"), Ok(1.5));
        assert_eq!(float_arg(b"1e3"), Ok(1000.0));
        assert_eq!(float_arg(b"-inf"), Ok(f64::NEG_INFINITY));
        assert_eq!(float_arg(b"+inf"), Ok(f64::INFINITY));
        assert!(float_arg(b"nan").is_err());
        assert!(float_arg(b"abc").is_err());
        assert!(float_arg(b"").is_err());
        assert!(float_arg(b" 1").is_err());
    }
}
