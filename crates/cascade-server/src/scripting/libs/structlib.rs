//! `struct`: the binary packing library Redis ships with its Lua (Roberto
//! Ierusalimschy's `struct` 0.2, as built by Redis 7.0 on x86-64): `struct.pack(fmt,
//! ...)`, `struct.unpack(fmt, s [, pos])` and `struct.size(fmt)`.
//!
//! Behaviour kept exactly, because scripts persist what it packs:
//! * the format is read left to right; `<`/`>` switch endianness (native =
//!   little), `!n` sets the maximum alignment (a power of two; `!` alone = 8, the
//!   platform's), spaces are skipped; anything else unknown is an error;
//! * sizes as on x86-64 Linux: `b/B` 1, `h/H` 2, `l/L` 8, `T` 8, `i/I[n]` n bytes
//!   (default 4, at most 32), `f` 4, `d` 8, `x` 1 pad byte, `c[n]` n bytes (`c0`:
//!   the whole string when packing; when unpacking, the length is the value just
//!   unpacked), `s` a zero-terminated string;
//! * an item is aligned to `min(its size, max alignment)` (alignment starts at 1, so
//!   nothing is padded unless `!` asks for it); strings are never aligned;
//! * integers are converted through a signed 64-bit integer (a negative Lua number
//!   is stored in two's complement); lowercase letters unpack as signed;
//! * `unpack` returns the values and then the 1-based position after the last one.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    reason = "struct converts between Lua numbers and fixed-width integers by definition"
)]

use mlua::{Lua, MultiValue, Table, Value};

use super::err;

/// The largest integer size `i`/`I` accept.
const MAX_INT_SIZE: usize = 32;
/// The platform's maximum alignment (`!` with no number).
const MAX_ALIGN: usize = 8;

/// Parsing state of one format string.
struct Format<'f> {
    fmt: &'f [u8],
    at: usize,
    little: bool,
    align: usize,
}

impl<'f> Format<'f> {
    fn new(fmt: &'f [u8]) -> Format<'f> {
        Format {
            fmt,
            at: 0,
            little: true,
            align: 1,
        }
    }

    /// The next option letter, if any.
    fn next_opt(&mut self) -> Option<u8> {
        let c = *self.fmt.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    /// A decimal number at the cursor, or `default`.
    fn number(&mut self, default: usize) -> mlua::Result<usize> {
        let start = self.at;
        let mut n: usize = 0;
        while let Some(d) = self.fmt.get(self.at).filter(|c| c.is_ascii_digit()) {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(usize::from(d - b'0')))
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| err("integral size overflow"))?;
            self.at += 1;
        }
        Ok(if self.at == start { default } else { n })
    }

    /// The size of option `opt` (reading its count where it has one).
    fn size(&mut self, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return Err(err(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                n
            }
            _ => 0,
        })
    }

    /// Padding bytes that align an item of `size` at offset `len`.
    fn padding(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        // The C library's formula, kept for sizes that are no power of two (`i3`
        // under `!8` pads to an odd boundary there, and so here).
        let a = size.min(self.align);
        (a - (len & (a - 1))) & (a - 1)
    }

    /// Endianness, alignment and blanks; any other letter is an error.
    fn control(&mut self, opt: u8, func: &str) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => self.little = false,
            b'<' => self.little = true,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return Err(err(format!("alignment {a} is not a power of 2")));
                }
                self.align = a;
            }
            _ => {
                return Err(err(format!(
                    "bad argument #1 to '{func}' (invalid format option '{}')",
                    char::from(opt)
                )))
            }
        }
        Ok(())
    }
}

fn arg_number(args: &MultiValue, i: usize, func: &str) -> mlua::Result<f64> {
    match args.get(i) {
        Some(Value::Number(n)) => Ok(*n),
        Some(Value::Integer(n)) => Ok(*n as f64),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| bad_arg(i, func, "number", args.get(i))),
        v => Err(bad_arg(i, func, "number", v)),
    }
}

fn arg_bytes(args: &MultiValue, i: usize, func: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Number(n)) => Ok(crate::resp::reply::format_double(*n).into_bytes()),
        Some(Value::Integer(n)) => Ok(n.to_string().into_bytes()),
        v => Err(bad_arg(i, func, "string", v)),
    }
}

fn bad_arg(i: usize, func: &str, want: &str, got: Option<&Value>) -> mlua::Error {
    err(format!(
        "bad argument #{} to '{func}' ({want} expected, got {})",
        i + 1,
        got.map_or("no value", Value::type_name)
    ))
}

