//! Replication between `CascadeKV` nodes, as Redis replicas work from the outside:
//! `REPLICAOF`, the handshake over the Redis port (`PING`, `AUTH`, `REPLCONF`,
//! `PSYNC replid offset`), a full sync from an engine snapshot, then the stream of
//! committed batches; partial resync from the backlog (also by the second replication
//! id after a promotion); `WAIT`, `ROLE` and `INFO replication` with Redis's fields,
//! so Redis Sentinel can drive failover.
//!
//! One concept per file: `backlog` (the stream and its bounded backlog, fed by
//! `Store::commit`), `record` (the node-to-node frame format), `primary` (serving a
//! replica: full sync and streaming, its acks), `replica` (the link to a primary:
//! handshake, loading, applying), `apply` (applying records to the engine with the
//! replication position in the same batch), `raise` (the WATCH, client-side-caching
//! and keyspace notifications of applied records), `info` (`INFO replication`, `ROLE`),
//! `settings` (the replication parameters, `--config` and `CONFIG REWRITE`).
//!
//! Invariants: a replica's engine holds, in the reserved entry [`REPL_KEY`], the
//! replication id and offset of exactly the records it has applied (written in the
//! same engine batch as each record), so a restarted replica resumes with a partial
//! resync; a node that accepts writes as a primary has no such entry (it is deleted at
//! start as a primary and at `REPLICAOF NO ONE`), so its history can never be mistaken
//! for a primary's. A store in the middle of a full sync carries the mark
//! [`SYNC_KEY`] (its data is partial): started as a replica it loads a full sync again
//! and answers `-LOADING` until then; started as a primary it refuses to start
//! ([`PARTIAL_SYNC`]); `REPLICAOF NO ONE` on it discards the partial data. So partial
//! data is never served.
//!
//! Locks: `state` (a mutex) guards the role, the replication ids and the link status;
//! `peers` (a mutex) the list of connected replicas (each [`Peer`]'s fields are
//! atomics); `waiters` (a mutex) the clients parked in `WAIT`; `settings` its own
//! mutex. None is held while another of them is taken, nor across I/O.

pub(crate) mod apply;
pub(crate) mod backlog;
pub(crate) mod info;
pub(crate) mod primary;
pub(crate) mod raise;
pub(crate) mod record;
pub(crate) mod replica;
pub(crate) mod settings;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{CmdError, CmdResult};
use crate::keyspace::now_ms;
use crate::scripting::Slot;
use crate::shared::Shared;

/// The engine entry holding a replica's replication id and applied offset
/// (`docs/formats.md`): namespace `0x0D`, beside the database map.
pub(crate) const REPL_KEY: &[u8] = &[0x0D, b'r', b'e', b'p', b'l'];

/// The engine entry marking a full sync in progress (`docs/formats.md` §14): present
/// from before the first record of a full sync is applied until the batch that ends
/// it; its value is empty.
pub(crate) const SYNC_KEY: &[u8] = &[0x0D, b's', b'y', b'n', b'c'];

/// Why a store marked [`SYNC_KEY`] does not start as a primary.
pub(crate) const PARTIAL_SYNC: &str = "this data directory holds a full sync from a primary \
that did not complete (the replica stopped in the middle of it), so its data is partial \
and is not served. Restart with --replicaof <host> <port> (or `replicaof` in the --config \
file) to load a full sync again, or move the directory away to start an empty primary";

/// How the link to the primary stands (`ROLE`'s state, `master_link_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// Not connected; will retry.
    Connect,
    /// Connecting or in the handshake.
    Connecting,
    /// Receiving the full sync.
    Sync,
    /// Streaming.
    Connected,
}

/// Role and identity. Guarded by `Repl::state`.
#[derive(Debug)]
pub(crate) struct State {
    /// The replication id of the history this node holds.
    pub(crate) replid: String,
    /// The id of the history before the last promotion ("000…" if none).
    pub(crate) replid2: String,
    /// The first offset not covered by `replid2` (-1: none).
    pub(crate) second_offset: i64,
    /// The primary this node replicates (`None`: it is a primary).
    pub(crate) master: Option<(String, u16)>,
    /// The link's state (replicas).
    pub(crate) link: Link,
    /// When the link went down (`None`: up, or never connected).
    pub(crate) down_since: Option<Instant>,
    /// Last time bytes came from the primary.
    pub(crate) last_io: Instant,
    /// Why the last attempt failed (logged once per change).
    pub(crate) last_error: String,
}

