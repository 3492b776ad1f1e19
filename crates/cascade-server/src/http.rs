//! A minimal HTTP/1.1 endpoint for Prometheus: `GET /metrics` answers the text
//! exposition format; anything else gets 404 (or 405 for other methods). One thread,
//! one request per connection, requests bounded to 8 KiB and 2 s.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::shared::Shared;

/// Binds `addr` and serves until shutdown. Returns the thread.
pub(crate) fn start(
    shared: Arc<Shared>,
    addr: SocketAddr,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    println!(
        "cascade: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    std::thread::Builder::new()
        .name("cascade-metrics".into())
        .spawn(move || {
            while !shared.shutting_down() {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = serve(&shared, s);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })
}

fn serve(shared: &Shared, mut s: TcpStream) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    // One deadline for the whole request: a client trickling bytes cannot hold the
    // thread (or shutdown) longer than this.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        s.set_read_timeout(Some(left))?;
        let n = s.read(&mut chunk)?;
        if n == 0 || buf.len() > 8192 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => ("200 OK", crate::info::prometheus(shared)),
        ("GET", _) => ("404 Not Found", "not found: try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET\n".to_string()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(resp.as_bytes())
}
