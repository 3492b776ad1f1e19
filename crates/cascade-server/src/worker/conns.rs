//! A worker's connections from arrival to departure: adopting the sockets the
//! acceptor hands over (registration, mailbox and wake-up hooks, parser limits),
//! giving idle clients' input buffers back, closing clients past `timeout`, releasing
//! what a closed connection registered (parked commands, WATCH, subscriptions,
//! tracking), and handing a `PSYNC` connection to the replication threads.
//!
//! Only the worker's own thread runs these (they take `&mut Worker`); the inbox queue
//! is the one shared piece, under its mutex.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Interest, Token};

use super::io::{publish_input, to_usize, IDLE_BUFFER};
use super::{Conn, Worker, UNAUTHED};
use crate::cmd::Client;
use crate::inbuf::InBuf;
use crate::pubsub::Mailbox;
use crate::resp::parse::{Limits, Parser};
use crate::resp::reply::Out;

impl Worker {
    /// Registers the connections the acceptor handed over; returns their tokens (the
    /// caller serves them in the same round: input that came with the connection is
    /// read at once, not a round later).
    pub(super) fn adopt(&mut self) -> Vec<Token> {
        let new: Vec<_> = std::mem::take(&mut *self.queue.lock());
        let mut tokens = Vec::with_capacity(new.len());
        let limits = Limits {
            max_bulk: to_usize(self.shared.config.max_bulk.load(Ordering::Relaxed)),
            max_args: to_usize(self.shared.config.max_args.load(Ordering::Relaxed)),
        };
        for (mut sock, peer, id) in new {
            let token = Token(self.next_token);
            self.next_token += 1;
            // The kernel stamps what arrives: blocked clients are served in arrival
            // order (`io.rs`, `notify.rs`). Without the stamps, reads are timed.
            let _ = nix::sys::socket::setsockopt(
                &sock,
                nix::sys::socket::sockopt::ReceiveTimestampns,
                &true,
            );
            if let Err(e) = self.poll.registry().register(
                &mut sock,
                token,
                Interest::READABLE | Interest::WRITABLE,
            ) {
                eprintln!("cascade: cannot register a client: {e}");
                self.forget(id);
                continue;
            }
            let authed = self.shared.config.requirepass.lock().is_none();
            let mut client = Client::new(id, peer.to_string(), authed);
            // Publishers on any thread leave messages in the mailbox and wake us.
            let (woken, waker) = (self.park.woken.clone(), self.park.waker.clone());
            client.mailbox = Mailbox::new(
                id,
                Arc::new(move || {
                    woken.lock().push(token);
                    let _ = waker.wake();
                }),
            );
            // A REDIRECT target of client-side caching is found by its id.
            self.shared.store.tracking().register(&client.mailbox);
            // Scripts and WAIT wake the connection through this hook (same body as the
            // mailbox's). Session 19 blamed sharing one Arc for a hang of Redis's
            // "BRPOPLPUSH with multiple blocked clients"; the hang was the order in which
            // two connections' commands were parked (docs/redis-compat.md, fixed in
            // session 20 by serving parked clients in arrival order), with either.
            let (woken, waker) = (self.park.woken.clone(), self.park.waker.clone());
            client.wake = Some(Arc::new(move || {
                woken.lock().push(token);
                let _ = waker.wake();
            }));
            self.conns.insert(
                token,
                Conn {
                    sock,
                    client,
                    parser: Parser::new(if authed { limits } else { UNAUTHED }),
                    inbuf: InBuf::default(),
                    rpos: 0,
                    out: Out::new(),
                    wpos: 0,
                    last_active: Instant::now(),
                    eof: false,
                    dead: false,
                    wrote: false,
                    awaiting: false,
                    writer: false,
                    reads: None,
                    backlog: false,
                    parked: None,
                    hold: false,
                    live: self.shared.clients.live(id),
                    created: Instant::now(),
                    peak: 0,
                    last_resize: Instant::now(),
                    rx_ns: 0,
                },
            );
            tokens.push(token);
        }
        tokens
    }

    /// Drops a closed connection's registrations (parked, watched) and counts.
    pub(super) fn release(&mut self, c: &mut Conn) {
        if let Some(p) = c.parked.take() {
            self.shared.store.notify().unwait(p.seq);
            self.shared.metrics.blocked.fetch_sub(1, Ordering::Relaxed);
            self.parked -= 1;
        }
        c.client.unwatch(&self.shared.store);
        crate::cmd::pubsub::drop_all(&self.shared, &mut c.client);
        crate::tracking::disconnect(&self.shared.store, &mut c.client);
        self.forget(c.client.id);
    }

    /// Gives a connection that sent `PSYNC` to the replication threads
    /// (`crate::replication::primary`): its pending replies are written first.
    pub(super) fn hand_over(&mut self, mut c: Conn) {
        let _ = self.poll.registry().deregister(&mut c.sock);
        self.release(&mut c);
        let Some((replid, offset)) = c.client.repl.psync.take() else {
            return;
        };
        let mut sock: std::net::TcpStream = c.sock.into();
        if sock.set_nonblocking(false).is_err() || sock.write_all(&c.out.buf[c.wpos..]).is_err() {
            return;
        }
        let ip = c.client.repl.ip.clone().unwrap_or_else(|| {
            c.client
                .addr
                .parse::<SocketAddr>()
                .map_or_else(|_| c.client.addr.clone(), |a| a.ip().to_string())
        });
        let hello = crate::replication::primary::Hello {
            id: c.client.id,
            ip,
            port: c.client.repl.listening_port,
            replid,
            offset,
            pending: c.inbuf.bytes()[c.rpos..].to_vec(),
        };
        crate::replication::primary::spawn(self.shared.clone(), sock, hello);
    }

    pub(super) fn forget(&self, id: u64) {
        self.shared.clients.remove(id);
        self.shared
            .metrics
            .connected
            .fetch_sub(1, Ordering::Relaxed);
    }

    /// Clients idle for [`IDLE_BUFFER`] with no pending input give their input
    /// buffer back (Redis frees the query buffer of idle clients too).
    pub(super) fn trim_idle(&mut self) {
        for c in self.conns.values_mut() {
            if c.rpos == c.inbuf.len()
                && c.inbuf.capacity() > 0
                && c.last_active.elapsed() >= IDLE_BUFFER
            {
                c.inbuf = InBuf::default();
                c.rpos = 0;
                publish_input(c);
            }
        }
    }

    pub(super) fn close_idle(&mut self) {
        let timeout = self.shared.config.timeout_secs.load(Ordering::Relaxed);
        if timeout == 0 {
            return;
        }
        let limit = Duration::from_secs(timeout);
        let idle: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, c)| c.parked.is_none() && c.last_active.elapsed() > limit)
            .map(|(t, _)| *t)
            .collect();
        for t in idle {
            if let Some(mut c) = self.conns.remove(&t) {
                let _ = self.poll.registry().deregister(&mut c.sock);
                self.release(&mut c);
                self.shared
                    .metrics
                    .timed_out
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
