//! One slow-tier table file (LightKV §III-E's "CS file"): a sequence of Logical Sorted
//! Tables (formats.md §6, with the slow tier's block unit) written once, front to
//! back, then never changed; and the directory that holds such files.
//!
//! Life of a file (formats.md §13):
//! 1. [`SlowFile::create`] opens `NNNNNNNNNNNN.sst.tmp` in the slow directory; the run
//!    writer appends tables to it with plain sequential `write`s.
//! 2. [`SlowFile::seal`] `fsync`s it, renames it to `NNNNNNNNNNNN.sst` and `fsync`s the
//!    directory. Only then may a manifest edit name the file.
//! 3. Readers `pread` blocks from it for as long as some `Lst` holds the `Arc`.
//! 4. Each table in the file counts once in `live` while the manifest names it.
//!    When the last `Arc` goes and `live` is 0 (every table obsolete after a durable
//!    edit, or never published), the file is unlinked. At close `live` is above 0 and
//!    the file stays.
//! 5. [`sweep_orphans`] at open removes every `.sst` the manifest does not name and
//!    every `.tmp`: files of a job that crashed before its edit, or unlinks a crash
//!    lost.
//!
//! Point reads (a get's data block or blob) may bypass the page cache
//! (`Options::slow_direct_reads`): each file then has a second descriptor opened
//! with `O_DIRECT`, and [`SlowFile::read_point_into`] reads the 4 KiB-aligned window
//! around the range into an aligned part of the caller's buffer. Merges, scans and
//! checks keep buffered reads (the kernel's read-ahead serves their sequential
//! passes). Why: with the page cache a slow-tier read on a host with spare memory
//! is a memory copy, so a benchmark cannot tell a fast tier from a slow one (issue
//! #15); with direct reads each costs what the device costs, as RocksDB's
//! `use_direct_reads` does. Writes stay buffered and are `fsync`ed at `seal`, before
//! any table in the file can be read, so a direct read never misses written bytes.
//!
//! Thread-safety: reads use positional I/O (`pread`) and take no lock; `live` is
//! atomic. Only the writer thread that created a file appends to it, before `seal`.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// File name suffix of a sealed slow-tier table file.
const SUFFIX: &str = ".sst";
/// Suffix of a file still being written.
const TMP_SUFFIX: &str = ".sst.tmp";

/// The name of file `number` in the slow directory.
#[must_use]
pub fn file_name(number: u64) -> String {
    format!("{number:012}{SUFFIX}")
}

/// Alignment of direct reads: offset, length and buffer address (a multiple of
/// every logical block size Linux file systems use).
const DIRECT_ALIGN: usize = 4096;

/// Reads of a store's slow-tier files (shared by all of them; relaxed atomics), and
/// how point reads are made (fixed when the store opens).
#[derive(Debug, Default)]
pub struct SlowIo {
    /// `pread` calls.
    pub reads: AtomicU64,
    /// Bytes they read.
    pub read_bytes: AtomicU64,
    /// Point reads (a get's block or blob), however made.
    pub point_reads: AtomicU64,
    /// Of those, reads that bypassed the page cache (`O_DIRECT`).
    pub direct_reads: AtomicU64,
    /// Point reads go through an `O_DIRECT` descriptor (`Options::slow_direct_reads`).
    pub direct: bool,
}

impl SlowIo {
    /// Counters for a store whose point reads bypass the page cache if `direct`.
    #[must_use]
    pub fn new(direct: bool) -> Self {
        SlowIo {
            direct,
            ..SlowIo::default()
        }
    }
}

/// Opens `path` for reading with `O_DIRECT`.
fn open_direct(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                Error::InvalidArgument(format!(
                    "slow_direct_reads: the file system of {} does not support O_DIRECT",
                    path.parent().unwrap_or(path).display()
                ))
            } else {
                Error::io(format!("opening {} with O_DIRECT", path.display()), e)
            }
        })
}

