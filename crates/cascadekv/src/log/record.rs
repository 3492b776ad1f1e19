//! Log record format (FluidKV §4.2, Fig. 8; compact entries after FlatStore §3).
//!
//! Records are 16-byte aligned; a record of at most 64 bytes never straddles a 64-byte
//! cache line (so an 8 B key + 8 B value record is 32 bytes and two share a line);
//! larger records start on a line boundary. Unused space before a line boundary is
//! filled with a `Pad` record, so every position from the segment start up to its
//! `End` record (or its tail) is a record.
//!
//! ```text
//! 0  crc32c u32     over crc32c(epoch_le) extended by bytes [4, len)
//! 4  lsn u48        per-stripe log sequence number (FluidKV Algorithm 1)
//! 10 kind_flags u8  bits 0-2 kind, bit 3 MARK, bit 4 IN_BATCH
//! 11 lens u40       bits 0-12 key_len (0..=4096), bits 13-39 value_len (< 2^27)
//! 16 [MARK only] durable_upto u32, reserved u32 (0)
//!    key, value, zero padding to a multiple of 16
//! ```
//! Seeding the checksum with the chunk epoch makes stale records of an earlier owner of
//! the same chunk fail validation. The MARK extension records how far this segment was
//! fenced when the record was written: a bad record *before* a later record's
//! `durable_upto` was once durable, so it is corruption, not a torn tail.

use crate::coding::{crc32c, crc32c_extend, get_u32, put_u32, usize_from};

/// Record header length.
pub const HEADER_LEN: usize = 16;
/// Length of the MARK extension.
pub const MARK_LEN: usize = 8;
/// Record alignment.
pub const ALIGN: u64 = 16;
/// Largest key length a record can carry.
pub const MAX_KEY_LEN: usize = 4096;
/// Largest value length a record can carry.
pub const MAX_VALUE_LEN: usize = (1 << 27) - 1;

const FLAG_MARK: u8 = 1 << 3;
const FLAG_IN_BATCH: u8 = 1 << 4;
const KIND_MASK: u8 = 0b111;

/// What a record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Set `key` to `value`.
    Put = 1,
    /// Delete `key`.
    Delete = 2,
    /// Start of an atomic batch; the value is the number of records (u32) that follow.
    BatchHeader = 3,
    /// Filler up to the next line or the end of a segment; carries no data.
    Pad = 4,
    /// The segment ends here; the log continues in the segment with the next seq.
    End = 5,
    /// Several small puts and deletes packed into one record (`packed.rs`); its value
    /// holds the entries, the LSN field the LSN they are stored relative to.
    Packed = 6,
}

impl Kind {
    fn from_bits(v: u8) -> Option<Self> {
        match v {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            3 => Some(Kind::BatchHeader),
            4 => Some(Kind::Pad),
            5 => Some(Kind::End),
            6 => Some(Kind::Packed),
            _ => None,
        }
    }
}

/// A record to append.
#[derive(Debug, Clone, Copy)]
pub struct RecordIn<'a> {
    /// Meaning.
    pub kind: Kind,
    /// Sequence number.
    pub lsn: u64,
    /// Part of a batch (follows a `BatchHeader`).
    pub in_batch: bool,
    /// Key bytes.
    pub key: &'a [u8],
    /// Value bytes (empty for deletes).
    pub value: &'a [u8],
}

/// A decoded record borrowed from the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordOut<'a> {
    /// Meaning.
    pub kind: Kind,
    /// Sequence number.
    pub lsn: u64,
    /// Part of a batch.
    pub in_batch: bool,
    /// `durable_upto` of the MARK extension, if present.
    pub mark: Option<u32>,
    /// Key bytes.
    pub key: &'a [u8],
    /// Value bytes.
    pub value: &'a [u8],
    /// Encoded length including padding (of the packed record, for an entry of one).
    pub len: u64,
    /// An entry of a packed record ([`super::reader`] hands those over one by one):
    /// its value is inline-sized and no value pointer may name its address.
    pub packed: bool,
}

