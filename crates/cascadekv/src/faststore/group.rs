//! Pipelined horizontal batching of synchronous writes (FlatStore §3.3, Fig. 5).
//!
//! A `Durability::Sync` write, once it has drawn its LSNs, *posts* its records here
//! instead of appending them to its own log. Whoever then takes the group's leader lock
//! becomes the *leader*: it steals up to `max` posted requests (its own among them),
//! appends them all to a *group log* it holds alone — the requests whose values
//! are all inline-sized packed into one record (FlatStore §3.2's compacted entries,
//! `log/packed.rs`; up to `PACKED_MAX` bytes each, a request never split), the others
//! one record per operation, a batch behind its `BatchHeader` — releases the leader lock **before**
//! persisting (so the next group forms and appends while this one persists: the
//! pipeline), persists that log once, and hands every request the addresses of its
//! records. Each writer then indexes its own records as before (FluidKV Algorithm 1,
//! step 5), so a thread reads its own write as soon as its call returns.
//!
//! Compared with each writer syncing its own log ("vertical batching", FlatStore
//! Fig. 12), a group costs one persist instead of one per writer. Group size 1 is
//! vertical batching; `Options::sync_group_size` sets it.
//!
//! At most [`PIPELINE_DEPTH`] groups persist at once. Without that bound the leader
//! lock is free again as soon as a group is appended, so every writer that arrives
//! leads a group of one and nothing is batched (measured: the same throughput as
//! per-thread persists); with it, writes that arrive while the pipeline is full gather
//! in `posted` and the next leader takes them all.
//!
//! Once groups are large (one in flight), a leader *lingers* before it steals: it
//! yields while writers keep posting, up to half a recent persist ([`Group::linger`]),
//! so the writers of the group just acknowledged join the next one instead of forming
//! a third cohort behind it.
//!
//! Group logs: the generation has [`GROUP_LOGS`] slots no thread is bound to, and the
//! would-be leader takes a free one (`try_lock`) *before* the leader lock; only the
//! leader appends to a log (FluidKV's thread-exclusive logs, exclusive to a leader
//! while it leads). FlatStore's leader appends to its own per-core log instead; with
//! one log per writer thread, every writer's first write allocated a log segment
//! (`fallocate` and two fences) though most writers never lead, and at 32 threads the
//! 32 allocations at once made every first write wait 5-45 ms and pinned 32 segments
//! (docs/benchmarks.md, session 15); four group logs allocate four.
//!
//! Before it takes the leader lock, the would-be leader makes sure its group log has
//! room for a group ([`Group::pre_roll`]), so that a new log segment is allocated under
//! that log only, not under `leader` where every writer would wait for it.
//!
//! Locks: a group log's slot mutex (held by one would-be or actual leader from before
//! `leader` until its group is persisted, never while parked); `leader` (held while
//! stealing and appending, never while persisting or waiting); `posted` (the queue,
//! held for a push, a drain or a peek); each request's `done` (its result);
//! `inflight` and `recent_bytes` are atomic. Order: a thread holding its own log slot
//! may take a group log (`try_lock` only), then `leader`, then `posted`; it never
//! waits for another slot, and the switcher locks the group logs after every thread
//! slot (`FastStore::for_each_slot`). Waking is
//! targeted, not broadcast: a leader unparks exactly the writers it persisted, and
//! whoever frees room in the pipeline unparks the oldest posted writer to lead next
//! (`std::thread::park` keeps a wake-up that comes before the park, so none is lost;
//! a timeout bounds the cost of a bug).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::write::Op;
use super::{LogSlot, Padded};
use crate::error::{Error, Result};
use crate::log::packed::PACKED_MAX;
use crate::pmem::AllocClass;

/// One posted write: owned copies of its records (the leader appends them).
#[derive(Debug)]
pub(crate) struct Request {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    lsns: Vec<u64>,
    batch: bool,
    class: AllocClass,
    /// Upper bound of its packed size when it may share a packed record.
    packed: Option<usize>,
    /// `Some` once a leader appended and persisted it: its record addresses, or the
    /// error that stopped it (nothing of it is then indexed).
    done: Mutex<Option<Result<Vec<u64>>>>,
    /// The posting thread: its leader unparks it when `done` is set.
    thread: std::thread::Thread,
}

