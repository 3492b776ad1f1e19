//! FastStore checkpoint: fast restart after a clean shutdown (FlatStore §3.5).
//!
//! Replaying the logs at open reads every record, checks its checksum, sorts what it
//! read by key and merges the newest version per key — 0.8–0.9 s for 4M small keys, of
//! which the sort alone is a third (`perf`, docs/benchmarks.md). A clean close already
//! holds the result of that work: the FastStore index, newest version per key, in key
//! order. [`write`] stores it in the pool after the logs are sealed and before the
//! clean flag is set; [`take`] loads it at open instead of replaying, when — and only
//! when — it provably stands for the logs on media:
//!
//! * the bitmap says the store was closed cleanly (set only after the checkpoint is
//!   durable, cleared by open before anything else is written);
//! * it is the only checkpoint, its head and body checksums hold, and its epoch is its
//!   chunk's;
//! * the log segments it lists are exactly the live log segments discovery found
//!   (sealed logs cannot change after it was written).
//!
//! Otherwise the logs are replayed as after a crash: a checkpoint is redundant, so a
//! damaged or stale one costs time, never data. Every checkpoint chunk is freed by
//! `take` before the store accepts a write, so no later crash can meet one that is out
//! of date. Layout: docs/formats.md §11.
//!
//! Thread-safety: `write` runs in `Db::close` after every writer and background thread
//! has stopped; `take` runs in `Db::open` before the store is shared.

use std::sync::Arc;

use super::ikey::IKey;
use super::{FastStore, Val, Version};
use crate::coding::{crc32c, crc32c_extend, get_u32, get_u64, put_u32, put_u64, usize_from};
use crate::error::{Error, Result};
use crate::pmem::{AllocClass, ChunkHeader, ChunkKind, Pool, WritebackSet, CHUNK_HEADER_LEN};
use crate::value::ValuePtr;

/// "CKPT", little-endian.
const MAGIC: u32 = 0x5450_4b43;
const VERSION: u32 = 1;
/// Bytes of the head that follows the chunk header.
const HEAD_BYTES: usize = 64;
const HEAD_LEN: u64 = HEAD_BYTES as u64;
/// The body is written through a buffer of this size.
const PIECE: usize = 1 << 16;

const TAG_TOMB: u8 = 0;
const TAG_INLINE: u8 = 1;
const TAG_ADDR: u8 = 2;

/// What a checkpoint loaded at open.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Entries now in the index.
    pub entries: u64,
    /// DRAM the index spends on them (as replay would count it).
    pub dram: u64,
    /// Largest LSN handed out before the close.
    pub max_lsn: u64,
}

fn entry_len(key: &[u8], v: &Version) -> u64 {
    let val = match &v.val {
        Val::Tomb => 0,
        Val::Addr(_) => 12,
        other => 4 + other.inline_bytes().map_or(0, <[u8]>::len),
    };
    (2 + key.len() + 8 + 1 + val) as u64
}

/// Appends the encoding of one entry to `out`.
fn encode_entry(key: &[u8], v: &Version, out: &mut Vec<u8>) -> Result<()> {
    let klen = u16::try_from(key.len()).map_err(|_| Error::invalid("key longer than 64 KiB"))?;
    out.extend_from_slice(&klen.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&v.lsn.to_le_bytes());
    match &v.val {
        Val::Tomb => out.push(TAG_TOMB),
        Val::Addr(p) => {
            out.push(TAG_ADDR);
            out.extend_from_slice(&p.addr.to_le_bytes());
            out.extend_from_slice(&p.len.to_le_bytes());
        }
        other => {
            let b = other.inline_bytes().unwrap_or_default();
            let n = u32::try_from(b.len()).map_err(|_| Error::invalid("value beyond 4 GiB"))?;
            out.push(TAG_INLINE);
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(b);
        }
    }
    Ok(())
}

