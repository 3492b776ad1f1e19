//! How a stream lies in the ordered engine (docs/formats.md §streams):
//!
//! - `0x01 key` → [`Meta`] of type stream; payload [`Info`] (64 bytes: length, last
//!   id, first id, max deleted id as ms/seq u64 LE pairs, entries added u64 LE);
//! - `0x08 len(key) key ms seq` (ids u64 BE) → entry: ordinal u64 LE (the value of
//!   entries-added when it was added: approximate trimming groups entries into nodes
//!   by it), field count u32 LE, then each field and value as u32 LE length + bytes;
//! - `0x09 len(key) key group` → [`Group`]: last delivered id (16 bytes BE) and
//!   entries read (i64 LE, -1 unknown);
//! - `0x0A len(key) key len(group) group id` → [`Nack`]: delivery time and count
//!   (u64 LE each) and the owning consumer's name;
//! - `0x0B len(key) key len(group) group esc(consumer) 00 00` → seen time (u64 LE),
//!   and `… 00 00 id` → empty: the consumer's own pending list. `esc` writes a 0x00
//!   byte as `00 FF`, so consumers sort by name and `00 00` ends the name.
//!
//! Invariants: [`Info::length`] is the number of `0x08` entries; every id in `0x08`
//! is ≤ `last`; a `0x0A` entry exists iff its `0x0B … consumer id` twin does, and its
//! consumer's record exists; all entries of one command are written in one engine
//! batch (the [`Tx`]). No shared state: callers hold the key's stripe lock.

use std::ops::Bound;

use super::id::StreamId;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{
    prefix_end, sub_key, sub_prefix, Meta, Type, NS_SCONSUMER, NS_SGROUP, NS_SPEL, NS_STREAM,
};
use crate::pubsub::class;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// A stream's header (the `0x01` payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Info {
    /// Live entries.
    pub(crate) length: u64,
    /// The last id ever generated.
    pub(crate) last: StreamId,
    /// The first live entry's id (`0-0` when empty).
    pub(crate) first: StreamId,
    /// The largest id deleted by XDEL.
    pub(crate) max_deleted: StreamId,
    /// Entries ever added.
    pub(crate) added: u64,
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(i..i + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64);
        for v in [
            self.length,
            self.last.ms,
            self.last.seq,
            self.first.ms,
            self.first.seq,
            self.max_deleted.ms,
            self.max_deleted.seq,
            self.added,
        ] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p
    }

    fn decode(p: &[u8]) -> Info {
        let id = |i| StreamId::new(u64_at(p, i), u64_at(p, i + 8));
        Info {
            length: u64_at(p, 0),
            last: id(8),
            first: id(24),
            max_deleted: id(40),
            added: u64_at(p, 56),
        }
    }
}

/// A loaded stream: its metadata (for the expiry) and header.
#[derive(Debug, Clone)]
pub(crate) struct Stream {
    /// The stored metadata.
    pub(crate) meta: Meta,
    /// The decoded header.
    pub(crate) info: Info,
}

impl Stream {
    fn from_meta(meta: Meta) -> Stream {
        let info = Info::decode(&meta.payload);
        Stream { meta, info }
    }
}

/// Reads the stream at `key` (WRONGTYPE for another type).
pub(crate) fn load(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Option<Stream>> {
    Ok(tx.typed(key, Type::Stream)?.map(Stream::from_meta))
}

/// Starts a write of the stream at `key` (an expired key is purged).
pub(crate) fn begin(tx: &mut Tx<'_>, key: &[u8]) -> CmdResult<Option<Stream>> {
    Ok(tx.begin_typed(key, Type::Stream)?.map(Stream::from_meta))
}

/// Writes the header `info` of `key` (`old`: the stream as loaded, `None`: a new key).
pub(crate) fn save(tx: &mut Tx<'_>, key: &[u8], old: Option<&Stream>, info: &Info) {
    let old_meta = old.map(|s| &s.meta);
    let new = Meta {
        ty: Type::Stream,
        expire_at: old_meta.and_then(|m| m.expire_at),
        payload: info.encode(),
    };
    tx.set_meta(key, old_meta, &new);
}

/// The engine key of entry `id`.
pub(crate) fn entry_key(key: &[u8], id: StreamId) -> Vec<u8> {
    sub_key(NS_STREAM, key, &id.to_bytes())
}

/// Encodes an entry value.
pub(crate) fn encode_entry<'a>(
    ordinal: u64,
    fields: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&ordinal.to_le_bytes());
    v.extend_from_slice(
        &u32::try_from(fields.len() / 2)
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for f in fields {
        v.extend_from_slice(&u32::try_from(f.len()).unwrap_or(u32::MAX).to_le_bytes());
        v.extend_from_slice(f);
    }
    v
}