/// The group of one FastStore.
#[derive(Debug)]
pub(crate) struct Group {
    leader: Mutex<()>,
    posted: Mutex<Vec<Arc<Request>>>,
    max: usize,
    /// Groups appended whose persist has not finished (changed under `leader` when it
    /// grows, by the persisting leader when it shrinks).
    inflight: AtomicUsize,
    /// Requests in the latest group (set by its leader): with many writers waiting,
    /// groups are large and a second group in flight only makes both smaller
    /// ([`Group::room`]).
    last_size: AtomicUsize,
    /// Log bytes of recent groups: the largest, decaying by a 16th per group (set by
    /// leaders under `leader`).
    recent_bytes: AtomicU64,
    /// Recent persist duration in nanoseconds, a moving average (set by persisting
    /// leaders; read by [`Group::linger`]).
    persist_ns: AtomicU64,
}

/// Groups that may persist at once. Unbounded, every writer that finds the leader
/// lock free leads a group of one (the lock is free again as soon as a group is
/// appended), and the groups stay as small as per-thread persists; bounded, writes
/// that arrive while the pipeline is full wait in `posted` and the next leader takes
/// them all. Two keeps the pipeline of FlatStore §3.3 (one group appends while the
/// other persists) and lets the device serve two flushes at once.
const PIPELINE_DEPTH: usize = 2;

/// Least log room (bytes) a writer makes sure of before it posts ([`Group::commit`]):
/// a group of 32 small writes packs into ~5 KiB, of 16 writes of 1 KB into ~17 KiB.
/// Larger groups raise it ([`Group::pre_roll`]).
const PRE_ROLL: u64 = 16 << 10;

/// Group logs of a FastStore generation. A leader holds one from before it takes the
/// leader lock until its group is persisted, and at most [`PIPELINE_DEPTH`] groups
/// persist at once; the rest leave a free one to the next leader while a log rolls to
/// a new segment or the switcher holds one.
pub(crate) const GROUP_LOGS: usize = 4;

/// A group this large means many writers wait: one group persists at a time.
const BIG_GROUP: usize = 4;

/// `CASCADE_GROUP_DEPTH` (read once): a fixed depth instead of [`Group::room`]'s
/// rule, to measure depths with the same binary (`scripts/bench-sync.sh`).
fn fixed_depth() -> Option<usize> {
    static DEPTH: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *DEPTH.get_or_init(|| {
        std::env::var("CASCADE_GROUP_DEPTH")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|d| *d >= 1)
    })
}

/// `CASCADE_GROUP_LINGER` (read once): `0` turns [`Group::linger`] off.
fn linger_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("CASCADE_GROUP_LINGER").map_or(true, |v| v != "0"))
}

/// How long a waiting writer sleeps before it looks again without being woken (every
/// path that can let it proceed unparks it; this only bounds the cost of a missed one).
const SAFETY_WAIT: Duration = Duration::from_millis(2);

impl Group {
    /// A group stealing at most `max` requests per batch.
    pub fn new(max: usize) -> Group {
        Group {
            leader: Mutex::new(()),
            posted: Mutex::new(Vec::new()),
            max: max.max(1),
            inflight: AtomicUsize::new(0),
            last_size: AtomicUsize::new(0),
            recent_bytes: AtomicU64::new(0),
            persist_ns: AtomicU64::new(0),
        }
    }

    /// Whether another group may start persisting now. Up to [`PIPELINE_DEPTH`]
    /// groups persist at once while groups are small (few writers: a writer that finds
    /// one group persisting starts its own, and the device serves both), but only one
    /// once groups reach [`BIG_GROUP`] requests: then writers are plentiful, the device
    /// is the bottleneck, and the fewest device writes per acknowledged write — one
    /// large group at a time, as RocksDB's WAL does — carry the most (measured,
    /// docs/benchmarks.md 2026-12-03).
    fn room(&self) -> bool {
        let inflight = self.inflight.load(Ordering::Acquire);
        if inflight == 0 {
            return true;
        }
        let depth = match fixed_depth() {
            Some(d) => d,
            None if self.last_size.load(Ordering::Relaxed) >= BIG_GROUP => 1,
            None => PIPELINE_DEPTH,
        };
        inflight < depth
    }

    /// Log room a writer makes sure of before it posts: twice the recent groups'
    /// size, at least [`PRE_ROLL`], at most a 16th of a chunk (what a segment may
    /// leave unused at its end).
    fn pre_roll(&self, chunk: u64) -> u64 {
        let recent = self.recent_bytes.load(Ordering::Relaxed).saturating_mul(2);
        recent.max(PRE_ROLL).min(chunk / 16)
    }

