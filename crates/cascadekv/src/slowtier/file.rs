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
//! with `O_DIRECT`, which [`SlowFile::read_point_into`] reads through (`direct.rs`).
//! Merges, scans and checks keep buffered reads.
//!
//! Thread-safety: reads use positional I/O (`pread`) and take no lock; `live` is
//! atomic. Only the writer thread that created a file appends to it, before `seal`.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::direct::{direct_read, open_direct};
use crate::error::{Error, Result};

/// File name suffix of a sealed slow-tier table file.
const SUFFIX: &str = ".sst";
/// Suffix of a file still being written.
pub(super) const TMP_SUFFIX: &str = ".sst.tmp";

/// The name of file `number` in the slow directory.
#[must_use]
pub fn file_name(number: u64) -> String {
    format!("{number:012}{SUFFIX}")
}

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
pub(crate) mod tests {
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
