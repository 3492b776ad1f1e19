//! `CLUSTERX MIGRATE <slot> <dst-id>`: moves every key of a slot to another master
//! while clients keep writing to it, then sends them there (as Kvrocks does).
//!
//! Protocol, run by one background thread on the source:
//! 1. Under the gate's write side, the slot is marked migrating. From then on every
//!    write to the slot records its keys in `dirty` after it commits (it holds the
//!    gate's read side from its check until then: `redirect.rs`).
//! 2. The thread connects to the destination, sends `CLUSTERX IMPORT <slot> START`
//!    (the destination drops stale keys of the slot and lets this connection write
//!    it), lists the slot's keys (a scan of database 0) and sends each as
//!    `RESTORE key <expiry> <DUMP payload> REPLACE ABSTTL`, or `DEL` if it is gone.
//! 3. It resends the keys written meanwhile (`dirty`), in rounds, until a round is
//!    small.
//! 4. Final phase: under the gate's write side (so no write to the slot is between
//!    its check and its commit) the slot is write-blocked: writes get `-TRYAGAIN`,
//!    reads are still served. The last dirty keys are sent, then `CLUSTERX IMPORT
//!    <slot> SUCCESS`: the destination serves the slot from now on.
//! 5. Under the gate's write side again the slot is marked migrated: clients get
//!    `-MOVED <slot> <dst>` here, until the controller's `CLUSTERX SETSLOT` (or
//!    SETNODES) makes it part of the topology. The source then deletes its copies of
//!    the slot's keys.
//!
//! Invariant: every write acknowledged by the source before step 5 is in a RESTORE
//! sent after it committed (a key's value is read under its stripe lock after the
//! key was recorded), and no write to the slot is acknowledged by the source after
//! step 4 starts. So no key is lost, and RESTORE ... REPLACE makes resending
//! idempotent, so none is duplicated. A failure anywhere (connection, error reply)
//! unblocks the slot, leaves it served here and tells the destination `IMPORT FAIL`,
//! which deletes what it received.
//!
//! Fields: `slot` and `blocked` change only under `gate`'s write side; `dirty` and
//! `status` have their own mutexes.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use super::keyslot;
use super::wire::{Conn, Reply};
use crate::cmd::keyspace::dump::payload;
use crate::error::CmdResult;
use crate::keyspace::{meta_key, prefix_end, Meta, NS_META};
use crate::shared::Shared;
use crate::store::{Store, Tx};

/// `slot` when nothing migrates.
const NO_SLOT: u32 = u32::MAX;
/// Keys per pipelined batch sent to the destination.
const BATCH: usize = 128;
/// A catch-up round this small goes to the final phase.
const SMALL_ROUND: usize = 256;
/// Most catch-up rounds before the final phase anyway.
const MAX_ROUNDS: usize = 32;

/// What CLUSTER INFO reports of the last migration.
#[derive(Debug, Clone, Default)]
pub(crate) struct Status {
    /// The slot (`None`: no migration since start).
    pub(crate) slot: Option<u16>,
    /// Destination node id.
    pub(crate) dst: String,
    /// `start`, `success` or `fail`.
    pub(crate) state: &'static str,
    /// Keys sent so far (resends included).
    pub(crate) sent: u64,
    /// Milliseconds writes were blocked in the final phase.
    pub(crate) blocked_ms: u64,
    /// Why it failed.
    pub(crate) error: String,
}

/// The migration state of a node (in `Cluster`).
#[derive(Debug)]
pub(crate) struct Migration {
    /// Writers to served slots hold the read side; phase changes take the write side.
    pub(crate) gate: RwLock<()>,
    slot: AtomicU32,
    blocked: AtomicBool,
    dirty: Mutex<HashSet<Vec<u8>>>,
    status: Mutex<Status>,
}

impl Default for Migration {
    fn default() -> Self {
        Migration {
            gate: RwLock::new(()),
            slot: AtomicU32::new(NO_SLOT),
            blocked: AtomicBool::new(false),
            dirty: Mutex::new(HashSet::new()),
            status: Mutex::new(Status::default()),
        }
    }
}