/// `size` bytes of `v` (two's complement), in the format's byte order.
fn put_int(out: &mut Vec<u8>, n: f64, little: bool, size: usize) {
    let mut v = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
    let mut bytes = vec![0u8; size];
    for i in 0..size {
        let at = if little { i } else { size - 1 - i };
        bytes[at] = (v & 0xff) as u8;
        v = v.checked_shr(8).unwrap_or(0);
    }
    out.extend_from_slice(&bytes);
}

fn get_int(b: &[u8], little: bool, signed: bool) -> f64 {
    let mut v: u64 = 0;
    let size = b.len();
    for i in 0..size {
        let at = if little { size - 1 - i } else { i };
        v = (v << 8) | u64::from(b[at]);
    }
    if !signed {
        return v as f64;
    }
    if size < 8 && size > 0 && v & (1 << (size * 8 - 1)) != 0 {
        v |= u64::MAX << (size * 8);
    }
    (v as i64) as f64
}

fn pack(args: &MultiValue) -> mlua::Result<Vec<u8>> {
    let fmt = arg_bytes(args, 0, "pack")?;
    let mut f = Format::new(&fmt);
    let mut out = Vec::new();
    let mut arg = 1;
    while let Some(opt) = f.next_opt() {
        let mut size = f.size(opt)?;
        let pad = f.padding(out.len(), opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                put_int(&mut out, arg_number(args, arg, "pack")?, f.little, size);
                arg += 1;
            }
            b'x' => out.push(0),
            b'f' => {
                let v = arg_number(args, arg, "pack")? as f32;
                arg += 1;
                if f.little {
                    out.extend_from_slice(&v.to_le_bytes());
                } else {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            b'd' => {
                let v = arg_number(args, arg, "pack")?;
                arg += 1;
                if f.little {
                    out.extend_from_slice(&v.to_le_bytes());
                } else {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            b'c' | b's' => {
                let s = arg_bytes(args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(err(format!(
                        "bad argument #{arg} to 'pack' (string too short)"
                    )));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(opt, "pack")?,
        }
    }
    Ok(out)
}

fn unpack(lua: &Lua, args: &MultiValue) -> mlua::Result<MultiValue> {
    let fmt = arg_bytes(args, 0, "unpack")?;
    let data = arg_bytes(args, 1, "unpack")?;
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => arg_number(args, 2, "unpack")?,
    };
    if start < 1.0 {
        return Err(err(
            "bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ));
    }
    let mut pos = start as usize - 1;
    let short = || err("bad argument #2 to 'unpack' (data string too short)");
    let mut f = Format::new(&fmt);
    let mut values: Vec<Value> = Vec::new();
    while let Some(opt) = f.next_opt() {
        let mut size = f.size(opt)?;
        pos += f.padding(pos, opt, size);
        if size > data.len() || pos > data.len() - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                values.push(Value::Number(get_int(
                    &data[pos..pos + size],
                    f.little,
                    signed,
                )));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let v = if f.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                values.push(Value::Number(f64::from(v)));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let v = if f.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                values.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let n = match values.pop() {
                        Some(Value::Number(n)) => n,
                        Some(Value::Integer(n)) => n as f64,
                        _ => return Err(err("format 'c0' needs a previous size")),
                    };
                    size = if n > 0.0 { n as usize } else { 0 };
                    if size > data.len() || pos > data.len() - size {
                        return Err(short());
                    }
                }
                values.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(err("unfinished string in data"));
                };
                values.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => f.control(opt, "unpack")?,
        }
        pos += size;
    }
    values.push(Value::Number((pos + 1) as f64));
    Ok(values.into_iter().collect())
}

fn size(args: &MultiValue) -> mlua::Result<f64> {
    let fmt = arg_bytes(args, 0, "size")?;
    let mut f = Format::new(&fmt);
    let mut pos = 0usize;
    while let Some(opt) = f.next_opt() {
        let size = f.size(opt)?;
        pos += f.padding(pos, opt, size);
        if opt == b's' {
            return Err(err(
                "bad argument #1 to 'size' (option 's' has no fixed size)",
            ));
        }
        if opt == b'c' && size == 0 {
            return Err(err(
                "bad argument #1 to 'size' (option 'c0' has no fixed size)",
            ));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, "size")?;
        }
        pos += size;
    }
    Ok(pos as f64)
}

/// The `struct` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| lua.create_string(pack(&args)?))?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| unpack(lua, &args))?,
    )?;
    t.set(
        "size",
        lua.create_function(|_, args: MultiValue| size(&args))?,
    )?;
    Ok(t)
}

