//! Client-side caching (`CLIENT TRACKING`): which clients may cache which keys, and the
//! invalidation messages that tell them a key changed.
//!
//! Redis 7.0's model, served by many worker threads:
//!
//! - **Default mode**: after a client that tracks runs a read-only command, the
//!   command's key arguments are remembered for it in the tracking table (`table.rs`,
//!   key → client ids, bounded by `tracking-table-max-keys` with random eviction).
//!   When a key is written, each client that read it gets one invalidation naming the
//!   key, and the key leaves the table (a client is told once until it reads again).
//! - **BCAST**: a client registers prefixes (the empty prefix by default); every write
//!   of a key under one of them is sent to it, one message per prefix per committed
//!   change with the keys of that change under the prefix (Redis batches per event-loop
//!   round; a command or a MULTI/EXEC block commits as one change here).
//! - **NOLOOP** skips the keys the client changed itself; **OPTIN / OPTOUT** gate what
//!   is remembered on `CLIENT CACHING` (connection state, `commands.rs`).
//! - **REDIRECT** sends a client's invalidations to another connection: as a RESP3
//!   push if that one speaks RESP3, else as a `message` on `__redis__:invalidate` if it
//!   listens there, else not at all. If the target is gone, the tracking client gets
//!   one `tracking-redir-broken` push (RESP3 only) and its messages are dropped.
//! - FLUSHALL/FLUSHDB sends every tracking client an invalidation with a null key list
//!   and empties the table.
//!
//! Messages are left in the receiver's pub/sub mailbox (`crate::pubsub::Mailbox`,
//! bounded by the pub/sub output limit), so its worker writes them between replies:
//! a message caused by the client's own command follows that command's reply, as in
//! Redis 7.0.
//!
//! Correctness across threads: reads are remembered and writes invalidated while the
//! command holds its keys' stripe locks (`cmd::run_data`, `Store::commit`), so a write
//! of a key is ordered before or after a read of it: either the read sees the new
//! value, or the write finds the reader in the table.
//!
//! Layers: this file and `table.rs` sit beside `pubsub` (below `store`, which calls
//! [`Tracking::invalidate`] at commit); `commands.rs` is the connection's side, at the
//! level of `cmd/`.
//!
//! Locks: `state` (mutex) guards the table, the tracking clients and the prefix map;
//! `directory` (mutex) maps every connected client's id to its mailbox (redirect
//! targets). Order: `state`, then `directory`, then the pub/sub registry, then a
//! mailbox. `clients` counts tracking clients: while it is 0 nothing is recorded or
//! looked up (one atomic load per command).

mod commands;
mod table;

use std::collections::{btree_map, hash_map, BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

#[allow(
    unused_imports,
    reason = "the hook for scripts (a script that ran a read remembers its keys)"
)]
pub(crate) use commands::remember;
pub(crate) use commands::{after_command, after_read, client_command, disconnect, Local};

use crate::pubsub::{Kind, Limit, Mailbox, PubSub};
use table::KeyTable;

/// The channel a RESP2 redirect target listens on.
pub(crate) const CHANNEL: &[u8] = b"__redis__:invalidate";

/// `tracking-table-max-keys`' default.
const DEFAULT_MAX_KEYS: u64 = 1_000_000;

/// A tracking client as the other threads see it.
#[derive(Debug)]
struct Tracker {
    /// Its own mailbox (messages without redirect, `tracking-redir-broken`).
    mailbox: Arc<Mailbox>,
    /// REDIRECT target's id (0: none).
    redirect: u64,
    bcast: bool,
    noloop: bool,
    /// The redirect target was found gone (reported once).
    broken: bool,
    /// BCAST prefixes.
    prefixes: Vec<Vec<u8>>,
}

/// What `CLIENT TRACKING ON` asks for (validated by `commands.rs`).
#[derive(Debug, Default)]
pub(crate) struct Mode {
    /// REDIRECT target (0: none).
    pub(crate) redirect: u64,
    /// BCAST.
    pub(crate) bcast: bool,
    /// NOLOOP.
    pub(crate) noloop: bool,
    /// PREFIX arguments (BCAST only).
    pub(crate) prefixes: Vec<Vec<u8>>,
}

#[derive(Debug, Default)]
struct State {
    table: KeyTable,
    clients: HashMap<u64, Tracker>,
    /// BCAST prefix → ids of the clients registered for it.
    prefixes: BTreeMap<Vec<u8>, Vec<u64>>,
    /// Counter behind the random eviction picks.
    picks: u64,
}

/// `INFO`'s tracking figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Keys in the table.
    pub(crate) keys: usize,
    /// (key, client) pairs in the table.
    pub(crate) items: usize,
    /// Distinct BCAST prefixes.
    pub(crate) prefixes: usize,
    /// Clients with tracking on.
    pub(crate) clients: usize,
}

/// What one invalidation message says.
enum Payload<'a> {
    /// These keys changed.
    Keys(&'a [&'a [u8]]),
    /// Every key changed (FLUSHALL/FLUSHDB): a null key list.
    Flush,
}

