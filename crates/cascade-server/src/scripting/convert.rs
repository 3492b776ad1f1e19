//! Reply conversion between RESP and Lua, both ways, as Redis 7.0 documents it.
//!
//! RESP → Lua ([`reply_to_lua`], what `redis.call` returns): integer → number, bulk
//! → string, null bulk / null array → `false`, array → table, status → `{ok=s}`,
//! error → `{err=s}`; under `redis.setresp(3)` also map → `{map={k=v}}`, set →
//! `{set={m=true}}`, null → `nil`, boolean → boolean, double → `{double=n}`, big
//! number → `{big_number=s}`, verbatim → `{verbatim_string={format=f,string=s}}`.
//!
//! Lua → RESP ([`lua_to_reply`], what a script returns): string → bulk, number →
//! integer (truncated), boolean → `:1`/nil (RESP2 script) or a RESP3 boolean, table
//! with `err` → error, `ok` → status, `double`, `big_number`, `verbatim_string`,
//! `map`, `set`, otherwise an array up to the first nil; anything else → nil. Tables
//! are read raw (no metamethods run). Nesting deeper than [`MAX_DEPTH`] answers
//! `-ERR reached lua stack limit` in place (as Redis does at its stack limit).

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    clippy::many_single_char_names,
    clippy::trivially_copy_pass_by_ref,
    reason = "Lua numbers are doubles; Redis converts them to integers by truncation"
)]

use mlua::{Lua, Table, Value};

use crate::resp::reply::{self, Out};

/// Deepest nesting converted.
const MAX_DEPTH: usize = 1000;

/// Parses one RESP reply at `*pos` of `b` into a Lua value.
pub(crate) fn reply_to_lua(lua: &Lua, b: &[u8], pos: &mut usize) -> mlua::Result<Value> {
    let bad = || mlua::Error::RuntimeError("malformed reply".into());
    let end = b
        .get(*pos..)
        .and_then(|r| r.windows(2).position(|w| w == b"\r\n"))
        .map(|i| *pos + i)
        .ok_or_else(bad)?;
    let kind = b[*pos];
    let line = &b[*pos + 1..end];
    *pos = end + 2;
    let num = |l: &[u8]| -> mlua::Result<i64> {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)
    };
    let single = |key: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(key, v)?;
        Ok(Value::Table(t))
    };
    Ok(match kind {
        b':' => Value::Number(num(line)? as f64),
        b'+' => single("ok", Value::String(lua.create_string(line)?))?,
        b'-' => Value::Table(error_table(lua, &b[end - line.len() - 1..end])?),
        b'$' | b'=' => {
            let n = num(line)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let n = usize::try_from(n).map_err(|_| bad())?;
            let body = b.get(*pos..*pos + n).ok_or_else(bad)?;
            *pos += n + 2;
            if kind == b'=' {
                let (fmt, s) = (
                    body.get(..3).unwrap_or(b"txt"),
                    body.get(4..).unwrap_or(&[]),
                );
                let inner = lua.create_table()?;
                inner.raw_set("format", lua.create_string(fmt)?)?;
                inner.raw_set("string", lua.create_string(s)?)?;
                single("verbatim_string", Value::Table(inner))?
            } else {
                Value::String(lua.create_string(body)?)
            }
        }
        b'*' | b'>' => {
            let n = num(line)?;
            if n < 0 {
                return Ok(Value::Boolean(false));
            }
            let t = lua.create_table()?;
            for i in 1..=n {
                let v = reply_to_lua(lua, b, pos)?;
                t.raw_set(i, v)?;
            }
            Value::Table(t)
        }
        b'%' => {
            let inner = lua.create_table()?;
            for _ in 0..num(line)? {
                let k = reply_to_lua(lua, b, pos)?;
                let v = reply_to_lua(lua, b, pos)?;
                inner.raw_set(k, v)?;
            }
            single("map", Value::Table(inner))?
        }
        b'~' => {
            let inner = lua.create_table()?;
            for _ in 0..num(line)? {
                let k = reply_to_lua(lua, b, pos)?;
                inner.raw_set(k, true)?;
            }
            single("set", Value::Table(inner))?
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(line == b"t"),
        b',' => {
            let s = std::str::from_utf8(line).map_err(|_| bad())?;
            let d = match s {
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                s => s.parse().map_err(|_| bad())?,
            };
            single("double", Value::Number(d))?
        }
        b'(' => single("big_number", Value::String(lua.create_string(line)?))?,
        _ => return Err(bad()),
    })
}