#[cfg(test)]
#[allow(
    clippy::many_single_char_names,
    clippy::float_cmp,
    reason = "exact small values unpacked from known bytes"
)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("struct", table(&lua).expect("struct"))
            .expect("set");
        lua
    }

    fn bytes(lua: &Lua, s: &str) -> Vec<u8> {
        lua.load(s)
            .eval::<mlua::LuaString>()
            .expect(s)
            .as_bytes()
            .to_vec()
    }

    #[test]
    fn pack_layouts_match_the_c_library() {
        let l = lua();
        assert_eq!(bytes(&l, "return struct.pack('>I2', 258)"), [1, 2]);
        assert_eq!(
            bytes(&l, "return struct.pack('<i', -2)"),
            [0xfe, 0xff, 0xff, 0xff]
        );
        assert_eq!(bytes(&l, "return struct.pack('b', -1)"), [0xff]);
        // Alignment only after '!': a short after a byte gets one pad byte.
        assert_eq!(bytes(&l, "return struct.pack('bh', 1, 2)"), [1, 2, 0]);
        assert_eq!(bytes(&l, "return struct.pack('!bh', 1, 2)"), [1, 0, 2, 0]);
        assert_eq!(bytes(&l, "return struct.pack('!4bd', 1, 0)").len(), 12);
        assert_eq!(bytes(&l, "return struct.pack('s', 'ab')"), b"ab\0");
        assert_eq!(bytes(&l, "return struct.pack('c0', 'xyz')"), b"xyz");
        assert_eq!(bytes(&l, "return struct.pack('c2', 'xyz')"), b"xy");
        assert_eq!(
            bytes(&l, "return struct.pack('>d', 1.5)"),
            1.5f64.to_be_bytes()
        );
    }

    #[test]
    fn unpack_round_trips_and_returns_the_next_position() {
        let l = lua();
        let (a, b, c, d, next): (f64, f64, String, String, f64) = l
            .load("return struct.unpack('>hIsc3', struct.pack('>hIsc3', -5, 4000000000, 'hi', 'abc'))")
            .eval()
            .expect("unpack");
        assert_eq!(
            (a, b, c.as_str(), d.as_str(), next),
            (-5.0, 4e9, "hi", "abc", 13.0)
        );
        // 'c0' takes its length from the value before it.
        let (s, next): (String, f64) = l
            .load("return struct.unpack('Bc0', struct.pack('Bc0', 3, 'xyz'))")
            .eval()
            .expect("c0");
        assert_eq!((s.as_str(), next), ("xyz", 5.0));
        // A start position skips the first bytes.
        let (v, _): (f64, f64) = l
            .load("return struct.unpack('B', '\\1\\2', 2)")
            .eval()
            .expect("pos");
        assert_eq!(v, 2.0);
    }

    #[test]
    fn size_and_errors() {
        let l = lua();
        let n: f64 = l.load("return struct.size('!8bd')").eval().expect("size");
        assert_eq!(n, 16.0);
        let n: f64 = l.load("return struct.size('i3hc5')").eval().expect("size");
        assert_eq!(n, 10.0);
        // Redis 7.0.15 answers 28: `i3` at offset 16 is padded by 2.
        let n: f64 = l
            .load("return struct.size('!bdi3c7')")
            .eval()
            .expect("size");
        assert_eq!(n, 28.0);
        for (src, want) in [
            ("return struct.size('s')", "no fixed size"),
            ("return struct.pack('z', 1)", "invalid format option 'z'"),
            (
                "return struct.pack('!3')",
                "alignment 3 is not a power of 2",
            ),
            ("return struct.pack('i33', 1)", "larger than limit of 32"),
            ("return struct.unpack('I', 'ab')", "data string too short"),
            ("return struct.unpack('s', 'ab')", "unfinished string"),
            ("return struct.unpack('c0', 'ab')", "needs a previous size"),
            ("return struct.pack('c3', 'ab')", "string too short"),
            (
                "return struct.unpack('B', 'a', 0)",
                "offset must be 1 or greater",
            ),
        ] {
            let e = l.load(src).eval::<Value>().expect_err(src).to_string();
            assert!(e.contains(want), "{src}: {e}");
        }
    }
}
