//! Integers of 1 to 64 bits at any bit offset of a string, as Redis's BITFIELD reads
//! and writes them: bit 0 is the most significant bit of byte 0 (SETBIT's order),
//! signed values in two's complement, and Redis's overflow rules (WRAP, SAT, FAIL)
//! for SET and INCRBY. Also BITPOS's scan for the first 0 or 1 bit. Pure functions;
//! any thread. Reads past the end of the buffer see zero bits; callers grow the
//! buffer before a write.

/// What to do when a value does not fit its field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Modulo arithmetic (the default).
    Wrap,
    /// Clamp to the field's min or max.
    Sat,
    /// Leave the field unchanged and answer nil.
    Fail,
}

/// An unsigned `bits`-bit field at bit `offset`.
pub(crate) fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    let mut value = 0u64;
    for j in 0..u64::from(bits) {
        let o = offset + j;
        let byte = usize::try_from(o >> 3).unwrap_or(usize::MAX);
        let b = p.get(byte).copied().unwrap_or(0);
        let bit = (b >> (7 - (o & 7))) & 1;
        value = (value << 1) | u64::from(bit);
    }
    value
}

/// A signed `bits`-bit field at bit `offset`.
pub(crate) fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(p, offset, bits);
    let v = i64::from_ne_bytes(u.to_ne_bytes());
    if bits < 64 && u & (1u64 << (bits - 1)) != 0 {
        v | (-1i64 << bits)
    } else {
        v
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` (the buffer is long enough).
pub(crate) fn set_unsigned(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let bitval = u8::from(value & (1u64 << (u64::from(bits) - 1 - j)) != 0);
        let o = offset + j;
        let Some(b) = usize::try_from(o >> 3).ok().and_then(|i| p.get_mut(i)) else {
            return;
        };
        let shift = 7 - (o & 7);
        *b = (*b & !(1u8 << shift)) | (bitval << shift);
    }
}

/// Writes a signed value (two's complement, low `bits` bits).
pub(crate) fn set_signed(p: &mut [u8], offset: u64, bits: u32, value: i64) {
    set_unsigned(p, offset, bits, u64::from_ne_bytes(value.to_ne_bytes()));
}

/// Redis's `checkUnsignedBitfieldOverflow`: `None` when `value + incr` fits `bits`
/// bits, else the value to store under `ow` (for FAIL: anything; the caller skips).
pub(crate) fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let as_i = |u: u64| i64::from_ne_bytes(u.to_ne_bytes());
    let maxincr = as_i(max.wrapping_sub(value));
    let minincr = as_i(value.wrapping_neg());
    let wrap = || {
        let res = value.wrapping_add(u64::from_ne_bytes(incr.to_ne_bytes()));
        if bits == 64 {
            res
        } else {
            res & max
        }
    };
    if value > max || (incr > 0 && incr > maxincr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => max,
            Overflow::Fail => 0,
        })
    } else if incr < 0 && incr < minincr {
        Some(match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat | Overflow::Fail => 0,
        })
    } else {
        None
    }
}

/// Redis's `checkSignedBitfieldOverflow`, as [`unsigned_overflow`].
pub(crate) fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = max.wrapping_sub(value);
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = value.wrapping_add(incr);
        if bits < 64 {
            let mask = -1i64 << bits;
            if c & (1i64 << (bits - 1)) != 0 {
                c | mask
            } else {
                c & !mask
            }
        } else {
            c
        }
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Some(match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => max,
            Overflow::Fail => 0,
        })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        Some(match ow {
            Overflow::Wrap => wrap(),
            Overflow::Sat => min,
            Overflow::Fail => 0,
        })
    } else {
        None
    }
}

/// The first `bit` (0 or 1) in `p`, counting from bit 0 of `p[0]`; when there is
/// none, `p.len() * 8` for a 0 (the zero padding to the right) and `None` for a 1.
pub(crate) fn first_bit(p: &[u8], bit: bool) -> Option<u64> {
    let skip = if bit { 0u8 } else { 0xff };
    for (i, &b) in p.iter().enumerate() {
        if b != skip {
            let x = if bit { b } else { !b };
            let at = u64::try_from(i).unwrap_or(u64::MAX) * 8 + u64::from(x.leading_zeros());
            return Some(at);
        }
    }
    if bit {
        None
    } else {
        Some(u64::try_from(p.len()).unwrap_or(u64::MAX) * 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_layout() {
        // Redis's own example: u5 value 23 at offset 7 -> 00000001 01110000.
        let mut p = [0u8; 2];
        set_unsigned(&mut p, 7, 5, 23);
        assert_eq!(p, [0b0000_0001, 0b0111_0000]);
        assert_eq!(get_unsigned(&p, 7, 5), 23);
        set_signed(&mut p, 0, 8, -1);
        assert_eq!(p[0], 0xff);
        assert_eq!(get_signed(&p, 0, 8), -1);
        assert_eq!(get_signed(&p, 0, 4), -1);
        assert_eq!(get_unsigned(&p, 0, 4), 15);
        let mut q = [0u8; 8];
        set_signed(&mut q, 0, 64, i64::MIN);
        assert_eq!(get_signed(&q, 0, 64), i64::MIN);
        assert_eq!(get_unsigned(&[0xab], 4, 8), 0xb0);
    }

    #[test]
    fn overflow_rules() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), Some(251));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Wrap), None);
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed_overflow(-128, -1, 8, Overflow::Wrap), Some(127));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(signed_overflow(300, 0, 8, Overflow::Wrap), Some(44));
        assert_eq!(signed_overflow(-3, 2, 8, Overflow::Fail), None);
    }

    #[test]
    fn bit_scan() {
        assert_eq!(first_bit(&[0x00, 0x10], true), Some(11));
        assert_eq!(first_bit(&[0xff, 0xf0], false), Some(12));
        assert_eq!(first_bit(&[0xff], false), Some(8));
        assert_eq!(first_bit(&[0x00], true), None);
    }
}