    /// Folds a group's log bytes into the recent size (under `leader`).
    fn note_recent_bytes(&self, bytes: u64) {
        let old = self.recent_bytes.load(Ordering::Relaxed);
        self.recent_bytes
            .store(bytes.max(old - old / 16), Ordering::Relaxed);
    }

    /// Whether writes are batched across threads (`max` > 1).
    pub fn enabled(&self) -> bool {
        self.max > 1
    }

    /// Posts `ops` (LSNs drawn) and returns their record addresses once they are
    /// durable in a group log. `slot` is the caller's own slot (held for the whole
    /// write, `write.rs`; a leader adds the log bytes it appends to its counters);
    /// `logs` are the generation's group logs, one of which a leader borrows.
    #[expect(
        clippy::too_many_arguments,
        reason = "a write's parts as write.rs holds them; a struct would only repack them"
    )]
    pub fn commit(
        &self,
        slot: &mut LogSlot,
        logs: &[Padded<Mutex<LogSlot>>],
        ops: &[(&[u8], Option<&[u8]>)],
        lsns: &[u64],
        batch: bool,
        class: AllocClass,
        pack_limit: Option<usize>,
    ) -> Result<Vec<u64>> {
        let packed = super::write::packed_bound(ops, pack_limit).filter(|n| *n <= PACKED_MAX);
        let req = Arc::new(Request {
            ops: ops
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
            lsns: lsns.to_vec(),
            batch,
            class,
            packed,
            done: Mutex::new(None),
            thread: std::thread::current(),
        });
        self.posted.lock().push(req.clone());
        loop {
            if let Some(r) = req.done.lock().take() {
                return r;
            }
            // A group log no other leader holds (the switcher may hold them too, last
            // of all slots, never while waiting for another).
            let log = if self.room() {
                logs.iter().find_map(|l| l.0.try_lock())
            } else {
                None
            };
            let Some(mut log) = log else {
                // Woken by the leader that persisted this request, or as the next
                // leader when the pipeline has room; the timeout only guards against
                // a bug.
                std::thread::park_timeout(SAFETY_WAIT);
                continue;
            };
            // The log gets room for a group now, outside the leader lock: a new
            // segment costs an allocation and two fences (~1-5 ms on a disk, far more
            // when many are allocated at once), and a leader that had to allocate
            // while appending held up every writer behind it. The room is twice the
            // recent groups' size: with 1 KB values at 32 threads a group takes
            // ~34 KiB, and a fixed 16 KiB left leaders to roll inside (session 15).
            // A group larger than this still rolls inside, as before.
            let room = self.pre_roll(log.writer.chunk_size());
            if !log.writer.has_room(room) {
                // This writer may be the one `wake_next` chose to lead: another posted
                // writer leads meanwhile (with another group log), so the pipeline does
                // not wait for the roll.
                self.wake_other(&req);
            }
            match log.writer.ensure_room(room, class) {
                // A nearly full pool may still hold the group in the tail segment: the
                // append decides, as it did before.
                Ok(()) | Err(Error::PoolFull { .. }) => {}
                Err(e) => {
                    // Nothing of this request is appended unless another leader took
                    // it meanwhile: then its result is on its way.
                    drop(log);
                    if self.withdraw(&req) {
                        return Err(e);
                    }
                    std::thread::park_timeout(SAFETY_WAIT);
                    continue;
                }
            }
            let Some(lead) = self.leader.try_lock() else {
                drop(log);
                std::thread::park_timeout(SAFETY_WAIT);
                continue;
            };
            self.linger();
            let stolen: Vec<Arc<Request>> = {
                let mut p = self.posted.lock();
                let n = p.len().min(self.max);
                p.drain(..n).collect()
            };
            if stolen.is_empty() {
                // Another leader took ours; its result is on its way.
                drop(lead);
                drop(log);
                std::thread::park_timeout(SAFETY_WAIT);
                continue;
            }
            self.last_size.store(stolen.len(), Ordering::Relaxed);
            let log_before = log.writer.bytes_written();
            let mut appended = append_group(&mut log, &stolen);
            let bytes = log.writer.bytes_written() - log_before;
            // The store-wide log counter learns of it through the leader's own slot
            // (a group log has no thread to publish its counters).
            slot.unpublished_log += bytes;
            self.note_recent_bytes(bytes);
            self.inflight.fetch_add(1, Ordering::AcqRel);
            drop(lead);
            // Room left in the pipeline: the next group may form now (with another
            // group log).
            self.wake_next();
            // One persist for the whole group, outside the leader lock.
            let began = Instant::now();
            let synced = log.writer.sync();
            self.note_persist(began.elapsed());
            self.inflight.fetch_sub(1, Ordering::AcqRel);
            if let Err(e) = synced {
                let msg = e.to_string();
                for a in &mut appended {
                    if a.is_ok() {
                        *a = Err(Error::io(
                            "persisting a group of synchronous writes",
                            std::io::Error::other(msg.clone()),
                        ));
                    }
                }
            }
            for (r, a) in stolen.iter().zip(appended) {
                *r.done.lock() = Some(a);
                if !Arc::ptr_eq(r, &req) {
                    r.thread.unpark();
                }
            }
            self.wake_next();
            // With its group acknowledged and the next leader woken, the log moves to
            // a new segment now if it is short of room, at the cost of this writer's
            // call alone (other leaders use the other group logs meanwhile). A failure
            // here is left to the next leader of this log, whose roll or append meets
            // it again and reports it.
            let _ = log.writer.ensure_room(room, class);
            drop(log);
        }
    }

    /// Before a leader of a large group steals the posted requests, it waits while
    /// more keep arriving: up to half a recent persist, until none has come for an
    /// eighth of one (yielding the CPU meanwhile, so the writers it waits for run).
    ///
    /// Why: with one group in flight (many writers, `room`), the writers of the group
    /// that just finished need CPU to index their records and post again, and on a
    /// small host that took longer than a persist. They then missed the next group and
    /// the writers split into three cohorts taking turns — ~11 writes per persist at
    /// 32 threads. Waiting for them merges the cohorts: ~29 writes per persist, 2.7×
    /// fewer persists, and more throughput while the device is the bound (32-thread
    /// `fillrandom --durability sync`: docs/benchmarks.md, session 19). Postgres's
    /// `commit_delay` is the same idea, with a fixed delay; this one ends as soon as
    /// the arrivals stop, and never runs for small groups (one writer waits for
    /// nobody). `CASCADE_GROUP_LINGER=0` turns it off, to measure it.
    fn linger(&self) {
        if self.last_size.load(Ordering::Relaxed) < BIG_GROUP || !linger_enabled() {
            return;
        }
        let persist = Duration::from_nanos(self.persist_ns.load(Ordering::Relaxed));
        let (limit, quiet_for) = (persist / 2, persist / 8);
        let start = Instant::now();
        let mut seen = self.posted.lock().len();
        let mut quiet = start;
        while seen < self.max && start.elapsed() < limit {
            std::thread::yield_now();
            let n = self.posted.lock().len();
            if n != seen {
                (seen, quiet) = (n, Instant::now());
            } else if quiet.elapsed() >= quiet_for {
                break;
            }
        }
    }

    /// Folds a persist's duration into the recent one (a moving average, 1/8 weight).
    fn note_persist(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let old = self.persist_ns.load(Ordering::Relaxed);
        let new = if old == 0 { ns } else { old - old / 8 + ns / 8 };
        self.persist_ns.store(new, Ordering::Relaxed);
    }

    /// Wakes the oldest posted writer other than `me`, if the pipeline has room.
    fn wake_other(&self, me: &Arc<Request>) {
        if self.room() {
            if let Some(r) = self.posted.lock().iter().find(|r| !Arc::ptr_eq(r, me)) {
                r.thread.unpark();
            }
        }
    }

    /// Takes `req` back out of the queue; false if a leader took it first.
    fn withdraw(&self, req: &Arc<Request>) -> bool {
        let mut p = self.posted.lock();
        match p.iter().position(|r| Arc::ptr_eq(r, req)) {
            Some(i) => {
                p.remove(i);
                true
            }
            None => false,
        }
    }

    /// Wakes the oldest posted writer, if the pipeline has room, so it leads the next
    /// group (a writer whose request is posted either leads or is woken by its leader).
    fn wake_next(&self) {
        if self.room() {
            if let Some(r) = self.posted.lock().first() {
                r.thread.unpark();
            }
        }
    }
}

