//! Pub/sub commands: `SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE
//! SUNSUBSCRIBE PUBLISH SPUBLISH PUBSUB`. The registry and delivery are in
//! `crate::pubsub`; this file is the connection's side: its subscriptions
//! ([`Subscriptions`]) and Redis's confirmation replies.
//!
//! A confirmation is one frame per name — `[subscribe, name, count]`, a push frame in
//! RESP3 — where `count` is the connection's channel plus pattern subscriptions (shard
//! subscriptions counted apart, as Redis counts them). An unsubscribe-all with nothing
//! to drop still confirms once, with a nil name. While a RESP2 connection holds any
//! subscription it may only run the commands [`ALLOWED_SUBSCRIBED`] names
//! (`dispatch` checks).

use std::collections::HashSet;

use super::{is, spec, unknown_subcommand, Ctx, Keys, Run::Ctl, Spec};
use crate::error::{CmdError, CmdResult};
use crate::pubsub::{frame, Kind};
use crate::resp::parse::Command;
use crate::resp::reply;

/// Flags of the subscribe family.
const SUB: &[&str] = &["pubsub", "noscript", "loading", "stale"];
/// Flags of PUBLISH and PUBSUB.
const PUB: &[&str] = &["pubsub", "loading", "stale", "fast"];

/// The pub/sub commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "subscribe",
        -2,
        SUB,
        Keys::None,
        "pubsub",
        "Listens to channels.",
        Ctl(subscribe),
    ),
    spec(
        "unsubscribe",
        -1,
        SUB,
        Keys::None,
        "pubsub",
        "Stops listening to channels.",
        Ctl(unsubscribe),
    ),
    spec(
        "psubscribe",
        -2,
        SUB,
        Keys::None,
        "pubsub",
        "Listens to channels matching patterns.",
        Ctl(psubscribe),
    ),
    spec(
        "punsubscribe",
        -1,
        SUB,
        Keys::None,
        "pubsub",
        "Stops listening to patterns.",
        Ctl(punsubscribe),
    ),
    spec(
        "ssubscribe",
        -2,
        SUB,
        Keys::Range(1, -1, 1),
        "pubsub",
        "Listens to shard channels.",
        Ctl(ssubscribe),
    ),
    spec(
        "sunsubscribe",
        -1,
        SUB,
        Keys::Range(1, -1, 1),
        "pubsub",
        "Stops listening to shard channels.",
        Ctl(sunsubscribe),
    ),
    spec(
        "publish",
        3,
        PUB,
        Keys::None,
        "pubsub",
        "Posts a message to a channel.",
        Ctl(publish),
    ),
    spec(
        "spublish",
        3,
        PUB,
        Keys::Range(1, 1, 1),
        "pubsub",
        "Posts a message to a shard channel.",
        Ctl(spublish),
    ),
    spec(
        "pubsub",
        -2,
        PUB,
        Keys::None,
        "pubsub",
        "PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB.",
        Ctl(pubsub),
    ),
];

/// What a RESP2 connection with subscriptions may still run.
pub(crate) const ALLOWED_SUBSCRIBED: &[&str] = &[
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

/// A connection's subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    channels: HashSet<Vec<u8>>,
    patterns: HashSet<Vec<u8>>,
    shard: HashSet<Vec<u8>>,
}

impl Subscriptions {
    fn set(&mut self, kind: Kind) -> &mut HashSet<Vec<u8>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a confirmation of `kind` reports.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }

    /// True while the connection holds any subscription (Redis's pub/sub mode).
    pub(crate) fn active(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }

    /// Channel, pattern and shard subscription counts (CLIENT LIST's sub, psub, ssub).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.channels.len(), self.patterns.len(), self.shard.len())
    }
}

/// Appends one confirmation frame.
fn confirm(ctx: &mut Ctx<'_>, word: &[u8], name: Option<&[u8]>, count: usize) {
    let out = &mut *ctx.out;
    out.buf.push(if out.resp3 { b'>' } else { b'*' });
    out.buf.extend_from_slice(b"3\r\n");
    reply::bulk(out, word);
    match name {
        Some(n) => reply::bulk(out, n),
        None => reply::nil(out),
    }
    reply::int(out, i64::try_from(count).unwrap_or(i64::MAX));
}

fn sub_many(ctx: &mut Ctx<'_>, c: &Command, kind: Kind) -> CmdResult<()> {
    let pubsub = ctx.shared.store.pubsub();
    for name in c.args().skip(1) {
        if ctx.client.subs.set(kind).insert(name.to_vec()) {
            pubsub.subscribe(kind, name, &ctx.client.mailbox);
        }
        let n = ctx.client.subs.count(kind);
        confirm(ctx, kind.subscribe_word(), Some(name), n);
    }
    ctx.shared
        .clients
        .set_subs(ctx.client.id, ctx.client.subs.counts());
    Ok(())
}

