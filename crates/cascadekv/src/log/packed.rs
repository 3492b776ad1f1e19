//! Packed records: many small puts and deletes in one checksummed log record — the
//! compacted log entries of FlatStore §3.2, adapted to a log whose records are
//! checksummed (formats.md §5.4).
//!
//! FlatStore shrinks a small put to a 16 B entry (op, version, key, pointer or inline
//! value) and trusts persistent memory's 8-byte atomic stores and the batch's flush.
//! This log checksums every record: the end-of-log evidence rules (`reader.rs`) and
//! the bit-flip guarantees rest on that. So the entries of a group are packed *inside*
//! one record whose single CRC covers them all; the 16 B record header and the 16 B
//! alignment are paid once per group instead of once per put. An 8 B key + 8 B value
//! entry takes 20–21 bytes instead of a 32-byte record.
//!
//! ```text
//! value of a Kind::Packed record (key_len 0, never IN_BATCH), entry after entry:
//!   op u8            1 put, 2 delete
//!   lsn_delta        varint of zigzag(lsn - record lsn)
//!   key_len          varint, 1..=4096
//!   value_len        varint, puts only
//!   key, value
//! ```
//!
//! Invariants: a packed record is written only when every value in it is at most the
//! inline threshold (the FastStore keeps those values in DRAM, so no value pointer ever
//! points into a packed record; recovery keeps them inline whatever the threshold is
//! then), holds at least two entries (one entry is smaller as a plain record) and at
//! most [`PACKED_MAX`] bytes. It is atomic: [`super::record::decode`] validates every
//! entry, so the record is all there or not there at all.
//!
//! Pure functions; any thread.

#[cfg(test)]
use crate::coding::varint_len;
use crate::coding::{get_varint, put_varint, usize_from};

use super::record::MAX_KEY_LEN;

/// Largest packed value a writer builds (a group larger than this becomes several
/// records, each request whole in one of them).
pub const PACKED_MAX: usize = 64 << 10;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// One entry of a packed record, borrowed from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Sequence number.
    pub lsn: u64,
    /// Key bytes (non-empty).
    pub key: &'a [u8],
    /// `Some(value)` for a put, `None` for a delete.
    pub value: Option<&'a [u8]>,
}

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)).cast_unsigned()
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1).cast_signed() ^ -((v & 1).cast_signed())
}

fn delta(lsn: u64, base: u64) -> u64 {
    zigzag(lsn.wrapping_sub(base).cast_signed())
}

/// Encoded length of one entry.
#[cfg(test)]
fn entry_len(lsn: u64, base: u64, key: &[u8], value: Option<&[u8]>) -> usize {
    1 + varint_len(delta(lsn, base))
        + varint_len(key.len() as u64)
        + value.map_or(0, |v| varint_len(v.len() as u64) + v.len())
        + key.len()
}

/// Appends one entry to `out`; `base` is the LSN the record's header carries.
pub fn push(out: &mut Vec<u8>, lsn: u64, base: u64, key: &[u8], value: Option<&[u8]>) {
    out.push(if value.is_some() { OP_PUT } else { OP_DELETE });
    put_varint(out, delta(lsn, base));
    put_varint(out, key.len() as u64);
    if let Some(v) = value {
        put_varint(out, v.len() as u64);
    }
    out.extend_from_slice(key);
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
}

/// Iterates the entries of a packed value; yields `None` once at the first malformed
/// entry (and stops). `base` is the record's LSN.
pub fn entries(packed: &[u8], base: u64) -> Entries<'_> {
    Entries {
        b: packed,
        pos: 0,
        base,
        failed: false,
    }
}

/// Iterator of [`entries`].
#[derive(Debug)]
pub struct Entries<'a> {
    b: &'a [u8],
    pos: usize,
    base: u64,
    failed: bool,
}

