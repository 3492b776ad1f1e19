//! Pure value codecs of the Redis types that live inside other types: `HyperLogLog`
//! (a string), geohash (a sorted-set score) and bit fields (a string). No I/O, no
//! locks; the command handlers in `cmd/` read and write the values through a `Tx`.

pub(crate) mod bitfield;
pub(crate) mod geohash;

pub(crate) mod hll;