fn unsub_many(ctx: &mut Ctx<'_>, c: &Command, kind: Kind) -> CmdResult<()> {
    let names: Vec<Vec<u8>> = if c.len() > 1 {
        c.args().skip(1).map(<[u8]>::to_vec).collect()
    } else {
        ctx.client.subs.set(kind).iter().cloned().collect()
    };
    if names.is_empty() {
        let n = ctx.client.subs.count(kind);
        confirm(ctx, kind.unsubscribe_word(), None, n);
    }
    for name in names {
        if ctx.client.subs.set(kind).remove(&name) {
            ctx.shared
                .store
                .pubsub()
                .unsubscribe(kind, &name, ctx.client.id);
        }
        let n = ctx.client.subs.count(kind);
        confirm(ctx, kind.unsubscribe_word(), Some(&name), n);
    }
    ctx.shared
        .clients
        .set_subs(ctx.client.id, ctx.client.subs.counts());
    Ok(())
}

/// Drops every subscription of a closing (or RESET) connection, with no replies.
pub(crate) fn drop_all(shared: &crate::shared::Shared, client: &mut super::Client) {
    if !client.subs.active() {
        return;
    }
    let pubsub = shared.store.pubsub();
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in client.subs.set(kind).drain() {
            pubsub.unsubscribe(kind, &name, client.id);
        }
    }
    shared.clients.set_subs(client.id, (0, 0, 0));
}

fn subscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    sub_many(ctx, c, Kind::Channel)
}

fn unsubscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    unsub_many(ctx, c, Kind::Channel)
}

fn psubscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    sub_many(ctx, c, Kind::Pattern)
}

fn punsubscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    unsub_many(ctx, c, Kind::Pattern)
}

fn ssubscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    sub_many(ctx, c, Kind::Shard)
}

fn sunsubscribe(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    unsub_many(ctx, c, Kind::Shard)
}

