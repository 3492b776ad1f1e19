//! DUMP and RESTORE in CascadeKV's own payload format (not Redis's RDB encoding: a
//! payload moves a key between CascadeKV servers, and RESTORE refuses a Redis one
//! with Redis's "version or checksum" error).
//!
//! Payload: the key's metadata value without its expiry (length-prefixed, the `0x01`
//! layout of formats.md §9), then for each namespace of its type the entry count and
//! every entry as (suffix after the key's prefix, value), lengths u32 LE; then the
//! format version (u16 LE, [`VERSION`]) and the server hash of everything before it
//! (u64 LE). Cost: one range scan per namespace of the key (O(N)); RESTORE writes
//! them in one batch.

use crate::cmd::{int_arg, is, spec, Run::Data, Spec, KEY1, R, W};
use crate::error::{CmdError, CmdResult};
use crate::hash::hash64;
use crate::keyspace::{sub_prefix, Meta};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "dump",
        2,
        R,
        KEY1,
        "generic",
        "Serializes a key's value.",
        Data(dump),
    ),
    spec(
        "restore",
        -4,
        W,
        KEY1,
        "generic",
        "Creates a key from a DUMP payload.",
        Data(restore),
    ),
];

/// The payload format version.
const VERSION: u16 = 0xCA01;

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&u32::try_from(b.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(b);
}

fn dump(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    match payload(tx, c.arg(1))? {
        Some((p, _)) => reply::bulk(out, &p),
        None => reply::nil(out),
    }
    Ok(())
}

/// The DUMP payload of `key` and its expiry (unix ms), if the key exists (also
/// used by a cluster slot migration).
pub(crate) fn payload(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Option<(Vec<u8>, Option<u64>)>> {
    let Some(m) = tx.meta(key)? else {
        return Ok(None);
    };
    let mut p = Vec::new();
    let bare = Meta {
        expire_at: None,
        ..m.clone()
    };
    put_bytes(&mut p, &bare.encode());
    for &ns in m.ty.spaces() {
        let prefix = sub_prefix(ns, key);
        let entries = tx.prefix_scan(&prefix, usize::MAX)?;
        p.extend_from_slice(&u64::try_from(entries.len()).unwrap_or(0).to_le_bytes());
        for (k, v) in &entries {
            put_bytes(&mut p, &k[prefix.len()..]);
            put_bytes(&mut p, v);
        }
    }
    p.extend_from_slice(&VERSION.to_le_bytes());
    let sum = hash64(&p);
    p.extend_from_slice(&sum.to_le_bytes());
    Ok(Some((p, m.expire_at)))
}

/// Reads a payload front to back.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (h, t) = (self.b.get(..n)?, self.b.get(n..)?);
        self.b = t;
        Some(h)
    }

    fn u32(&mut self) -> Option<usize> {
        let b: [u8; 4] = self.take(4)?.try_into().ok()?;
        usize::try_from(u32::from_le_bytes(b)).ok()
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(n)
    }
}

/// A decoded payload: metadata and, per namespace, (suffix, value) entries.
type Decoded = (Meta, Vec<Vec<(Vec<u8>, Vec<u8>)>>);

fn decode(p: &[u8]) -> Option<Decoded> {
    let body_len = p.len().checked_sub(10)?;
    let (body, trailer) = p.split_at(body_len);
    let version = u16::from_le_bytes(trailer.get(..2)?.try_into().ok()?);
    let sum = u64::from_le_bytes(trailer.get(2..)?.try_into().ok()?);
    if version != VERSION || hash64(&p[..body_len + 2]) != sum {
        return None;
    }
    let mut r = Reader { b: body };
    let meta = Meta::decode(r.bytes()?).ok()?;
    let mut spaces = Vec::new();
    for _ in meta.ty.spaces() {
        let n = r.u64()?;
        let mut entries = Vec::new();
        for _ in 0..n {
            entries.push((r.bytes()?.to_vec(), r.bytes()?.to_vec()));
        }
        spaces.push(entries);
    }
    r.b.is_empty().then_some((meta, spaces))
}

