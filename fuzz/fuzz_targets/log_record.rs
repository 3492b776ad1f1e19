//! Log record decoder (`cascadekv::internals::log_record::decode`).
//!
//! Input: 8 bytes of epoch (LE), then the bytes of a segment starting at a record.
//! Asserts: decode never panics; a record that decodes re-encodes (with the same mark)
//! to bytes that decode to the same fields. Fillers (`Pad`/`End`) are also
//! re-encoded with `encode_filler` at their decoded length.
#![no_main]

use cascadekv::internals::log_record::{decode, encode, encode_filler, Kind, RecordIn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((epoch_b, buf)) = data.split_first_chunk::<8>() else {
        return;
    };
    let epoch = u64::from_le_bytes(*epoch_b);
    let Ok(rec) = decode(buf, epoch) else {
        return;
    };
    assert!(
        rec.len as usize <= buf.len(),
        "record longer than its buffer: {rec:?}"
    );
    assert!(rec.len % 16 == 0, "unaligned record length: {rec:?}");

    let rin = RecordIn {
        kind: rec.kind,
        lsn: rec.lsn,
        in_batch: rec.in_batch,
        key: rec.key,
        value: rec.value,
    };
    let mut out = Vec::new();
    encode(&rin, rec.mark, epoch, &mut out);
    let again = decode(&out, epoch);
    let filler = matches!(rec.kind, Kind::Pad | Kind::End);
    match again {
        Ok(r2) => {
            assert_eq!(
                (r2.kind, r2.lsn, r2.in_batch, r2.mark, r2.key, r2.value),
                (
                    rec.kind,
                    rec.lsn,
                    rec.in_batch,
                    rec.mark,
                    rec.key,
                    rec.value
                ),
                "round trip changed the record"
            );
            if !filler {
                // Same fields, same encoded length (padding may differ in content).
                assert_eq!(r2, rec, "round trip changed the record");
                assert_eq!(out.len() as u64, rec.len);
            }
        }
        Err(e) => panic!("re-encoded record does not decode: {e:?} (original {rec:?})"),
    }

    if filler {
        encode_filler(rec.kind, rec.len, epoch, &mut out);
        out.resize(rec.len as usize, 0);
        match decode(&out, epoch) {
            Ok(r3) => assert_eq!((r3.kind, r3.len), (rec.kind, rec.len)),
            Err(e) => panic!("re-encoded filler does not decode: {e:?} (original {rec:?})"),
        }
    }
});
