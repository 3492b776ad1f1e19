//! A thread-exclusive log writer (FluidKV §4.2).
//!
//! A log is a sequence of *segments*: allocations of one chunk (or, for a record larger
//! than a chunk, enough contiguous chunks to hold it). Each segment starts with a
//! [`ChunkHeader`] naming the log (`owner`), the segment's position (`seq`) and the
//! FastStore generation (`aux`); records follow (see [`super::record`]).
//!
//! Invariants:
//! * Only the owning writer appends to a segment; records never move once written.
//! * Moving to a new segment allocates it first (so a full pool changes nothing), then
//!   writes an `End` record and fences the old segment's tail before any record goes
//!   into the new one: a valid record in a later segment proves every earlier segment
//!   complete and durable.
//! * `fenced` is the segment offset up to which everything is durable; the first record
//!   written after it advances carries it as a MARK.
//! * A FastStore log of a pool with a sync journal (`pmem/journal/`) makes a range
//!   durable by writing its bytes as one journal block (when it fits one) instead of
//!   writing it back and fencing it: the same `[fenced, pos)` range, so every rule
//!   above holds with "durable" meaning "in the pool or in a live journal block"
//!   (redo puts the block's bytes back into the pool after a crash).
//!
//! Thread-safety: a `LogWriter` is owned by one thread at a time (the engine keeps it
//! behind that thread's uncontended mutex). It is `Send`, not shared.

use std::sync::Arc;

use super::record::{self, encode, encode_filler, encoded_len, placement, Kind, RecordIn};
use crate::error::Result;
use crate::pmem::{AllocClass, ChunkKind, Pool, WritebackSet, CHUNK_HEADER_LEN};
use crate::vlog::Segment;

/// The segment being appended to.
#[derive(Debug)]
struct Tail {
    epoch: u64,
    /// Pool offset of the segment start.
    base: u64,
    /// Segment length in bytes.
    cap: u64,
    /// Append position (segment-relative).
    pos: u64,
    /// Everything before this offset is durable.
    fenced: u64,
    /// Largest `durable_upto` already written as a MARK.
    marked: u64,
    /// End of the mark [`LogWriter::sync`] appended last (0 if something followed it):
    /// a tail that ends in that mark holds nothing unsynced.
    mark_end: u64,
    /// Write-back of the segment's pages was started up to here ([`EARLY_WB_STEP`]).
    early_wb: u64,
}

/// Every this many bytes appended, a log starts the write-back of the pages it has
/// finished (`Mem::start_write_back`), so that the fence ending its segment has little
/// left to write.
const EARLY_WB_STEP: u64 = 256 << 10;

/// Appends records to one log.
#[derive(Debug)]
pub struct LogWriter {
    pool: Arc<Pool>,
    kind: ChunkKind,
    generation: u64,
    log_id: Option<u64>,
    next_seq: u64,
    seg: Option<Tail>,
    set: WritebackSet,
    buf: Vec<u8>,
    /// Every segment this log has used, each created with one holder (the owner's).
    segments: Vec<Arc<Segment>>,
    bytes: u64,
    /// Set by [`LogWriter::seal`]: nothing may be appended any more, marks included.
    sealed: bool,
}

/// A persist of a log's tail that runs without the writer (so the log's other threads
/// go on appending meanwhile): [`LogWriter::begin_sync`] under the slot's lock,
/// [`PersistJob::run`] outside it, [`LogWriter::finish_sync`] under it again.
#[derive(Debug)]
pub struct PersistJob {
    pool: Arc<Pool>,
    /// Pool offset of the segment it covers.
    base: u64,
    /// That segment's allocation epoch.
    epoch: u64,
    /// Segment offsets `[from, to)` it makes durable (`from` was durable before).
    from: u64,
    to: u64,
    /// Through the pool's sync journal (else written back in `set` and fenced).
    journal: bool,
    set: WritebackSet,
}

