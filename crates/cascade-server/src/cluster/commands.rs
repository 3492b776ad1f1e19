//! The cluster commands: `CLUSTER` (what cluster clients and `redis-cli --cluster`
//! read), `CLUSTERX` (what a controller writes, as Apache Kvrocks), `READONLY`,
//! `READWRITE` and `ASKING`.
//!
//! Without `--cluster-enabled` each answers Redis's `ERR This instance has cluster
//! support disabled`. Replies follow Redis 7: CLUSTER SLOTS entries are
//! `[first, last, [ip, port, id], replicas...]`; CLUSTER NODES lines are
//! `<id> <ip>:<port>@<port+10000> <flags> <master|-> 0 0 <epoch> connected <slots>`,
//! with the topology version as every node's epoch.

use std::fmt::Write as _;

use super::keyslot::{self, SLOTS};
use super::migrate;
use super::topology::{parse_slot, valid_id, Topology};
use super::View;
use crate::cmd::{int_arg, is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "cluster",
        -2,
        A,
        Keys::None,
        "cluster",
        "Cluster state for cluster clients.",
        Ctl(cluster),
    ),
    spec(
        "clusterx",
        -2,
        A,
        Keys::None,
        "cluster",
        "Sets the cluster topology (a controller's command, as Kvrocks).",
        Ctl(clusterx),
    ),
    spec(
        "readonly",
        1,
        A,
        Keys::None,
        "cluster",
        "Lets a slave serve this connection's reads.",
        Ctl(readonly),
    ),
    spec(
        "readwrite",
        1,
        A,
        Keys::None,
        "cluster",
        "Ends READONLY.",
        Ctl(readwrite),
    ),
    spec(
        "asking",
        1,
        A,
        Keys::None,
        "cluster",
        "Lets the next command touch a slot being imported.",
        Ctl(asking),
    ),
];

fn disabled() -> CmdError {
    CmdError::err("This instance has cluster support disabled")
}

fn enabled(ctx: &Ctx<'_>) -> CmdResult<()> {
    if ctx.shared.cluster.enabled {
        Ok(())
    } else {
        Err(disabled())
    }
}

fn readonly(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    enabled(ctx)?;
    ctx.client.cluster.readonly = true;
    reply::ok(ctx.out);
    Ok(())
}

fn readwrite(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    enabled(ctx)?;
    ctx.client.cluster.readonly = false;
    reply::ok(ctx.out);
    Ok(())
}

fn asking(ctx: &mut Ctx<'_>, _c: &Command) -> CmdResult<()> {
    enabled(ctx)?;
    ctx.client.cluster.asking = true;
    reply::ok(ctx.out);
    Ok(())
}

fn text(c: &Command, i: usize) -> String {
    String::from_utf8_lossy(c.arg(i)).into_owned()
}

fn slot_arg(c: &Command, i: usize) -> CmdResult<u16> {
    parse_slot(&text(c, i)).map_err(CmdError::Msg)
}