/// Appends a group's requests to `slot`'s log: the packable ones packed, as few records
/// as `PACKED_MAX` allows (each request whole in one), the others a record per
/// operation. Returns each request's record addresses (or error), in `stolen` order.
fn append_group(slot: &mut LogSlot, stolen: &[Arc<Request>]) -> Vec<Result<Vec<u64>>> {
    let mut out: Vec<Option<Result<Vec<u64>>>> = stolen.iter().map(|_| None).collect();
    let mut pack: Vec<usize> = Vec::new();
    let mut pack_len = 0usize;
    for (i, r) in stolen.iter().enumerate() {
        match r.packed {
            Some(n) => {
                if pack_len + n > PACKED_MAX {
                    append_pack(slot, stolen, &pack, &mut out);
                    pack.clear();
                    pack_len = 0;
                }
                pack.push(i);
                pack_len += n;
            }
            None => out[i] = Some(append_request(slot, r)),
        }
    }
    append_pack(slot, stolen, &pack, &mut out);
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::Internal("request left unappended".into()))))
        .collect()
}

/// Appends the requests `pack` (indexes into `stolen`) as one packed record, or each as
/// plain records when they hold fewer than two operations in all.
fn append_pack(
    slot: &mut LogSlot,
    stolen: &[Arc<Request>],
    pack: &[usize],
    out: &mut [Option<Result<Vec<u64>>>],
) {
    let ops: Vec<Vec<Op<'_>>> = pack.iter().map(|&i| borrowed(&stolen[i])).collect();
    if ops.iter().map(Vec::len).sum::<usize>() < 2 {
        for &i in pack {
            out[i] = Some(append_request(slot, &stolen[i]));
        }
        return;
    }
    let parts: Vec<(&[Op<'_>], &[u64])> = pack
        .iter()
        .zip(&ops)
        .map(|(&i, o)| (o.as_slice(), stolen[i].lsns.as_slice()))
        .collect();
    // A packed record holding any put must leave the pool's headroom free.
    let class = if pack.iter().any(|&i| stolen[i].class == AllocClass::Writes) {
        AllocClass::Writes
    } else {
        AllocClass::Upkeep
    };
    match super::write::append_packed(slot, &parts, class) {
        Ok(addr) => {
            for &i in pack {
                out[i] = Some(Ok(vec![addr; stolen[i].ops.len()]));
            }
        }
        Err(e) => {
            for &i in pack {
                out[i] = Some(Err(same_error(&e)));
            }
        }
    }
}

/// `e` for each request of a packed record that could not be appended: a full pool
/// stays `PoolFull` (what a writer must be told), anything else becomes `Io` with its
/// message.
fn same_error(e: &Error) -> Error {
    match e {
        Error::PoolFull { chunks, wanted } => Error::PoolFull {
            chunks: *chunks,
            wanted: *wanted,
        },
        other => Error::io(
            "appending a packed group of synchronous writes",
            std::io::Error::other(other.to_string()),
        ),
    }
}

fn borrowed(r: &Request) -> Vec<Op<'_>> {
    r.ops
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect()
}

/// Appends one request's records to `slot`'s log, a record per operation (a batch
/// behind its header).
fn append_request(slot: &mut LogSlot, r: &Request) -> Result<Vec<u64>> {
    let ops = borrowed(r);
    let mut addrs = super::write::LsnBuf::default();
    super::write::append_plain(slot, &ops, &r.lsns, r.batch, r.class, &mut addrs)?;
    Ok(addrs.as_slice().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recent persist duration starts at the first one and then moves an eighth of
    /// the way to each new one, so one slow flush does not set the linger alone.
    #[test]
    fn recent_persist_is_a_moving_average() {
        let g = Group::new(32);
        g.note_persist(Duration::from_micros(800));
        assert_eq!(g.persist_ns.load(Ordering::Relaxed), 800_000);
        g.note_persist(Duration::from_micros(0));
        assert_eq!(g.persist_ns.load(Ordering::Relaxed), 700_000);
        for _ in 0..200 {
            g.note_persist(Duration::from_micros(100));
        }
        let ns = g.persist_ns.load(Ordering::Relaxed);
        assert!((99_000..=101_000).contains(&ns), "{ns}");
    }

    /// A leader of a small group never lingers: with a recent persist of a whole
    /// second, the call still returns at once (it would wait up to half a second).
    #[test]
    fn small_groups_do_not_linger() {
        let g = Group::new(32);
        g.note_persist(Duration::from_secs(1));
        g.last_size.store(BIG_GROUP - 1, Ordering::Relaxed);
        let t = Instant::now();
        g.linger();
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }
}
