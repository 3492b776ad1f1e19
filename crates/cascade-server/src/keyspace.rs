//! How Redis data types are laid out over the ordered engine.
//!
//! Every engine key starts with a namespace byte:
//!
//! | namespace | engine key                              | engine value                  |
//! |-----------|-----------------------------------------|-------------------------------|
//! | `0x01`    | `01 key`                                 | [`Meta`]: type, expiry, payload |
//! | `0x02`    | `02 len(key) u32 BE, key, field`         | hash field value              |
//! | `0x03`    | `03 len(key), key, member`               | zset score (f64 bits, LE)     |
//! | `0x04`    | `04 len(key), key, sortable(score), member` | empty (score order index)  |
//! | `0x05`    | `05 expire_at_ms u64 BE, key`            | empty (expiry queue)          |
//! | `0x06`    | `06 len(key), key, member`               | empty (set member)            |
//! | `0x07`    | `07 len(key), key, index u64 BE`         | list element                  |
//! | `0x08`    | `08 len(key), key, ms u64 BE, seq u64 BE` | stream entry (`cmd/streams/layout.rs`) |
//! | `0x09`    | `09 len(key), key, group`                | consumer group: last id, entries read |
//! | `0x0A`    | `0A len(key), key, len(group) u32 BE, group, id` | pending entry: consumer, time, count |
//! | `0x0B`    | `0B len(key), key, len(group), group, len(consumer), consumer [, id]` | consumer (seen time) / its pending ids |
//! | `0x0C`    | `0C library name`                        | function library source (`scripting/functions.rs`) |
//!
//! Invariants: a user key exists iff its `0x01` entry exists; the `0x01` entries are in
//! user-key order, so `SCAN`, `KEYS` and `CASCADE.RANGE` are range scans of namespace
//! 1; a hash, zset, set, list or stream is one contiguous range of namespace 2 / 3 /
//! 4 / 6 / 7 / 8–11 (the length prefix
//! keeps `key` from being a prefix of another key's range); a key with an expiry has
//! exactly one `0x05` entry, which the sweeper uses to find expired keys in time order.
//! All entries of one command are written in one atomic engine batch.

use crate::error::CmdError;

/// Namespace of the per-key metadata (and string values).
pub(crate) const NS_META: u8 = 0x01;
/// Hash fields.
pub(crate) const NS_HASH: u8 = 0x02;
/// Zset member → score.
pub(crate) const NS_ZMEMBER: u8 = 0x03;
/// Zset score index.
pub(crate) const NS_ZSCORE: u8 = 0x04;
/// Expiry queue.
pub(crate) const NS_EXPIRE: u8 = 0x05;
/// Set members.
pub(crate) const NS_SET: u8 = 0x06;
/// List elements by index.
pub(crate) const NS_LIST: u8 = 0x07;
/// Stream entries by id.
pub(crate) const NS_STREAM: u8 = 0x08;
/// Stream consumer groups.
pub(crate) const NS_SGROUP: u8 = 0x09;
/// Stream pending entries per group, by id.
pub(crate) const NS_SPEL: u8 = 0x0A;
/// Stream consumers per group and each one's pending ids.
pub(crate) const NS_SCONSUMER: u8 = 0x0B;
/// Function libraries (FUNCTION LOAD): not user keys; FLUSHALL keeps them.
pub(crate) const NS_FUNCTION: u8 = 0x0C;
/// Index of the first element of a new list: the middle of the u64 range, so a list
/// can grow 2^63 elements in either direction.
pub(crate) const LIST_START: u64 = 1 << 63;

/// A Redis data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    /// Strings (and integers).
    String,
    /// Hashes.
    Hash,
    /// Sorted sets.
    ZSet,
    /// Sets.
    Set,
    /// Lists.
    List,
    /// Streams.
    Stream,
}

impl Type {
    /// The name `TYPE` replies with.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::ZSet => "zset",
            Type::Set => "set",
            Type::List => "list",
            Type::Stream => "stream",
        }
    }

    /// The namespaces holding this type's elements.
    pub(crate) fn spaces(self) -> &'static [u8] {
        match self {
            Type::String => &[],
            Type::Hash => &[NS_HASH],
            Type::ZSet => &[NS_ZMEMBER, NS_ZSCORE],
            Type::Set => &[NS_SET],
            Type::List => &[NS_LIST],
            Type::Stream => &[NS_STREAM, NS_SGROUP, NS_SPEL, NS_SCONSUMER],
        }
    }

    fn tag(self) -> u8 {
        match self {
            Type::String => 0,
            Type::Hash => 1,
            Type::ZSet => 2,
            Type::Set => 3,
            Type::List => 4,
            Type::Stream => 5,
        }
    }

    fn from_tag(t: u8) -> Option<Type> {
        match t {
            0 => Some(Type::String),
            1 => Some(Type::Hash),
            2 => Some(Type::ZSet),
            3 => Some(Type::Set),
            4 => Some(Type::List),
            5 => Some(Type::Stream),
            _ => None,
        }
    }
}

