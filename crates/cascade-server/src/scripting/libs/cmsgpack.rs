//! `cmsgpack`: `MessagePack` as lua-cmsgpack 0.4 (Redis's copy) packs and unpacks it.
//!
//! Packing: nil, booleans, integral numbers as the smallest integer encoding, other
//! numbers as float32 when exact else float64, strings as fixstr/str8/str16/str32, a
//! table whose keys are exactly 1..n as an array, other tables as maps; nesting past
//! 16 levels packs nil (so cycles end). Unpacking accepts every `MessagePack` type.
//! `unpack_one` and `unpack_limit` return the offset of the next object (-1 at the end)
//! before the objects.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    clippy::many_single_char_names,
    clippy::trivially_copy_pass_by_ref,
    reason = "MessagePack picks fixed-width encodings by value range; every cast is range-checked first"
)]

use mlua::{Lua, MultiValue, Table, Value};

use super::err;

const MAX_NESTING: usize = 16;

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n < 128 {
            out.push(n as u8);
        } else if n < 256 {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n < 65536 {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n < (1 << 32) {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&n.to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -(1 << 31) {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(n: usize, small: (u8, usize), big: &[u8; 3], out: &mut Vec<u8>) {
    if n < small.1 {
        out.push(small.0 | n as u8);
    } else if big[0] != 0 && n <= 0xff {
        out.extend_from_slice(&[big[0], n as u8]);
    } else if n <= 0xffff {
        out.push(big[1]);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(big[2]);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    reason = "MessagePack picks the encoding by exact round trips, as lua-cmsgpack"
)]
fn pack_value(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => pack_int(*n, out),
        Value::Number(n) => {
            let n = *n;
            if n.is_finite() && n == (n as i64) as f64 {
                pack_int(n as i64, out);
            } else if f64::from(n as f32) == n {
                out.push(0xca);
                out.extend_from_slice(&(n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            pack_len(b.len(), (0xa0, 32), &[0xd9, 0xda, 0xdb], out);
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_NESTING => pack_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "array detection compares Lua numbers with the key count"
)]
fn pack_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    // Two passes, one pair at a time: holding every pair at once would exhaust Lua
    // 5.1's reference stack on big tables.
    let (mut count, mut max, mut array) = (0usize, 0f64, true);
    t.for_each(|k: Value, _: Value| {
        count += 1;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => {
                array = false;
                return Ok(());
            }
        };
        max = max.max(n);
        array &= n >= 1.0 && n.fract() == 0.0;
        Ok(())
    })?;
    if array && max as usize == count {
        pack_len(count, (0x90, 16), &[0, 0xdc, 0xdd], out);
        for i in 1..=count {
            pack_value(&t.raw_get::<Value>(i)?, level + 1, out)?;
        }
    } else {
        pack_len(count, (0x80, 16), &[0, 0xde, 0xdf], out);
        t.for_each(|k: Value, v: Value| {
            pack_value(&k, level + 1, out)?;
            pack_value(&v, level + 1, out)
        })?;
    }
    Ok(())
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let s = self
            .b
            .get(self.pos..self.pos + n)
            .ok_or_else(|| err("Missing bytes in input."))?;
        self.pos += n;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_possible_wrap,
        clippy::cast_precision_loss,
        reason = "MessagePack widths are fixed by the type byte"
    )]
    fn value(&mut self, lua: &Lua) -> mlua::Result<Value> {
        let t = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match t {
            0x00..=0x7f => num(f64::from(t)),
            0xe0..=0xff => num(f64::from(t as i8)),
            0x80..=0x8f => self.map(lua, usize::from(t & 0x0f)),
            0x90..=0x9f => self.array(lua, usize::from(t & 0x0f)),
            0xa0..=0xbf => self.str(lua, usize::from(t & 0x1f)),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.str(lua, n)
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.str(lua, n)
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.str(lua, n)
            }
            0xca => num(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)
            }
            _ => Err(err("Bad data format in input.")),
        }
    }

    fn str(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let s = self.take(n)?;
        Ok(Value::String(lua.create_string(s)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if k != Value::Nil {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// Unpacks up to `limit` objects (0: all) from `offset`: the next offset (-1 at the
/// end), then the objects.
fn unpack(
    lua: &Lua,
    s: &[u8],
    limit: usize,
    offset: usize,
    with_offset: bool,
) -> mlua::Result<MultiValue> {
    let mut r = Reader { b: s, pos: offset };
    let mut vals = Vec::new();
    while r.pos < s.len() && (limit == 0 || vals.len() < limit) {
        vals.push(r.value(lua)?);
    }
    let mut out = MultiValue::new();
    if with_offset {
        let next = if r.pos >= s.len() { -1.0 } else { r.pos as f64 };
        out.push_back(Value::Number(next));
    }
    out.extend(vals);
    Ok(out)
}

fn offset_arg(v: Option<&Value>) -> usize {
    match v {
        Some(Value::Integer(n)) => usize::try_from(*n).unwrap_or(0),
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "an offset"
        )]
        Some(Value::Number(n)) if *n > 0.0 => *n as usize,
        _ => 0,
    }
}

/// The `cmsgpack` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for a in &args {
                pack_value(a, 0, &mut out)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| unpack(lua, &s.as_bytes(), 0, 0, false))?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return Err(err("MessagePack unpack needs a string."));
            };
            unpack(lua, &s.as_bytes(), 1, offset_arg(args.get(1)), true)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return Err(err("MessagePack unpack needs a string."));
            };
            let limit = offset_arg(args.get(1));
            unpack(lua, &s.as_bytes(), limit, offset_arg(args.get(2)), true)
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fmt::Write as _;

    #[test]
    fn pack_matches_lua_cmsgpack() {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", table(&lua).expect("cmsgpack"))
            .expect("set");
        let hex = |code: &str| -> String {
            let s: mlua::LuaString = lua.load(code).eval().expect(code);
            s.as_bytes().iter().fold(String::new(), |mut h, b| {
                let _ = write!(h, "{b:02x}");
                h
            })
        };
        assert_eq!(hex("return cmsgpack.pack(0.1)"), "cb3fb999999999999a");
        assert_eq!(
            hex("return cmsgpack.pack(-1099511627776)"),
            "d3ffffff0000000000"
        );
        assert_eq!(hex("return cmsgpack.pack({1,2,'a'})"), "930102a161");
        let ok: bool = lua
            .load("local t = cmsgpack.unpack(cmsgpack.pack({a={1,2},b=true})) return t.a[2] == 2 and t.b")
            .eval()
            .expect("round trip");
        assert!(ok);
        let (off, v): (f64, String) = lua
            .load("return cmsgpack.unpack_limit(cmsgpack.pack('x','y'), 1, 0)")
            .eval()
            .expect("limit");
        assert_eq!((off, v.as_str()), (2.0, "x"));
    }
}
