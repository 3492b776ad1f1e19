//! With the `rocksdb` feature and `ROCKSDB_LIB_DIR` set (librocksdb-sys then links a
//! system RocksDB instead of compiling 11.8 from source, e.g. Debian's 7.8.3 from
//! `librocksdb-dev`), compiles `compat/rocksdb78.cc`: the few C functions the
//! `rocksdb` crate needs that RocksDB 7.8 lacks. Otherwise does nothing.

fn main() {
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo:rerun-if-changed=compat/rocksdb78.cc");
    #[cfg(feature = "rocksdb")]
    if std::env::var_os("ROCKSDB_LIB_DIR").is_some() {
        cc::Build::new()
            .cpp(true)
            .std("c++17")
            .file("compat/rocksdb78.cc")
            .compile("rocksdb78compat");
    }
}