/// `{err = "CODE message"}` from an error reply's text (Redis's `luaPushErrorBuff`:
/// a text without a code gets `ERR`).
pub(crate) fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(error_text(text))?)?;
    Ok(t)
}

/// Normalises an error text to `CODE message`: a leading `-` is dropped, and a
/// text that is one word gets the code `ERR`.
pub(crate) fn error_text(text: &[u8]) -> Vec<u8> {
    let body = text.strip_prefix(b"-").unwrap_or(text);
    let trimmed: &[u8] = {
        let mut s = body;
        while let [rest @ .., b'\r' | b'\n'] = s {
            s = rest;
        }
        s
    };
    if text.first() == Some(&b'-') {
        match trimmed.iter().position(|&c| c == b' ') {
            Some(_) => trimmed.to_vec(),
            None => [b"ERR ".as_slice(), trimmed].concat(),
        }
    } else {
        [b"ERR ".as_slice(), trimmed].concat()
    }
}

/// Writes a script's return value as a reply (`script_resp3`: the script called
/// `redis.setresp(3)`).
pub(crate) fn lua_to_reply(v: &Value, out: &mut Out, script_resp3: bool) {
    write_value(v, out, script_resp3, 0);
}

fn write_value(v: &Value, out: &mut Out, resp3: bool, depth: usize) {
    if depth > MAX_DEPTH {
        reply::error(out, "ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => reply::bulk(out, &s.as_bytes()),
        Value::Boolean(b) => {
            if !resp3 {
                if *b {
                    reply::int(out, 1);
                } else {
                    reply::nil(out);
                }
            } else if out.resp3 {
                out.buf
                    .extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                reply::int(out, i64::from(*b));
            }
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "Lua numbers become integers by truncation, as Redis's (long long) cast"
        )]
        Value::Number(n) => reply::int(out, *n as i64),
        Value::Integer(n) => reply::int(out, *n),
        Value::Table(t) => write_table(t, out, resp3, depth),
        _ => reply::nil(out),
    }
}

fn field(t: &Table, k: &str) -> Value {
    t.raw_get::<Value>(k).unwrap_or(Value::Nil)
}