/// A replica connected to this node.
#[derive(Debug)]
pub(crate) struct Peer {
    /// Client id of its connection.
    pub(crate) id: u64,
    /// Its address as announced (`REPLCONF ip-address`, else the peer address).
    pub(crate) ip: String,
    /// Its listening port (`REPLCONF listening-port`).
    pub(crate) port: u16,
    /// 0 `wait_bgsave`, 1 `send_bulk`, 2 `online`.
    pub(crate) state: AtomicU8,
    /// The offset it acknowledged.
    pub(crate) ack: AtomicU64,
    /// When it last acknowledged (Unix ms).
    pub(crate) ack_ms: AtomicU64,
    /// Set to disconnect it.
    pub(crate) kill: AtomicBool,
}

struct Waiter {
    slot: Arc<Slot>,
    target: u64,
    need: usize,
    deadline: Option<Instant>,
}

/// What a connection told us in `REPLCONF` before `PSYNC` (kept in its `Client`).
#[derive(Debug, Default, Clone)]
pub(crate) struct ConnRepl {
    /// `REPLCONF listening-port`.
    pub(crate) listening_port: u16,
    /// `REPLCONF ip-address`.
    pub(crate) ip: Option<String>,
    /// `PSYNC replid offset` was received: the worker hands the socket over.
    pub(crate) psync: Option<(String, i64)>,
}

/// Replication state of the node. See the module docs.
pub(crate) struct Repl {
    state: Mutex<State>,
    peers: Mutex<Vec<Arc<Peer>>>,
    waiters: Mutex<Vec<Waiter>>,
    /// Replication parameters (`settings.rs`).
    pub(crate) settings: Mutex<settings::Settings>,
    /// A full sync is being loaded: commands answer `-LOADING`.
    loading: AtomicBool,
    /// Bytes of full-sync data applied since loading began (INFO
    /// `loading_loaded_bytes`).
    loaded: AtomicU64,
    /// Bumped at every role change; a link thread of an older generation exits.
    generation: AtomicU64,
    /// Full syncs served, partial resyncs accepted, partial resyncs refused (INFO
    /// `sync_full`, `sync_partial_ok`, `sync_partial_err`).
    pub(crate) syncs: [AtomicU64; 3],
    /// The server state this belongs to (set by [`start`]; threads need an `Arc`).
    me: std::sync::OnceLock<std::sync::Weak<Shared>>,
}

impl std::fmt::Debug for Repl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repl").finish_non_exhaustive()
    }
}

/// A fresh 40-character replication id.
pub(crate) fn new_replid() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let seed = format!(
        "{}:{}:{n}:{:?}",
        now_ms(),
        std::process::id(),
        Instant::now()
    );
    let h = |salt: &str| crate::hash::hash64(format!("{salt}{seed}").as_bytes());
    format!("{:016x}{:016x}{:08x}", h("a"), h("b"), h("c") & 0xffff_ffff)
}

impl Default for Repl {
    fn default() -> Self {
        Repl::new(settings::Settings::default())
    }
}

impl Repl {
    /// A primary with a fresh id and the given settings.
    pub(crate) fn new(settings: settings::Settings) -> Repl {
        Repl {
            state: Mutex::new(State {
                replid: new_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
                master: None,
                link: Link::Connect,
                down_since: None,
                last_io: Instant::now(),
                last_error: String::new(),
            }),
            peers: Mutex::new(Vec::new()),
            waiters: Mutex::new(Vec::new()),
            settings: Mutex::new(settings),
            loading: AtomicBool::new(false),
            loaded: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            me: std::sync::OnceLock::new(),
            syncs: Default::default(),
        }
    }

    /// The server state, for starting threads (`None` before [`start`]).
    pub(crate) fn shared(&self) -> Option<Arc<Shared>> {
        self.me.get().and_then(std::sync::Weak::upgrade)
    }

