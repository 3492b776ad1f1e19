//! The entries a demotion keeps in the fast tier (issue #15, PrismDB §4.2): the
//! popularity mapper pins them, so instead of going down to the slow tier they are
//! rewritten into new StableStore tables in the pool, which replace the demotion's
//! victims in the same manifest edit (tag 9, docs/formats.md §7.3).
//!
//! Kept tables are cut at [`Keep::cuts`]: where two victim ranges are not adjacent in
//! StableStore, a kept table spanning both would overlap the tables left between them,
//! and lookups binary-search non-overlapping tables (a test lost keys before the cut).
//!
//! Thread-safety: used by the demotion job alone (the slow-tier thread, or
//! `Db::compact`), which owns the table chunk it fills.

use std::sync::Arc;

use super::compact::Outcome;
use crate::error::{Error, Result};
use crate::pmem::Pool;
use crate::table::builder::{LstBuilder, TableOptions};
use crate::table::{Lst, TableWriter};
use crate::value::ValueRef;
use crate::vlog::SegmentMap;

/// Where the entries a demotion pins go: new StableStore tables in the pool.
pub(crate) struct Keep<'a> {
    /// Whether an entry stays in the fast tier (the mapper's decision, issue #15).
    pub pins: &'a mut dyn FnMut(&[u8]) -> bool,
    /// How StableStore tables are cut.
    pub topts: &'a TableOptions,
    /// Keys (ascending) where a kept table must end and the next begin: the first
    /// key of each victim range after a gap. StableStore tables left between two
    /// victim ranges must not overlap a kept table.
    pub cuts: &'a [Box<[u8]>],
}

/// Writes the entries a demotion keeps into new StableStore tables, cut at the
/// `Keep::cuts`.
pub(super) struct KeptWriter<'a> {
    pool: &'a Arc<Pool>,
    segs: SegmentMap,
    w: TableWriter,
    b: LstBuilder,
    cuts: std::iter::Peekable<std::slice::Iter<'a, Box<[u8]>>>,
}

impl<'a> KeptWriter<'a> {
    pub(super) fn new(
        pool: &'a Arc<Pool>,
        victims: &[Arc<Lst>],
        topts: &TableOptions,
        cuts: &'a [Box<[u8]>],
    ) -> Self {
        let mut segs = SegmentMap::default();
        for l in victims {
            for s in l.value_segments() {
                segs.insert(s.clone());
            }
        }
        KeptWriter {
            pool,
            segs,
            w: TableWriter::new(pool.clone()),
            b: topts.builder(topts.stable_filters),
            cuts: cuts.iter().peekable(),
        }
    }

    pub(super) fn add(&mut self, k: &[u8], v: ValueRef<'_>, o: &mut Outcome) -> Result<()> {
        while self.cuts.next_if(|c| k >= &***c).is_some() {
            if let Some(b) = self.b.finish() {
                o.kept.push(self.w.place(b, &self.segs)?);
            }
        }
        let chunk = match v.ptr() {
            None => None,
            Some(p) => Some(
                self.segs
                    .find(p.addr, self.pool.chunk_size())
                    .map(|s| s.chunk())
                    .ok_or_else(|| {
                        Error::corruption(
                            self.pool.path(),
                            p.addr,
                            "a table entry points outside the value segments its table lists",
                        )
                    })?,
            ),
        };
        let done = self.b.add(k, &v);
        if let Some(c) = chunk {
            self.b.note_value_segment(c);
        }
        if let Some(b) = done {
            o.kept.push(self.w.place(b, &self.segs)?);
        }
        o.kept_entries += 1;
        Ok(())
    }

    /// Places the last table and makes every kept table durable.
    pub(super) fn finish(mut self, o: &mut Outcome) -> Result<()> {
        if let Some(b) = self.b.finish() {
            o.kept.push(self.w.place(b, &self.segs)?);
        }
        self.w.sync()?;
        o.kept_bytes = self.w.bytes_written();
        Ok(())
    }
}
