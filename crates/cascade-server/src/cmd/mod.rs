//! The command table and dispatch.
//!
//! Each command is a [`Spec`]: its name, Redis arity (positive = exact argument count
//! including the name, negative = at least that many), its keys and a handler. There
//! are two kinds of handler, and each gets only what it uses (as in mini-redis):
//!
//! - [`Run::Data`] commands touch only the keyspace. They get a [`Tx`] (reads and
//!   pending writes over the store), the arguments and the reply buffer. [`dispatch`]
//!   takes the stripe locks of the keys the spec names, runs the handler and commits
//!   its writes as one atomic engine batch.
//! - [`Run::Ctl`] commands need the server or the connection (`CLIENT`, `CONFIG`,
//!   `INFO`, `SCAN`'s cursor table, `AUTH`, ...). They get a [`Ctx`].
//!
//! [`dispatch`] checks authentication and arity with Redis's exact error texts and
//! turns a [`CmdError`] into an error reply. A handler either writes one complete
//! reply into `out` and returns `Ok`, or writes nothing and returns `Err`.
//!
//! Handlers run on worker threads; the table is immutable and shared.

pub(crate) mod args;
pub(crate) mod bits;
pub(crate) mod events;
pub(crate) mod geo;
pub(crate) mod hashes;
pub(crate) mod hyperloglog;
pub(crate) mod keyspace;
pub(crate) mod lists;
#[expect(
    clippy::unnecessary_wraps,
    reason = "every handler has the table's signature, even one that cannot fail"
)]
pub(crate) mod multi;
#[expect(
    clippy::unnecessary_wraps,
    reason = "every handler has the table's signature, even one that cannot fail"
)]
pub(crate) mod pubsub;
pub(crate) mod replication;
pub(crate) mod scripting;
pub(crate) mod server;
pub(crate) mod sets;
pub(crate) mod streams;
pub(crate) mod strings;
pub(crate) mod unsupported;
pub(crate) mod zsets;

#[cfg(test)]
pub(crate) mod testkit;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{CmdError, CmdResult};
use crate::pubsub::Mailbox;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::shared::Shared;
use crate::store::{Store, Tx};

pub(crate) use args::{float_arg, int_arg, is, parse_i64};

/// Per-connection state that commands read and change.
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent connection states, as Redis's client flags"
)]
pub(crate) struct Client {
    /// Unique id (`CLIENT ID`).
    pub(crate) id: u64,
    /// Peer address.
    pub(crate) addr: String,
    /// `CLIENT SETNAME`.
    pub(crate) name: Option<Vec<u8>>,
    /// Authenticated (always true without `--requirepass`).
    pub(crate) authed: bool,
    /// Close after the pending replies are written (`QUIT`, protocol error).
    pub(crate) close_after_reply: bool,
    /// Commands queued since MULTI (`None` outside a transaction).
    pub(crate) multi: Option<Vec<Command>>,
    /// A command failed to queue: EXEC answers EXECABORT.
    pub(crate) multi_failed: bool,
    /// Watched keys: the logical database, the key, and whether it was live at WATCH
    /// time. The registrations in `notify.rs` are qualified by the physical database
    /// (`Store::qualify`), which SWAPDB changes: they are found again through this.
    pub(crate) watched: Vec<(usize, Vec<u8>, bool)>,
    /// The selected database (`SELECT`).
    pub(crate) db: usize,
    /// Set when a watched key changes (`notify.rs`).
    pub(crate) dirty: Arc<AtomicBool>,
    /// The command now running is a parked blocking command run again.
    pub(crate) retrying: bool,
    /// Where publishers leave this connection's messages (`crate::pubsub`).
    pub(crate) mailbox: Arc<Mailbox>,
    /// Its channel, pattern and shard-channel subscriptions.
    pub(crate) subs: pubsub::Subscriptions,
    /// `CLIENT REPLY`: which replies the client gets.
    pub(crate) reply_mode: ReplyMode,
    /// A blocking command asked to be parked with these arguments instead of its own
    /// ([`CmdError::BlockAs`]); the worker takes it when it parks the client.
    pub(crate) park_as: Option<Command>,
    /// `CLIENT TRACKING` options (`crate::tracking`).
    pub(crate) tracking: crate::tracking::Local,
    /// A scripting command handed to the script thread: the connection waits for
    /// this reply before running its next command.
    pub(crate) script: Option<Arc<crate::scripting::Slot>>,
    /// Wakes this connection's worker (set by the worker; `None`: wait in place).
    pub(crate) wake: Option<crate::notify::WakeFn>,
    /// What it said in `REPLCONF`/`PSYNC` (`crate::replication`).
    pub(crate) repl: crate::replication::ConnRepl,
    /// `READONLY` / `ASKING` (cluster mode).
    pub(crate) cluster: crate::cluster::ConnState,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// `CLIENT REPLY ON|OFF|SKIP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// Every reply.
    On,
    /// No replies until `CLIENT REPLY ON`.
    Off,
    /// No reply to the next command.
    Skip,
    /// No reply to this command (the one after `CLIENT REPLY SKIP`).
    SkipThis,
}

