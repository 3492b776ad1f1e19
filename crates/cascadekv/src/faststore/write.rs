//! FluidKV Algorithm 1 (§5.1): the write path of a FastStore.
//!
//! 1. lock the calling thread's log slot (held until the write is indexed, which is what
//!    lets the switcher and snapshot creation wait for in-flight writes);
//! 2. if the FastStore was frozen meanwhile, give up: the caller retries on the new
//!    active FastStore;
//! 3. draw an LSN per key from the key's stripe, then check the frozen flag again (both
//!    `SeqCst`): a write that lands here drew its LSNs before the switch, so every write
//!    to a newer FastStore has a larger LSN for the same key;
//! 4. append the records to the thread-exclusive log — two or more inline-sized
//!    operations as one packed record (FlatStore §3.2, `log/packed.rs`), otherwise a
//!    record each (a batch behind a `BatchHeader`) —
//!    and persist them if the write is synchronous — or, for a synchronous write with
//!    `Options::sync_group_size` > 1, post them to the FastStore's group, whose leader
//!    appends a whole group to one of the generation's group logs and persists it once
//!    (`group.rs`);
//! 5. `PutValidate` each key into the index (the newest LSN wins whatever the arrival
//!    order) and account the DRAM it took.
//!
//! Accounting: each slot adds its index growth and its log growth to private counters
//! and hands them to the store-wide counters in coarse steps
//! ([`WriteCtx::publish_step`]), so the shared cache lines are written rarely; the
//! caller switches the FastStore when either total reaches its capacity (DRAM:
//! `faststore_capacity`; log: `faststore_log_capacity`, so that a small hot key set
//! does not fill the pool with its own overwrites).
//!
//! Space: a write of puts allocates log segments as [`AllocClass::Writes`] (it must
//! leave the pool's headroom free); a write of deletes only may use the headroom, so
//! deleting data keeps working when the pool is full.

use std::sync::atomic::{AtomicBool, Ordering};

use super::lsn::Lsns;
use super::{FastStore, LogSlot, PutOutcome, Val, Version};
use crate::epoch::Snapshots;
use crate::error::Result;
use crate::log::packed::{self, PACKED_MAX};
use crate::log::record::{value_len, Kind, RecordIn};
use crate::pmem::AllocClass;
use crate::value::ValuePtr;

/// One operation of a write: a put (`Some(value)`) or a delete (`None`).
pub(crate) type Op<'a> = (&'a [u8], Option<&'a [u8]>);

/// What a write needs from the store around the FastStore.
#[derive(Debug)]
pub(crate) struct WriteCtx<'a> {
    /// The LSN stripes.
    pub lsns: &'a Lsns,
    /// Snapshot epochs (stamped on versions; decides which old versions stay).
    pub snaps: &'a Snapshots,
    /// Set when the store closes: a write that sees it retries (and then fails).
    pub closed: &'a AtomicBool,
    /// Values up to this length stay in the index; longer ones are separated.
    pub inline_threshold: usize,
    /// `Some(inline_threshold)` when writes of several small operations are packed
    /// (`Options::pack_log_entries`).
    pub pack_limit: Option<usize>,
    /// Index growth a slot accumulates before publishing it.
    pub publish_step: u64,
}

/// Outcome of [`FastStore::write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// The write is logged and indexed; `dram` bytes of index growth and `log` bytes of
    /// log growth are to be added to the store-wide counters (0 most of the time).
    Done {
        /// Index bytes to publish.
        dram: u64,
        /// Log bytes to publish.
        log: u64,
    },
    /// The FastStore was frozen (or the store closed) first: nothing was written.
    Retry,
}