fn cluster(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "help") {
        let lines = [
            "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "INFO, NODES, SLOTS, SHARDS, MYID, KEYSLOT <key>,",
            "COUNTKEYSINSLOT <slot>, GETKEYSINSLOT <slot> <count>.",
        ];
        reply::bulk_array(ctx.out, lines.iter().map(|l| l.as_bytes()));
        return Ok(());
    }
    enabled(ctx)?;
    let view = ctx.shared.cluster.view();
    let out = &mut *ctx.out;
    let n = c.len();
    if is(sub, "keyslot") && n == 3 {
        reply::int(out, i64::from(keyslot::slot(c.arg(2))));
    } else if is(sub, "myid") && n == 2 {
        match &view.myid {
            Some(id) => reply::bulk(out, id.as_bytes()),
            None => return Err(CmdError::err("The node id is not set (CLUSTERX SETNODEID)")),
        }
    } else if is(sub, "info") && n == 2 {
        let s = info_text(&view, &ctx.shared.cluster.migration.status());
        reply::bulk(out, s.as_bytes());
    } else if is(sub, "nodes") && n == 2 {
        reply::bulk(out, nodes_text(&view).as_bytes());
    } else if is(sub, "slots") && n == 2 {
        slots(&view, out);
    } else if is(sub, "shards") && n == 2 {
        shards(&view, out);
    } else if is(sub, "countkeysinslot") && n == 3 {
        let s = int_arg(c.arg(2))?;
        let s = u16::try_from(s)
            .ok()
            .filter(|&s| usize::from(s) < SLOTS)
            .ok_or_else(|| CmdError::err("Invalid slot"))?;
        let store = &ctx.shared.store;
        // The per-slot counts (O(1)) while logical database 0 is physical 0 (always,
        // unless a SWAPDB moved it); else a scan.
        let n = match store.slot_counts() {
            Some(sc) if store.dbs().physical(0) == Some(0) => sc.get(s),
            _ => i64::try_from(migrate::keys_in_slot(store, s, usize::MAX)?.len())
                .unwrap_or(i64::MAX),
        };
        reply::int(out, n);
    } else if is(sub, "getkeysinslot") && n == 4 {
        let s = int_arg(c.arg(2))?;
        let count = int_arg(c.arg(3))?;
        let s = u16::try_from(s)
            .ok()
            .filter(|&s| usize::from(s) < SLOTS)
            .ok_or_else(|| CmdError::err("Invalid slot"))?;
        let count = usize::try_from(count).map_err(|_| CmdError::err("Invalid number of keys"))?;
        let keys = migrate::keys_in_slot(&ctx.shared.store, s, count)?;
        reply::bulk_array(out, keys.iter().map(Vec::as_slice));
    } else if [
        "keyslot",
        "myid",
        "info",
        "nodes",
        "slots",
        "shards",
        "countkeysinslot",
        "getkeysinslot",
    ]
    .iter()
    .any(|k| is(sub, k))
    {
        return Err(CmdError::Msg(format!(
            "ERR wrong number of arguments for 'cluster|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )));
    } else {
        return Err(unknown_subcommand(sub, "cluster"));
    }
    Ok(())
}

fn info_text(v: &View, st: &migrate::Status) -> String {
    let assigned = v.topo.assigned();
    let ok = v.topo.version >= 0 && assigned == SLOTS;
    let epoch = v.topo.version.max(0);
    let mut s = String::new();
    let _ = write!(
        s,
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{}\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\n\
         cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        if ok { "ok" } else { "fail" },
        v.topo.nodes.len(),
        v.topo.serving_masters(),
    );
    if let Some(slot) = st.slot {
        let _ = write!(
            s,
            "migrating_slot(s):{slot}\r\ndestination_node:{}\r\nmigrating_state:{}\r\n\
             migrating_keys_sent:{}\r\nmigrating_write_blocked_ms:{}\r\n",
            st.dst, st.state, st.sent, st.blocked_ms
        );
        if !st.error.is_empty() {
            let _ = write!(
                s,
                "migrating_error:{}\r\n",
                st.error.replace(['\r', '\n'], " ")
            );
        }
    }
    s
}

fn nodes_text(v: &View) -> String {
    let mut s = String::new();
    let me = v.myid.as_deref();
    for (i, n) in v.topo.nodes.iter().enumerate() {
        let role = if n.master.is_some() {
            "slave"
        } else {
            "master"
        };
        let flags = if Some(n.id.as_str()) == me {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        let _ = write!(
            s,
            "{} {}:{}@{} {flags} {} 0 0 {} connected",
            n.id,
            n.ip,
            n.port,
            u32::from(n.port) + 10000,
            n.master.as_deref().unwrap_or("-"),
            v.topo.version.max(0)
        );
        if n.master.is_none() {
            for (a, b) in served_ranges(v, i) {
                if a == b {
                    let _ = write!(s, " {a}");
                } else {
                    let _ = write!(s, " {a}-{b}");
                }
            }
        }
        s.push('\n');
    }
    s
}

/// Slot ranges node `i` serves in this view (the topology, less slots migrated
/// away, plus slots imported).
fn served_ranges(v: &View, i: usize) -> Vec<(u16, u16)> {
    if v.migrated.is_empty() && v.imported.is_empty() {
        return v.topo.ranges_of(i);
    }
    let id = &v.topo.nodes[i].id;
    let mut out: Vec<(u16, u16)> = Vec::new();
    for s in 0..u16::try_from(SLOTS).unwrap_or(u16::MAX) {
        if v.serving_node(s).is_none_or(|n| &n.id != id) {
            continue;
        }
        match out.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => out.push((s, s)),
        }
    }
    out
}

fn node_entry(out: &mut Out, n: &super::topology::Node) {
    reply::array_header(out, 3);
    reply::bulk(out, n.ip.as_bytes());
    reply::int(out, i64::from(n.port));
    reply::bulk(out, n.id.as_bytes());
}

fn slots(v: &View, out: &mut Out) {
    let mut entries = Vec::new();
    for (i, n) in v.topo.nodes.iter().enumerate() {
        if n.master.is_none() {
            for r in served_ranges(v, i) {
                entries.push((r, i));
            }
        }
    }
    entries.sort_unstable();
    reply::array_header(out, entries.len());
    for ((a, b), i) in entries {
        let m = &v.topo.nodes[i];
        let slaves: Vec<_> = v.topo.slaves_of(&m.id).collect();
        reply::array_header(out, 3 + slaves.len());
        reply::int(out, i64::from(a));
        reply::int(out, i64::from(b));
        node_entry(out, m);
        for s in slaves {
            node_entry(out, s);
        }
    }
}

fn shard_node(out: &mut Out, n: &super::topology::Node, role: &str) {
    reply::map_header(out, 7);
    reply::bulk(out, b"id");
    reply::bulk(out, n.id.as_bytes());
    reply::bulk(out, b"port");
    reply::int(out, i64::from(n.port));
    reply::bulk(out, b"ip");
    reply::bulk(out, n.ip.as_bytes());
    reply::bulk(out, b"endpoint");
    reply::bulk(out, n.ip.as_bytes());
    reply::bulk(out, b"role");
    reply::bulk(out, role.as_bytes());
    reply::bulk(out, b"replication-offset");
    reply::int(out, 0);
    reply::bulk(out, b"health");
    reply::bulk(out, b"online");
}

fn shards(v: &View, out: &mut Out) {
    let masters: Vec<usize> = (0..v.topo.nodes.len())
        .filter(|&i| v.topo.nodes[i].master.is_none())
        .collect();
    reply::array_header(out, masters.len());
    for i in masters {
        let m = &v.topo.nodes[i];
        let ranges = served_ranges(v, i);
        reply::map_header(out, 2);
        reply::bulk(out, b"slots");
        reply::array_header(out, ranges.len() * 2);
        for (a, b) in ranges {
            reply::int(out, i64::from(a));
            reply::int(out, i64::from(b));
        }
        reply::bulk(out, b"nodes");
        let slaves: Vec<_> = v.topo.slaves_of(&m.id).collect();
        reply::array_header(out, 1 + slaves.len());
        shard_node(out, m, "master");
        for s in slaves {
            shard_node(out, s, "replica");
        }
    }
}

fn version_arg(c: &Command, i: usize) -> CmdResult<i64> {
    int_arg(c.arg(i))
        .ok()
        .filter(|&v| v >= 0)
        .ok_or_else(|| CmdError::err("Invalid cluster version: it must be an integer >= 0"))
}

fn clusterx(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    enabled(ctx)?;
    let sub = c.arg(1);
    let n = c.len();
    let cl = &ctx.shared.cluster;
    let arity = || {
        CmdError::Msg(format!(
            "ERR wrong number of arguments for 'clusterx|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        ))
    };
    if is(sub, "version") {
        if n != 2 {
            return Err(arity());
        }
        reply::int(ctx.out, cl.view().topo.version);
    } else if is(sub, "myid") {
        match cl.view().myid.clone() {
            Some(id) => reply::bulk(ctx.out, id.as_bytes()),
            None => reply::nil(ctx.out),
        }
    } else if is(sub, "setnodeid") {
        if n != 3 {
            return Err(arity());
        }
        let id = text(c, 2);
        if !valid_id(&id) {
            return Err(CmdError::err(
                "Invalid node id: it must be 40 hex characters",
            ));
        }
        cl.update::<CmdError>(|v| {
            let mut next = v.clone();
            next.myid = Some(id);
            Ok(next)
        })?;
        reply::ok(ctx.out);
    } else if is(sub, "setnodes") {
        if !(4..=5).contains(&n) {
            return Err(arity());
        }
        setnodes(ctx, c)?;
    } else if is(sub, "setslot") {
        // CLUSTERX SETSLOT <slot> NODE <id> <version>
        if n != 6 {
            return Err(arity());
        }
        setslot(ctx, c)?;
    } else if is(sub, "migrate") {
        if n != 4 {
            return Err(arity());
        }
        let slot = slot_arg(c, 2)?;
        migrate::start(ctx.shared, slot, &text(c, 3)).map_err(CmdError::Msg)?;
        reply::ok(ctx.out);
    } else if is(sub, "import") {
        if n != 4 {
            return Err(arity());
        }
        import(ctx, c)?;
    } else {
        return Err(unknown_subcommand(sub, "clusterx"));
    }
    Ok(())
}

/// `CLUSTERX SETNODES <text> <version> [FORCE]`.
fn setnodes(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let force = match c.len() {
        5 if is(c.arg(4), "force") => true,
        5 => return Err(CmdError::Syntax),
        _ => false,
    };
    let version = version_arg(c, 3)?;
    let t = Topology::parse(&text(c, 2), version).map_err(CmdError::Msg)?;
    ctx.shared.cluster.update(|v| {
        if !force && version <= v.topo.version {
            return Err(CmdError::Msg(format!(
                "ERR Invalid cluster version: {version} is not newer than the current version {} (add FORCE to set it anyway)",
                v.topo.version
            )));
        }
        let mut next = v.clone();
        next.topo = t;
        // The new topology supersedes slots moved by migrations.
        next.migrated.clear();
        next.imported.clear();
        Ok(next)
    })?;
    reply::ok(ctx.out);
    Ok(())
}

/// `CLUSTERX SETSLOT <slot> NODE <id> <version>` (version: exactly current + 1).
fn setslot(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let slot = slot_arg(c, 2)?;
    if !is(c.arg(3), "node") {
        return Err(CmdError::Syntax);
    }
    let id = text(c, 4);
    let version = version_arg(c, 5)?;
    ctx.shared.cluster.update(|v| {
        if v.topo.version < 0 {
            return Err(CmdError::err(
                "The cluster is not initialized (CLUSTERX SETNODES first)",
            ));
        }
        if version != v.topo.version + 1 {
            return Err(CmdError::Msg(format!(
                "ERR Invalid cluster version: SETSLOT needs version {} (current + 1), got {version}",
                v.topo.version + 1
            )));
        }
        let mut next = v.clone();
        next.topo = v.topo.with_slot(slot, &id, version).map_err(CmdError::Msg)?;
        next.migrated.remove(&slot);
        next.imported.remove(&slot);
        Ok(next)
    })?;
    reply::ok(ctx.out);
    Ok(())
}

/// `CLUSTERX IMPORT <slot> START|SUCCESS|FAIL`: a migration's own connection to the
/// destination (`migrate.rs`).
fn import(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let slot = slot_arg(c, 2)?;
    let cl = &ctx.shared.cluster;
    let store = &ctx.shared.store;
    let id = ctx.client.id;
    if is(c.arg(3), "start") {
        migrate::delete_slot(store, slot)?;
        cl.add_importer(id, slot);
    } else if is(c.arg(3), "success") {
        cl.remove_importer(id);
        cl.update::<CmdError>(|v| {
            let mut next = v.clone();
            next.imported.insert(slot);
            next.migrated.remove(&slot);
            Ok(next)
        })?;
    } else if is(c.arg(3), "fail") {
        cl.remove_importer(id);
        migrate::delete_slot(store, slot)?;
    } else {
        return Err(CmdError::Syntax);
    }
    reply::ok(ctx.out);
    Ok(())
}