/// Checks that direct reads work in `dir` (at open, so that an unsupported file
/// system is a clear error then and not a failed demotion later).
///
/// # Errors
/// `InvalidArgument` if the file system refuses `O_DIRECT`; `Io` otherwise.
pub fn check_direct(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating slow directory {}", dir.display()), e))?;
    let probe = dir.join(format!("direct-probe{TMP_SUFFIX}"));
    std::fs::write(&probe, [0u8; DIRECT_ALIGN])
        .map_err(|e| Error::io(format!("writing {}", probe.display()), e))?;
    let r = open_direct(&probe).and_then(|f| {
        let mut buf = Vec::new();
        direct_read(&f, &probe, 0, 16, &mut buf).map(|_| ())
    });
    let _ = std::fs::remove_file(&probe);
    r
}

/// Reads `len` bytes at `off` of `f` (opened with `O_DIRECT`) through the aligned
/// window that covers them, placed at an aligned address inside `buf`.
fn direct_read<'b>(
    f: &File,
    path: &Path,
    off: u64,
    len: usize,
    buf: &'b mut Vec<u8>,
) -> Result<&'b [u8]> {
    let a = DIRECT_ALIGN as u64;
    let start = off & !(a - 1);
    let head = usize::try_from(off - start).unwrap_or(0);
    let need = head + len;
    let span = need.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    buf.clear();
    buf.resize(span + DIRECT_ALIGN, 0);
    let skip = buf.as_ptr().align_offset(DIRECT_ALIGN);
    if skip >= DIRECT_ALIGN {
        return Err(Error::Internal("cannot align a direct-read buffer".into()));
    }
    let win = &mut buf[skip..skip + span];
    let mut got = 0;
    // A read that reaches the end of the file returns short; the next offset would
    // then be unaligned, so stop there.
    while got < need {
        match f.read_at(&mut win[got..], start + got as u64) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got % DIRECT_ALIGN != 0 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(Error::io(
                    format!("reading {} (O_DIRECT)", path.display()),
                    e,
                ))
            }
        }
    }
    if got < need {
        return Err(Error::corruption(
            path,
            off,
            "slow-tier table runs past the end of its file (truncated)",
        ));
    }
    Ok(&buf[skip + head..skip + need])
}

/// A slow-tier table file.
#[derive(Debug)]
pub struct SlowFile {
    number: u64,
    path: PathBuf,
    file: File,
    /// Live tables in the file (named by the manifest, or placed and not yet obsolete).
    live: AtomicUsize,
    /// Bytes written so far (the writer's append position).
    len: AtomicU64,
    /// Sealed (renamed to its final name): a file dropped before that is a temporary.
    sealed: AtomicBool,
    /// Its last live table became obsolete: the file goes when the last `Arc` does.
    retired: AtomicBool,
    /// The store's read counters.
    io: Arc<SlowIo>,
    /// The same file opened with `O_DIRECT`, when `io.direct` (point reads).
    direct: Option<File>,
}

impl SlowFile {
    /// Creates the temporary file of number `number` in `dir`.
    ///
    /// # Errors
    /// `Io` if the file cannot be created.
    pub fn create(dir: &Path, number: u64, io: Arc<SlowIo>) -> Result<Self> {
        let path = dir.join(format!("{number:012}{TMP_SUFFIX}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        // Opened now (the descriptor follows the file through `seal`'s rename).
        let direct = if io.direct {
            Some(open_direct(&path)?)
        } else {
            None
        };
        Ok(SlowFile {
            number,
            path,
            file,
            live: AtomicUsize::new(0),
            len: AtomicU64::new(0),
            sealed: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            io,
            direct,
        })
    }

    /// Opens sealed file `number` of `dir` (recovery); `Corruption` if it is missing.
    ///
    /// # Errors
    /// `Corruption` for a file the manifest names that is missing; `Io` otherwise.
    pub fn open(dir: &Path, number: u64, io: Arc<SlowIo>) -> Result<Self> {
        let path = dir.join(file_name(number));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::corruption(
                    &path,
                    0,
                    "the manifest names this slow-tier file but it is missing (wrong slow_dir?)",
                ))
            }
            Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading the size of {}", path.display()), e))?
            .len();
        let direct = if io.direct {
            Some(open_direct(&path)?)
        } else {
            None
        };
        Ok(SlowFile {
            number,
            path,
            file,
            live: AtomicUsize::new(0),
            len: AtomicU64::new(len),
            sealed: AtomicBool::new(true),
            retired: AtomicBool::new(false),
            io,
            direct,
        })
    }

