//! Building Logical Sorted Tables from a sorted stream of entries.
//!
//! An LST is built in memory — data blocks, then its index block — and written
//! contiguously into a table chunk by [`super::TableWriter`]. Index entries hold block
//! offsets *relative to the LST start*, so the bytes do not depend on where they land;
//! block checksums are seeded with the LST's id, so blocks of another LST never
//! validate in its place.
//!
//! An LST ends when the next data block's index entry would not fit its index block
//! (FluidKV: one index block and the data blocks it indexes) or its bytes reach
//! `max_bytes`. The entry of the closing data block is added regardless, so the index
//! block may take two units and an LST may exceed `max_bytes` by about two blocks.
//!
//! Thread-safety: a builder is owned by one thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::block::{data_entry_len, index_entry_len, BlockBuilder, BlockKind};
use super::filter::{key_hash, Filter};
use crate::value::ValueRef;

/// Units an index block may fill (2 × 512 B: about 45 data blocks, ~1000 small
/// entries per LST). Larger LSTs mean fewer StableStore index entries — DRAM — at the
/// cost of a larger block to binary-search, which touches only a few of its lines.
pub const INDEX_UNITS: usize = 2;

/// A finished LST, not yet placed.
#[derive(Debug)]
pub struct BuiltLst {
    /// Unique id (seeds block checksums).
    pub id: u64,
    /// The bytes: data blocks, then the index block (released once written out).
    pub bytes: Vec<u8>,
    /// Bytes of the table.
    pub size: u32,
    /// Offset of the index block in `bytes`.
    pub index_off: u32,
    /// Units of the index block.
    pub index_units: u8,
    /// Smallest key.
    pub min_key: Box<[u8]>,
    /// Largest key.
    pub max_key: Box<[u8]>,
    /// Entries (tombstones included).
    pub entries: u32,
    /// First chunks of the value segments its entries point into, ascending.
    pub values: Vec<u64>,
    /// Bloom filter of its keys (DRAM only, `filter.rs`), if the builder made one.
    pub filter: Option<Filter>,
}

/// How tables are cut: block size, largest table, and the source of table ids.
#[derive(Debug, Clone)]
pub(crate) struct TableOptions {
    /// Block size in bytes.
    pub block_size: usize,
    /// Largest LST in bytes (approximately; see the module docs).
    pub max_bytes: usize,
    /// Hands out LST ids (unique for the life of the store).
    pub ids: Arc<AtomicU64>,
    /// Compaction output (StableStore) gets filters too (`Options::stable_filters`).
    pub stable_filters: bool,
}

impl BuiltLst {
    /// Bytes of the table (kept when `bytes` has been written out and released).
    pub fn size(&self) -> u32 {
        self.size
    }
}

impl TableOptions {
    /// A builder cutting tables this way; `filters`: give each table a Bloom filter.
    pub fn builder(&self, filters: bool) -> LstBuilder {
        let mut b = LstBuilder::new(self.block_size, self.max_bytes, self.ids.clone());
        b.filters = filters;
        b
    }
}

/// Builds LSTs.
#[derive(Debug)]
pub struct LstBuilder {
    block_size: usize,
    max_bytes: usize,
    data: BlockBuilder,
    index: BlockBuilder,
    bytes: Vec<u8>,
    scratch: Vec<u8>,
    block_first: Vec<u8>,
    min_key: Option<Box<[u8]>>,
    last_key: Vec<u8>,
    entries: u32,
    /// Value segments the LST in progress points into.
    values: std::collections::BTreeSet<u64>,
    /// Whether finished LSTs get a filter.
    filters: bool,
    /// `key_hash` of every key of the LST in progress, for its filter.
    hashes: Vec<u64>,
    id: u64,
    ids: Arc<AtomicU64>,
}

impl LstBuilder {
    /// A builder for blocks of `block_size` bytes and LSTs of at most about
    /// `max_bytes`; `ids` hands out LST ids.
    pub fn new(block_size: usize, max_bytes: usize, ids: Arc<AtomicU64>) -> Self {
        let id = ids.fetch_add(1, Ordering::AcqRel);
        LstBuilder {
            block_size,
            max_bytes,
            data: BlockBuilder::new(BlockKind::Data, block_size),
            index: BlockBuilder::with_units(BlockKind::Index, block_size, INDEX_UNITS),
            bytes: Vec::new(),
            scratch: Vec::new(),
            block_first: Vec::new(),
            min_key: None,
            last_key: Vec::new(),
            entries: 0,
            values: std::collections::BTreeSet::new(),
            filters: false,
            hashes: Vec::new(),
            id,
            ids,
        }
    }

    /// Records that the entry just added (its LST is the one in progress) points into
    /// the value segment starting at `chunk`.
    /// Builds a Bloom filter for each table (or not).
    pub fn set_filters(&mut self, on: bool) {
        self.filters = on;
    }

    pub fn note_value_segment(&mut self, chunk: u64) {
        self.values.insert(chunk);
    }

    /// Adds the next entry (keys strictly increasing). Returns a finished LST when
    /// this entry started a new one.
    pub fn add(&mut self, key: &[u8], v: &ValueRef<'_>) -> Option<BuiltLst> {
        let len = data_entry_len(key, v);
        let mut done = None;
        if !self.data.fits(len) {
            // The current data block is full: it goes out, and its index entry must fit.
            let index_full = !self.index.fits(index_entry_len(&self.block_first))
                || self.bytes.len() + self.block_size >= self.max_bytes;
            if index_full {
                done = self.finish();
            } else {
                self.close_data_block();
            }
        }
        if self.data.is_empty() {
            self.block_first.clear();
            self.block_first.extend_from_slice(key);
        }
        if self.min_key.is_none() {
            self.min_key = Some(key.into());
        }
        self.data.add_data(key, v);
        if self.filters {
            self.hashes.push(key_hash(key));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
        done
    }

    fn close_data_block(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let off = self.bytes.len() as u64;
        let units = self.data.finish(self.id, &mut self.scratch);
        self.bytes.extend_from_slice(&self.scratch);
        self.index.add_index(&self.block_first, off, units);
    }

    /// Finishes the LST in progress, if it has entries.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "an LST is at most table_max_bytes (<= 16 MiB, Options::validate) plus two blocks"
    )]
    pub fn finish(&mut self) -> Option<BuiltLst> {
        self.close_data_block();
        let min_key = self.min_key.take()?;
        let index_off = self.bytes.len() as u32;
        let index_units = self.index.finish(self.id, &mut self.scratch);
        self.bytes.extend_from_slice(&self.scratch);
        let built = BuiltLst {
            id: self.id,
            size: self.bytes.len() as u32,
            bytes: std::mem::take(&mut self.bytes),
            index_off,
            index_units,
            min_key,
            max_key: self.last_key.as_slice().into(),
            entries: self.entries,
            values: std::mem::take(&mut self.values).into_iter().collect(),
            filter: self.filters.then(|| Filter::build(&self.hashes)),
        };
        self.hashes.clear();
        self.entries = 0;
        self.id = self.ids.fetch_add(1, Ordering::AcqRel);
        Some(built)
    }
}
