//! In-process test harness for command semantics: a real engine `Db` on a temporary
//! directory, the real store and command table, one client. Commands go through
//! [`dispatch`] exactly as a worker runs them; tests compare the exact RESP bytes.
//! Test-only; one thread.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cascadekv::{Db, Options};

use super::{dispatch, Client, Commands, Ctx};
use crate::config::ServerConfig;
use crate::metrics::{Metrics, WorkerStats};
use crate::resp::parse::Command;
use crate::resp::reply::Out;
use crate::shared::Shared;
use crate::store::Store;

/// A decoded reply (just enough of RESP for assertions).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// `+...`, `-...` and bulk strings.
    Str(String),
    /// `:n`.
    Int(i64),
    /// Nulls.
    Nil,
    /// Arrays, maps (as flat arrays), sets.
    Arr(Vec<Value>),
}

/// Decodes one reply from `b` at `*pos`.
pub(crate) fn decode(b: &[u8], pos: &mut usize) -> Value {
    let line_end = b[*pos..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| *pos + i)
        .expect("a complete reply line");
    let kind = b[*pos];
    let line = String::from_utf8_lossy(&b[*pos + 1..line_end]).into_owned();
    *pos = line_end + 2;
    match kind {
        b'+' | b'-' | b',' => Value::Str(line),
        b':' => Value::Int(line.parse().expect("integer reply")),
        b'$' | b'=' | b'*' | b'~' | b'>' if line == "-1" => Value::Nil,
        b'_' => Value::Nil,
        b'$' | b'=' => {
            let n: usize = line.parse().expect("bulk length");
            let s = String::from_utf8_lossy(&b[*pos..*pos + n]).into_owned();
            *pos += n + 2;
            Value::Str(s)
        }
        b'*' | b'~' | b'>' | b'%' => {
            let mut n: usize = line.parse().expect("aggregate length");
            if kind == b'%' {
                n *= 2;
            }
            Value::Arr((0..n).map(|_| decode(b, pos)).collect())
        }
        other => panic!("unexpected reply type {}", other as char),
    }
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// One store, one client.
pub(crate) struct Kit {
    dir: PathBuf,
    /// The server state (store, metrics, ...).
    pub(crate) shared: Arc<Shared>,
    commands: Commands,
    /// The client the commands run as.
    pub(crate) client: Client,
    /// Its reply buffer (RESP3 after `HELLO 3`).
    pub(crate) out: Out,
}

impl Kit {
    /// A fresh empty store.
    pub(crate) fn new() -> Kit {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!(
            "cascade-server-kit-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = Options {
            pool_size: 512 << 20,
            chunk_size: 1 << 20,
            ..Options::default()
        };
        let db = Arc::new(Db::open(&dir, opts.clone()).expect("open a test store"));
        let store = Store::open(db, 16).expect("open the keyspace");
        let commands = Commands::default();
        let metrics = Metrics::new(
            commands.names(),
            vec![Arc::new(WorkerStats::new(commands.specs.len()))],
        );
        let cfg = ServerConfig {
            dir: dir.clone(),
            engine: opts,
            threads: 1,
            ..ServerConfig::default()
        };
        let shared = Arc::new(Shared::new(store, cfg, 6380, metrics));
        crate::scripting::start(&shared).expect("start the script thread");
        Kit {
            dir,
            shared,
            commands,
            client: Client::new(1, "127.0.0.1:50000".into(), true),
            out: Out::new(),
        }
    }

    /// Runs one command; returns its raw reply.
    pub(crate) fn raw(&mut self, args: &[&str]) -> String {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        String::from_utf8_lossy(&self.bytes(&args)).into_owned()
    }

    /// Runs one command with binary arguments; returns its raw reply bytes.
    pub(crate) fn bytes(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let cmd = Command::from_args(args);
        let start = self.out.buf.len();
        let mut ctx = Ctx {
            shared: &self.shared,
            commands: &self.commands,
            client: &mut self.client,
            out: &mut self.out,
        };
        let ran = dispatch(&mut ctx, &cmd);
        if let Some(w) = self.shared.metrics.workers.first() {
            w.record(ran.idx, ran.failed, std::time::Duration::ZERO);
        }
        if let Some(t) = ran.block {
            return format!("(blocked {t})").into_bytes();
        }
        let reply = self.out.buf[start..].to_vec();
        self.out.buf.clear();
        reply
    }

    /// Runs a command and checks its exact reply.
    #[track_caller]
    pub(crate) fn expect(&mut self, args: &[&str], want: &str) {
        let got = self.raw(args);
        assert_eq!(got, want, "reply to {args:?}");
    }

    /// Runs a command that must answer `+OK`.
    #[track_caller]
    pub(crate) fn ok(&mut self, args: &[&str]) {
        self.expect(args, "+OK\r\n");
    }

    /// Runs a command and decodes its reply.
    pub(crate) fn value(&mut self, args: &[&str]) -> Value {
        let raw = self.raw(args);
        decode(raw.as_bytes(), &mut 0)
    }

    /// Runs a command that answers an integer.
    #[track_caller]
    pub(crate) fn int(&mut self, args: &[&str]) -> i64 {
        match self.value(args) {
            Value::Int(n) => n,
            v => panic!("{args:?} answered {v:?}"),
        }
    }

    /// Runs a command that answers a flat array of strings (or a bulk string: its
    /// lines).
    #[track_caller]
    pub(crate) fn strings(&mut self, args: &[&str]) -> Vec<String> {
        match self.value(args) {
            Value::Arr(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::Str(s) => s,
                    Value::Int(n) => n.to_string(),
                    other => panic!("{args:?}: element {other:?}"),
                })
                .collect(),
            Value::Str(s) => s.lines().map(str::to_string).collect(),
            v => panic!("{args:?} answered {v:?}"),
        }
    }

    /// Runs SCAN-shaped command: (next cursor, items).
    #[track_caller]
    pub(crate) fn scan(&mut self, args: &[&str]) -> (String, Vec<String>) {
        match self.value(args) {
            Value::Arr(v) => match &v[..] {
                [Value::Str(cur), Value::Arr(items)] => (
                    cur.clone(),
                    items
                        .iter()
                        .map(|i| match i {
                            Value::Str(s) => s.clone(),
                            other => panic!("{other:?}"),
                        })
                        .collect(),
                ),
                other => panic!("{other:?}"),
            },
            v => panic!("{args:?} answered {v:?}"),
        }
    }

    /// Runs the expiry sweeper once.
    pub(crate) fn sweep(&self) -> usize {
        self.shared.store.sweep_expired(1000).expect("sweep")
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = self.shared.store.db().close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
