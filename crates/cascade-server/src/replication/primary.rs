//! The primary's side of a replica link: after `PSYNC` the worker hands the socket
//! to a thread of its own, which answers `+CONTINUE` (the replica's position is in the
//! backlog under our id, or under our second id before the promotion) or
//! `+FULLRESYNC id offset` followed by a full sync, then streams records from the
//! backlog. A second thread reads the replica's `REPLCONF ACK offset`.
//!
//! Full sync: under the feed's exclusive gate (an instant: no commit is between its
//! engine write and its append) an engine snapshot is taken and the offset read; the
//! snapshot is then streamed in chunks of at most [`CHUNK_BYTES`] while the primary
//! keeps serving, so memory stays bounded by one chunk plus the backlog. Records
//! committed meanwhile wait in the backlog; if the backlog overruns them the link is
//! closed and the replica starts over (Redis's output-buffer limit does the same).
//!
//! A replica with nothing to receive gets a heartbeat frame every second (not in the
//! stream's offsets), so it notices a dead primary by `repl-timeout`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{record, Peer};
use crate::keyspace::now_ms;
use crate::shared::Shared;

/// Bytes of entries per full-sync chunk.
pub(crate) const CHUNK_BYTES: usize = 256 << 10;
/// Bytes of records per write to the replica.
const STREAM_BYTES: usize = 256 << 10;

/// What the replica sent before `PSYNC`.
#[derive(Debug)]
pub(crate) struct Hello {
    /// Client id of the connection.
    pub(crate) id: u64,
    /// Address to announce it by.
    pub(crate) ip: String,
    /// Its listening port.
    pub(crate) port: u16,
    /// `PSYNC` replid and offset.
    pub(crate) replid: String,
    pub(crate) offset: i64,
    /// Bytes the worker had read past `PSYNC`.
    pub(crate) pending: Vec<u8>,
}

/// Serves a replica on its own threads.
pub(crate) fn spawn(shared: Arc<Shared>, sock: TcpStream, hello: Hello) {
    let name = format!("cascade-repl-out-{}", hello.id);
    let res = std::thread::Builder::new()
        .name(name)
        .spawn(move || serve(&shared, sock, hello));
    if let Err(e) = res {
        eprintln!("cascade: cannot start a replica thread: {e}");
    }
}

/// Decides between a partial and a full resync for a replica at `replid`/`offset`
/// (the next byte it wants).
fn can_continue(shared: &Shared, replid: &str, offset: i64) -> bool {
    let Ok(from) = u64::try_from(offset) else {
        return false;
    };
    let (mine, second, second_off) = shared
        .repl
        .with_state(|s| (s.replid.clone(), s.replid2.clone(), s.second_offset));
    let feed = shared.store.feed();
    let ours = replid == mine || (replid == second && offset <= second_off);
    ours && feed.active() && feed.can_serve(from)
}

fn serve(shared: &Arc<Shared>, mut sock: TcpStream, hello: Hello) {
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_write_timeout(Some(Duration::from_secs(
        shared.repl.settings.lock().timeout_secs,
    )));
    let feed = shared.store.feed();
    feed.activate();
    let peer = Arc::new(Peer {
        id: hello.id,
        ip: hello.ip.clone(),
        port: hello.port,
        state: std::sync::atomic::AtomicU8::new(0),
        ack: std::sync::atomic::AtomicU64::new(0),
        ack_ms: std::sync::atomic::AtomicU64::new(now_ms()),
        kill: std::sync::atomic::AtomicBool::new(false),
    });
    shared.repl.add_peer(peer.clone());
    let partial = can_continue(shared, &hello.replid, hello.offset);
    let counter = match (partial, hello.replid.as_str()) {
        (true, _) => 1,
        (false, "?") => 0,
        (false, _) => 2,
    };
    shared.repl.syncs[counter].fetch_add(1, Ordering::Relaxed);
    if counter == 2 {
        shared.repl.syncs[0].fetch_add(1, Ordering::Relaxed);
    }
    let res = if partial {
        let replid = shared.repl.with_state(|s| s.replid.clone());
        let from = u64::try_from(hello.offset).unwrap_or(0);
        sock.write_all(format!("+CONTINUE {replid}\r\n").as_bytes())
            .map_err(|e| e.to_string())
            .map(|()| from)
    } else {
        full_sync(shared, &mut sock, &peer)
    };
    let result = res.and_then(|from| {
        peer.state.store(2, Ordering::Release);
        let reader = sock.try_clone().map_err(|e| e.to_string())?;
        let (s2, p2) = (shared.clone(), peer.clone());
        let pending = hello.pending;
        std::thread::Builder::new()
            .name(format!("cascade-repl-ack-{}", hello.id))
            .spawn(move || read_acks(&s2, reader, &p2, pending))
            .map_err(|e| e.to_string())?;
        stream(shared, &mut sock, &peer, from)
    });
    if let Err(e) = result {
        eprintln!(
            "cascade: replica {}:{} disconnected: {e}",
            hello.ip, hello.port
        );
    }
    let _ = sock.shutdown(std::net::Shutdown::Both);
    shared.repl.remove_peer(&peer);
    shared.repl.resolve_waiters();
}