impl Client {
    /// A new connection's state.
    pub(crate) fn new(id: u64, addr: String, authed: bool) -> Client {
        Client {
            id,
            addr,
            name: None,
            authed,
            close_after_reply: false,
            multi: None,
            multi_failed: false,
            watched: Vec::new(),
            db: 0,
            dirty: Arc::new(AtomicBool::new(false)),
            retrying: false,
            // The worker gives the connection a mailbox that wakes it (`worker/`).
            mailbox: Mailbox::new(id, Arc::new(|| {})),
            subs: pubsub::Subscriptions::default(),
            reply_mode: ReplyMode::On,
            park_as: None,
            tracking: crate::tracking::Local::default(),
            script: None,
            wake: None,
            repl: crate::replication::ConnRepl::default(),
            cluster: crate::cluster::ConnState::default(),
        }
    }

    /// Forgets every watched key.
    pub(crate) fn unwatch(&mut self, store: &Store) {
        if !self.watched.is_empty() {
            let keys: Vec<Vec<u8>> = self
                .watched
                .drain(..)
                .map(|(db, k, _)| store.qualify(db, &k))
                .collect();
            store.notify().unwatch(self.id, &keys);
        }
        self.dirty.store(false, Ordering::Release);
    }
}

/// What a [`Run::Ctl`] handler works with.
pub(crate) struct Ctx<'a> {
    /// Server-wide state.
    pub(crate) shared: &'a Shared,
    /// The command table (`COMMAND`).
    pub(crate) commands: &'a Commands,
    /// This connection.
    pub(crate) client: &'a mut Client,
    /// Reply buffer.
    pub(crate) out: &'a mut Out,
}

