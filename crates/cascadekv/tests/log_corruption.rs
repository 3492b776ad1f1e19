//! A flipped bit in a key-value-separated value is reported when the key is read,
//! never returned as data. (Byte sweeps over the log format itself are unit tests in
//! `src/log/tests.rs`.)

mod common;

use cascadekv::{Db, Durability, Options};
use common::{xor_byte, PoolFile};

#[test]
fn flipped_bits_in_a_separated_value_are_reported_on_read() {
    let dir = std::env::temp_dir().join(format!("ckv-valflip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options {
        pool_size: 32 << 20,
        chunk_size: 256 << 10,
        inline_threshold: 16,
        ..Options::default()
    };
    let db = Db::open(&dir, opts).unwrap_or_else(|e| panic!("open: {e}"));
    let value = [0x5Au8; 300];
    db.put_with(b"big", &value, Durability::Sync)
        .unwrap_or_else(|e| panic!("put: {e}"));
    db.put_with(b"other", &[0x3Cu8; 300], Durability::Sync)
        .unwrap_or_else(|e| panic!("put: {e}"));
    // The value is in the log record; find it in the file and damage one byte.
    let pool = PoolFile::read(&dir);
    let at = pool
        .find(&value, 0)
        .unwrap_or_else(|| panic!("value not in the pool file"));
    for (i, off) in [0usize, 100, 299].into_iter().enumerate() {
        let mask = 1u8 << (i + 1);
        xor_byte(&pool.path, (at + off) as u64, mask);
        let err = db
            .get(b"big")
            .err()
            .unwrap_or_else(|| panic!("flipped value byte {off} returned as data"));
        assert!(err.is_corruption(), "{err}");
        assert_eq!(
            db.get(b"other").ok().flatten().as_deref(),
            Some(&[0x3Cu8; 300][..])
        );
        xor_byte(&pool.path, (at + off) as u64, mask);
        assert_eq!(db.get(b"big").ok().flatten().as_deref(), Some(&value[..]));
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