const FLAG_EXPIRES: u8 = 1;
/// The payload length of a stream's metadata (`cmd/streams/layout.rs`): length,
/// last id, first id, max deleted id, entries added.
pub(crate) const STREAM_META_LEN: usize = 64;

/// The decoded `0x01` value: `type u8, flags u8, [expire_at_ms u64 LE], payload`.
/// The payload is the string's bytes, or the element count (u64 LE) of a hash, zset
/// or set; a list's payload is its count and the index of its first element (u64 LE
/// each); a stream's is its length, last id, first id, max deleted id (ms and seq
/// u64 LE each) and entries added (u64 LE), 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The type.
    pub(crate) ty: Type,
    /// Absolute expiry in Unix milliseconds.
    pub(crate) expire_at: Option<u64>,
    /// String bytes, or the count encoded as u64 LE.
    pub(crate) payload: Vec<u8>,
}

impl Meta {
    /// A string value.
    pub(crate) fn string(v: &[u8], expire_at: Option<u64>) -> Meta {
        Meta {
            ty: Type::String,
            expire_at,
            payload: v.to_vec(),
        }
    }

    /// A hash or zset header with `count` elements.
    pub(crate) fn collection(ty: Type, count: u64, expire_at: Option<u64>) -> Meta {
        Meta {
            ty,
            expire_at,
            payload: count.to_le_bytes().to_vec(),
        }
    }

    /// A list header: `count` elements at indexes `head..head + count`.
    pub(crate) fn list(count: u64, head: u64, expire_at: Option<u64>) -> Meta {
        let mut payload = count.to_le_bytes().to_vec();
        payload.extend_from_slice(&head.to_le_bytes());
        Meta {
            ty: Type::List,
            expire_at,
            payload,
        }
    }

    /// The index of a list's first element.
    pub(crate) fn list_head(&self) -> u64 {
        let mut b = [0u8; 8];
        if let Some(h) = self.payload.get(8..16) {
            b.copy_from_slice(h);
        }
        u64::from_le_bytes(b)
    }

    /// The element count of a collection.
    pub(crate) fn count(&self) -> u64 {
        let mut b = [0u8; 8];
        let n = self.payload.len().min(8);
        b[..n].copy_from_slice(&self.payload[..n]);
        u64::from_le_bytes(b)
    }

    /// True when the key has expired at `now_ms`.
    pub(crate) fn expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|t| t <= now_ms)
    }

    /// Encodes for the engine.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + self.payload.len());
        encode_meta_into(&mut out, self.ty, self.expire_at, &self.payload);
        out
    }

    /// Decodes an engine value; a malformed one is corruption.
    pub(crate) fn decode(b: &[u8]) -> Result<Meta, CmdError> {
        let (ty, expire_at, at) = Self::header(b)?;
        Ok(Meta {
            ty,
            expire_at,
            payload: b[at..].to_vec(),
        })
    }

    /// [`Meta::decode`] of a value read into `v`, whose bytes become the payload
    /// (a GET copies and allocates nothing more).
    pub(crate) fn from_vec(mut v: Vec<u8>) -> Result<Meta, CmdError> {
        let (ty, expire_at, at) = Self::header(&v)?;
        v.drain(..at);
        Ok(Meta {
            ty,
            expire_at,
            payload: v,
        })
    }

    /// Type, expiry and payload offset of an encoded value, checked.
    fn header(b: &[u8]) -> Result<(Type, Option<u64>, usize), CmdError> {
        let bad = || CmdError::Engine("ERR corrupt value header in the store".into());
        let (&tag, rest) = b.split_first().ok_or_else(bad)?;
        let ty = Type::from_tag(tag).ok_or_else(bad)?;
        let (&flags, rest) = rest.split_first().ok_or_else(bad)?;
        let (expire_at, rest) = if flags & FLAG_EXPIRES != 0 {
            let t: [u8; 8] = rest
                .get(..8)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            (Some(u64::from_le_bytes(t)), &rest[8..])
        } else {
            (None, rest)
        };
        let want = match ty {
            Type::String => rest.len(),
            Type::List => 16,
            Type::Stream => STREAM_META_LEN,
            Type::Hash | Type::ZSet | Type::Set => 8,
        };
        if rest.len() != want {
            return Err(bad());
        }
        Ok((ty, expire_at, b.len() - rest.len()))
    }
}

