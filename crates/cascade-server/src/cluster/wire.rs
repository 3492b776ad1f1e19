//! A minimal blocking RESP2 client: what a migration needs to speak to the
//! destination node (pipelined commands, simple/error/integer/bulk replies).
//!
//! One connection per migration, owned by the migration thread; no shared state.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A reply, enough of RESP2 for RESTORE/DEL/CLUSTERX answers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+...`, `:...` or a bulk string.
    Ok(Vec<u8>),
    /// `-...`.
    Err(String),
}

/// A connection to another node.
pub(crate) struct Conn {
    rd: BufReader<TcpStream>,
    wr: TcpStream,
    buf: Vec<u8>,
    pending: usize,
}

fn io_err(m: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, m.into())
}

impl Conn {
    /// Connects to `addr` with a 5 s connect timeout and a 30 s read timeout.
    pub(crate) fn connect(addr: &str) -> std::io::Result<Conn> {
        let sa = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io_err(format!("cannot resolve {addr}")))?;
        let s = TcpStream::connect_timeout(&sa, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            rd: BufReader::new(s.try_clone()?),
            wr: s,
            buf: Vec::new(),
            pending: 0,
        })
    }

    /// Connects to `addr` within `timeout`, which also bounds each later read and
    /// write (MIGRATE's timeout).
    pub(crate) fn connect_within(addr: &str, timeout: Duration) -> std::io::Result<Conn> {
        let sa = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io_err(format!("cannot resolve {addr}")))?;
        let s = TcpStream::connect_timeout(&sa, timeout)?;
        s.set_nodelay(true)?;
        let mut c = Conn {
            rd: BufReader::new(s.try_clone()?),
            wr: s,
            buf: Vec::new(),
            pending: 0,
        };
        c.set_timeout(timeout)?;
        Ok(c)
    }

    /// Bounds each read and write by `timeout`.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.wr.set_read_timeout(Some(timeout))?;
        self.wr.set_write_timeout(Some(timeout))
    }

    /// Queues one command (sent by [`Conn::flush`]).
    pub(crate) fn queue(&mut self, args: &[&[u8]]) {
        use std::io::Write as _;
        let _ = write!(self.buf, "*{}\r\n", args.len());
        for a in args {
            let _ = write!(self.buf, "${}\r\n", a.len());
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
        self.pending += 1;
    }

    /// Sends the queued commands and reads their replies in order.
    pub(crate) fn flush(&mut self) -> std::io::Result<Vec<Reply>> {
        self.wr.write_all(&self.buf)?;
        self.buf.clear();
        let n = std::mem::take(&mut self.pending);
        (0..n).map(|_| self.read()).collect()
    }

    /// Sends one command; an error reply is an `Err`.
    pub(crate) fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
        self.queue(args);
        match self.flush()?.pop() {
            Some(Reply::Ok(v)) => Ok(v),
            Some(Reply::Err(e)) => Err(io_err(e)),
            None => Err(io_err("no reply")),
        }
    }

    fn line(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = Vec::new();
        self.rd.read_until(b'\n', &mut l)?;
        if !l.ends_with(b"\r\n") {
            return Err(io_err("connection closed mid-reply"));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let l = self.line()?;
        let (t, rest) = l.split_first().ok_or_else(|| io_err("empty reply"))?;
        match t {
            b'+' | b':' => Ok(Reply::Ok(rest.to_vec())),
            b'-' => Ok(Reply::Err(String::from_utf8_lossy(rest).into_owned())),
            b'$' => {
                let n: i64 = std::str::from_utf8(rest)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| io_err("bad bulk length"))?;
                let Ok(n) = usize::try_from(n) else {
                    return Ok(Reply::Ok(Vec::new()));
                };
                let mut v = vec![0; n + 2];
                self.rd.read_exact(&mut v)?;
                v.truncate(n);
                Ok(Reply::Ok(v))
            }
            _ => Err(io_err("unexpected reply type")),
        }
    }
}
