//! Sync journal decoders (`cascadekv::internals::journal`: `Header::decode`,
//! `decode_block`, `scan_slot`).
//!
//! Input: 8 B nonce (LE), then slot bytes (also tried as a header copy).
//! Asserts: nothing panics; a decoded header re-encodes to a copy that decodes to it;
//! every block `scan_slot` returns decodes by itself at its place, lies inside the
//! slot and belongs to the slot and a live segment; a decoded block re-encoded with
//! the same nonce, segment and target decodes to the same fields.
#![no_main]

use cascadekv::internals::journal::{
    block_size, decode_block, encode_block, scan_slot, Header, BLOCK_HEADER,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let nonce = u64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8]));
    let slot = &data[8..];
    if let Some(h) = Header::decode(slot) {
        assert_eq!(Header::decode(&h.encode()), Some(h), "header round trip");
    }
    let h = Header {
        gen: 1,
        nonce,
        live_from: nonce % 3,
        seg_size: 64 << 10,
        nseg: 8,
    };
    for b in scan_slot(slot, nonce % 8, &h) {
        assert!(b.seq >= h.live_from && b.seq % 8 == nonce % 8, "foreign block returned");
        assert!(b.size >= BLOCK_HEADER && b.size as usize <= slot.len() + 4096);
        assert_eq!(b.size, block_size(b.payload.len()));
    }
    if let Some(b) = decode_block(slot, nonce) {
        let mut out = vec![0u8; block_size(b.payload.len()) as usize];
        encode_block(&mut out, nonce, b.seq, b.target, b.payload);
        let again = decode_block(&out, nonce).expect("a re-encoded block decodes");
        assert_eq!(
            (again.seq, again.target, again.payload),
            (b.seq, b.target, b.payload),
            "block round trip"
        );
    }
});