/// A handler that touches only the keyspace.
pub(crate) type DataFn = fn(&mut Tx<'_>, &Command, &mut Out) -> CmdResult<()>;
/// A handler that needs the server or the connection.
pub(crate) type CtlFn = fn(&mut Ctx<'_>, &Command) -> CmdResult<()>;

/// A command's handler.
#[derive(Clone, Copy)]
pub(crate) enum Run {
    /// Keyspace only (see the module docs).
    Data(DataFn),
    /// Server or connection state.
    Ctl(CtlFn),
}

/// Which arguments are keys (locked before a data command runs; shown by `COMMAND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keys {
    /// No keys.
    None,
    /// First key, last key (negative: from the end, -1 = the last argument), step.
    Range(i32, i32, i32),
    /// Every key (FLUSHDB): all stripes are locked.
    All,
    /// The first half of the arguments after the first `STREAMS` keyword at or
    /// after argument `from` (XREAD: 1, XREADGROUP: 4, after `GROUP g c`).
    Streams {
        /// Where the keyword search starts.
        from: usize,
    },
    /// A key count at argument `at`, that many keys after it; with `dest`, argument 1
    /// is a key too (ZUNIONSTORE dest numkeys key ...).
    Num {
        /// Position of numkeys.
        at: usize,
        /// Argument 1 is a destination key.
        dest: bool,
    },
    /// MIGRATE's: argument 3, or with an empty argument 3 those after `KEYS`.
    Migrate,
}

impl Keys {
    /// `COMMAND INFO`'s first, last, step.
    pub(crate) fn triple(self) -> (i32, i32, i32) {
        match self {
            Keys::Range(a, b, c) => (a, b, c),
            Keys::Num { dest: true, .. } => (1, 1, 1),
            Keys::Migrate => (3, 3, 1),
            Keys::None | Keys::All | Keys::Num { .. } | Keys::Streams { .. } => (0, 0, 0),
        }
    }

    /// The key arguments of `c`.
    pub(crate) fn of(self, c: &Command) -> Vec<&[u8]> {
        let (first, last, step) = match self {
            Keys::Range(a, b, c) => (a, b, c),
            Keys::Num { at, dest } => {
                let n = args::parse_i64(c.arg(at)).unwrap_or(0);
                let n = usize::try_from(n)
                    .unwrap_or(0)
                    .min(c.len().saturating_sub(at + 1));
                // The destination first, in key-spec order (COMMAND GETKEYS).
                let dest = dest.then(|| c.arg(1));
                return dest
                    .into_iter()
                    .chain((at + 1..=at + n).map(|i| c.arg(i)))
                    .collect();
            }
            Keys::Streams { from } => {
                let Some(at) = (from..c.len()).find(|&i| is(c.arg(i), "streams")) else {
                    return Vec::new();
                };
                let n = (c.len() - at - 1) / 2;
                return (at + 1..=at + n).map(|i| c.arg(i)).collect();
            }
            Keys::Migrate => return keyspace::migrate::keys(c),
            Keys::None | Keys::All => return Vec::new(),
        };
        let n = i64::try_from(c.len()).unwrap_or(i64::MAX);
        let last = if last < 0 {
            n + i64::from(last)
        } else {
            i64::from(last).min(n - 1)
        };
        let (mut i, step) = (i64::from(first), i64::from(step.max(1)));
        let mut keys = Vec::new();
        while i <= last && i >= 1 {
            if let Ok(at) = usize::try_from(i) {
                keys.push(c.arg(at));
            }
            i += step;
        }
        keys
    }
}

/// One command.
#[derive(Clone, Copy)]
pub(crate) struct Spec {
    /// Lower-case name.
    pub(crate) name: &'static str,
    /// Redis arity.
    pub(crate) arity: i32,
    /// `COMMAND` flags.
    pub(crate) flags: &'static [&'static str],
    /// Key arguments.
    pub(crate) keys: Keys,
    /// `COMMAND DOCS` group.
    pub(crate) group: &'static str,
    /// One-line summary.
    pub(crate) summary: &'static str,
    /// The handler.
    pub(crate) run: Run,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Spec {
    /// True for commands that write.
    pub(crate) fn writes(&self) -> bool {
        self.flags.contains(&"write")
    }
}

/// Builds a [`Spec`] (for the modules' tables).
pub(crate) const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: Keys,
    group: &'static str,
    summary: &'static str,
    run: Run,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        group,
        summary,
        run,
    }
}

/// Flags of a command that writes.
pub(crate) const W: &[&str] = &["write"];
/// Flags of a read-only command.
pub(crate) const R: &[&str] = &["readonly", "fast"];
/// Flags of an admin or connection command.
pub(crate) const A: &[&str] = &["fast"];
/// One key at position 1.
pub(crate) const KEY1: Keys = Keys::Range(1, 1, 1);
/// Every argument from the first is a key.
pub(crate) const ALLKEYS: Keys = Keys::Range(1, -1, 1);

