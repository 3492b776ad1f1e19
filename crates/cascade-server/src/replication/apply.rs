//! Applying the primary's stream on a replica: the records of a burst become one
//! engine batch that also rewrites [`REPL_KEY`] with the replication id and the offset
//! after its last record, so what the engine holds and the position it claims never
//! disagree, even after a crash. A FLUSHDB/FLUSHALL record first writes what is
//! pending, then empties the databases (not atomic with the batch, but replaying it
//! after a crash is harmless: the stored offset is still the one before it).
//!
//! Applied records are appended verbatim to this node's own backlog, so its offsets
//! stay the primary's: after a promotion the other replicas continue from it.
//!
//! Locks: a burst of records is applied under every stripe lock (no reader sees half
//! of a command's effect across keys) and the feed's shared gate.

use cascadekv::WriteBatch;

use super::record::Frame;
use super::REPL_KEY;
use crate::error::{CmdError, CmdResult};
use crate::shared::Shared;

/// The [`REPL_KEY`] value: the id's bytes, then the offset (u64 LE).
pub(crate) fn encode_position(replid: &str, offset: u64) -> Vec<u8> {
    let mut v = replid.as_bytes().to_vec();
    v.extend_from_slice(&offset.to_le_bytes());
    v
}

/// Reads a [`REPL_KEY`] value.
pub(crate) fn decode_position(v: &[u8]) -> Option<(String, u64)> {
    let at = v.len().checked_sub(8)?;
    let (id, off) = v.split_at(at);
    let mut a = [0u8; 8];
    a.copy_from_slice(off);
    Some((String::from_utf8(id.to_vec()).ok()?, u64::from_le_bytes(a)))
}

/// Applies a burst of complete record frames (`frames`: each one's bytes) received
/// under `replid`, unless the link's `generation` is no longer current. Returns the
/// offset after them.
///
/// # Errors
/// A damaged record or an engine failure (the link is dropped and retried).
pub(crate) fn apply_records(
    shared: &Shared,
    replid: &str,
    generation: u64,
    frames: &[&[u8]],
) -> CmdResult<u64> {
    let store = &shared.store;
    let _all = store.lock_all();
    let feed = store.feed();
    let _g = feed.enter();
    if shared.repl.generation() != generation {
        return Err(CmdError::err("the replication link was replaced"));
    }
    let mut offset = feed.offset();
    // Consecutive commits go to the engine as one batch (atomic, with the position
    // written once at its end); a flush or a swap writes what is pending first.
    let mut batch = WriteBatch::new();
    let mut pending = false;
    let flush_pending = |batch: &mut WriteBatch, pending: &mut bool, offset: u64| {
        if !*pending {
            return Ok::<(), CmdError>(());
        }
        batch.put(REPL_KEY.to_vec(), encode_position(replid, offset));
        crate::durable::note_write();
        store.db().write(batch)?;
        *batch = WriteBatch::new();
        *pending = false;
        Ok(())
    };
    for raw in frames {
        let before = offset;
        offset += raw.len() as u64;
        match super::record::decode(raw)? {
            Frame::Commit(c) => {
                if c.flush != 0 {
                    flush_pending(&mut batch, &mut pending, before)?;
                    match c.flush {
                        1 => store.flush_db(c.phys)?,
                        _ => {
                            for p in store.dbs().physical_ids() {
                                store.flush_db(p)?;
                            }
                        }
                    }
                }
                for (k, v) in c.writes {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                pending = true;
                for (p, k, e) in c.counts {
                    store.dbs().add(p, k, e);
                }
            }
            Frame::Swap(a, b) => {
                flush_pending(&mut batch, &mut pending, before)?;
                let (a, b) = (a as usize, b as usize);
                let n = store.dbs().count();
                if a >= n || b >= n {
                    return Err(CmdError::err("SWAPDB of a database this node lacks"));
                }
                store.dbs().swap(a, b);
                batch.put(crate::databases::MAP_KEY.to_vec(), store.dbs().encode());
                pending = true;
            }
            Frame::Heartbeat | Frame::Chunk(_) | Frame::End => {
                return Err(CmdError::err("unexpected frame in the stream"));
            }
        }
    }
    flush_pending(&mut batch, &mut pending, offset)?;
    for raw in frames {
        feed.append(raw);
    }
    Ok(offset)
}

/// Starts loading a full sync: the stored position goes first (a crash from here on
/// means a full sync again), then every entry.
///
/// # Errors
/// Engine failures.
pub(crate) fn wipe(shared: &Shared) -> CmdResult<()> {
    let db = shared.store.db();
    db.delete(REPL_KEY)?;
    loop {
        let chunk = db.scan(None, None, 4096)?;
        if chunk.is_empty() {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        for (k, _) in chunk {
            b.delete(k);
        }
        db.write(&b)?;
    }
}

/// Writes one full-sync chunk.
///
/// # Errors
/// Engine failures.
pub(crate) fn load_chunk(shared: &Shared, pairs: Vec<(Vec<u8>, Vec<u8>)>) -> CmdResult<()> {
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        if k != REPL_KEY {
            b.put(k, v);
        }
    }
    shared.store.db().write(&b)?;
    Ok(())
}

/// Ends a full sync: records the position, re-reads the database map and counts, and
/// restarts this node's backlog at `offset`.
///
/// # Errors
/// Engine failures, or a database map this node cannot use.
pub(crate) fn finish(shared: &Shared, replid: &str, offset: u64) -> CmdResult<()> {
    let store = &shared.store;
    let _all = store.lock_all();
    let _g = store.feed().exclusive();
    store.db().put(REPL_KEY, &encode_position(replid, offset))?;
    store.reload()?;
    store.feed().reset(offset);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_round_trip() {
        let v = encode_position("abc", 42);
        assert_eq!(decode_position(&v), Some(("abc".into(), 42)));
        assert_eq!(decode_position(b"short"), None);
    }
}