fn corrupt() -> CmdError {
    CmdError::Engine("ERR corrupt stream entry in the store".into())
}

/// The ordinal of an encoded entry.
pub(crate) fn entry_ordinal(v: &[u8]) -> u64 {
    u64_at(v, 0)
}

/// The fields and values of an encoded entry, alternating.
pub(crate) fn entry_fields(v: &[u8]) -> CmdResult<Vec<&[u8]>> {
    let n = v.get(8..12).ok_or_else(corrupt)?;
    let n = u32::from_le_bytes(n.try_into().map_err(|_| corrupt())?) as usize;
    let mut out = Vec::with_capacity(n * 2);
    let mut at = 12;
    for _ in 0..n * 2 {
        let l = v.get(at..at + 4).ok_or_else(corrupt)?;
        let l = u32::from_le_bytes(l.try_into().map_err(|_| corrupt())?) as usize;
        out.push(v.get(at + 4..at + 4 + l).ok_or_else(corrupt)?);
        at += 4 + l;
    }
    Ok(out)
}

/// Replies `[id, [field, value, ...]]` for an encoded entry.
pub(crate) fn reply_entry(out: &mut Out, id: StreamId, v: &[u8]) -> CmdResult<()> {
    let fields = entry_fields(v)?;
    reply::array_header(out, 2);
    reply::bulk(out, id.fmt().as_bytes());
    reply::bulk_array(out, fields.into_iter());
    Ok(())
}

/// Entries of `key` with ids in `[start, end]`, ascending (or descending with
/// `rev`), at most `count` (0: all): (id, encoded entry).
pub(crate) fn range(
    tx: &Tx<'_>,
    key: &[u8],
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> CmdResult<Vec<(StreamId, Vec<u8>)>> {
    if start > end {
        return Ok(Vec::new());
    }
    let lo = Bound::Included(entry_key(key, start));
    let hi = Bound::Included(entry_key(key, end));
    let limit = if count == 0 { usize::MAX } else { count };
    let plen = sub_prefix(NS_STREAM, key).len();
    let decode = |r: CmdResult<(Vec<u8>, Vec<u8>)>| -> CmdResult<(StreamId, Vec<u8>)> {
        let (k, v) = r?;
        let id = StreamId::from_bytes(k.get(plen..).unwrap_or(&[])).ok_or_else(corrupt)?;
        Ok((id, v))
    };
    if rev {
        tx.range_rev(lo, hi)?.take(limit).map(decode).collect()
    } else {
        // One short engine scan of at most `limit` entries (XREAD COUNT, XREADGROUP):
        // the end bound made exclusive by appending a byte.
        let (Bound::Included(lo), Bound::Included(mut hi)) = (lo, hi) else {
            return Ok(Vec::new());
        };
        hi.push(0);
        tx.scan_first(&lo, Some(&hi), limit)?
            .into_iter()
            .map(|kv| decode(Ok(kv)))
            .collect()
    }
}

/// The encoded entry `id` of `key`, if it exists.
pub(crate) fn get_entry(tx: &Tx<'_>, key: &[u8], id: StreamId) -> CmdResult<Option<Vec<u8>>> {
    tx.get(&entry_key(key, id))
}

/// The id of the first (or, with `rev`, last) entry, `0-0` when empty.
pub(crate) fn edge_id(tx: &Tx<'_>, key: &[u8], rev: bool) -> CmdResult<StreamId> {
    Ok(range(tx, key, StreamId::MIN, StreamId::MAX, rev, 1)?
        .first()
        .map_or(StreamId::MIN, |(id, _)| *id))
}

/// A consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Group {
    /// The last id delivered to the group.
    pub(crate) last: StreamId,
    /// Entries the group read (`None`: unknown).
    pub(crate) entries_read: Option<u64>,
}

