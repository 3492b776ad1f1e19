//! The node-to-node stream: records of committed engine batches, and the frames of a
//! full sync. Our own format (Sentinel never reads it), drawn in `docs/formats.md`.
//!
//! Every frame is `len u32 LE` then `len` bytes whose first byte is the kind:
//!
//! - `C` commit: `flush u8` (0 none, 1 FLUSHDB, 2 FLUSHALL), `phys u16` (the flushed
//!   database), `n u32`, then `n` writes `op u8` (1 put, 0 delete), `klen u32`, key,
//!   and for a put `vlen u32`, value; then `m u32` and `m` count changes `phys u16`,
//!   `keys i64`, `expires i64`; then, if any, `e u32` and `e` keyspace notifications
//!   `class u32`, `db u32`, `elen u8`, event name, `klen u32`, key (what the command
//!   would publish with every class enabled; a replica publishes those its own
//!   `notify-keyspace-events` enables). A commit without notifications ends after
//!   the count changes.
//! - `S` SWAPDB: `a u32`, `b u32` (logical databases).
//! - `H` heartbeat: nothing. Not part of the stream: it counts toward no offset.
//! - `K` full-sync chunk: `n u32`, then `n` pairs `klen u32`, key, `vlen u32`, value.
//! - `E` end of the full sync. Full-sync frames count toward no offset either.
//!
//! Records (`C`, `S`) are what the backlog holds; their bytes are the offsets.

use crate::error::{CmdError, CmdResult};

/// Frame kinds.
pub(crate) const COMMIT: u8 = b'C';
/// SWAPDB.
pub(crate) const SWAP: u8 = b'S';
/// Heartbeat.
pub(crate) const HEARTBEAT: u8 = b'H';
/// Full-sync chunk.
pub(crate) const CHUNK: u8 = b'K';
/// End of a full sync.
pub(crate) const END: u8 = b'E';

/// A commit as the replica applies it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Commit {
    /// 0 none, 1 FLUSHDB of `phys`, 2 FLUSHALL.
    pub(crate) flush: u8,
    /// The database FLUSHDB emptied.
    pub(crate) phys: u16,
    /// Puts (`Some`) and deletes (`None`), in order.
    pub(crate) writes: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Key-count changes per physical database.
    pub(crate) counts: Vec<(u16, i64, i64)>,
    /// Keyspace notifications: class, event, user key, logical database.
    pub(crate) events: Vec<(u32, String, Vec<u8>, u32)>,
}

/// One decoded frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A commit.
    Commit(Commit),
    /// SWAPDB a b.
    Swap(u32, u32),
    /// Keep-alive.
    Heartbeat,
    /// Full-sync entries.
    Chunk(Vec<(Vec<u8>, Vec<u8>)>),
    /// Full sync done.
    End,
}

fn put_u32(o: &mut Vec<u8>, n: usize) {
    o.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut o = Vec::with_capacity(5 + body.len());
    put_u32(&mut o, body.len() + 1);
    o.push(kind);
    o.extend_from_slice(body);
    o
}

/// Encodes a commit record.
pub(crate) fn encode_commit<'a>(
    flush: u8,
    phys: u16,
    writes: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    counts: &[(u16, i64, i64)],
    events: &[(u32, &str, Vec<u8>, usize)],
) -> Vec<u8> {
    let mut b = Vec::new();
    b.push(flush);
    b.extend_from_slice(&phys.to_le_bytes());
    put_u32(&mut b, writes.len());
    for (k, v) in writes {
        b.push(u8::from(v.is_some()));
        put_u32(&mut b, k.len());
        b.extend_from_slice(k);
        if let Some(v) = v {
            put_u32(&mut b, v.len());
            b.extend_from_slice(v);
        }
    }
    put_u32(&mut b, counts.len());
    for &(p, k, e) in counts {
        b.extend_from_slice(&p.to_le_bytes());
        b.extend_from_slice(&k.to_le_bytes());
        b.extend_from_slice(&e.to_le_bytes());
    }
    if !events.is_empty() {
        put_u32(&mut b, events.len());
        for (class, name, key, db) in events {
            b.extend_from_slice(&class.to_le_bytes());
            put_u32(&mut b, *db);
            // Event names are Redis's, a few letters long.
            let name = &name.as_bytes()[..name.len().min(255)];
            b.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
            b.extend_from_slice(name);
            put_u32(&mut b, key.len());
            b.extend_from_slice(key);
        }
    }
    frame(COMMIT, &b)
}

/// Encodes a SWAPDB record.
pub(crate) fn encode_swap(a: usize, b: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(8);
    put_u32(&mut body, a);
    put_u32(&mut body, b);
    frame(SWAP, &body)
}

/// A heartbeat frame.
pub(crate) fn heartbeat() -> Vec<u8> {
    frame(HEARTBEAT, &[])
}

/// The end-of-sync frame.
pub(crate) fn end() -> Vec<u8> {
    frame(END, &[])
}

/// Encodes a full-sync chunk.
pub(crate) fn encode_chunk(pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    put_u32(&mut b, pairs.len());
    for (k, v) in pairs {
        put_u32(&mut b, k.len());
        b.extend_from_slice(k);
        put_u32(&mut b, v.len());
        b.extend_from_slice(v);
    }
    frame(CHUNK, &b)
}

