//! Pipelined horizontal batching of synchronous writes (FlatStore §3.3, Fig. 5).
//!
//! A `Durability::Sync` write, once it has drawn its LSNs, *posts* its records here
//! instead of appending them to its own log. Whoever then takes the group's leader lock
//! becomes the *leader*: it steals up to `max` posted requests (its own among them),
//! appends them all to **its own** thread-exclusive log — each request contiguous, a
//! batch behind its `BatchHeader` when it was one — releases the leader lock **before**
//! persisting (so the next group forms and appends while this one persists: the
//! pipeline), persists its log once, and hands every request the addresses of its
//! records. Each writer then indexes its own records as before (FluidKV Algorithm 1,
//! step 5), so a thread reads its own write as soon as its call returns.
//!
//! Compared with each writer syncing its own log ("vertical batching", FlatStore
//! Fig. 12), a group costs one persist instead of one per writer. Group size 1 is
//! vertical batching; `Options::sync_group_size` sets it.
//!
//! Locks: `leader` (held while stealing and appending, never while persisting or
//! waiting); `posted` (the queue, held for a push or a drain); each request's `done`
//! (its result). Order: a thread holding its own log slot may take `leader`, then
//! `posted`; it never waits for another slot. Followers wait on `cv` with a timeout and
//! retry leadership, so no wake-up can be lost.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::LogSlot;
use crate::error::{Error, Result};
use crate::pmem::AllocClass;

/// One posted write: owned copies of its records (the leader appends them).
#[derive(Debug)]
pub(crate) struct Request {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    lsns: Vec<u64>,
    batch: bool,
    class: AllocClass,
    /// `Some` once a leader appended and persisted it: its record addresses, or the
    /// error that stopped it (nothing of it is then indexed).
    done: Mutex<Option<Result<Vec<u64>>>>,
}

/// The group of one FastStore.
#[derive(Debug)]
pub(crate) struct Group {
    leader: Mutex<()>,
    posted: Mutex<Vec<Arc<Request>>>,
    cv: Condvar,
    wake: Mutex<()>,
    max: usize,
}

impl Group {
    /// A group stealing at most `max` requests per batch.
    pub fn new(max: usize) -> Group {
        Group {
            leader: Mutex::new(()),
            posted: Mutex::new(Vec::new()),
            cv: Condvar::new(),
            wake: Mutex::new(()),
            max: max.max(1),
        }
    }

    /// Whether writes are batched across threads (`max` > 1).
    pub fn enabled(&self) -> bool {
        self.max > 1
    }

    /// Posts `ops` (LSNs drawn) and returns their record addresses once they are
    /// durable in some thread's log. `slot` is the caller's own slot: it is the log
    /// the caller appends to when it leads.
    pub fn commit(
        &self,
        slot: &mut LogSlot,
        ops: &[(&[u8], Option<&[u8]>)],
        lsns: &[u64],
        batch: bool,
        class: AllocClass,
    ) -> Result<Vec<u64>> {
        let req = Arc::new(Request {
            ops: ops
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
            lsns: lsns.to_vec(),
            batch,
            class,
            done: Mutex::new(None),
        });
        self.posted.lock().push(req.clone());
        loop {
            if let Some(r) = req.done.lock().take() {
                return r;
            }
            if let Some(lead) = self.leader.try_lock() {
                let stolen: Vec<Arc<Request>> = {
                    let mut p = self.posted.lock();
                    let n = p.len().min(self.max);
                    p.drain(..n).collect()
                };
                if stolen.is_empty() {
                    // Another leader took ours; its result is on its way.
                    drop(lead);
                    self.wait();
                    continue;
                }
                let log_before = slot.writer.bytes_written();
                let mut appended: Vec<Result<Vec<u64>>> =
                    stolen.iter().map(|r| append_request(slot, r)).collect();
                slot.unpublished_log += slot.writer.bytes_written() - log_before;
                drop(lead);
                // One persist for the whole group, outside the leader lock.
                if let Err(e) = slot.writer.sync() {
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
                }
                let _w = self.wake.lock();
                self.cv.notify_all();
                continue;
            }
            self.wait();
        }
    }

    fn wait(&self) {
        let mut w = self.wake.lock();
        let _ = self.cv.wait_for(&mut w, Duration::from_micros(200));
    }
}

/// Appends one request's records to `slot`'s log (a batch behind its header).
fn append_request(slot: &mut LogSlot, r: &Request) -> Result<Vec<u64>> {
    let ops: Vec<(&[u8], Option<&[u8]>)> = r
        .ops
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_deref()))
        .collect();
    let addrs = super::write::append(slot, &ops, &r.lsns, r.batch, false, r.class)?;
    Ok(addrs.as_slice().to_vec())
}