impl PersistJob {
    /// Where the log's tail was when the job began: (segment, offset) it covers up to.
    #[must_use]
    pub fn upto(&self) -> (u64, u64) {
        (self.base, self.to)
    }

    /// Makes the job's range durable: one journal block, or a fence through the seam
    /// (the slow part: `msync`).
    ///
    /// # Errors
    /// `Io` from the write or the fence; `Internal` if the simulated device finds a
    /// line unfenced.
    pub fn run(&mut self) -> Result<()> {
        if self.journal {
            return journal_range(&self.pool, self.base, self.epoch, self.from, self.to);
        }
        let mem = self.pool.mem();
        mem.fence_log(&mut self.set)?;
        // Whole lines only: the log's other threads may already have written past
        // `to` into its last line again (the simulated device then tracks it as dirty,
        // though what was before `to` was fenced).
        let end = (self.base + self.to) / crate::pmem::persist::LINE * crate::pmem::persist::LINE;
        let start = self.base + self.from;
        mem.check_durable(start, end.saturating_sub(start))
    }
}

impl LogWriter {
    /// A writer for a new log of FastStore `generation`. No chunk is allocated until
    /// the first append.
    pub fn new(pool: Arc<Pool>, generation: u64) -> Self {
        Self::with_kind(pool, generation, ChunkKind::Log)
    }

    /// A writer whose segments are chunks of `kind` (the manifest is a log too).
    pub fn with_kind(pool: Arc<Pool>, generation: u64, kind: ChunkKind) -> Self {
        LogWriter {
            pool,
            kind,
            generation,
            log_id: None,
            next_seq: 0,
            seg: None,
            set: WritebackSet::new(),
            buf: Vec::with_capacity(256),
            segments: Vec::new(),
            bytes: 0,
            sealed: false,
        }
    }

    /// Segments used so far.
    pub fn segments(&self) -> &[Arc<Segment>] {
        &self.segments
    }

    /// The pool's chunk size (a segment is one chunk or more).
    pub fn chunk_size(&self) -> u64 {
        self.pool.chunk_size()
    }