fn write_table(t: &Table, out: &mut Out, resp3: bool, depth: usize) {
    if let Value::String(e) = field(t, "err") {
        let text = e.as_bytes().to_vec();
        reply::error(out, &String::from_utf8_lossy(&text));
        return;
    }
    if let Value::String(s) = field(t, "ok") {
        let s = String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " ");
        reply::simple(out, &s);
        return;
    }
    if let Some(d) = super::api::number(&field(t, "double")) {
        reply::double(out, d);
        return;
    }
    if let Value::String(s) = field(t, "big_number") {
        let s = String::from_utf8_lossy(&s.as_bytes()).replace(['\r', '\n'], " ");
        if out.resp3 {
            out.buf.push(b'(');
            out.buf.extend_from_slice(s.as_bytes());
            out.buf.extend_from_slice(b"\r\n");
        } else {
            reply::bulk(out, s.as_bytes());
        }
        return;
    }
    if let Value::Table(v) = field(t, "verbatim_string") {
        if let (Value::String(f), Value::String(s)) = (field(&v, "format"), field(&v, "string")) {
            let (f, s) = (f.as_bytes(), s.as_bytes());
            if out.resp3 {
                let body = [&f[..f.len().min(3)], b":", &s[..]].concat();
                out.buf.push(b'=');
                out.buf.extend_from_slice(body.len().to_string().as_bytes());
                out.buf.extend_from_slice(b"\r\n");
                out.buf.extend_from_slice(&body);
                out.buf.extend_from_slice(b"\r\n");
            } else {
                reply::bulk(out, &s);
            }
            return;
        }
    }
    // Elements are visited one at a time (holding many Lua values at once would
    // exhaust Lua 5.1's reference stack); the count comes from a first pass.
    if let Value::Table(m) = field(t, "map") {
        let mut n = 0usize;
        let _ = m.for_each(|_: Value, _: Value| {
            n += 1;
            Ok(())
        });
        reply::map_header(out, n);
        let _ = m.for_each(|k: Value, v: Value| {
            write_value(&k, out, resp3, depth + 1);
            write_value(&v, out, resp3, depth + 1);
            Ok(())
        });
        return;
    }
    if let Value::Table(s) = field(t, "set") {
        let mut n = 0usize;
        let _ = s.for_each(|_: Value, _: Value| {
            n += 1;
            Ok(())
        });
        reply::set_header(out, n);
        let _ = s.for_each(|k: Value, _: Value| {
            write_value(&k, out, resp3, depth + 1);
            Ok(())
        });
        return;
    }
    let mut n = 0usize;
    while !matches!(t.raw_get::<Value>(n + 1), Ok(Value::Nil) | Err(_)) {
        n += 1;
    }
    reply::array_header(out, n);
    for i in 1..=n {
        let v = t.raw_get::<Value>(i).unwrap_or(Value::Nil);
        write_value(&v, out, resp3, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(lua: &Lua, resp: &[u8]) -> Value {
        reply_to_lua(lua, resp, &mut 0).expect("parse")
    }

    #[test]
    fn resp_to_lua_and_back() {
        let lua = Lua::new();
        let mut out = Out::new();
        for (resp, want) in [
            (&b":5\r\n"[..], &b":5\r\n"[..]),
            (b"$3\r\nabc\r\n", b"$3\r\nabc\r\n"),
            (b"+OK\r\n", b"+OK\r\n"),
            (b"-WRONGTYPE x y\r\n", b"-WRONGTYPE x y\r\n"),
            (b"*2\r\n:1\r\n$1\r\na\r\n", b"*2\r\n:1\r\n$1\r\na\r\n"),
            (b"$-1\r\n", b"$-1\r\n"),
            // A null inside an array is `false` in Lua: nothing is cut.
            (b"*3\r\n:1\r\n$-1\r\n:3\r\n", b"*3\r\n:1\r\n$-1\r\n:3\r\n"),
        ] {
            out.buf.clear();
            let v = roundtrip(&lua, resp);
            lua_to_reply(&v, &mut out, false);
            assert_eq!(out.buf, want, "{}", String::from_utf8_lossy(resp));
        }
        out.buf.clear();
        out.resp3 = true;
        let v = roundtrip(&lua, b"%1\r\n$1\r\nk\r\n$1\r\nv\r\n");
        lua_to_reply(&v, &mut out, true);
        assert_eq!(out.buf, b"%1\r\n$1\r\nk\r\n$1\r\nv\r\n");
        out.buf.clear();
        lua_to_reply(&roundtrip(&lua, b",1.5\r\n"), &mut out, true);
        lua_to_reply(&roundtrip(&lua, b"#t\r\n"), &mut out, true);
        lua_to_reply(&roundtrip(&lua, b"_\r\n"), &mut out, true);
        assert_eq!(out.buf, b",1.5\r\n#t\r\n_\r\n");
        out.resp3 = false;
        out.buf.clear();
        lua_to_reply(&roundtrip(&lua, b"#f\r\n"), &mut out, true);
        lua_to_reply(&Value::Boolean(false), &mut out, false);
        assert_eq!(out.buf, b":0\r\n$-1\r\n");
    }

    #[test]
    fn error_texts_get_a_code() {
        assert_eq!(error_text(b"-WRONGTYPE bad"), b"WRONGTYPE bad");
        assert_eq!(error_text(b"-oops"), b"ERR oops");
        assert_eq!(error_text(b"My Error"), b"ERR My Error");
    }
}
