//! Chunk header decoder (`cascadekv::internals::ChunkHeader::decode`).
//!
//! Input: the first bytes of a chunk.
//! Asserts: decode never panics; a decoded header satisfies
//! `decode(&h.encode()) == Some(h)`.
#![no_main]

use cascadekv::internals::ChunkHeader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(h) = ChunkHeader::decode(data) {
        assert_eq!(
            ChunkHeader::decode(&h.encode()),
            Some(h),
            "chunk header round trip"
        );
    }
});