    /// The file number (its name).
    #[must_use]
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// Appends `bytes`; returns the offset they start at. Only the creating writer
    /// calls it, before [`SlowFile::seal`].
    ///
    /// # Errors
    /// `Io` (a full disk is `ENOSPC` here).
    pub fn append(&self, bytes: &[u8]) -> Result<u64> {
        let at = self.size();
        (&self.file)
            .write_all(bytes)
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.len.store(at + bytes.len() as u64, Ordering::Release);
        Ok(at)
    }

    /// Makes the file durable under its final name: fsync, rename, fsync the directory.
    ///
    /// # Errors
    /// `Io` from any of the three steps (the temporary is then removed when dropped).
    pub fn seal(&mut self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| Error::io(format!("syncing {}", self.path.display()), e))?;
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| Error::Internal("slow-tier file without a directory".into()))?;
        let to = dir.join(file_name(self.number));
        std::fs::rename(&self.path, &to)
            .map_err(|e| Error::io(format!("renaming {}", self.path.display()), e))?;
        self.path = to;
        self.sealed.store(true, Ordering::Release);
        sync_dir(&dir)
    }

    /// Reads `len` bytes at `off` into `buf` (resized to `len`).
    ///
    /// # Errors
    /// `Corruption` if the range runs past the end of the file (a truncated file);
    /// `Io` for a failed read.
    pub fn read_into<'b>(&self, off: u64, len: usize, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
        buf.resize(len, 0);
        match self.file.read_exact_at(buf, off) {
            Ok(()) => {
                self.io.reads.fetch_add(1, Ordering::Relaxed);
                self.io.read_bytes.fetch_add(len as u64, Ordering::Relaxed);
                Ok(buf)
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::corruption(
                &self.path,
                off,
                "slow-tier table runs past the end of its file (truncated)",
            )),
            Err(e) => Err(Error::io(format!("reading {}", self.path.display()), e)),
        }
    }

    /// True if point reads bypass the page cache.
    #[must_use]
    pub fn reads_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Like [`SlowFile::read_into`], for a point read: through the `O_DIRECT`
    /// descriptor when the store reads the slow tier directly (module doc).
    ///
    /// # Errors
    /// As [`SlowFile::read_into`].
    pub fn read_point_into<'b>(
        &self,
        off: u64,
        len: usize,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        self.io.point_reads.fetch_add(1, Ordering::Relaxed);
        let Some(d) = &self.direct else {
            return self.read_into(off, len, buf);
        };
        let out = direct_read(d, &self.path, off, len, buf)?;
        self.io.reads.fetch_add(1, Ordering::Relaxed);
        self.io.direct_reads.fetch_add(1, Ordering::Relaxed);
        self.io.read_bytes.fetch_add(len as u64, Ordering::Relaxed);
        Ok(out)
    }

    /// One more live table in the file.
    pub fn add_live(&self) {
        self.live.fetch_add(1, Ordering::AcqRel);
    }

    /// One table fewer (it became obsolete); the last one retires the file.
    pub fn sub_live(&self) {
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.retired.store(true, Ordering::Release);
        }
    }
}

