//! [`Shared`]: the server state every thread reaches: the keyspace, SCAN cursors,
//! settings, metrics, the client registry and the shutdown flag.
//!
//! It sits below the command handlers, the workers, `INFO` and the metrics endpoint;
//! it knows none of them (the command table lives in `cmd/` and is handed to workers
//! separately). Created once by `server::run` (or a test), then shared read-only
//! behind an `Arc`: every mutable field is an atomic or behind its own mutex —
//! `wakers` (worker wakers, for shutdown) and `ops_samples` (the ticker's samples for
//! `instantaneous_ops_per_sec`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mio::Waker;
use parking_lot::Mutex;

use crate::clients::Clients;
use crate::config::{RuntimeConfig, ServerConfig};
use crate::keyspace::now_ms;
use crate::metrics::Metrics;
use crate::store::Store;

/// State shared by every thread of the server.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The keyspace.
    pub(crate) store: Store,
    /// Settings CONFIG SET may change.
    pub(crate) config: RuntimeConfig,
    /// Start-up settings.
    pub(crate) fixed: ServerConfig,
    /// Counters.
    pub(crate) metrics: Metrics,
    /// Connected clients.
    pub(crate) clients: Clients,
    /// Start time.
    pub(crate) started: Instant,
    /// Random id of this run (INFO `run_id`).
    pub(crate) run_id: String,
    /// The port actually bound.
    pub(crate) port: u16,
    /// Unix seconds of the last SAVE.
    pub(crate) last_save: AtomicU64,
    /// The script thread (`scripting/`).
    pub(crate) scripts: crate::scripting::Handle,
    /// The reply barrier of `--durability sync` (one lane per worker).
    pub(crate) gate: crate::durable::Gate,
    /// The workers' group commit of the shared log (`commit.rs`).
    pub(crate) commit: crate::commit::Commit,
    /// Where each worker's loop is (`worker/presence.rs`).
    pub(crate) presence: crate::worker::presence::Presence,
    /// SLOWLOG (`crate::slowlog`).
    pub(crate) slowlog: crate::slowlog::SlowLog,
    /// Replication: role, replicas, `WAIT` (`crate::replication`).
    pub(crate) repl: crate::replication::Repl,
    /// Cluster mode (`crate::cluster`).
    pub(crate) cluster: crate::cluster::Cluster,
    shutdown: AtomicBool,
    wakers: Mutex<Vec<Arc<Waker>>>,
    ops_samples: Mutex<VecDeque<(Instant, u64)>>,
}

impl Shared {
    /// State for a server over `store` listening on `port`.
    pub(crate) fn new(store: Store, fixed: ServerConfig, port: u16, metrics: Metrics) -> Shared {
        let seed = now_ms() ^ u64::from(std::process::id()).rotate_left(32);
        let h = |s: &[u8]| crate::hash::hash64(s);
        Shared {
            store,
            config: RuntimeConfig::new(&fixed),
            metrics,
            clients: Clients::default(),
            started: Instant::now(),
            run_id: format!(
                "{:016x}{:016x}{:08x}",
                h(&seed.to_be_bytes()),
                h(format!("{port}{seed}").as_bytes()),
                std::process::id()
            ),
            port,
            last_save: AtomicU64::new(now_ms() / 1000),
            gate: crate::durable::Gate::new(fixed.threads),
            commit: crate::commit::Commit::new(fixed.threads),
            presence: crate::worker::presence::Presence::new(fixed.threads),
            slowlog: crate::slowlog::SlowLog::default(),
            scripts: crate::scripting::Handle::default(),
            repl: crate::replication::Repl::default(),
            cluster: crate::cluster::Cluster::new(fixed.cluster_enabled),
            fixed,
            shutdown: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            ops_samples: Mutex::new(VecDeque::new()),
        }
    }

    /// Registers a thread's waker, woken at shutdown.
    pub(crate) fn add_waker(&self, w: Arc<Waker>) {
        self.wakers.lock().push(w);
    }

    /// Asks every thread to stop (idempotent).
    pub(crate) fn request_shutdown(&self, why: &str) {
        if !self.shutdown.swap(true, Ordering::AcqRel) {
            eprintln!("cascade: shutting down ({why})");
        }
        for w in self.wakers.lock().iter() {
            let _ = w.wake();
        }
    }

    /// True once shutdown was requested.
    pub(crate) fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Commands per second over the last second or so.
    pub(crate) fn ops_per_sec(&self) -> u64 {
        let s = self.ops_samples.lock();
        match (s.front(), s.back()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                let per_ms = (b.1 - a.1).saturating_mul(1000);
                let ms = u64::try_from((b.0 - a.0).as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                per_ms / ms
            }
            _ => 0,
        }
    }

    /// Records the command total now (the ticker, every 100 ms).
    pub(crate) fn sample_ops(&self) {
        let total = self.metrics.total_commands();
        let mut s = self.ops_samples.lock();
        s.push_back((Instant::now(), total));
        while s.len() > 16 {
            s.pop_front();
        }
    }
}
