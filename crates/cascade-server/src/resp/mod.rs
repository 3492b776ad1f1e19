//! RESP2: the incremental request parser ([`parse`]) and the reply encoder ([`reply`]).

pub mod parse;
pub mod reply;