/// Every command, from all modules.
pub(crate) fn table() -> Vec<Spec> {
    let mut t = Vec::new();
    t.extend_from_slice(strings::set::SPECS);
    t.extend_from_slice(strings::counters::SPECS);
    t.extend_from_slice(strings::ranges::SPECS);
    t.extend_from_slice(bits::SPECS);
    t.extend_from_slice(strings::lcs::SPECS);
    t.extend_from_slice(keyspace::expire::SPECS);
    t.extend_from_slice(hashes::SPECS);
    t.extend_from_slice(zsets::SPECS);
    t.extend_from_slice(zsets::zrange::SPECS);
    t.extend_from_slice(zsets::zpop::SPECS);
    t.extend_from_slice(zsets::zsetops::SPECS);
    t.extend_from_slice(sets::SPECS);
    t.extend_from_slice(lists::SPECS);
    t.extend_from_slice(streams::SPECS);
    t.extend_from_slice(multi::SPECS);
    t.extend_from_slice(pubsub::SPECS);
    t.extend_from_slice(scripting::SPECS);
    t.extend_from_slice(keyspace::keys::SPECS);
    t.extend_from_slice(server::databases::SPECS);
    t.extend_from_slice(keyspace::sort::SPECS);
    t.extend_from_slice(keyspace::dump::SPECS);
    t.extend_from_slice(keyspace::migrate::SPECS);
    t.extend_from_slice(keyspace::generic::SPECS);
    t.extend_from_slice(server::conn::SPECS);
    t.extend_from_slice(server::command::SPECS);
    t.extend_from_slice(server::admin::SPECS);
    t.extend_from_slice(server::slowlog::SPECS);
    t.extend_from_slice(unsupported::SPECS);
    t.extend_from_slice(hyperloglog::SPECS);
    t.extend_from_slice(bits::bitops::SPECS);
    t.extend_from_slice(bits::bitfield::SPECS);
    t.extend_from_slice(geo::SPECS);
    t.extend_from_slice(geo::search::SPECS);
    t.extend_from_slice(replication::SPECS);
    t.extend_from_slice(crate::cluster::commands::SPECS);
    t
}

/// The command table with a name index.
#[derive(Debug)]
pub(crate) struct Commands {
    /// The table.
    pub(crate) specs: Vec<Spec>,
    by_name: HashMap<&'static [u8], usize>,
}

impl Default for Commands {
    fn default() -> Self {
        let specs = table();
        let by_name = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_bytes(), i))
            .collect();
        Commands { specs, by_name }
    }
}

impl Commands {
    /// Looks a command name up, ignoring ASCII case.
    pub(crate) fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 32];
        if name.len() > buf.len() {
            return None;
        }
        let lower = &mut buf[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        self.by_name.get(&*lower).copied()
    }

    /// The names in table order (the index of per-command metrics).
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.specs.iter().map(|s| s.name).collect()
    }
}

/// Commands allowed before `AUTH`.
const NO_AUTH: &[&str] = &["auth", "hello", "quit"];

/// What [`dispatch`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ran {
    /// The table index of the command (`None`: unknown).
    pub(crate) idx: Option<usize>,
    /// It replied with an error.
    pub(crate) failed: bool,
    /// It wrote nothing and must be parked for this many seconds (0 = forever), then
    /// run again when one of its keys changes.
    pub(crate) block: Option<f64>,
}

impl Ran {
    fn done(idx: Option<usize>, failed: bool) -> Ran {
        Ran {
            idx,
            failed,
            block: None,
        }
    }
}