/// The length of a value a record carries, as its 27-bit header field holds it. Values
/// are checked against `Options::max_value_len` (at most [`MAX_VALUE_LEN`]) before they
/// are written, and a decoded record's value is at most that long too.
#[must_use]
#[expect(
    clippy::cast_possible_truncation,
    reason = "record values are shorter than MAX_VALUE_LEN < 2^27"
)]
pub fn value_len(value: &[u8]) -> u32 {
    debug_assert!(value.len() <= MAX_VALUE_LEN);
    value.len() as u32
}

/// Encoded length (with padding) of a record.
pub fn encoded_len(key_len: usize, value_len: usize, mark: bool) -> u64 {
    let raw = HEADER_LEN + if mark { MARK_LEN } else { 0 } + key_len + value_len;
    (raw as u64).div_ceil(ALIGN) * ALIGN
}

/// Offset within the segment at which a record of `len` bytes goes when the tail is
/// at `pos`: small records stay inside one line, larger ones start a line.
pub fn placement(pos: u64, len: u64) -> u64 {
    let in_line = pos % 64;
    if in_line == 0 || (len <= 64 && in_line + len <= 64) {
        pos
    } else {
        pos + (64 - in_line)
    }
}

/// Encodes a record into `out` (cleared first). `mark` adds the MARK extension.
pub fn encode(rec: &RecordIn<'_>, mark: Option<u32>, epoch: u64, out: &mut Vec<u8>) {
    let len = usize_from(encoded_len(rec.key.len(), rec.value.len(), mark.is_some()));
    out.clear();
    out.resize(len, 0);
    let lsn = rec.lsn & ((1 << 48) - 1);
    out[4..10].copy_from_slice(&lsn.to_le_bytes()[..6]);
    let mut kf = rec.kind as u8;
    if mark.is_some() {
        kf |= FLAG_MARK;
    }
    if rec.in_batch {
        kf |= FLAG_IN_BATCH;
    }
    out[10] = kf;
    let lens = (rec.key.len() as u64) | ((rec.value.len() as u64) << 13);
    out[11..16].copy_from_slice(&lens.to_le_bytes()[..5]);
    let mut p = HEADER_LEN;
    if let Some(m) = mark {
        put_u32(out, p, m);
        p += MARK_LEN;
    }
    out[p..p + rec.key.len()].copy_from_slice(rec.key);
    p += rec.key.len();
    out[p..p + rec.value.len()].copy_from_slice(rec.value);
    let crc = crc32c_extend(crc32c(&epoch.to_le_bytes()), &out[4..]);
    put_u32(out, 0, crc);
}

/// Encodes a filler record of exactly `len` bytes (`len` a multiple of 16, ≥ 16).
pub fn encode_filler(kind: Kind, len: u64, epoch: u64, out: &mut Vec<u8>) {
    let value_len = usize_from(len) - HEADER_LEN;
    out.clear();
    out.resize(HEADER_LEN, 0);
    out[10] = kind as u8;
    let lens = (value_len as u64) << 13;
    out[11..16].copy_from_slice(&lens.to_le_bytes()[..5]);
    // The filler's value bytes are not written (they may hold anything); the checksum
    // covers the header only, which is all a reader needs to skip it.
    let crc = crc32c_extend(crc32c(&epoch.to_le_bytes()), &out[4..HEADER_LEN]);
    put_u32(out, 0, crc);
}

/// Length of a seal: an `End` record with the MARK extension.
pub const SEAL_LEN: u64 = 32;

/// Encodes a *seal* into `out`: an `End` record whose MARK says the segment was durable
/// up to `durable_upto` (its own offset). A clean close seals every log after making it
/// durable, so a damaged record before the seal is corruption, never the log's end.
///
/// ```text
/// 0  crc32c u32     over crc32c(epoch_le) extended by bytes [4, 32)
/// 4  lsn u48 = 0
/// 10 kind_flags u8  = End | MARK
/// 11 lens u40       key_len 0, value_len 16
/// 16 durable_upto u32, reserved u32 (0), reserved u64 (0)
/// ```
pub fn encode_seal(durable_upto: u32, epoch: u64, out: &mut Vec<u8>) {
    encode_marker(Kind::End, durable_upto, epoch, out);
}

/// Encodes a *mark*: the same 32 bytes as a seal but of kind `Pad`, so the log goes on
/// after it. A writer appends one right after each fence (formats.md §5.3): it is the
/// durable evidence that everything before `durable_upto` was acknowledged durable,
/// even when no later record follows (the last `Sync` write before a crash).
pub fn encode_mark(durable_upto: u32, epoch: u64, out: &mut Vec<u8>) {
    encode_marker(Kind::Pad, durable_upto, epoch, out);
}

