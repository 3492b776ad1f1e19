//! Starting a real `cascade serve` process for behaviour tests.
//!
//! Each [`Server`] gets its own temporary data directory and a free port (the server
//! binds port 0 and prints the address it chose). Dropping it kills the process (if
//! still running) and removes the directory unless `keep_dir` was set.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `cascade serve`.
pub struct Server {
    pub child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    pub keep_dir: bool,
    /// Lines the server printed on stdout after the listening line (filled by `stop`).
    pub stdout_rest: String,
    stdout: Option<BufReader<std::process::ChildStdout>>,
}

/// A fresh temporary directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "cascade-test-{tag}-{}-{n}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

impl Server {
    /// Starts a server on a fresh directory with extra arguments.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_in(&temp_dir("srv"), extra)
    }

    /// Starts a server on `dir` (reopening whatever store is there).
    pub fn start_in(dir: &Path, extra: &[&str]) -> Server {
        Server::try_start_in(dir, extra, None).unwrap_or_else(|(code, _)| {
            panic!("cascade serve exited before listening: exit code {code:?}")
        })
    }

    /// Like [`Server::start_in`] (`--pool-size 512M` unless `extra` sets one), with
    /// stderr written to the file `stderr` if given: a server that exits before it
    /// listens is `Err((exit code, its stderr))` instead of a panic.
    pub fn try_start_in(
        dir: &Path,
        extra: &[&str],
        stderr: Option<&Path>,
    ) -> Result<Server, (Option<i32>, String)> {
        Server::try_start_env(dir, extra, stderr, &[])
    }

    /// [`Server::start_in`] with environment variables set for the server.
    #[allow(dead_code)]
    pub fn start_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::try_start_env(dir, extra, None, env).unwrap_or_else(|(code, _)| {
            panic!("cascade serve exited before listening: exit code {code:?}")
        })
    }

    fn try_start_env(
        dir: &Path,
        extra: &[&str],
        stderr: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Result<Server, (Option<i32>, String)> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cascade"));
        cmd.envs(env.iter().copied());
        cmd.arg("serve")
            .arg("--dir")
            .arg(dir)
            .args(["--port", "0", "--threads", "2"]);
        if !extra.contains(&"--pool-size") {
            cmd.args(["--pool-size", "512M"]);
        }
        let err = match stderr {
            Some(p) => Stdio::from(std::fs::File::create(p).expect("create stderr file")),
            None => Stdio::inherit(),
        };
        cmd.args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err);
        let mut child = cmd.spawn().expect("spawn cascade serve");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut port = 0;
        let mut line = String::new();
        while Instant::now() < deadline {
            line.clear();
            if out.read_line(&mut line).expect("read server stdout") == 0 {
                let code = child.wait().expect("wait for cascade serve").code();
                let text = stderr
                    .map(|p| std::fs::read_to_string(p).unwrap_or_default())
                    .unwrap_or_default();
                return Err((code, text));
            }
            if let Some(rest) = line.strip_prefix("cascade: listening on ") {
                let addr = rest.split_whitespace().next().expect("address");
                port = addr
                    .rsplit(':')
                    .next()
                    .expect("port")
                    .parse()
                    .expect("port number");
                break;
            }
        }
        if port == 0 {
            // Never leave a server running behind a failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("server did not report its port within 60 s");
        }
        Ok(Server {
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
            keep_dir: false,
            stdout_rest: String::new(),
            stdout: Some(out),
        })
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A connected client socket with a read timeout.
    pub fn connect(&self) -> Client {
        let s = TcpStream::connect(self.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Client { s, buf: Vec::new() }
    }

    /// Sends SIGTERM (or SIGINT) and waits for exit; returns the exit status code.
    pub fn signal_and_wait(&mut self, sig: &str) -> Option<i32> {
        let child = self.child.as_mut().expect("running");
        let st = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(st.success());
        self.wait()
    }

    /// Waits for the process to exit (up to 60 s) and collects its remaining stdout.
    pub fn wait(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                if let Some(mut o) = self.stdout.take() {
                    let _ = o.read_to_string(&mut self.stdout_rest);
                }
                return st.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("server did not exit within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (a crash of the server process).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A raw RESP client for tests.
pub struct Client {
    pub s: TcpStream,
    buf: Vec<u8>,
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
    /// A RESP3 push frame (`>`).
    #[allow(dead_code)]
    Push(Vec<Reply>),
}

impl Reply {
    /// The bulk bytes as a string (panics otherwise).
    pub fn text(&self) -> String {
        match self {
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Simple(s) => s.clone(),
            other => panic!("not a string reply: {other:?}"),
        }
    }
}

impl Client {
    /// Encodes `args` as a RESP array and sends it.
    pub fn send(&mut self, args: &[&[u8]]) {
        self.s.write_all(&encode(args)).expect("send");
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, b: &[u8]) {
        self.s.write_all(b).expect("send raw");
    }

    /// Sends one command and reads its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.send(&a);
        self.read().expect("reply")
    }

    /// Sends one command and reads its reply; `None` on any I/O error or a closed
    /// connection (a server being killed).
    #[allow(dead_code)]
    pub fn try_cmd(&mut self, args: &[&str]) -> Option<Reply> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        self.s.write_all(&encode(&a)).ok()?;
        self.read_result().ok().flatten()
    }

    /// Reads one reply; `None` if the server closed the connection.
    pub fn read(&mut self) -> Option<Reply> {
        self.read_result().unwrap_or_else(|e| panic!("read: {e}"))
    }

    fn read_result(&mut self) -> std::io::Result<Option<Reply>> {
        loop {
            if let Some((r, n)) = parse_reply(&self.buf) {
                self.buf.drain(..n);
                return Ok(Some(r));
            }
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a complete reply arrives within `d` (it stays buffered for `read`).
    #[allow(dead_code)]
    pub fn reply_within(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let old = self.s.read_timeout().ok().flatten();
        let mut got = parse_reply(&self.buf).is_some();
        while !got {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.s.set_read_timeout(Some(left)).expect("timeout");
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break
                }
                Err(e) => panic!("read: {e}"),
            }
            got = parse_reply(&self.buf).is_some();
        }
        self.s.set_read_timeout(old).expect("timeout");
        got
    }

    /// True if the server closed the connection (after any pending replies).
    pub fn closed(&mut self) -> bool {
        self.read().is_none()
    }
}

/// RESP encoding of a command.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

fn line(b: &[u8]) -> Option<(&str, usize)> {
    let i = b.windows(2).position(|w| w == b"\r\n")?;
    Some((std::str::from_utf8(&b[1..i]).ok()?, i + 2))
}

/// Parses one RESP2 reply from the front of `b`: (reply, bytes used).
pub fn parse_reply(b: &[u8]) -> Option<(Reply, usize)> {
    let first = *b.first()?;
    let (l, n) = line(b)?;
    match first {
        b'+' => Some((Reply::Simple(l.to_string()), n)),
        b'-' => Some((Reply::Error(l.to_string()), n)),
        b':' => Some((Reply::Int(l.parse().ok()?), n)),
        b'$' => {
            let len: i64 = l.parse().ok()?;
            if len < 0 {
                return Some((Reply::Bulk(None), n));
            }
            let end = n + len as usize;
            if b.len() < end + 2 {
                return None;
            }
            Some((Reply::Bulk(Some(b[n..end].to_vec())), end + 2))
        }
        b'_' => Some((Reply::Bulk(None), n)),
        b'*' | b'>' | b'%' | b'~' => {
            let mut len: i64 = l.parse().ok()?;
            if len < 0 {
                return Some((Reply::Array(None), n));
            }
            if first == b'%' {
                len *= 2;
            }
            let mut items = Vec::new();
            let mut pos = n;
            for _ in 0..len {
                let (r, m) = parse_reply(&b[pos..])?;
                items.push(r);
                pos += m;
            }
            if first == b'>' {
                return Some((Reply::Push(items), pos));
            }
            Some((Reply::Array(Some(items)), pos))
        }
        _ => panic!(
            "unexpected reply byte {first:?} in {:?}",
            String::from_utf8_lossy(b)
        ),
    }
}

/// Runs an external program; panics with a clear message if it is not installed.
pub fn require_tool(name: &str) -> PathBuf {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .expect("sh");
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !p.is_empty(),
        "{name} is not installed: run ./scripts/test.sh (it installs the client tools) or see README 'Tests'"
    );
    PathBuf::from(p)
}

/// A raw RESP client connected to any address (a proxy in front of servers, say).
pub fn connect_addr(addr: &str) -> Client {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.set_nodelay(true).expect("nodelay");
    Client { s, buf: Vec::new() }
}
