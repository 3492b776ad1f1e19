//! Finding logs in the pool and reading them back (FluidKV §5.5).
//!
//! [`discover`] walks the allocated chunks once and groups log segments by owner.
//! [`replay`] reads one log in order and hands every complete record to a callback;
//! records of an atomic batch are only handed over once the whole batch was read.
//!
//! End-of-log rule: the first position that does not hold a valid record ends the log —
//! unless there is evidence that the position was once durable: a later valid record in
//! the same segment whose MARK covers it, or a valid record in any later segment (the
//! writer fences a segment's tail before it writes into the next one). Then the log is
//! corrupt and replay fails with `Error::Corruption` naming the offset.
//!
//! Runs during open, before the store is shared: several logs may be replayed in
//! parallel, each by one thread; nothing writes to the pool meanwhile.

use crate::coding::usize_from;
use std::collections::BTreeMap;

use super::packed;
use super::record::{self, batch_count, decode, Invalid, Kind, RecordOut};
use crate::error::{Error, Result};
use crate::pmem::{ChunkHeader, ChunkKind, Pool, WritebackSet, CHUNK_HEADER_LEN};

/// One segment of a log.
#[derive(Debug, Clone, Copy)]
pub struct SegmentInfo {
    /// First chunk.
    pub chunk: u64,
    /// Chunks spanned.
    pub span: u64,
    /// Allocation epoch.
    pub epoch: u64,
    /// Position within the log.
    pub seq: u64,
}

/// A log found in the pool.
#[derive(Debug, Clone)]
pub struct LogInfo {
    /// Log id.
    pub log_id: u64,
    /// FastStore generation that wrote it.
    pub generation: u64,
    /// Segments in `seq` order.
    pub segments: Vec<SegmentInfo>,
}

/// What a walk of the pool found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Logs by id.
    pub logs: Vec<LogInfo>,
    /// Manifest logs by id.
    pub manifests: Vec<LogInfo>,
    /// Allocated chunks of other kinds: (header, first chunk).
    pub others: Vec<(ChunkHeader, u64)>,
    /// FastStore checkpoints: (header, first chunk).
    pub checkpoints: Vec<(ChunkHeader, u64)>,
    /// Checkpoints whose chunk header had one flipped bit (corrected): never used,
    /// only freed — a checkpoint is redundant, so its damage must not refuse the open.
    pub damaged_checkpoints: Vec<(ChunkHeader, u64)>,
}

/// Walks every allocated chunk, recording epochs in the pool as it goes. An allocated
/// chunk with a damaged header is `Corruption`.
pub fn discover(pool: &Pool) -> Result<Discovery> {
    discover_with(pool, None)
}

/// [`discover`], reporting each allocated chunk with a damaged header to `sink` (and
/// stepping over it one chunk at a time) instead of failing.
pub fn discover_with(pool: &Pool, mut sink: Option<&mut dyn FnMut(Damage)>) -> Result<Discovery> {
    let mut d = Discovery::default();
    let mut logs: BTreeMap<u64, LogInfo> = BTreeMap::new();
    let mut manifests: BTreeMap<u64, LogInfo> = BTreeMap::new();
    let mut c = pool.reserved_chunks();
    while c < pool.chunk_count() {
        if !pool.allocator().is_allocated(c) {
            c += 1;
            continue;
        }
        let h = if let Some(h) = pool.chunk_header(c)? {
            h
        } else {
            {
                // Headers are durable before the bitmap marks a chunk allocated, so an
                // allocated chunk without a valid header has been damaged.
                let at = pool.chunk_offset(c);
                let error =
                    Error::corruption(pool.path(), at, "allocated chunk has a damaged header");
                let Some(s) = sink.as_mut() else {
                    let fixed =
                        ChunkHeader::decode_corrected(pool.mem().read(at, CHUNK_HEADER_LEN)?);
                    if let Some(h) = fixed.filter(|h| h.kind == ChunkKind::Checkpoint) {
                        d.damaged_checkpoints.push((h, c));
                        c += u64::from(h.span).max(1);
                        continue;
                    }
                    return Err(error);
                };
                // A single flipped bit is corrected, so the chunk's own checksummed
                // contents can still be read (and salvaged) by verify and repair.
                let fixed = ChunkHeader::decode_corrected(pool.mem().read(at, CHUNK_HEADER_LEN)?);
                s(Damage {
                    addr: at,
                    error,
                    key: None,
                    key_certain: fixed.is_some(),
                    dropped_batch_records: 0,
                });
                let Some(h) = fixed else {
                    c += 1;
                    continue;
                };
                h
            }
        };
        let span = u64::from(h.span).max(1);
        pool.note_epoch(c, span, h.epoch);
        match h.kind {
            ChunkKind::Log | ChunkKind::Manifest => {
                let map = if h.kind == ChunkKind::Log {
                    &mut logs
                } else {
                    &mut manifests
                };
                let e = map.entry(h.owner).or_insert_with(|| LogInfo {
                    log_id: h.owner,
                    generation: h.aux,
                    segments: Vec::new(),
                });
                e.segments.push(SegmentInfo {
                    chunk: c,
                    span,
                    epoch: h.epoch,
                    seq: h.seq,
                });
            }
            ChunkKind::Table | ChunkKind::Value => d.others.push((h, c)),
            ChunkKind::Checkpoint => d.checkpoints.push((h, c)),
        }
        c += span;
    }
    d.logs = sorted(logs);
    d.manifests = sorted(manifests);
    Ok(d)
}