    /// Runs `f` on the state.
    pub(crate) fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock())
    }

    /// True while a full sync is loading.
    pub(crate) fn loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    pub(crate) fn set_loading(&self, on: bool) {
        self.loaded.store(0, Ordering::Relaxed);
        self.loading.store(on, Ordering::Release);
    }

    /// Bytes of full-sync data applied since loading began.
    pub(crate) fn loaded_bytes(&self) -> u64 {
        self.loaded.load(Ordering::Relaxed)
    }

    /// Counts `n` more bytes of full-sync data applied.
    pub(crate) fn add_loaded(&self, n: u64) {
        self.loaded.fetch_add(n, Ordering::Relaxed);
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Connected replicas.
    pub(crate) fn peers(&self) -> Vec<Arc<Peer>> {
        self.peers.lock().clone()
    }

    pub(crate) fn add_peer(&self, p: Arc<Peer>) {
        self.peers.lock().push(p);
    }

    pub(crate) fn remove_peer(&self, p: &Arc<Peer>) {
        self.peers.lock().retain(|x| !Arc::ptr_eq(x, p));
    }

    /// Disconnects every replica of this node.
    pub(crate) fn kill_peers(&self) {
        for p in self.peers.lock().iter() {
            p.kill.store(true, Ordering::Release);
        }
    }

    /// Replicas that acknowledged `target` or more.
    pub(crate) fn acked(&self, target: u64) -> usize {
        self.peers
            .lock()
            .iter()
            .filter(|p| p.ack.load(Ordering::Acquire) >= target)
            .count()
    }

    /// Parks a `WAIT` until `need` replicas acknowledged `target` or `timeout_ms`
    /// passes (0: no limit); `slot` gets the reply.
    pub(crate) fn park_wait(&self, slot: Arc<Slot>, target: u64, need: usize, timeout_ms: u64) {
        let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
        self.waiters.lock().push(Waiter {
            slot,
            target,
            need,
            deadline,
        });
        self.resolve_waiters();
    }

    /// Answers every `WAIT` that is satisfied or out of time.
    pub(crate) fn resolve_waiters(&self) {
        let mut ws = self.waiters.lock();
        if ws.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut done = Vec::new();
        ws.retain(|w| {
            let n = self.acked(w.target);
            if n >= w.need || w.deadline.is_some_and(|d| d <= now) {
                done.push((w.slot.clone(), n));
                false
            } else {
                true
            }
        });
        drop(ws);
        for (slot, n) in done {
            slot.fill(format!(":{n}\r\n").into_bytes());
        }
    }

    /// True while a `WAIT` is parked.
    fn has_waiters(&self) -> bool {
        !self.waiters.lock().is_empty()
    }
}

/// Commands a loading replica still answers (Redis's `loading`-flagged ones that
/// Sentinel and operators use).
const LOADING_OK: &[&str] = &[
    "info",
    "ping",
    "replicaof",
    "slaveof",
    "role",
    "config",
    "client",
    "auth",
    "hello",
    "command",
    "shutdown",
    "quit",
    "select",
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "publish",
    "replconf",
    "multi",
    "exec",
    "discard",
    "time",
    "lastsave",
];

/// The error a command gets from this node's role, if any: `-LOADING` while a full
/// sync loads, `-READONLY` for a write on a replica. Dispatch asks after the cluster
/// check, so a replica in cluster mode redirects writes with MOVED, as Redis does.
pub(crate) fn refuse(shared: &Shared, spec: &crate::cmd::Spec) -> Option<&'static str> {
    if shared.repl.loading() && !LOADING_OK.contains(&spec.name) {
        return Some("LOADING Redis is loading the dataset in memory");
    }
    if spec.writes() && shared.store.feed().is_replica() {
        return Some("READONLY You can't write against a read only replica.");
    }
    None
}

/// Reads the stored replication position (if this store was a replica).
fn stored_position(shared: &Shared) -> CmdResult<Option<(String, u64)>> {
    let Some(v) = shared.store.db().get(REPL_KEY)? else {
        return Ok(None);
    };
    apply::decode_position(&v)
        .map(Some)
        .ok_or_else(|| CmdError::Engine("ERR the stored replication position is damaged".into()))
}

/// Starts replication at server start: as a replica of `--replicaof` (or the config
/// file's `replicaof`), resuming from the stored position if there is one; otherwise
/// as a primary. Also starts the thread that times out `WAIT`.
///
/// # Errors
/// Reading or deleting the stored position failed; a thread could not start.
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let _ = shared.repl.me.set(Arc::downgrade(shared));
    let feed = shared.store.feed();
    if let Some(path) = &shared.fixed.config_file {
        let loaded = settings::Settings::load(path, &|b| feed.set_capacity(b))
            .map_err(std::io::Error::other)?;
        *shared.repl.settings.lock() = loaded;
    }
    if let Some(m) = &shared.fixed.replicaof {
        shared.repl.settings.lock().replicaof = Some(m.clone());
    }
    let master = shared.repl.settings.lock().replicaof.clone();
    let partial = shared
        .store
        .db()
        .get(SYNC_KEY)
        .map_err(|e| std::io::Error::other(e.to_string()))?
        .is_some();
    if partial {
        if master.is_none() {
            return Err(std::io::Error::other(PARTIAL_SYNC));
        }
        // Nothing is served until a full sync completes (the link starts one: the
        // stored position went with the mark's batch).
        eprintln!("cascade: the last full sync did not complete; loading one again");
        shared.repl.set_loading(true);
    }
    let pos = stored_position(shared).map_err(|e| std::io::Error::other(e.to_string()))?;
    match (&master, pos) {
        (Some(_), Some((replid, offset))) => {
            shared.repl.with_state(|s| s.replid = replid);
            shared.store.feed().reset(offset);
        }
        (None, Some(_)) => {
            // Serving writes as a primary: the stored position would lie.
            shared
                .store
                .db()
                .delete(REPL_KEY)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        _ => {}
    }
    if let Some((host, port)) = master {
        become_replica(shared, host, port);
    }
    let s = shared.clone();
    std::thread::Builder::new()
        .name("cascade-repl-cron".into())
        .spawn(move || {
            while !s.shutting_down() {
                let busy = s.repl.has_waiters();
                std::thread::sleep(Duration::from_millis(if busy { 5 } else { 100 }));
                s.repl.resolve_waiters();
            }
            // Shutdown: every parked WAIT hears back.
            for w in std::mem::take(&mut *s.repl.waiters.lock()) {
                w.slot
                    .fill(format!(":{}\r\n", s.repl.acked(w.target)).into_bytes());
            }
        })?;
    Ok(())
}