impl Group {
    fn encode(&self) -> Vec<u8> {
        let mut v = self.last.to_bytes().to_vec();
        let er = self
            .entries_read
            .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        v.extend_from_slice(&er.to_le_bytes());
        v
    }

    fn decode(v: &[u8]) -> CmdResult<Group> {
        let last = StreamId::from_bytes(v.get(..16).ok_or_else(corrupt)?).ok_or_else(corrupt)?;
        let er = u64_at(v, 16);
        let entries_read = u64::try_from(er.cast_signed()).ok();
        Ok(Group { last, entries_read })
    }
}

fn group_key(key: &[u8], name: &[u8]) -> Vec<u8> {
    sub_key(NS_SGROUP, key, name)
}

/// The group `name` of `key`.
pub(crate) fn get_group(tx: &Tx<'_>, key: &[u8], name: &[u8]) -> CmdResult<Option<Group>> {
    tx.get(&group_key(key, name))?
        .map(|v| Group::decode(&v))
        .transpose()
}

/// Writes the group `name` of `key`.
pub(crate) fn put_group(tx: &mut Tx<'_>, key: &[u8], name: &[u8], g: &Group) {
    tx.put(group_key(key, name), g.encode());
}

/// Every group of `key`, by name.
pub(crate) fn groups(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Vec<(Vec<u8>, Group)>> {
    let p = sub_prefix(NS_SGROUP, key);
    tx.prefix_scan(&p, usize::MAX)?
        .into_iter()
        .map(|(k, v)| Ok((k[p.len()..].to_vec(), Group::decode(&v)?)))
        .collect()
}

/// A pending (delivered, not acknowledged) entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nack {
    /// Last delivery, Unix ms.
    pub(crate) time: u64,
    /// Deliveries.
    pub(crate) count: u64,
    /// The consumer it was delivered to.
    pub(crate) consumer: Vec<u8>,
}

impl Nack {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(16 + self.consumer.len());
        v.extend_from_slice(&self.time.to_le_bytes());
        v.extend_from_slice(&self.count.to_le_bytes());
        v.extend_from_slice(&self.consumer);
        v
    }

    fn decode(v: &[u8]) -> CmdResult<Nack> {
        if v.len() < 16 {
            return Err(corrupt());
        }
        Ok(Nack {
            time: u64_at(v, 0),
            count: u64_at(v, 8),
            consumer: v[16..].to_vec(),
        })
    }
}