/// The server's client-side caching state. See the module docs.
pub(crate) struct Tracking {
    clients: AtomicUsize,
    max_keys: AtomicU64,
    state: Mutex<State>,
    directory: Mutex<HashMap<u64, Arc<Mailbox>>>,
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            clients: AtomicUsize::new(0),
            max_keys: AtomicU64::new(DEFAULT_MAX_KEYS),
            state: Mutex::default(),
            directory: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Tracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracking")
            .field("clients", &self.clients.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Appends one invalidation frame for a target speaking `resp3` (else the RESP2
/// pub/sub message form); a flush's null is in the tracking client's protocol
/// (`null3`), as Redis writes it.
fn encode(buf: &mut Vec<u8>, resp3: bool, null3: bool, what: &Payload<'_>) {
    if resp3 {
        buf.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        buf.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    }
    match what {
        Payload::Keys(keys) => {
            buf.push(b'*');
            buf.extend_from_slice(keys.len().to_string().as_bytes());
            buf.extend_from_slice(b"\r\n");
            for k in *keys {
                buf.push(b'$');
                buf.extend_from_slice(k.len().to_string().as_bytes());
                buf.extend_from_slice(b"\r\n");
                buf.extend_from_slice(k);
                buf.extend_from_slice(b"\r\n");
            }
        }
        Payload::Flush if null3 => buf.extend_from_slice(b"_\r\n"),
        Payload::Flush => buf.extend_from_slice(b"$-1\r\n"),
    }
}

/// Sends tracking client `id` (or its redirect target) one invalidation.
fn send(
    st: &mut State,
    dir: &HashMap<u64, Arc<Mailbox>>,
    ps: &PubSub,
    limit: Limit,
    id: u64,
    what: &Payload<'_>,
) {
    let Some(t) = st.clients.get_mut(&id) else {
        return;
    };
    let (target, redirected) = if t.redirect == 0 {
        (&t.mailbox, false)
    } else if let Some(m) = dir.get(&t.redirect) {
        (m, true)
    } else {
        if !t.broken {
            t.broken = true;
            if t.mailbox.resp3() {
                let r = t.redirect.to_string();
                t.mailbox.deliver(limit, |b| {
                    b.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
                    b.extend_from_slice(r.as_bytes());
                    b.extend_from_slice(b"\r\n");
                });
            }
        }
        return;
    };
    let resp3 = target.resp3();
    let listens = redirected && ps.listens(Kind::Channel, CHANNEL, target.id);
    if !(resp3 || listens) {
        // A RESP2 connection cannot take a push: nothing is sent, as in Redis.
        return;
    }
    let null3 = t.mailbox.resp3();
    target.deliver(limit, |b| encode(b, resp3, null3, what));
}

impl Tracking {
    /// True while any client tracks (the fast path's one atomic load).
    pub(crate) fn active(&self) -> bool {
        self.clients.load(Ordering::Relaxed) > 0
    }

    /// A connection opened: it may be named as a REDIRECT target.
    pub(crate) fn register(&self, mb: &Arc<Mailbox>) {
        self.directory.lock().insert(mb.id, mb.clone());
    }

    /// The mailbox of connected client `id` (`CLIENT KILL`).
    pub(crate) fn mailbox(&self, id: u64) -> Option<Arc<Mailbox>> {
        self.directory.lock().get(&id).cloned()
    }

    /// A connection closed.
    pub(crate) fn unregister(&self, id: u64) {
        self.directory.lock().remove(&id);
    }

    /// True if client `id` is connected.
    pub(crate) fn connected(&self, id: u64) -> bool {
        self.directory.lock().contains_key(&id)
    }

    /// Turns tracking on (or changes its options) for the owner of `mb`.
    pub(crate) fn enable(&self, mb: &Arc<Mailbox>, mode: Mode) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let id = mb.id;
        let t = match st.clients.entry(id) {
            hash_map::Entry::Occupied(e) => e.into_mut(),
            hash_map::Entry::Vacant(v) => {
                self.clients.fetch_add(1, Ordering::Relaxed);
                v.insert(Tracker {
                    mailbox: mb.clone(),
                    redirect: 0,
                    bcast: false,
                    noloop: false,
                    broken: false,
                    prefixes: Vec::new(),
                })
            }
        };
        t.redirect = mode.redirect;
        t.bcast = mode.bcast;
        t.noloop = mode.noloop;
        t.broken = false;
        if mode.bcast {
            let mut want = mode.prefixes;
            if want.is_empty() {
                want.push(Vec::new());
            }
            for p in want {
                if !t.prefixes.contains(&p) {
                    st.prefixes.entry(p.clone()).or_default().push(id);
                    t.prefixes.push(p);
                }
            }
        }
    }

    /// Turns tracking off for client `id` (also when it disconnects).
    pub(crate) fn disable(&self, id: u64) {
        let mut st = self.state.lock();
        let Some(t) = st.clients.remove(&id) else {
            return;
        };
        for p in t.prefixes {
            if let btree_map::Entry::Occupied(mut e) = st.prefixes.entry(p) {
                e.get_mut().retain(|&i| i != id);
                if e.get().is_empty() {
                    e.remove();
                }
            }
        }
        if self.clients.fetch_sub(1, Ordering::Relaxed) == 1 {
            // Nobody tracks: no entry can be sent any more.
            st.table.clear();
        }
    }

    /// Client `id`'s BCAST prefixes.
    pub(crate) fn prefixes_of(&self, id: u64) -> Vec<Vec<u8>> {
        self.state
            .lock()
            .clients
            .get(&id)
            .map(|t| t.prefixes.clone())
            .unwrap_or_default()
    }

    /// True if client `id`'s redirect target was found gone.
    pub(crate) fn broken(&self, id: u64) -> bool {
        self.state.lock().clients.get(&id).is_some_and(|t| t.broken)
    }

    /// Client `id` read `keys` (default mode): remember them, then evict keys over
    /// `tracking-table-max-keys`.
    pub(crate) fn remember(&self, ps: &PubSub, id: u64, keys: &[&[u8]]) {
        if keys.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        for k in keys {
            st.table.remember(k, id);
        }
        self.evict(&mut st, ps, keys);
    }

    /// `tracking-table-max-keys` (0: no limit).
    pub(crate) fn max_keys(&self) -> u64 {
        self.max_keys.load(Ordering::Relaxed)
    }

    /// Sets `tracking-table-max-keys`, evicting at once down to it.
    pub(crate) fn set_max_keys(&self, ps: &PubSub, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
        let mut st = self.state.lock();
        self.evict(&mut st, ps, &[]);
    }

    /// Evicts random keys (other than `keep` where it can) while the table is over
    /// its bound, invalidating each for its clients (NOLOOP does not apply: no
    /// client changed them).
    fn evict(&self, st: &mut State, ps: &PubSub, keep: &[&[u8]]) {
        let max = usize::try_from(self.max_keys()).unwrap_or(usize::MAX);
        if max == 0 || st.table.len() <= max {
            return;
        }
        let dir = self.directory.lock();
        let limit = ps.limit();
        while st.table.len() > max {
            let mut victim: Option<Vec<u8>> = None;
            for _ in 0..4 {
                st.picks = st.picks.wrapping_add(1);
                let r = crate::hash::hash64(&st.picks.to_le_bytes());
                let Some(k) = st.table.pick(r) else { break };
                let kept = keep.contains(&k);
                if victim.is_none() || !kept {
                    victim = Some(k.to_vec());
                }
                if !kept {
                    break;
                }
            }
            let Some(key) = victim else { break };
            for id in st.table.take(&key).unwrap_or_default() {
                if st.clients.get(&id).is_some_and(|t| !t.bcast) {
                    send(st, &dir, ps, limit, id, &Payload::Keys(&[key.as_slice()]));
                }
            }
        }
    }

    /// `keys` were written by client `origin` (0: by the server, e.g. expiry):
    /// invalidates them for the clients that read them and broadcasts them to the
    /// BCAST clients whose prefixes match. The caller holds the keys' stripe locks.
    pub(crate) fn invalidate(&self, ps: &PubSub, keys: &[Vec<u8>], origin: u64) {
        if !self.active() || keys.is_empty() {
            return;
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let dir = self.directory.lock();
        let limit = ps.limit();
        for key in keys {
            let Some(ids) = st.table.take(key) else {
                continue;
            };
            for id in ids {
                let skip = st
                    .clients
                    .get(&id)
                    .is_none_or(|t| t.bcast || (t.noloop && id == origin));
                if !skip {
                    send(st, &dir, ps, limit, id, &Payload::Keys(&[key.as_slice()]));
                }
            }
        }
        if st.prefixes.is_empty() {
            return;
        }
        let mut msgs: Vec<(u64, Vec<&[u8]>)> = Vec::new();
        for (prefix, ids) in &st.prefixes {
            let mut hit: Vec<&[u8]> = keys
                .iter()
                .map(Vec::as_slice)
                .filter(|k| k.starts_with(prefix))
                .collect();
            if hit.is_empty() {
                continue;
            }
            hit.sort_unstable();
            hit.dedup();
            for &id in ids {
                if !st
                    .clients
                    .get(&id)
                    .is_some_and(|t| t.noloop && id == origin)
                {
                    msgs.push((id, hit.clone()));
                }
            }
        }
        for (id, hit) in msgs {
            send(st, &dir, ps, limit, id, &Payload::Keys(&hit));
        }
    }

    /// FLUSHALL/FLUSHDB: every tracking client is told every key changed, and the
    /// table is emptied. The caller holds every stripe lock.
    pub(crate) fn flush(&self, ps: &PubSub) {
        if !self.active() {
            return;
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.table.clear();
        let dir = self.directory.lock();
        let limit = ps.limit();
        let mut ids: Vec<u64> = st.clients.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            send(st, &dir, ps, limit, id, &Payload::Flush);
        }
    }

    /// `INFO`'s figures.
    pub(crate) fn stats(&self) -> Stats {
        let st = self.state.lock();
        Stats {
            keys: st.table.len(),
            items: st.table.items(),
            prefixes: st.prefixes.len(),
            clients: self.clients.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests;
