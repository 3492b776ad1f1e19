//! The replica's side: one link thread per `REPLICAOF`, which connects to the primary,
//! performs Redis's handshake (`PING`, `AUTH`, `REPLCONF listening-port`, `REPLCONF
//! capa eof capa psync2`, `PSYNC replid offset`), loads a full sync or continues from
//! its offset, then applies records in bursts (`apply.rs`) and acknowledges its offset
//! with `REPLCONF ACK` after each burst and at least every second.
//!
//! Faults: a primary that refuses, goes away (also mid full sync) or is silent for
//! `repl-timeout` seconds (no records, no heartbeats: a process stopped by `SIGSTOP`) drops the
//! link; the thread logs why (once per distinct reason) and retries every second.
//! A full sync interrupted midway leaves no stored position and the mark `SYNC_KEY`
//! (also across a crash), so the next attempt is a full sync again; the partial data
//! answers `-LOADING` until one completes.
//!
//! The thread exits when the node's replication generation changes (`REPLICAOF` to
//! another primary, `REPLICAOF NO ONE`) or the server shuts down.

use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::record::{self, Frame};
use super::{apply, Link};
use crate::shared::Shared;

/// Largest frame accepted from a primary.
const MAX_FRAME: usize = 512 << 20;

/// Starts the link thread of generation `generation`.
pub(crate) fn spawn(shared: Arc<Shared>, host: String, port: u16, generation: u64) {
    let res = std::thread::Builder::new()
        .name("cascade-repl-link".into())
        .spawn(move || run(&shared, &host, port, generation));
    if let Err(e) = res {
        eprintln!("cascade: cannot start the replication link: {e}");
    }
}

fn current(shared: &Shared, generation: u64) -> bool {
    shared.repl.generation() == generation && !shared.shutting_down()
}

fn run(shared: &Shared, host: &str, port: u16, generation: u64) {
    // What it applies goes to the shared log, which the persisters persist.
    crate::visible::bind_shared_log(shared.fixed.sync);
    while current(shared, generation) {
        shared.repl.with_state(|s| s.link = Link::Connecting);
        let err = match session(shared, host, port, generation) {
            Ok(()) => continue,
            Err(e) => e,
        };
        if !current(shared, generation) {
            break;
        }
        // A full sync cut short keeps answering -LOADING (its data is partial) until
        // one completes.
        let log = shared.repl.with_state(|s| {
            if s.link == Link::Connected || s.down_since.is_none() {
                s.down_since = Some(Instant::now());
            }
            s.link = Link::Connect;
            let new = s.last_error != err;
            s.last_error.clone_from(&err);
            new
        });
        if log {
            eprintln!("cascade: replication from {host}:{port}: {err}; retrying every second");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A blocking connection to the primary with a read buffer.
struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

impl Conn {
    fn send(&mut self, args: &[&str]) -> Result<(), String> {
        let mut o = format!("*{}\r\n", args.len());
        for a in args {
            let _ = write!(o, "${}\r\n{a}\r\n", a.len());
        }
        self.sock
            .write_all(o.as_bytes())
            .map_err(|e| format!("writing to the primary: {e}"))
    }

    /// Reads more bytes; `Ok(false)` on a read timeout.
    fn fill(&mut self) -> Result<bool, String> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > (1 << 20) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 16 << 10];
        match self.sock.read(&mut chunk) {
            Ok(0) => Err("the primary closed the connection".into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(format!("reading from the primary: {e}")),
        }
    }

    /// One reply line (without CRLF), waiting up to `wait`.
    fn line(&mut self, wait: Duration) -> Result<String, String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(i) = self.buf[self.pos..].windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[self.pos..self.pos + i]).into_owned();
                self.pos += i + 2;
                return Ok(l);
            }
            if Instant::now() >= deadline {
                return Err("timeout waiting for the primary's reply".into());
            }
            self.fill()?;
        }
    }

    /// The next complete frame, if one is buffered.
    fn frame(&mut self) -> Result<Option<(usize, usize)>, String> {
        let rest = &self.buf[self.pos..];
        match record::frame_len(rest, MAX_FRAME).map_err(|e| e.to_string())? {
            Some(n) => {
                let at = self.pos;
                self.pos += n;
                Ok(Some((at, n)))
            }
            None => Ok(None),
        }
    }
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {host}"))
}

