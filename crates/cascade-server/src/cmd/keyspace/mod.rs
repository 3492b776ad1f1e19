//! Commands on keys of any type, and the helpers that walk one collection:
//!
//! - `keys.rs`: DEL UNLINK EXISTS TYPE DBSIZE KEYS SCAN FLUSHDB FLUSHALL, CASCADE.RANGE;
//! - `expire.rs`: TTL PTTL EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST;
//! - `generic.rs`: RENAME RENAMENX COPY RANDOMKEY EXPIRETIME PEXPIRETIME OBJECT;
//! - `dump.rs`: DUMP RESTORE (CascadeKV's payload format, docs/formats.md);
//! - `migrate.rs`: MIGRATE and its cached connections;
//! - `sort.rs`: `SORT SORT_RO`;
//! - `random.rs`: the sampling behind HRANDFIELD and ZRANDMEMBER;
//! - `scan.rs`: the cursor walk behind SSCAN HSCAN ZSCAN.
//!
//! Data commands run under the stripe locks the dispatcher takes for their keys;
//! KEYS, SCAN, FLUSHDB and the collection scans are control commands that read
//! through the store. The only shared state here is MIGRATE's connection cache
//! (`migrate::Sockets`, behind its own mutex in the store).

pub(crate) mod dump;
pub(crate) mod expire;
pub(crate) mod generic;
#[expect(
    clippy::unnecessary_wraps,
    reason = "every handler has the table's signature, even one that cannot fail"
)]
pub(crate) mod keys;
pub(crate) mod migrate;
pub(crate) mod random;
pub(crate) mod scan;
pub(crate) mod sort;
