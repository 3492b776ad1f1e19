//! A connection's socket side: reading input within the budgets, writing replies,
//! and keeping the input buffer fitted to what the client sends (as Redis's client
//! cron does) with its figures published for CLIENT LIST.
//!
//! Only the worker thread that owns a connection calls these (`worker/mod.rs`).

use std::cell::RefCell;
use std::io::{ErrorKind, IoSliceMut, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::net::TcpStream;
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
use nix::sys::time::TimeSpec;

use super::{Conn, OUT_HIGH, READ_BUDGET};
use crate::metrics::WorkerStats;
use crate::shared::Shared;

/// Bytes asked of the socket per read (and the least a grown input buffer keeps).
pub(super) const READ_CHUNK: usize = 16 << 10;

/// What is left after executing is one incomplete command (or, with `backlog`,
/// commands waiting for the client to read its replies): over the query-buffer limit
/// the client is closed.
pub(super) fn check_query_buffer(c: &mut Conn, shared: &Shared) {
    let limit = to_usize(shared.config.query_buffer_limit.load(Ordering::Relaxed));
    if !c.backlog && c.inbuf.len() - c.rpos > limit {
        eprintln!(
            "cascade: closing client {} ({}): query buffer over {limit} bytes",
            c.client.id, c.client.addr
        );
        c.dead = true;
    }
}

/// A configured size as `usize` (saturating on 32-bit targets).
pub(super) fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

thread_local! {
    /// Room for the receive-time control message of one read.
    static CMSG: RefCell<Vec<u8>> = RefCell::new(nix::cmsg_space!(TimeSpec));
}

/// Nanoseconds since the Unix epoch now (the arrival time of input the kernel did not
/// stamp).
pub(super) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One read of `sock` into `buf`, with the time the kernel received the data
/// (`SO_TIMESTAMPNS`, set when the connection is adopted; the read time if the kernel
/// gave none). Blocked clients are served in the order their commands arrived
/// (`notify.rs`), which two workers' reads alone cannot tell.
fn recv_stamped(sock: &TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, u64)> {
    CMSG.with(|cmsg| {
        let mut cmsg = cmsg.borrow_mut();
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(cmsg.as_mut_slice()),
            MsgFlags::empty(),
        )
        .map_err(std::io::Error::from)?;
        let mut at = 0u64;
        if let Ok(list) = msg.cmsgs() {
            for m in list {
                if let ControlMessageOwned::ScmTimestampns(t) = m {
                    let (s, ns) = (u64::try_from(t.tv_sec()), u64::try_from(t.tv_nsec()));
                    if let (Ok(s), Ok(ns)) = (s, ns) {
                        at = s.saturating_mul(1_000_000_000).saturating_add(ns);
                    }
                }
            }
        }
        if at == 0 {
            at = now_ns();
        }
        Ok((msg.bytes, at))
    })
}

/// Reads up to [`READ_BUDGET`]. Returns true if more input may be waiting.
pub(super) fn read_some(c: &mut Conn, stats: &WorkerStats) -> bool {
    if c.eof {
        return false;
    }
    let mut got = 0usize;
    // Compact consumed input before growing the buffer.
    if c.rpos > 0 && (c.rpos == c.inbuf.len() || c.rpos >= c.inbuf.len() / 2) {
        c.inbuf.consume(c.rpos);
        c.rpos = 0;
    }
    while got < READ_BUDGET {
        // A large declared bulk is read in growing steps: the buffer never exceeds
        // about twice the bytes actually received (plus one chunk).
        let received = c.inbuf.len() - c.rpos;
        // Without a large bulk pending, read into the room already there (one
        // READ_CHUNK buffer serves small commands without growing), at most a chunk
        // at a time (`inbuf.rs`: the room is zeroed only when the buffer grows).
        let spare = c.inbuf.spare();
        let want = c.parser.pending_hint().map_or(
            if spare >= READ_CHUNK / 4 {
                spare.min(READ_CHUNK)
            } else {
                READ_CHUNK
            },
            |h| h.min(received.max(READ_CHUNK)).max(READ_CHUNK),
        );
        match recv_stamped(&c.sock, c.inbuf.room(want)) {
            Ok((0, _)) => {
                c.eof = true;
                return false;
            }
            Ok((n, at)) => {
                c.rx_ns = at;
                c.inbuf.filled(n);
                got += n;
                c.last_active = Instant::now();
                c.peak = c.peak.max(c.inbuf.len() - c.rpos);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                stats.bytes_in.fetch_add(got as u64, Ordering::Relaxed);
                return false;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                c.eof = true;
                c.dead = true;
                return false;
            }
        }
    }
    stats.bytes_in.fetch_add(got as u64, Ordering::Relaxed);
    true
}

/// How often an input buffer over [`RESIZE_ABOVE`] is fitted to its recent peak.
pub(super) const RESIZE_EVERY: Duration = Duration::from_millis(200);

/// Input buffers up to this size are kept as they are.
pub(super) const RESIZE_ABOVE: usize = 2 * READ_CHUNK;

/// A client idle this long gives its input buffer back.
pub(super) const IDLE_BUFFER: Duration = Duration::from_secs(2);

/// Fits the input buffer to the most it held recently (as Redis's client cron does:
/// a big argument does not pin a big buffer) and publishes its size for CLIENT LIST.
pub(super) fn fit_input(c: &mut Conn) {
    if c.last_resize.elapsed() >= RESIZE_EVERY {
        if c.rpos == c.inbuf.len() && c.inbuf.capacity() > RESIZE_ABOVE {
            c.inbuf.clear_and_shrink(c.peak.max(READ_CHUNK));
            c.rpos = 0;
        }
        c.peak = 0;
        c.last_resize = Instant::now();
    }
    publish_input(c);
}

/// Publishes the input buffer's use and the last activity for CLIENT LIST.
pub(super) fn publish_input(c: &Conn) {
    let used = c.inbuf.len() - c.rpos;
    let l = &c.live;
    l.qbuf.store(used as u64, Ordering::Relaxed);
    l.qbuf_free
        .store((c.inbuf.capacity() - used) as u64, Ordering::Relaxed);
    let active = c
        .last_active
        .saturating_duration_since(c.created)
        .as_millis();
    l.active_ms
        .store(u64::try_from(active).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// Writes pending output until the socket would block.
pub(super) fn write_some(c: &mut Conn, stats: &WorkerStats) {
    while c.wpos < c.out.buf.len() {
        match c.sock.write(&c.out.buf[c.wpos..]) {
            Ok(0) => {
                c.dead = true;
                return;
            }
            Ok(n) => {
                c.wpos += n;
                stats.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                c.dead = true;
                return;
            }
        }
    }
    if c.wpos == c.out.buf.len() {
        c.out.buf.clear();
        c.wpos = 0;
        // Give back a large buffer once drained.
        if c.out.buf.capacity() > OUT_HIGH {
            c.out.buf.shrink_to(64 << 10);
        }
    } else if c.wpos > (1 << 20) && c.wpos * 2 > c.out.buf.len() {
        c.out.buf.drain(..c.wpos);
        c.wpos = 0;
    }
}