impl Drop for SlowFile {
    fn drop(&mut self) {
        // A recovered file that never got a live table (an open that failed) stays.
        let retired =
            self.retired.load(Ordering::Acquire) && self.live.load(Ordering::Acquire) == 0;
        if retired || !self.sealed.load(Ordering::Acquire) {
            // Best effort: a file left behind is an orphan the next open removes.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `fsync`s directory `dir` (makes creations, renames and unlinks in it durable).
///
/// # Errors
/// `Io`.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}

/// Creates the slow directory if needed and removes every table file in it that is
/// not in `live` (by number) and every temporary. Returns how many files it removed.
///
/// # Errors
/// `Io` if the directory cannot be created, listed or cleaned.
pub fn sweep_orphans(dir: &Path, live: &HashSet<u64>) -> Result<usize> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating slow directory {}", dir.display()), e))?;
    let mut removed = 0;
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("listing slow directory {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let orphan = if name.ends_with(TMP_SUFFIX) {
            true
        } else if let Some(stem) = name.strip_suffix(SUFFIX) {
            stem.parse::<u64>().is_ok_and(|n| !live.contains(&n))
        } else {
            false
        };
        if orphan {
            std::fs::remove_file(entry.path())
                .map_err(|e| Error::io(format!("removing orphan {name}"), e))?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test (removed when the guard drops).
    pub(crate) struct TestDir(pub PathBuf);
    impl TestDir {
        pub(crate) fn new(name: &str) -> Self {
            let d = std::env::temp_dir().join(format!("ckv-slow-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            // A failure shows as the test's first file error.
            let _ = std::fs::create_dir_all(&d);
            TestDir(d)
        }
        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sealed_files_survive_close_and_obsolete_ones_go() -> Result<()> {
        let d = TestDir::new("seal");
        let mut f = SlowFile::create(d.path(), 7, Arc::default())?;
        assert_eq!(f.append(b"hello")?, 0);
        assert_eq!(f.append(b" world")?, 5);
        f.seal()?;
        f.add_live();
        let mut buf = Vec::new();
        assert_eq!(f.read_into(6, 5, &mut buf)?, b"world");
        assert!(f
            .read_into(8, 5, &mut buf)
            .is_err_and(|e| e.is_corruption()));
        drop(f);
        // Live at drop (a close): the file stays and reopens.
        let g = SlowFile::open(d.path(), 7, Arc::default())?;
        assert_eq!(g.size(), 11);
        // Never live (an open that failed later): stays.
        drop(g);
        let g = SlowFile::open(d.path(), 7, Arc::default())?;
        g.add_live();
        g.sub_live();
        // Obsolete at drop: unlinked.
        drop(g);
        assert!(!d.path().join(file_name(7)).exists());
        assert!(SlowFile::open(d.path(), 7, Arc::default()).is_err_and(|e| e.is_corruption()));
        Ok(())
    }

    #[test]
    fn direct_point_reads_return_the_bytes_written() -> Result<()> {
        // Under the target directory, not /tmp, which may be a tmpfs (no O_DIRECT before Linux 6.6).
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
        let d = TestDir(base.join(format!("ckv-slow-direct-{}", std::process::id())));
        let _ = std::fs::create_dir_all(d.path());
        if check_direct(d.path()).is_err() {
            eprintln!("skipped: no O_DIRECT under {}", d.path().display());
            return Ok(());
        }
        let io = Arc::new(SlowIo::new(true));
        let mut f = SlowFile::create(d.path(), 9, io.clone())?;
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.append(&bytes)?;
        f.seal()?;
        f.add_live();
        let mut buf = Vec::new();
        for (off, len) in [
            (0, 1),
            (5, 4096),
            (4095, 2),
            (4096, 4096),
            (9_000, 1_000),
            (1, 9_999),
        ] {
            assert_eq!(
                f.read_point_into(off as u64, len, &mut buf)?,
                &bytes[off..off + len]
            );
        }
        assert_eq!(io.direct_reads.load(Ordering::Relaxed), 6);
        // Past the end: the truncation error of a buffered read.
        assert!(f
            .read_point_into(9_990, 20, &mut buf)
            .is_err_and(|e| e.is_corruption()));
        drop(f);
        let g = SlowFile::open(d.path(), 9, io)?;
        assert_eq!(g.read_point_into(4097, 3, &mut buf)?, &bytes[4097..4100]);
        g.add_live();
        Ok(())
    }

    #[test]
    fn orphans_and_temporaries_are_swept() -> Result<()> {
        let d = TestDir::new("orphans");
        for n in [1u64, 2, 3] {
            let mut f = SlowFile::create(d.path(), n, Arc::default())?;
            f.append(b"x")?;
            f.seal()?;
            f.add_live();
        }
        let t = SlowFile::create(d.path(), 4, Arc::default())?;
        t.add_live();
        std::mem::forget(t);
        std::fs::write(d.path().join("notes.txt"), b"keep").map_err(|e| Error::io("w", e))?;
        let live: HashSet<u64> = [2].into_iter().collect();
        assert_eq!(sweep_orphans(d.path(), &live)?, 3);
        assert!(d.path().join(file_name(2)).exists());
        assert!(d.path().join("notes.txt").exists());
        assert!(!d.path().join(file_name(1)).exists());
        Ok(())
    }
}
