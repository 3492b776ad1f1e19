//! The persistence seam: write / write back a range / fence.
//!
//! Every byte CascadeKV makes durable goes through [`Mem`]: a mapped region with one
//! of three backends. ("Write back" is the cache-line operation; in this code base
//! "flush" means only moving a FastStore into tables.)
//!
//! * [`Backend::Dax`] — persistent memory mapped with `MAP_SHARED_VALIDATE | MAP_SYNC`;
//!   `write_back` issues `clwb` (or `clflushopt` / `clflush`, chosen by CPUID) per 64 B
//!   line, `fence` is `sfence`.
//! * [`Backend::Msync`] — an ordinary file (or a file on `/dev/shm`) mapped shared;
//!   `write_back` records the page range in the caller's [`WritebackSet`], `fence`
//!   calls `msync(MS_SYNC)` on the batched, merged ranges.
//! * [`Backend::Sim`] — a simulated device for tests (see [`super::sim`]) that tracks
//!   every line as dirty / flushed / fenced and can produce crash images.
//! * [`Backend::Private`] — the pool file opened read-only and mapped copy-on-write:
//!   what the engine writes stays in this process and never reaches the file;
//!   `write_back` and `fence` do nothing. `cascade verify` and `cascade repair` open
//!   a store this way, so looking at a damaged store never changes it.
//!
//! Invariants and threading: `Mem` is `Sync`; any thread may write, provided no two
//! threads write the same bytes concurrently and nobody reads bytes while they are
//! being written. The engine guarantees this by ownership: a chunk belongs to one
//! writer (a thread-exclusive log, a table builder, the allocator under its lock) until
//! it is published, and published bytes are immutable until their chunk is freed,
//! which happens only after every reader that could hold its address is gone.
//! A [`WritebackSet`] belongs to one thread; `fence` makes durable what was written
//! back through that set.

use crate::coding::usize_from;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::sim::SimDevice;
use crate::error::{Error, Result};

/// Size of a CPU cache line, the unit of persistence on a DAX device.
pub const LINE: u64 = 64;
/// The page size write-back works in.
pub(crate) const PAGE: u64 = 4096;

/// How persistence is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// DAX persistent memory: cache-line flushes and a store fence.
    Dax,
    /// Ordinary shared file mapping: `msync` on fence.
    Msync,
    /// Simulated device (tests).
    Sim,
    /// Copy-on-write mapping of a file opened read-only: nothing is ever persisted.
    Private,
}

/// Cache-line write-back instruction chosen at start-up by CPUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushInsn {
    /// `clwb`: write back, keep the line cached.
    Clwb,
    /// `clflushopt`: write back and invalidate, weakly ordered.
    ClflushOpt,
    /// `clflush`: write back and invalidate, ordered.
    Clflush,
}

/// Ranges one thread has written back but not yet fenced.
#[derive(Debug, Default)]
pub struct WritebackSet {
    /// Page- or line-aligned `[start, end)` ranges, merged when adjacent.
    ranges: Vec<(u64, u64)>,
}

impl WritebackSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&mut self, start: u64, end: u64) {
        if let Some(last) = self.ranges.last_mut() {
            if start <= last.1 && end >= last.0 {
                last.0 = last.0.min(start);
                last.1 = last.1.max(end);
                return;
            }
        }
        self.ranges.push((start, end));
    }

    pub(crate) fn take(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.ranges)
    }
}

/// A mapped region plus its persistence backend.
pub struct Mem {
    base: *mut u8,
    len: u64,
    backend: Backend,
    /// How logs reach a file-backed pool ([`LogIo`]; set from `Options` at open).
    io: LogIo,
    insn: FlushInsn,
    /// Keeps the mapped file open (file backends).
    file: Option<File>,
    sim: Option<Arc<SimDevice>>,
    /// [`Mem::start_write_back`] runs: a shared mapping of a file on a block device
    /// (not DAX, not tmpfs), unless `CASCADE_LOG_EARLY_WB=0`.
    early_wb: bool,
}

