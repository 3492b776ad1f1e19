//! Building a buffer-tree from a frozen FastStore (FluidKV Algorithm 3, FLUSH, lines
//! 6–12): scan the index in key order — the newest version of each key, tombstones
//! included — into LSTs in fresh table chunks, and make them durable.
//!
//! Separated values are not copied: the tables keep their [`crate::value::ValuePtr`],
//! and the log segments holding them are reported, with their live bytes, so the flush
//! can retain exactly those segments and free the generation's others.

use std::sync::Arc;

use crate::error::Result;
use crate::faststore::FastStore;
use crate::pmem::Pool;
use crate::table::builder::TableOptions;
use crate::table::{TableSet, TableWriter};
use crate::vlog::{LiveTally, SegmentLive};

/// What a flush built.
#[derive(Debug)]
pub(crate) struct Built {
    /// The new buffer-tree's tables (durable).
    pub tables: TableSet,
    /// Log segments of the generation holding values the tables reference.
    pub retained: Vec<SegmentLive>,
    /// The generation's other log segments: (first chunk, span).
    pub unreferenced: Vec<(u64, u64)>,
    /// Table bytes written.
    pub bytes_written: u64,
}

/// Writes the newest versions in `fs` (frozen: no write is in flight) into LSTs.
pub(crate) fn build(pool: &Arc<Pool>, topts: &TableOptions, fs: &FastStore) -> Result<Built> {
    let mut writer = TableWriter::new(pool.clone());
    let mut builder = topts.builder();
    let segs = fs.segments();
    let mut tally = LiveTally::new(segs.clone(), pool.chunk_size());
    let mut lsts = Vec::new();
    let mut err = None;
    fs.index().for_each(|k, v| {
        if err.is_some() {
            return;
        }
        let v = v.val.as_value_ref();
        if let Some(p) = v.ptr() {
            tally.note(k.len(), p);
        }
        if let Some(b) = builder.add(k, &v) {
            match writer.place(b) {
                Ok(l) => lsts.push(l),
                Err(e) => err = Some(e),
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    if let Some(b) = builder.finish() {
        lsts.push(writer.place(b)?);
    }
    writer.sync()?;
    Ok(Built {
        tables: TableSet::new(lsts),
        retained: tally.finish(),
        unreferenced: segs
            .into_iter()
            .filter(|(c, _)| !tally.references(*c))
            .collect(),
        bytes_written: writer.bytes_written(),
    })
}