/// `ns len(key) key len(group) group`.
fn group_part(ns: u8, key: &[u8], group: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(ns, key);
    k.extend_from_slice(&u32::try_from(group.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(group);
    k
}

fn pel_key(key: &[u8], group: &[u8], id: StreamId) -> Vec<u8> {
    let mut k = group_part(NS_SPEL, key, group);
    k.extend_from_slice(&id.to_bytes());
    k
}

fn consumer_key(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<u8> {
    let mut k = group_part(NS_SCONSUMER, key, group);
    // Escaped (0x00 → 0x00 0xFF) and ended by 0x00 0x00: consumers sort by name, as
    // Redis lists them, and a name is never a prefix of another's keys.
    for &b in consumer {
        k.push(b);
        if b == 0 {
            k.push(0xff);
        }
    }
    k.extend_from_slice(&[0, 0]);
    k
}

/// Splits `escaped name, 0x00 0x00, rest` into (name, rest).
fn split_consumer(b: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut name = Vec::with_capacity(b.len());
    let mut i = 0;
    loop {
        match (b.get(i)?, b.get(i + 1)) {
            (0, Some(0)) => return Some((name, &b[i + 2..])),
            (0, Some(0xff)) => {
                name.push(0);
                i += 2;
            }
            (0, _) => return None,
            (&c, _) => {
                name.push(c);
                i += 1;
            }
        }
    }
}

/// The pending entry `id` of `group`.
pub(crate) fn get_nack(
    tx: &Tx<'_>,
    key: &[u8],
    group: &[u8],
    id: StreamId,
) -> CmdResult<Option<Nack>> {
    tx.get(&pel_key(key, group, id))?
        .map(|v| Nack::decode(&v))
        .transpose()
}

/// Writes the pending entry `id` (moving it from `old`'s consumer list if the owner
/// changed).
pub(crate) fn put_nack(
    tx: &mut Tx<'_>,
    key: &[u8],
    group: &[u8],
    id: StreamId,
    nack: &Nack,
    old: Option<&Nack>,
) {
    if let Some(o) = old.filter(|o| o.consumer != nack.consumer) {
        let mut k = consumer_key(key, group, &o.consumer);
        k.extend_from_slice(&id.to_bytes());
        tx.delete(k);
    }
    let mut k = consumer_key(key, group, &nack.consumer);
    k.extend_from_slice(&id.to_bytes());
    tx.put(k, Vec::new());
    tx.put(pel_key(key, group, id), nack.encode());
}

/// Deletes the pending entry `id` (owned by `nack.consumer`).
pub(crate) fn del_nack(tx: &mut Tx<'_>, key: &[u8], group: &[u8], id: StreamId, nack: &Nack) {
    let mut k = consumer_key(key, group, &nack.consumer);
    k.extend_from_slice(&id.to_bytes());
    tx.delete(k);
    tx.delete(pel_key(key, group, id));
}

/// Pending entries of `group` with ids in `[start, end]`, ascending, at most `count`
/// (0: all).
pub(crate) fn pel_range(
    tx: &Tx<'_>,
    key: &[u8],
    group: &[u8],
    start: StreamId,
    end: StreamId,
    count: usize,
) -> CmdResult<Vec<(StreamId, Nack)>> {
    if start > end {
        return Ok(Vec::new());
    }
    let plen = group_part(NS_SPEL, key, group).len();
    let lo = Bound::Included(pel_key(key, group, start));
    let hi = Bound::Included(pel_key(key, group, end));
    let limit = if count == 0 { usize::MAX } else { count };
    tx.range(lo, hi)?
        .take(limit)
        .map(|r| {
            let (k, v) = r?;
            let id = StreamId::from_bytes(&k[plen..]).ok_or_else(corrupt)?;
            Ok((id, Nack::decode(&v)?))
        })
        .collect()
}

/// Pending ids of one consumer in `[start, end]`, ascending, at most `count` (0: all).
pub(crate) fn consumer_pel(
    tx: &Tx<'_>,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    start: StreamId,
    end: StreamId,
    count: usize,
) -> CmdResult<Vec<StreamId>> {
    if start > end {
        return Ok(Vec::new());
    }
    let base = consumer_key(key, group, consumer);
    let (mut lo, mut hi) = (base.clone(), base.clone());
    lo.extend_from_slice(&start.to_bytes());
    hi.extend_from_slice(&end.to_bytes());
    let limit = if count == 0 { usize::MAX } else { count };
    tx.range(Bound::Included(lo), Bound::Included(hi))?
        .take(limit)
        .map(|r| StreamId::from_bytes(&r?.0[base.len()..]).ok_or_else(corrupt))
        .collect()
}

/// A consumer: name, seen time, pending count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Consumer {
    /// Its name.
    pub(crate) name: Vec<u8>,
    /// When it was last active (Unix ms).
    pub(crate) seen: u64,
    /// Entries pending for it.
    pub(crate) pending: u64,
}

/// Every consumer of `group`, by name.
pub(crate) fn consumers(tx: &Tx<'_>, key: &[u8], group: &[u8]) -> CmdResult<Vec<Consumer>> {
    let p = group_part(NS_SCONSUMER, key, group);
    let mut out: Vec<Consumer> = Vec::new();
    for (k, v) in tx.prefix_scan(&p, usize::MAX)? {
        let (name, rest) = split_consumer(&k[p.len()..]).ok_or_else(corrupt)?;
        if rest.is_empty() {
            out.push(Consumer {
                name,
                seen: u64_at(&v, 0),
                pending: 0,
            });
        } else if let Some(c) = out.last_mut().filter(|c| c.name == name) {
            c.pending += 1;
        }
    }
    Ok(out)
}

/// Creates the consumer if missing and marks it seen at `now` (one put; a read only
/// while stream notifications are on, to raise `xgroup-createconsumer` for a new one).
pub(crate) fn touch_consumer(tx: &mut Tx<'_>, key: &[u8], group: &[u8], name: &[u8], now: u64) {
    let ck = consumer_key(key, group, name);
    if tx.notifying(class::STREAM) && !tx.contains(&ck).unwrap_or(true) {
        tx.event(class::STREAM, "xgroup-createconsumer", key);
    }
    tx.put(ck, now.to_le_bytes().to_vec());
}

/// True if the consumer exists.
pub(crate) fn has_consumer(tx: &Tx<'_>, key: &[u8], group: &[u8], name: &[u8]) -> CmdResult<bool> {
    tx.contains(&consumer_key(key, group, name))
}

/// Deletes a consumer and its pending entries; returns how many were pending.
pub(crate) fn del_consumer(
    tx: &mut Tx<'_>,
    key: &[u8],
    group: &[u8],
    name: &[u8],
) -> CmdResult<u64> {
    let base = consumer_key(key, group, name);
    let ids = consumer_pel(tx, key, group, name, StreamId::MIN, StreamId::MAX, 0)?;
    for id in &ids {
        tx.delete(pel_key(key, group, *id));
        let mut k = base.clone();
        k.extend_from_slice(&id.to_bytes());
        tx.delete(k);
    }
    tx.delete(base);
    Ok(ids.len() as u64)
}

/// Deletes a group with its pending entries and consumers.
pub(crate) fn del_group(tx: &mut Tx<'_>, key: &[u8], group: &[u8]) -> CmdResult<()> {
    for ns in [NS_SPEL, NS_SCONSUMER] {
        let p = group_part(ns, key, group);
        let hi = prefix_end(&p).map_or(Bound::Unbounded, Bound::Excluded);
        let keys: Vec<Vec<u8>> = tx
            .range(Bound::Included(p), hi)?
            .map(|r| r.map(|(k, _)| k))
            .collect::<CmdResult<_>>()?;
        for k in keys {
            tx.delete(k);
        }
    }
    tx.delete(group_key(key, group));
    Ok(())
}

/// Number of pending entries of `group`.
pub(crate) fn pel_count(tx: &Tx<'_>, key: &[u8], group: &[u8]) -> CmdResult<u64> {
    Ok(tx
        .prefix_scan(&group_part(NS_SPEL, key, group), usize::MAX)?
        .len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_keys_sort_by_name_and_split_back() {
        let names: [&[u8]; 5] = [b"", b"Alice", b"Bob", b"a\0", b"a\0\0b"];
        let mut keys: Vec<Vec<u8>> = names.iter().map(|n| consumer_key(b"k", b"g", n)).collect();
        let p = group_part(NS_SCONSUMER, b"k", b"g").len();
        for (k, n) in keys.iter().zip(names) {
            let (name, rest) = split_consumer(&k[p..]).expect("splits");
            assert_eq!((name.as_slice(), rest), (n, &[][..]));
        }
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, keys);
        // A pending id after a name sorts after the name and before the next one.
        let mut pel = consumer_key(b"k", b"g", b"Alice");
        pel.extend_from_slice(&StreamId::new(1, 1).to_bytes());
        keys.push(pel);
        keys.sort();
        assert_eq!(keys[2].len(), keys[1].len() + 16);
        assert!(split_consumer(&[b'a', 0, 7]).is_none());
    }
}
