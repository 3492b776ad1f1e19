//! Which writes a read may reveal without waiting for a persist (issue #30): write
//! sequence numbers per lock stripe and the durable mark, for a server started with
//! `--durability sync`.
//!
//! The rule (design.md §10): a reply never reveals a write that is not yet durable.
//! Group commit (`commit.rs`) keeps it by holding every round's replies for a ticket —
//! a persist of the shared log that began after the round. A round of reads only
//! waits for nothing when nothing it read is unflushed, and that is what this module
//! decides:
//!
//! * every write through the engine takes a number from one global counter (`last`)
//!   *after* it reached the engine's shared log and *while the stripe locks of its keys
//!   are still held* ([`Seqs::wrote`]); the number goes to each stripe the writing
//!   thread holds (`stripes`), or, for a writer that holds every stripe or none (a
//!   script, which holds the script gate exclusively instead; the replication applier;
//!   FLUSHALL/SWAPDB), to `floor`, which counts for every stripe;
//! * a keyed read, holding its stripes' locks, takes `need` = the highest number of
//!   those stripes and of `floor` ([`Seqs::need`]): the newest write it could see. A
//!   write it sees is on a stripe it holds and was numbered before that stripe's lock
//!   was released to it; a lock-free writer (a script) ran while the reader could not
//!   hold the gate; one under every stripe finished before the reader got its stripe;
//! * a persister reads `g0 = last` *before* it persists the shared log; when the persist
//!   returns, every write numbered `<= g0` was in the log before it began, so it is
//!   durable: `durable = max(durable, g0)` ([`Seqs::persisted`]);
//! * a round whose commands on a connection were all keyed reads may send that
//!   connection's replies at once if `need <= durable`; anything else (writes, keyless
//!   or control commands, blocked clients, pub/sub or notification deliveries, scripts,
//!   MULTI/EXEC, a read that deleted an expired key) waits for a ticket as before.
//!   Keyless reads cannot use `last` as their `need`: they take no stripe lock, so they
//!   may see a write between its engine write and its number.
//!
//! Every thread that writes to the engine in such a server appends to the shared log
//! (workers, the script thread, persisters, the ticker's expiry sweeps, the replica's
//! applier and cluster migration bind to slot 0 with [`bind_shared_log`]), so a persist
//! of the shared log covers every numbered write.
//!
//! The calling thread's held stripes are a thread-local stack ([`Held`]): lock guards
//! push their stripes when taken and pop them when dropped (`store.rs` `Guards`).
//!
//! Shared state: atomics only. `last` and `floor` only grow; a stripe's number only
//! grows and changes only under its stripe lock (or, for `floor`, under every stripe
//! lock or the exclusive script gate); `durable` only grows.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The write numbers of one keyspace. See the module docs.
#[derive(Debug)]
pub(crate) struct Seqs {
    /// Numbers are kept (a server started with `--durability sync`).
    on: AtomicBool,
    /// The last number handed out.
    last: AtomicU64,
    /// Per stripe: the number of the last write made under its lock.
    stripes: Box<[AtomicU64]>,
    /// The last write made under every stripe lock or under none.
    floor: AtomicU64,
    /// Every write numbered up to this one is durable.
    durable: AtomicU64,
}

thread_local! {
    /// Stripes the calling thread holds (a stack: guards push and pop their own).
    static HELD: RefCell<Held> = const { RefCell::new(Held { stripes: Vec::new(), all: 0 }) };
    /// What the last command of this thread read: `Some(need)` for a keyed read that
    /// wrote nothing ([`note_read`]), `None` otherwise.
    static READ: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The stripes this thread holds.
#[derive(Debug)]
pub(crate) struct Held {
    stripes: Vec<u16>,
    /// Guards that hold every stripe.
    all: u32,
}

/// Where a guard's stripes begin on the thread's stack (to pop them).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    /// `stripes` from this length on.
    Some(usize),
    /// Every stripe.
    All,
}

impl Seqs {
    /// For `n` stripes; numbers are kept once [`Seqs::enable`] was called.
    pub(crate) fn new(n: usize) -> Seqs {
        Seqs {
            on: AtomicBool::new(false),
            last: AtomicU64::new(0),
            stripes: (0..n).map(|_| AtomicU64::new(0)).collect(),
            floor: AtomicU64::new(0),
            durable: AtomicU64::new(0),
        }
    }

    /// Starts numbering writes (before the first one is served).
    pub(crate) fn enable(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    /// Whether writes are numbered.
    pub(crate) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// A write of the calling thread reached the engine: numbers it on every stripe the
    /// thread holds (on `floor` if it holds all or none). Call it before the locks go.
    pub(crate) fn wrote(&self) {
        if !self.enabled() {
            return;
        }
        let n = self.last.fetch_add(1, Ordering::SeqCst) + 1;
        HELD.with(|h| {
            let h = h.borrow();
            if h.all > 0 || h.stripes.is_empty() {
                self.floor.fetch_max(n, Ordering::SeqCst);
            } else {
                for &s in &h.stripes {
                    if let Some(a) = self.stripes.get(usize::from(s)) {
                        a.fetch_max(n, Ordering::SeqCst);
                    }
                }
            }
        });
    }

    /// The newest write a reader holding `stripes` could see (`None`: every stripe).
    pub(crate) fn need(&self, stripes: Option<&[u16]>) -> u64 {
        match stripes {
            None => self.last.load(Ordering::SeqCst),
            Some(ss) => ss
                .iter()
                .filter_map(|&s| self.stripes.get(usize::from(s)))
                .map(|a| a.load(Ordering::SeqCst))
                .fold(self.floor.load(Ordering::SeqCst), u64::max),
        }
    }

    /// What a persister reads before it persists: the last number handed out.
    pub(crate) fn last(&self) -> u64 {
        self.last.load(Ordering::SeqCst)
    }

    /// A persist that began after [`Seqs::last`] returned `g0` succeeded.
    pub(crate) fn persisted(&self, g0: u64) {
        self.durable.fetch_max(g0, Ordering::SeqCst);
    }

    /// Every write numbered up to this is durable.
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }
}

