//! Pub/sub: who listens to which channel, pattern or shard channel, and delivery.
//!
//! Redis's model, served by many worker threads: a subscription ties a connection's
//! [`Mailbox`] to a channel (`SUBSCRIBE`), a glob pattern (`PSUBSCRIBE`) or a shard
//! channel (`SSUBSCRIBE`). [`PubSub::publish`] encodes the message once per receiver in
//! its protocol and leaves it in the receiver's mailbox (`mailbox.rs`); the receiver's
//! worker writes it out. Keyspace notifications (`events.rs`) are published through the
//! same path.
//!
//! Ordering: one mutex guards the whole registry, and a publish holds it while it
//! delivers, so all subscribers of a channel see its messages in one order (the order
//! the publishes took the lock), and a subscription acknowledged to its client sees
//! every message published after it. Channel subscribers receive in subscription order,
//! then pattern subscribers, as Redis delivers.
//!
//! Invariants: a mailbox appears at most once per name and kind; a name whose last
//! subscriber left is removed (so `PUBSUB CHANNELS` and `NUMPAT` count only live ones);
//! `subscriptions` is the total number of (name, mailbox) pairs, so a publish with no
//! subscriber anywhere costs one atomic load. Locks: `reg` (mutex) guards the maps;
//! `limit` has its own mutex; the counters are atomics.

mod events;
mod mailbox;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) use events::{class, Events};
pub(crate) use mailbox::{Limit, Mailbox};

use crate::glob;

/// What a subscription listens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A channel (`SUBSCRIBE`).
    Channel,
    /// A glob pattern over channel names (`PSUBSCRIBE`).
    Pattern,
    /// A shard channel (`SSUBSCRIBE`).
    Shard,
}

impl Kind {
    /// The word of its subscribe confirmation.
    pub(crate) fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The word of its unsubscribe confirmation.
    pub(crate) fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

type Subscribers = HashMap<Vec<u8>, Vec<Arc<Mailbox>>>;

#[derive(Default)]
struct Registry {
    channels: Subscribers,
    patterns: Subscribers,
    shard: Subscribers,
}

impl Registry {
    fn map(&mut self, kind: Kind) -> &mut Subscribers {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
}

/// The server's pub/sub state. See the module docs.
#[derive(Default)]
pub(crate) struct PubSub {
    reg: Mutex<Registry>,
    /// (name, mailbox) pairs registered, of every kind.
    subscriptions: AtomicUsize,
    limit: Mutex<Limit>,
    /// `notify-keyspace-events`.
    pub(crate) events: Events,
}

impl std::fmt::Debug for PubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSub")
            .field("subscriptions", &self.subscriptions.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Appends one message frame: `*n` (or a RESP3 push `>n`) of bulk strings.
pub(crate) fn frame(buf: &mut Vec<u8>, resp3: bool, parts: &[&[u8]]) {
    buf.push(if resp3 { b'>' } else { b'*' });
    buf.extend_from_slice(parts.len().to_string().as_bytes());
    buf.extend_from_slice(b"\r\n");
    for p in parts {
        buf.push(b'$');
        buf.extend_from_slice(p.len().to_string().as_bytes());
        buf.extend_from_slice(b"\r\n");
        buf.extend_from_slice(p);
        buf.extend_from_slice(b"\r\n");
    }
}

impl PubSub {
    /// The output limit of subscribers (`client-output-buffer-limit pubsub`).
    pub(crate) fn limit(&self) -> Limit {
        *self.limit.lock()
    }

    /// Sets the output limit of subscribers.
    pub(crate) fn set_limit(&self, l: Limit) {
        *self.limit.lock() = l;
    }

    /// Registers `mb` for `name`. Returns false if it was registered already.
    pub(crate) fn subscribe(&self, kind: Kind, name: &[u8], mb: &Arc<Mailbox>) -> bool {
        let mut reg = self.reg.lock();
        let subs = reg.map(kind).entry(name.to_vec()).or_default();
        if subs.iter().any(|m| m.id == mb.id) {
            return false;
        }
        subs.push(mb.clone());
        self.subscriptions.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Unregisters client `id` from `name`. Returns false if it was not registered.
    pub(crate) fn unsubscribe(&self, kind: Kind, name: &[u8], id: u64) -> bool {
        let mut reg = self.reg.lock();
        let map = reg.map(kind);
        let Some(subs) = map.get_mut(name) else {
            return false;
        };
        let Some(at) = subs.iter().position(|m| m.id == id) else {
            return false;
        };
        subs.remove(at);
        if subs.is_empty() {
            map.remove(name);
        }
        self.subscriptions.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// True if nobody subscribes to anything (a publish would reach nobody).
    pub(crate) fn idle(&self) -> bool {
        self.subscriptions.load(Ordering::Relaxed) == 0
    }

    /// Publishes `msg` on `channel` (`PUBLISH`): to the channel's subscribers, then to
    /// every pattern that matches it. Returns the number of receivers.
    pub(crate) fn publish(&self, channel: &[u8], msg: &[u8]) -> usize {
        if self.idle() {
            return 0;
        }
        let limit = self.limit();
        let reg = self.reg.lock();
        let mut n = 0;
        if let Some(subs) = reg.channels.get(channel) {
            for mb in subs {
                let resp3 = mb.resp3();
                mb.deliver(limit, |b| frame(b, resp3, &[b"message", channel, msg]));
                n += 1;
            }
        }
        for (pat, subs) in &reg.patterns {
            if !glob::matches(pat, channel, false) {
                continue;
            }
            for mb in subs {
                let resp3 = mb.resp3();
                mb.deliver(limit, |b| {
                    frame(b, resp3, &[b"pmessage", pat, channel, msg]);
                });
                n += 1;
            }
        }
        n
    }

    /// Publishes `msg` on the shard channel `channel` (`SPUBLISH`; patterns do not
    /// apply). Returns the number of receivers.
    pub(crate) fn spublish(&self, channel: &[u8], msg: &[u8]) -> usize {
        if self.idle() {
            return 0;
        }
        let limit = self.limit();
        let reg = self.reg.lock();
        let Some(subs) = reg.shard.get(channel) else {
            return 0;
        };
        for mb in subs {
            let resp3 = mb.resp3();
            mb.deliver(limit, |b| frame(b, resp3, &[b"smessage", channel, msg]));
        }
        subs.len()
    }

    /// Names of `kind` with at least one subscriber, matching `pattern` if given.
    pub(crate) fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut reg = self.reg.lock();
        reg.map(kind)
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c, false)))
            .cloned()
            .collect()
    }

