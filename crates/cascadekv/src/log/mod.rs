//! Thread-exclusive logs on the fast tier: record format, writer, reader.

pub mod reader;
pub mod record;
pub mod writer;

pub use reader::{check_chain, discover, replay, Discovery, LogInfo, ReplayEnd};
pub use record::{Kind, RecordIn, RecordOut};
pub use writer::LogWriter;
