//! Where the sync journal's bytes go: a file written with `O_DIRECT` (without the page
//! cache, so many writes are in flight at once and none waits for another file's
//! write-back; durable after a [`JournalIo::flush`] that begins after it, or at once
//! with `O_DSYNC`), or the simulated
//! device's journal (`SimDevice::journal_write`, durable at once, a fence for the
//! crash-image hook). Also how a checkpoint makes the pool durable: `fdatasync` of the
//! pool file (it covers stores into the shared mapping, which the kernel tracks as dirty
//! pages of the file), or every dirty line of the simulated device.
//!
//! Invariants: every file write is whole 4 KiB units at a 4 KiB-aligned offset from a
//! 4 KiB-aligned buffer (what `O_DIRECT` requires); a file system that refuses
//! `O_DIRECT` gets `O_DSYNC` writes through the page cache instead (same durability,
//! measured slower). No shared state: the file is used through positioned calls.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use super::format::ALIGN;
use crate::coding::usize_from;
use crate::error::{Error, Result};
use crate::pmem::SimDevice;

/// A byte buffer whose usable part starts at a 4 KiB-aligned address.
pub(crate) struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes (a multiple of 4 KiB) at an aligned address.
    pub(crate) fn zeroed(len: usize) -> AlignedBuf {
        let raw = vec![0u8; len + usize_from(ALIGN)];
        let start = raw.as_ptr().align_offset(usize_from(ALIGN));
        AlignedBuf { raw, start, len }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

/// The journal's backing store.
#[derive(Debug)]
pub(crate) enum JournalIo {
    /// The journal file (`direct`: opened with `O_DIRECT`; `dsync`: with `O_DSYNC`, so
    /// each write is durable when it returns; without it a write needs a
    /// [`JournalIo::flush`] that begins after it, which the journal shares between
    /// writers).
    File {
        file: File,
        direct: bool,
        dsync: bool,
    },
    /// The simulated device's journal.
    Sim(Arc<SimDevice>),
}

impl JournalIo {
    /// Opens `path` for durable writes with `O_DIRECT` (plain buffered writes where the
    /// file system refuses it), and `O_DSYNC` if `dsync`; creates it if `create`.
    pub(crate) fn open_file(path: &Path, create: bool, dsync: bool) -> Result<JournalIo> {
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true).create(create).truncate(false);
            let flags =
                if dsync { libc::O_DSYNC } else { 0 } | if direct { libc::O_DIRECT } else { 0 };
            o.custom_flags(flags).open(path)
        };
        match open(true) {
            Ok(file) => Ok(JournalIo::File {
                file,
                direct: true,
                dsync,
            }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open(false)
                .map(|file| JournalIo::File {
                    file,
                    direct: false,
                    dsync,
                })
                .map_err(|e| Error::io(format!("opening {}", path.display()), e)),
            Err(e) => Err(Error::io(format!("opening {}", path.display()), e)),
        }
    }

    /// Whether a write is durable only after a [`JournalIo::flush`] that begins after
    /// it (a file opened without `O_DSYNC`).
    pub(crate) fn needs_flush(&self) -> bool {
        matches!(self, JournalIo::File { dsync: false, .. })
    }

    /// Makes every write that completed before this call durable (`fdatasync`: on
    /// blocks written before, with no size change, it is the device's cache flush).
    pub(crate) fn flush(&self) -> Result<()> {
        match self {
            JournalIo::File { file, .. } => file
                .sync_data()
                .map_err(|e| Error::io("flushing the sync journal", e)),
            JournalIo::Sim(_) => Ok(()),
        }
    }

    /// Opens `path` read-only (redo into a private mapping: `cascade verify`).
    pub(crate) fn open_read(path: &Path) -> Result<JournalIo> {
        File::open(path)
            .map(|file| JournalIo::File {
                file,
                direct: false,
                dsync: false,
            })
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))
    }

    /// Writes `buf` at `off`; durable when it returns if `O_DSYNC` (or simulated),
    /// else after the next [`JournalIo::flush`].
    pub(crate) fn write_at(&self, off: u64, buf: &AlignedBuf) -> Result<()> {
        match self {
            JournalIo::File { file, .. } => file
                .write_all_at(buf.as_slice(), off)
                .map_err(|e| Error::io(format!("writing the sync journal at {off}"), e)),
            JournalIo::Sim(dev) => {
                dev.journal_write(off, buf.as_slice());
                Ok(())
            }
        }
    }

    /// The whole journal file.
    pub(crate) fn read_all(&self, len: u64) -> Result<Vec<u8>> {
        match self {
            JournalIo::File { file, .. } => {
                let mut buf = AlignedBuf::zeroed(usize_from(len.div_ceil(ALIGN) * ALIGN));
                let want = usize_from(len);
                let mut got = 0usize;
                while got < want {
                    let n = file
                        .read_at(&mut buf.as_mut_slice()[got..], got as u64)
                        .map_err(|e| Error::io("reading the sync journal", e))?;
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
                Ok(buf.as_slice()[..got.min(want)].to_vec())
            }
            JournalIo::Sim(dev) => Ok(dev.journal()),
        }
    }

    /// Fills `[0, len)` with zeros, written (not a hole, not an unwritten extent: later
    /// `O_DIRECT` writes then carry data only, no extent conversion), then sizes the
    /// file to `len`; durable when it returns.
    pub(crate) fn prewrite(&self, len: u64) -> Result<()> {
        const STEP: u64 = 1 << 20;
        let JournalIo::File { file, .. } = self else {
            return Ok(());
        };
        file.set_len(len)
            .map_err(|e| Error::io("sizing the sync journal", e))?;
        let zeros = AlignedBuf::zeroed(usize_from(STEP));
        let mut at = 0;
        while at < len {
            let n = STEP.min(len - at);
            file.write_all_at(&zeros.as_slice()[..usize_from(n)], at)
                .map_err(|e| Error::io("pre-writing the sync journal", e))?;
            at += n;
        }
        self.flush()
    }

    /// Whether writes bypass the page cache (`O_DIRECT`).
    pub(crate) fn direct(&self) -> bool {
        matches!(self, JournalIo::File { direct: true, .. })
    }
}

/// How a journal checkpoint makes the pool durable.
#[derive(Debug)]
pub(crate) enum PoolSync {
    /// `fdatasync` of the pool file.
    File(File),
    /// Every dirty line of the simulated device.
    Sim(Arc<SimDevice>),
}

impl PoolSync {
    /// Writes back the pool's dirty pages in `ranges` (pool offset, length), a window
    /// of `step` bytes at a time (`Mem::write_back_paced`); durable only after
    /// [`PoolSync::sync`]. The simulated device has nothing to write back.
    pub(crate) fn write_back(&self, ranges: &[(u64, u64)], step: u64) -> Result<()> {
        match self {
            PoolSync::File(f) => {
                for &(off, len) in ranges {
                    crate::pmem::persist::Mem::write_back_paced(f, off, len, step)?;
                }
                Ok(())
            }
            PoolSync::Sim(_) => Ok(()),
        }
    }

    /// Makes every byte written into the pool so far durable.
    pub(crate) fn sync(&self) -> Result<()> {
        match self {
            PoolSync::File(f) => f
                .sync_data()
                .map_err(|e| Error::io("fdatasync of the pool (journal checkpoint)", e)),
            PoolSync::Sim(dev) => {
                dev.fence_all();
                Ok(())
            }
        }
    }
}