    /// Subscribers of `name` (`PUBSUB NUMSUB`, `SHARDNUMSUB`).
    pub(crate) fn count(&self, kind: Kind, name: &[u8]) -> usize {
        self.reg.lock().map(kind).get(name).map_or(0, Vec::len)
    }

    /// True if client `id` subscribes to `name` (client-side caching sends a RESP2
    /// redirect target its invalidations only while it listens, `crate::tracking`).
    pub(crate) fn listens(&self, kind: Kind, name: &[u8], id: u64) -> bool {
        self.reg
            .lock()
            .map(kind)
            .get(name)
            .is_some_and(|subs| subs.iter().any(|m| m.id == id))
    }

    /// Channels (or shard channels) with at least one subscriber (INFO).
    pub(crate) fn channels(&self, kind: Kind) -> usize {
        self.reg.lock().map(kind).len()
    }

    /// Distinct patterns subscribed to (`PUBSUB NUMPAT`).
    pub(crate) fn numpat(&self) -> usize {
        self.reg.lock().patterns.len()
    }

    /// Publishes a keyspace notification for `key` if `class` is enabled: the event
    /// on `__keyspace@<db>__:<key>` and the key on `__keyevent@<db>__:<event>`.
    pub(crate) fn notify(&self, class: u32, event: &str, key: &[u8], db: u32) {
        let flags = self.events.flags();
        if flags & class == 0 || self.idle() {
            return;
        }
        if flags & class::KEYSPACE != 0 {
            let mut ch = format!("__keyspace@{db}__:").into_bytes();
            ch.extend_from_slice(key);
            self.publish(&ch, event.as_bytes());
        }
        if flags & class::KEYEVENT != 0 {
            let ch = format!("__keyevent@{db}__:{event}");
            self.publish(ch.as_bytes(), key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox(id: u64) -> Arc<Mailbox> {
        Mailbox::new(id, Arc::new(|| {}))
    }

    fn take(mb: &Mailbox) -> String {
        let mut out = Vec::new();
        mb.take_into(&mut out);
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn channels_and_patterns() {
        let ps = PubSub::default();
        let (a, b) = (mailbox(1), mailbox(2));
        assert!(ps.subscribe(Kind::Channel, b"news", &a));
        assert!(!ps.subscribe(Kind::Channel, b"news", &a));
        assert!(ps.subscribe(Kind::Pattern, b"n*", &b));
        b.set_resp3(true);
        assert_eq!(ps.publish(b"news", b"hi"), 2);
        assert_eq!(
            take(&a),
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            take(&b),
            ">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(ps.publish(b"other", b"x"), 0);
        assert_eq!(ps.names(Kind::Channel, None), vec![b"news".to_vec()]);
        assert_eq!(ps.names(Kind::Channel, Some(b"x*")).len(), 0);
        assert_eq!(ps.count(Kind::Channel, b"news"), 1);
        assert_eq!(ps.numpat(), 1);
        assert!(ps.unsubscribe(Kind::Channel, b"news", 1));
        assert!(!ps.unsubscribe(Kind::Channel, b"news", 1));
        assert!(ps.names(Kind::Channel, None).is_empty());
        assert!(ps.unsubscribe(Kind::Pattern, b"n*", 2));
        assert!(ps.idle());
    }

    #[test]
    fn shard_channels_ignore_patterns() {
        let ps = PubSub::default();
        let (a, b) = (mailbox(1), mailbox(2));
        ps.subscribe(Kind::Shard, b"s", &a);
        ps.subscribe(Kind::Pattern, b"*", &b);
        assert_eq!(ps.spublish(b"s", b"m"), 1);
        assert_eq!(take(&a), "*3\r\n$8\r\nsmessage\r\n$1\r\ns\r\n$1\r\nm\r\n");
        assert!(!b.has_mail());
        // A plain publish on the same name reaches the pattern only.
        assert_eq!(ps.publish(b"s", b"m"), 1);
        assert!(!a.has_mail());
    }

    #[test]
    fn keyspace_notifications_follow_the_flags() {
        let ps = PubSub::default();
        let a = mailbox(1);
        ps.subscribe(Kind::Pattern, b"*", &a);
        ps.notify(class::STRING, "set", b"k", 0);
        assert!(!a.has_mail(), "notifications are off by default");
        ps.events.set(b"KEA").expect("flags");
        ps.notify(class::STRING, "set", b"k", 0);
        assert_eq!(
            take(&a),
            "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$16\r\n__keyspace@0__:k\r\n$3\r\nset\r\n\
             *4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n"
        );
        ps.events.set(b"Kl").expect("flags");
        ps.notify(class::STRING, "set", b"k", 0);
        assert!(!a.has_mail(), "strings are masked");
        ps.notify(class::LIST, "lpush", b"k", 0);
        assert!(a.has_mail());
    }
}