impl Migration {
    /// The slot being migrated.
    pub(crate) fn slot(&self) -> Option<u16> {
        u16::try_from(self.slot.load(Ordering::Acquire)).ok()
    }

    /// True in the final, write-blocked phase.
    pub(crate) fn write_blocked(&self) -> bool {
        self.blocked.load(Ordering::Acquire)
    }

    /// Records keys written to the migrating slot (after their commit).
    pub(crate) fn changed(&self, keys: Vec<Vec<u8>>) {
        self.dirty.lock().extend(keys);
    }

    /// The last migration's status.
    pub(crate) fn status(&self) -> Status {
        self.status.lock().clone()
    }

    fn set_phase(&self, slot: Option<u16>, blocked: bool) {
        let _w = self.gate.write();
        self.slot
            .store(slot.map_or(NO_SLOT, u32::from), Ordering::Release);
        self.blocked.store(blocked, Ordering::Release);
    }
}

/// Live keys of database 0 in `slot`, at most `limit`: a scan of the key metadata
/// that decodes only the metadata of keys in the slot (see docs/design.md §18 for
/// why there is no slot index). Stops at `limit`.
pub(crate) fn keys_in_slot(store: &Store, slot: u16, limit: usize) -> CmdResult<Vec<Vec<u8>>> {
    let tx = Tx::in_db(store, 0);
    let mut v = Vec::new();
    if limit == 0 {
        return Ok(v);
    }
    let lo = Bound::Included(meta_key(b""));
    let hi = Bound::Excluded(prefix_end(&meta_key(b"")).unwrap_or_else(|| vec![NS_META + 1]));
    for kv in tx.range(lo, hi)? {
        let (k, meta) = kv?;
        let key = k.get(1..).unwrap_or_default();
        if keyslot::slot(key) != slot || Meta::decode(&meta)?.expired(tx.now()) {
            continue;
        }
        v.push(key.to_vec());
        if v.len() >= limit {
            break;
        }
    }
    Ok(v)
}

/// Deletes every key of `slot` (an import that starts or fails). Returns the count.
pub(crate) fn delete_slot(store: &Store, slot: u16) -> CmdResult<usize> {
    let keys = keys_in_slot(store, slot, usize::MAX)?;
    for chunk in keys.chunks(BATCH) {
        let _locks = store.lock_many(chunk.iter().map(Vec::as_slice));
        let mut tx = Tx::in_db(store, 0);
        for k in chunk {
            if let Some(m) = tx.begin(k)? {
                tx.remove(k, &m)?;
            }
        }
        store.commit(tx)?;
    }
    Ok(keys.len())
}

/// Starts migrating `slot` to node `dst` in the background.
pub(crate) fn start(shared: &Shared, slot: u16, dst: &str) -> Result<(), String> {
    let cl = &shared.cluster;
    let view = cl.view();
    if !view.serves(slot) {
        return Err(format!(
            "ERR Can't migrate slot {slot}: it is not served by this node"
        ));
    }
    let node = view
        .topo
        .node(dst)
        .ok_or_else(|| format!("ERR Invalid node id: {dst} is not in the topology"))?;
    if node.master.is_some() || view.myid.as_deref() == Some(dst) {
        return Err("ERR Can't migrate to a slave or to this node itself".into());
    }
    let addr = node.addr();
    let server = cl
        .server()
        .ok_or_else(|| "ERR migration is not available in this process".to_string())?;
    {
        let mut st = cl.migration.status.lock();
        if st.state == "start" {
            return Err("ERR There is already a migrating slot".into());
        }
        *st = Status {
            slot: Some(slot),
            dst: dst.to_string(),
            state: "start",
            ..Status::default()
        };
    }
    cl.migration.dirty.lock().clear();
    cl.migration.set_phase(Some(slot), false);
    let dst = dst.to_string();
    let spawned = std::thread::Builder::new()
        .name("cascade-migrate".into())
        .spawn(move || run(&server, slot, &addr, &dst));
    if let Err(e) = spawned {
        cl.migration.set_phase(None, false);
        cl.migration.status.lock().state = "fail";
        return Err(format!("ERR cannot start the migration thread: {e}"));
    }
    Ok(())
}