/// Runs (or, inside MULTI, queues) one non-empty command.
pub(crate) fn dispatch(ctx: &mut Ctx<'_>, cmd: &Command) -> Ran {
    // What this command reads is noted afresh (`visible.rs`).
    let _ = crate::visible::take_read();
    let name = cmd.arg(0);
    let Some(i) = ctx.commands.lookup(name) else {
        if ctx.client.multi.is_some() {
            ctx.client.multi_failed = true;
        }
        match unsupported::family_error(name) {
            Some(e) => reply::error(ctx.out, &e.to_string()),
            None => reply::error(ctx.out, &unknown_command(cmd)),
        }
        return Ran::done(None, true);
    };
    let spec = ctx.commands.specs[i];
    if let Some(busy) = ctx.shared.store.gate().busy() {
        if !scripting::ALLOW_BUSY.contains(&spec.name) {
            if spec.name == "exec" && ctx.client.multi.is_some() {
                // As Redis rejects EXEC: the transaction is discarded, none of it runs.
                ctx.client.multi = None;
                ctx.client.multi_failed = false;
                ctx.client.unwatch(&ctx.shared.store);
                reply::error(
                    ctx.out,
                    &format!("EXECABORT Transaction discarded because of previous errors: {busy}"),
                );
                return Ran::done(Some(i), true);
            }
            if ctx.client.multi.is_some() {
                ctx.client.multi_failed = true;
            }
            reply::error(ctx.out, busy);
            return Ran::done(Some(i), true);
        }
    }
    if !ctx.client.authed && !NO_AUTH.contains(&spec.name) {
        reply::error(ctx.out, "NOAUTH Authentication required.");
        return Ran::done(Some(i), true);
    }
    let n = i64::try_from(cmd.len()).unwrap_or(i64::MAX);
    let a = i64::from(spec.arity);
    if (a > 0 && n != a) || (a < 0 && n < -a) {
        if ctx.client.multi.is_some() {
            ctx.client.multi_failed = true;
        }
        reply::error(ctx.out, &arity_error(spec.name));
        return Ran::done(Some(i), true);
    }
    if let Some(e) = subscribed_refusal(ctx, &spec) {
        reply::error(ctx.out, &e);
        return Ran::done(Some(i), true);
    }
    // Cluster mode: MOVED, CROSSSLOT, ... (`crate::cluster::redirect`); a write to a
    // served slot holds the migration gate until it is done.
    let Ok(_cluster) = crate::cluster::redirect::admit(ctx, &spec, cmd) else {
        return Ran::done(Some(i), true);
    };
    if let Some(e) = crate::replication::refuse(ctx.shared, &spec) {
        ctx.client.multi_failed |= ctx.client.multi.is_some();
        reply::error(ctx.out, e);
        return Ran::done(Some(i), true);
    }
    if let Some(queue) = ctx.client.multi.as_mut() {
        if multi::NOT_IN_MULTI.contains(&spec.name) {
            ctx.client.multi_failed = true;
            reply::error(ctx.out, "ERR Command not allowed inside a transaction");
            return Ran::done(Some(i), true);
        }
        if !multi::IMMEDIATE.contains(&spec.name) {
            queue.push(cmd.clone());
            reply::simple(ctx.out, "QUEUED");
            return Ran::done(Some(i), false);
        }
    }
    let res = match spec.run {
        Run::Data(f) => run_data(&ctx.shared.store, &spec, f, cmd, ctx.out, ctx.client),
        Run::Ctl(f) => f(ctx, cmd),
    };
    // Client-side caching: CLIENT CACHING lasts one command (`crate::tracking`).
    crate::tracking::after_command(ctx.client, spec.name);
    match res {
        Ok(()) => Ran::done(Some(i), false),
        Err(CmdError::Block(t)) => Ran {
            idx: Some(i),
            failed: false,
            block: Some(t),
        },
        Err(CmdError::BlockAs(t, args)) => {
            ctx.client.park_as = Some(Command::from_args(&args));
            Ran {
                idx: Some(i),
                failed: false,
                block: Some(t),
            }
        }
        Err(e) => {
            reply::error(ctx.out, &e.to_string());
            Ran::done(Some(i), true)
        }
    }
}

/// RESP2 subscribed mode: only the (un)subscribe commands, PING, QUIT and RESET run.
fn subscribed_refusal(ctx: &Ctx<'_>, spec: &Spec) -> Option<String> {
    (ctx.client.subs.active()
        && !ctx.out.resp3
        && !pubsub::ALLOWED_SUBSCRIBED.contains(&spec.name))
    .then(|| {
        format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        )
    })
}

