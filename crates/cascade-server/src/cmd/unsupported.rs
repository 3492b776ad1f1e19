//! What `CascadeKV` does not offer: streams, pub/sub, modules, replication and
//! cluster. Their commands answer an error naming the family (instead of `unknown
//! command`), so a client or a person sees at once why.

use crate::error::CmdError;

/// Command families not offered, with their commands.
const FAMILIES: &[(&str, &[&str])] = &[
    (
        "streams",
        &[
            "xadd",
            "xrange",
            "xrevrange",
            "xlen",
            "xread",
            "xreadgroup",
            "xgroup",
            "xack",
            "xclaim",
            "xautoclaim",
            "xdel",
            "xtrim",
            "xinfo",
            "xpending",
            "xsetid",
        ],
    ),
    (
        "pub/sub",
        &[
            "subscribe",
            "unsubscribe",
            "psubscribe",
            "punsubscribe",
            "publish",
            "pubsub",
            "ssubscribe",
            "sunsubscribe",
            "spublish",
        ],
    ),
    ("modules", &["module"]),
    (
        "replication",
        &[
            "replicaof",
            "slaveof",
            "sync",
            "psync",
            "wait",
            "replconf",
            "failover",
        ],
    ),
    ("cluster", &["cluster", "readonly", "readwrite", "asking"]),
];

/// The error for a command of a family not offered, if `name` is one.
pub(crate) fn family_error(name: &[u8]) -> Option<CmdError> {
    let lower = name.to_ascii_lowercase();
    FAMILIES.iter().find_map(|(family, cmds)| {
        cmds.iter().any(|c| c.as_bytes() == lower).then(|| {
            CmdError::err(format!(
                "CascadeKV does not support {family} (command '{}')",
                String::from_utf8_lossy(&lower)
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn families_are_named() {
        let mut k = Kit::new();
        k.expect(
            &["XADD", "s", "*", "a", "1"],
            "-ERR CascadeKV does not support streams (command 'xadd')\r\n",
        );
        k.expect(
            &["subscribe", "c"],
            "-ERR CascadeKV does not support pub/sub (command 'subscribe')\r\n",
        );
        k.expect(
            &["REPLICAOF", "no", "one"],
            "-ERR CascadeKV does not support replication (command 'replicaof')\r\n",
        );
        k.ok(&["CONFIG", "SET", "hash-max-ziplist-value", "16"]);
        k.expect(
            &["CONFIG", "GET", "hash-max-ziplist-value"],
            "*2\r\n$22\r\nhash-max-ziplist-value\r\n$2\r\n16\r\n",
        );
    }
}
