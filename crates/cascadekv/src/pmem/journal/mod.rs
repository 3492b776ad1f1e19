//! The sync journal: the durable log path for block devices (issue #30 item 1,
//! FlatStore §3.3 on a disk instead of persistent memory; design.md §10).
//!
//! On a pool file on a block device the seam's fence is `msync`, which costs a page
//! walk, a write-protect fault per page written again, file-system write-back and a
//! device flush — and two `msync`s of one file mostly wait for each other. So instead,
//! when a FastStore log range must become durable, its bytes are written as one *block*
//! into a preallocated, pre-written journal file with `O_DIRECT`: one positioned write
//! that carries only the data, with as many such writes in flight as there are
//! persisting threads (the device serves them in parallel), made durable by a device
//! flush that began after it completed — shared by every block that completed before
//! it (`Flushes`; or `O_DSYNC` per block with `CASCADE_JOURNAL_SYNC=dsync`). The pool
//! stays the only copy readers use; its log pages are written back later, in the
//! background, by *checkpoints*.
//!
//! The journal is a *physical redo log of pool log bytes*: a block says "these bytes
//! belong at this pool offset, inside the log segment whose chunk has this epoch". After
//! a crash, `redo.rs` writes every live block's bytes back into the pool before the logs
//! are discovered, so the pool's logs hold every byte that was ever reported durable,
//! and log replay, MARK evidence, torn-tail rules, `verify` and `repair` work on the pool
//! exactly as before (formats.md §4 is unchanged; §16 draws the journal).
//!
//! Layout and lifetime: the file holds two header copies and `nseg` slots; journal
//! segment `seq` (numbered from 0 in each journal lifetime) uses slot `seq mod nseg`.
//! Writers reserve 4 KiB-aligned space in the *active* segment; a full one is followed
//! by the next. A *checkpoint* (a thread of the journal) notes the active segment `a`,
//! makes the pool durable (`fdatasync` of the pool file), then writes the header with
//! `live_from = a`: every block of a segment below `a` was reserved before `a` became
//! active, after its bytes were in the pool (a log appends, then persists), so the
//! pool now holds them durably and the block is no longer needed. A slot is reused
//! only for a segment `seq` with `seq - nseg < live_from`.
//!
//! Invariants:
//! * a block holds log bytes `[from, to)` of one segment where `from` was durable
//!   when the block was begun (the log's `fenced`): the blocks that redo applies, plus
//!   what checkpoints made durable, always cover a prefix of each log;
//! * log bytes never change once appended, so blocks that overlap carry equal bytes and
//!   redo may apply them in any order;
//! * a block is applied only to a chunk whose durable header still names a log chunk of
//!   the block's epoch: a chunk freed and reused since has another epoch (written and
//!   fenced before the chunk is used), a freed and punched one no header;
//! * each open reinitializes the journal with a new random nonce (after redo made the
//!   pool durable), and every block checksum is seeded with the nonce, so blocks of an
//!   earlier lifetime never validate.
//!
//! Locks: `st` (the active segment, its cursor, `live_from`, the header generation,
//! the checkpoint request, a failure) is held only to reserve space or change segment;
//! block writes run without it. `space` wakes writers waiting for a free slot, `work`
//! the checkpoint thread. `flushes` (flushes begun, the newest completed, how many
//! run, a failure) is held to decide who flushes, never across one; `flushed` wakes
//! writers waiting for a flush.

pub(crate) mod format;
pub(crate) mod io;
pub(crate) mod redo;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use self::format::{block_size, encode_block, Header, Target, ALIGN};
use self::io::{AlignedBuf, JournalIo, PoolSync};
use super::{Backend, Pool};
use crate::coding::usize_from;
use crate::error::{Error, Result};

/// The journal file's name in the data directory.
pub(crate) const JOURNAL_FILE: &str = "JOURNAL";
/// Number of slots.
const NSEG: u32 = 8;
/// Device flushes of the journal file that may run at once (shared flushes, below).
const MAX_FLUSHES: usize = 2;
/// A checkpoint writes the pool's log pages back this many bytes at a time before its
/// `fdatasync` ([`Inner::checkpoints`]): the journal flushes that run meanwhile queue
/// behind one window, not behind megabytes (measured: docs/benchmarks.md, session 14).
const CHECKPOINT_STEP: u64 = 256 << 10;
/// Pool ranges (offset, length) a slot's blocks carry.
type Ranges = Mutex<Vec<(u64, u64)>>;
/// Pool ranges remembered per slot; past this many, a slot's ranges merge into one
/// (the write-back then walks clean pages too, which costs little).
const MAX_RANGES: usize = 64;

