//! A connection's mailbox: where other threads leave the pub/sub messages (and
//! keyspace notifications) meant for it.
//!
//! A publisher runs on any worker thread; the subscriber's connection belongs to one
//! worker, and only that worker writes to its socket. So a publisher encodes the
//! message in the subscriber's protocol (RESP2 array or RESP3 push) and appends the
//! bytes to the subscriber's mailbox, then wakes its worker, which moves the bytes
//! into the connection's output buffer between commands (`worker/`). The bytes of one
//! message are appended under the mailbox lock in one piece, so messages never
//! interleave, and publishers to one channel hold the registry lock (`mod.rs`), so
//! every subscriber sees one channel's messages in one order.
//!
//! Memory is bounded as Redis bounds a pub/sub client (`client-output-buffer-limit
//! pubsub <hard> <soft> <seconds>`): the bytes queued here plus the bytes the worker
//! has not yet written to the socket ([`Mailbox::set_unsent`]) may not exceed the hard
//! limit, nor stay above the soft limit for longer than the soft time. A mailbox over
//! the limit is *killed*: it takes no more bytes, and its worker closes the connection
//! as soon as it sees the flag.
//!
//! Invariants: `queued` is the length of `inner.buf`; once `killed`, `inner.buf` stays
//! empty. Locks: `inner` (a mutex) guards the buffer and the soft-limit clock; the
//! atomics are read without it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::notify::WakeFn;

/// `client-output-buffer-limit pubsub`: hard bytes, soft bytes, soft seconds (0 = no
/// limit of that kind). Redis's defaults are 32 MiB, 8 MiB and 60 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    /// Never more than this many bytes pending.
    pub(crate) hard: u64,
    /// Not more than this many bytes for longer than `soft_secs`.
    pub(crate) soft: u64,
    /// How long the soft limit may be exceeded.
    pub(crate) soft_secs: u64,
}

impl Default for Limit {
    fn default() -> Self {
        Limit {
            hard: 32 << 20,
            soft: 8 << 20,
            soft_secs: 60,
        }
    }
}

#[derive(Default)]
struct Inner {
    buf: Vec<u8>,
    /// Since when the pending bytes have been over the soft limit.
    over_soft_since: Option<Instant>,
}

/// One connection's incoming pub/sub messages.
pub(crate) struct Mailbox {
    /// The connection's client id.
    pub(crate) id: u64,
    inner: Mutex<Inner>,
    /// Bytes in `inner.buf`.
    queued: AtomicUsize,
    /// Bytes the worker holds in the connection's output buffer, not yet sent.
    unsent: AtomicUsize,
    /// The connection speaks RESP3 (messages are push frames).
    resp3: AtomicBool,
    /// Over its limit: the connection is to be closed.
    killed: AtomicBool,
    wake: WakeFn,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("id", &self.id)
            .field("queued", &self.queued.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Mailbox {
    /// A mailbox for client `id`; `wake` tells its worker there is mail.
    pub(crate) fn new(id: u64, wake: WakeFn) -> Arc<Mailbox> {
        Arc::new(Mailbox {
            id,
            inner: Mutex::new(Inner::default()),
            queued: AtomicUsize::new(0),
            unsent: AtomicUsize::new(0),
            resp3: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            wake,
        })
    }

    /// The connection switched protocol (HELLO).
    pub(crate) fn set_resp3(&self, on: bool) {
        self.resp3.store(on, Ordering::Relaxed);
    }

    /// True if messages are to be encoded as RESP3 pushes.
    pub(crate) fn resp3(&self) -> bool {
        self.resp3.load(Ordering::Relaxed)
    }

    /// Over its limit: its worker must close the connection.
    pub(crate) fn killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// `CLIENT KILL`: the worker closes the connection (as over the limit).
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        (self.wake)();
    }

    /// True if messages are waiting.
    pub(crate) fn has_mail(&self) -> bool {
        self.queued.load(Ordering::Acquire) > 0
    }

    /// The worker reports the bytes it has not yet written to the socket.
    pub(crate) fn set_unsent(&self, n: usize) {
        self.unsent.store(n, Ordering::Relaxed);
    }

    /// Appends one encoded message (`write` appends it to the buffer it is given) and
    /// wakes the worker if the mailbox was empty. Returns false if the mailbox is (or
    /// by this message became) over its limit; the message is then dropped.
    pub(crate) fn deliver(&self, limit: Limit, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.killed() {
            return false;
        }
        let mut inner = self.inner.lock();
        let was_empty = inner.buf.is_empty();
        write(&mut inner.buf);
        let pending = (inner.buf.len() + self.unsent.load(Ordering::Relaxed)) as u64;
        let over_hard = limit.hard > 0 && pending > limit.hard;
        let mut over_soft = false;
        if limit.soft > 0 && pending > limit.soft {
            let since = *inner.over_soft_since.get_or_insert_with(Instant::now);
            over_soft = since.elapsed().as_secs() >= limit.soft_secs;
        } else {
            inner.over_soft_since = None;
        }
        if over_hard || over_soft {
            inner.buf = Vec::new();
            self.queued.store(0, Ordering::Release);
            self.killed.store(true, Ordering::Release);
            drop(inner);
            (self.wake)();
            return false;
        }
        self.queued.store(inner.buf.len(), Ordering::Release);
        drop(inner);
        if was_empty {
            (self.wake)();
        }
        true
    }

    /// Moves every waiting message to the end of `out` (the worker, between commands).
    pub(crate) fn take_into(&self, out: &mut Vec<u8>) {
        if !self.has_mail() {
            return;
        }
        let mut inner = self.inner.lock();
        if out.is_empty() {
            std::mem::swap(out, &mut inner.buf);
        } else {
            out.append(&mut inner.buf);
        }
        self.queued.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn counting() -> (Arc<Mailbox>, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let mb = Mailbox::new(
            7,
            Arc::new(move || {
                m.fetch_add(1, Ordering::Relaxed);
            }),
        );
        (mb, n)
    }

    #[test]
    fn delivers_in_order_and_wakes_once_per_batch() {
        let (mb, wakes) = counting();
        let lim = Limit::default();
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"one;")));
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"two;")));
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        let mut out = b"reply;".to_vec();
        mb.take_into(&mut out);
        assert_eq!(out, b"reply;one;two;");
        assert!(!mb.has_mail());
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"three;")));
        assert_eq!(wakes.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn hard_limit_kills_and_drops() {
        let (mb, _) = counting();
        let lim = Limit {
            hard: 10,
            soft: 0,
            soft_secs: 0,
        };
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"12345")));
        // Bytes the worker has not sent count too.
        mb.set_unsent(4);
        assert!(!mb.deliver(lim, |b| b.extend_from_slice(b"678")));
        assert!(mb.killed());
        assert!(!mb.has_mail());
        assert!(!mb.deliver(lim, |b| b.extend_from_slice(b"x")));
    }

    #[test]
    fn soft_limit_needs_its_time() {
        let (mb, _) = counting();
        let lim = Limit {
            hard: 0,
            soft: 4,
            soft_secs: 0,
        };
        // Zero seconds over the soft limit is already too long.
        assert!(!mb.deliver(lim, |b| b.extend_from_slice(b"12345")));
        let (mb, _) = counting();
        let lim = Limit {
            hard: 0,
            soft: 4,
            soft_secs: 3600,
        };
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"12345")));
        assert!(mb.deliver(lim, |b| b.extend_from_slice(b"6789")));
        assert!(!mb.killed());
    }
}
