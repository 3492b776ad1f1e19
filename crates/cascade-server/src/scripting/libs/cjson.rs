//! `cjson`: JSON encode and decode as Lua CJSON 2.1 (Redis's copy) does it.
//!
//! Encoding: `nil`/`cjson.null` → `null`, booleans, numbers as `%.14g` (NaN and
//! infinities refused unless `encode_invalid_numbers(true)`), strings escaped (also
//! `/`), a table whose keys are exactly 1..n → array, other tables → object with
//! string or number keys (others refused), nesting deeper than `encode_max_depth`
//! refused. Decoding: objects and arrays → tables, `null` → `cjson.null` (a light
//! userdata), numbers → Lua numbers, nesting deeper than `decode_max_depth` refused.
//! The settings live in the Lua state's app data for the library's lifetime.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    clippy::many_single_char_names,
    clippy::trivially_copy_pass_by_ref,
    reason = "JSON numbers are Lua doubles; integral checks and depths are range-checked"
)]

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::err;

#[derive(Debug)]
struct Settings {
    encode_depth: Cell<usize>,
    decode_depth: Cell<usize>,
    invalid_numbers: Cell<bool>,
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// `%.14g`.
fn fmt14(d: f64) -> String {
    if d == d.trunc() && d.abs() < 1e15 {
        #[expect(clippy::cast_possible_truncation, reason = "integral and in range")]
        return format!("{}", d as i64);
    }
    let sci = format!("{d:.13e}");
    let (m, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if (-4..14).contains(&e) {
        let dec = usize::try_from(13 - e).unwrap_or(0);
        strip(&format!("{d:.dec$}"))
    } else {
        format!(
            "{}e{}{:02}",
            strip(m),
            if e < 0 { '-' } else { '+' },
            e.unsigned_abs()
        )
    }
}

fn encode(v: &Value, s: &Settings, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(u) if u.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() && !s.invalid_numbers.get() {
                return Err(err("Cannot serialise number: must not be NaN or Inf"));
            }
            if n.is_nan() {
                out.extend_from_slice(b"nan");
            } else if n.is_infinite() {
                out.extend_from_slice(if *n > 0.0 { b"inf" } else { b"-inf" });
            } else {
                out.extend_from_slice(fmt14(*n).as_bytes());
            }
        }
        Value::String(st) => quote(&st.as_bytes(), out),
        Value::Table(t) => {
            if depth >= s.encode_depth.get() {
                return Err(err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            encode_table(t, s, depth + 1, out)?;
        }
        other => {
            return Err(err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn encode_table(t: &Table, s: &Settings, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    let (mut count, mut max, mut array) = (0usize, 0usize, true);
    t.for_each(|k: Value, _: Value| {
        count += 1;
        match k {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked integral, positive"
            )]
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max = max.max(n as usize),
            Value::Integer(i) if i >= 1 => max = max.max(usize::try_from(i).unwrap_or(0)),
            _ => array = false,
        }
        Ok(())
    })?;
    // An empty table is an object; a sparse array (more than twice as long as its
    // element count, beyond 10) is refused as Lua CJSON does.
    if array && count > 0 {
        if max > 10 && max > count * 2 {
            return Err(err("Cannot serialise table: excessively sparse array"));
        }
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            encode(&t.raw_get::<Value>(i)?, s, depth, out)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    let mut first = true;
    t.for_each(|k: Value, v: Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        match &k {
            Value::String(ks) => quote(&ks.as_bytes(), out),
            Value::Number(n) => quote(fmt14(*n).as_bytes(), out),
            Value::Integer(n) => quote(n.to_string().as_bytes(), out),
            _ => {
                return Err(err(
                    "Cannot serialise table: table key must be a number or string",
                ))
            }
        }
        out.push(b':');
        encode(&v, s, depth, out)
    })?;
    out.push(b'}');
    Ok(())
}

fn quote(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn fail<T>(&self, what: &str) -> mlua::Result<T> {
        Err(err(format!(
            "Expected {what} but found invalid token at character {}",
            self.pos + 1
        )))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        self.ws();
        let Some(&c) = self.b.get(self.pos) else {
            return self.fail("value");
        };
        match c {
            b'{' | b'[' => {
                if depth >= self.max_depth {
                    return Err(err(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth + 1,
                        self.pos + 1
                    )));
                }
                self.pos += 1;
                let t = lua.create_table()?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.b.get(self.pos) == Some(&close) {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                let mut i = 1;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.b.get(self.pos) != Some(&b'"') {
                            return self.fail("object key string");
                        }
                        let k = self.string(lua)?;
                        self.ws();
                        if self.b.get(self.pos) != Some(&b':') {
                            return self.fail("colon");
                        }
                        self.pos += 1;
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(k, v)?;
                    } else {
                        let v = self.value(lua, depth + 1)?;
                        t.raw_set(i, v)?;
                        i += 1;
                    }
                    self.ws();
                    match self.b.get(self.pos) {
                        Some(b',') => self.pos += 1,
                        Some(&x) if x == close => {
                            self.pos += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return self.fail("comma or end"),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string(lua)?)),
            b't' if self.b[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.b[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.b[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' => {
                let start = self.pos;
                while self.pos < self.b.len()
                    && matches!(
                        self.b[self.pos],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.pos += 1;
                }
                let s = std::str::from_utf8(&self.b[start..self.pos]).unwrap_or("");
                if let Ok(n) = s.parse::<f64>() {
                    Ok(Value::Number(n))
                } else {
                    self.pos = start;
                    self.fail("value")
                }
            }
            _ => self.fail("value"),
        }
    }

    fn string(&mut self, lua: &Lua) -> mlua::Result<mlua::LuaString> {
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            let Some(&c) = self.b.get(self.pos) else {
                return self.fail("string end");
            };
            self.pos += 1;
            match c {
                b'"' => return lua.create_string(&s),
                b'\\' => {
                    let Some(&e) = self.b.get(self.pos) else {
                        return self.fail("escape");
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => s.push(e),
                        b'b' => s.push(0x08),
                        b'f' => s.push(0x0c),
                        b'n' => s.push(b'\n'),
                        b'r' => s.push(b'\r'),
                        b't' => s.push(b'\t'),
                        b'u' => {
                            let hex = |p: &Self, at: usize| {
                                p.b.get(at..at + 4)
                                    .and_then(|h| std::str::from_utf8(h).ok())
                                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                            };
                            let Some(mut cp) = hex(self, self.pos) else {
                                return self.fail("unicode escape");
                            };
                            self.pos += 4;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.b.get(self.pos..self.pos + 2) == Some(b"\\u")
                            {
                                if let Some(lo) = hex(self, self.pos + 2) {
                                    cp = 0x10000
                                        + ((cp - 0xd800) << 10)
                                        + (lo.wrapping_sub(0xdc00) & 0x3ff);
                                    self.pos += 6;
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            s.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return self.fail("escape"),
                    }
                }
                c => s.push(c),
            }
        }
    }
}

/// `cjson.encode_max_depth` / `decode_max_depth`: sets the depth (at least 1) when
/// given a number, and answers the current one.
fn depth_setting(
    lua: &Lua,
    st: Rc<Settings>,
    cell: fn(&Settings) -> &Cell<usize>,
) -> mlua::Result<mlua::Function> {
    lua.create_function(move |_, n: Option<f64>| {
        if let Some(n) = n {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a small depth"
            )]
            cell(&st).set(n.max(1.0) as usize);
        }
        Ok(cell(&st).get() as f64)
    })
}

/// The `cjson` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let st = Rc::new(Settings {
        encode_depth: Cell::new(1000),
        decode_depth: Cell::new(1000),
        invalid_numbers: Cell::new(false),
    });
    let t = lua.create_table()?;
    let s = st.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(err("bad argument #1 to 'encode' (expected 1 argument)"));
            }
            let mut out = Vec::new();
            encode(&args[0], &s, 0, &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let s = st.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, text: mlua::LuaString| {
            let b = text.as_bytes();
            let mut p = Parser {
                b: &b,
                pos: 0,
                max_depth: s.decode_depth.get(),
            };
            let v = p.value(lua, 0)?;
            p.ws();
            if p.pos != b.len() {
                return p.fail("the end");
            }
            Ok(v)
        })?,
    )?;
    t.set(
        "encode_max_depth",
        depth_setting(lua, st.clone(), |s| &s.encode_depth)?,
    )?;
    t.set(
        "decode_max_depth",
        depth_setting(lua, st.clone(), |s| &s.decode_depth)?,
    )?;
    let s = st;
    t.set(
        "encode_invalid_numbers",
        lua.create_function(move |_, v: Option<Value>| {
            if let Some(v) = v {
                s.invalid_numbers.set(matches!(v, Value::Boolean(true)));
            }
            Ok(s.invalid_numbers.get())
        })?,
    )?;
    // Accepted for compatibility; they tune buffers and number handling this
    // implementation does not have.
    for name in [
        "encode_keep_buffer",
        "encode_number_precision",
        "encode_sparse_array",
        "decode_invalid_numbers",
    ] {
        t.set(name, lua.create_function(|_, _: MultiValue| Ok(true))?)?;
    }
    t.set("null", null())?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        let lua = Lua::new();
        lua.globals()
            .set("cjson", table(&lua).expect("cjson"))
            .expect("set");
        let s: String = lua
            .load(r#"return cjson.encode({1, 2.5, "a/b", {x = true}})"#)
            .eval()
            .expect("encode");
        assert_eq!(s, r#"[1,2.5,"a\/b",{"x":true}]"#);
        let s: String = lua
            .load(r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#)
            .eval()
            .expect("decode");
        assert_eq!(s, "0 -5000 -1 0.0003 1023.2 0");
        assert!(lua
            .load("return cjson.decode('[1,')")
            .eval::<Value>()
            .is_err());
        assert_eq!(fmt14(0.1), "0.1");
        assert_eq!(fmt14(1e20), "1e+20");
    }
}
