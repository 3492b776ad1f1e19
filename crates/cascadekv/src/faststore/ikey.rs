//! Keys as the FastStore index stores them: the first 8 bytes as a big-endian `u64`
//! *prefix* kept inline, the rest (if any) on the heap.
//!
//! Comparing two keys compares prefixes as integers first, so most comparisons — all
//! of them for keys of up to 8 bytes — touch no memory outside the node being searched
//! (the same idea as Masstree's 8-byte key slices, FluidKV §5.1).
//!
//! Order: `(prefix, tail, len)` lexicographically equals byte-string order. With equal
//! zero-padded prefixes, a key of at most 8 bytes is a prefix of any longer key (its
//! padding equals the longer key's bytes), so empty tails sort first and the length
//! breaks the tie between short keys.

use std::cmp::Ordering;
use std::ops::Bound;

/// An owned key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IKey {
    pre: u64,
    len: u32,
    tail: Option<Box<[u8]>>,
}

/// A borrowed key prepared for comparisons.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// Big-endian first 8 bytes, zero-padded.
    pub pre: u64,
    len: u32,
    tail: &'a [u8],
    /// The whole key.
    pub key: &'a [u8],
}

/// Big-endian `u64` of `k[off..off + 8]`, zero-padded.
pub fn slice_at(k: &[u8], off: usize) -> u64 {
    prefix(k.get(off..).unwrap_or(&[]))
}

fn prefix(k: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = k.len().min(8);
    b[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(b)
}

impl<'a> Probe<'a> {
    /// Prepares `k`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "keys are at most MAX_KEY_LEN (4 KiB) long"
    )]
    pub fn new(k: &'a [u8]) -> Self {
        Probe {
            pre: prefix(k),
            len: k.len() as u32,
            tail: k.get(8..).unwrap_or(&[]),
            key: k,
        }
    }
}

impl IKey {
    /// Copies `k`.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "keys are at most MAX_KEY_LEN (4 KiB) long"
    )]
    pub fn new(k: &[u8]) -> Self {
        IKey {
            pre: prefix(k),
            len: k.len() as u32,
            tail: (k.len() > 8).then(|| k[8..].into()),
        }
    }

    /// The inline prefix.
    pub fn pre(&self) -> u64 {
        self.pre
    }

    fn tail(&self) -> &[u8] {
        self.tail.as_deref().unwrap_or(&[])
    }

    /// Orders `self` against a probe.
    pub fn cmp_probe(&self, p: &Probe<'_>) -> Ordering {
        self.pre
            .cmp(&p.pre)
            .then_with(|| self.tail().cmp(p.tail))
            .then(self.len.cmp(&p.len))
    }

    /// Orders two keys.
    pub fn cmp_key(&self, o: &IKey) -> Ordering {
        self.pre
            .cmp(&o.pre)
            .then_with(|| self.tail().cmp(o.tail()))
            .then(self.len.cmp(&o.len))
    }

    /// The key's bytes.
    pub fn to_boxed(&self) -> Box<[u8]> {
        let mut v = Vec::with_capacity(self.len as usize);
        self.write_to(&mut v);
        v.into_boxed_slice()
    }

    /// Replaces the contents of `out` with the key's bytes (no allocation once `out`
    /// is large enough).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.clear();
        let n = (self.len as usize).min(8);
        out.extend_from_slice(&self.pre.to_be_bytes()[..n]);
        out.extend_from_slice(self.tail());
    }

    /// Byte `i` of the key (`i < len`).
    fn byte(&self, i: usize) -> u8 {
        if i < 8 {
            self.pre.to_be_bytes()[i]
        } else {
            self.tail().get(i - 8).copied().unwrap_or(0)
        }
    }

    /// Key length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for the empty key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Big-endian `u64` of bytes `[off, off + 8)`, zero-padded.
    pub fn slice_at(&self, off: usize) -> u64 {
        if off == 0 {
            return self.pre;
        }
        let mut b = [0u8; 8];
        for (j, x) in b.iter_mut().enumerate() {
            if off + j < self.len as usize {
                *x = self.byte(off + j);
            }
        }
        u64::from_be_bytes(b)
    }

    /// Length of the common prefix with `k`, at most `max`.
    pub fn common_prefix(&self, k: &[u8], max: usize) -> usize {
        let n = max.min(k.len()).min(self.len as usize);
        (0..n).find(|&i| self.byte(i) != k[i]).unwrap_or(n)
    }

    /// Length of the common prefix with `o` (no allocation).
    pub fn common_prefix_key(&self, o: &IKey) -> usize {
        let n = self.len.min(o.len) as usize;
        if self.pre != o.pre {
            // The first differing byte of the big-endian prefixes (both zero-padded).
            let same = (self.pre ^ o.pre).leading_zeros() as usize / 8;
            return same.min(n);
        }
        (8..n).find(|&i| self.byte(i) != o.byte(i)).unwrap_or(n)
    }

    /// Writes the first `n` bytes (`n <= len`) into `out`.
    pub fn copy_prefix(&self, out: &mut [u8]) {
        for (i, x) in out.iter_mut().enumerate().take(self.len as usize) {
            *x = self.byte(i);
        }
    }

    /// Heap bytes beyond the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.tail.as_ref().map_or(0, |t| t.len().div_ceil(16) * 16)
    }
}

