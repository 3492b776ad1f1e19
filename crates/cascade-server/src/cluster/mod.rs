//! Cluster mode: Redis Cluster's client protocol over a topology that an external
//! controller sets, as Apache Kvrocks does (`--cluster-enabled`).
//!
//! There is no gossip and no failure detection here: a controller (a test, a script,
//! the kvrocks-controller) sends every node the same `CLUSTERX SETNODES` text with
//! a growing version, and each node answers cluster clients from it: `CLUSTER
//! SLOTS/NODES/SHARDS/INFO`, `-MOVED` for keys it does not serve, `-CROSSSLOT`,
//! `-CLUSTERDOWN`, `-TRYAGAIN` while a slot it migrates is write-blocked.
//!
//! Files, one concept each: `keyslot` (CRC16 hash slots), `topology` (nodes and slot
//! owners parsed from SETNODES), `redirect` (the per-command check the dispatcher
//! calls), `migrate` (moving a slot's keys to another node while clients write),
//! `wire` (the small RESP client the migration speaks to the destination with),
//! `commands` (CLUSTER, CLUSTERX, READONLY, READWRITE, ASKING), `persist` (the nodes
//! file a restarted node reads its view back from, and `cluster-enabled` in a
//! `--config` file).
//!
//! Shared state and its guards: [`Cluster::view`] is an `Arc<View>` behind a
//! `parking_lot::RwLock`, replaced whole on every change (topology, my id, a slot
//! migrated away or imported), so a command reads one consistent view; the
//! migration's own state is in [`migrate::Migration`] (its fields document their
//! locks); `importers` (connections importing a slot) has its own mutex. Every new
//! view is written to the nodes file under the view's write lock before it is
//! published (`persist.rs`).

pub(crate) mod commands;
pub(crate) mod keyslot;
pub(crate) mod migrate;
pub(crate) mod persist;
pub(crate) mod redirect;
pub(crate) mod slotcount;
pub(crate) mod topology;
pub(crate) mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Mutex, RwLock};

use crate::shared::Shared;
use topology::{Node, Topology};

/// What one node knows of the cluster at one moment (immutable once published).
#[derive(Debug, Clone, Default)]
pub(crate) struct View {
    /// The controller's topology.
    pub(crate) topo: Topology,
    /// This node's id (`CLUSTERX SETNODEID`).
    pub(crate) myid: Option<String>,
    /// Slots this node migrated away (`CLUSTERX MIGRATE` succeeded) and the index of
    /// the node that has them now, until the controller's next topology says so too.
    pub(crate) migrated: HashMap<u16, usize>,
    /// Slots imported here by a finished migration, served before the topology says so.
    pub(crate) imported: HashSet<u16>,
}

impl View {
    /// This node in the topology, if it is there.
    pub(crate) fn me(&self) -> Option<&Node> {
        self.topo.node(self.myid.as_deref()?)
    }

    /// True when this node serves `slot` as a master (the topology or an import).
    pub(crate) fn serves(&self, slot: u16) -> bool {
        if self.migrated.contains_key(&slot) {
            return false;
        }
        if self.imported.contains(&slot) {
            return true;
        }
        match (self.topo.owner(slot), self.myid.as_deref()) {
            (Some(o), Some(me)) => o.id == me,
            _ => false,
        }
    }

    /// The node clients are sent to for `slot`, if any.
    pub(crate) fn serving_node(&self, slot: u16) -> Option<&Node> {
        if let Some(&i) = self.migrated.get(&slot) {
            return self.topo.nodes.get(i);
        }
        if self.imported.contains(&slot) {
            return self.me();
        }
        self.topo.owner(slot)
    }
}

/// Per-connection cluster flags (`READONLY`, `ASKING`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnState {
    /// `READONLY`: reads may be served by a slave of the slot's master.
    pub(crate) readonly: bool,
    /// `ASKING`: the next command may touch a slot being imported here.
    pub(crate) asking: bool,
}

/// Cluster state of the server (in [`Shared`]).
#[derive(Debug, Default)]
pub(crate) struct Cluster {
    /// `--cluster-enabled` (fixed at start).
    pub(crate) enabled: bool,
    view: RwLock<Arc<View>>,
    /// The running or last migration from this node.
    pub(crate) migration: migrate::Migration,
    /// Connections importing a slot here (client id, slot): they bypass redirects
    /// for that slot.
    importers: Mutex<Vec<(u64, u16)>>,
    /// The server, for the migration thread (set by `server::run`).
    owner: OnceLock<Weak<Shared>>,
    /// The nodes file every view is saved to (set at start in cluster mode).
    nodes_file: OnceLock<std::path::PathBuf>,
}

impl Cluster {
    /// Cluster state, on or off.
    pub(crate) fn new(enabled: bool) -> Cluster {
        Cluster {
            enabled,
            ..Cluster::default()
        }
    }

    /// Lets background migrations reach the server, and (in cluster mode) restores
    /// the view saved in the data directory's nodes file and saves every later one,
    /// and starts the per-slot key counts.
    ///
    /// # Errors
    /// The nodes file cannot be read or is damaged.
    pub(crate) fn attach(shared: &Arc<Shared>) -> Result<(), String> {
        let cl = &shared.cluster;
        let _ = cl.owner.set(Arc::downgrade(shared));
        if !cl.enabled {
            return Ok(());
        }
        shared
            .store
            .enable_slot_counts()
            .map_err(|e| format!("counting the keys per slot: {e}"))?;
        let (path, saved) = persist::read(&shared.fixed.dir)?;
        if let Some(v) = saved {
            eprintln!(
                "cascade: cluster view restored from {} (version {}, {} nodes)",
                path.display(),
                v.topo.version,
                v.topo.nodes.len()
            );
            *cl.view.write() = Arc::new(v);
        }
        let _ = cl.nodes_file.set(path);
        Ok(())
    }

    /// The server, if attached and running.
    pub(crate) fn server(&self) -> Option<Arc<Shared>> {
        self.owner.get()?.upgrade()
    }

    /// The current view.
    pub(crate) fn view(&self) -> Arc<View> {
        self.view.read().clone()
    }

    /// Replaces the view with `f(current)`, saved to the nodes file first, or leaves
    /// it if `f` fails or the file cannot be written.
    pub(crate) fn update<E: From<persist::PersistError>>(
        &self,
        f: impl FnOnce(&View) -> Result<View, E>,
    ) -> Result<(), E> {
        let mut g = self.view.write();
        let next = f(&g)?;
        if let Some(path) = self.nodes_file.get() {
            persist::write(path, &next)?;
        }
        *g = Arc::new(next);
        Ok(())
    }

    /// Registers a connection importing `slot`.
    pub(crate) fn add_importer(&self, client: u64, slot: u16) {
        let mut v = self.importers.lock();
        v.retain(|&(c, _)| c != client);
        v.push((client, slot));
    }

    /// Forgets a connection's import.
    pub(crate) fn remove_importer(&self, client: u64) {
        self.importers.lock().retain(|&(c, _)| c != client);
    }

    /// True if `client` imports `slot`.
    pub(crate) fn imports(&self, client: u64, slot: u16) -> bool {
        self.importers.lock().contains(&(client, slot))
    }

    /// True if some connection imports `slot` (ASKING may touch it).
    pub(crate) fn importing(&self, slot: u16) -> bool {
        self.importers.lock().iter().any(|&(_, s)| s == slot)
    }
}