// SAFETY: `Mem` hands out access to a shared mapping; the module invariant (disjoint
// writers, no reads of bytes being written) is what makes cross-thread use sound, and
// every accessor is bounds-checked against `len`.
unsafe impl Send for Mem {}
// SAFETY: see `Send` above.
unsafe impl Sync for Mem {}

impl std::fmt::Debug for Mem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mem")
            .field("len", &self.len)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Mem {
    /// Maps `file` (already sized to `len`) shared. With `want_dax`, tries
    /// `MAP_SHARED_VALIDATE | MAP_SYNC` first and falls back to a plain shared mapping
    /// when the kernel or file system refuses it; `require_dax` turns that fallback into
    /// an error.
    pub fn map_file(file: File, len: u64, want_dax: bool, require_dax: bool) -> Result<Self> {
        let size = map_size(len)?;
        let fd = file.as_raw_fd();
        let mut mapped = None;
        if want_dax {
            mapped = mmap(fd, size, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC);
            if mapped.is_none() && require_dax {
                return Err(Error::io(
                    "mapping the pool with MAP_SYNC (DAX was required)",
                    std::io::Error::last_os_error(),
                ));
            }
        }
        let backend = if mapped.is_some() {
            Backend::Dax
        } else {
            Backend::Msync
        };
        let ptr = match mapped {
            Some(p) => p,
            None => mmap(fd, size, libc::MAP_SHARED).ok_or_else(|| {
                Error::io("mapping the pool file", std::io::Error::last_os_error())
            })?,
        };
        let early_wb = backend == Backend::Msync && !is_tmpfs(&file) && early_write_back();
        Ok(Mem {
            base: ptr,
            len,
            backend,
            insn: detect_flush_insn(),
            file: Some(file),
            io: LogIo::with_env(LogIo::DEFAULT),
            sim: None,
            early_wb,
        })
    }

    /// Maps `file` (opened read-only, `len` bytes) private and copy-on-write: writes
    /// land in anonymous pages of this process, the file never changes.
    pub fn map_private(file: &File, len: u64) -> Result<Self> {
        let ptr = mmap(file.as_raw_fd(), map_size(len)?, libc::MAP_PRIVATE).ok_or_else(|| {
            Error::io(
                "mapping the pool file copy-on-write",
                std::io::Error::last_os_error(),
            )
        })?;
        Ok(Mem {
            base: ptr,
            len,
            backend: Backend::Private,
            io: LogIo::DEFAULT,
            insn: FlushInsn::Clflush,
            file: None,
            sim: None,
            early_wb: false,
        })
    }

    /// Wraps a simulated device.
    pub fn sim(dev: Arc<SimDevice>) -> Self {
        Mem {
            base: dev.base_ptr(),
            len: dev.len(),
            backend: Backend::Sim,
            io: LogIo::DEFAULT,
            insn: FlushInsn::Clflush,
            file: None,
            sim: Some(dev),
            early_wb: false,
        }
    }

    /// Sets how logs reach a file-backed pool (at open, before any log is written).
    pub(crate) fn set_log_io(&mut self, io: LogIo) {
        self.io = io;
    }

    /// How logs reach a file-backed pool.
    pub(crate) fn log_io(&self) -> LogIo {
        self.io
    }

    /// The simulated device behind a `Sim` backend.
    pub(crate) fn sim_device(&self) -> Option<&Arc<SimDevice>> {
        self.sim.as_ref()
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Length of the region in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    fn check(&self, off: u64, len: u64) -> Result<()> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::invalid(format!(
                "pool access [{off}, +{len}) outside the {}-byte pool",
                self.len
            ))),
        }
    }

    /// Copies `data` to `off`. Not durable until written back and fenced.
    pub fn write(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check(off, data.len() as u64)?;
        // SAFETY: bounds checked above; the caller owns these bytes (module invariant),
        // so no other thread reads or writes them concurrently.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.base.add(usize_from(off)),
                data.len(),
            );
        }
        if let Some(sim) = &self.sim {
            sim.note_write(off, data.len() as u64);
        }
        Ok(())
    }

    /// Copies a log record (or a log's padding, mark or seal) to `off`. Not durable
    /// until written back and fenced, as [`Mem::write`].
    ///
    /// On the `Msync` backend with [`LogIo::pwrite`] (`Options::log_pwrite`; off by
    /// default) the bytes go in with a positioned write (`pwrite`) into the pool file
    /// instead of a store into the mapping (issue #30, design.md §10):
    /// Linux keeps one page cache per file, so readers of the mapping see the bytes as
    /// soon as the call returns, but no store touches the page. A store into a page
    /// the last `msync` cleaned takes a write-protect fault into the file system
    /// (`ext4_page_mkwrite`), and a log of 1 KB records — and the 32-byte mark every
    /// sync appends right behind what it fenced — re-dirty the page they fenced at
    /// every append; measured, store + `msync` of a written page costs 225–303 µs
    /// against 122–135 µs for `pwrite` + `msync`. Other backends store as `write`.
    pub fn write_log(&self, off: u64, data: &[u8]) -> Result<()> {
        self.check(off, data.len() as u64)?;
        match (&self.file, self.backend) {
            (Some(f), Backend::Msync) if self.io.pwrite => f
                .write_all_at(data, off)
                .map_err(|e| Error::io(format!("writing a log record at pool offset {off}"), e)),
            _ => self.write(off, data),
        }
    }

    /// Pre-writes `[off, off+len)` with zeros and starts their write-back (`Msync`
    /// backend only; elsewhere a no-op). For a log segment about to be appended to by
    /// durable writes (issue #30 lever (a), FlatStore §3.3's premise that a persist
    /// carries the batch and nothing else): the pool's free chunks are unwritten
    /// extents (fresh `posix_fallocate`d or punched ranges), and the first write-back
    /// into an unwritten block must also convert its extent — a file-system metadata
    /// write inside the fence that reaches each new block. Once the zeros are written
    /// back the range is written blocks and later fences carry data only. The
    /// write-back is started (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), not waited
    /// for: the zeros need not be durable (an unwritten range reads as zeros too, so
    /// the log format does not change and the reader ends a log at them as before),
    /// and a wait would stall the appending writer for a whole chunk's write.
    pub fn prewrite_zeros(&self, off: u64, len: u64) -> Result<()> {
        const STEP: u64 = 256 << 10;
        self.check(off, len)?;
        let (Some(f), Backend::Msync) = (&self.file, self.backend) else {
            return Ok(());
        };
        let zeros = vec![0u8; usize_from(STEP)];
        let mut at = off;
        while at < off + len {
            let n = STEP.min(off + len - at);
            f.write_all_at(&zeros[..usize_from(n)], at)
                .map_err(|e| Error::io("pre-writing a log segment with zeros", e))?;
            at += n;
        }
        sync_range(f, off, len, libc::SYNC_FILE_RANGE_WRITE)
            .map_err(|e| Error::io("starting write-back of a pre-written log segment", e))
    }

    /// Writes back the file's dirty pages in `[off, off + len)` one `step` at a time,
    /// each window written and waited for before the next is started
    /// (`sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`), so that no more than
    /// `step` bytes of this write-back are queued at the device at once. It makes
    /// nothing durable by itself (no device flush, no metadata): a journal checkpoint
    /// calls it before its `fdatasync`, which then has little left to write, so the
    /// sync journal's flushes that run meanwhile wait behind one window instead of the
    /// whole burst (RocksDB's `bytes_per_sync` paces its files for the same reason).
    pub(crate) fn write_back_paced(file: &File, off: u64, len: u64, step: u64) -> Result<()> {
        let step = step.max(PAGE);
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        let mut at = off;
        while at < off + len {
            let n = step.min(off + len - at);
            sync_range(file, at, n, flags)
                .map_err(|e| Error::io("writing back pool pages (journal checkpoint)", e))?;
            at += n;
        }
        Ok(())
    }

    /// Borrows `len` bytes at `off`.
    ///
    /// The caller must only read published bytes (module invariant); the borrow lives
    /// as long as `self`, and the engine's reclamation keeps chunks alive while read.
    pub fn read(&self, off: u64, len: u64) -> Result<&[u8]> {
        self.check(off, len)?;
        // SAFETY: bounds checked; the mapping lives as long as `self`; the bytes are
        // not written while borrowed (module invariant).
        Ok(unsafe { std::slice::from_raw_parts(self.base.add(usize_from(off)), usize_from(len)) })
    }

    /// Hints that `[off, off+len)` is about to be read: asks the CPU to load its cache
    /// lines (a range scan before it reads separated values, whose records lie in write
    /// order, not key order). Ranges outside the pool are ignored.
    pub fn prefetch(&self, off: u64, len: u64) {
        if self.check(off, len).is_err() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            let mut line = off & !(LINE - 1);
            while line < off + len {
                let p = self.base.wrapping_add(usize_from(line));
                // SAFETY: a prefetch reads nothing architecturally and never faults;
                // `p` lies inside the mapping (bounds checked above).
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        p.cast_const().cast::<i8>(),
                    );
                }
                line += LINE;
            }
        }
    }

    /// Starts write-back of `[off, off+len)`; durable after the next [`Mem::fence`]
    /// on the same `set`.
    pub fn write_back(&self, set: &mut WritebackSet, off: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = off.saturating_add(len).min(self.len);
        match self.backend {
            Backend::Dax => {
                let mut line = off & !(LINE - 1);
                while line < end {
                    // SAFETY: `line` lies inside the mapping (clamped to `len`).
                    unsafe { write_back_line(self.insn, self.base.add(usize_from(line))) };
                    line += LINE;
                }
            }
            Backend::Msync => set.add(off & !(PAGE - 1), end.div_ceil(PAGE) * PAGE),
            Backend::Sim => set.add(off & !(LINE - 1), end.div_ceil(LINE) * LINE),
            Backend::Private => {}
        }
    }

    /// Makes every range written back through `set` durable.
    pub fn fence(&self, set: &mut WritebackSet) -> Result<()> {
        match self.backend {
            Backend::Dax => {
                set.take();
                sfence();
                Ok(())
            }
            Backend::Msync => {
                for (start, end) in set.take() {
                    let end = end.min(self.len);
                    // SAFETY: page-aligned range inside the mapping.
                    let rc = unsafe {
                        libc::msync(
                            self.base.add(usize_from(start)).cast(),
                            usize_from(end - start),
                            libc::MS_SYNC,
                        )
                    };
                    if rc != 0 {
                        return Err(Error::io(
                            "msync of the pool",
                            std::io::Error::last_os_error(),
                        ));
                    }
                }
                Ok(())
            }
            Backend::Sim => match &self.sim {
                Some(sim) => {
                    sim.fence(&set.take());
                    Ok(())
                }
                None => Ok(()),
            },
            Backend::Private => {
                set.take();
                Ok(())
            }
        }
    }

    /// Makes a log's ranges written back through `set` durable: [`Mem::fence`], or
    /// with [`LogIo::fdatasync`] (`Options::log_fdatasync`) on the `Msync` backend one `fdatasync` of
    /// the pool file (which also writes back what else is dirty in it; a switch to
    /// measure the two against each other, design.md §10).
    pub fn fence_log(&self, set: &mut WritebackSet) -> Result<()> {
        match (&self.file, self.backend) {
            (Some(f), Backend::Msync) if self.io.fdatasync => {
                if set.take().is_empty() {
                    return Ok(());
                }
                f.sync_data()
                    .map_err(|e| Error::io("fdatasync of the pool", e))
            }
            _ => self.fence(set),
        }
    }

    /// Whether the pool file lies on tmpfs (memory: no device behind it, so nothing
    /// is gained by the sync journal). `false` without a file or if it cannot be told.
    pub(crate) fn on_tmpfs(&self) -> bool {
        self.file.as_ref().is_some_and(is_tmpfs)
    }

    /// Starts write-back of the whole pages of `[off, off + len)` without waiting for it
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a log calls this for bytes it has
    /// finished appending, so that the page cache writes them out a little at a time
    /// instead of all at once inside the fence that ends the segment (a worker's
    /// `msync` of a whole 4 MiB segment stalled it 3–28 ms; docs/benchmarks.md,
    /// session 14). It makes nothing durable and changes no rule: only a fence does.
    /// Only pages that end inside the range are started, so the page still being
    /// appended to is never under write-back. Does nothing unless the pool is a shared
    /// mapping of a file on a block device; an error is left for the fence to report
    /// (the same pages are written back there).
    pub fn start_write_back(&self, off: u64, len: u64) {
        if !self.early_wb || self.check(off, len).is_err() {
            return;
        }
        let (start, end) = (off & !(PAGE - 1), (off + len) & !(PAGE - 1));
        if let (Some(f), true) = (self.file.as_ref(), end > start) {
            let _ = sync_range(f, start, end - start, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    /// A second handle of the pool file (`None` for the simulated and private
    /// backends): the sync journal's checkpoints `fdatasync` it.
    pub(crate) fn file_handle(&self) -> Result<Option<File>> {
        match (&self.file, self.backend) {
            (Some(f), Backend::Msync | Backend::Dax) => f
                .try_clone()
                .map(Some)
                .map_err(|e| Error::io("duplicating the pool file handle", e)),
            _ => Ok(None),
        }
    }

    /// Whether the file system holds written data at `off` (`SEEK_DATA` lands on it),
    /// rather than a hole or an unwritten extent; `None` where that cannot be told (no
    /// file, tmpfs, which counts fallocated pages as data, or an error). Syncs the file
    /// and drops its cached page at `off` first. For tests of pre-written log
    /// segments.
    #[cfg(test)]
    pub(crate) fn has_data_at(&self, off: u64) -> Option<bool> {
        const TMPFS_MAGIC: libc::__fsword_t = 0x0102_1994;
        let fd = self.file.as_ref()?.as_raw_fd();
        // SAFETY: `statfs` is plain old data; zeroes are a valid value of it.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: plain syscall on a valid fd into a correctly sized struct.
        if unsafe { libc::fstatfs(fd, &raw mut st) } != 0 || st.f_type == TMPFS_MAGIC {
            return None;
        }
        let o = libc::off_t::try_from(off).ok()?;
        // Clean pages of an unwritten range (read-ahead of the mapping) count as data
        // too: write back, then drop the page cache there (pages still mapped stay).
        self.file.as_ref()?.sync_data().ok()?;
        // SAFETY: plain syscall on a valid fd; it only drops clean cached pages.
        unsafe { libc::posix_fadvise(fd, o, 4096, libc::POSIX_FADV_DONTNEED) };
        // SAFETY: plain syscall on a valid fd; it only moves the file offset.
        let found = unsafe { libc::lseek(fd, o, libc::SEEK_DATA) };
        if found < 0 {
            // ENXIO: no data from `off` to the end of the file.
            let nxio = std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
            return nxio.then_some(false);
        }
        Some(found == o)
    }

    /// Reserves backing storage for `[off, off+len)` so that a full disk shows up
    /// here, as an error, instead of as a fault when the mapping is first written.
    pub fn reserve(&self, off: u64, len: u64) -> Result<()> {
        self.check(off, len)?;
        if let Some(f) = &self.file {
            let range =
                libc::off_t::try_from(off).and_then(|o| Ok((o, libc::off_t::try_from(len)?)));
            let (o, l) = range.map_err(|_| Error::invalid("pool range beyond off_t"))?;
            // SAFETY: plain syscall on a valid fd; arguments are in range (checked).
            let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), o, l) };
            if rc != 0 {
                return Err(Error::io(
                    format!("reserving {len} bytes of the pool file (disk full?)"),
                    std::io::Error::from_raw_os_error(rc),
                ));
            }
        }
        Ok(())
    }

    /// Returns the backing blocks of `[off, off+len)` to the file system (a hole reads
    /// as zeros). Only for bytes nobody reads or writes any more (freed chunks). File
    /// backends only; a file system that cannot punch holes keeps the blocks, which is
    /// harmless, so this never fails.
    pub fn discard(&self, off: u64, len: u64) {
        let Some(f) = &self.file else {
            return;
        };
        if self.check(off, len).is_err() {
            return;
        }
        let (Ok(o), Ok(l)) = (libc::off_t::try_from(off), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: plain syscall on a valid fd with an in-range byte range; punching a
        // hole in a range no thread touches only drops pages the mapping no longer uses.
        let _ = unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                o,
                l,
            )
        };
    }

    /// Writes, writes back and fences `data` at `off` in one call.
    pub fn persist(&self, off: u64, data: &[u8]) -> Result<()> {
        self.write(off, data)?;
        let mut set = WritebackSet::new();
        self.write_back(&mut set, off, data.len() as u64);
        self.fence(&mut set)
    }

    /// On the simulated device, fails if any line of the range is not yet fenced.
    /// A no-op on real backends (they cannot tell).
    pub fn check_durable(&self, off: u64, len: u64) -> Result<()> {
        match &self.sim {
            Some(sim) if !sim.is_durable(off, len) => Err(Error::Internal(format!(
                "acknowledged range [{off}, +{len}) has unfenced lines"
            ))),
            _ => Ok(()),
        }
    }

    /// Writes back and fences the whole mapping (used at clean shutdown): with a sync
    /// journal, log bytes reach the pool's medium only here or at a checkpoint, so the
    /// simulated device fences every dirty line too.
    pub fn sync_all(&self) -> Result<()> {
        let mut set = WritebackSet::new();
        match (self.backend, &self.sim) {
            (Backend::Msync, _) => set.add(0, self.len),
            (Backend::Sim, Some(sim)) => {
                sim.fence_all();
                return Ok(());
            }
            _ => return Ok(()),
        }
        self.fence(&mut set)
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        if self.sim.is_none() {
            // SAFETY: `base`/`len` came from a successful mmap and nothing borrows the
            // mapping any more (borrows are tied to `&self`).
            unsafe {
                libc::munmap(self.base.cast(), usize_from(self.len));
            }
        }
    }
}