fn publish(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let n = ctx.shared.store.pubsub().publish(c.arg(1), c.arg(2));
    reply::int(ctx.out, i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let n = ctx.shared.store.pubsub().spublish(c.arg(1), c.arg(2));
    reply::int(ctx.out, i64::try_from(n).unwrap_or(i64::MAX));
    Ok(())
}

fn pubsub(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let ps = ctx.shared.store.pubsub();
    let sub = c.arg(1);
    let kind = if is(sub, "channels") || is(sub, "numsub") {
        Kind::Channel
    } else {
        Kind::Shard
    };
    if (is(sub, "channels") || is(sub, "shardchannels")) && c.len() <= 3 {
        let names = ps.names(kind, (c.len() == 3).then(|| c.arg(2)));
        reply::bulk_array(ctx.out, names.iter().map(Vec::as_slice));
    } else if is(sub, "numsub") || is(sub, "shardnumsub") {
        reply::array_header(ctx.out, (c.len() - 2) * 2);
        for name in c.args().skip(2) {
            reply::bulk(ctx.out, name);
            let n = ps.count(kind, name);
            reply::int(ctx.out, i64::try_from(n).unwrap_or(i64::MAX));
        }
    } else if is(sub, "numpat") && c.len() == 2 {
        reply::int(ctx.out, i64::try_from(ps.numpat()).unwrap_or(i64::MAX));
    } else if is(sub, "help") && c.len() == 2 {
        let lines: &[&[u8]] = &[
            b"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"CHANNELS [<pattern>]",
            b"    Return the currently active channels matching a <pattern> (default: '*').",
            b"NUMPAT",
            b"    Return number of subscriptions to patterns.",
            b"NUMSUB [<channel> ...]",
            b"    Return the number of subscribers for the specified channels, excluding",
            b"    pattern subscriptions(default: no channels).",
            b"SHARDCHANNELS [<pattern>]",
            b"    Return the currently active shard level channels matching a <pattern> (default: '*').",
            b"SHARDNUMSUB [<shardchannel> ...]",
            b"    Return the number of subscribers for the specified shard level channel(s)",
            b"HELP",
            b"    Prints this help.",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else if ["channels", "numpat", "shardchannels"]
        .iter()
        .any(|s| is(sub, s))
    {
        return Err(CmdError::Msg(format!(
            "ERR wrong number of arguments for 'pubsub|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )));
    } else {
        return Err(unknown_subcommand(sub, "pubsub"));
    }
    Ok(())
}

/// The reply to PING on a RESP2 connection in pub/sub mode: `[pong, arg]`.
pub(crate) fn subscribed_ping(buf: &mut Vec<u8>, arg: &[u8]) {
    frame(buf, false, &[b"pong", arg]);
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::{Kit, Value};

    #[test]
    fn subscribe_confirms_and_counts() {
        let mut k = Kit::new();
        k.expect(
            &["SUBSCRIBE", "a", "b"],
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
        );
        k.expect(
            &["PSUBSCRIBE", "a*"],
            "*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:3\r\n",
        );
        k.expect(
            &["SSUBSCRIBE", "s"],
            "*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n",
        );
        // RESP2 pub/sub mode: only the subscribe family, PING, QUIT and RESET.
        k.expect(
            &["GET", "x"],
            "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
        );
        k.expect(&["PING"], "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        k.expect(&["PING", "x"], "*2\r\n$4\r\npong\r\n$1\r\nx\r\n");
        k.expect(
            &["UNSUBSCRIBE", "zzz"],
            "*3\r\n$11\r\nunsubscribe\r\n$3\r\nzzz\r\n:3\r\n",
        );
        k.expect(
            &["PUNSUBSCRIBE"],
            "*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:2\r\n",
        );
        k.expect(
            &["PUNSUBSCRIBE"],
            "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:2\r\n",
        );
        let Value::Arr(v) = k.value(&["UNSUBSCRIBE"]) else {
            panic!("frames")
        };
        assert_eq!(v.len(), 3, "one frame (the first) of two is decoded");
        k.expect(
            &["SUNSUBSCRIBE", "s"],
            "*3\r\n$12\r\nsunsubscribe\r\n$1\r\ns\r\n:0\r\n",
        );
        k.expect(&["GET", "x"], "$-1\r\n");
    }

    #[test]
    fn publish_reaches_the_mailbox_and_pubsub_introspects() {
        let mut k = Kit::new();
        k.expect(&["PUBLISH", "c", "m"], ":0\r\n");
        k.raw(&["SUBSCRIBE", "c", "d"]);
        k.raw(&["PSUBSCRIBE", "c*", "x*"]);
        k.raw(&["SSUBSCRIBE", "sc"]);
        k.out.buf.clear();
        // The subscriber is also the publisher here: PUBLISH is refused in RESP2
        // pub/sub mode, so publish through the registry as another client would.
        let ps = k.shared.store.pubsub();
        assert_eq!(ps.publish(b"c", b"m"), 2);
        let mut mail = Vec::new();
        k.client.mailbox.take_into(&mut mail);
        assert_eq!(
            String::from_utf8_lossy(&mail),
            "*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n\
             *4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$1\r\nc\r\n$1\r\nm\r\n"
        );
        k.out.resp3 = true;
        k.client.mailbox.set_resp3(true);
        let Value::Arr(mut chans) = k.value(&["PUBSUB", "CHANNELS"]) else {
            panic!("array")
        };
        chans.sort_by_key(|v| format!("{v:?}"));
        assert_eq!(chans, vec![Value::Str("c".into()), Value::Str("d".into())]);
        k.expect(&["PUBSUB", "CHANNELS", "d*"], "*1\r\n$1\r\nd\r\n");
        k.expect(
            &["PUBSUB", "NUMSUB", "c", "nope"],
            "*4\r\n$1\r\nc\r\n:1\r\n$4\r\nnope\r\n:0\r\n",
        );
        k.expect(&["PUBSUB", "NUMPAT"], ":2\r\n");
        k.expect(&["PUBSUB", "SHARDCHANNELS"], "*1\r\n$2\r\nsc\r\n");
        k.expect(&["PUBSUB", "SHARDNUMSUB", "sc"], "*2\r\n$2\r\nsc\r\n:1\r\n");
        k.expect(&["SPUBLISH", "sc", "hi"], ":1\r\n");
        k.expect(
            &["PUBSUB", "NOPE"],
            "-ERR unknown subcommand 'NOPE'. Try PUBSUB HELP.\r\n",
        );
        k.expect(
            &["PUBSUB", "NUMPAT", "x"],
            "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n",
        );
        // RESP3: confirmations are pushes, and every command may run.
        k.expect(
            &["UNSUBSCRIBE", "c"],
            ">3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:3\r\n",
        );
        k.expect(&["GET", "x"], "_\r\n");
        super::drop_all(&k.shared, &mut k.client);
        assert!(k.shared.store.pubsub().idle());
    }
}
