//! The registry of connected clients, for `CLIENT LIST` and `CLIENT INFO`.
//!
//! The acceptor adds a client when it accepts the connection; the owning worker
//! updates it (name, protocol, last command, buffer sizes) and removes it when the
//! connection closes. One mutex guards the map; any thread may read it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

/// What the owning worker publishes about a connection as it runs (atomics: the
/// worker stores, `CLIENT LIST` loads).
#[derive(Debug, Default)]
pub(crate) struct Live {
    /// Unconsumed bytes in the query buffer (`qbuf`).
    pub(crate) qbuf: AtomicU64,
    /// Allocated but unused bytes of the query buffer (`qbuf-free`).
    pub(crate) qbuf_free: AtomicU64,
    /// Milliseconds from the connection's creation to its last input (`idle`).
    pub(crate) active_ms: AtomicU64,
    /// The selected database (`db`).
    pub(crate) db: AtomicU64,
    /// The last command run (`cmd`): its index in the command table plus one (0: none
    /// yet) in the low 32 bits, its subcommand's index in `COMMAND`'s list of them plus
    /// one in the high 32 ([`Live::note_cmd`]).
    pub(crate) cmd: AtomicU64,
}

impl Live {
    /// The connection ran command `idx` (with subcommand `sub`, for a container
    /// command) in database `db`.
    pub(crate) fn note_cmd(&self, idx: usize, sub: Option<usize>, db: usize) {
        let low = u64::try_from(idx).map_or(0, |i| (i + 1) & 0xffff_ffff);
        let high = sub.and_then(|s| u64::try_from(s + 1).ok()).unwrap_or(0) << 32;
        self.cmd.store(low | high, Ordering::Relaxed);
        self.db
            .store(u64::try_from(db).unwrap_or(0), Ordering::Relaxed);
    }
}

/// One connected client as `CLIENT LIST` shows it.
#[derive(Debug, Clone)]
struct Entry {
    addr: String,
    laddr: String,
    name: Option<Vec<u8>>,
    created: Instant,
    resp: u8,
    live: Arc<Live>,
    /// Channel, pattern and shard-channel subscriptions.
    subs: (usize, usize, usize),
    /// Client-side caching: (REDIRECT id or 0, BCAST) while tracking is on.
    tracking: Option<(u64, bool)>,
}

/// The registry.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    map: Mutex<BTreeMap<u64, Entry>>,
}

impl Clients {
    /// Registers a client.
    pub(crate) fn add(&self, id: u64, addr: String, laddr: String) {
        let now = Instant::now();
        self.map.lock().insert(
            id,
            Entry {
                addr,
                laddr,
                name: None,
                created: now,
                resp: 2,
                live: Arc::default(),
                subs: (0, 0, 0),
                tracking: None,
            },
        );
    }

    /// The counters the worker owning client `id` publishes.
    pub(crate) fn live(&self, id: u64) -> Arc<Live> {
        self.map
            .lock()
            .get(&id)
            .map_or_else(Arc::default, |e| e.live.clone())
    }

    /// Records the protocol version (HELLO).
    pub(crate) fn set_resp(&self, id: u64, resp: u8) {
        if let Some(e) = self.map.lock().get_mut(&id) {
            e.resp = resp;
        }
    }

    /// Forgets a client.
    pub(crate) fn remove(&self, id: u64) {
        self.map.lock().remove(&id);
    }

    /// Records a name.
    pub(crate) fn set_name(&self, id: u64, name: Option<Vec<u8>>) {
        if let Some(e) = self.map.lock().get_mut(&id) {
            e.name = name;
        }
    }

    /// Records a client's subscription counts.
    pub(crate) fn set_subs(&self, id: u64, subs: (usize, usize, usize)) {
        if let Some(e) = self.map.lock().get_mut(&id) {
            e.subs = subs;
        }
    }

    /// Records a client's tracking state (`CLIENT TRACKING`).
    pub(crate) fn set_tracking(&self, id: u64, tracking: Option<(u64, bool)>) {
        if let Some(e) = self.map.lock().get_mut(&id) {
            e.tracking = tracking;
        }
    }

    fn line(id: u64, e: &Entry, names: &dyn Fn(u64) -> String) -> String {
        // Redis 7.0's fields in its order; buffer and memory fields this server does
        // not track per client are 0.
        let age = e.created.elapsed();
        let active = std::time::Duration::from_millis(e.live.active_ms.load(Ordering::Relaxed));
        format!(
            "id={id} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi=-1 qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user=default redir={} resp={}",
            e.addr,
            e.laddr,
            e.name
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default(),
            age.as_secs(),
            age.saturating_sub(active).as_secs(),
            Self::flags(e),
            e.live.db.load(Ordering::Relaxed),
            e.subs.0,
            e.subs.1,
            e.subs.2,
            e.live.qbuf.load(Ordering::Relaxed),
            e.live.qbuf_free.load(Ordering::Relaxed),
            names(e.live.cmd.load(Ordering::Relaxed)),
            e.tracking
                .map_or(-1, |(r, _)| i64::try_from(r).unwrap_or(i64::MAX)),
            e.resp
        )
    }

    /// Redis's flag letters: `P` pub/sub, `t` tracking, `B` broadcast tracking; `N`
    /// for none.
    fn flags(e: &Entry) -> String {
        let mut f = String::new();
        if e.subs != (0, 0, 0) {
            f.push('P');
        }
        if let Some((_, bcast)) = e.tracking {
            f.push('t');
            if bcast {
                f.push('B');
            }
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }

    /// `CLIENT LIST` text (`names`: the `cmd` field from [`Live::cmd`]) of the clients
    /// `keep` admits, given their id and whether they are subscribed.
    pub(crate) fn list(
        &self,
        names: &dyn Fn(u64) -> String,
        keep: &dyn Fn(u64, bool) -> bool,
    ) -> String {
        self.map
            .lock()
            .iter()
            .filter(|(id, e)| keep(**id, e.subs != (0, 0, 0)))
            .map(|(id, e)| Self::line(*id, e, names) + "\n")
            .collect()
    }

    /// Every client: id, address, local address, and whether it is subscribed
    /// (`CLIENT KILL`'s filters).
    pub(crate) fn summary(&self) -> Vec<(u64, String, String, bool)> {
        self.map
            .lock()
            .iter()
            .map(|(id, e)| (*id, e.addr.clone(), e.laddr.clone(), e.subs != (0, 0, 0)))
            .collect()
    }

    /// `CLIENT INFO` text.
    pub(crate) fn info_line(&self, id: u64, names: &dyn Fn(u64) -> String) -> String {
        self.map
            .lock()
            .get(&id)
            .map(|e| Self::line(id, e, names) + "\n")
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_shows_redis_fields() {
        let c = Clients::default();
        c.add(3, "127.0.0.1:5000".into(), "127.0.0.1:6380".into());
        c.set_name(3, Some(b"app".to_vec()));
        let l = c.list(&|_| "NULL".to_string(), &|_, _| true);
        for f in [
            "id=3 ",
            "addr=127.0.0.1:5000 ",
            "name=app ",
            "db=0 ",
            "cmd=NULL ",
            "resp=2\n",
        ] {
            assert!(l.contains(f), "{f} in {l}");
        }
        c.remove(3);
        assert_eq!(c.list(&|_| String::new(), &|_, _| true), "");
    }
}
