//! Logical Sorted Tables (FluidKV §4.3): sorted entries in fixed-size blocks, one
//! index block per table, stored in pool chunks of kind `Table`.
//!
//! * [`block`] — block format, builder and verified reader.
//! * [`builder`] — turns a sorted stream into LSTs.
//! * [`Lst`] — a placed table: point lookups in at most two block reads, iteration.
//! * [`writer`] — places built LSTs into table chunks and makes them durable.
//! * [`set`] — [`TableSet`], non-overlapping tables ordered by key: the structure of a
//!   buffer-tree and of StableStore (FluidKV: "structurally identical").
//!
//! Chunk lifetime: every `Lst` holds an `Arc` of its [`TableChunk`]. Marking an LST
//! obsolete (after the manifest stopped referencing it) lowers the chunk's live count;
//! the chunk is freed when its last `Arc` goes — that is, when no reader, stage set or
//! writer can still reach any table in it — and no live table remains in it. This
//! reference counting is what makes teardown after compaction safe for concurrent
//! readers (they hold the old stage set, hence the old tables, until they finish).
//!
//! Value segments: an LST also holds every value-log segment its entries point into
//! (`values`, one holder each, see `vlog/segment.rs`), and the manifest records their
//! first chunks with the table, so the segments a table needs are known without
//! reading it. Marking the table obsolete gives those holders back.
//!
//! A table that never became live (a flush or compaction failed before its manifest
//! edit) is marked obsolete by its builder, so its chunk and holders go too.

pub(crate) mod block;
pub(crate) mod builder;
pub(crate) mod check;
mod fences;
pub(crate) mod filter;
pub(crate) mod place;
pub(crate) mod reclaim;
pub(crate) mod set;
mod slices;
mod verified;
pub(crate) mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use block::{units_of, Block, BlockError, BlockKind};
pub(crate) use builder::BuiltLst;
pub use place::{Access, Place, TableChunk};
pub(crate) use set::TableSet;
pub(crate) use writer::TableWriter;

use crate::error::{Error, Result};
use crate::slowtier::SlowFile;
use crate::value::ValueRef;
use crate::vlog::Segment;

/// A placed LST.
#[derive(Debug)]
pub struct Lst {
    /// Unique id; seeds block checksums.
    pub id: u64,
    /// Address of the table's first byte: in the pool, or in its slow-tier file.
    pub base: u64,
    /// Table bytes.
    pub size: u32,
    /// Offset of the index block from `base`.
    pub index_off: u32,
    /// Units of the index block.
    pub index_units: u8,
    /// Smallest key.
    pub min_key: Box<[u8]>,
    /// Largest key.
    pub max_key: Box<[u8]>,
    /// Entries.
    pub entries: u32,
    /// Where the bytes are (a pool chunk or a slow-tier file).
    place: Place,
    /// Value-log segments the entries point into (one holder each while live).
    values: Vec<Arc<Segment>>,
    obsolete: AtomicBool,
    /// The index block, verified and decoded by the first lookup (`fences.rs`).
    fences: std::sync::OnceLock<fences::Fences>,
    /// Bloom filter of the keys: set at placement (the builder's, or `None` for a
    /// table built without one), or built on the first filtered lookup of a table
    /// loaded at open (`None` if that read failed).
    filter: std::sync::OnceLock<Option<filter::Filter>>,
    /// Data blocks whose checksum verified since this handle was made (`verified.rs`):
    /// later gets and scans of them skip the CRC.
    verified: verified::Verified,
}

/// Placement facts of an LST (what the manifest stores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LstMeta {
    /// Id.
    pub id: u64,
    /// Base address.
    pub base: u64,
    /// Bytes.
    pub size: u32,
    /// Index block offset.
    pub index_off: u32,
    /// Index block units.
    pub index_units: u8,
    /// Entries.
    pub entries: u32,
    /// Smallest key.
    pub min_key: Box<[u8]>,
    /// Largest key.
    pub max_key: Box<[u8]>,
    /// First chunks of the value-log segments the entries point into, ascending.
    /// `None` for a table a store of the first manifest format listed: recovery reads
    /// the table once to fill it in.
    pub values: Option<Vec<u64>>,
}

