//! The server process: shared state, the acceptor, the background ticker (expiry
//! sweeps, periodic persistence), signal handling and the shutdown sequence.
//!
//! Threads: the caller of [`run`] accepts connections and hands each to a worker
//! (round robin); `threads` workers run the event loops (`worker/`) and all engine
//! writes, each worker on its own engine log; one ticker thread; one signal thread;
//! optionally one metrics HTTP thread.
//!
//! Shutdown (SIGINT, SIGTERM or `SHUTDOWN`): the acceptor stops; each worker executes
//! and answers the requests it has already received, persists (in sync mode), flushes
//! replies and closes its clients; then the store is closed, which persists every log
//! and marks a clean shutdown. So every acknowledged write is durable per the mode.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cascadekv::Db;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::cmd::Commands;
use crate::config::ServerConfig;
use crate::metrics::{Metrics, WorkerStats};
use crate::shared::Shared;
use crate::store::Store;
use crate::worker::{Inbox, Worker};

/// Errors that stop the server from starting.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// Opening the store failed.
    Store(String),
    /// Binding or polling failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Store(m) => write!(f, "cannot open the store: {m}"),
            ServeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ServeError {}

impl From<std::io::Error> for ServeError {
    fn from(e: std::io::Error) -> Self {
        ServeError::Io(e)
    }
}

const LISTENER: Token = Token(0);
const WAKE: Token = Token(1);

fn resolve(bind: &str, port: u16) -> std::io::Result<SocketAddr> {
    (bind, port).to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("cannot resolve {bind}"),
        )
    })
}

/// Runs the server until shutdown. Prints `listening on ADDR` once ready.
///
/// # Errors
/// [`ServeError`] when the store cannot be opened or closed, or the address cannot be
/// bound.
pub fn run(cfg: ServerConfig) -> Result<(), ServeError> {
    let t0 = Instant::now();
    let db = Arc::new(
        Db::open(&cfg.dir, cfg.engine.clone()).map_err(|e| ServeError::Store(e.to_string()))?,
    );
    // Counting the keys reads every key's metadata: damage there refuses the start,
    // with what to run next (as `Db::open` does for damage it finds itself).
    let store = Store::open(db.clone(), cfg.databases).map_err(|e| {
        ServeError::Store(format!(
            "{e} (reading the keyspace metadata); run `cascade verify --dir {d}` to list \
             every damaged record, then `cascade repair --dir {d}` to salvage the intact data",
            d = cfg.dir.display()
        ))
    })?;
    let addr = resolve(&cfg.bind, cfg.port)?;
    let mut listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let commands = Arc::new(Commands::default());
    let threads = cfg.threads.max(1);
    let stats: Vec<Arc<WorkerStats>> = (0..threads)
        .map(|_| Arc::new(WorkerStats::new(commands.specs.len())))
        .collect();
    let mut fixed = ServerConfig { threads, ..cfg };
    // `cluster-enabled yes` in the --config file counts as --cluster-enabled.
    fixed.cluster_enabled |=
        crate::cluster::persist::enabled_in_config(fixed.config_file.as_deref())
            .map_err(|e| ServeError::Io(std::io::Error::other(e)))?;
    // The budget in effect: a quarter of the pool as it was created, which an existing
    // store keeps whatever `--pool-size` says now (CONFIG GET reports this).
    fixed.engine.fast_budget = db.stats().fast_budget_bytes;
    let metrics = Metrics::new(commands.names(), stats.clone());
    if fixed.sync && fixed.sync_persisters > 0 {
        // Reads that see only durable writes are answered at once (`visible.rs`; the
        // persisters publish what is durable).
        store.seqs().enable();
    }
    let shared = Arc::new(Shared::new(store, fixed, local.port(), metrics));
    crate::scripting::start(&shared)?;
    // Before replication starts: a replica's first records already count per slot.
    crate::cluster::Cluster::attach(&shared).map_err(ServeError::Store)?;
    crate::replication::start(&shared)?;

    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    shared.add_waker(waker);

    let mut handles = Vec::new();
    let mut inboxes: Vec<Inbox> = Vec::new();
    for (i, st) in stats.into_iter().enumerate() {
        let w = Worker::new(shared.clone(), commands.clone(), st, i)?;
        inboxes.push(w.inbox());
        shared.add_waker(w.waker());
        handles.push(
            std::thread::Builder::new()
                .name(format!("cascade-worker-{i}"))
                .spawn(move || w.run())?,
        );
    }
    let persisters = start_persisters(&shared)?;
    let ticker = {
        let s = shared.clone();
        std::thread::Builder::new()
            .name("cascade-ticker".into())
            .spawn(move || ticker(&s))?
    };
    let signals = signal_thread(&shared)?;
    let cfg = &shared.fixed;
    let metrics_thread = match cfg.metrics_port {
        Some(p) => Some(crate::http::start(shared.clone(), resolve(&cfg.bind, p)?)?),
        None => None,
    };
    println!(
        "cascade: listening on {local} (store {}, {} keys, opened in {} ms, {} workers, durability {})",
        cfg.dir.display(),
        shared.store.total_keys(),
        t0.elapsed().as_millis(),
        threads,
        if cfg.sync { "sync" } else { "buffered" },
    );
    let _ = std::io::stdout().flush();

    accept_loop(&shared, &mut poll, &listener, &inboxes);

    drop(listener);
    for h in handles {
        let _ = h.join();
    }
    shared.commit.stop();
    for h in persisters {
        let _ = h.join();
    }
    let _ = ticker.join();
    signals.close();
    if let Some(m) = metrics_thread {
        let _ = m.join();
    }
    let res = db.close();
    match res {
        Ok(()) => {
            println!("cascade: stopped; store closed cleanly");
            Ok(())
        }
        Err(e) => Err(ServeError::Store(format!("closing the store: {e}"))),
    }
}

