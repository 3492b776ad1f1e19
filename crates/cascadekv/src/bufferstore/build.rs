//! Building a buffer-tree from a frozen FastStore (FluidKV Algorithm 3, FLUSH, lines
//! 6–12): scan the index in key order — the newest version of each key, tombstones
//! included — into LSTs in fresh table chunks, and make them durable.
//!
//! Separated values are not copied: the tables keep their [`crate::value::ValuePtr`]
//! and hold the log segments those point into (`vlog/segment.rs`); the segments'
//! referenced bytes are tallied for the value log's accounting. The generation's other
//! segments are freed once its FastStore is gone.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::faststore::FastStore;
use crate::pmem::Pool;
use crate::table::builder::TableOptions;
use crate::table::{TableWriter, Unpublished};
use crate::vlog::{LiveTally, SegmentLive, SegmentMap};

/// What a flush built.
#[derive(Debug)]
pub(crate) struct Built {
    /// The new buffer-tree's tables (durable, not yet live).
    pub tables: Unpublished,
    /// Log segments of the generation holding values the tables reference, with the
    /// bytes referenced.
    pub retained: Vec<SegmentLive>,
    /// Table bytes written.
    pub bytes_written: u64,
}

/// Writes the newest versions in `fs` (frozen: no write is in flight) into LSTs.
pub(crate) fn build(pool: &Arc<Pool>, topts: &TableOptions, fs: &FastStore) -> Result<Built> {
    let mut writer = TableWriter::new(pool.clone());
    let mut builder = topts.builder(true);
    let mut segs = SegmentMap::default();
    for s in fs.segments() {
        segs.insert(s);
    }
    let cs = pool.chunk_size();
    let mut tally = LiveTally::default();
    let mut out = Unpublished::default();
    let mut err = None;
    fs.index().for_each(|k, v| {
        if err.is_some() {
            return;
        }
        let v = v.val.as_value_ref();
        let done = builder.add(k, &v);
        if let Some(p) = v.ptr() {
            let Some(s) = segs.find(p.addr, cs) else {
                err = Some(Error::Internal(format!(
                    "a FastStore value at {} lies outside its generation's log",
                    p.addr
                )));
                return;
            };
            builder.note_value_segment(s.chunk());
            tally.note(s, k.len(), p);
        }
        if let Some(b) = done {
            match writer.place(b, &segs) {
                Ok(l) => out.push(l),
                Err(e) => err = Some(e),
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(b) = builder.finish() {
        out.push(writer.place(b, &segs)?);
    }
    writer.sync()?;
    Ok(Built {
        tables: out,
        retained: tally.finish(),
        bytes_written: writer.bytes_written(),
    })
}
