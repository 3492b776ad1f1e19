//! The filter section of a slow-tier file: the Bloom filters of its tables, stored
//! after the last table so an open loads them with one read per file instead of
//! rebuilding each from a read of the whole table on its first lookup (LightKV §III-E,
//! PrismDB §4.1: the slow tier's filters live in fast memory). Drawn in formats.md
//! §13.4.
//!
//! ```text
//! crc u32 | count u32 | count × ( words u32 | words × u64 )
//! crc = crc32c(file_number_le8 ‖ bytes [4, end))
//! ```
//!
//! A table without a filter stores `words = 0`. A section that fails its checksum or
//! does not decode is ignored: the tables then build their filters lazily, as pool
//! tables loaded at open do. Pure functions; any thread.

use crate::coding::{crc32c, crc32c_extend, get_u32, get_u64, put_u32};
use crate::table::filter::Filter;

/// Encodes the filters of a file's tables, in table order.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a file holds far fewer than 2^32 tables, a filter far fewer than 2^32 words"
)]
pub(crate) fn encode<'a>(
    file_number: u64,
    filters: impl ExactSizeIterator<Item = Option<&'a Filter>>,
) -> Vec<u8> {
    let mut out = vec![0u8; 8];
    put_u32(&mut out, 4, filters.len() as u32);
    for f in filters {
        let words = f.map_or(&[][..], Filter::words);
        out.extend_from_slice(&(words.len() as u32).to_le_bytes());
        for w in words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    let crc = crc(file_number, &out[4..]);
    put_u32(&mut out, 0, crc);
    out
}

fn crc(file_number: u64, body: &[u8]) -> u32 {
    crc32c_extend(crc32c(&file_number.to_le_bytes()), body)
}

/// Decodes a section written for `tables` tables of file `file_number`; `None` if it
/// is damaged or does not match.
pub(crate) fn decode(file_number: u64, b: &[u8], tables: usize) -> Option<Vec<Option<Filter>>> {
    if get_u32(b, 0)? != crc(file_number, b.get(4..)?) || get_u32(b, 4)? as usize != tables {
        return None;
    }
    let mut p = 8;
    let mut out = Vec::with_capacity(tables);
    for _ in 0..tables {
        let n = get_u32(b, p)? as usize;
        p += 4;
        if n == 0 {
            out.push(None);
            continue;
        }
        let end = p.checked_add(n.checked_mul(8)?)?;
        let words = (p..end)
            .step_by(8)
            .map(|o| get_u64(b, o))
            .collect::<Option<Vec<_>>>()?;
        out.push(Some(Filter::from_words(words)?));
        p = end;
    }
    (p == b.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::filter::key_hash;

    #[test]
    fn sections_round_trip_and_damage_is_ignored() {
        let a = Filter::build(&[key_hash(b"a"), key_hash(b"b")]);
        let hashes: Vec<u64> = (0..500u32).map(|i| key_hash(&i.to_be_bytes())).collect();
        let b = Filter::build(&hashes);
        let enc = encode(9, [Some(&a), None, Some(&b)].into_iter());
        let dec = decode(9, &enc, 3).unwrap_or_default();
        assert_eq!(dec.len(), 3);
        assert!(dec[1].is_none());
        let b2 = dec[2].as_ref().map(Filter::words);
        assert_eq!(b2, Some(b.words()));
        assert!(hashes
            .iter()
            .all(|h| dec[2].as_ref().is_some_and(|f| f.may_contain(*h))));
        // Another file's section, a wrong count, any flipped byte: ignored.
        assert!(decode(8, &enc, 3).is_none());
        assert!(decode(9, &enc, 2).is_none());
        for i in 0..enc.len() {
            let mut bad = enc.clone();
            bad[i] ^= 1;
            assert!(decode(9, &bad, 3).is_none(), "byte {i}");
        }
    }
}