fn encode_marker(kind: Kind, durable_upto: u32, epoch: u64, out: &mut Vec<u8>) {
    out.clear();
    out.resize(usize_from(SEAL_LEN), 0);
    out[10] = kind as u8 | FLAG_MARK;
    let lens = (SEAL_LEN - HEADER_LEN as u64) << 13;
    out[11..16].copy_from_slice(&lens.to_le_bytes()[..5]);
    put_u32(out, HEADER_LEN, durable_upto);
    let crc = crc32c_extend(crc32c(&epoch.to_le_bytes()), &out[4..]);
    put_u32(out, 0, crc);
}

/// Decodes a seal or a mark (see [`encode_seal`]); every reserved byte must be zero.
#[expect(
    clippy::too_many_arguments,
    reason = "the header fields decode() already parsed"
)]
fn decode_seal(
    kind: Kind,
    buf: &[u8],
    kf: u8,
    key_len: usize,
    value_len: usize,
    lsn: u64,
    seed: u32,
    stored: u32,
) -> Result<RecordOut<'_>, Invalid> {
    let len = usize_from(SEAL_LEN);
    if key_len != 0
        || kf & FLAG_IN_BATCH != 0
        || value_len != len - HEADER_LEN
        || lsn != 0
        || buf.len() < len
    {
        return Err(Invalid::BadHeader);
    }
    let body = &buf[..len];
    let actual = crc32c_extend(seed, &body[4..]);
    if actual != stored {
        return Err(Invalid::Checksum { stored, actual });
    }
    if body[HEADER_LEN + 4..].iter().any(|&b| b != 0) {
        return Err(Invalid::BadHeader);
    }
    Ok(RecordOut {
        kind,
        lsn: 0,
        in_batch: false,
        mark: get_u32(body, HEADER_LEN),
        key: &[],
        value: &[],
        len: SEAL_LEN,
        packed: false,
    })
}

/// `(key_len, value_len)` from the 40-bit lengths field at offset 11 of a header.
fn header_lens(buf: &[u8]) -> Option<(usize, usize)> {
    let mut b = [0u8; 8];
    b[..5].copy_from_slice(buf.get(11..16)?);
    let lens = u64::from_le_bytes(b);
    Some((usize_from(lens & 0x1FFF), usize_from(lens >> 13)))
}

/// The key a record's header points at when the header's lengths are plausible — for
/// naming the key of a damaged record. Unverified: the damage may be in the key.
pub fn probable_key(buf: &[u8]) -> Option<&[u8]> {
    if buf.len() < HEADER_LEN {
        return None;
    }
    let kf = buf[10];
    if !matches!(
        Kind::from_bits(kf & KIND_MASK),
        Some(Kind::Put | Kind::Delete)
    ) {
        return None;
    }
    let (key_len, _) = header_lens(buf)?;
    let start = HEADER_LEN + if kf & FLAG_MARK != 0 { MARK_LEN } else { 0 };
    if key_len == 0 || key_len > MAX_KEY_LEN {
        return None;
    }
    buf.get(start..start + key_len)
}

/// Largest damaged record [`correct_one_bit`] tries to correct (bits tried × bytes
/// checksummed grows with the square of the length).
const CORRECT_MAX: usize = 8 << 10;

/// Finds the one flipped bit that makes the damaged record at the start of `buf` valid
/// again, and returns the corrected record's key (empty for a record without one).
/// CRC-32C detects every 1- to 3-bit error at these lengths, so a single-bit
/// correction that validates is the record as written: the key it names is certain.
/// Used only to *name* what was lost (verify, repair); replay never corrects. `None`
/// for a packed record (its keys are many).
#[must_use]
pub fn correct_one_bit(buf: &[u8], epoch: u64) -> Option<Vec<u8>> {
    let (key_len, value_len) = header_lens(buf)?;
    let guess = encoded_len(key_len, value_len, true);
    let span = usize_from(guess)
        .clamp(HEADER_LEN, CORRECT_MAX)
        .min(buf.len());
    // Room past the guessed length, in case the flip shortened it.
    let window = buf.len().min(CORRECT_MAX + 64);
    if span > window {
        return None;
    }
    let mut scratch = buf[..window].to_vec();
    for i in 0..span * 8 {
        scratch[i / 8] ^= 1 << (i % 8);
        if let Ok(r) = decode(&scratch, epoch) {
            if usize_from(r.len) > i / 8 {
                // A packed record held many keys, which one key cannot name: reported
                // as unknown keys (repair then flags what it kept from older sources).
                return (r.kind != Kind::Packed).then(|| r.key.to_vec());
            }
        }
        scratch[i / 8] ^= 1 << (i % 8);
    }
    None
}

