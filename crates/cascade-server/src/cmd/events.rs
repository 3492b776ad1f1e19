//! Keyspace notifications of data commands: which event a command's change of a key
//! publishes (`notify-keyspace-events`, `crate::pubsub`).
//!
//! A command does not name its events itself. The transaction records which user keys
//! it changed and whether each is gone afterwards (`Tx::take_changes`); after the
//! handler succeeds, [`record`] maps the command and the key's role in it to Redis's
//! event name and class, and adds `del` when a collection command left its key empty,
//! as Redis does. Events raised by the store itself — `new` for a created key and
//! `expired` for an expired key removed — are recorded where they happen
//! (`store.rs`). Events are published after the commit, in the order recorded.
//!
//! Stateless: a table and two functions, any thread.

use crate::pubsub::class::{GENERIC, HASH, LIST, SET, STREAM, STRING, ZSET};
use crate::resp::parse::Command;
use crate::store::Tx;

use super::{is, Spec};

/// The event of a command whose name alone decides it, by class.
const PLAIN: &[(u32, &[(&str, &str)])] = &[
    (
        STRING,
        &[
            ("set", "set"),
            ("setnx", "set"),
            ("setex", "set"),
            ("psetex", "set"),
            ("getset", "set"),
            ("mset", "set"),
            ("msetnx", "set"),
            ("append", "append"),
            ("setrange", "setrange"),
            ("incr", "incrby"),
            ("decr", "incrby"),
            ("incrby", "incrby"),
            ("decrby", "incrby"),
            ("incrbyfloat", "incrbyfloat"),
            ("setbit", "setbit"),
            ("bitop", "set"),
            ("bitfield", "setbit"),
            ("pfadd", "pfadd"),
            ("pfmerge", "pfadd"),
        ],
    ),
    (
        GENERIC,
        &[
            ("del", "del"),
            ("unlink", "del"),
            ("getdel", "del"),
            ("expire", "expire"),
            ("pexpire", "expire"),
            ("expireat", "expire"),
            ("pexpireat", "expire"),
            ("persist", "persist"),
            ("copy", "copy_to"),
            ("restore", "restore"),
        ],
    ),
    (
        LIST,
        &[
            ("lpush", "lpush"),
            ("lpushx", "lpush"),
            ("rpush", "rpush"),
            ("rpushx", "rpush"),
            ("lpop", "lpop"),
            ("blpop", "lpop"),
            ("rpop", "rpop"),
            ("brpop", "rpop"),
            ("linsert", "linsert"),
            ("lset", "lset"),
            ("ltrim", "ltrim"),
            ("lrem", "lrem"),
            ("sort", "sortstore"),
        ],
    ),
    (
        SET,
        &[
            ("sadd", "sadd"),
            ("srem", "srem"),
            ("spop", "spop"),
            ("sinterstore", "sinterstore"),
            ("sunionstore", "sunionstore"),
            ("sdiffstore", "sdiffstore"),
        ],
    ),
    (
        HASH,
        &[
            ("hset", "hset"),
            ("hsetnx", "hset"),
            ("hmset", "hset"),
            ("hdel", "hdel"),
            ("hincrby", "hincrby"),
            ("hincrbyfloat", "hincrbyfloat"),
        ],
    ),
    (
        ZSET,
        &[
            ("zincrby", "zincr"),
            ("zrem", "zrem"),
            ("zremrangebyscore", "zremrangebyscore"),
            ("zremrangebyrank", "zremrangebyrank"),
            ("zremrangebylex", "zremrangebylex"),
            ("zpopmin", "zpopmin"),
            ("bzpopmin", "zpopmin"),
            ("zpopmax", "zpopmax"),
            ("bzpopmax", "zpopmax"),
            ("zunionstore", "zunionstore"),
            ("zinterstore", "zinterstore"),
            ("zdiffstore", "zdiffstore"),
            ("zrangestore", "zrangestore"),
            ("geoadd", "zadd"),
            ("georadius", "georadiusstore"),
            ("georadiusbymember", "georadiusstore"),
            ("geosearchstore", "geosearchstore"),
        ],
    ),
];

