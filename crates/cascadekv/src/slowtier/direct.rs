//! Direct (`O_DIRECT`) reads of slow-tier files, for gets (`Options::slow_direct_reads`).
//!
//! Why: with the page cache, a slow-tier read on a host with spare memory is a memory
//! copy, so a benchmark cannot tell the fast tier from the slow one (issue #15,
//! docs/benchmarks.md session 5); with direct reads each get's read costs what the
//! device costs, as RocksDB's `use_direct_reads` does. Merges, scans and checks keep
//! buffered reads: the kernel's read-ahead serves their sequential passes.
//!
//! How: `O_DIRECT` wants the file offset, the length and the buffer address aligned
//! to the device's logical block. A read takes the 4 KiB-aligned window around the
//! wanted range into an aligned part of the caller's `Vec` (found with
//! `align_offset`, so no allocation with a custom layout and no `unsafe`) and
//! returns the wanted bytes inside it.
//!
//! Why it is safe to mix with buffered writes: a slow-tier file is written once and
//! `fsync`ed at seal, before a manifest edit names it (`file.rs`), so no dirty
//! page-cache copy is ever newer than what the device returns. Every read is then
//! verified as a buffered one is (block or blob checksum).
//!
//! Thread-safety: free functions over a shared `File` (positional reads, no lock).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use super::file::TMP_SUFFIX;
use crate::error::{Error, Result};

/// Alignment of direct reads: offset, length and buffer address (a multiple of
/// every logical block size Linux file systems use).
const DIRECT_ALIGN: usize = 4096;

/// Opens `path` for reading with `O_DIRECT`.
pub(super) fn open_direct(path: &Path) -> Result<File> {
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
pub(super) fn direct_read<'b>(
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;
    use crate::slowtier::file::tests::TestDir;
    use crate::slowtier::file::{SlowFile, SlowIo};

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
}