/// Runs a data command for `client` under its keys' stripe locks and commits its
/// writes (`client.retrying`: a parked blocking command run again). If the commit
/// fails, the handler's reply is taken back.
pub(crate) fn run_data(
    store: &Store,
    spec: &Spec,
    f: DataFn,
    cmd: &Command,
    out: &mut Out,
    client: &Client,
) -> CmdResult<()> {
    let _gate = store.gate().enter()?;
    let retry = client.retrying;
    let locks = match spec.keys {
        Keys::All => store.lock_all(),
        Keys::None => crate::store::Guards::none(),
        k @ (Keys::Range(..) | Keys::Num { .. } | Keys::Streams { .. } | Keys::Migrate) => {
            store.lock_many(k.of(cmd))
        }
    };
    let mut tx = Tx::in_db(store, client.db);
    tx.set_origin(client.id);
    tx.allow_blocking();
    if retry {
        tx.set_retry();
    } else if spec.flags.contains(&"blocking") {
        let keys: Vec<Vec<u8>> = spec
            .keys
            .of(cmd)
            .into_iter()
            .map(|k| store.qualify(client.db, k))
            .collect();
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        if store.notify().woken_on(&keys) {
            tx.set_behind_woken();
        }
    }
    let mark = out.buf.len();
    f(&mut tx, cmd, out)?;
    events::record(&mut tx, spec, cmd);
    let tracking = tx.tracking();
    // A keyed read that changed nothing (not even an expired key it found) may be
    // answered before a persist if nothing it could see is unflushed (`visible.rs`).
    let pure_read = !spec.writes()
        && locks.keyed()
        && !tx.writes_pending()
        && !keyspace::sort::READS_UNLOCKED.contains(&spec.name);
    if !spec.writes() {
        store.count_lookups(tx.lookups());
    }
    if let Err(e) = store.commit(tx) {
        out.buf.truncate(mark);
        return Err(e);
    }
    store.access().after(client.db, spec, cmd);
    // Client-side caching: the keys this client read, still under their locks.
    if tracking {
        crate::tracking::after_read(store, client, spec, cmd);
    }
    if pure_read {
        crate::visible::note_read(store.need(&locks));
    }
    drop(locks);
    Ok(())
}

/// `ERR wrong number of arguments for 'x' command`.
pub(crate) fn arity_error(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Redis 7.0's unknown-command text.
fn unknown_command(cmd: &Command) -> String {
    use std::fmt::Write as _;
    let mut args = String::new();
    for a in cmd.args().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let s = String::from_utf8_lossy(a);
        let s: String = s.chars().take(room).collect();
        let _ = write!(args, "'{s}' ");
    }
    let name = String::from_utf8_lossy(cmd.arg(0));
    let name: String = name.chars().take(128).collect();
    format!("ERR unknown command '{name}', with args beginning with: {args}")
}

/// `ERR unknown subcommand 'x'. Try CMD HELP.`
pub(crate) fn unknown_subcommand(sub: &[u8], cmd: &str) -> CmdError {
    let s = String::from_utf8_lossy(sub);
    let s: String = s.chars().take(128).collect();
    CmdError::Msg(format!(
        "ERR unknown subcommand '{s}'. Try {} HELP.",
        cmd.to_ascii_uppercase()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lowercase() {
        let t = table();
        let mut seen = std::collections::HashSet::new();
        for s in &t {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert!(seen.insert(s.name), "duplicate {}", s.name);
        }
        let c = Commands::default();
        assert!(c.lookup(b"GeT").is_some());
        assert!(c.lookup(b"nope").is_none());
    }

    #[test]
    fn key_positions() {
        let c = Command::from_args(&["mset", "a", "1", "b", "2"]);
        assert_eq!(Keys::Range(1, -1, 2).of(&c), vec![&b"a"[..], b"b"]);
        assert_eq!(Keys::Range(1, 1, 1).of(&c), vec![&b"a"[..]]);
        assert_eq!(Keys::Range(1, -2, 1).of(&c).len(), 3);
        assert!(Keys::None.of(&c).is_empty());
    }
}
