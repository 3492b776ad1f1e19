//! The libraries Redis ships with its Lua, written in Rust as Lua functions:
//! `bit` (`LuaBitOp`), `cjson`, `cmsgpack` and `struct`. Each file installs one
//! global table; the prelude then makes the tables read-only.

pub(crate) mod bit;
pub(crate) mod cjson;
pub(crate) mod cmsgpack;
pub(crate) mod structlib;

use mlua::Lua;

/// Installs every library as a global table.
pub(crate) fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.set("bit", bit::table(lua)?)?;
    g.set("cjson", cjson::table(lua)?)?;
    g.set("cmsgpack", cmsgpack::table(lua)?)?;
    g.set("struct", structlib::table(lua)?)?;
    Ok(())
}

/// A library error (the script's handler makes it `ERR msg`).
pub(crate) fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::external(msg.into())
}
