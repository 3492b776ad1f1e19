//! Reading a separated value through its [`ValuePtr`].

use crate::error::{Error, Result};
use crate::log::record::{self, decode, Invalid};
use crate::pmem::Pool;
use crate::value::ValuePtr;

/// Reads and verifies the log record `ptr` points at (checksum, key, length) and
/// returns its value. Any mismatch is `Corruption` or `ChecksumMismatch` naming the
/// pool offset: a pointer never yields bytes that were not written for `key`.
pub(crate) fn read(pool: &Pool, key: &[u8], ptr: ValuePtr) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    read_into(pool, key, ptr, &mut out)?;
    Ok(out)
}

/// Bytes of a record a scan prefetches ahead of reading it: the header and the first
/// lines of the value; the CPU's stream prefetcher follows the rest once it is read.
const PREFETCH_BYTES: u64 = 512;

/// Starts loading the record `ptr` points at into the CPU cache (see
/// [`crate::pmem::Mem::prefetch`]); reading it later still verifies everything.
pub(crate) fn prefetch(pool: &Pool, ptr: ValuePtr) {
    let len = record::encoded_len(0, ptr.len as usize, true);
    let mem = pool.mem();
    let len = len
        .min(PREFETCH_BYTES)
        .min(mem.len().saturating_sub(ptr.addr));
    mem.prefetch(ptr.addr, len);
}

/// [`read`] into `out` (cleared first; no allocation if it has room).
pub(crate) fn read_into(pool: &Pool, key: &[u8], ptr: ValuePtr, out: &mut Vec<u8>) -> Result<()> {
    let epoch = pool.epoch_at(ptr.addr);
    let max = record::encoded_len(record::MAX_KEY_LEN, ptr.len as usize, true);
    let avail = pool.mem().len().saturating_sub(ptr.addr).min(max);
    let bytes = pool.mem().read(ptr.addr, avail)?;
    match decode(bytes, epoch) {
        Ok(r) if r.value.len() == ptr.len as usize && r.key == key => {
            out.clear();
            out.extend_from_slice(r.value);
            Ok(())
        }
        Ok(_) => Err(Error::corruption(
            pool.path(),
            ptr.addr,
            "log record key or length differs from the index",
        )),
        Err(Invalid::Checksum { stored, actual }) => Err(Error::ChecksumMismatch {
            file: pool.path().to_path_buf(),
            offset: ptr.addr,
            expected: stored,
            actual,
        }),
        Err(why) => Err(Error::corruption(
            pool.path(),
            ptr.addr,
            format!("bad log record ({why:?})"),
        )),
    }
}