fn sorted(logs: BTreeMap<u64, LogInfo>) -> Vec<LogInfo> {
    logs.into_values()
        .map(|mut l| {
            l.segments.sort_by_key(|s| s.seq);
            l
        })
        .collect()
}

/// Checks that a log's segments are numbered 0, 1, 2, … without gaps. Logs whose
/// generation was flushed may have lost segments on purpose (only those holding
/// separated values are kept), so only logs that are replayed are checked.
pub fn check_chain(pool: &Pool, log: &LogInfo) -> Result<()> {
    {
        if let Some(first) = log.segments.first() {
            if first.seq != 0 {
                return Err(Error::corruption(
                    pool.path(),
                    pool.chunk_offset(first.chunk),
                    format!(
                        "log {} starts at segment {}: its first segment is missing",
                        log.log_id, first.seq
                    ),
                ));
            }
        }
        for w in log.segments.windows(2) {
            if w[1].seq != w[0].seq + 1 {
                return Err(Error::corruption(
                    pool.path(),
                    pool.chunk_offset(w[1].chunk),
                    format!(
                        "log {} jumps from segment {} to {}: a segment is missing",
                        log.log_id, w[0].seq, w[1].seq
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Where a replayed log ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplayEnd {
    /// Complete records handed to the callback.
    pub records: u64,
    /// Records dropped because their batch was cut off by the log's end.
    pub torn_batch_records: u64,
    /// Largest LSN seen.
    pub max_lsn: u64,
    /// Where a torn tail ended the log (None if it ended at an `End` or its capacity).
    pub torn_at: Option<TornTail>,
}

/// The position at which replay found no valid record and no evidence that one had
/// been durable: the log's end. Recovery seals the log there ([`seal_torn_tail`]).
#[derive(Debug, Clone, Copy)]
pub struct TornTail {
    /// Pool address of the position.
    pub addr: u64,
    /// Its offset inside the segment.
    pub offset: u64,
    /// Bytes left in the segment from there.
    pub room: u64,
    /// The segment's epoch (seeds the seal's checksum).
    pub epoch: u64,
}

/// A damaged log record met by [`salvage`]: where, why, and whose key it probably held.
#[derive(Debug)]
pub struct Damage {
    /// Pool address of the bad position.
    pub addr: u64,
    /// What replay would have failed with.
    pub error: Error,
    /// The key the damaged record held: certain when `key_certain` (a single-bit
    /// correction validated the record), else what the damaged header points at.
    pub key: Option<Vec<u8>>,
    /// Whether `key` is certain.
    pub key_certain: bool,
    /// Records of an atomic batch dropped because the damage cut the batch.
    pub dropped_batch_records: u64,
}

/// Replays one log. `f(record, address)` is called for each put/delete, batches whole.
/// The first damaged record that was once durable fails the replay with `Corruption`.
pub fn replay<'p>(
    pool: &'p Pool,
    log: &LogInfo,
    f: impl FnMut(&RecordOut<'p>, u64) -> Result<()>,
) -> Result<ReplayEnd> {
    replay_with(pool, log, f, None)
}

/// Like [`replay`], but reports each damaged record to `sink` and goes on with the next
/// valid record after it (found by scanning at record alignment) instead of failing:
/// what `cascade verify` lists and what `cascade repair` salvages. Never writes.
pub fn salvage<'p>(
    pool: &'p Pool,
    log: &LogInfo,
    f: impl FnMut(&RecordOut<'p>, u64) -> Result<()>,
    sink: &mut dyn FnMut(Damage),
) -> Result<ReplayEnd> {
    replay_with(pool, log, f, Some(sink))
}

#[expect(
    clippy::too_many_lines,
    reason = "one pass over the segments; the batch state and the damage handling share it"
)]
fn replay_with<'p>(
    pool: &'p Pool,
    log: &LogInfo,
    mut f: impl FnMut(&RecordOut<'p>, u64) -> Result<()>,
    mut sink: Option<&mut dyn FnMut(Damage)>,
) -> Result<ReplayEnd> {
    if let Err(e) = check_chain(pool, log) {
        match sink.as_mut() {
            Some(s) => s(Damage {
                addr: e.offset(),
                error: e,
                key: None,
                key_certain: false,
                dropped_batch_records: 0,
            }),
            None => return Err(e),
        }
    }
    let mut end = ReplayEnd::default();
    let mut pending: Option<(u32, Vec<(RecordOut<'p>, u64)>)> = None;
    let mut ended = false;
    // Reports damage at `addr` (or fails without a sink); drops a cut batch.
    let damaged = |sink: &mut Option<&mut dyn FnMut(Damage)>,
                   pending: &mut Option<(u32, Vec<(RecordOut<'p>, u64)>)>,
                   addr: u64,
                   error: Error,
                   rest: &[u8]|
     -> Result<()> {
        let Some(s) = sink.as_mut() else {
            return Err(error);
        };
        let dropped = pending.take().map_or(0, |(_, r)| r.len() as u64);
        let corrected = record::correct_one_bit(rest, pool.epoch_at(addr));
        let key_certain = corrected.is_some();
        let key = match corrected {
            Some(k) => (!k.is_empty()).then_some(k),
            None => record::probable_key(rest).map(<[u8]>::to_vec),
        };
        s(Damage {
            addr,
            error,
            key,
            key_certain,
            dropped_batch_records: dropped,
        });
        Ok(())
    };
    for (i, seg) in log.segments.iter().enumerate() {
        if ended {
            break;
        }
        let base = pool.chunk_offset(seg.chunk);
        let cap = seg.span * pool.chunk_size();
        let bytes = pool.mem().read(base, cap)?;
        let mut pos = CHUNK_HEADER_LEN;
        while pos < cap {
            let rest = bytes.get(usize_from(pos)..).unwrap_or(&[]);
            let rec = match decode(rest, seg.epoch) {
                Ok(r) => r,
                Err(why) => {
                    let evidence = if later_segment_has_records(pool, &log.segments[i + 1..])? {
                        Some("before a later segment's records".to_string())
                    } else {
                        later_mark_covering(bytes, pos, seg.epoch)
                            .map(|m| format!("followed by a record marking offset {m} durable"))
                    };
                    if let Some(ctx) = evidence {
                        let e = bad_record(pool, base + pos, why, &ctx);
                        damaged(&mut sink, &mut pending, base + pos, e, rest)?;
                        // Go on with the next valid record of this segment, if any.
                        match next_valid(bytes, pos, seg.epoch) {
                            Some(p) => {
                                pos = p;
                                continue;
                            }
                            None => break,
                        }
                    }
                    // Torn tail: the log ends here (later segments hold no record).
                    end.torn_at = Some(TornTail {
                        addr: base + pos,
                        offset: pos,
                        room: cap - pos,
                        epoch: seg.epoch,
                    });
                    ended = true;
                    break;
                }
            };
            let addr = base + pos;
            pos += rec.len;
            end.max_lsn = end.max_lsn.max(rec.lsn);
            match rec.kind {
                Kind::Pad => {}
                Kind::End => break,
                Kind::BatchHeader => {
                    // An unfinished batch before a new one is a batch whose write failed
                    // part-way (its next segment could not be allocated): it was never
                    // acknowledged, so it is dropped like a torn one. Every record carries
                    // its own checksum, so damage cannot produce this shape.
                    if let Some((_, recs)) = pending.take() {
                        end.torn_batch_records += recs.len() as u64;
                    }
                    pending = Some((batch_count(&rec), Vec::new()));
                }
                Kind::Packed => {
                    // Atomic by its one checksum (decode validated every entry); like a
                    // plain write it ends an unfinished batch before it.
                    if let Some((_, recs)) = pending.take() {
                        end.torn_batch_records += recs.len() as u64;
                    }
                    for e in packed::entries(rec.value, rec.lsn).flatten() {
                        let r = RecordOut {
                            kind: if e.value.is_some() {
                                Kind::Put
                            } else {
                                Kind::Delete
                            },
                            lsn: e.lsn,
                            in_batch: false,
                            mark: None,
                            key: e.key,
                            value: e.value.unwrap_or(&[]),
                            len: rec.len,
                            packed: true,
                        };
                        end.max_lsn = end.max_lsn.max(e.lsn);
                        f(&r, addr)?;
                        end.records += 1;
                    }
                }
                Kind::Put | Kind::Delete => match pending.as_mut() {
                    Some((n, recs)) if rec.in_batch => {
                        recs.push((rec, addr));
                        if u64::try_from(recs.len()) == Ok(u64::from(*n)) {
                            for (r, a) in recs.iter() {
                                f(r, *a)?;
                                end.records += 1;
                            }
                            pending = None;
                        }
                    }
                    None if !rec.in_batch => {
                        f(&rec, addr)?;
                        end.records += 1;
                    }
                    Some((_, recs)) if !rec.in_batch => {
                        // A failed batch write followed by a later plain write (see
                        // `BatchHeader` above): drop the unfinished batch.
                        end.torn_batch_records += recs.len() as u64;
                        pending = None;
                        f(&rec, addr)?;
                        end.records += 1;
                    }
                    _ => {
                        let e =
                            Error::corruption(pool.path(), addr, "batch record outside its batch");
                        damaged(&mut sink, &mut pending, addr, e, rest)?;
                    }
                },
            }
        }
    }
    if let Some((_, recs)) = pending {
        end.torn_batch_records = recs.len() as u64;
    }
    Ok(end)
}

/// The next position after `bad` (at record alignment) holding a valid record.
fn next_valid(seg: &[u8], bad: u64, epoch: u64) -> Option<u64> {
    let mut p = bad + record::ALIGN;
    while usize_from(p) < seg.len() {
        let rest = seg.get(usize_from(p)..)?;
        if decode(rest, epoch).is_ok() {
            return Some(p);
        }
        p += record::ALIGN;
    }
    None
}

/// Seals a replayed log at its torn tail: writes a seal (formats.md §5.3) over the
/// first bytes of the torn region and makes it durable. Recovery decided the log ends
/// there; the seal makes that decision durable evidence, so a bit flipped later in any
/// record before it is reported as corruption instead of shortening the log again.
/// Recovery calls it before the store is shared; nothing appends to a replayed log.
///
/// # Errors
/// `Io` from the seam.
#[expect(
    clippy::cast_possible_truncation,
    reason = "an offset inside one segment: at most 3 chunks of 64 MiB"
)]
pub fn seal_torn_tail(pool: &Pool, t: &TornTail) -> Result<()> {
    if t.room < record::SEAL_LEN {
        return Ok(());
    }
    let mut buf = Vec::new();
    record::encode_seal(t.offset as u32, t.epoch, &mut buf);
    let mem = pool.mem();
    mem.write(t.addr, &buf)?;
    let mut set = WritebackSet::new();
    mem.write_back(&mut set, t.addr, record::SEAL_LEN);
    mem.fence(&mut set)
}

/// True if any of `segs` starts with a valid record: the writer fences a segment's
/// tail before writing into the next one, so such a record proves everything before
/// it was durable.
fn later_segment_has_records(pool: &Pool, segs: &[SegmentInfo]) -> Result<bool> {
    for s in segs {
        let base = pool.chunk_offset(s.chunk);
        let cap = s.span * pool.chunk_size();
        let bytes = pool
            .mem()
            .read(base + CHUNK_HEADER_LEN, cap - CHUNK_HEADER_LEN)?;
        if decode(bytes, s.epoch).is_ok() {
            return Ok(true);
        }
    }
    Ok(false)
}

fn bad_record(pool: &Pool, off: u64, why: Invalid, ctx: &str) -> Error {
    match why {
        Invalid::Checksum { stored, actual } => Error::ChecksumMismatch {
            file: pool.path().to_path_buf(),
            offset: off,
            expected: stored,
            actual,
        },
        _ => Error::corruption(
            pool.path(),
            off,
            format!("invalid log record ({why:?}) {ctx}"),
        ),
    }
}

/// Looks past a bad position for a valid record whose MARK says `bad` was durable.
fn later_mark_covering(seg: &[u8], bad: u64, epoch: u64) -> Option<u64> {
    let mut p = bad + record::ALIGN;
    while usize_from(p) < seg.len() {
        let rest = seg.get(usize_from(p)..)?;
        // Cheap pre-filter: the MARK flag must be set before paying for a checksum.
        if rest.len() >= record::HEADER_LEN && rest[10] & (1 << 3) != 0 {
            if let Ok(r) = decode(rest, epoch) {
                if let Some(m) = r.mark {
                    if u64::from(m) > bad {
                        return Some(u64::from(m));
                    }
                }
            }
        }
        p += record::ALIGN;
    }
    None
}
