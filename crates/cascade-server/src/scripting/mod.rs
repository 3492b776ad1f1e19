//! Lua scripting and functions: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `SCRIPT`,
//! `FUNCTION`, `FCALL`, `FCALL_RO`, with Lua 5.1 (`mlua`, vendored) as Redis 7.0 runs it.
//!
//! One thread, the script thread, owns the Lua state, the script cache and the
//! function libraries (so none of them needs a lock). Workers hand it scripting
//! commands as [`Job`]s; the connection waits (its later pipelined commands stay
//! queued) until the thread puts the reply in the job's [`Slot`] and wakes the
//! worker. `SCRIPT KILL`, `FUNCTION KILL` and `FUNCTION STATS` are answered by the
//! worker itself from the gate's atomics (`gate.rs`), since the thread is busy with
//! the script they are about.
//!
//! A script holds the gate exclusively while it runs: data commands of other clients
//! wait for it (or answer `-BUSY` once it is past `busy-reply-threshold`), and its
//! writes are one [`crate::store::Tx`] committed as one engine batch at the end.
//!
//! Files: `gate.rs` (isolation, busy state, kill), `engine.rs` (the thread, Lua state,
//! sandbox, EVAL and SCRIPT), `api.rs` (`redis.*`), `convert.rs` (RESP ⇄ Lua),
//! `functions.rs` (libraries, FUNCTION, FCALL, persistence in namespace `0x0C`),
//! `libs/` (cjson, cmsgpack, bit, struct), `prelude.lua` (Lua side of the API and
//! sandbox).

pub(crate) mod api;
pub(crate) mod convert;
pub(crate) mod engine;
pub(crate) mod functions;
pub(crate) mod gate;
pub(crate) mod libs;

use std::sync::mpsc::Sender;
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use crate::notify::WakeFn;
use crate::resp::parse::Command;
use crate::shared::Shared;

/// A scripting command for the script thread.
pub(crate) struct Job {
    /// The command as the client sent it.
    pub(crate) cmd: Command,
    /// The client speaks RESP3.
    pub(crate) resp3: bool,
    /// The client's selected database.
    pub(crate) db: usize,
    /// The calling client's id: its own writes do not invalidate its cache (NOLOOP).
    pub(crate) caller: u64,
    /// The caller tracks the keys it reads now (client-side caching).
    pub(crate) remember: bool,
    /// Where the reply goes.
    pub(crate) slot: Arc<Slot>,
}

/// A job's reply, and how its connection's worker is woken.
pub(crate) struct Slot {
    reply: Mutex<Option<Vec<u8>>>,
    cv: Condvar,
    wake: Option<WakeFn>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

impl Slot {
    /// An empty slot; `wake` is called when the reply is in.
    pub(crate) fn new(wake: Option<WakeFn>) -> Slot {
        Slot {
            reply: Mutex::new(None),
            cv: Condvar::new(),
            wake,
        }
    }

    /// Stores the reply and wakes the waiter.
    pub(crate) fn fill(&self, reply: Vec<u8>) {
        *self.reply.lock() = Some(reply);
        self.cv.notify_all();
        if let Some(w) = &self.wake {
            w();
        }
    }

    /// The reply, if it is in.
    pub(crate) fn take(&self) -> Option<Vec<u8>> {
        self.reply.lock().take()
    }

    /// Waits for the reply (tests, and scripts inside MULTI/EXEC).
    pub(crate) fn wait(&self) -> Vec<u8> {
        let mut r = self.reply.lock();
        loop {
            if let Some(v) = r.take() {
                return v;
            }
            self.cv.wait(&mut r);
        }
    }
}

/// How workers reach the script thread.
#[derive(Debug, Default)]
pub(crate) struct Handle {
    tx: OnceLock<Mutex<Sender<Job>>>,
    /// Libraries and functions loaded (FUNCTION STATS), set by the script thread.
    pub(crate) counts: Mutex<(usize, usize)>,
    /// EVAL scripts cached (INFO `number_of_cached_scripts`).
    pub(crate) cached: Mutex<u64>,
    /// The running script's name and command (FUNCTION STATS).
    pub(crate) running: Mutex<Option<(String, Vec<Vec<u8>>)>>,
}

impl Handle {
    /// Sends a job; false if the thread is gone.
    pub(crate) fn send(&self, job: Job) -> bool {
        self.tx.get().is_some_and(|tx| tx.lock().send(job).is_ok())
    }
}

/// Starts the script thread for `shared` (once; it loads the stored function
/// libraries first).
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    if shared.scripts.tx.set(Mutex::new(tx)).is_err() {
        return Ok(());
    }
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("cascade-scripts".into())
        .spawn(move || engine::thread_main(&weak, &rx))?;
    Ok(())
}
