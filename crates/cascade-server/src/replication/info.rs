//! `INFO replication` (Redis's field names, which Sentinel parses) and `ROLE`.

use std::sync::atomic::Ordering;

use super::Link;
use crate::keyspace::now_ms;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;

fn state_name(s: u8) -> &'static str {
    match s {
        0 => "wait_bgsave",
        1 => "send_bulk",
        _ => "online",
    }
}

fn link_name(l: Link) -> &'static str {
    match l {
        Link::Connect => "connect",
        Link::Connecting => "connecting",
        Link::Sync => "sync",
        Link::Connected => "connected",
    }
}

/// The fields of `INFO replication`, in Redis's order.
pub(crate) fn fields(shared: &Shared) -> Vec<(String, String)> {
    let mut f: Vec<(String, String)> = Vec::new();
    let mut add = |k: &str, v: String| f.push((k.to_string(), v));
    let feed = shared.store.feed();
    let offset = feed.offset();
    let (replid, replid2, second, master, link, down, last_io) = shared.repl.with_state(|s| {
        (
            s.replid.clone(),
            s.replid2.clone(),
            s.second_offset,
            s.master.clone(),
            s.link,
            s.down_since,
            s.last_io,
        )
    });
    let settings = shared.repl.settings.lock().clone();
    match &master {
        Some((h, p)) => {
            add("role", "slave".into());
            add("master_host", h.clone());
            add("master_port", p.to_string());
            let up = link == Link::Connected;
            add("master_link_status", if up { "up" } else { "down" }.into());
            add(
                "master_last_io_seconds_ago",
                if up {
                    last_io.elapsed().as_secs().to_string()
                } else {
                    "-1".into()
                },
            );
            add(
                "master_sync_in_progress",
                u8::from(link == Link::Sync).to_string(),
            );
            add("slave_read_repl_offset", offset.to_string());
            add("slave_repl_offset", offset.to_string());
            if let Some(d) = down.filter(|_| !up) {
                add(
                    "master_link_down_since_seconds",
                    d.elapsed().as_secs().to_string(),
                );
            }
            add("slave_priority", settings.priority.to_string());
            add("slave_read_only", "1".into());
            add("replica_announced", "1".into());
        }
        None => add("role", "master".into()),
    }
    let peers = shared.repl.peers();
    add("connected_slaves", peers.len().to_string());
    let now = now_ms();
    for (i, p) in peers.iter().enumerate() {
        add(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={},offset={},lag={}",
                p.ip,
                p.port,
                state_name(p.state.load(Ordering::Acquire)),
                p.ack.load(Ordering::Acquire),
                now.saturating_sub(p.ack_ms.load(Ordering::Acquire)) / 1000
            ),
        );
    }
    add("master_failover_state", "no-failover".into());
    add("master_replid", replid);
    add("master_replid2", replid2);
    add("master_repl_offset", offset.to_string());
    add("second_repl_offset", second.to_string());
    let (first, len) = feed.span();
    add("repl_backlog_active", u8::from(feed.active()).to_string());
    add("repl_backlog_size", feed.capacity().to_string());
    add("repl_backlog_first_byte_offset", first.to_string());
    add("repl_backlog_histlen", len.to_string());
    f
}

/// `ROLE`.
pub(crate) fn role(shared: &Shared, out: &mut Out) {
    let offset = i64::try_from(shared.store.feed().offset()).unwrap_or(i64::MAX);
    let master = shared
        .repl
        .with_state(|s| s.master.clone().map(|m| (m, s.link)));
    if let Some(((h, p), link)) = master {
        reply::array_header(out, 5);
        reply::bulk(out, b"slave");
        reply::bulk(out, h.as_bytes());
        reply::int(out, i64::from(p));
        reply::bulk(out, link_name(link).as_bytes());
        reply::int(out, offset);
        return;
    }
    let peers = shared.repl.peers();
    reply::array_header(out, 3);
    reply::bulk(out, b"master");
    reply::int(out, offset);
    reply::array_header(out, peers.len());
    for p in peers {
        reply::array_header(out, 3);
        reply::bulk(out, p.ip.as_bytes());
        reply::bulk(out, p.port.to_string().as_bytes());
        reply::bulk(out, p.ack.load(Ordering::Acquire).to_string().as_bytes());
    }
}
