//! Reclaiming sparse table chunks: which LSTs a cleaning compaction rewrites so that
//! table chunks left mostly empty are freed.
//!
//! LSTs are written back to back into table chunks, and a chunk is freed only when
//! every LST in it is obsolete (`TableChunk`, formats.md §6.6). A table that a
//! compaction *moves* instead of rewriting, or that no later compaction overlaps,
//! keeps its whole chunk alive; after many compactions the StableStore can pin many
//! chunks that each hold a few KiB of live tables. Under a small live set (a hot key
//! set overwritten for ever) those chunks, not the values, dominate the pool.
//!
//! Policy: a chunk is *sparse* when its live LST bytes are under half its size. The
//! LSTs of sparse chunks are rewritten (packed into fresh chunks by the compaction's
//! table writer) only if that frees at least one chunk net — the same rule as value
//! cleaning (`vlog/cleaner.rs`), so the chunk a compaction leaves half filled is not
//! rewritten again and again.
//!
//! Called by the compaction thread (and `Db::compact`) under `compact_lock`, on the
//! tables of one stage set; pure computation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::Lst;

/// Ids of the LSTs to rewrite among `tables` so that their sparse chunks are freed;
/// empty if packing them with `writers` merge threads would not free a chunk.
pub(crate) fn sparse_tables<'a>(
    tables: impl Iterator<Item = &'a Arc<Lst>>,
    chunk_size: u64,
    writers: u64,
) -> BTreeSet<u64> {
    // Per table chunk: its span, live bytes and tables.
    let mut chunks: BTreeMap<u64, (u64, u64, Vec<u64>)> = BTreeMap::new();
    for l in tables {
        let Some((chunk, span)) = l.table_chunk() else {
            continue;
        };
        let e = chunks.entry(chunk).or_insert((span, 0, Vec::new()));
        e.1 += u64::from(l.size);
        e.2.push(l.id);
    }
    let mut sparse_chunks = 0u64;
    let mut live = 0u64;
    let mut out = BTreeSet::new();
    for (span, bytes, ids) in chunks.values() {
        if bytes * 2 < span * chunk_size {
            sparse_chunks += span;
            live += bytes;
            out.extend(ids.iter().copied());
        }
    }
    // A sixteenth of each chunk is left for its header and the tail a table does
    // not fit into.
    let usable = (chunk_size - chunk_size / 16).max(1);
    // Each of the `writers` merge threads may leave one chunk partly filled.
    if sparse_chunks < live.div_ceil(usable) + writers.max(1) {
        out.clear();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::{LstMeta, TableChunk};

    use crate::pmem::test_pool as pool;

    fn lst(id: u64, chunk: &Arc<TableChunk>, size: u32) -> Arc<Lst> {
        let m = LstMeta {
            id,
            base: 0,
            size,
            index_off: 0,
            index_units: 1,
            min_key: Box::new([]),
            max_key: Box::new([]),
            entries: 1,
            values: Some(Vec::new()),
        };
        Lst::from_meta(&m, chunk.clone(), Vec::new())
    }

    #[test]
    fn rewrites_only_when_a_chunk_is_freed() {
        let pool = pool();
        let cs = 64 << 10;
        let (a, b, c) = (
            TableChunk::recovered(pool.clone(), 10, 1),
            TableChunk::recovered(pool.clone(), 11, 1),
            TableChunk::recovered(pool.clone(), 12, 1),
        );
        // Chunk 10 is full, 11 is a third full: one sparse chunk frees nothing.
        let full = lst(1, &a, 60 << 10);
        let third = lst(2, &b, 20 << 10);
        let t = [full.clone(), third.clone()];
        assert!(sparse_tables(t.iter(), cs, 1).is_empty());
        // Chunk 12 a quarter full too: both fit in one chunk, one is freed.
        let quarter = lst(3, &c, 16 << 10);
        let t = [full, third, quarter];
        let ids: Vec<u64> = sparse_tables(t.iter(), cs, 1).into_iter().collect();
        assert_eq!(ids, vec![2, 3]);
        for l in &t {
            l.mark_obsolete();
        }
    }
}