    /// Record bytes appended (padding included).
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Appends one record and returns its pool address. Not durable until
    /// [`LogWriter::sync`].
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a MARK is an offset inside one segment: at most 3 chunks of 64 MiB"
    )]
    ///
    /// A new segment, if one is needed, is allocated as `class` (ordinary writes leave
    /// the pool's headroom free).
    pub fn append(&mut self, rec: &RecordIn<'_>, class: AllocClass) -> Result<u64> {
        let (mut mark, mut len) = self.mark_and_len(rec);
        let fits = self
            .seg
            .as_ref()
            .is_some_and(|s| placement(s.pos, len) + len <= s.cap);
        if !fits {
            self.next_segment(len, class)?;
            (mark, len) = self.mark_and_len(rec);
        }
        let pool = self.pool.clone();
        let mem = pool.mem();
        let Some(seg) = self.seg.as_mut() else {
            return Err(crate::Error::Internal(
                "log segment missing after allocation".into(),
            ));
        };
        let at = placement(seg.pos, len);
        if at > seg.pos {
            encode_filler(Kind::Pad, at - seg.pos, seg.epoch, &mut self.buf);
            mem.write_log(seg.base + seg.pos, &self.buf)?;
        }
        encode(rec, mark.map(|m| m as u32), seg.epoch, &mut self.buf);
        let addr = seg.base + at;
        mem.write_log(addr, &self.buf)?;
        if let Some(m) = mark {
            seg.marked = m;
        }
        self.bytes += at + len - seg.pos;
        seg.pos = at + len;
        if seg.pos - seg.early_wb >= EARLY_WB_STEP {
            mem.start_write_back(seg.base + seg.early_wb, seg.pos - seg.early_wb);
            seg.early_wb = seg.pos & !(crate::pmem::persist::PAGE - 1);
        }
        Ok(addr)
    }

    fn mark_and_len(&self, rec: &RecordIn<'_>) -> (Option<u64>, u64) {
        let mark = self
            .seg
            .as_ref()
            .and_then(|s| (s.fenced > s.marked).then_some(s.fenced));
        (
            mark,
            encoded_len(rec.key.len(), rec.value.len(), mark.is_some()),
        )
    }

    /// Makes every appended record durable (write-back + fence through the seam), then
    /// appends a *mark* (formats.md §5.3) saying so. The mark is written but not written
    /// back: it becomes durable with the next sync, or with the page cache after a
    /// process crash. Either way it only ever claims what the fence made durable, so a
    /// damaged record it covers is reported as corruption by replay, never taken for a
    /// torn tail — the evidence an acknowledged `Sync` write leaves even when it is the
    /// last write before a crash.
    pub fn sync(&mut self) -> Result<()> {
        self.pool.note_durable_log();
        self.persist()?;
        self.append_mark()
    }

    /// Appends the mark saying how far the segment is fenced, if it says more than the
    /// last one and fits (see [`LogWriter::sync`]).
    fn append_mark(&mut self) -> Result<()> {
        let Some(seg) = self.seg.as_mut() else {
            return Ok(());
        };
        if seg.fenced <= seg.marked || self.sealed {
            return Ok(());
        }
        let len = record::SEAL_LEN;
        let at = placement(seg.pos, len);
        if at + len > seg.cap {
            return Ok(());
        }
        let mem = self.pool.mem();
        // Only a mark right behind the fenced tail says "nothing unsynced before me";
        // after a persist job other threads may have appended past what it fenced.
        let whole = seg.fenced == seg.pos;
        if at > seg.pos {
            encode_filler(Kind::Pad, at - seg.pos, seg.epoch, &mut self.buf);
            mem.write_log(seg.base + seg.pos, &self.buf)?;
        }
        let upto = u32::try_from(seg.fenced)
            .map_err(|_| crate::Error::Internal("log segment offset beyond u32".into()))?;
        record::encode_mark(upto, seg.epoch, &mut self.buf);
        mem.write_log(seg.base + at, &self.buf)?;
        seg.marked = seg.fenced;
        self.bytes += at + len - seg.pos;
        seg.pos = at + len;
        seg.mark_end = if whole { seg.pos } else { 0 };
        Ok(())
    }

    /// Where the tail is: (segment, offset). Everything appended so far lies before it.
    #[must_use]
    pub fn tail(&self) -> (u64, u64) {
        self.seg.as_ref().map_or((0, 0), |s| (s.base, s.pos))
    }

    /// True when everything before `tail` (from [`LogWriter::tail`]) is durable: the
    /// segment moved on since (a segment is fenced whole before the next gets records),
    /// or it is fenced that far.
    #[must_use]
    pub fn durable_to(&self, tail: (u64, u64)) -> bool {
        self.seg
            .as_ref()
            .is_none_or(|s| s.base != tail.0 || s.fenced >= tail.1)
    }

    /// Starts a persist of everything appended so far that runs without the writer
    /// (pipelined group commit, FlatStore §3.3: other threads of a shared log append
    /// while it fences). `None` if nothing is unsynced. Finish with
    /// [`LogWriter::finish_sync`] whatever `run` returned.
    pub fn begin_sync(&mut self) -> Option<PersistJob> {
        if !self.has_unsynced() {
            return None;
        }
        self.pool.note_durable_log();
        let journal = self.journaled();
        let seg = self.seg.as_mut()?;
        let mut set = WritebackSet::new();
        let journal = journal && fits_block(&self.pool, seg.pos - seg.fenced);
        if !journal {
            self.pool
                .mem()
                .write_back(&mut set, seg.base + seg.fenced, seg.pos - seg.fenced);
        }
        Some(PersistJob {
            pool: self.pool.clone(),
            base: seg.base,
            epoch: seg.epoch,
            from: seg.fenced,
            to: seg.pos,
            journal,
            set,
        })
    }

    /// Records what a finished job made durable and appends a mark saying so. (A job
    /// of a segment the log has left changes nothing: leaving it fenced it whole.)
    ///
    /// # Errors
    /// `Io` writing the mark.
    pub fn finish_sync(&mut self, job: &PersistJob) -> Result<()> {
        if let Some(seg) = self.seg.as_mut() {
            if seg.base == job.base && job.to > seg.fenced {
                seg.fenced = job.to;
            }
        }
        self.append_mark()
    }

    /// Writes back and fences everything appended, unless all that was appended since
    /// the last fence is the mark that fence left.
    fn persist(&mut self) -> Result<()> {
        self.persist_with(false)
    }

    /// Whether this log's ranges go through the pool's sync journal (FastStore logs of
    /// a pool that has one; the manifest keeps the seam's fences).
    fn journaled(&self) -> bool {
        self.kind == ChunkKind::Log && self.pool.journal().is_some()
    }

    /// [`Self::persist`]; with `all`, the mark a sync left is made durable too.
    fn persist_with(&mut self, all: bool) -> Result<()> {
        let journal = self.journaled();
        let mem = self.pool.mem();
        if let Some(seg) = self.seg.as_mut() {
            if seg.pos == seg.mark_end && !all {
                return Ok(());
            }
            if journal && seg.pos > seg.fenced && fits_block(&self.pool, seg.pos - seg.fenced) {
                journal_range(&self.pool, seg.base, seg.epoch, seg.fenced, seg.pos)?;
                seg.fenced = seg.pos;
                return Ok(());
            }
            // From `fenced`: a persist job may still be fencing part of what follows it
            // (`begin_sync`); this fence must cover that too.
            if seg.pos > seg.fenced {
                mem.write_back(&mut self.set, seg.base + seg.fenced, seg.pos - seg.fenced);
            }
            if seg.pos > seg.fenced {
                mem.fence_log(&mut self.set)?;
                mem.check_durable(seg.base + seg.fenced, seg.pos - seg.fenced)?;
                seg.fenced = seg.pos;
            }
        }
        Ok(())
    }

    /// Makes every appended record durable, then *seals* the log: appends a seal (an
    /// `End` record whose MARK covers everything before it) and makes that durable too.
    /// From then on a damaged record anywhere before the seal is reported as corruption
    /// by replay instead of ending the log (see `reader.rs`). Nothing may be appended
    /// after a seal: only a clean close seals.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a MARK is an offset inside one segment: at most 3 chunks of 64 MiB"
    )]
    pub fn seal(&mut self) -> Result<()> {
        // Everything the seal will cover must be durable before the seal is written,
        // the mark of the last sync included: written in the same fence as the seal, a
        // crash could keep the seal and lose the mark, and the seal would then claim a
        // hole (found by crash images at every fence of a clean close).
        self.persist_with(true)?;
        let mem = self.pool.mem();
        let Some(seg) = self.seg.as_mut() else {
            return Ok(());
        };
        if seg.cap - seg.pos < record::SEAL_LEN || seg.pos <= CHUNK_HEADER_LEN {
            // A full segment ends at its capacity; an empty one holds nothing to cover.
            return Ok(());
        }
        record::encode_seal(seg.pos as u32, seg.epoch, &mut self.buf);
        mem.write_log(seg.base + seg.pos, &self.buf)?;
        seg.marked = seg.pos;
        seg.pos += record::SEAL_LEN;
        seg.mark_end = 0;
        self.bytes += record::SEAL_LEN;
        self.sealed = true;
        self.persist()
    }

    /// True when records were appended since the last [`LogWriter::sync`].
    pub fn has_unsynced(&self) -> bool {
        self.seg
            .as_ref()
            .is_some_and(|s| s.pos > s.fenced && s.pos != s.mark_end)
    }

    /// Moves to a new segment now if the tail segment has fewer than `room` bytes left
    /// (or there is none), so that a later append of up to `room` bytes allocates
    /// nothing. A sealed log is left alone. The group commit calls this before a writer
    /// posts (`faststore/group.rs`): an allocation costs a `posix_fallocate` and two
    /// fences, and under the leader lock it would stall every writer's group.
    ///
    /// # Errors
    /// `PoolFull` or `Io` from the allocation or the old segment's persist; nothing
    /// changes then.
    pub fn ensure_room(&mut self, room: u64, class: AllocClass) -> Result<()> {
        if !self.has_room(room) {
            self.next_segment(room, class)?;
        }
        Ok(())
    }

    /// Whether an append of up to `room` bytes needs no new segment: the tail segment
    /// has that much left, or the log is sealed (nothing more is appended to it).
    #[must_use]
    pub fn has_room(&self, room: u64) -> bool {
        self.sealed
            || self
                .seg
                .as_ref()
                .is_some_and(|s| s.cap.saturating_sub(s.pos) >= room)
    }

    fn next_segment(&mut self, len: u64, class: AllocClass) -> Result<()> {
        // Allocate first: if the pool is full nothing is written, and the current
        // segment stays open for smaller records that still fit.
        let chunk = self.pool.chunk_size();
        let span = (CHUNK_HEADER_LEN + len).div_ceil(chunk).max(1);
        let (a, h) = self.pool.alloc_chunk(
            self.kind,
            span,
            self.log_id,
            self.next_seq,
            self.generation,
            class,
        )?;
        if let Some(seg) = self.seg.as_mut() {
            if seg.pos < seg.cap {
                encode_filler(
                    Kind::End,
                    record::HEADER_LEN as u64,
                    seg.epoch,
                    &mut self.buf,
                );
                self.pool.mem().write_log(seg.base + seg.pos, &self.buf)?;
                seg.pos += record::HEADER_LEN as u64;
            }
        }
        // The old segment is complete and durable before the next one gets records.
        self.persist()?;
        let base = self.pool.chunk_offset(a.chunk);
        if self.kind == ChunkKind::Log && self.pool.prewrites_logs() {
            // A FastStore log of a store that syncs: pre-write the segment so that its
            // fences write data only (`Mem::prewrite_zeros`, design.md §10). Its header
            // is durable already; what follows it reads as zeros before and after, and
            // the zeros go in before any record of the segment does.
            self.pool
                .mem()
                .prewrite_zeros(base + CHUNK_HEADER_LEN, a.span * chunk - CHUNK_HEADER_LEN)?;
        }
        self.log_id = Some(h.owner);
        self.next_seq += 1;
        self.segments
            .push(Segment::new(self.pool.clone(), a.chunk, a.span, 1));
        self.seg = Some(Tail {
            epoch: a.epoch,
            base,
            cap: a.span * chunk,
            pos: CHUNK_HEADER_LEN,
            fenced: CHUNK_HEADER_LEN,
            marked: CHUNK_HEADER_LEN,
            mark_end: 0,
            early_wb: CHUNK_HEADER_LEN,
        });
        Ok(())
    }
}

/// Whether a range of `len` bytes fits one journal block (a longer one is fenced
/// through the seam: it is bandwidth, and a bulk `msync` serves it).
fn fits_block(pool: &Pool, len: u64) -> bool {
    pool.journal().is_some_and(|j| len <= j.max_payload())
}

/// Writes segment bytes `[from, to)` of the log segment at `base` (allocation `epoch`)
/// as one journal block; durable when it returns.
fn journal_range(pool: &Pool, base: u64, epoch: u64, from: u64, to: u64) -> Result<()> {
    let Some(j) = pool.journal() else {
        return Err(crate::Error::Internal(
            "log journaled without a journal".into(),
        ));
    };
    let bytes = pool.mem().read(base + from, to - from)?;
    j.write(
        crate::pmem::journal::format::Target {
            seg_base: base,
            epoch,
            pool_off: base + from,
        },
        bytes,
    )
}