/// True if argument `i` of `c` exists and is `word` (any case).
fn arg_is(c: &Command, i: usize, word: &str) -> bool {
    i < c.len() && is(c.arg(i), word)
}

/// The class and event for a change of `key` by `c` (`name` is its table name).
fn event_of(name: &str, c: &Command, key: &[u8]) -> Option<(u32, &'static str)> {
    let src = c.len() > 1 && c.arg(1) == key;
    let side = |i: usize, left: &'static str, right: &'static str| {
        if arg_is(c, i, "left") {
            left
        } else {
            right
        }
    };
    let special = match name {
        "rename" | "renamenx" => Some((GENERIC, if src { "rename_from" } else { "rename_to" })),
        "getex" => Some((
            GENERIC,
            if c.args().any(|a| is(a, "persist")) {
                "persist"
            } else {
                "expire"
            },
        )),
        "rpoplpush" | "brpoplpush" => Some((LIST, if src { "rpop" } else { "lpush" })),
        "lmove" | "blmove" => Some((
            LIST,
            if src {
                side(3, "lpop", "rpop")
            } else {
                side(4, "lpush", "rpush")
            },
        )),
        "lmpop" => Some((
            LIST,
            if c.args().any(|a| is(a, "left")) {
                "lpop"
            } else {
                "rpop"
            },
        )),
        "blmpop" => Some((
            LIST,
            if c.args().any(|a| is(a, "left")) {
                "lpop"
            } else {
                "rpop"
            },
        )),
        "smove" => Some((SET, if src { "srem" } else { "sadd" })),
        "zadd" => Some((
            ZSET,
            if c.args().any(|a| is(a, "incr")) {
                "zincr"
            } else {
                "zadd"
            },
        )),
        "zmpop" | "bzmpop" => Some((
            ZSET,
            if c.args().any(|a| is(a, "min")) {
                "zpopmin"
            } else {
                "zpopmax"
            },
        )),
        "xgroup" => match c.len() > 1 {
            true if is(c.arg(1), "create") => Some((STREAM, "xgroup-create")),
            true if is(c.arg(1), "setid") => Some((STREAM, "xgroup-setid")),
            true if is(c.arg(1), "destroy") => Some((STREAM, "xgroup-destroy")),
            true if is(c.arg(1), "delconsumer") => Some((STREAM, "xgroup-delconsumer")),
            // CREATECONSUMER: raised where a consumer is created (streams/layout.rs).
            _ => None,
        },
        "xadd" => Some((STREAM, "xadd")),
        "xtrim" => Some((STREAM, "xtrim")),
        "xdel" => Some((STREAM, "xdel")),
        "xsetid" => Some((STREAM, "xsetid")),
        _ => None,
    };
    special.or_else(|| {
        PLAIN.iter().find_map(|(class, evs)| {
            evs.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, e)| (*class, *e))
        })
    })
}