/// Shared device flushes (`JournalIo::File` without `O_DSYNC`): a block's write is
/// durable once a flush that *began after the write completed* has completed. The
/// virtio disk here has no FUA, so an `O_DSYNC` write costs a write and then a flush,
/// one after the other, per block; with writes in parallel, one flush covers every
/// write that completed before it began.
#[derive(Debug, Default)]
struct Flushes {
    /// Flushes begun (each gets the next number).
    started: u64,
    /// The largest number of a flush that completed.
    completed: u64,
    /// Flushes running now.
    running: usize,
    /// A flush failed: nothing written since may be called durable, ever.
    failed: Option<String>,
}

/// Counters of the journal, for statistics.
#[derive(Debug, Default)]
pub(crate) struct JournalStats {
    /// Blocks written.
    pub blocks: AtomicU64,
    /// Payload bytes written.
    pub bytes: AtomicU64,
    /// Checkpoints finished.
    pub checkpoints: AtomicU64,
    /// Times a writer waited for a checkpoint to free a slot.
    pub waits: AtomicU64,
}

#[derive(Debug)]
struct St {
    /// The segment receiving blocks.
    active: u64,
    /// Bytes reserved in it.
    cursor: u64,
    /// Segments below this are dead (the durable header says so).
    live_from: u64,
    /// Generation of the newest header written.
    gen: u64,
    /// A checkpoint was asked for.
    wanted: bool,
    stop: bool,
    /// A checkpoint failed: the pool's durability is unknown, no block may be written.
    failed: Option<String>,
}

#[derive(Debug)]
struct Inner {
    io: JournalIo,
    nonce: u64,
    seg_size: u64,
    nseg: u64,
    st: Mutex<St>,
    space: Condvar,
    work: Condvar,
    sync: PoolSync,
    stats: JournalStats,
    flushes: Mutex<Flushes>,
    flushed: Condvar,
    /// Per slot: block writes reserved in it and not yet returned. A checkpoint frees
    /// a slot only once they returned, so a later lap's block never races an older
    /// write to the same place of the file.
    writing: Box<[AtomicU64]>,
    /// Per slot: the pool ranges its blocks carry (offset, length; adjacent ones
    /// merged), which a checkpoint that frees the slot writes back first.
    touched: Box<[Ranges]>,
}

/// The sync journal of one open store.
#[derive(Debug)]
pub(crate) struct Journal {
    inner: Arc<Inner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Journal size for a pool of `pool_size` bytes: a 32nd of it, between 1 MiB and
/// 64 MiB, whole slots of 4 KiB units.
pub(crate) fn default_size(pool_size: u64) -> u64 {
    let unit = u64::from(NSEG) * 16 * ALIGN;
    (pool_size / 32).clamp(1 << 20, 64 << 20) / unit * unit
}

impl Journal {
    /// Starts a new journal lifetime on `io` (after any redo): a fresh nonce, segment 0,
    /// and the checkpoint thread. `size` is the whole file's data area; an existing
    /// file of other geometry is rewritten. `sync` makes the pool durable.
    pub(crate) fn start(io: JournalIo, size: u64, sync: PoolSync) -> Result<Journal> {
        let seg_size = (size / u64::from(NSEG)).max(16 * ALIGN) / ALIGN * ALIGN;
        let mut h = Header {
            gen: 1,
            nonce: nonce(),
            live_from: 0,
            seg_size,
            nseg: NSEG,
        };
        let file = io.read_all(format::DATA_BASE)?;
        match Header::newest(&file) {
            Some(old)
                if old.seg_size == seg_size && old.nseg == NSEG && io_len(&io)? >= h.file_len() =>
            {
                h.gen = old.gen + 1;
            }
            _ => io.prewrite(h.file_len())?,
        }
        write_header(&io, &h)?;
        let inner = Arc::new(Inner {
            io,
            nonce: h.nonce,
            seg_size,
            nseg: u64::from(NSEG),
            st: Mutex::new(St {
                active: 0,
                cursor: 0,
                live_from: 0,
                gen: h.gen,
                wanted: false,
                stop: false,
                failed: None,
            }),
            space: Condvar::new(),
            work: Condvar::new(),
            sync,
            stats: JournalStats::default(),
            flushes: Mutex::new(Flushes::default()),
            flushed: Condvar::new(),
            writing: (0..NSEG).map(|_| AtomicU64::new(0)).collect(),
            touched: (0..NSEG).map(|_| Mutex::new(Vec::new())).collect(),
        });
        let worker = inner.clone();
        let thread = std::thread::Builder::new()
            .name("cascade-journal".into())
            .spawn(move || worker.checkpoints())
            .map_err(|e| Error::io("starting the journal checkpoint thread", e))?;
        Ok(Journal {
            inner,
            thread: Some(thread),
        })
    }