// Range bounds against keys, shared by the ordered indexes' scans.

/// True if `k` lies above the upper bound `hi`.
pub(crate) fn past_hi(k: &IKey, hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Unbounded => false,
        Bound::Included(h) => k.cmp_probe(&Probe::new(h)) == Ordering::Greater,
        Bound::Excluded(h) => k.cmp_probe(&Probe::new(h)) != Ordering::Less,
    }
}

/// True if `k` lies below the lower bound `lo`.
pub(crate) fn below_lo(k: &IKey, lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Unbounded => false,
        Bound::Included(l) => k.cmp_probe(&Probe::new(l)) == Ordering::Less,
        Bound::Excluded(l) => k.cmp_probe(&Probe::new(l)) != Ordering::Greater,
    }
}

/// True if a leaf whose keys are all `>= low` already covers everything down to `lo`.
pub(crate) fn low_reaches(low: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Unbounded => false,
        Bound::Included(l) | Bound::Excluded(l) => low <= l,
    }
}

/// True when no key can lie between `lo` and `hi`.
pub(crate) fn bounds_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn order_matches_byte_order(a in proptest::collection::vec(any::<u8>(), 0..20),
                                    b in proptest::collection::vec(any::<u8>(), 0..20)) {
            let (ka, kb) = (IKey::new(&a), IKey::new(&b));
            prop_assert_eq!(ka.cmp_key(&kb), a.cmp(&b));
            prop_assert_eq!(ka.cmp_probe(&Probe::new(&b)), a.cmp(&b));
            prop_assert_eq!(&*ka.to_boxed(), &a[..]);
            let mut out = b"left over".to_vec();
            kb.write_to(&mut out);
            prop_assert_eq!(&out[..], &b[..]);
        }
    }

    #[test]
    fn slices_and_common_prefixes() {
        let k = IKey::new(b"user0000000000001234");
        assert_eq!(k.slice_at(0), slice_at(b"user0000000000001234", 0));
        assert_eq!(k.slice_at(12), slice_at(b"user0000000000001234", 12));
        assert_eq!(k.slice_at(30), 0);
        assert_eq!(k.common_prefix(b"user0000000000009999", 32), 16);
        assert_eq!(k.common_prefix(b"us", 32), 2);
        assert_eq!(k.common_prefix(b"user0000000000001234", 4), 4);
        for o in [
            &b"user0000000000009999"[..],
            b"us",
            b"user",
            b"user0000",
            b"x",
            b"",
        ] {
            assert_eq!(
                k.common_prefix_key(&IKey::new(o)),
                k.common_prefix(o, usize::MAX),
                "{o:?}"
            );
        }
        let mut out = [0u8; 6];
        k.copy_prefix(&mut out);
        assert_eq!(&out, b"user00");
    }

    #[test]
    fn zero_padding_edge_cases() {
        let cases: [&[u8]; 6] = [
            b"",
            b"\0",
            b"ab",
            b"ab\0",
            b"ab\0\0\0\0\0\0",
            b"ab\0\0\0\0\0\0\0",
        ];
        for a in cases {
            for b in cases {
                assert_eq!(
                    IKey::new(a).cmp_key(&IKey::new(b)),
                    a.cmp(b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}