impl Lst {
    /// Rebuilds a handle from manifest metadata (recovery), registering it as live in
    /// `chunk` and taking a holder on each of its value segments.
    pub fn from_meta(m: &LstMeta, chunk: Arc<TableChunk>, values: Vec<Arc<Segment>>) -> Arc<Lst> {
        for s in &values {
            s.hold();
        }
        let mut l = Lst::probe(m, chunk);
        l.values = values;
        Self::make_live(l)
    }

    /// Rebuilds a slow-tier table from manifest metadata (recovery), registering it as
    /// live in `file`.
    /// `filter`: the one stored in the file, if it was read intact.
    pub fn from_file_meta(
        m: &LstMeta,
        file: Arc<SlowFile>,
        filter: Option<filter::Filter>,
    ) -> Arc<Lst> {
        let l = Lst::with_place(m, Place::File(file));
        if let Some(f) = filter {
            let _ = l.filter.set(Some(f));
        }
        Self::make_live(l)
    }

    /// A table just written into `place`, live from now on (`filter`: the builder's).
    pub(crate) fn placed(
        b: BuiltLst,
        base: u64,
        place: Place,
        values: Vec<Arc<Segment>>,
    ) -> Arc<Lst> {
        for s in &values {
            s.hold();
        }
        let mut l = Lst {
            id: b.id,
            base,
            size: b.size(),
            index_off: b.index_off,
            index_units: b.index_units,
            min_key: b.min_key,
            max_key: b.max_key,
            entries: b.entries,
            place,
            values,
            obsolete: AtomicBool::new(true),
            fences: std::sync::OnceLock::new(),
            filter: std::sync::OnceLock::from(b.filter),
            verified: verified::Verified::none(),
        };
        l.verified = l.new_verified();
        Self::make_live(l)
    }

    fn make_live(mut l: Lst) -> Arc<Lst> {
        l.place.add_live();
        l.obsolete = AtomicBool::new(false);
        Arc::new(l)
    }

    /// A handle for reading a table the manifest lists without making it live (no
    /// holder on its chunk or values): recovery reads first-format tables with it.
    pub fn probe(m: &LstMeta, chunk: Arc<TableChunk>) -> Lst {
        Lst::with_place(m, Place::Pool(chunk))
    }

    fn with_place(m: &LstMeta, place: Place) -> Lst {
        let mut l = Lst {
            id: m.id,
            base: m.base,
            size: m.size,
            index_off: m.index_off,
            index_units: m.index_units,
            min_key: m.min_key.clone(),
            max_key: m.max_key.clone(),
            entries: m.entries,
            place,
            values: Vec::new(),
            obsolete: AtomicBool::new(true),
            fences: std::sync::OnceLock::new(),
            filter: std::sync::OnceLock::new(),
            verified: verified::Verified::none(),
        };
        l.verified = l.new_verified();
        l
    }

    /// No block verified yet: one bit per block unit of a pool table; none for a
    /// slow-tier table (or metadata that does not give a block size), whose every read
    /// is verified.
    fn new_verified(&self) -> verified::Verified {
        match (&self.place, self.block_size()) {
            (Place::Pool(_), Ok(bs)) => verified::Verified::new(u64::from(self.size) / bs),
            _ => verified::Verified::none(),
        }
    }

    /// First chunk and span of the table chunk this LST lies in (`None` for a
    /// slow-tier table).
    pub fn table_chunk(&self) -> Option<(u64, u64)> {
        self.place.table_chunk()
    }

    #[cfg(test)]
    fn pool_chunk(&self) -> Arc<TableChunk> {
        match &self.place {
            Place::Pool(c) => c.clone(),
            Place::File(_) => panic!("a slow-tier table has no pool chunk"),
        }
    }

    /// The value-log segments the entries point into.
    pub fn value_segments(&self) -> &[Arc<Segment>] {
        &self.values
    }

    /// Metadata for the manifest.
    pub fn meta(&self) -> LstMeta {
        LstMeta {
            id: self.id,
            base: self.base,
            size: self.size,
            index_off: self.index_off,
            index_units: self.index_units,
            entries: self.entries,
            min_key: self.min_key.clone(),
            max_key: self.max_key.clone(),
            values: Some(self.values.iter().map(|s| s.chunk()).collect()),
        }
    }

