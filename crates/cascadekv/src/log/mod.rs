//! Thread-exclusive logs on the fast tier: record format, writer, reader.

pub(crate) mod packed;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod writer;

pub(crate) use reader::{
    discover, discover_with, replay, salvage, seal_torn_tail, Damage, Discovery, LogInfo, TornTail,
};
pub(crate) use record::{Kind, RecordIn};
pub(crate) use writer::LogWriter;

#[cfg(test)]
mod tests;