/// How logs reach a file-backed pool (`Backend::Msync`), from `Options::log_pwrite`,
/// `log_prewrite` and `log_fdatasync` (design.md §10). The environment overrides each
/// (read once per process), so that one binary measures every choice side by side
/// (`scripts/bench-sync.sh`): `CASCADE_LOG_WRITE=pwrite|store`,
/// `CASCADE_LOG_PREWRITE=1|0`, `CASCADE_LOG_FENCE=fdatasync|msync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogIo {
    /// Records go in with `pwrite` (default: stores into the mapping; a system call
    /// per record made buffered loads 2.2× slower, 0.27 against 0.59 Mops/s for 2 M
    /// puts on /dev/shm, session 10).
    pub pwrite: bool,
    /// New segments of a syncing store's logs are pre-written (default).
    pub prewrite: bool,
    /// Log fences are one `fdatasync` (default off: `msync` of the ranges).
    pub fdatasync: bool,
}

impl LogIo {
    /// The defaults (`Options::default()`'s).
    pub(crate) const DEFAULT: LogIo = LogIo {
        pwrite: false,
        prewrite: true,
        fdatasync: false,
    };

    /// `self` with the environment's overrides applied.
    #[must_use]
    pub(crate) fn with_env(self) -> LogIo {
        let env = env_overrides();
        LogIo {
            pwrite: env.0.unwrap_or(self.pwrite),
            prewrite: env.1.unwrap_or(self.prewrite),
            fdatasync: env.2.unwrap_or(self.fdatasync),
        }
    }
}