/// The calling thread took the locks of `stripes` (`None`: every stripe).
pub(crate) fn push_held(stripes: Option<&[u16]>) -> Mark {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        match stripes {
            None => {
                h.all += 1;
                Mark::All
            }
            Some(ss) => {
                let at = h.stripes.len();
                h.stripes.extend_from_slice(ss);
                Mark::Some(at)
            }
        }
    })
}

/// The guard that returned `mark` releases its locks.
pub(crate) fn pop_held(mark: Mark) {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        match mark {
            Mark::All => h.all = h.all.saturating_sub(1),
            Mark::Some(at) => h.stripes.truncate(at),
        }
    });
}

/// The command this thread ran was a keyed read that wrote nothing and could see
/// writes numbered up to `need`.
pub(crate) fn note_read(need: u64) {
    READ.with(|r| r.set(Some(need)));
}

/// What the command this thread just ran read (and forgets it): `Some(need)` only
/// after [`note_read`].
pub(crate) fn take_read() -> Option<u64> {
    READ.with(Cell::take)
}

/// Folds what the command this thread just ran read into a connection's round
/// (`reads`: `Some(need)` while every command was a keyed read): only a keyed read
/// that wrote nothing keeps it `Some`.
pub(crate) fn fold_read(reads: &mut Option<u64>) {
    *reads = match (take_read(), *reads) {
        (Some(n), Some(r)) => Some(r.max(n)),
        _ => None,
    };
}

/// Binds the calling thread to the shared log slot if the server was started with
/// `--durability sync` (call before its first write).
pub(crate) fn bind_shared_log(sync: bool) {
    if sync {
        cascadekv::set_thread_log_slot(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_needs_the_last_write_of_its_stripes_and_the_floor() {
        let s = Seqs::new(8);
        s.wrote();
        assert_eq!(s.last(), 0, "not numbered before enable");
        s.enable();
        let m = push_held(Some(&[1, 3]));
        s.wrote(); // 1 on stripes 1 and 3
        pop_held(m);
        let m = push_held(Some(&[5]));
        s.wrote(); // 2 on stripe 5
        pop_held(m);
        assert_eq!(s.need(Some(&[1])), 1);
        assert_eq!(s.need(Some(&[0, 3])), 1);
        assert_eq!(s.need(Some(&[5, 1])), 2);
        assert_eq!(s.need(Some(&[0, 2])), 0, "untouched stripes need nothing");
        // A write under no stripe lock (a script) counts for every stripe.
        s.wrote(); // 3 on the floor
        assert_eq!(s.need(Some(&[0])), 3);
        // Under every stripe lock: the floor too.
        let all = push_held(None);
        let inner = push_held(Some(&[2]));
        s.wrote(); // 4
        pop_held(inner);
        pop_held(all);
        assert_eq!(s.need(Some(&[7])), 4);
        assert_eq!(s.need(None), 4);
        // Nested guards: the inner one's stripes go, the outer one's stay.
        let outer = push_held(Some(&[6]));
        let inner = push_held(Some(&[7]));
        pop_held(inner);
        s.wrote(); // 5 on stripe 6 only
        pop_held(outer);
        assert_eq!(s.need(Some(&[6])), 5);
        assert_eq!(s.need(Some(&[7])), 4);
    }

    #[test]
    fn durable_covers_only_what_was_numbered_before_the_persist_began() {
        let s = Seqs::new(4);
        s.enable();
        let m = push_held(Some(&[0]));
        s.wrote(); // 1
        pop_held(m);
        // A persister reads g0, then another write lands while it persists.
        let g0 = s.last();
        let m = push_held(Some(&[1]));
        s.wrote(); // 2
        pop_held(m);
        s.persisted(g0);
        assert_eq!(s.durable(), 1);
        assert!(s.need(Some(&[0])) <= s.durable(), "stripe 0 is durable");
        assert!(s.need(Some(&[1])) > s.durable(), "stripe 1 is not");
        // A persist that ends late with an older g0 does not move the mark back.
        s.persisted(2);
        s.persisted(1);
        assert_eq!(s.durable(), 2);
    }

    #[test]
    fn a_round_stays_free_of_a_ticket_only_while_every_command_is_a_noted_read() {
        assert_eq!(take_read(), None);
        let mut reads = Some(0);
        note_read(7);
        fold_read(&mut reads);
        assert_eq!(reads, Some(7));
        note_read(3);
        fold_read(&mut reads);
        assert_eq!(reads, Some(7), "the newest write of all its reads");
        assert_eq!(take_read(), None, "a noted read is taken once");
        fold_read(&mut reads); // a command that noted nothing (a write, INFO, ...)
        assert_eq!(reads, None);
        note_read(1);
        fold_read(&mut reads);
        assert_eq!(reads, None, "stays held for the rest of the round");
    }
}
