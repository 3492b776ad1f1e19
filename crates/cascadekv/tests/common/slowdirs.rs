//! A data directory and a slow directory under one temporary root (removed on drop),
//! and small options that make a few thousand keys reach the slow tier: the slow-tier
//! tests share them (`#[path]`-included).

#![allow(dead_code)] // each test file uses a different part

use std::path::{Path, PathBuf};

use cascadekv::Options;

/// `<tmp>/ckv-<name>-<pid>/{data,slow}`.
pub struct Dirs {
    /// The root.
    pub root: PathBuf,
}

impl Dirs {
    /// A fresh root for test `name`.
    pub fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("ckv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        Dirs { root }
    }
    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.root.join("data")
    }
    /// The slow directory.
    pub fn slow(&self) -> PathBuf {
        self.root.join("slow")
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A 64 MiB pool with 1 MiB FastStores, no background threads (tests drive flushes
/// and compactions), and a 512 KiB fast budget over a slow tier of 1 KiB blocks whose
/// partitions merge `width` runs and split past `part_bytes`.
pub fn opts(slow: &Path, width: usize, part_bytes: u64) -> Options {
    Options {
        pool_size: 64 << 20,
        chunk_size: 256 << 10,
        faststore_capacity: 1 << 20,
        table_max_bytes: 64 << 10,
        background: false,
        slow_dir: Some(slow.to_path_buf()),
        fast_budget: 512 << 10,
        slow_block_size: 1024,
        slow_merge_width: width,
        slow_partition_bytes: part_bytes,
        ..Options::default()
    }
}

/// Values of several kinds for key number `i` of write round `round`: small inline
/// (60 %), separated (30 %, over the inline threshold), and, every 500th key ending in
/// 9, one too large for a slow-tier block (a blob in the file); 3000 B otherwise.
pub fn mixed_value(i: u64, round: u64) -> Vec<u8> {
    let len = match i % 10 {
        0..=5 => 20,
        6..=8 => 600,
        _ if i % 500 == 9 => 300_000,
        _ => 3000,
    };
    let mut v = format!("v{i}-r{round}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}
