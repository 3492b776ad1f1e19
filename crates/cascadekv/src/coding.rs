//! Little-endian fixed-width encoding helpers and the checksum used on media.
//!
//! Decoders return `None` instead of panicking when the input is too short, so every
//! caller turns a short buffer into a corruption error of its own.

/// CRC-32C (Castagnoli), hardware-accelerated where the CPU has it.
#[must_use]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends a running CRC-32C with more bytes.
#[must_use]
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// Reads a `u16` at `off`.
pub fn get_u16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

/// Reads a `u32` at `off`.
pub fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Reads a `u64` at `off`.
pub fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// Writes a `u16` at `off` (the buffer must be large enough).
pub fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

/// Writes a `u32` at `off` (the buffer must be large enough).
pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Writes a `u64` at `off` (the buffer must be large enough).
pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// `v` as a `usize`. CascadeKV addresses its pool with 64-bit offsets and builds only
/// for 64-bit targets (`lib.rs`), where this conversion is exact.
#[inline]
#[must_use]
#[expect(
    clippy::cast_possible_truncation,
    reason = "64-bit targets only (compile_error in lib.rs): usize holds every u64"
)]
pub(crate) const fn usize_from(v: u64) -> usize {
    v as usize
}

/// `a / b` as a float, 0 when `b` is 0 (for statistics and policy decisions).
#[must_use]
#[expect(
    clippy::cast_precision_loss,
    reason = "ratios of byte or chunk counts: 52 bits of precision are plenty"
)]
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Microseconds of `d`, saturating (for counters and statistics).
#[must_use]
pub(crate) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A 64-bit hash of a key (FNV-1a folded through a multiply), used to pick LSN stripes
/// and log slots. Stable across runs: nothing persistent depends on it, but tests do.
pub fn hash64(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_short_reads() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0, 0xBEEF);
        put_u32(&mut b, 2, 0xDEAD_BEEF);
        put_u64(&mut b, 8, u64::MAX - 1);
        assert_eq!(get_u16(&b, 0), Some(0xBEEF));
        assert_eq!(get_u32(&b, 2), Some(0xDEAD_BEEF));
        assert_eq!(get_u64(&b, 8), Some(u64::MAX - 1));
        assert_eq!(get_u64(&b, 9), None);
        assert_eq!(get_u32(&b, usize::MAX), None);
    }

    #[test]
    fn crc_matches_known_vector() {
        // RFC 3720 test vector: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c_extend(crc32c(b"ab"), b"cd"), crc32c(b"abcd"));
    }
}

/// Appends `v` as a LEB128 varint (1 byte below 128).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v.to_le_bytes()[0] | 0x80);
        v >>= 7;
    }
    out.push(v.to_le_bytes()[0]);
}

/// Reads a varint at `*pos`, advancing it; `None` if truncated or longer than 10 bytes.
pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Bytes `put_varint` uses for `v`.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod varint_tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_garbage() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            let mut p = 0;
            assert_eq!(get_varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        let mut p = 0;
        assert_eq!(get_varint(&[0x80; 11], &mut p), None);
        let mut p = 0;
        assert_eq!(get_varint(&[0x80], &mut p), None);
    }
}