    /// The largest log range one block carries; a longer range is made durable through
    /// the pool instead (it is bandwidth, not a round trip: a bulk `msync` serves it).
    pub(crate) fn max_payload(&self) -> u64 {
        self.inner.seg_size / 4 - format::BLOCK_HEADER
    }

    /// Makes `payload` — log bytes that belong at `t.pool_off`, inside the segment
    /// `t.seg_base` of epoch `t.epoch` — durable as one block. Returns when it is.
    ///
    /// # Errors
    /// `Io` from the write; `Io` if an earlier checkpoint failed (then nothing more is
    /// written: what the pool holds durably is unknown).
    pub(crate) fn write(&self, t: Target, payload: &[u8]) -> Result<()> {
        let inner = &*self.inner;
        let size = block_size(payload.len());
        if size > inner.seg_size {
            return Err(Error::invalid("journal block larger than a slot"));
        }
        let (seq, off) = inner.reserve(size)?;
        let mut buf = AlignedBuf::zeroed(usize_from(size));
        encode_block(buf.as_mut_slice(), inner.nonce, seq, t, payload);
        let wrote = inner.io.write_at(off, &buf);
        // Before the block counts as returned: a checkpoint that frees this slot
        // waits for that, then reads the ranges.
        note_range(
            &inner.touched[usize_from(seq % inner.nseg)],
            t.pool_off,
            payload.len() as u64,
        );
        inner.writing[usize_from(seq % inner.nseg)].fetch_sub(1, Ordering::AcqRel);
        wrote?;
        inner.flush_after_write()?;
        inner.stats.blocks.fetch_add(1, Ordering::Relaxed);
        inner
            .stats
            .bytes
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The journal's counters.
    pub(crate) fn stats(&self) -> &JournalStats {
        &self.inner.stats
    }

    /// Whether block writes bypass the page cache.
    pub(crate) fn direct(&self) -> bool {
        self.inner.io.direct()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.inner.st.lock().stop = true;
        self.inner.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Inner {
    /// Reserves `size` bytes in the active segment (moving to the next one, and
    /// waiting for a checkpoint to free its slot, when it is full): the block's
    /// segment and file offset.
    fn reserve(&self, size: u64) -> Result<(u64, u64)> {
        let mut st = self.st.lock();
        if st.cursor + size > self.seg_size {
            let next = st.active + 1;
            loop {
                if let Some(f) = &st.failed {
                    return Err(failed(f));
                }
                if next - st.live_from < self.nseg {
                    break;
                }
                st.wanted = true;
                self.work.notify_one();
                self.stats.waits.fetch_add(1, Ordering::Relaxed);
                self.space.wait(&mut st);
            }
            st.active = next;
            st.cursor = 0;
            // Free the slots behind once half the ring is in use, so a writer rarely
            // meets a full ring and a checkpoint covers many segments.
            if next - st.live_from >= self.nseg / 2 {
                st.wanted = true;
                self.work.notify_one();
            }
        }
        if let Some(f) = &st.failed {
            return Err(failed(f));
        }
        let slot = st.active % self.nseg;
        let off = format::DATA_BASE + slot * self.seg_size + st.cursor;
        st.cursor += size;
        self.writing[usize_from(slot)].fetch_add(1, Ordering::AcqRel);
        Ok((st.active, off))
    }

    /// Returns once a flush that began after the caller's completed write has
    /// completed (at once without shared flushes): starts one if none began since and
    /// fewer than [`MAX_FLUSHES`] run, else waits for the one that began since.
    fn flush_after_write(&self) -> Result<()> {
        if !self.io.needs_flush() {
            return Ok(());
        }
        let mut f = self.flushes.lock();
        let seen = f.started;
        loop {
            if let Some(e) = &f.failed {
                return Err(Error::io(
                    "flushing the sync journal",
                    std::io::Error::other(e.clone()),
                ));
            }
            if f.completed > seen {
                return Ok(());
            }
            if f.started == seen && f.running < MAX_FLUSHES {
                f.started += 1;
                let n = f.started;
                f.running += 1;
                let r = parking_lot::MutexGuard::unlocked(&mut f, || self.io.flush());
                f.running -= 1;
                match r {
                    Ok(()) => f.completed = f.completed.max(n),
                    Err(e) => f.failed = Some(e.to_string()),
                }
                self.flushed.notify_all();
                continue;
            }
            self.flushed.wait(&mut f);
        }
    }

    /// The checkpoint thread: on request, frees every segment before the active one.
    fn checkpoints(&self) {
        let mut st = self.st.lock();
        loop {
            while !st.wanted && !st.stop {
                self.work.wait(&mut st);
            }
            if st.stop {
                return;
            }
            st.wanted = false;
            let target = st.active;
            if target <= st.live_from {
                continue;
            }
            let h = Header {
                gen: st.gen + 1,
                nonce: self.nonce,
                live_from: target,
                seg_size: self.seg_size,
                nseg: u32::try_from(self.nseg).unwrap_or(NSEG),
            };
            let from = st.live_from;
            let done = parking_lot::MutexGuard::unlocked(&mut st, || {
                // Blocks of the segments it frees may still be in flight (reserved
                // before the active segment moved on): they return first.
                while (from..target)
                    .any(|q| self.writing[usize_from(q % self.nseg)].load(Ordering::Acquire) > 0)
                {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                // The pool pages those blocks carried, written back a window at a
                // time: the `fdatasync` below then has little left to write, so the
                // journal's own flushes meanwhile do not queue behind a burst of
                // megabytes (they took 3-9 ms around each checkpoint before). The
                // `fdatasync` stays what makes the pool durable.
                let mut ranges = Vec::new();
                for q in from..target {
                    ranges.append(&mut self.touched[usize_from(q % self.nseg)].lock());
                }
                self.sync.write_back(&merged(ranges), CHECKPOINT_STEP)?;
                self.sync.sync()?;
                write_header(&self.io, &h)
            });
            match done {
                Ok(()) => {
                    st.gen = h.gen;
                    st.live_from = target;
                    self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.space.notify_all();
        }
    }
}

/// Adds pool range `[off, off + len)` to a slot's list, merged into one of its last
/// few ranges when it touches it (each log appends in order, so its blocks follow
/// each other); a list past [`MAX_RANGES`] becomes one range covering it all.
fn note_range(list: &Ranges, off: u64, len: u64) {
    let mut l = list.lock();
    let end = off + len;
    for r in l.iter_mut().rev().take(8) {
        if off <= r.0 + r.1 && end >= r.0 {
            let hi = (r.0 + r.1).max(end);
            r.0 = r.0.min(off);
            r.1 = hi - r.0;
            return;
        }
    }
    l.push((off, len));
    if l.len() > MAX_RANGES {
        let lo = l.iter().map(|r| r.0).min().unwrap_or(off);
        let hi = l.iter().map(|r| r.0 + r.1).max().unwrap_or(end);
        l.clear();
        l.push((lo, hi - lo));
    }
}

/// `ranges` sorted, overlapping and adjacent ones joined.
fn merged(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (off, len) in ranges {
        match out.last_mut() {
            Some(last) if off <= last.0 + last.1 => {
                last.1 = (last.0 + last.1).max(off + len) - last.0;
            }
            _ => out.push((off, len)),
        }
    }
    out
}

fn failed(msg: &str) -> Error {
    Error::io(
        "writing the sync journal",
        std::io::Error::other(format!("a journal checkpoint failed earlier: {msg}")),
    )
}

/// Writes `h` into the copy `gen` selects (the other copy keeps the previous header);
/// durable when it returns.
fn write_header(io: &JournalIo, h: &Header) -> Result<()> {
    let mut buf = AlignedBuf::zeroed(usize_from(ALIGN));
    buf.as_mut_slice().copy_from_slice(&h.encode());
    io.write_at((h.gen % 2) * ALIGN, &buf)?;
    io.flush()
}

fn io_len(io: &JournalIo) -> Result<u64> {
    match io {
        JournalIo::File { file, .. } => file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io("reading the sync journal's size", e)),
        JournalIo::Sim(dev) => Ok(dev.journal().len() as u64),
    }
}

/// A random number for a journal lifetime (time, process and a counter, hashed).
fn nonce() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut seed = t.to_le_bytes().to_vec();
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    seed.extend_from_slice(&COUNT.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    crate::coding::hash64(&seed) | 1
}

/// The journal file of the store in `dir`.
pub(crate) fn path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

/// What a store asks of its journal (`Options::sync_journal`, `journal_size`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    /// `Some(on)` decides; `None`: on for a file-backed pool without DAX that is not on
    /// tmpfs. `CASCADE_JOURNAL=1|0` overrides either for a pool file.
    pub want: Option<bool>,
    /// Bytes of the journal's slots (0: [`default_size`] of the pool).
    pub size: u64,
}

/// At open, before the logs are discovered: redoes the journal of the store in `dir`
/// if it has one and did not close cleanly, then starts a journal lifetime if `cfg`
/// wants one (a store that no longer wants it has its journal file removed once redo
/// made the pool durable). A private (copy-on-write) pool is only redone into.
///
/// # Errors
/// `Io` reading, creating or writing the journal, or fencing the pool.
pub(crate) fn attach(
    pool: &mut Pool,
    dir: &Path,
    cfg: Config,
    clean: bool,
) -> Result<redo::Redone> {
    let private = pool.backend() == Backend::Private;
    let sim = pool.mem().sim_device().cloned();
    let file = path(dir);
    let existing = match &sim {
        Some(dev) => dev.has_journal().then(|| JournalIo::Sim(dev.clone())),
        None if !file.exists() => None,
        None if private => Some(JournalIo::open_read(&file)?),
        None => Some(JournalIo::open_file(&file, false, dsync_writes())?),
    };
    let redone = match &existing {
        Some(io) => redo::redo(pool, io, clean)?,
        None => redo::Redone::default(),
    };
    if private {
        return Ok(redone);
    }
    let auto = pool.backend() == Backend::Msync && !pool.mem().on_tmpfs();
    let want = match (&sim, env_override()) {
        (None, Some(on)) => on,
        _ => cfg.want.unwrap_or(auto && sim.is_none()),
    };
    if !want {
        if existing.is_some() && sim.is_none() {
            drop(existing);
            std::fs::remove_file(&file)
                .map_err(|e| Error::io(format!("removing {}", file.display()), e))?;
        }
        return Ok(redone);
    }
    let simulated = sim.is_some();
    let (io, sync) = if let Some(dev) = sim {
        (JournalIo::Sim(dev.clone()), PoolSync::Sim(dev))
    } else {
        let io = match existing {
            Some(io) => io,
            None => JournalIo::open_file(&file, true, dsync_writes())?,
        };
        let Some(f) = pool.mem().file_handle()? else {
            return Err(Error::Internal("a journal needs the pool file".into()));
        };
        (io, PoolSync::File(f))
    };
    // `CASCADE_JOURNAL_SIZE` (bytes) overrides the size, to measure sizes with one
    // binary.
    let size = match std::env::var("CASCADE_JOURNAL_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) if n >= 128 << 10 => n,
        _ if cfg.size == 0 => default_size(pool.chunk_size() * pool.chunk_count()),
        _ => cfg.size,
    };
    pool.set_journal(Journal::start(io, size, sync)?);
    if !simulated {
        sync_dir(dir)?;
    }
    Ok(redone)
}

/// `CASCADE_JOURNAL=1|0`, read once per process (to measure both paths with one
/// binary: `scripts/bench-sync.sh`).
fn env_override() -> Option<bool> {
    static ENV: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| match std::env::var("CASCADE_JOURNAL").ok()?.as_str() {
        "1" => Some(true),
        "0" => Some(false),
        _ => None,
    })
}

/// Whether each block write is `O_DSYNC` (durable by itself: a write, then a flush,
/// per block on a disk without FUA) instead of plain `O_DIRECT` writes made durable
/// by shared flushes (the default). `CASCADE_JOURNAL_SYNC=dsync|shared`, read once,
/// to measure both with one binary.
fn dsync_writes() -> bool {
    static ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENV.get_or_init(|| std::env::var("CASCADE_JOURNAL_SYNC").is_ok_and(|v| v == "dsync"))
}

/// Makes a new directory entry (the journal file's) durable.
fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_of_interleaved_logs_merge_per_log_and_stay_bounded() {
        let list = Mutex::new(Vec::new());
        // Two logs appending in turn, each block following its log's previous one.
        for i in 0..100u64 {
            note_range(&list, (1 << 20) + i * 100, 100);
            note_range(&list, (8 << 20) + i * 50, 50);
        }
        note_range(&list, 1 << 20, 10); // inside the first: nothing new
        assert_eq!(
            merged(list.lock().clone()),
            vec![(1 << 20, 10_000), (8 << 20, 5_000)]
        );
        // Scattered ranges: past MAX_RANGES the list is one range covering them all.
        let list = Mutex::new(Vec::new());
        for i in 0..=(MAX_RANGES as u64) {
            note_range(&list, i * 1_000_000, 10);
        }
        assert_eq!(*list.lock(), vec![(0, MAX_RANGES as u64 * 1_000_000 + 10)]);
        assert_eq!(
            merged(vec![(50, 10), (0, 10), (10, 5), (55, 20), (100, 1)]),
            vec![(0, 15), (50, 25), (100, 1)]
        );
    }
}
