//! Numbered databases (`SELECT`, `SWAPDB`, `MOVE`, `databases`): where each logical
//! database lives in the engine, and its key counts.
//!
//! Layout (docs/formats.md, "Numbered databases"): database 0 keeps the layout every
//! earlier store has — its entries start with their namespace byte (0x01–0x0B) — so
//! existing stores open unchanged as database 0. The entries of *physical* database
//! `p > 0` carry a three-byte prefix, `0xDB, p u16 BE`, before the same layout, so each
//! database is one contiguous engine range that sorts after every database-0 entry and
//! every server-wide entry (0x0C–0x0F). A [`crate::store::Tx`] adds and strips the
//! prefix at the engine boundary; commands never see it.
//!
//! `SWAPDB a b` swaps which physical database two logical numbers name, in O(1) as in
//! Redis: the map logical → physical is one engine entry ([`MAP_KEY`]: `u16 LE` per
//! logical database), written in the same batch discipline as any command and read at
//! open. Absent, the map is the identity. A map that fails its checks (wrong length,
//! a repeated or out-of-range id) refuses the open: guessing would serve one
//! database's keys as another's.
//!
//! Invariants: the map is a permutation of `0..count`; `keys[p]`/`expires[p]` count
//! physical database `p`'s `0x01` entries (and those with an expiry). Locks: `map` is an
//! `RwLock` read by every new transaction and written only by SWAPDB, which holds every
//! stripe lock (so no transaction is between reading the map and committing); the
//! counters are atomics.

use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::RwLock;

use crate::error::{CmdError, CmdResult};

/// First byte of every entry of a physical database other than 0.
pub(crate) const DB_PREFIX: u8 = 0xDB;
/// The engine key of the logical → physical map (a server-wide namespace byte).
pub(crate) const MAP_KEY: &[u8] = &[0x0D, b'd', b'b', b'm', b'a', b'p'];
/// Most databases (`--databases`): ids are `u16`.
pub(crate) const MAX_DATABASES: usize = 1 << 15;
/// The end (exclusive) of database 0's namespaces: 0x0C and up are server-wide.
pub(crate) const DB0_END: u8 = 0x0C;

/// The engine-key prefix of physical database `p` (empty for 0).
pub(crate) fn prefix(p: u16) -> Vec<u8> {
    if p == 0 {
        Vec::new()
    } else {
        let b = p.to_be_bytes();
        vec![DB_PREFIX, b[0], b[1]]
    }
}

/// The logical databases and their counters. See the module docs.
pub(crate) struct Databases {
    map: RwLock<Vec<u16>>,
    keys: Box<[AtomicI64]>,
    expires: Box<[AtomicI64]>,
}

impl std::fmt::Debug for Databases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Databases")
            .field("count", &self.keys.len())
            .finish_non_exhaustive()
    }
}

impl Databases {
    /// `count` databases with the map `stored` (the [`MAP_KEY`] value, if any).
    pub(crate) fn new(count: usize, stored: Option<&[u8]>) -> CmdResult<Databases> {
        if count == 0 || count > MAX_DATABASES {
            return Err(CmdError::err(format!(
                "databases must be between 1 and {MAX_DATABASES}"
            )));
        }
        let map = match stored {
            None => (0..count).filter_map(|i| u16::try_from(i).ok()).collect(),
            Some(v) => Self::decode(v, count)?,
        };
        Ok(Databases {
            map: RwLock::new(map),
            keys: (0..count).map(|_| AtomicI64::new(0)).collect(),
            expires: (0..count).map(|_| AtomicI64::new(0)).collect(),
        })
    }

    fn decode(v: &[u8], count: usize) -> CmdResult<Vec<u16>> {
        let bad = |why: &str| {
            CmdError::Engine(format!(
                "ERR the database map is damaged ({why}); run `cascade verify`"
            ))
        };
        if !v.len().is_multiple_of(2) {
            return Err(bad("odd length"));
        }
        let mut map: Vec<u16> = v
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let stored = map.len();
        if stored < count {
            // More databases than when the map was written: the new ones are new.
            map.extend((stored..count).filter_map(|i| u16::try_from(i).ok()));
        } else if map[count..]
            .iter()
            .enumerate()
            .any(|(i, &p)| usize::from(p) != count + i)
        {
            return Err(bad(&format!(
                "databases {count}..{stored} were swapped; start with --databases {stored}"
            )));
        } else {
            map.truncate(count);
        }
        let mut seen = vec![false; count];
        for &p in &map {
            let slot = seen
                .get_mut(usize::from(p))
                .ok_or_else(|| bad("an id out of range"))?;
            if std::mem::replace(slot, true) {
                return Err(bad("a repeated id"));
            }
        }
        Ok(map)
    }