/// `sync_file_range(f, off, len, flags)`: write-back of (some of) the file's pages in the
/// range, as `flags` ask; never makes anything durable by itself.
fn sync_range(f: &File, off: u64, len: u64, flags: libc::c_uint) -> std::io::Result<()> {
    let (Ok(o), Ok(l)) = (libc::off64_t::try_from(off), libc::off64_t::try_from(len)) else {
        return Err(std::io::Error::other("pool range beyond off_t"));
    };
    // SAFETY: plain syscall on a valid fd; it only writes back (and, if asked, waits
    // for) pages this file already holds, whatever the range.
    let rc = unsafe { libc::sync_file_range(f.as_raw_fd(), o, l, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `f` lives on tmpfs (its pages are memory: there is nothing to write back).
fn is_tmpfs(f: &File) -> bool {
    const TMPFS_MAGIC: libc::__fsword_t = 0x0102_1994;
    // SAFETY: `statfs` is plain old data; zeroes are a valid value of it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall on a valid fd into a correctly sized struct.
    let rc = unsafe { libc::fstatfs(f.as_raw_fd(), &raw mut st) };
    rc == 0 && st.f_type == TMPFS_MAGIC
}

/// `CASCADE_LOG_EARLY_WB=0` turns [`Mem::start_write_back`] off (to measure it with one
/// binary); on by default. Read once per process.
fn early_write_back() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("CASCADE_LOG_EARLY_WB").map_or(true, |v| v != "0"))
}

/// The environment's overrides of [`LogIo`], read once per process.
fn env_overrides() -> (Option<bool>, Option<bool>, Option<bool>) {
    static ENV: std::sync::OnceLock<(Option<bool>, Option<bool>, Option<bool>)> =
        std::sync::OnceLock::new();
    *ENV.get_or_init(|| {
        let var = |k: &str, yes: &str, no: &str| match std::env::var(k).ok()?.as_str() {
            v if v == yes => Some(true),
            v if v == no => Some(false),
            _ => None,
        };
        (
            var("CASCADE_LOG_WRITE", "pwrite", "store"),
            var("CASCADE_LOG_PREWRITE", "1", "0"),
            var("CASCADE_LOG_FENCE", "fdatasync", "msync"),
        )
    })
}

/// `len` as a mapping length.
fn map_size(len: u64) -> Result<usize> {
    usize::try_from(len).map_err(|_| Error::invalid("pool larger than address space"))
}

/// Maps `size` bytes of `fd` read-write with `flags`; `None` if the kernel refuses
/// (the reason is in `errno`).
fn mmap(fd: std::os::fd::RawFd, size: usize, flags: libc::c_int) -> Option<*mut u8> {
    // SAFETY: plain mmap call on a caller-owned fd; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    (p != libc::MAP_FAILED).then(|| p.cast::<u8>())
}

#[cfg(target_arch = "x86_64")]
fn detect_flush_insn() -> FlushInsn {
    // CPUID leaf 7, sub-leaf 0: EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT.
    let r = std::arch::x86_64::__cpuid_count(7, 0);
    if r.ebx & (1 << 24) != 0 {
        FlushInsn::Clwb
    } else if r.ebx & (1 << 23) != 0 {
        FlushInsn::ClflushOpt
    } else {
        FlushInsn::Clflush
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_flush_insn() -> FlushInsn {
    FlushInsn::Clflush
}

/// # Safety
/// `p` must point into a live mapping.
#[cfg(target_arch = "x86_64")]
unsafe fn write_back_line(insn: FlushInsn, p: *mut u8) {
    // SAFETY: `p` is a valid address (caller); these instructions only write back a
    // cache line and have no other effect on memory.
    unsafe {
        match insn {
            FlushInsn::Clwb => std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack)),
            FlushInsn::ClflushOpt => {
                std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack));
            }
            FlushInsn::Clflush => std::arch::x86_64::_mm_clflush(p),
        }
    }
}

