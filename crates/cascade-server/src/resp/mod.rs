//! RESP: the incremental request parser ([`parse`], public for the fuzz target) and the
//! reply encoder (`reply`).

pub mod parse;
pub(crate) mod reply;