fn session(shared: &Shared, host: &str, port: u16, generation: u64) -> Result<(), String> {
    let addr = resolve(host, port)?;
    let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connecting: {e}"))?;
    let _ = sock.set_nodelay(true);
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut c = Conn {
        sock,
        buf: Vec::new(),
        pos: 0,
    };
    let settings = shared.repl.settings.lock().clone();
    let wait = Duration::from_secs(settings.timeout_secs);
    c.send(&["PING"])?;
    let pong = c.line(wait)?;
    if !(pong.starts_with('+') || pong.starts_with("-NOAUTH") || pong.starts_with("-NOPERM")) {
        return Err(format!("the primary answered PING with {pong}"));
    }
    if let Some(pass) = &settings.masterauth {
        match &settings.masteruser {
            Some(u) => c.send(&["AUTH", u, pass])?,
            None => c.send(&["AUTH", pass])?,
        }
        let r = c.line(wait)?;
        if !r.starts_with('+') {
            return Err(format!("AUTH with masterauth failed: {r}"));
        }
    }
    let my_port = if settings.announce_port != 0 {
        settings.announce_port
    } else {
        shared.port
    };
    c.send(&["REPLCONF", "listening-port", &my_port.to_string()])?;
    let r = c.line(wait)?;
    if !r.starts_with('+') {
        return Err(format!("REPLCONF listening-port: {r}"));
    }
    if let Some(ip) = &settings.announce_ip {
        c.send(&["REPLCONF", "ip-address", ip])?;
        let r = c.line(wait)?;
        if !r.starts_with('+') {
            return Err(format!("REPLCONF ip-address: {r}"));
        }
    }
    c.send(&["REPLCONF", "capa", "eof", "capa", "psync2"])?;
    let r = c.line(wait)?;
    if !r.starts_with('+') {
        return Err(format!("REPLCONF capa: {r}"));
    }
    let feed = shared.store.feed();
    let (myid, next) = shared
        .repl
        .with_state(|s| (s.replid.clone(), feed.offset() + 1));
    c.send(&["PSYNC", &myid, &next.to_string()])?;
    let reply = c.line(wait)?;
    let words: Vec<&str> = reply.split_whitespace().collect();
    let replid = match words.as_slice() {
        ["+FULLRESYNC", id, off] => {
            let off: u64 = off.parse().map_err(|_| format!("bad reply {reply}"))?;
            full_sync(shared, &mut c, generation, id, off)?;
            (*id).to_string()
        }
        ["+CONTINUE", rest @ ..] => {
            if let Some(id) = rest.first() {
                if *id != myid {
                    // The primary was promoted: our history is its second id.
                    shared.repl.with_state(|s| {
                        s.replid2 = std::mem::replace(&mut s.replid, (*id).to_string());
                        s.second_offset = i64::try_from(next).unwrap_or(i64::MAX);
                    });
                }
            }
            eprintln!("cascade: partial resync from {host}:{port} at offset {next}");
            rest.first().map_or(myid, |s| (*s).to_string())
        }
        _ => return Err(format!("the primary refused PSYNC: {reply}")),
    };
    shared.repl.with_state(|s| {
        s.link = Link::Connected;
        s.down_since = None;
        s.last_io = Instant::now();
        s.last_error.clear();
    });
    stream(shared, &mut c, generation, &replid, wait)
}

fn full_sync(
    shared: &Shared,
    c: &mut Conn,
    generation: u64,
    replid: &str,
    offset: u64,
) -> Result<(), String> {
    let t0 = Instant::now();
    shared.repl.with_state(|s| s.link = Link::Sync);
    shared.repl.set_loading(true);
    apply::wipe(shared).map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(shared.repl.settings.lock().timeout_secs);
    let mut last = Instant::now();
    let mut entries = 0usize;
    loop {
        if !current(shared, generation) {
            return Err("replication changed during the full sync".into());
        }
        while let Some((at, n)) = c.frame()? {
            last = Instant::now();
            match record::decode(&c.buf[at..at + n]).map_err(|e| e.to_string())? {
                Frame::Chunk(pairs) => {
                    entries += pairs.len();
                    apply::load_chunk(shared, generation, pairs).map_err(|e| e.to_string())?;
                    shared.repl.add_loaded(n as u64);
                }
                Frame::Heartbeat => {}
                Frame::End => {
                    apply::finish(shared, generation, replid, offset).map_err(|e| e.to_string())?;
                    shared.repl.with_state(|s| {
                        s.replid = replid.to_string();
                        s.replid2 = "0".repeat(40);
                        s.second_offset = -1;
                    });
                    shared.repl.set_loading(false);
                    // Replicas of this node held another history.
                    shared.repl.kill_peers();
                    eprintln!(
                        "cascade: full sync done: {entries} entries at offset {offset} in {} ms",
                        t0.elapsed().as_millis()
                    );
                    return Ok(());
                }
                other => return Err(format!("unexpected frame during a full sync: {other:?}")),
            }
        }
        if c.fill()? {
            last = Instant::now();
        } else if last.elapsed() > timeout {
            return Err("the primary went silent during the full sync (repl-timeout)".into());
        }
    }
}

fn stream(
    shared: &Shared,
    c: &mut Conn,
    generation: u64,
    replid: &str,
    timeout: Duration,
) -> Result<(), String> {
    let mut last_io = Instant::now();
    let mut last_ack = Instant::now();
    let mut acked = u64::MAX;
    loop {
        if !current(shared, generation) {
            return Ok(());
        }
        let mut frames: Vec<(usize, usize)> = Vec::new();
        while let Some(f) = c.frame()? {
            frames.push(f);
        }
        let records: Vec<&[u8]> = frames
            .iter()
            .map(|&(at, n)| &c.buf[at..at + n])
            .filter(|f| f.get(4) != Some(&record::HEARTBEAT))
            .collect();
        if !records.is_empty() {
            apply::apply_records(shared, replid, generation, &records)
                .map_err(|e| e.to_string())?;
        }
        let offset = shared.store.feed().offset();
        if offset != acked || last_ack.elapsed() >= Duration::from_secs(1) {
            c.send(&["REPLCONF", "ACK", &offset.to_string()])?;
            acked = offset;
            last_ack = Instant::now();
        }
        if c.fill()? {
            last_io = Instant::now();
            shared.repl.with_state(|s| s.last_io = last_io);
        } else if last_io.elapsed() > timeout {
            return Err(format!(
                "no data from the primary for {} s (repl-timeout)",
                timeout.as_secs()
            ));
        }
    }
}