/// Appends an encoded meta value to `out` (no intermediate `Meta`).
pub(crate) fn encode_meta_into(
    out: &mut Vec<u8>,
    ty: Type,
    expire_at: Option<u64>,
    payload: &[u8],
) {
    out.push(ty.tag());
    match expire_at {
        Some(t) => {
            out.push(FLAG_EXPIRES);
            out.extend_from_slice(&t.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(payload);
}

/// The `0x01` engine key of `key`.
pub(crate) fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(NS_META);
    k.extend_from_slice(key);
    k
}

/// The prefix of all entries of `key` in namespace `ns` (2, 3 or 4).
pub(crate) fn sub_prefix(ns: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + key.len() + 16);
    k.push(ns);
    // Keys are at most 4 KiB (the engine's limit), so the length fits.
    k.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// The user key owning an element entry `k` (namespaces 2, 3, 4, 6, 7 and the element
/// namespaces of later types, 0x08 to 0x0B): the key between the length prefix and the
/// suffix. `None` for metadata, expiry entries and malformed keys.
pub(crate) fn owner_of(k: &[u8]) -> Option<&[u8]> {
    if k.first()
        .is_none_or(|&ns| ns == NS_META || ns == NS_EXPIRE || !(NS_HASH..=0x0B).contains(&ns))
    {
        return None;
    }
    let len = usize::try_from(u32::from_be_bytes(k.get(1..5)?.try_into().ok()?)).ok()?;
    k.get(5..5 + len)
}

/// `prefix + suffix`.
pub(crate) fn sub_key(ns: u8, key: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut k = sub_prefix(ns, key);
    k.extend_from_slice(suffix);
    k
}

/// The smallest key greater than every key starting with `prefix` (`None`: no bound).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// Score bits that sort like the scores (memcmp order == numeric order).
pub(crate) fn sortable_score(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score }; // -0 sorts as +0
    let bits = score.to_bits();
    let s = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    s.to_be_bytes()
}

/// Inverse of [`sortable_score`].
pub(crate) fn unsortable_score(b: [u8; 8]) -> f64 {
    let s = u64::from_be_bytes(b);
    let bits = if s >> 63 == 1 { s ^ (1 << 63) } else { !s };
    f64::from_bits(bits)
}

/// The expiry-queue key of `key` expiring at `at_ms`.
pub(crate) fn expire_key(at_ms: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + key.len());
    k.push(NS_EXPIRE);
    k.extend_from_slice(&at_ms.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Splits an expiry-queue key into (time, user key).
pub(crate) fn parse_expire_key(k: &[u8]) -> Option<(u64, &[u8])> {
    if k.first() != Some(&NS_EXPIRE) || k.len() < 9 {
        return None;
    }
    let t: [u8; 8] = k[1..9].try_into().ok()?;
    Some((u64::from_be_bytes(t), &k[9..]))
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_of_element_entries() {
        let k = sub_key(NS_HASH, b"user", b"field");
        assert_eq!(owner_of(&k), Some(&b"user"[..]));
        assert_eq!(owner_of(&sub_prefix(NS_LIST, b"")), Some(&b""[..]));
        assert_eq!(owner_of(&meta_key(b"user")), None);
        assert_eq!(owner_of(&expire_key(5, b"user")), None);
        assert_eq!(owner_of(&[NS_SET, 0, 0, 0, 9, b'x']), None);
    }

    #[test]
    fn meta_roundtrip() {
        for m in [
            Meta::string(b"hello", None),
            Meta::string(b"", Some(123)),
            Meta::collection(Type::Hash, 7, None),
            Meta::collection(Type::ZSet, 1 << 40, Some(u64::MAX)),
        ] {
            assert_eq!(Meta::decode(&m.encode()).expect("decodes"), m);
            assert_eq!(Meta::from_vec(m.encode()).expect("decodes"), m);
        }
        assert!(Meta::decode(b"").is_err());
        assert!(Meta::decode(&[9, 0]).is_err());
        assert!(Meta::decode(&[1, 0, 1, 2]).is_err());
        assert!(Meta::decode(&[0, 1, 1]).is_err());
        assert!(Meta::from_vec(vec![1, 0, 1, 2]).is_err());
    }

    #[test]
    fn scores_sort() {
        let mut v = [
            -f64::INFINITY,
            -1e300,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            3.0,
            1e300,
            f64::INFINITY,
        ];
        let enc: Vec<[u8; 8]> = v.iter().map(|s| sortable_score(*s)).collect();
        let mut sorted = enc.clone();
        sorted.sort_unstable();
        assert_eq!(enc, sorted);
        for s in &mut v {
            let back = unsortable_score(sortable_score(*s));
            assert_eq!(
                back.to_bits(),
                if *s == 0.0 { 0.0f64 } else { *s }.to_bits()
            );
        }
    }

    #[test]
    fn prefixes_do_not_overlap() {
        // "a" and "ab": the length prefix separates their field ranges.
        let a = sub_prefix(NS_HASH, b"a");
        let ab_field = sub_key(NS_HASH, b"ab", b"x");
        assert!(!ab_field.starts_with(&a));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