/// The length of the complete frame at the start of `buf` (`None`: incomplete).
///
/// # Errors
/// A frame longer than `max`.
pub(crate) fn frame_len(buf: &[u8], max: usize) -> CmdResult<Option<usize>> {
    let Some(h) = buf.get(..4) else {
        return Ok(None);
    };
    let n = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    if n == 0 || n > max {
        return Err(bad("frame length"));
    }
    Ok((buf.len() >= 4 + n).then_some(4 + n))
}

fn bad(what: &str) -> CmdError {
    CmdError::Engine(format!("ERR replication stream damaged ({what})"))
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> CmdResult<&'a [u8]> {
        if self.b.len() < n {
            return Err(bad("short frame"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> CmdResult<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> CmdResult<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> CmdResult<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> CmdResult<i64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> CmdResult<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

/// Decodes one complete frame (as measured by [`frame_len`]).
///
/// # Errors
/// A damaged frame.
pub(crate) fn decode(raw: &[u8]) -> CmdResult<Frame> {
    let mut rd = Reader {
        b: raw.get(4..).unwrap_or_default(),
    };
    let frame = match rd.u8()? {
        COMMIT => {
            let flush = rd.u8()?;
            let phys = rd.u16()?;
            let count = rd.u32()? as usize;
            let mut writes = Vec::with_capacity(count.min(1 << 16));
            for _ in 0..count {
                let op = rd.u8()?;
                let key = rd.bytes()?;
                let val = if op == 1 { Some(rd.bytes()?) } else { None };
                writes.push((key, val));
            }
            let changes = rd.u32()? as usize;
            let mut counts = Vec::with_capacity(changes.min(1 << 16));
            for _ in 0..changes {
                counts.push((rd.u16()?, rd.i64()?, rd.i64()?));
            }
            let mut events = Vec::new();
            if !rd.b.is_empty() {
                let n = rd.u32()? as usize;
                events.reserve(n.min(1 << 16));
                for _ in 0..n {
                    let class = rd.u32()?;
                    let db = rd.u32()?;
                    let len = usize::from(rd.u8()?);
                    let name = String::from_utf8_lossy(rd.take(len)?).into_owned();
                    events.push((class, name, rd.bytes()?, db));
                }
            }
            Frame::Commit(Commit {
                flush,
                phys,
                writes,
                counts,
                events,
            })
        }
        SWAP => Frame::Swap(rd.u32()?, rd.u32()?),
        HEARTBEAT => Frame::Heartbeat,
        CHUNK => {
            let count = rd.u32()? as usize;
            let mut pairs = Vec::with_capacity(count.min(1 << 16));
            for _ in 0..count {
                pairs.push((rd.bytes()?, rd.bytes()?));
            }
            Frame::Chunk(pairs)
        }
        END => Frame::End,
        other => return Err(bad(&format!("frame kind {other}"))),
    };
    if !rd.b.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let w: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
            (b"\x01a".to_vec(), Some(b"v".to_vec())),
            (b"\x01b".to_vec(), None),
        ];
        let rec = encode_commit(
            2,
            3,
            w.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
            &[(0, 1, -1)],
            &[],
        );
        assert_eq!(frame_len(&rec, 1 << 20).expect("test"), Some(rec.len()));
        assert_eq!(
            frame_len(&rec[..rec.len() - 1], 1 << 20).expect("test"),
            None
        );
        assert_eq!(
            decode(&rec).expect("test"),
            Frame::Commit(Commit {
                flush: 2,
                phys: 3,
                writes: w.clone(),
                counts: vec![(0, 1, -1)],
                events: Vec::new(),
            })
        );
        // With keyspace notifications.
        let rec = encode_commit(
            0,
            0,
            w.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
            &[],
            &[(4, "set", b"a".to_vec(), 3), (8, "del", b"b".to_vec(), 0)],
        );
        assert_eq!(
            decode(&rec).expect("test"),
            Frame::Commit(Commit {
                flush: 0,
                phys: 0,
                writes: w,
                counts: Vec::new(),
                events: vec![
                    (4, "set".into(), b"a".to_vec(), 3),
                    (8, "del".into(), b"b".to_vec(), 0)
                ],
            })
        );
        let mut short = rec.clone();
        short.pop();
        short[0] -= 1;
        assert!(decode(&short).is_err());
        assert_eq!(decode(&encode_swap(1, 2)).expect("test"), Frame::Swap(1, 2));
        assert_eq!(decode(&heartbeat()).expect("test"), Frame::Heartbeat);
        assert_eq!(decode(&end()).expect("test"), Frame::End);
        let pairs = vec![(b"k".to_vec(), b"v".to_vec())];
        assert_eq!(
            decode(&encode_chunk(&pairs)).expect("test"),
            Frame::Chunk(pairs)
        );
        // Damage is an error, never a panic.
        let mut broken = encode_swap(1, 2);
        broken.truncate(7);
        broken[0] = 3;
        assert!(decode(&broken).is_err());
        assert!(frame_len(&[0, 0, 0, 0], 10).is_err());
        assert!(decode(&[1, 0, 0, 0, b'Z']).is_err());
    }
}