    /// Marks the table obsolete (the manifest no longer references it, or it never
    /// became live): its chunk is freed once nothing reaches it, and it gives back its
    /// holder on each value segment.
    pub fn mark_obsolete(&self) {
        if !self.obsolete.swap(true, Ordering::AcqRel) {
            self.place.sub_live();
            for s in &self.values {
                s.release();
            }
        }
    }

    fn path(&self) -> &std::path::Path {
        self.place.path()
    }

    /// Block `off` (relative to the table) of `units` units: borrowed from the pool
    /// mapping, or read from the slow-tier file into `buf`.
    fn block<'b>(
        &'b self,
        off: u64,
        units: u8,
        kind: BlockKind,
        buf: &'b mut Vec<u8>,
        how: Access,
    ) -> Result<Block<'b>> {
        self.block_checked(off, units, kind, buf, how, false)
    }

    /// Data block `off` for a get or a scan. A get (`Access::Point`) verifies its
    /// checksum only if no read since this handle was made did (`verified.rs`; FluidKV
    /// §4.3: one block read per lookup). Scans (`Access::Bulk`) always verify: a
    /// compaction, merge or demotion reads through them, and must never write bytes
    /// that changed after their first check into a new table under a fresh checksum.
    /// Slow-tier blocks are always verified.
    fn data_block<'b>(
        &'b self,
        off: u64,
        units: u8,
        buf: &'b mut Vec<u8>,
        how: Access,
    ) -> Result<Block<'b>> {
        let bs = self.block_size()?;
        let unit = off / bs;
        if how == Access::Point && self.verified.is_set(unit) {
            // No checksum streams the block into cache, so the search's probes would
            // be one dependent miss each (header, then each entry visited): start
            // every line of the block loading at once.
            self.place.prefetch(self.base + off, u64::from(units) * bs);
            return self.block_checked(off, units, BlockKind::Data, buf, how, true);
        }
        match self.block_checked(off, units, BlockKind::Data, buf, how, false) {
            Ok(b) => {
                self.verified.set(unit);
                Ok(b)
            }
            Err(e) => {
                // A scan found it damaged: gets verify it again from now on.
                self.verified.clear(unit);
                Err(e)
            }
        }
    }

    /// Records what a full read of data block `off` found (`check.rs`: the scrubber,
    /// `cascade verify`): intact, so gets may skip its checksum, or damaged, so every
    /// later read verifies it again and returns the error.
    fn note_checked(&self, off: u64, intact: bool) {
        if let Ok(bs) = self.block_size() {
            if intact {
                self.verified.set(off / bs);
            } else {
                self.verified.clear(off / bs);
            }
        }
    }

    /// `trusted`: the block verified earlier (`verified.rs`), so only its header is
    /// checked.
    fn block_checked<'b>(
        &'b self,
        off: u64,
        units: u8,
        kind: BlockKind,
        buf: &'b mut Vec<u8>,
        how: Access,
        trusted: bool,
    ) -> Result<Block<'b>> {
        let bs = self.block_size()?;
        let len = u64::from(units) * bs;
        if off + len > u64::from(self.size) {
            return Err(Error::corruption(
                self.path(),
                self.base + off,
                "block beyond its table",
            ));
        }
        let bytes = self.place.read(self.base + off, len, buf, how)?;
        let b = if trusted {
            Block::open_verified(bytes, kind)
        } else {
            Block::open(bytes, self.id, kind)
        }
        .map_err(|e| self.block_error(off, e))?;
        if units_of(bytes) != Some(units) {
            return Err(self.block_error(
                off,
                BlockError::Malformed("block size differs from its index entry"),
            ));
        }
        Ok(b)
    }

    fn block_size(&self) -> Result<u64> {
        // The index block's units and size give the unit size.
        let ib = u64::from(self.size)
            .checked_sub(u64::from(self.index_off))
            .filter(|b| *b > 0 && self.index_units > 0)
            .ok_or_else(|| {
                Error::corruption(self.path(), self.base, "table metadata out of range")
            })?;
        Ok(ib / u64::from(self.index_units))
    }

    fn undecodable(&self, off: u64) -> Error {
        self.block_error(off, BlockError::Malformed("entry does not decode"))
    }

    fn block_error(&self, off: u64, e: BlockError) -> Error {
        match e {
            BlockError::Checksum { stored, actual } => Error::ChecksumMismatch {
                file: self.path().to_path_buf(),
                offset: self.base + off,
                expected: stored,
                actual,
            },
            BlockError::Malformed(why) => Error::corruption(self.path(), self.base + off, why),
        }
    }

    fn index<'b>(&'b self, buf: &'b mut Vec<u8>) -> Result<Block<'b>> {
        self.block(
            u64::from(self.index_off),
            self.index_units,
            BlockKind::Index,
            buf,
            Access::Bulk,
        )
    }

    /// A value as the caller sees it: a slow-tier table's `Separated` entry names a
    /// blob in its own file, read and verified into `buf`; anything else unchanged.
    fn resolve<'v>(
        &self,
        v: ValueRef<'v>,
        buf: &'v mut Vec<u8>,
        how: Access,
    ) -> Result<ValueRef<'v>> {
        match (v, &self.place) {
            (ValueRef::Separated(p), Place::File(_)) => {
                Ok(ValueRef::Inline(self.place.read_blob(p, buf, how)?))
            }
            (v, _) => Ok(v),
        }
    }

    /// The DRAM copy of the index block, built (verified) by the first call.
    fn fences(&self) -> Result<&fences::Fences> {
        if let Some(f) = self.fences.get() {
            return Ok(f);
        }
        let ioff = u64::from(self.index_off);
        let mut buf = Vec::new();
        let f = fences::Fences::from_block(&self.index(&mut buf)?)
            .ok_or_else(|| self.undecodable(ioff))?;
        // A racing lookup may have set it first: both copies are the same.
        let _ = self.fences.set(f);
        self.fences
            .get()
            .ok_or_else(|| Error::Internal("table index copy missing".into()))
    }

    /// DRAM the index copy and the filter take once built.
    pub fn lookup_dram_bytes(&self) -> u64 {
        let fences =
            self.fences.get().map_or(0, fences::Fences::dram_bytes) + self.verified.dram_bytes();
        let filter = self
            .filter
            .get()
            .and_then(Option::as_ref)
            .map_or(0, filter::Filter::dram_bytes);
        (fences + filter) as u64
    }

    /// The table's filter, built from a verified read of every data block if the table
    /// has none yet (loaded at open); `None` if that read failed.
    fn filter(&self) -> Option<&filter::Filter> {
        self.filter
            .get_or_init(|| {
                let mut hashes = Vec::with_capacity(self.entries as usize);
                self.scan_from(None, |k, _| {
                    hashes.push(filter::key_hash(k));
                    true
                })
                .ok()
                .map(|()| filter::Filter::build(&hashes))
            })
            .as_ref()
    }

    /// False only if the table's Bloom filter says `key` is not here (true without a
    /// filter, or if building one failed).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.filter()
            .is_none_or(|f| f.may_contain(filter::key_hash(key)))
    }

    /// Looks `key` up and calls `f` with its value borrowed from the verified data
    /// block (no copy unless `f` makes one): one data block read (the index block is
    /// verified and copied to DRAM by the first lookup, `fences.rs`).
    ///
    /// `filtered`: consult the table's Bloom filter first (building it if the table
    /// was loaded at open), which skips the block read for most absent keys.
    pub fn get_with<R>(
        &self,
        key: &[u8],
        filtered: bool,
        f: impl FnOnce(ValueRef<'_>) -> R,
    ) -> Result<Option<R>> {
        // No comparison with `min_key` / `max_key` up front: each is a separate
        // allocation, so a cache miss, and each miss is ~25 % of a get here. A key
        // below the table's range finds no block; one past it can only land in the
        // last block, and only then is `max_key` read (so no block is read for it).
        if filtered
            && self
                .filter()
                .is_some_and(|f| !f.may_contain(filter::key_hash(key)))
        {
            return Ok(None);
        }
        let Some((addr, units, last)) = self.fences()?.block_for(key) else {
            return Ok(None);
        };
        if last && key > &*self.max_key {
            return Ok(None);
        }
        let mut buf = Vec::new();
        let data = self.data_block(addr, units, &mut buf, Access::Point)?;
        match data.search(key).ok_or_else(|| self.undecodable(addr))? {
            Ok(j) => {
                let (_, v) = data.data_at(j).ok_or_else(|| self.undecodable(addr))?;
                let mut vbuf = Vec::new();
                Ok(Some(f(self.resolve(v, &mut vbuf, Access::Point)?)))
            }
            Err(_) => Ok(None),
        }
    }

    /// Calls `f` with the first key of up to `n` data blocks spread evenly over the
    /// table (from the DRAM index copy: no data block is read). Placement samples
    /// key ranges this way (`placement/msc.rs`).
    pub(crate) fn sample_keys(&self, n: usize, mut f: impl FnMut(&[u8])) -> Result<()> {
        let fences = self.fences()?;
        let len = fences.len();
        let n = n.min(len).max(1);
        for j in 0..n {
            if let Some(k) = fences.first_key(j * len / n) {
                f(k);
            }
        }
        Ok(())
    }

    /// Calls `f(key, value)` for entries with `lo <= key` (from the first such entry)
    /// until `f` returns false.
    pub fn scan_from(
        &self,
        lo: Option<&[u8]>,
        mut f: impl FnMut(&[u8], ValueRef<'_>) -> bool,
    ) -> Result<()> {
        // The DRAM copy of the index block (`fences.rs`): a scan reads data blocks
        // only — one `pread` fewer per slow-tier table and no index CRC per scan.
        let ioff = u64::from(self.index_off);
        let (mut buf, mut vbuf) = (Vec::new(), Vec::new());
        let fences = self.fences()?;
        let start = lo.and_then(|k| fences.position(k)).unwrap_or(0);
        for i in start..fences.len() {
            let (addr, units) = fences.block(i).ok_or_else(|| self.undecodable(ioff))?;
            let data = self.data_block(addr, units, &mut buf, Access::Bulk)?;
            let from = match lo {
                Some(k) if i == start => {
                    match data.search(k).ok_or_else(|| self.undecodable(addr))? {
                        Ok(j) | Err(j) => j,
                    }
                }
                _ => 0,
            };
            for j in from..data.count() {
                let (k, v) = data.data_at(j).ok_or_else(|| self.undecodable(addr))?;
                if !f(k, self.resolve(v, &mut vbuf, Access::Bulk)?) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Calls `f(key, value)` for entries with `key <= hi` (`key < hi` when `exclusive`;
    /// every entry for `None`) in descending key order until `f` returns false.
    pub fn scan_rev(
        &self,
        hi: Option<&[u8]>,
        exclusive: bool,
        mut f: impl FnMut(&[u8], ValueRef<'_>) -> bool,
    ) -> Result<()> {
        let ioff = u64::from(self.index_off);
        let (mut buf, mut vbuf) = (Vec::new(), Vec::new());
        let fences = self.fences()?;
        let last = match hi {
            Some(k) => match fences.position(k) {
                Some(i) => i,
                None => return Ok(()),
            },
            None => match fences.len().checked_sub(1) {
                Some(i) => i,
                None => return Ok(()),
            },
        };
        for i in (0..=last).rev() {
            let (addr, units) = fences.block(i).ok_or_else(|| self.undecodable(ioff))?;
            let data = self.data_block(addr, units, &mut buf, Access::Bulk)?;
            // Entries before `end` (exclusive) are inside the bound.
            let end = match hi {
                Some(k) if i == last => {
                    match data.search(k).ok_or_else(|| self.undecodable(addr))? {
                        Ok(j) if !exclusive => j + 1,
                        Ok(j) | Err(j) => j,
                    }
                }
                _ => data.count(),
            };
            for j in (0..end).rev() {
                let (k, v) = data.data_at(j).ok_or_else(|| self.undecodable(addr))?;
                if !f(k, self.resolve(v, &mut vbuf, Access::Bulk)?) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// Reads every block and checks it (used by tests and tools).
    pub fn verify(&self) -> Result<u64> {
        let mut n = 0;
        self.scan_from(None, |_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }
}

/// Tables a flush or compaction has placed but not yet made live. If the job fails
/// before its manifest edit (a full pool, an I/O error), dropping the guard marks them
/// obsolete, so their chunks and value-segment holders go back to the pool instead of
/// leaking until the next open.
#[derive(Debug, Default)]
pub(crate) struct Unpublished {
    lsts: Vec<Arc<Lst>>,
}

impl Unpublished {
    /// Adds a placed table.
    pub fn push(&mut self, l: Arc<Lst>) {
        self.lsts.push(l);
    }

    /// The tables so far.
    pub fn tables(&self) -> &[Arc<Lst>] {
        &self.lsts
    }

    /// Moves the tables of `other` in.
    pub fn extend(&mut self, mut other: Unpublished) {
        self.lsts.append(&mut other.lsts);
    }

    /// The edit naming these tables is durable: they are live now.
    pub fn publish(mut self) -> Vec<Arc<Lst>> {
        std::mem::take(&mut self.lsts)
    }
}

impl Drop for Unpublished {
    fn drop(&mut self) {
        for l in &self.lsts {
            l.mark_obsolete();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::Pool;
    use crate::table::builder::LstBuilder;
    use crate::value::Value;

    fn owned(v: ValueRef<'_>) -> Value {
        v.to_owned_value()
    }
    use crate::vlog::SegmentMap;

    use crate::pmem::test_pool as pool;

    fn ids() -> Arc<std::sync::atomic::AtomicU64> {
        Arc::new(std::sync::atomic::AtomicU64::new(1))
    }

    /// One placed, synced table of 256-byte blocks (no filter): keys `i * step` for
    /// `i` in 0..100, each with the value `value`.
    fn one_table(p: &Arc<Pool>, step: u64) -> Result<Arc<Lst>> {
        let mut w = TableWriter::new(p.clone());
        let mut b = LstBuilder::new(256, 64 << 10, ids());
        for i in 0..100u64 {
            assert!(b
                .add(&(i * step).to_be_bytes(), &ValueRef::Inline(b"value"))
                .is_none());
        }
        let built = b.finish().ok_or_else(|| Error::Internal("empty".into()))?;
        let l = w.place(built, &SegmentMap::default())?;
        w.sync()?;
        Ok(l)
    }

    #[test]
    fn build_place_get_scan_and_free() -> Result<()> {
        let p = pool();
        let used0 = p.allocator().used_chunks();
        let mut w = TableWriter::new(p.clone());
        let topts = builder::TableOptions {
            block_size: 512,
            max_bytes: 64 << 10,
            ids: ids(),
            stable_filters: false,
        };
        let mut b = topts.builder(true);
        let mut lsts = Vec::new();
        for i in 0..5000u64 {
            let k = (i * 2).to_be_bytes();
            let v = if i % 10 == 0 {
                ValueRef::Tombstone
            } else {
                ValueRef::Inline(&k)
            };
            if let Some(done) = b.add(&k, &v) {
                lsts.push(w.place(done, &SegmentMap::default())?);
            }
        }
        if let Some(done) = b.finish() {
            lsts.push(w.place(done, &SegmentMap::default())?);
        }
        w.sync()?;
        assert!(lsts.len() > 2, "{} LSTs", lsts.len());
        assert_eq!(lsts.iter().map(|l| u64::from(l.entries)).sum::<u64>(), 5000);
        for l in &lsts {
            assert_eq!(l.verify()?, u64::from(l.entries));
        }
        let find = |k: u64, filtered: bool| -> Result<Option<Value>> {
            for l in &lsts {
                if let Some(v) = l.get_with(&k.to_be_bytes(), filtered, owned)? {
                    return Ok(Some(v));
                }
            }
            Ok(None)
        };
        for filtered in [false, true] {
            assert_eq!(find(20, filtered)?, Some(Value::Tombstone));
            assert_eq!(
                find(22, filtered)?,
                Some(Value::Inline(22u64.to_be_bytes().to_vec()))
            );
            assert_eq!(find(23, filtered)?, None);
        }
        // Every key passes the filter of the table whose range holds it; most absent
        // keys do not (about 1 %).
        let passes = |k: u64| {
            let k = k.to_be_bytes();
            lsts.iter()
                .filter(|l| *l.min_key <= k[..] && k[..] <= *l.max_key)
                .any(|l| {
                    l.filter()
                        .is_some_and(|f| f.may_contain(filter::key_hash(&k)))
                })
        };
        assert!((0..5000u64).all(|i| passes(i * 2)));
        let false_positives = (0..5000u64).filter(|i| passes(i * 2 + 1)).count();
        assert!(false_positives < 150, "{false_positives} of 5000");
        // Range scan across a table.
        let mut got = Vec::new();
        lsts[1].scan_from(Some(&lsts[1].min_key[..]), |k, _| {
            got.push(k.to_vec());
            got.len() < 3
        })?;
        assert_eq!(got.len(), 3);
        // Obsolete + dropped: the chunks are freed.
        w.close_chunk();
        for l in &lsts {
            l.mark_obsolete();
        }
        drop(lsts);
        drop(w);
        assert!(p.free_released()? > 0);
        assert_eq!(p.allocator().used_chunks(), used0);
        Ok(())
    }

    /// Flips at rest, each read by a fresh handle (what an open makes: nothing
    /// verified yet), are errors, never data.
    #[test]
    fn damaged_blocks_are_corruption_never_data() -> Result<()> {
        let p = pool();
        let placed = one_table(&p, 1)?;
        for off in (0..u64::from(placed.size)).step_by(37) {
            let l = Lst::probe(&placed.meta(), placed.pool_chunk());
            let addr = l.base + off;
            let orig = p.mem().read(addr, 1)?[0];
            p.mem().write(addr, &[orig ^ 0x20])?;
            let mut all_ok = true;
            for i in 0..100u64 {
                match l.get_with(&i.to_be_bytes(), false, owned) {
                    Ok(Some(v)) => assert_eq!(v, Value::Inline(b"value".to_vec())),
                    Ok(None) => panic!("key {i} vanished after flipping byte {off}"),
                    Err(e) => {
                        assert!(e.is_corruption(), "{e}");
                        all_ok = false;
                    }
                }
            }
            if off >= u64::from(l.index_off) {
                // The index block was verified and copied to DRAM by the first lookup
                // (fences.rs): lookups keep answering from the verified copy, and a
                // read of the media block (what scrub and verify do) notices the flip.
                assert!(
                    l.index(&mut Vec::new()).is_err(),
                    "flip at {off} in the index went unnoticed"
                );
            } else {
                assert!(!all_ok, "flip at {off} went unnoticed");
            }
            p.mem().write(addr, &[orig])?;
        }
        Ok(())
    }

    /// Where `value` of key `i` (a table of `one_table`) lies in the pool.
    fn value_addr(p: &Pool, l: &Lst, i: u64) -> Result<u64> {
        let bytes = p.mem().read(l.base, u64::from(l.index_off))?;
        let mut pat = vec![8u8];
        pat.extend_from_slice(&i.to_be_bytes());
        pat.extend_from_slice(&[1, 5]);
        pat.extend_from_slice(b"value");
        let at = bytes
            .windows(pat.len())
            .position(|w| w == pat)
            .ok_or_else(|| Error::Internal("entry not found".into()))?;
        Ok(l.base + (at + pat.len() - 5) as u64)
    }

    /// A block's checksum is verified by its first read only; a flip after that is
    /// what a get may return until a walk (the scrubber's) reads the block again,
    /// finds the damage and makes every later read of it verify — and fail.
    #[test]
    fn a_block_verifies_once_until_a_walk_finds_it_damaged() -> Result<()> {
        let p = pool();
        let l = one_table(&p, 1)?;
        assert_eq!(l.verified.count(), 0);
        assert!(l.get_with(&0u64.to_be_bytes(), false, owned)?.is_some());
        assert_eq!(l.verified.count(), 1, "the first read verified its block");
        let addr = value_addr(&p, &l, 5)?;
        let orig = p.mem().read(addr, 1)?[0];
        p.mem().write(addr, &[orig ^ 0x20])?;
        // The documented window: key 5 shares block 0 with key 0, which verified
        // before the flip, so this get skips the checksum and sees the flipped byte.
        assert_eq!(
            l.get_with(&5u64.to_be_bytes(), false, owned)?,
            Some(Value::Inline(b"Value".to_vec()))
        );
        // Scans (and so compactions) always verify: never the flipped value.
        let scanned = l.scan_from(None, |k, v| {
            assert!(
                k != 5u64.to_be_bytes() || v == ValueRef::Inline(b"value"),
                "a scan returned the flipped value"
            );
            true
        });
        assert!(matches!(scanned, Err(e) if e.is_corruption()));
        // A fresh handle (the next open) verifies first: an error, never the value.
        let fresh = Lst::probe(&l.meta(), l.pool_chunk());
        assert!(
            matches!(fresh.get_with(&5u64.to_be_bytes(), false, owned), Err(e) if e.is_corruption())
        );
        // The scrubber's walk finds it, and from then on every get of the block fails.
        let mut found = Vec::new();
        l.walk(|_, _| true, &mut |d| found.push(d.addr));
        assert_eq!(found.len(), 1, "{found:?}");
        for k in [0u64, 5] {
            assert!(
                matches!(l.get_with(&k.to_be_bytes(), false, owned), Err(e) if e.is_corruption()),
                "key {k} after the walk"
            );
        }
        // Blocks the walk found intact are marked verified; the damaged one is not.
        let blocks = l.fences()?.len() as u64;
        assert_eq!(l.verified.count(), blocks - 1);
        // Repaired bytes verify again on the next read.
        p.mem().write(addr, &[orig])?;
        assert_eq!(
            l.get_with(&5u64.to_be_bytes(), false, owned)?,
            Some(Value::Inline(b"value".to_vec()))
        );
        assert_eq!(l.verified.count(), blocks);
        Ok(())
    }

    /// A table loaded at open has no filter until a filtered lookup builds one from a
    /// verified read of its blocks; if a block is damaged it gets none, and lookups in
    /// its intact blocks still answer.
    #[test]
    fn loaded_tables_build_filters_lazily_and_damage_leaves_none() -> Result<()> {
        let p = pool();
        let placed = one_table(&p, 2)?;
        assert!(
            placed.filter.get().is_some_and(Option::is_none),
            "built without"
        );
        let meta = LstMeta {
            id: placed.id,
            base: placed.base,
            size: placed.size,
            index_off: placed.index_off,
            index_units: placed.index_units,
            entries: placed.entries,
            min_key: placed.min_key.clone(),
            max_key: placed.max_key.clone(),
            values: None,
        };
        let loaded = Lst::probe(&meta, placed.pool_chunk());
        assert!(loaded.filter.get().is_none());
        assert_eq!(
            loaded.get_with(&4u64.to_be_bytes(), true, owned)?,
            Some(Value::Inline(b"value".to_vec()))
        );
        assert!(
            loaded.filter.get().is_some_and(Option::is_some),
            "not built"
        );
        for i in 0..100u64 {
            assert!(loaded
                .get_with(&(i * 2).to_be_bytes(), true, owned)?
                .is_some());
        }
        // Damage the last data block, then load again: no filter, and a key in the
        // first block is still found; one in the damaged block is Corruption.
        let last_block = u64::from(loaded.index_off) - 100;
        let addr = placed.base + last_block;
        let orig = p.mem().read(addr, 1)?[0];
        p.mem().write(addr, &[orig ^ 0x01])?;
        let damaged = Lst::probe(&meta, placed.pool_chunk());
        assert_eq!(
            damaged.get_with(&0u64.to_be_bytes(), true, owned)?,
            Some(Value::Inline(b"value".to_vec()))
        );
        assert!(
            damaged.filter.get().is_some_and(Option::is_none),
            "filter from a damaged read"
        );
        assert!(
            matches!(damaged.get_with(&198u64.to_be_bytes(), true, owned), Err(e) if e.is_corruption())
        );
        p.mem().write(addr, &[orig])?;
        Ok(())
    }
}