/// Why a position does not hold a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Fewer than 16 bytes remain.
    Short,
    /// Header fields are impossible (kind, lengths, overrun).
    BadHeader,
    /// Checksum mismatch.
    Checksum {
        /// Stored value.
        stored: u32,
        /// Computed value.
        actual: u32,
    },
}

/// Decodes the record at the start of `buf` (the rest of the segment).
///
/// # Errors
/// [`Invalid`] says why the bytes are not a valid record for `epoch`.
pub fn decode(buf: &[u8], epoch: u64) -> Result<RecordOut<'_>, Invalid> {
    if buf.len() < HEADER_LEN {
        return Err(Invalid::Short);
    }
    let stored = get_u32(buf, 0).ok_or(Invalid::Short)?;
    let mut lsn_b = [0u8; 8];
    lsn_b[..6].copy_from_slice(&buf[4..10]);
    let lsn = u64::from_le_bytes(lsn_b);
    let kf = buf[10];
    let kind = Kind::from_bits(kf & KIND_MASK).ok_or(Invalid::BadHeader)?;
    if kf & !(KIND_MASK | FLAG_MARK | FLAG_IN_BATCH) != 0 {
        return Err(Invalid::BadHeader);
    }
    let (key_len, value_len) = header_lens(buf).ok_or(Invalid::Short)?;
    if key_len > MAX_KEY_LEN {
        return Err(Invalid::BadHeader);
    }
    let seed = crc32c(&epoch.to_le_bytes());
    if matches!(kind, Kind::End | Kind::Pad) && kf & FLAG_MARK != 0 {
        return decode_seal(kind, buf, kf, key_len, value_len, lsn, seed, stored);
    }
    if matches!(kind, Kind::Pad | Kind::End) {
        if key_len != 0 || kf & (FLAG_MARK | FLAG_IN_BATCH) != 0 {
            return Err(Invalid::BadHeader);
        }
        let len = (HEADER_LEN + value_len) as u64;
        if !len.is_multiple_of(ALIGN) || len > buf.len() as u64 {
            return Err(Invalid::BadHeader);
        }
        let actual = crc32c_extend(seed, &buf[4..HEADER_LEN]);
        if actual != stored {
            return Err(Invalid::Checksum { stored, actual });
        }
        return Ok(RecordOut {
            kind,
            lsn,
            in_batch: false,
            mark: None,
            key: &[],
            value: &[],
            len,
            packed: false,
        });
    }
    let has_mark = kf & FLAG_MARK != 0;
    let len = encoded_len(key_len, value_len, has_mark);
    if len > buf.len() as u64 {
        return Err(Invalid::BadHeader);
    }
    let body = &buf[..usize_from(len)];
    let actual = crc32c_extend(seed, &body[4..]);
    if actual != stored {
        return Err(Invalid::Checksum { stored, actual });
    }
    let mut p = HEADER_LEN;
    let mark = if has_mark {
        let m = get_u32(body, p).ok_or(Invalid::BadHeader)?;
        if get_u32(body, p + 4) != Some(0) {
            return Err(Invalid::BadHeader);
        }
        p += MARK_LEN;
        Some(m)
    } else {
        None
    };
    let key = &body[p..p + key_len];
    let value = &body[p + key_len..p + key_len + value_len];
    if kind == Kind::BatchHeader && (value_len != 4 || key_len != 0) {
        return Err(Invalid::BadHeader);
    }
    if matches!(kind, Kind::Put | Kind::Delete) && key_len == 0 {
        return Err(Invalid::BadHeader);
    }
    if kind == Kind::Packed
        && (key_len != 0 || kf & FLAG_IN_BATCH != 0 || !super::packed::valid(value, lsn))
    {
        return Err(Invalid::BadHeader);
    }
    Ok(RecordOut {
        kind,
        lsn,
        in_batch: kf & FLAG_IN_BATCH != 0,
        mark,
        key,
        value,
        len,
        packed: false,
    })
}

