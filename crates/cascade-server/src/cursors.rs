//! SCAN cursors: Redis cursors are integers, so the server keeps a table from cursor
//! numbers to the last key a SCAN step returned.
//!
//! A cursor is valid until [`MAX_CURSORS`] newer cursors or [`MAX_CURSOR_BYTES`] of newer
//! cursor keys displace it, or the server restarts (then `SCAN` answers
//! `ERR invalid cursor`). Cursor numbers start at a per-run random offset so a
//! previous run's cursors are (almost certainly) invalid. One mutex guards the table;
//! any worker thread calls it.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Cursors kept at most.
pub(crate) const MAX_CURSORS: usize = 100_000;
/// Bytes of cursor keys kept at most.
pub(crate) const MAX_CURSOR_BYTES: usize = 64 << 20;

/// The cursor table.
#[derive(Debug, Default)]
pub(crate) struct Cursors {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    map: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Cursors {
    /// A table whose cursor numbers start at a value derived from `seed`.
    pub(crate) fn new(seed: u64) -> Cursors {
        let c = Cursors::default();
        c.inner.lock().next = (seed % (1 << 40)).max(1) << 16;
        c
    }

    /// Remembers `key` and returns its cursor number.
    pub(crate) fn put(&self, key: Vec<u8>) -> u64 {
        let mut g = self.inner.lock();
        g.next += 1;
        let id = g.next;
        g.bytes += key.len();
        g.map.insert(id, key);
        g.order.push_back(id);
        while g.order.len() > MAX_CURSORS || g.bytes > MAX_CURSOR_BYTES {
            let Some(old) = g.order.pop_front() else {
                break;
            };
            if let Some(k) = g.map.remove(&old) {
                g.bytes -= k.len();
            }
        }
        id
    }

    /// The key of cursor `id`, if still known.
    pub(crate) fn get(&self, id: u64) -> Option<Vec<u8>> {
        self.inner.lock().map.get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_cursors_are_displaced() {
        let c = Cursors::new(7);
        let first = c.put(b"a".to_vec());
        assert_eq!(c.get(first).as_deref(), Some(&b"a"[..]));
        for _ in 0..MAX_CURSORS {
            c.put(b"b".to_vec());
        }
        assert_eq!(c.get(first), None);
        assert_eq!(c.get(0), None);
    }
}