fn restore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let ttl = int_arg(c.arg(2))?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let (mut replace, mut absttl) = (false, false);
    let mut j = 4;
    while j < c.len() {
        let a = c.arg(j);
        if is(a, "replace") {
            replace = true;
        } else if is(a, "absttl") {
            absttl = true;
        } else if (is(a, "idletime") || is(a, "freq")) && j + 1 < c.len() {
            int_arg(c.arg(j + 1))?; // no LRU/LFU here: accepted and ignored
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    // A taken name is refused before the payload is looked at, as Redis does.
    let old = tx.begin(key)?;
    if old.is_some() && !replace {
        return Err(CmdError::Msg(
            "BUSYKEY Target key name already exists.".into(),
        ));
    }
    let (mut meta, spaces) = decode(c.arg(3))
        .ok_or_else(|| CmdError::err("DUMP payload version or checksum are wrong"))?;
    if let Some(o) = old {
        tx.remove(key, &o)?;
    }
    let ttl = u64::try_from(ttl).unwrap_or(0);
    meta.expire_at = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(tx.now().saturating_add(t)),
    };
    if meta.expired(tx.now()) {
        // Already expired: Redis creates nothing and answers OK.
        reply::ok(out);
        return Ok(());
    }
    for (&ns, entries) in meta.ty.spaces().iter().zip(spaces) {
        let prefix = sub_prefix(ns, key);
        for (suffix, v) in entries {
            let mut k = prefix.clone();
            k.extend_from_slice(&suffix);
            tx.put(k, v);
        }
    }
    tx.set_meta(key, None, &meta);
    reply::ok(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn dump_restore_round_trip() {
        let mut k = Kit::new();
        k.int(&["RPUSH", "l", "a", "b", "c"]);
        k.int(&["ZADD", "z", "1", "x", "2", "y"]);
        k.int(&["HSET", "h", "f", "v"]);
        k.ok(&["SET", "s", "str"]);
        for key in ["l", "z", "h", "s"] {
            let before = k.raw(&["SORT", key, "ALPHA"]);
            let before = if key == "h" || key == "s" {
                k.raw(&["TYPE", key])
            } else {
                before
            };
            let reply = k.bytes(&[b"DUMP", key.as_bytes()]);
            // `$len\r\n<payload>\r\n`
            let start = reply.iter().position(|&b| b == b'\n').expect("header") + 1;
            let payload = reply[start..reply.len() - 2].to_vec();
            assert_eq!(
                k.bytes(&[b"RESTORE", key.as_bytes(), b"0", &payload]),
                b"-BUSYKEY Target key name already exists.\r\n"
            );
            assert_eq!(
                k.bytes(&[b"RESTORE", b"copy", b"0", &payload, b"REPLACE"]),
                b"+OK\r\n"
            );
            let after = if key == "h" || key == "s" {
                k.raw(&["TYPE", "copy"])
            } else {
                k.raw(&["SORT", "copy", "ALPHA"])
            };
            assert_eq!(before, after, "{key}");
        }
        k.expect(&["GET", "copy"], "$3\r\nstr\r\n");
        let reply = k.bytes(&[b"DUMP", b"h"]);
        let start = reply.iter().position(|&b| b == b'\n').expect("header") + 1;
        let payload = reply[start..reply.len() - 2].to_vec();
        assert_eq!(k.bytes(&[b"RESTORE", b"h2", b"5000", &payload]), b"+OK\r\n");
        k.expect(&["HGET", "h2", "f"], "$1\r\nv\r\n");
        assert!(k.int(&["PTTL", "h2"]) > 4000);
        let mut bad = payload.clone();
        bad[3] ^= 1;
        assert_eq!(
            k.bytes(&[b"RESTORE", b"h3", b"0", &bad]),
            b"-ERR DUMP payload version or checksum are wrong\r\n"
        );
        k.expect(&["DUMP", "nokey"], "$-1\r\n");
        k.expect(
            &["RESTORE", "n", "0", "garbage"],
            "-ERR DUMP payload version or checksum are wrong\r\n",
        );
    }
}
