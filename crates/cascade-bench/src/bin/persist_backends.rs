//! How fast can a small write be made durable on this machine's block storage?
//! (issue #12: choose the persistence backend for pool files on ordinary disks by
//! measurement.)
//!
//! Each thread appends `--size`-byte records to its own 1 MiB region of one file and
//! makes each durable before the next, the way a `Durability::Sync` writer does, with:
//!
//! * `msync`          — shared mapping; `msync(MS_SYNC)` of the page written (today's backend);
//! * `mmap-fdatasync` — shared mapping; `fdatasync` of the whole file;
//! * `pwrite-fdatasync` — `pwrite` of the record, then `fdatasync`;
//! * `pwrite-msync`   — `pwrite` of the record (no page fault), then `msync` of its page
//!   through the shared mapping (reads keep using the mapping);
//! * `pwrite-dsync`   — `pwrite` on an `O_DSYNC` descriptor;
//! * `odirect`        — `pwrite` of the 4 KiB block holding the record through
//!   `O_DIRECT | O_DSYNC` (the block is rewritten as the record grows);
//! * `group-fdatasync` — the record is written through the mapping, then a *group
//!   commit*: the first thread to arrive persists with one `fdatasync` for everyone
//!   who wrote before it started, the others wait for it (what horizontal batching
//!   does for the whole engine);
//! * `group-pwrite`   — the same group commit after a `pwrite` of the record;
//! * `odirect-fdatasync` — the block through `O_DIRECT` alone, then `fdatasync`: what
//!   the sync journal (`pmem/journal`) does for one writer;
//! * `group-odirect`  — the block through `O_DIRECT`, then the group commit (the
//!   journal's shared flushes, one at a time);
//! * `uring-linked`   — `io_uring` (issue #30 item 1 asks whether it beats threads):
//!   the `O_DIRECT` block write and an `fdatasync` linked (`IOSQE_IO_LINK`) in one
//!   submission per record, one ring per thread;
//! * `uring-split`    — the same two operations through the ring, each waited for.
//! * `append-fdatasync` — the record appended (`write` on an `O_APPEND` descriptor) to a
//!   file of the thread's own that starts empty, then `fdatasync`: the peers' logs
//!   (Redis's AOF; RocksDB's WAL without `recycle_log_file_num`), where each append
//!   grows the file, so each flush also carries its new size;
//! * `append-falloc-fdatasync` — the same into a file first given its blocks with
//!   `fallocate(FALLOC_FL_KEEP_SIZE)`, as RocksDB preallocates its WAL
//!   (`allow_fallocate`): the size still grows per append, and each block is written
//!   into an unwritten extent.
//!
//! Usage: `persist_backends [--dir DIR] [--threads 1,2,8,32] [--ops N] [--size B]
//! [--modes a,b] [--prealloc written|fallocate]`; prints one Markdown row per mode and
//! thread count: ops/s, p50, p99. `--prealloc` says how the file's blocks are set up
//! first: written with zeros (default) or only allocated (`posix_fallocate`, as the
//! engine's pool chunks are).

#![deny(
    clippy::unwrap_used,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc,
    clippy::todo,
    clippy::unimplemented,
    clippy::dbg_macro
)]
#![warn(clippy::pedantic)]
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss,
    reason = "latency percentiles and rates of a benchmark"
)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Instant;

const REGION: u64 = 1 << 20;
const PAGE: usize = 4096;