impl<'a> Entries<'a> {
    fn next_entry(&mut self) -> Option<Entry<'a>> {
        let op = *self.b.get(self.pos)?;
        self.pos += 1;
        let d = get_varint(self.b, &mut self.pos)?;
        let lsn = self.base.wrapping_add(unzigzag(d).cast_unsigned());
        if lsn >= 1 << 48 {
            return None;
        }
        let key_len = usize_from(get_varint(self.b, &mut self.pos)?);
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return None;
        }
        let value_len = match op {
            OP_PUT => Some(usize_from(get_varint(self.b, &mut self.pos)?)),
            OP_DELETE => None,
            _ => return None,
        };
        let key = self.b.get(self.pos..self.pos.checked_add(key_len)?)?;
        self.pos += key_len;
        let value = match value_len {
            Some(n) => {
                let v = self.b.get(self.pos..self.pos.checked_add(n)?)?;
                self.pos += n;
                Some(v)
            }
            None => None,
        };
        Some(Entry { lsn, key, value })
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Option<Entry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.b.len() {
            return None;
        }
        let e = self.next_entry();
        self.failed = e.is_none();
        Some(e)
    }
}

/// Whether `packed` is a well-formed packed value of at least two entries.
#[must_use]
pub fn valid(packed: &[u8], base: u64) -> bool {
    let mut n = 0usize;
    for e in entries(packed, base) {
        if e.is_none() {
            return false;
        }
        n += 1;
    }
    n >= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_pair_is_about_twenty_bytes() {
        let mut out = Vec::new();
        push(&mut out, 1000, 990, b"key00001", Some(b"value001"));
        assert_eq!(out.len(), 20);
        assert_eq!(entry_len(1000, 990, b"key00001", Some(b"value001")), 20);
        push(&mut out, 980, 990, b"key00002", None);
        assert_eq!(out.len(), 20 + 11);
        let got: Vec<_> = entries(&out, 990).collect();
        assert_eq!(
            got,
            vec![
                Some(Entry {
                    lsn: 1000,
                    key: b"key00001",
                    value: Some(b"value001")
                }),
                Some(Entry {
                    lsn: 980,
                    key: b"key00002",
                    value: None
                }),
            ]
        );
        assert!(valid(&out, 990));
        assert!(!valid(&out[..20], 990), "one entry is not a packed record");
        assert!(
            !valid(&out[..out.len() - 1], 990),
            "a cut entry is malformed"
        );
    }

    #[test]
    fn malformed_entries_are_refused() {
        let mut out = Vec::new();
        push(&mut out, 5, 5, b"k", Some(b"v"));
        push(&mut out, 6, 5, b"k2", Some(b"v2"));
        let mut bad_op = out.clone();
        bad_op[0] = 3;
        assert!(!valid(&bad_op, 5));
        let mut empty_key = out.clone();
        empty_key[2] = 0;
        assert!(!valid(&empty_key, 5));
        // An LSN below zero or past 48 bits.
        let mut neg = Vec::new();
        push(&mut neg, 0, 5, b"k", None);
        push(&mut neg, 5, 5, b"k", None);
        assert!(!valid(&neg, 3));
    }

    proptest! {
        #[test]
        fn round_trip(
            base in 0u64..1 << 40,
            ops in proptest::collection::vec(
                (0u64..1 << 20, proptest::collection::vec(any::<u8>(), 1..40),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300))),
                2..20)
        ) {
            let mut out = Vec::new();
            let mut want = 0;
            for (d, k, v) in &ops {
                let lsn = base + d;
                want += entry_len(lsn, base, k, v.as_deref());
                push(&mut out, lsn, base, k, v.as_deref());
            }
            prop_assert_eq!(out.len(), want);
            prop_assert!(valid(&out, base));
            for (e, (d, k, v)) in entries(&out, base).zip(&ops) {
                let Some(e) = e else {
                    return Err(TestCaseError::fail("entry did not parse"));
                };
                prop_assert_eq!(e.lsn, base + d);
                prop_assert_eq!(e.key, k.as_slice());
                prop_assert_eq!(e.value, v.as_deref());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = valid(&b, 7);
            for e in entries(&b, 7) {
                let _ = e;
            }
        }
    }
}