    /// Replaces the map with `stored` (a replica after a full sync).
    pub(crate) fn replace_map(&self, stored: Option<&[u8]>) -> CmdResult<()> {
        let count = self.count();
        let map = match stored {
            None => (0..count).filter_map(|i| u16::try_from(i).ok()).collect(),
            Some(v) => Self::decode(v, count)?,
        };
        *self.map.write() = map;
        Ok(())
    }

    /// The map as stored under [`MAP_KEY`].
    pub(crate) fn encode(&self) -> Vec<u8> {
        self.map
            .read()
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect()
    }

    /// How many databases there are.
    pub(crate) fn count(&self) -> usize {
        self.keys.len()
    }

    /// The physical database logical database `db` names (`None`: out of range).
    pub(crate) fn physical(&self, db: usize) -> Option<u16> {
        self.map.read().get(db).copied()
    }

    /// The logical number of physical database `p`.
    pub(crate) fn logical(&self, p: u16) -> usize {
        self.map.read().iter().position(|&x| x == p).unwrap_or(0)
    }

    /// Swaps two logical databases (SWAPDB; the caller holds every stripe lock and
    /// persists [`Databases::encode`]).
    pub(crate) fn swap(&self, a: usize, b: usize) {
        self.map.write().swap(a, b);
    }

    /// Keys in physical database `p`.
    pub(crate) fn keys(&self, p: u16) -> i64 {
        self.keys
            .get(usize::from(p))
            .map_or(0, |a| a.load(Ordering::Relaxed).max(0))
    }

    /// Keys with an expiry in physical database `p`.
    pub(crate) fn expires(&self, p: u16) -> i64 {
        self.expires
            .get(usize::from(p))
            .map_or(0, |a| a.load(Ordering::Relaxed).max(0))
    }

    /// Adds to physical database `p`'s counts (`None` sets them).
    pub(crate) fn add(&self, p: u16, keys: i64, expires: i64) {
        if let (Some(k), Some(e)) = (
            self.keys.get(usize::from(p)),
            self.expires.get(usize::from(p)),
        ) {
            k.fetch_add(keys, Ordering::Relaxed);
            e.fetch_add(expires, Ordering::Relaxed);
        }
    }

    /// Zeroes physical database `p`'s counts (FLUSHDB).
    pub(crate) fn clear(&self, p: u16) {
        if let (Some(k), Some(e)) = (
            self.keys.get(usize::from(p)),
            self.expires.get(usize::from(p)),
        ) {
            k.store(0, Ordering::Relaxed);
            e.store(0, Ordering::Relaxed);
        }
    }

    /// Every physical id.
    pub(crate) fn physical_ids(&self) -> impl Iterator<Item = u16> {
        (0..self.count()).filter_map(|i| u16::try_from(i).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_round_trips_and_is_checked() {
        let d = Databases::new(4, None).expect("new");
        assert_eq!(d.physical(2), Some(2));
        d.swap(1, 3);
        assert_eq!((d.physical(1), d.physical(3)), (Some(3), Some(1)));
        assert_eq!(d.logical(3), 1);
        let bytes = d.encode();
        let e = Databases::new(4, Some(&bytes)).expect("reopen");
        assert_eq!(e.physical(1), Some(3));
        let more = Databases::new(6, Some(&bytes)).expect("grown");
        assert_eq!((more.physical(1), more.physical(5)), (Some(3), Some(5)));
        assert!(
            Databases::new(2, Some(&bytes)).is_err(),
            "swapped beyond the count"
        );
        let d2 = Databases::new(4, None).expect("new");
        d2.swap(0, 1);
        let fewer = Databases::new(2, Some(&d2.encode())).expect("shrunk");
        assert_eq!(fewer.physical(0), Some(1));
        assert!(
            Databases::new(2, Some(&[0, 0, 0, 0])).is_err(),
            "repeated id"
        );
        assert!(
            Databases::new(2, Some(&[0, 0, 9, 0])).is_err(),
            "out of range"
        );
        assert!(Databases::new(0, None).is_err());
        assert_eq!(prefix(0), Vec::<u8>::new());
        assert_eq!(prefix(258), vec![DB_PREFIX, 1, 2]);
    }

    #[test]
    fn counts_per_physical_database() {
        let d = Databases::new(2, None).expect("new");
        d.add(1, 3, 1);
        assert_eq!((d.keys(1), d.expires(1), d.keys(0)), (3, 1, 0));
        d.clear(1);
        assert_eq!(d.keys(1), 0);
        assert_eq!(d.keys(7), 0, "out of range reads as empty");
    }
}