/// Sends `+FULLRESYNC` and the snapshot; returns the offset the stream continues at.
fn full_sync(shared: &Shared, sock: &mut TcpStream, peer: &Peer) -> Result<u64, String> {
    let feed = shared.store.feed();
    let db = shared.store.db();
    let (snap, offset) = {
        let _g = feed.exclusive();
        (db.snapshot().map_err(|e| e.to_string())?, feed.offset())
    };
    let replid = shared.repl.with_state(|s| s.replid.clone());
    sock.write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    peer.state.store(1, Ordering::Release);
    let mut it = snap.iter(..).map_err(|e| e.to_string())?;
    let mut pairs = Vec::new();
    let mut bytes = 0usize;
    let t0 = Instant::now();
    let mut sent = 0u64;
    loop {
        let next = it.next();
        if it.failed() {
            return Err("reading the snapshot failed".into());
        }
        let done = next.is_none();
        if let Some(kv) = next {
            let (k, v) = kv.map_err(|e| e.to_string())?;
            if k == super::REPL_KEY {
                continue;
            }
            bytes += k.len() + v.len() + 8;
            pairs.push((k, v));
            sent += 1;
        }
        if (done && !pairs.is_empty()) || bytes >= CHUNK_BYTES {
            sock.write_all(&record::encode_chunk(&pairs))
                .map_err(|e| e.to_string())?;
            pairs.clear();
            bytes = 0;
            if peer.kill.load(Ordering::Acquire) || shared.shutting_down() {
                return Err("stopped during the full sync".into());
            }
        }
        if done {
            break;
        }
    }
    sock.write_all(&record::end()).map_err(|e| e.to_string())?;
    eprintln!(
        "cascade: full sync to {}:{}: {sent} entries at offset {offset} in {} ms",
        peer.ip,
        peer.port,
        t0.elapsed().as_millis()
    );
    Ok(offset + 1)
}

/// Streams records from `from` on until the replica goes or is killed.
fn stream(shared: &Shared, sock: &mut TcpStream, peer: &Peer, mut from: u64) -> Result<(), String> {
    let feed = shared.store.feed();
    let mut last_send = Instant::now();
    loop {
        if peer.kill.load(Ordering::Acquire) {
            return Err("disconnected by this node (role change or CLIENT KILL)".into());
        }
        if shared.shutting_down() {
            return Ok(());
        }
        match feed.read_from(from, STREAM_BYTES, Duration::from_millis(100)) {
            Ok(b) if b.is_empty() => {
                if last_send.elapsed() >= Duration::from_secs(1) {
                    sock.write_all(&record::heartbeat())
                        .map_err(|e| e.to_string())?;
                    last_send = Instant::now();
                }
            }
            Ok(b) => {
                sock.write_all(&b).map_err(|e| e.to_string())?;
                from += b.len() as u64;
                last_send = Instant::now();
            }
            Err(record_gone) => {
                let _ = record_gone;
                return Err(format!(
                    "offset {from} is no longer in the backlog (repl-backlog-size too small for \
                     the write rate); the replica will do a full sync"
                ));
            }
        }
    }
}

/// Reads `REPLCONF ACK <offset>` commands (RESP arrays) from the replica.
fn read_acks(shared: &Shared, mut sock: TcpStream, peer: &Peer, mut buf: Vec<u8>) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(500)));
    let mut chunk = [0u8; 4096];
    let timeout_ms = shared.repl.settings.lock().timeout_secs * 1000;
    loop {
        while let Some((args, used)) = parse_array(&buf) {
            buf.drain(..used);
            if args.len() >= 3
                && args[0].eq_ignore_ascii_case(b"replconf")
                && args[1].eq_ignore_ascii_case(b"ack")
            {
                if let Some(off) = std::str::from_utf8(&args[2])
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    peer.ack.fetch_max(off, Ordering::AcqRel);
                    peer.ack_ms.store(now_ms(), Ordering::Release);
                    shared.repl.resolve_waiters();
                }
            }
        }
        if peer.kill.load(Ordering::Acquire) || shared.shutting_down() {
            return;
        }
        match sock.read(&mut chunk) {
            Ok(0) => {
                peer.kill.store(true, Ordering::Release);
                return;
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if now_ms().saturating_sub(peer.ack_ms.load(Ordering::Acquire)) > timeout_ms {
                    eprintln!(
                        "cascade: replica {}:{} sent no ACK for {} s: disconnecting",
                        peer.ip,
                        peer.port,
                        timeout_ms / 1000
                    );
                    peer.kill.store(true, Ordering::Release);
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                peer.kill.store(true, Ordering::Release);
                return;
            }
        }
        if buf.len() > 1 << 20 {
            peer.kill.store(true, Ordering::Release);
            return;
        }
    }
}

/// One RESP array of bulk strings at the start of `buf`, and its length.
pub(crate) fn parse_array(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    fn line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
        let rest = buf.get(at..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        Some((&rest[..end], at + end + 2))
    }
    let (head, mut at) = line(buf, 0)?;
    let n: usize = std::str::from_utf8(head.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut args = Vec::with_capacity(n.min(16));
    for _ in 0..n {
        let (h, next) = line(buf, at)?;
        let len: usize = std::str::from_utf8(h.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        let body = buf.get(next..next + len)?;
        if buf.get(next + len..next + len + 2)? != b"\r\n" {
            return None;
        }
        args.push(body.to_vec());
        at = next + len + 2;
    }
    Some((args, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_acks() {
        let b = b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$2\r\n42\r\n*1";
        let (args, used) = parse_array(b).expect("test");
        assert_eq!(
            args,
            vec![b"REPLCONF".to_vec(), b"ACK".to_vec(), b"42".to_vec()]
        );
        assert_eq!(used, b.len() - 2);
        assert!(parse_array(&b[used..]).is_none());
        assert!(parse_array(b"*1\r\n$5\r\nab").is_none());
    }
}
