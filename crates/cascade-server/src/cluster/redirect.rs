//! The per-command cluster check, called by the dispatcher before a command runs or
//! is queued: which slot the command's keys hash to, and whether this node serves it.
//!
//! Keys come from the command table's key specs (the ones `COMMAND GETKEYS` reports):
//! for EXEC, the keys of every queued command; for EVAL/FCALL, the declared keys.
//! Order of checks, as Redis's `getNodeByQuery`: keys in more than one slot are
//! `-CROSSSLOT`; a slot migrated away is `-MOVED` to its new node; a slot nobody
//! serves is `-CLUSTERDOWN Hash slot not served`; a slot another master serves is
//! `-MOVED <slot> <ip>:<port>`, unless this node is a slave of that master and the
//! connection sent READONLY and the command only reads, or the connection imports
//! the slot (a migration) or sent ASKING while it is imported.
//!
//! Writes to a served slot hold the migration gate (a shared read lock) from this
//! check until the command is done, and record their keys as changed when the slot
//! is being migrated (see `migrate.rs` for why that makes the copy complete).

use parking_lot::RwLockReadGuard;

use super::keyslot::slot;
use super::migrate::Migration;
use crate::cmd::{Client, Commands, Ctx, Keys, Spec};
use crate::resp::parse::Command;
use crate::resp::reply;
use crate::shared::Shared;

/// Held while a write command to a served slot runs (see the module docs).
pub(crate) struct Held<'a> {
    _gate: RwLockReadGuard<'a, ()>,
    /// The migration whose slot the keys are in, with the keys to record.
    record: Option<(&'a Migration, Vec<Vec<u8>>)>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some((m, keys)) = self.record.take() {
            m.changed(keys);
        }
    }
}

/// Scripting commands (run later on the script thread, after the check's guard).
fn is_script(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// A command refused by [`admit`] (its error reply is written).
#[derive(Debug)]
pub(crate) struct Refused;

/// The dispatcher's entry: [`check`], and on a refusal its error reply, with the
/// transaction flagged (a queued command) or discarded (EXEC), as Redis.
pub(crate) fn admit<'a>(
    ctx: &mut Ctx<'a>,
    spec: &Spec,
    cmd: &Command,
) -> Result<Option<Held<'a>>, Refused> {
    let shared: &'a Shared = ctx.shared;
    match check(shared, ctx.commands, ctx.client, spec, cmd) {
        Ok(held) => Ok(held),
        Err(e) => {
            if spec.name == "exec" {
                ctx.client.multi = None;
                ctx.client.multi_failed = false;
                ctx.client.unwatch(&shared.store);
            } else if ctx.client.multi.is_some() {
                ctx.client.multi_failed = true;
            }
            reply::error(ctx.out, &e);
            Err(Refused)
        }
    }
}

/// The cluster check of `cmd` (spec `spec`) for `client`. `Err` is the error reply.
pub(crate) fn check<'a>(
    shared: &'a Shared,
    commands: &Commands,
    client: &mut Client,
    spec: &Spec,
    cmd: &Command,
) -> Result<Option<Held<'a>>, String> {
    let cl = &shared.cluster;
    if !cl.enabled {
        return Ok(None);
    }
    let asking = std::mem::take(&mut client.cluster.asking);
    if spec.name == "select" && cmd.len() == 2 && cmd.arg(1) != b"0" {
        return Err("ERR SELECT is not allowed in cluster mode".into());
    }
    // The keys and whether the command (or transaction) writes.
    let (keys, writes): (Vec<&[u8]>, bool) = if spec.name == "exec" {
        let mut keys = Vec::new();
        let mut writes = false;
        for c in client.multi.iter().flatten() {
            if let Some(i) = commands.lookup(c.arg(0)) {
                let s = &commands.specs[i];
                writes |= s.writes() || (is_script(s.name) && !s.name.ends_with("_ro"));
                if s.keys != Keys::All {
                    keys.extend(s.keys.of(c));
                }
            }
        }
        (keys, writes)
    } else if spec.keys == Keys::All {
        (Vec::new(), false)
    } else {
        let w = spec.writes() || (is_script(spec.name) && !spec.name.ends_with("_ro"));
        (spec.keys.of(cmd), w)
    };
    let Some(first) = keys.first() else {
        return Ok(None);
    };
    let s = slot(first);
    if keys.iter().any(|k| slot(k) != s) {
        return Err("CROSSSLOT Keys in request don't hash to the same slot".into());
    }
    let mig = &cl.migration;
    // Writes take the gate before reading the view: a migration's phase changes
    // happen under its write side, so this view and phase stay current until done.
    let gate = writes.then(|| mig.gate.read());
    let view = cl.view();
    if view.topo.version < 0 {
        return Err("CLUSTERDOWN The cluster is not initialized".into());
    }
    if view.serves(s) {
        let Some(gate) = gate else {
            return Ok(None);
        };
        if mig.slot() != Some(s) {
            return Ok(Some(Held {
                _gate: gate,
                record: None,
            }));
        }
        if mig.write_blocked() {
            return Err(format!(
                "TRYAGAIN Slot {s} is being migrated and is in its write-blocked final phase"
            ));
        }
        if is_script(spec.name) || (spec.name == "exec" && has_script(commands, client)) {
            return Err(format!(
                "TRYAGAIN Slot {s} is being migrated: scripts on it wait until it is done"
            ));
        }
        let keys = keys.iter().map(|k| k.to_vec()).collect();
        return Ok(Some(Held {
            _gate: gate,
            record: Some((mig, keys)),
        }));
    }
    if cl.imports(client.id, s) || (asking && cl.importing(s)) {
        return Ok(None);
    }
    let Some(node) = view.serving_node(s) else {
        return Err("CLUSTERDOWN Hash slot not served".into());
    };
    let my_master = view.me().and_then(|m| m.master.as_deref());
    if !writes && client.cluster.readonly && my_master == Some(node.id.as_str()) {
        return Ok(None);
    }
    Err(format!("MOVED {s} {}", node.addr()))
}

fn has_script(commands: &Commands, client: &Client) -> bool {
    client.multi.iter().flatten().any(|c| {
        commands
            .lookup(c.arg(0))
            .is_some_and(|i| is_script(commands.specs[i].name))
    })
}
