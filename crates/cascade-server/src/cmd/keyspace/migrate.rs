//! MIGRATE: moves (or with COPY copies) keys to another server, as Redis does — the
//! DUMP payload of each key is sent as `RESTORE key ttl payload [REPLACE]` over a
//! connection cached per target for 10 s (`migrate_cached_sockets` in INFO), and each
//! key the target acknowledged is deleted here in the same engine batch.
//!
//! The payload is CascadeKV's own (`dump.rs`), so the target is another CascadeKV
//! server; a Redis target refuses it with its checksum error, which comes back as
//! `ERR Target instance replied with error: ...`.
//!
//! Invariants: a key is deleted here only after the target answered `OK` to its
//! RESTORE; the command holds the keys' stripe locks from the first read to the
//! commit, so no write to them is lost between the DUMP and the delete. A connection
//! that failed or timed out is dropped, never cached.
//!
//! Locking: [`Sockets`] is guarded by its mutex, held only to take or return a
//! connection (never across network I/O).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::dump::payload;
use crate::cluster::wire::{Conn, Reply};
use crate::cmd::{is, spec, Keys, Run::Data, Spec, W};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// `MIGRATE`.
pub(crate) static SPECS: &[Spec] = &[spec(
    "migrate",
    -6,
    W,
    Keys::Migrate,
    "generic",
    "Moves keys to another server atomically (DUMP, RESTORE on the target, DEL here).",
    Data(migrate),
)];

/// An idle cached connection is closed after this long (Redis: 10 s).
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Most cached connections (Redis: 64).
const CACHE_MAX: usize = 64;

struct Cached {
    conn: Conn,
    used: Instant,
    /// The database the connection last selected (`SELECT`).
    db: Option<i64>,
}

/// Connections to migration targets, by `host:port`.
#[derive(Default)]
pub(crate) struct Sockets {
    map: Mutex<HashMap<String, Cached>>,
}

impl std::fmt::Debug for Sockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sockets").finish_non_exhaustive()
    }
}

impl Sockets {
    fn expire(map: &mut HashMap<String, Cached>) {
        map.retain(|_, c| c.used.elapsed() < CACHE_TTL);
    }

    /// Cached connections now open (INFO `migrate_cached_sockets`); closes the idle.
    pub(crate) fn count(&self) -> usize {
        let mut map = self.map.lock();
        Self::expire(&mut map);
        map.len()
    }

    fn take(&self, target: &str) -> Option<Cached> {
        let mut map = self.map.lock();
        Self::expire(&mut map);
        map.remove(target)
    }

    fn put(&self, target: String, c: Cached) {
        let mut map = self.map.lock();
        if map.len() < CACHE_MAX {
            map.insert(target, c);
        }
    }
}

/// MIGRATE's arguments after host, port, key, db and timeout.
struct Opts<'a> {
    copy: bool,
    replace: bool,
    auth: Option<Vec<&'a [u8]>>,
    /// Where the KEYS list starts.
    keys_at: Option<usize>,
}

