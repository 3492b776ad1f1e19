//! Manifest edit decoder (`cascadekv::internals::manifest_edit::decode`).
//!
//! Input: the bytes of one edit (the value of a manifest log record).
//! Asserts: decode never panics; a decoded edit satisfies
//! `decode(&encode(&e)) == Some(e)`.
#![no_main]

use cascadekv::internals::manifest_edit::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(e) = decode(data) {
        let enc = encode(&e);
        assert!(
            enc.len() <= data.len(),
            "canonical encoding longer than the input"
        );
        assert_eq!(decode(&enc), Some(e), "manifest edit round trip");
    }
});
