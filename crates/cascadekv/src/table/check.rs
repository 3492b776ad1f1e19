//! Reading a whole table for `cascade verify`, `cascade repair` and the scrubber: every
//! block is read and checked, and a damaged block is reported with the key range it
//! covered instead of ending the walk (the other blocks are still read).
//!
//! Read-only; any thread may call it on a table it holds (`Arc<Lst>`), like a scan.

use super::block::{BlockError, BlockKind};
use super::place::{Access, Place, BLOB_HEADER};
use super::Lst;
use crate::error::Error;
use crate::value::ValueRef;

/// A damaged part of a table.
#[derive(Debug)]
pub struct TableDamage {
    /// Pool address of the damaged block (or of the table, for its index).
    pub addr: u64,
    /// What was wrong.
    pub error: Error,
    /// First key the damaged part covered, when the index names it.
    pub from: Option<Vec<u8>>,
    /// First key after the damaged part, when known (`None`: through the table's end).
    pub until: Option<Vec<u8>>,
}

/// What a walk read.
#[derive(Debug, Default, Clone, Copy)]
pub struct Walked {
    /// Blocks read (index included).
    pub blocks: u64,
    /// Bytes of those blocks.
    pub bytes: u64,
    /// Entries handed to the callback.
    pub entries: u64,
    /// Slow-tier blobs read and verified (values too large for a block).
    pub blobs: u64,
    /// Bytes of those blobs, headers included.
    pub blob_bytes: u64,
}

impl Lst {
    /// Reads every block of the table in key order, calling `f(key, value)` for each
    /// entry of each intact data block and `damage` for each block that is not intact.
    /// A damaged index block makes the whole table one damaged part (`min_key` to
    /// `max_key`). `f` returning false stops the walk.
    pub fn walk(
        &self,
        mut f: impl FnMut(&[u8], ValueRef<'_>) -> bool,
        damage: &mut dyn FnMut(TableDamage),
    ) -> Walked {
        let mut w = Walked::default();
        let whole = |error| TableDamage {
            addr: self.base,
            error,
            from: Some(self.min_key.to_vec()),
            until: None,
        };
        let (mut ibuf, mut buf, mut vbuf) = (Vec::new(), Vec::new(), Vec::new());
        let idx = match self.index(&mut ibuf) {
            Ok(b) => b,
            Err(e) => {
                damage(whole(e));
                return w;
            }
        };
        w.blocks += 1;
        w.bytes += u64::from(self.size) - u64::from(self.index_off);
        let ioff = u64::from(self.index_off);
        for i in 0..idx.count() {
            let Some(e) = idx.index_at(i) else {
                damage(whole(self.undecodable(ioff)));
                return w;
            };
            let until = || idx.index_at(i + 1).map(|n| n.first_key.to_vec());
            // Always a full check, whatever `verified.rs` says; its finding is recorded
            // there, so a damaged block makes every later get of it an error.
            let data = match self.block(e.addr, e.units, BlockKind::Data, &mut buf, Access::Bulk) {
                Ok(d) => d,
                Err(err) => {
                    self.note_checked(e.addr, false);
                    damage(TableDamage {
                        addr: self.base + e.addr,
                        error: err,
                        from: Some(e.first_key.to_vec()),
                        until: until(),
                    });
                    continue;
                }
            };
            w.blocks += 1;
            w.bytes += data_len(&data);
            if data.key_at(0) != Some(e.first_key) {
                self.note_checked(e.addr, false);
                damage(TableDamage {
                    addr: self.base + e.addr,
                    error: self.block_error(
                        e.addr,
                        BlockError::Malformed("first key differs from its index entry"),
                    ),
                    from: Some(e.first_key.to_vec()),
                    until: until(),
                });
                continue;
            }
            self.note_checked(e.addr, true);
            for j in 0..data.count() {
                let Some((k, v)) = data.data_at(j) else {
                    damage(TableDamage {
                        addr: self.base + e.addr,
                        error: self.undecodable(e.addr),
                        from: data.key_at(j).map(<[u8]>::to_vec),
                        until: until(),
                    });
                    break;
                };
                // A slow-tier blob is read and verified like a block.
                let blob = match v {
                    ValueRef::Separated(p) if matches!(self.place, Place::File(_)) => {
                        Some(u64::from(p.len))
                    }
                    _ => None,
                };
                let v = match self.resolve(v, &mut vbuf, Access::Bulk) {
                    Ok(v) => v,
                    Err(err) => {
                        damage(TableDamage {
                            addr: self.base + e.addr,
                            error: err,
                            from: Some(k.to_vec()),
                            until: data.key_at(j + 1).map(<[u8]>::to_vec).or_else(until),
                        });
                        continue;
                    }
                };
                if let Some(len) = blob {
                    w.blobs += 1;
                    w.blob_bytes += BLOB_HEADER as u64 + len;
                }
                w.entries += 1;
                if !f(k, v) {
                    return w;
                }
            }
        }
        w
    }
}

fn data_len(b: &super::block::Block<'_>) -> u64 {
    b.byte_len() as u64
}
