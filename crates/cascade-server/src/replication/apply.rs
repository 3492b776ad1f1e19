//! Applying the primary's stream on a replica: the records of a burst become one
//! engine batch that also rewrites [`REPL_KEY`] with the replication id and the offset
//! after its last record, so what the engine holds and the position it claims never
//! disagree, even after a crash. A FLUSHDB/FLUSHALL record first writes what is
//! pending, then empties the databases (not atomic with the batch, but replaying it
//! after a crash is harmless: the stored offset is still the one before it).
//!
//! Applied records are appended verbatim to this node's own backlog, so its offsets
//! stay the primary's: after a promotion the other replicas continue from it. Once a
//! batch is written, its WATCH, client-side-caching and keyspace notifications are
//! raised to this node's clients (`raise.rs`).
//!
//! A full sync is bracketed by the reserved entry [`SYNC_KEY`] (`docs/formats.md`
//! §14): it is written and made durable before the old data is wiped and the first
//! chunk is applied, and deleted in the same batch that writes [`REPL_KEY`] at the
//! end. A store that carries it holds a partial data set (`mod.rs` decides what a
//! restart does with it).
//!
//! Locks: a burst of records is applied under every stripe lock (no reader sees half
//! of a command's effect across keys) and the feed's shared gate.

use cascadekv::WriteBatch;

use super::raise::{self, Raised};
use super::record::Frame;
use super::{REPL_KEY, SYNC_KEY};
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
    let mut raised = Raised::default();
    let flush_pending =
        |batch: &mut WriteBatch, pending: &mut bool, raised: &mut Raised, offset: u64| {
            if !*pending {
                return Ok::<(), CmdError>(());
            }
            batch.put(REPL_KEY.to_vec(), encode_position(replid, offset));
            crate::durable::note_write();
            store.db().write(batch)?;
            *batch = WriteBatch::new();
            *pending = false;
            raised.raise(shared);
            Ok(())
        };
    for raw in frames {
        let before = offset;
        offset += raw.len() as u64;
        match super::record::decode(raw)? {
            Frame::Commit(c) => {
                if c.flush != 0 {
                    flush_pending(&mut batch, &mut pending, &mut raised, before)?;
                    let targets: Vec<u16> = match c.flush {
                        1 => vec![c.phys],
                        _ => store.dbs().physical_ids().collect(),
                    };
                    for p in targets {
                        let live = raise::live_before_flush(shared, p);
                        store.flush_db(p)?;
                        if p == 0 {
                            raised.forget_db0();
                        }
                        raise::flushed(shared, &live);
                    }
                }
                raised.count_slots(shared, &c.writes)?;
                raised.note(shared, c.writes.iter().map(|(k, _)| k), c.events);
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
                flush_pending(&mut batch, &mut pending, &mut raised, before)?;
                let (a, b) = (a as usize, b as usize);
                let n = store.dbs().count();
                if a >= n || b >= n {
                    return Err(CmdError::err("SWAPDB of a database this node lacks"));
                }
                store.dbs().swap(a, b);
                store.swap_registrations(a, b);
                batch.put(crate::databases::MAP_KEY.to_vec(), store.dbs().encode());
                pending = true;
            }
            Frame::Heartbeat | Frame::Chunk(_) | Frame::End => {
                return Err(CmdError::err("unexpected frame in the stream"));
            }
        }
    }
    flush_pending(&mut batch, &mut pending, &mut raised, offset)?;
    for raw in frames {
        feed.append(raw);
    }
    Ok(offset)
}

/// Starts loading a full sync: the mark [`SYNC_KEY`] goes first, in the batch that
/// deletes the stored position, and is made durable before anything is wiped (a
/// crash from here on leaves a store that says its data is partial); then every
/// other entry is deleted.
///
/// # Errors
/// Engine failures.
pub(crate) fn wipe(shared: &Shared) -> CmdResult<()> {
    let db = shared.store.db();
    let mut b = WriteBatch::new();
    b.delete(REPL_KEY.to_vec());
    b.put(SYNC_KEY.to_vec(), Vec::new());
    db.write(&b)?;
    db.sync()?;
    let wiped = delete_all_but_mark(shared);
    // No stripe lock is held (nothing is served while loading): on the floor.
    shared.store.seqs().wrote();
    wiped
}

/// Deletes every engine entry except [`SYNC_KEY`].
fn delete_all_but_mark(shared: &Shared) -> CmdResult<()> {
    let db = shared.store.db();
    let mut from: Option<Vec<u8>> = None;
    loop {
        let chunk = db.scan(from.as_deref(), None, 4096)?;
        let Some((last, _)) = chunk.last() else {
            return Ok(());
        };
        let mut next = last.clone();
        next.push(0);
        let mut b = WriteBatch::new();
        for (k, _) in chunk {
            if k != SYNC_KEY {
                b.delete(k);
            }
        }
        db.write(&b)?;
        from = Some(next);
    }
}

/// Writes one full-sync chunk, unless the link's `generation` is no longer current
/// (a `REPLICAOF NO ONE` that discarded the partial data must not see more of it).
///
/// # Errors
/// Engine failures; the link was replaced.
pub(crate) fn load_chunk(
    shared: &Shared,
    generation: u64,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
) -> CmdResult<()> {
    let mut b = WriteBatch::new();
    for (k, v) in pairs {
        if k != REPL_KEY && k != SYNC_KEY {
            b.put(k, v);
        }
    }
    let _all = shared.store.lock_all();
    if shared.repl.generation() != generation {
        return Err(CmdError::err("the replication link was replaced"));
    }
    shared.store.db().write(&b)?;
    Ok(())
}

/// Ends a full sync: records the position and deletes the mark in one batch (made
/// durable), re-reads the database map and counts, and restarts this node's backlog
/// at `offset`.
///
/// # Errors
/// Engine failures, or a database map this node cannot use; the link was replaced.
pub(crate) fn finish(shared: &Shared, generation: u64, replid: &str, offset: u64) -> CmdResult<()> {
    let store = &shared.store;
    let _all = store.lock_all();
    let _g = store.feed().exclusive();
    if shared.repl.generation() != generation {
        return Err(CmdError::err("the replication link was replaced"));
    }
    let mut b = WriteBatch::new();
    b.put(REPL_KEY.to_vec(), encode_position(replid, offset));
    b.delete(SYNC_KEY.to_vec());
    store.db().write(&b)?;
    store.db().sync()?;
    store.reload()?;
    store.feed().reset(offset);
    Ok(())
}

/// Discards the partial data of a full sync that did not complete (`REPLICAOF NO
/// ONE` on such a node, as Redis empties its data set after a failed load): every
/// entry goes, then the mark. The caller holds every stripe lock.
///
/// # Errors
/// Engine failures.
pub(crate) fn discard_partial(shared: &Shared) -> CmdResult<bool> {
    let db = shared.store.db();
    if db.get(SYNC_KEY)?.is_none() {
        return Ok(false);
    }
    delete_all_but_mark(shared)?;
    db.delete(SYNC_KEY)?;
    db.sync()?;
    shared.store.reload()?;
    Ok(true)
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