struct Args {
    dir: PathBuf,
    threads: Vec<usize>,
    ops: usize,
    size: usize,
    modes: Vec<String>,
    /// `written` (zeros written first: every block written) or `fallocate`
    /// (allocated, never written — what the engine's pool chunks are).
    prealloc: String,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        dir: PathBuf::from("./persist-bench"),
        threads: vec![1, 2, 8, 32],
        ops: 2000,
        size: 128,
        modes: [
            "msync",
            "mmap-fdatasync",
            "pwrite-fdatasync",
            "pwrite-msync",
            "pwrite-dsync",
            "odirect",
            "group-fdatasync",
            "group-pwrite",
            "odirect-fdatasync",
            "append-fdatasync",
            "append-falloc-fdatasync",
        ]
        .map(String::from)
        .to_vec(),
        prealloc: "written".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().ok_or(format!("{k} needs a value"))?;
        match k.as_str() {
            "--dir" => a.dir = PathBuf::from(v),
            "--threads" => {
                a.threads = v
                    .split(',')
                    .map(|t| t.parse().map_err(|e| format!("--threads: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--ops" => a.ops = v.parse().map_err(|e| format!("--ops: {e}"))?,
            "--size" => a.size = v.parse().map_err(|e| format!("--size: {e}"))?,
            "--modes" => a.modes = v.split(',').map(String::from).collect(),
            "--prealloc" if v == "written" || v == "fallocate" => a.prealloc = v,
            "--prealloc" => return Err(format!("--prealloc {v}: use written or fallocate")),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// A shared mapping of the file (unmapped on drop).
struct Map {
    base: *mut u8,
    len: usize,
}

// SAFETY: each thread writes only its own region of the mapping.
unsafe impl Send for Map {}
// SAFETY: as above.
unsafe impl Sync for Map {}

impl Map {
    fn new(f: &File, len: usize) -> Result<Map, String> {
        // SAFETY: plain mmap call on a valid fd; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Ok(Map {
            base: p.cast(),
            len,
        })
    }

    fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: in bounds (checked); this thread owns the region (see `Sync`).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(off), data.len()) };
    }

    fn msync(&self, off: usize, len: usize) -> std::io::Result<()> {
        let start = off / PAGE * PAGE;
        let end = (off + len).div_ceil(PAGE) * PAGE;
        // SAFETY: page-aligned range inside the mapping.
        let rc = unsafe { libc::msync(self.base.add(start).cast(), end - start, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping came from mmap with this length.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Group commit: a persist covers every write whose ticket was taken before it began.
#[derive(Default)]
struct Group {
    state: Mutex<(u64, u64, bool)>, // (next ticket, durable up to, a persist is running)
    cv: Condvar,
}

impl Group {
    fn commit(&self, f: &File) -> std::io::Result<()> {
        let mut st = self
            .state
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        st.0 += 1;
        let mine = st.0;
        loop {
            if st.1 >= mine {
                return Ok(());
            }
            if !st.2 {
                st.2 = true;
                let upto = st.0;
                drop(st);
                let r = f.sync_data();
                st = self
                    .state
                    .lock()
                    .map_err(|_| std::io::Error::other("poisoned"))?;
                st.2 = false;
                st.1 = st.1.max(upto);
                self.cv.notify_all();
                r?;
                continue;
            }
            st = self
                .cv
                .wait(st)
                .map_err(|_| std::io::Error::other("poisoned"))?;
        }
    }
}

/// One block write and one `fdatasync` through `ring`: linked in one submission, or
/// submitted and waited for one after the other.
fn uring_write_sync(
    ring: &mut io_uring::IoUring,
    f: &File,
    buf: &[u8],
    off: u64,
    linked: bool,
) -> std::io::Result<()> {
    use io_uring::{opcode, squeue, types};
    let fd = types::Fd(f.as_raw_fd());
    let len = u32::try_from(buf.len()).map_err(std::io::Error::other)?;
    let write = opcode::Write::new(fd, buf.as_ptr(), len)
        .offset(off)
        .build();
    let sync = opcode::Fsync::new(fd)
        .flags(types::FsyncFlags::DATASYNC)
        .build();
    let steps: Vec<Vec<squeue::Entry>> = if linked {
        vec![vec![write.flags(squeue::Flags::IO_LINK), sync]]
    } else {
        vec![vec![write], vec![sync]]
    };
    for entries in steps {
        for e in &entries {
            // SAFETY: `buf` outlives the operation: this function waits below for every
            // entry it pushed to complete before it returns.
            unsafe { ring.submission().push(e) }
                .map_err(|_| std::io::Error::other("submission queue full"))?;
        }
        ring.submit_and_wait(entries.len())?;
        let mut seen = 0;
        for c in ring.completion() {
            seen += 1;
            if c.result() < 0 {
                return Err(std::io::Error::from_raw_os_error(-c.result()));
            }
        }
        if seen != entries.len() {
            return Err(std::io::Error::other("missing completions"));
        }
    }
    Ok(())
}

/// Allocates the file's blocks up front: written with zeros, or only allocated.
fn allocate(f: &File, len: u64, how: &str) -> Result<(), String> {
    if how == "fallocate" {
        let l = libc::off_t::try_from(len).map_err(|e| e.to_string())?;
        // SAFETY: plain syscall on a valid fd.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, l) };
        if rc != 0 {
            return Err(format!(
                "posix_fallocate: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        Ok(())
    } else {
        f.write_all_at(&vec![0u8; len as usize], 0)
            .map_err(|e| e.to_string())
    }
}

/// A thread's own append-only log file, empty and made durable as such (its
/// directory entry too), with its blocks allocated but its size kept at 0 when
/// `falloc`.
fn open_log(path: &Path, falloc: bool) -> Result<File, String> {
    let _ = std::fs::remove_file(path);
    let f = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if falloc {
        let len = libc::off_t::try_from(REGION).map_err(|e| e.to_string())?;
        // SAFETY: plain syscall on a valid fd with an in-range length.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
        if rc != 0 {
            return Err(format!("fallocate: {}", std::io::Error::last_os_error()));
        }
    }
    f.sync_all().map_err(|e| e.to_string())?;
    if let Some(d) = path.parent() {
        File::open(d)
            .and_then(|d| d.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(f)
}

/// The file, opened once per way of writing it, and the group commit they share.
struct Files {
    /// Plain descriptor (page cache).
    plain: File,
    /// `O_DSYNC`.
    dsync: File,
    /// `O_DIRECT | O_DSYNC`.
    direct_dsync: File,
    /// `O_DIRECT` alone.
    direct: File,
    group: Group,
}

impl Files {
    fn open(path: &Path, prealloc: &str, len: u64) -> Result<Files, String> {
        let plain = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        plain.set_len(len).map_err(|e| e.to_string())?;
        allocate(&plain, len, prealloc)?;
        plain.sync_all().map_err(|e| e.to_string())?;
        let with = |flags: i32| {
            OpenOptions::new()
                .write(true)
                .custom_flags(flags)
                .open(path)
                .map_err(|e| e.to_string())
        };
        Ok(Files {
            dsync: with(libc::O_DSYNC)?,
            direct_dsync: with(libc::O_DIRECT | libc::O_DSYNC)?,
            direct: with(libc::O_DIRECT)?,
            plain,
            group: Group::default(),
        })
    }
}

/// What one thread of a run owns: its record, its aligned block and its ring.
struct Writer {
    rec: Vec<u8>,
    /// Holds a 4 KiB-aligned page at `shift` (for `O_DIRECT`).
    block: Vec<u8>,
    shift: usize,
    ring: Option<io_uring::IoUring>,
    /// The thread's own log file (`append-*` modes).
    log: Option<File>,
}

impl Writer {
    fn new(mode: &str, size: usize, log_path: &Path) -> Result<Writer, String> {
        let block = vec![0u8; 2 * PAGE];
        let shift = block.as_ptr().align_offset(PAGE);
        let ring = if mode.starts_with("uring") {
            Some(io_uring::IoUring::new(4).map_err(|e| format!("io_uring_setup: {e}"))?)
        } else {
            None
        };
        let log = if mode.starts_with("append") {
            Some(open_log(log_path, mode == "append-falloc-fdatasync")?)
        } else {
            None
        };
        Ok(Writer {
            rec: vec![0xA5u8; size],
            block,
            shift,
            ring,
            log,
        })
    }

    /// Writes the record at `off` and makes it durable the way `mode` says.
    fn persist(&mut self, mode: &str, map: &Map, files: &Files, off: usize) -> std::io::Result<()> {
        let (rec, size, f) = (&self.rec, self.rec.len(), &files.plain);
        let page = off / PAGE * PAGE;
        if mode.contains("direct") || mode.starts_with("uring") {
            let buf = &mut self.block[self.shift..self.shift + PAGE];
            let at = off - page;
            let n = size.min(PAGE - at);
            buf[at..at + n].copy_from_slice(&rec[..n]);
        }
        let buf = &self.block[self.shift..self.shift + PAGE];
        match mode {
            "msync" => {
                map.write(off, rec);
                map.msync(off, size)
            }
            "mmap-fdatasync" => {
                map.write(off, rec);
                f.sync_data()
            }
            "pwrite-fdatasync" => f.write_all_at(rec, off as u64).and_then(|()| f.sync_data()),
            "pwrite-msync" => f
                .write_all_at(rec, off as u64)
                .and_then(|()| map.msync(off, size)),
            "pwrite-dsync" => files.dsync.write_all_at(rec, off as u64),
            "odirect" => files.direct_dsync.write_all_at(buf, page as u64),
            "odirect-fdatasync" => files
                .direct
                .write_all_at(buf, page as u64)
                .and_then(|()| files.direct.sync_data()),
            "group-odirect" => files
                .direct
                .write_all_at(buf, page as u64)
                .and_then(|()| files.group.commit(&files.direct)),
            "uring-linked" | "uring-split" => match self.ring.as_mut() {
                Some(ring) => uring_write_sync(
                    ring,
                    &files.direct,
                    buf,
                    page as u64,
                    mode == "uring-linked",
                ),
                None => Err(std::io::Error::other("no ring")),
            },
            "append-fdatasync" | "append-falloc-fdatasync" => match &self.log {
                Some(log) => {
                    let mut w: &File = log;
                    w.write_all(rec).and_then(|()| log.sync_data())
                }
                None => Err(std::io::Error::other("no log file")),
            },
            "group-fdatasync" => {
                map.write(off, rec);
                files.group.commit(f)
            }
            "group-pwrite" => f
                .write_all_at(rec, off as u64)
                .and_then(|()| files.group.commit(f)),
            other => Err(std::io::Error::other(format!("unknown mode {other}"))),
        }
    }
}

fn run(
    dir: &Path,
    mode: &str,
    threads: usize,
    ops: usize,
    size: usize,
    prealloc: &str,
) -> Result<(f64, Vec<u64>), String> {
    let path = dir.join("persist.dat");
    let _ = std::fs::remove_file(&path);
    let len = REGION * threads as u64;
    let files = Arc::new(Files::open(&path, prealloc, len)?);
    let map = Arc::new(Map::new(&files.plain, len as usize)?);
    let barrier = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (map, files, barrier) = (map.clone(), files.clone(), barrier.clone());
        let dir = dir.to_path_buf();
        let mode = mode.to_string();
        handles.push(std::thread::spawn(move || -> Result<Vec<u64>, String> {
            let base = t * REGION as usize;
            let log_path = dir.join(format!("append-{t}.dat"));
            let w = Writer::new(&mode, size, &log_path);
            let mut lat = Vec::with_capacity(ops);
            // Past the barrier even on an error, so the other threads are not stuck.
            barrier.wait();
            let mut w = w?;
            for i in 0..ops {
                let off = base + (i * size) % (REGION as usize - size);
                let t0 = Instant::now();
                w.persist(&mode, &map, &files, off)
                    .map_err(|e| format!("{mode}: {e}"))?;
                lat.push(t0.elapsed().as_nanos() as u64);
            }
            Ok(lat)
        }));
    }
    barrier.wait();
    let start = Instant::now();
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().map_err(|_| "thread panicked".to_string())??);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(map);
    let _ = std::fs::remove_file(&path);
    for t in 0..threads {
        let _ = std::fs::remove_file(dir.join(format!("append-{t}.dat")));
    }
    all.sort_unstable();
    Ok(((threads * ops) as f64 / secs, all))
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("persist_backends: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&a.dir) {
        eprintln!("persist_backends: {}: {e}", a.dir.display());
        std::process::exit(2);
    }
    println!("| mode | threads | durable writes/s | p50 µs | p99 µs |");
    println!("|---|---|---|---|---|");
    for mode in &a.modes {
        for &t in &a.threads {
            match run(&a.dir, mode, t, a.ops, a.size, &a.prealloc) {
                Ok((rate, lat)) => {
                    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
                    println!(
                        "| {mode} | {t} | {rate:.0} | {:.0} | {:.0} |",
                        q(0.5),
                        q(0.99)
                    );
                }
                Err(e) => println!("| {mode} | {t} | error: {e} | | |"),
            }
        }
    }
}