/// # Safety
/// `p` must point into a live mapping.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn write_back_line(_insn: FlushInsn, _p: *mut u8) {}

fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writeback_set_merges_adjacent_ranges() {
        let mut s = WritebackSet::new();
        s.add(0, 4096);
        s.add(4096, 8192);
        s.add(20000, 24576);
        assert_eq!(s.take(), vec![(0, 8192), (20000, 24576)]);
        assert!(s.take().is_empty());
    }

    #[test]
    fn dax_flush_instructions_execute_on_an_ordinary_mapping() -> Result<()> {
        // No DAX device here: force the DAX backend on a plain shared mapping so the
        // clwb / clflushopt / clflush + sfence path runs (each insn the CPU offers).
        let dir = std::env::temp_dir().join(format!("ckv-dax-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", e))?;
        let path = dir.join("pool");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io("open", e))?;
        f.set_len(1 << 16).map_err(|e| Error::io("set_len", e))?;
        let mut mem = Mem::map_file(f, 1 << 16, false, false)?;
        mem.backend = Backend::Dax;
        let detected = mem.insn;
        for insn in [FlushInsn::Clflush, FlushInsn::ClflushOpt, FlushInsn::Clwb] {
            let supported = match detected {
                FlushInsn::Clwb => true,
                FlushInsn::ClflushOpt => insn != FlushInsn::Clwb,
                FlushInsn::Clflush => insn == FlushInsn::Clflush,
            };
            if !supported {
                continue;
            }
            mem.insn = insn;
            let data = [insn as u8 + 1; 300];
            mem.persist(1000, &data)?;
            assert_eq!(mem.read(1000, 300)?, &data[..]);
        }
        drop(mem);
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
        Ok(())
    }

    /// A fresh pool file of `len` bytes in its own temporary directory.
    fn pool_file(
        tag: &str,
        len: u64,
    ) -> Result<(std::path::PathBuf, std::path::PathBuf, std::fs::File)> {
        let dir = std::env::temp_dir().join(format!("ckv-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", e))?;
        let path = dir.join("pool");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io("open", e))?;
        f.set_len(len).map_err(|e| Error::io("set_len", e))?;
        Ok((dir, path, f))
    }

    #[test]
    fn log_writes_reach_the_mapping_and_the_file() -> Result<()> {
        // `write_log` goes around the mapping (`pwrite`): readers of the mapping must
        // see the bytes at once, and a fence must make them durable in the file.
        let (dir, path, f) = pool_file("wlog", 1 << 20)?;
        let mem = Mem::map_file(f, 1 << 20, false, false)?;
        assert_eq!(mem.backend(), Backend::Msync);
        // A page the mapping has already read (so it is mapped), then a log write.
        assert_eq!(mem.read(8192, 4)?, &[0u8; 4][..]);
        mem.write_log(8190, b"record bytes")?;
        assert_eq!(mem.read(8190, 12)?, b"record bytes");
        // A store and a log write side by side in one page stay distinct.
        mem.write(9000, b"store")?;
        mem.write_log(9005, b"+log")?;
        assert_eq!(mem.read(9000, 9)?, b"store+log");
        let mut set = WritebackSet::new();
        mem.write_back(&mut set, 8190, 1000);
        mem.fence_log(&mut set)?;
        assert!(mem.write_log((1 << 20) - 2, b"abc").is_err());
        // Pre-written zeros over a range that held bytes: zeros read back, and the
        // file has blocks behind the whole range (written, not a hole).
        mem.write_log(65536, &[7u8; 100])?;
        mem.prewrite_zeros(65536, 512 << 10)?;
        assert!(mem.read(65536, 512 << 10)?.iter().all(|b| *b == 0));
        assert!(mem.prewrite_zeros(1 << 20, 1).is_err());
        drop(mem);
        let bytes = std::fs::read(&path).map_err(|e| Error::io("read", e))?;
        assert_eq!(&bytes[8190..8202], b"record bytes");
        assert_eq!(&bytes[9000..9009], b"store+log");
        let blocks = std::fs::metadata(&path)
            .map(|m| std::os::unix::fs::MetadataExt::blocks(&m))
            .map_err(|e| Error::io("stat", e))?;
        assert!(
            blocks * 512 >= 512 << 10,
            "pre-written range has no blocks: {blocks}"
        );
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
        Ok(())
    }

    #[test]
    fn file_mapping_round_trips_and_bounds_checks() -> Result<()> {
        let (dir, path, f) = pool_file("persist", 1 << 16)?;
        let mem = Mem::map_file(f, 1 << 16, true, false)?;
        mem.persist(100, b"hello")?;
        assert_eq!(mem.read(100, 5)?, b"hello");
        assert!(mem.write((1 << 16) - 2, b"abc").is_err());
        assert!(mem.read(u64::MAX, 1).is_err());
        drop(mem);
        let bytes = std::fs::read(&path).map_err(|e| Error::io("read", e))?;
        assert_eq!(&bytes[100..105], b"hello");
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
        Ok(())
    }
}