/// The batch size carried by a `BatchHeader` record.
pub fn batch_count(rec: &RecordOut<'_>) -> u32 {
    get_u32(rec.value, 0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_records_pack_two_per_line() {
        assert_eq!(encoded_len(8, 8, false), 32);
        assert_eq!(placement(32, 32), 32);
        assert_eq!(placement(48, 32), 64);
        assert_eq!(placement(16, 80), 64);
        assert_eq!(encoded_len(8, 8, true), 48);
    }

    #[test]
    fn stale_epoch_and_every_flip_fail() {
        let mut buf = Vec::new();
        let rec = RecordIn {
            kind: Kind::Put,
            lsn: 77,
            in_batch: true,
            key: b"key",
            value: b"value",
        };
        encode(&rec, Some(96), 5, &mut buf);
        let out = decode(&buf, 5).map_err(|e| format!("{e:?}"));
        assert_eq!(
            out.map(|r| (r.key, r.value, r.lsn, r.mark, r.in_batch)),
            Ok((&b"key"[..], &b"value"[..], 77, Some(96), true))
        );
        assert!(decode(&buf, 6).is_err(), "other epoch must not validate");
        let used = HEADER_LEN + MARK_LEN + 3 + 5;
        for bit in 0..used * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, 5).is_err(), "flip of bit {bit} accepted");
        }
        assert_eq!(decode(&[0u8; 64], 5).map(|r| r.len).ok(), None);
    }

    #[test]
    fn fillers_round_trip() {
        let mut buf = Vec::new();
        encode_filler(Kind::Pad, 48, 3, &mut buf);
        buf.resize(48, 0xEE);
        let r = decode(&buf, 3).map_err(|e| format!("{e:?}"));
        assert_eq!(r.map(|r| (r.kind, r.len)), Ok((Kind::Pad, 48)));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), epoch in any::<u64>()) {
            let _ = decode(&bytes, epoch);
        }

        #[test]
        fn encode_decode_round_trip(key in proptest::collection::vec(any::<u8>(), 1..100),
                                    value in proptest::collection::vec(any::<u8>(), 0..300),
                                    lsn in 0u64..(1 << 48), mark in proptest::option::of(any::<u32>())) {
            let mut buf = Vec::new();
            encode(&RecordIn { kind: Kind::Put, lsn, in_batch: false, key: &key, value: &value }, mark, 9, &mut buf);
            let r = decode(&buf, 9);
            prop_assert!(r.is_ok());
            if let Ok(r) = r {
                prop_assert_eq!(r.key, &key[..]);
                prop_assert_eq!(r.value, &value[..]);
                prop_assert_eq!(r.lsn, lsn);
                prop_assert_eq!(r.mark, mark);
                prop_assert_eq!(usize_from(r.len), buf.len());
            }
        }
    }
}

#[cfg(test)]
mod correction_tests {
    use super::*;

    #[test]
    fn one_flipped_bit_anywhere_in_a_record_names_its_key() {
        for (klen, vlen, mark) in [(2usize, 600usize, false), (8, 8, true), (30, 1500, false)] {
            let key: Vec<u8> = (0..klen)
                .map(|i| b"abcdefghijklmnopqrstuvwxyz"[i % 26])
                .collect();
            let value = vec![b'x'; vlen];
            let rec = RecordIn {
                kind: Kind::Put,
                lsn: 7,
                in_batch: false,
                key: &key,
                value: &value,
            };
            let mut buf = Vec::new();
            encode(&rec, mark.then_some(64), 42, &mut buf);
            let len = buf.len();
            buf.resize(len + 256, 0);
            for i in (0..len * 8).step_by(13) {
                let mut b = buf.clone();
                b[i / 8] ^= 1 << (i % 8);
                assert!(decode(&b, 42).is_err(), "bit {i} undetected");
                assert_eq!(
                    correct_one_bit(&b, 42).as_deref(),
                    Some(&key[..]),
                    "bit {i} of a {len}-byte record"
                );
            }
        }
    }
}