fn parse(c: &Command) -> CmdResult<Opts<'_>> {
    let mut o = Opts {
        copy: false,
        replace: false,
        auth: None,
        keys_at: None,
    };
    let mut i = 6;
    while i < c.len() {
        let a = c.arg(i);
        if is(a, "copy") {
            o.copy = true;
        } else if is(a, "replace") {
            o.replace = true;
        } else if is(a, "auth") && i + 1 < c.len() {
            o.auth = Some(vec![c.arg(i + 1)]);
            i += 1;
        } else if is(a, "auth2") && i + 2 < c.len() {
            o.auth = Some(vec![c.arg(i + 1), c.arg(i + 2)]);
            i += 2;
        } else if is(a, "keys") {
            if !c.arg(3).is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.keys_at = Some(i + 1);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Ok(o)
}

/// The keys MIGRATE names: argument 3, or with an empty argument 3 those after KEYS
/// (what [`Keys::Migrate`] locks).
pub(crate) fn keys(c: &Command) -> Vec<&[u8]> {
    if c.len() > 3 && !c.arg(3).is_empty() {
        return vec![c.arg(3)];
    }
    match parse(c) {
        Ok(Opts {
            keys_at: Some(at), ..
        }) => (at..c.len()).map(|i| c.arg(i)).collect(),
        _ => Vec::new(),
    }
}

fn ioerr(what: &str) -> CmdError {
    CmdError::Msg(format!("IOERR error or timeout {what} target instance"))
}

fn migrate(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let opts = parse(c)?;
    let db = crate::cmd::int_arg(c.arg(4))?;
    let timeout = crate::cmd::int_arg(c.arg(5))?;
    let timeout = Duration::from_millis(
        u64::try_from(timeout)
            .ok()
            .filter(|&t| t > 0)
            .unwrap_or(1000),
    );
    let target = format!(
        "{}:{}",
        String::from_utf8_lossy(c.arg(1)),
        String::from_utf8_lossy(c.arg(2))
    );
    // The keys that exist, with their payloads and remaining time to live.
    let now = tx.now();
    let mut items = Vec::new();
    for k in keys(c) {
        if let Some((p, exp)) = payload(tx, k)? {
            let ttl = exp.map_or(0, |at| at.saturating_sub(now).max(1));
            items.push((k, p, ttl));
        }
    }
    if items.is_empty() {
        reply::simple(out, "NOKEY");
        return Ok(());
    }
    let sockets = tx.store().migrate_sockets();
    let mut cached = match sockets.take(&target) {
        Some(c) => c,
        None => Cached {
            conn: Conn::connect_within(&target, timeout).map_err(|_| {
                CmdError::Msg("IOERR error or timeout connecting to the client".into())
            })?,
            used: Instant::now(),
            db: None,
        },
    };
    cached
        .conn
        .set_timeout(timeout)
        .map_err(|_| ioerr("writing to"))?;
    let mut preamble = 0;
    if let Some(auth) = &opts.auth {
        let mut a: Vec<&[u8]> = vec![b"AUTH"];
        a.extend(auth.iter().copied());
        cached.conn.queue(&a);
        preamble += 1;
    }
    let select = cached.db != Some(db);
    if select {
        cached.conn.queue(&[b"SELECT", c.arg(4)]);
        preamble += 1;
    }
    for (k, p, ttl) in &items {
        let ttl = ttl.to_string();
        let mut a: Vec<&[u8]> = vec![b"RESTORE", k, ttl.as_bytes(), p];
        if opts.replace {
            a.push(b"REPLACE");
        }
        cached.conn.queue(&a);
    }
    // A failed exchange drops the connection (it is not put back).
    let replies = cached.conn.flush().map_err(|_| ioerr("reading from"))?;
    let mut error = None;
    for r in &replies[..preamble] {
        if let Reply::Err(e) = r {
            error.get_or_insert_with(|| e.clone());
        }
    }
    if error.is_none() {
        for (r, (k, _, _)) in replies[preamble..].iter().zip(&items) {
            match r {
                Reply::Err(e) => {
                    error.get_or_insert_with(|| e.clone());
                }
                Reply::Ok(_) if !opts.copy => {
                    if let Some(m) = tx.meta(k)? {
                        tx.remove(k, &m)?;
                        tx.event(crate::pubsub::class::GENERIC, "del", k);
                    }
                }
                Reply::Ok(_) => {}
            }
        }
    }
    if error.is_none() || !select {
        // The connection is in a known state: keep it, with its database.
        cached.db = if error.is_none() { Some(db) } else { cached.db };
        cached.used = Instant::now();
        sockets.put(target, cached);
    }
    match error {
        None => reply::ok(out),
        Some(e) => {
            return Err(CmdError::err(format!(
                "Target instance replied with error: {e}"
            )))
        }
    }
    Ok(())
}
