//! Table block reader (`cascadekv::internals::table_block::Block`).
//!
//! Input: 8 bytes of epoch (LE), one mode byte, then the block bytes.
//! Mode bit 0 set: the block's checksum is forged (crc32c of the epoch extended over
//! bytes [4..]) so the structural decoders see arbitrary content.
//! Asserts: nothing panics; `open` for both kinds, `validate`, every accessor for
//! i in 0..=count, `search` and `child_for` (never a position past the end). When
//! `validate` passes, every entry decodes, `search`/`child_for` never give up (`None`)
//! and find every key at its own position.
#![no_main]

use cascadekv::internals::{crc32c, crc32c_extend};
use cascadekv::internals::table_block::{Block, BlockKind};
use libfuzzer_sys::fuzz_target;

fn exercise(b: &Block<'_>, kind: BlockKind) {
    assert_eq!(b.kind(), kind);
    let valid = b.validate().is_ok();
    let n = b.count();
    for i in 0..=n {
        let k = b.key_at(i);
        let d = b.data_at(i);
        let x = b.index_at(i);
        if i == n {
            // One past the end reads the first bytes after the offset array as an
            // offset; it may or may not decode, but must not panic.
            continue;
        }
        if let Some((dk, _)) = d {
            assert_eq!(Some(dk), k, "data_at key differs from key_at");
        }
        if let Some(e) = x {
            assert_eq!(Some(e.first_key), k, "index_at key differs from key_at");
            assert!(e.units > 0);
        }
        if valid {
            let Some(k) = k else {
                panic!("validated block: key_at({i}) is None");
            };
            match kind {
                BlockKind::Data => assert!(d.is_some(), "validated block: data_at({i}) is None"),
                BlockKind::Index => assert!(x.is_some(), "validated block: index_at({i}) is None"),
            }
            assert_eq!(
                b.search(k),
                Some(Ok(i)),
                "validated block: search misses key {i}"
            );
            assert_eq!(
                b.child_for(k),
                Some(Some(i)),
                "validated block: child_for misses key {i}"
            );
        } else if let Some(k) = k {
            let _ = (b.search(k), b.child_for(k));
        }
    }
    for probe in [&b""[..], b"\x00", b"m", &[0xFF; 16]] {
        let s = b.search(probe);
        let c = b.child_for(probe);
        if valid {
            assert!(
                s.is_some() && c.is_some(),
                "validated block: search gave up"
            );
        }
        if let Some(Err(lo)) = s {
            assert!(lo <= n, "search past the end: {lo} > {n}");
        }
        if let Some(Some(c)) = c {
            assert!(c < n, "child_for past the end: {c} >= {n}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((epoch_b, rest)) = data.split_first_chunk::<8>() else {
        return;
    };
    let epoch = u64::from_le_bytes(*epoch_b);
    let Some((&mode, block)) = rest.split_first() else {
        return;
    };
    let mut bytes = block.to_vec();
    if mode & 1 == 1 && bytes.len() >= 4 {
        let crc = crc32c_extend(crc32c(&epoch.to_le_bytes()), &bytes[4..]);
        bytes[0..4].copy_from_slice(&crc.to_le_bytes());
    }
    for kind in [BlockKind::Data, BlockKind::Index] {
        if let Ok(b) = Block::open(&bytes, epoch, kind) {
            exercise(&b, kind);
        }
    }
});