impl FastStore {
    /// Algorithm 1 for `ops` (atomically, as one batch, when `batch`); `sync` persists
    /// the records before they are indexed and before this returns.
    pub(crate) fn write(
        &self,
        cx: &WriteCtx<'_>,
        ops: &[Op<'_>],
        batch: bool,
        sync: bool,
    ) -> Result<Written> {
        let mut slot = self.my_slot();
        if self.is_frozen() {
            return Ok(Written::Retry);
        }
        let mut lsns = LsnBuf::default();
        for (k, _) in ops {
            lsns.push(cx.lsns.next(k));
        }
        if self.is_frozen() || cx.closed.load(Ordering::Acquire) {
            return Ok(Written::Retry);
        }
        let epoch = cx.snaps.write_epoch();
        let class = if ops.iter().all(|(_, v)| v.is_none()) {
            AllocClass::Upkeep
        } else {
            AllocClass::Writes
        };
        let addrs = if sync && self.group.enabled() {
            // Horizontal batching (`group.rs`): a leader appends and persists it.
            let mut b = LsnBuf::default();
            for a in self.group.commit(
                &mut slot,
                self.group_logs(),
                ops,
                lsns.as_slice(),
                batch,
                class,
                cx.pack_limit,
            )? {
                b.push(a);
            }
            b
        } else {
            let log_before = slot.writer.bytes_written();
            let a = append(
                &mut slot,
                ops,
                lsns.as_slice(),
                batch,
                sync,
                class,
                cx.pack_limit,
            )?;
            slot.unpublished_log += slot.writer.bytes_written() - log_before;
            a
        };
        let before = slot.dram_bytes;
        for (((k, v), lsn), addr) in ops.iter().zip(lsns.as_slice()).zip(addrs.as_slice()) {
            let val = match v {
                None => Val::Tomb,
                Some(v) if v.len() <= cx.inline_threshold => Val::inline(v),
                Some(v) => Val::Addr(ValuePtr {
                    addr: *addr,
                    len: value_len(v),
                }),
            };
            let dram = self.entry_dram(k.len(), &val);
            let version = Version {
                lsn: *lsn,
                epoch,
                val,
            };
            if self.index().put_validate(k, version, cx.snaps) == PutOutcome::Inserted {
                slot.dram_bytes += dram;
            }
        }
        slot.unpublished += slot.dram_bytes - before;
        let dram = if slot.unpublished >= cx.publish_step {
            std::mem::take(&mut slot.unpublished)
        } else {
            0
        };
        let log = if slot.unpublished_log >= cx.publish_step {
            std::mem::take(&mut slot.unpublished_log)
        } else {
            0
        };
        Ok(Written::Done { dram, log })
    }
}

/// Upper bound of the packed size of `ops` when packing is on (`limit` is the inline
/// threshold) and every value is at most that long (so they may share a packed record,
/// `log/packed.rs`); `None` otherwise.
pub(super) fn packed_bound(ops: &[Op<'_>], limit: Option<usize>) -> Option<usize> {
    let inline = limit?;
    let mut n = 0usize;
    for (k, v) in ops {
        if v.is_some_and(|v| v.len() > inline) {
            return None;
        }
        // op + the longest LSN delta + the lengths + the bytes.
        n += 1 + 10 + 2 * 3 + k.len() + v.map_or(0, <[u8]>::len);
    }
    Some(n)
}

/// Appends the records of one write to the slot's log; returns their addresses. A
/// write of two or more inline-sized operations becomes one packed record (FlatStore
/// §3.2); otherwise one record per operation, a batch behind its `BatchHeader`.
pub(super) fn append(
    slot: &mut LogSlot,
    ops: &[Op<'_>],
    lsns: &[u64],
    batch: bool,
    sync: bool,
    class: AllocClass,
    pack_limit: Option<usize>,
) -> Result<LsnBuf> {
    let mut addrs = LsnBuf::default();
    let packable = ops.len() >= 2 && packed_bound(ops, pack_limit).is_some_and(|n| n <= PACKED_MAX);
    if packable {
        let addr = append_packed(slot, &[(ops, lsns)], class)?;
        for _ in ops {
            addrs.push(addr);
        }
    } else {
        append_plain(slot, ops, lsns, batch, class, &mut addrs)?;
    }
    if sync {
        slot.writer.sync()?;
    }
    Ok(addrs)
}

/// Appends one record per operation (a batch behind its header) to the slot's log.
pub(super) fn append_plain(
    slot: &mut LogSlot,
    ops: &[Op<'_>],
    lsns: &[u64],
    batch: bool,
    class: AllocClass,
    addrs: &mut LsnBuf,
) -> Result<()> {
    if batch {
        let count = u32::try_from(ops.len())
            .map_err(|_| crate::Error::invalid("batch has more than 2^32-1 operations"))?
            .to_le_bytes();
        slot.writer.append(
            &RecordIn {
                kind: Kind::BatchHeader,
                lsn: 0,
                in_batch: false,
                key: &[],
                value: &count,
            },
            class,
        )?;
    }
    for ((k, v), lsn) in ops.iter().zip(lsns) {
        let rec = RecordIn {
            kind: if v.is_some() { Kind::Put } else { Kind::Delete },
            lsn: *lsn,
            in_batch: batch,
            key: k,
            value: v.unwrap_or(&[]),
        };
        addrs.push(slot.writer.append(&rec, class)?);
    }
    slot.user_bytes += user_bytes(ops);
    Ok(())
}

/// Appends the writes `parts` (operations with their LSNs; every value inline-sized,
/// at least two operations in all) as one packed record; returns its address.
pub(super) fn append_packed(
    slot: &mut LogSlot,
    parts: &[(&[Op<'_>], &[u64])],
    class: AllocClass,
) -> Result<u64> {
    let base = parts
        .iter()
        .find_map(|(_, l)| l.first().copied())
        .unwrap_or(0);
    let mut buf = std::mem::take(&mut slot.packed);
    buf.clear();
    for (ops, lsns) in parts {
        for ((k, v), lsn) in ops.iter().zip(lsns.iter()) {
            packed::push(&mut buf, *lsn, base, k, *v);
        }
        slot.user_bytes += user_bytes(ops);
    }
    let rec = RecordIn {
        kind: Kind::Packed,
        lsn: base,
        in_batch: false,
        key: &[],
        value: &buf,
    };
    let at = slot.writer.append(&rec, class);
    slot.packed = buf;
    at
}

fn user_bytes(ops: &[Op<'_>]) -> u64 {
    ops.iter()
        .map(|(k, v)| (k.len() + v.map_or(0, <[u8]>::len)) as u64)
        .sum()
}

/// A list of u64 that stays on the stack for single writes (no allocation on the hot
/// path) and spills to the heap for batches.
#[derive(Default)]
pub(super) struct LsnBuf {
    one: [u64; 1],
    len: usize,
    many: Vec<u64>,
}

impl LsnBuf {
    pub(super) fn push(&mut self, v: u64) {
        if self.len == 0 {
            self.one[0] = v;
        } else {
            if self.len == 1 {
                self.many.push(self.one[0]);
            }
            self.many.push(v);
        }
        self.len += 1;
    }

    pub(super) fn as_slice(&self) -> &[u64] {
        if self.len <= 1 {
            &self.one[..self.len]
        } else {
            &self.many
        }
    }
}
