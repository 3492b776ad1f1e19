//! Hash slots: Redis Cluster's `CRC16(key) mod 16384`, with hash tags.
//!
//! The CRC is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), the
//! one Redis's `crc16.c` computes. A hash tag is the part between the first `{` and
//! the first `}` after it, when that part is not empty: `{user1}.a` and `{user1}.b`
//! share a slot. Pure functions, no state.

/// Number of hash slots.
pub(crate) const SLOTS: usize = 16384;

/// CRC-16/XMODEM lookup table, built at compile time.
const TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        #[expect(clippy::cast_possible_truncation, reason = "i < 256")]
        let mut c = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            b += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC-16/XMODEM of `data`.
pub(crate) fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from(((crc >> 8) ^ u16::from(b)) & 0xff)]
    })
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty one.
pub(crate) fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (0..16384).
pub(crate) fn slot(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) & 0x3fff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        // CRC-16/XMODEM's check value, also Redis's crc16.c test vector.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn slots_match_redis() {
        // Values from a real Redis 7 (`CLUSTER KEYSLOT`).
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"bar"), 5061);
        assert_eq!(slot(b"hello"), 866);
        assert_eq!(slot(b""), 0);
        assert_eq!(slot(b"somekey"), 11058);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"{user1000}.followers"), slot(b"user1000"));
        // Empty tag: the whole key is hashed; only the first tag counts.
        assert_eq!(slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 0x3fff);
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
    }
}
