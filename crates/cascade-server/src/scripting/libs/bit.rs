//! `bit`: `LuaBitOp` 1.0 as Redis ships it. Every operand is first normalised to a
//! signed 32-bit integer (`tobit`: the number modulo 2^32); results are signed 32-bit.

#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::cast_precision_loss,
    clippy::float_cmp,
    clippy::many_single_char_names,
    clippy::trivially_copy_pass_by_ref,
    reason = "LuaBitOp works on the low 32 bits of Lua numbers by definition"
)]

use mlua::{Lua, MultiValue, Table, Value};

use super::err;

/// `tobit`: a Lua number to a signed 32-bit integer, wrapping modulo 2^32.
#[expect(
    clippy::cast_possible_truncation,
    reason = "LuaBitOp keeps the low 32 bits of the integer part"
)]
pub(crate) fn tobit(n: f64) -> i32 {
    if !n.is_finite() {
        return 0;
    }
    let t = n.trunc().rem_euclid(4_294_967_296.0);
    (t as u64 as u32) as i32
}

fn arg(args: &MultiValue, i: usize) -> mlua::Result<i32> {
    match args.get(i) {
        Some(Value::Number(n)) => Ok(tobit(*n)),
        Some(Value::Integer(n)) => Ok(tobit(*n as f64)),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map(tobit)
            .ok_or_else(|| {
                err(format!(
                    "bad argument #{} (number expected, got string)",
                    i + 1
                ))
            }),
        other => Err(err(format!(
            "bad argument #{} (number expected, got {})",
            i + 1,
            other.map_or("no value", Value::type_name)
        ))),
    }
}

fn fold(lua: &Lua, t: &Table, name: &str, f: fn(i32, i32) -> i32) -> mlua::Result<()> {
    t.set(
        name,
        lua.create_function(move |_, args: MultiValue| {
            let mut acc = arg(&args, 0)?;
            for i in 1..args.len() {
                acc = f(acc, arg(&args, i)?);
            }
            Ok(f64::from(acc))
        })?,
    )
}

fn shift(lua: &Lua, t: &Table, name: &str, f: fn(i32, u32) -> i32) -> mlua::Result<()> {
    t.set(
        name,
        lua.create_function(move |_, args: MultiValue| {
            let x = arg(&args, 0)?;
            let n = arg(&args, 1)?.cast_unsigned() & 31;
            Ok(f64::from(f(x, n)))
        })?,
    )
}

/// The `bit` table.
pub(crate) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "tobit",
        lua.create_function(|_, args: MultiValue| Ok(f64::from(arg(&args, 0)?)))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, args: MultiValue| Ok(f64::from(!arg(&args, 0)?)))?,
    )?;
    t.set(
        "bswap",
        lua.create_function(|_, args: MultiValue| Ok(f64::from(arg(&args, 0)?.swap_bytes())))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, args: MultiValue| {
            let x = arg(&args, 0)?.cast_unsigned();
            let n = if args.len() > 1 { arg(&args, 1)? } else { 8 };
            let upper = n < 0;
            let n = n.unsigned_abs().min(8) as usize;
            let s = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok(s[8 - n..].to_string())
        })?,
    )?;
    fold(lua, &t, "band", |a, b| a & b)?;
    fold(lua, &t, "bor", |a, b| a | b)?;
    fold(lua, &t, "bxor", |a, b| a ^ b)?;
    shift(lua, &t, "lshift", |x, n| {
        (x.cast_unsigned() << n).cast_signed()
    })?;
    shift(lua, &t, "rshift", |x, n| {
        (x.cast_unsigned() >> n).cast_signed()
    })?;
    shift(lua, &t, "arshift", |x, n| x >> n)?;
    shift(lua, &t, "rol", i32::rotate_left)?;
    shift(lua, &t, "ror", i32::rotate_right)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitop_values() {
        let lua = Lua::new();
        lua.globals()
            .set("bit", table(&lua).expect("bit"))
            .expect("set");
        let run = |s: &str| -> String {
            lua.load(s)
                .eval::<mlua::Value>()
                .map(|v| format!("{v:?}"))
                .expect(s)
        };
        assert_eq!(tobit(4_294_967_295.0), -1);
        assert_eq!(tobit(2_147_483_648.0), i32::MIN);
        assert!(run("return bit.tohex(65535, -4)").contains("FFFF"));
        assert!(run("return bit.band(0xff, 0x0f)").contains("15"));
        assert!(run("return bit.lshift(1, 31)").contains("-2147483648"));
        assert!(run("return bit.rshift(-1, 28)").contains("15"));
        assert!(run("return bit.arshift(-256, 4)").contains("-16"));
        assert!(run("return bit.bswap(0x12345678)").contains("2018915346"));
        assert!(run("return bit.rol(0x12345678, 8)").contains("878082066"));
    }
}