/// Under `--durability sync`, the threads that persist the workers' shared log while
/// the workers go on serving (`commit.rs`); they return after `Commit::stop`.
fn start_persisters(shared: &Arc<Shared>) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut persisters = Vec::new();
    if !shared.fixed.sync {
        return Ok(persisters);
    }
    for i in 0..shared.fixed.sync_persisters {
        let s = shared.clone();
        persisters.push(
            std::thread::Builder::new()
                .name(format!("cascade-persist-{i}"))
                .spawn(move || {
                    crate::visible::bind_shared_log(true);
                    s.commit
                        .run_persister(s.store.seqs(), || persist_shared_log(&s));
                })?,
        );
    }
    Ok(persisters)
}

/// One persist of the workers' shared log (the calling thread is bound to it): what a
/// persister thread runs, and a worker that persists inline (`Commit::ask_inline`).
/// `false` if it failed.
pub(crate) fn persist_shared_log(shared: &Shared) -> bool {
    // Tests stretch every persist to see what waits for it (never set in service).
    static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    let delay = DELAY.get_or_init(|| {
        std::env::var("CASCADE_TEST_PERSIST_DELAY_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis)
    });
    if let Some(d) = delay {
        std::thread::sleep(*d);
    }
    match shared.store.db().sync_thread() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("cascade: persisting the log failed: {e}");
            false
        }
    }
}

fn accept_loop(shared: &Shared, poll: &mut Poll, listener: &TcpListener, inboxes: &[Inbox]) {
    let mut events = Events::with_capacity(64);
    let mut next = 0usize;
    let mut next_id = 1u64;
    while !shared.shutting_down() {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_millis(500))) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("cascade: poll failed: {e}");
            shared.request_shutdown("acceptor failure");
            break;
        }
        loop {
            match listener.accept() {
                Ok((mut sock, peer)) => {
                    let m = &shared.metrics;
                    let max = shared.config.maxclients.load(Ordering::Relaxed);
                    if u64::try_from(m.connected.load(Ordering::Relaxed)).unwrap_or(0) >= max {
                        m.rejected.fetch_add(1, Ordering::Relaxed);
                        let _ = sock.write(b"-ERR max number of clients reached\r\n");
                        continue;
                    }
                    let _ = sock.set_nodelay(true);
                    m.connected.fetch_add(1, Ordering::Relaxed);
                    m.total_connections.fetch_add(1, Ordering::Relaxed);
                    let id = next_id;
                    next_id += 1;
                    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
                    shared.clients.add(id, peer.to_string(), laddr);
                    inboxes[next % inboxes.len()].send(sock, peer, id);
                    next += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    eprintln!("cascade: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    break;
                }
            }
        }
    }
}

/// Expiry sweeps and ops sampling every 100 ms; in buffered mode, persists every log
/// every `sync_interval_ms`.
fn ticker(shared: &Shared) {
    // Its expiry sweeps write to the shared log like the workers (`visible.rs`).
    crate::visible::bind_shared_log(shared.fixed.sync);
    let mut last_sync = Instant::now();
    while !shared.shutting_down() {
        std::thread::sleep(Duration::from_millis(100));
        shared.sample_ops();
        // Sweep until a round finds fewer than its budget (bounded per tick).
        for _ in 0..20 {
            match shared.store.sweep_expired(500) {
                Ok(n) if n >= 500 => {}
                Ok(_) => break,
                Err(e) => {
                    eprintln!("cascade: expiry sweep failed: {e}");
                    break;
                }
            }
        }
        let every = shared.config.sync_interval_ms.load(Ordering::Relaxed);
        if every > 0
            && !shared.config.sync.load(Ordering::Relaxed)
            && last_sync.elapsed() >= Duration::from_millis(every)
        {
            last_sync = Instant::now();
            if let Err(e) = shared.store.db().sync() {
                eprintln!("cascade: periodic persist failed: {e}");
            }
        }
    }
}

fn signal_thread(shared: &Arc<Shared>) -> std::io::Result<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let handle = signals.handle();
    let s = shared.clone();
    std::thread::Builder::new()
        .name("cascade-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                s.request_shutdown(if sig == SIGINT { "SIGINT" } else { "SIGTERM" });
            }
        })?;
    Ok(handle)
}