fn run(shared: &Arc<Shared>, slot: u16, addr: &str, dst: &str) {
    // Its deletes go to the shared log, which the persisters persist.
    crate::visible::bind_shared_log(shared.fixed.sync);
    let m = &shared.cluster.migration;
    let mut conn = None;
    let res = copy(shared, slot, addr, dst, &mut conn);
    let mut st = m.status.lock();
    match res {
        Ok(()) => st.state = "success",
        Err(e) => {
            drop(st);
            m.set_phase(None, false);
            if let Some(c) = conn.as_mut() {
                let _ = c.call(&[b"CLUSTERX", b"IMPORT", slot.to_string().as_bytes(), b"FAIL"]);
            }
            eprintln!("cascade: migrating slot {slot} to {addr} failed: {e}");
            st = m.status.lock();
            st.state = "fail";
            st.error = e.to_string();
        }
    }
}

fn copy(
    shared: &Shared,
    slot: u16,
    addr: &str,
    dst: &str,
    conn: &mut Option<Conn>,
) -> std::io::Result<()> {
    let m = &shared.cluster.migration;
    let store = &shared.store;
    let c = conn.insert(Conn::connect(addr)?);
    if let Some(pw) = shared.config.requirepass.lock().clone() {
        c.call(&[b"AUTH", &pw])?;
    }
    let slot_s = slot.to_string();
    c.call(&[b"CLUSTERX", b"IMPORT", slot_s.as_bytes(), b"START"])?;
    let keys = keys_in_slot(store, slot, usize::MAX).map_err(other)?;
    send(shared, c, &keys)?;
    for _ in 0..MAX_ROUNDS {
        let round: Vec<Vec<u8>> = m.dirty.lock().drain().collect();
        send(shared, c, &round)?;
        if round.len() <= SMALL_ROUND {
            break;
        }
    }
    // Final phase: writes to the slot wait (-TRYAGAIN) while the rest is sent.
    let t = Instant::now();
    m.set_phase(Some(slot), true);
    let last: Vec<Vec<u8>> = m.dirty.lock().drain().collect();
    send(shared, c, &last)?;
    c.call(&[b"CLUSTERX", b"IMPORT", slot_s.as_bytes(), b"SUCCESS"])?;
    {
        let _w = m.gate.write();
        let cl = &shared.cluster;
        let moved: Result<(), String> = cl.update(|v| {
            let mut next = v.clone();
            let i = v
                .topo
                .index(dst)
                .ok_or_else(|| "the destination left the topology".to_string())?;
            next.migrated.insert(slot, i);
            next.imported.remove(&slot);
            Ok(next)
        });
        moved.map_err(other)?;
        m.slot.store(NO_SLOT, Ordering::Release);
        m.blocked.store(false, Ordering::Release);
    }
    m.status.lock().blocked_ms = u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
    // The slot is answered with MOVED from now on: its keys here are unreachable
    // copies, removed so that no key lives on two nodes.
    if let Err(e) = delete_slot(store, slot) {
        eprintln!("cascade: removing migrated slot {slot}'s keys failed: {e}");
    }
    Ok(())
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Sends the current value of each key (RESTORE, or DEL when it is gone).
fn send(shared: &Shared, c: &mut Conn, keys: &[Vec<u8>]) -> std::io::Result<()> {
    let store = &shared.store;
    for chunk in keys.chunks(BATCH) {
        for k in chunk {
            let _lock = store.lock_many([k.as_slice()]);
            let tx = Tx::in_db(store, 0);
            match payload(&tx, k).map_err(other)? {
                Some((p, exp)) => {
                    let exp = exp.unwrap_or(0).to_string();
                    c.queue(&[b"RESTORE", k, exp.as_bytes(), &p, b"REPLACE", b"ABSTTL"]);
                }
                None => c.queue(&[b"DEL", k]),
            }
        }
        for r in c.flush()? {
            if let Reply::Err(e) = r {
                return Err(other(format!("the destination refused a key: {e}")));
            }
        }
        shared.cluster.migration.status.lock().sent += chunk.len() as u64;
    }
    Ok(())
}