/// After `spec`'s handler ran `c` on `tx`: records the keyspace notifications of the
/// keys it changed (a no-op while notifications are off).
pub(crate) fn record(tx: &mut Tx<'_>, spec: &Spec, c: &Command) {
    let mut changes = tx.take_changes();
    // The source key's event comes first (RENAME, SMOVE, LMOVE), as in Redis.
    if c.len() > 1 {
        changes.sort_by_key(|(k, _)| k.as_slice() != c.arg(1));
    }
    for (key, removed) in changes {
        let Some((class, event)) = event_of(spec.name, c, &key) else {
            continue;
        };
        let expiring = ["expire", "pexpire", "expireat", "pexpireat", "getex"].contains(&spec.name);
        if removed && expiring {
            // An expiry time in the past deletes the key: Redis says `del` only.
            tx.event(GENERIC, "del", &key);
            continue;
        }
        tx.event(class, event, &key);
        let set_family = ["set", "setex", "psetex"].contains(&spec.name);
        if set_family
            && !removed
            && (spec.name != "set"
                || c.args()
                    .skip(3)
                    .any(|a| ["ex", "px", "exat", "pxat"].iter().any(|w| is(a, w))))
        {
            tx.event(GENERIC, "expire", &key);
        }
        if removed && event != "del" && event != "rename_from" {
            // A collection command that emptied its key also deletes it.
            tx.event(GENERIC, "del", &key);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;
    use crate::pubsub::Kind;

    /// Every notification the commands publish, as "channel event" lines.
    fn events(k: &mut Kit, flags: &str, cmds: &[&[&str]]) -> Vec<String> {
        k.ok(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        let mb = crate::pubsub::Mailbox::new(99, std::sync::Arc::new(|| {}));
        let shared = k.shared.clone();
        let ps = shared.store.pubsub();
        ps.subscribe(Kind::Pattern, b"__keyspace@0__:*", &mb);
        for c in cmds {
            k.raw(c);
        }
        ps.unsubscribe(Kind::Pattern, b"__keyspace@0__:*", 99);
        let mut raw = Vec::new();
        mb.take_into(&mut raw);
        let mut pos = 0;
        let mut lines = Vec::new();
        while pos < raw.len() {
            let v = crate::cmd::testkit::decode(&raw, &mut pos);
            let crate::cmd::testkit::Value::Arr(parts) = v else {
                panic!("frame")
            };
            lines.push(format!("{:?} {:?}", parts[2], parts[3]));
        }
        lines
            .into_iter()
            .map(|l| {
                l.replace("Str(\"__keyspace@0__:", "")
                    .replace(['"', ')'], "")
            })
            .collect()
    }

    #[test]
    fn commands_publish_redis_events() {
        let mut k = Kit::new();
        let got = events(
            &mut k,
            "KA",
            &[
                &["SET", "foo", "bar", "EX", "100"],
                &["DEL", "foo"],
                &["LPUSH", "l", "a"],
                &["RPOP", "l"],
                &["SADD", "s", "a"],
                &["SREM", "s", "zz"],
                &["HSET", "h", "f", "1"],
                &["HINCRBY", "h", "f", "2"],
                &["ZADD", "z", "1", "a"],
                &["ZINCRBY", "z", "1", "a"],
                &["RENAME", "h", "h2"],
                &["INCR", "n"],
                &["EXPIRE", "n", "-1"],
            ],
        );
        assert_eq!(
            got,
            vec![
                "foo Str(set",
                "foo Str(expire",
                "foo Str(del",
                "l Str(lpush",
                "l Str(rpop",
                "l Str(del",
                "s Str(sadd",
                "h Str(hset",
                "h Str(hincrby",
                "z Str(zadd",
                "z Str(zincr",
                "h Str(rename_from",
                "h2 Str(rename_to",
                "n Str(incrby",
                "n Str(del",
            ]
        );
    }

    #[test]
    fn classes_mask_and_new_keys() {
        let mut k = Kit::new();
        let got = events(
            &mut k,
            "Kln",
            &[
                &["SET", "a", "1"],
                &["RPUSH", "l", "x"],
                &["RPUSH", "l", "y"],
            ],
        );
        assert_eq!(
            got,
            vec!["a Str(new", "l Str(new", "l Str(rpush", "l Str(rpush"]
        );
        // Off: nothing is recorded at all.
        let got = events(&mut k, "", &[&["SET", "b", "1"]]);
        assert!(got.is_empty());
    }

    /// A script's writes publish what the same commands from a client would, in the
    /// database the script selected (database 3's event is not on this channel);
    /// COPY into another database publishes `copy_to` there, not here.
    #[test]
    fn scripts_and_cross_database_copy_publish_events() {
        let mut k = Kit::new();
        let got = events(
            &mut k,
            "KA",
            &[
                &[
                    "EVAL",
                    "redis.call('set', KEYS[1], 'v'); redis.call('select', 3); \
                     redis.call('set', KEYS[1], 'w'); return 1",
                    "1",
                    "s",
                ],
                &["COPY", "s", "c", "DB", "4"],
                &["COPY", "s", "c"],
            ],
        );
        assert_eq!(got, vec!["s Str(set", "c Str(copy_to"]);
        k.expect(&["GET", "s"], "$1\r\nv\r\n");
        k.ok(&["SELECT", "3"]);
        k.expect(&["GET", "s"], "$1\r\nw\r\n");
    }
}