/// Makes this node a replica of `host:port` (keeping its id and offset, so it can
/// continue partially from a primary that shares its history).
pub(crate) fn become_replica(shared: &Arc<Shared>, host: String, port: u16) {
    let feed = shared.store.feed();
    feed.activate();
    feed.set_replica(true);
    let gen = shared.repl.generation.fetch_add(1, Ordering::AcqRel) + 1;
    shared.repl.with_state(|s| {
        s.master = Some((host.clone(), port));
        s.link = Link::Connect;
        s.down_since = Some(Instant::now());
        s.last_error.clear();
    });
    shared.repl.settings.lock().replicaof = Some((host.clone(), port));
    // Replicas of this node follow the new history from scratch or by id.
    shared.repl.kill_peers();
    replica::spawn(shared.clone(), host, port, gen);
}

/// Makes this node a primary (`REPLICAOF NO ONE`): the link stops, the history so far
/// becomes the second id, and a fresh id starts.
///
/// # Errors
/// Deleting the stored position failed.
pub(crate) fn become_primary(shared: &Shared) -> CmdResult<()> {
    let was = shared.repl.with_state(|s| s.master.take());
    if was.is_none() {
        return Ok(());
    }
    shared.repl.generation.fetch_add(1, Ordering::AcqRel);
    shared.repl.settings.lock().replicaof = None;
    let feed = shared.store.feed();
    {
        // No record is applied between the id change and the writes that follow.
        let _all = shared.store.lock_all();
        let _g = feed.exclusive();
        if apply::discard_partial(shared)? {
            eprintln!(
                "cascade: REPLICAOF NO ONE in the middle of a full sync: its partial data \
                 was discarded (the node is an empty primary)"
            );
        }
        shared.store.db().delete(REPL_KEY)?;
        let off = feed.offset();
        shared.repl.with_state(|s| {
            s.replid2 = std::mem::replace(&mut s.replid, new_replid());
            s.second_offset = i64::try_from(off + 1).unwrap_or(i64::MAX);
            s.link = Link::Connect;
            s.down_since = None;
        });
        feed.set_replica(false);
    }
    shared.repl.set_loading(false);
    // Replicas of this node reconnect and continue by the second id.
    shared.repl.kill_peers();
    Ok(())
}

/// The replication parameters for CONFIG GET.
pub(crate) fn config_params(shared: &Shared) -> Vec<(&'static str, String)> {
    let cap = shared.store.feed().capacity();
    shared.repl.settings.lock().params(cap)
}

/// CONFIG SET of a replication parameter (`replicaof` changes the role as
/// `REPLICAOF` does).
///
/// # Errors
/// A bad value, with Redis's CONFIG SET text.
pub(crate) fn config_set(shared: &Shared, name: &str, v: &[u8]) -> CmdResult<()> {
    let text = String::from_utf8_lossy(v).into_owned();
    let feed = shared.store.feed();
    let mut s = shared.repl.settings.lock().clone();
    s.set(name, &text, &|b| feed.set_capacity(b))?;
    let target = s.replicaof.clone();
    *shared.repl.settings.lock() = s;
    if name == "replicaof" || name == "slaveof" {
        match target {
            None => become_primary(shared)?,
            Some((h, p)) => {
                let me = shared
                    .repl
                    .shared()
                    .ok_or_else(|| CmdError::err("replication is not running in this process"))?;
                become_replica(&me, h, p);
            }
        }
    }
    Ok(())
}

/// CONFIG REWRITE: the replication parameters go to the `--config` file.
///
/// # Errors
/// No config file, or writing it failed.
pub(crate) fn config_rewrite(shared: &Shared) -> CmdResult<()> {
    let cap = shared.store.feed().capacity();
    let mut s = shared.repl.settings.lock().clone();
    s.replicaof = shared.repl.with_state(|st| st.master.clone());
    s.rewrite(cap)
}
