//! `notify-keyspace-events`: which classes of keyspace notifications are published.
//!
//! The flags are Redis's letters: `K` (keyspace channel `__keyspace@<db>__:<key>`), `E`
//! (keyevent channel `__keyevent@<db>__:<event>`), the classes `g` generic, `$`
//! strings, `l` lists, `s` sets, `h` hashes, `z` sorted sets, `x` expired, `e` evicted,
//! `t` streams, `d` module, `n` new keys, `m` key misses, and `A` for `g$lshzxetd`. The
//! empty string (the default) turns notifications off. Commands record events in their
//! transaction (`Tx::event`); the store publishes them after the commit.
//!
//! One atomic holds the flags; any thread reads it.

use std::sync::atomic::{AtomicU32, Ordering};

/// Notification classes (bit flags, Redis's values).
pub(crate) mod class {
    /// `K`: publish on `__keyspace@<db>__:<key>`.
    pub(crate) const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish on `__keyevent@<db>__:<event>`.
    pub(crate) const KEYEVENT: u32 = 1 << 1;
    /// `g`: DEL, EXPIRE, RENAME, ...
    pub(crate) const GENERIC: u32 = 1 << 2;
    /// `$`: string commands.
    pub(crate) const STRING: u32 = 1 << 3;
    /// `l`: list commands.
    pub(crate) const LIST: u32 = 1 << 4;
    /// `s`: set commands.
    pub(crate) const SET: u32 = 1 << 5;
    /// `h`: hash commands.
    pub(crate) const HASH: u32 = 1 << 6;
    /// `z`: sorted-set commands.
    pub(crate) const ZSET: u32 = 1 << 7;
    /// `x`: a key expired.
    pub(crate) const EXPIRED: u32 = 1 << 8;
    /// `e`: a key was evicted.
    pub(crate) const EVICTED: u32 = 1 << 9;
    /// `t`: stream commands.
    pub(crate) const STREAM: u32 = 1 << 10;
    /// `m`: a key miss.
    pub(crate) const KEY_MISS: u32 = 1 << 11;
    /// `d`: module events.
    pub(crate) const MODULE: u32 = 1 << 12;
    /// `n`: a new key was created.
    pub(crate) const NEW: u32 = 1 << 13;
    /// `A`: every class but `m` and `n`.
    pub(crate) const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// The letters in the order Redis prints them after `A` is expanded.
const LETTERS: &[(u8, u32)] = &[
    (b'g', class::GENERIC),
    (b'$', class::STRING),
    (b'l', class::LIST),
    (b's', class::SET),
    (b'h', class::HASH),
    (b'z', class::ZSET),
    (b'x', class::EXPIRED),
    (b'e', class::EVICTED),
    (b't', class::STREAM),
    (b'd', class::MODULE),
    (b'n', class::NEW),
];

/// The configured classes.
#[derive(Debug, Default)]
pub(crate) struct Events(AtomicU32);

impl Events {
    /// The flags in effect.
    pub(crate) fn flags(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// True if events of `class` are published at all (both a class and `K` or `E`).
    pub(crate) fn on(&self, class: u32) -> bool {
        let f = self.flags();
        f & class != 0 && f & (class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// True if any notification is published at all (`K` or `E` is set).
    pub(crate) fn publishing(&self) -> bool {
        self.flags() & (class::KEYSPACE | class::KEYEVENT) != 0
    }

    /// Sets the flags from Redis's letters; `None` for an unknown letter.
    pub(crate) fn set(&self, letters: &[u8]) -> Option<()> {
        let mut f = 0;
        for &c in letters {
            f |= match c {
                b'A' => class::ALL,
                b'K' => class::KEYSPACE,
                b'E' => class::KEYEVENT,
                b'm' => class::KEY_MISS,
                c => LETTERS.iter().find(|(l, _)| *l == c)?.1,
            };
        }
        self.0.store(f, Ordering::Relaxed);
        Some(())
    }

    /// The flags as Redis prints them (CONFIG GET).
    pub(crate) fn letters(&self) -> String {
        let f = self.flags();
        let mut s = String::new();
        if f & class::ALL == class::ALL {
            // As Redis: `A` alone, even with `n` set.
            s.push('A');
        } else {
            for (l, c) in LETTERS {
                if f & c != 0 {
                    s.push(char::from(*l));
                }
            }
        }
        for (l, c) in [
            ('K', class::KEYSPACE),
            ('E', class::KEYEVENT),
            ('m', class::KEY_MISS),
        ] {
            if f & c != 0 {
                s.push(l);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_as_redis_prints_them() {
        let e = Events::default();
        assert_eq!(e.letters(), "");
        e.set(b"KEA").expect("valid");
        assert_eq!(e.letters(), "AKE");
        e.set(b"EKlsx").expect("valid");
        assert_eq!(e.letters(), "lsxKE");
        e.set(b"g$lshzxetdKE").expect("valid");
        assert_eq!(e.letters(), "AKE");
        e.set(b"Kn").expect("valid");
        assert_eq!(e.letters(), "nK");
        assert!(e.set(b"KQ").is_none());
        assert_eq!(e.letters(), "nK", "a bad value changes nothing");
        assert!(e.on(class::NEW));
        assert!(!e.on(class::STRING));
        e.set(b"l").expect("valid");
        assert!(!e.on(class::LIST), "without K or E nothing is published");
    }
}