/// Writes a checkpoint of `fs` (the only FastStore at a clean close) into the pool and
/// makes it durable. `max_lsn` is the largest LSN handed out. Returns `false` (and
/// writes nothing) when there is no log to stand for or the pool has no room for it:
/// the next open then replays.
pub(crate) fn write(pool: &Arc<Pool>, fs: &FastStore, max_lsn: u64) -> Result<bool> {
    let mut segs: Vec<(u64, u64)> = fs
        .segments()
        .iter()
        .map(|s| (s.chunk(), s.span()))
        .collect();
    if segs.is_empty() {
        // No log to replay: nothing to save.
        return Ok(false);
    }
    segs.sort_unstable();
    let mut body_len = 8 + 16 * segs.len() as u64;
    let mut entries = 0u64;
    fs.index().for_each(|k, v| {
        body_len += entry_len(k, v);
        entries += 1;
    });
    let cs = pool.chunk_size();
    let span = (CHUNK_HEADER_LEN + HEAD_LEN + body_len).div_ceil(cs).max(1);
    if u16::try_from(span).is_err() {
        return Ok(false);
    }
    let (a, _) = match pool.alloc_chunk(
        ChunkKind::Checkpoint,
        span,
        None,
        0,
        fs.generation(),
        AllocClass::Writes,
    ) {
        Ok(x) => x,
        Err(Error::PoolFull { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let base = pool.chunk_offset(a.chunk) + CHUNK_HEADER_LEN;
    let mem = pool.mem();
    let mut at = base + HEAD_LEN;
    let mut crc = 0u32;
    let mut buf: Vec<u8> = Vec::with_capacity(PIECE + 1024);
    let flush = |buf: &mut Vec<u8>, crc: &mut u32, at: &mut u64| -> Result<()> {
        mem.write(*at, buf)?;
        *crc = crc32c_extend(*crc, buf);
        *at += buf.len() as u64;
        buf.clear();
        Ok(())
    };
    buf.extend_from_slice(&(segs.len() as u64).to_le_bytes());
    for (c, s) in &segs {
        buf.extend_from_slice(&c.to_le_bytes());
        buf.extend_from_slice(&s.to_le_bytes());
    }
    let mut failed = None;
    fs.index().for_each(|k, v| {
        if failed.is_some() {
            return;
        }
        let r = encode_entry(k, v, &mut buf).and_then(|()| {
            if buf.len() >= PIECE {
                flush(&mut buf, &mut crc, &mut at)
            } else {
                Ok(())
            }
        });
        if let Err(e) = r {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    flush(&mut buf, &mut crc, &mut at)?;
    if at - base - HEAD_LEN != body_len {
        return Err(Error::Internal(
            "checkpoint body length changed while it was written".into(),
        ));
    }
    let mut set = WritebackSet::new();
    mem.write_back(&mut set, base + HEAD_LEN, body_len);
    mem.fence(&mut set)?;
    let mut head = [0u8; HEAD_BYTES];
    put_u32(&mut head, 0, MAGIC);
    put_u32(&mut head, 4, VERSION);
    put_u64(&mut head, 8, a.epoch);
    put_u64(&mut head, 16, body_len);
    put_u64(&mut head, 24, entries);
    put_u64(&mut head, 32, max_lsn);
    put_u32(&mut head, 40, crc);
    let hc = crc32c(&head[..60]);
    put_u32(&mut head, 60, hc);
    mem.persist(base, &head)?;
    Ok(true)
}

/// At open: loads the checkpoint into `fs` if it stands for the `live` log segments
/// (see the module doc), then frees every checkpoint chunk either way. `found` are the
/// checkpoint chunks discovery met, `damaged` those whose header it had to correct
/// (never used); `clean` whether the previous session closed cleanly. On
/// `Ok(Some(_))` the index holds the checkpoint's entries; otherwise it is empty and
/// the caller replays.
pub(crate) fn take(
    pool: &Pool,
    fs: &FastStore,
    found: &[(ChunkHeader, u64)],
    damaged: &[(ChunkHeader, u64)],
    clean: bool,
    live: &[(u64, u64)],
) -> Result<Option<Loaded>> {
    // Used only after a clean close, when it is the only one and none was damaged.
    let outcome = match (found, clean) {
        ([(h, c)], true) if damaged.is_empty() => {
            check(pool, h, *c, live).and_then(|b| load(fs, b))
        }
        _ => None,
    };
    let runs: Vec<(u64, u64)> = found
        .iter()
        .chain(damaged)
        .map(|(h, c)| (*c, u64::from(h.span).max(1)))
        .collect();
    pool.free_chunks(&runs)?;
    Ok(outcome)
}

/// A checkpoint whose checksums and log list held.
#[derive(Clone, Copy)]
struct Body<'p> {
    /// The entries, encoded.
    entries: &'p [u8],
    count: u64,
    max_lsn: u64,
}

/// Checks one checkpoint: head, body checksum, and that it lists exactly the `live`
/// log segments. `None` if anything does not hold.
fn check<'p>(pool: &'p Pool, h: &ChunkHeader, chunk: u64, live: &[(u64, u64)]) -> Option<Body<'p>> {
    let cap = u64::from(h.span).max(1) * pool.chunk_size() - CHUNK_HEADER_LEN;
    let base = pool.chunk_offset(chunk) + CHUNK_HEADER_LEN;
    let head = pool.mem().read(base, HEAD_LEN).ok()?;
    let ok = get_u32(head, 0)? == MAGIC
        && get_u32(head, 4)? == VERSION
        && get_u64(head, 8)? == h.epoch
        && get_u32(head, 60)? == crc32c(&head[..60]);
    if !ok {
        return None;
    }
    let body_len = get_u64(head, 16)?;
    if body_len > cap - HEAD_LEN {
        return None;
    }
    let body = pool.mem().read(base + HEAD_LEN, body_len).ok()?;
    if crc32c(body) != get_u32(head, 40)? {
        return None;
    }
    let nsegs = usize_from(get_u64(body, 0)?);
    let end = nsegs.checked_mul(16)?.checked_add(8)?;
    let segs: Vec<(u64, u64)> = body
        .get(8..end)?
        .chunks_exact(16)
        .map(|e| Some((get_u64(e, 0)?, get_u64(e, 8)?)))
        .collect::<Option<_>>()?;
    let mut want = live.to_vec();
    want.sort_unstable();
    (segs == want).then_some(Body {
        entries: body.get(end..)?,
        count: get_u64(head, 24)?,
        max_lsn: get_u64(head, 32)?,
    })
}

/// Entries decoded per batch handed from the decoding thread to the index builder.
const BATCH: usize = 16 * 1024;

/// Decodes the entries on one thread while the index is built from them on this one
/// (the two halves of the work take about the same time). `None` — with the index
/// left empty — if an entry does not decode or the count is off.
fn load(fs: &FastStore, body: Body<'_>) -> Option<Loaded> {
    let bad = std::sync::atomic::AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(IKey, Version)>>(4);
    let mut n = 0u64;
    let mut dram = 0u64;
    std::thread::scope(|s| {
        s.spawn(|| {
            if decode(body.entries, |batch| tx.send(batch).is_ok()).is_none() {
                bad.store(true, std::sync::atomic::Ordering::Release);
            }
            drop(tx);
        });
        fs.index().bulk_load(rx.iter().flatten().inspect(|(k, v)| {
            n += 1;
            dram += fs.entry_dram(k.len(), &v.val);
        }));
    });
    if bad.load(std::sync::atomic::Ordering::Acquire) || n != body.count {
        fs.index().bulk_load(std::iter::empty());
        return None;
    }
    Some(Loaded {
        entries: n,
        dram,
        max_lsn: body.max_lsn,
    })
}

/// Decodes `entries` into batches passed to `emit` (which returns false to stop).
fn decode(entries: &[u8], mut emit: impl FnMut(Vec<(IKey, Version)>) -> bool) -> Option<()> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut at = 0usize;
    while at < entries.len() {
        let klen = usize::from(crate::coding::get_u16(entries, at)?);
        let key = entries.get(at + 2..at + 2 + klen)?;
        at += 2 + klen;
        let lsn = get_u64(entries, at)?;
        let tag = *entries.get(at + 8)?;
        at += 9;
        let val = match tag {
            TAG_TOMB => Val::Tomb,
            TAG_ADDR => {
                let p = ValuePtr {
                    addr: get_u64(entries, at)?,
                    len: get_u32(entries, at + 8)?,
                };
                at += 12;
                Val::Addr(p)
            }
            TAG_INLINE => {
                let n = usize_from(u64::from(get_u32(entries, at)?));
                let v = entries.get(at + 4..at + 4 + n)?;
                at += 4 + n;
                Val::inline(v)
            }
            _ => return None,
        };
        batch.push((IKey::new(key), Version { lsn, epoch: 0, val }));
        if batch.len() == BATCH && !emit(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))) {
            return Some(());
        }
    }
    if !batch.is_empty() {
        emit(batch);
    }
    Some(())
}
