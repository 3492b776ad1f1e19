//! What `CascadeKV` does not offer: scripting and functions, modules,
//! replication and cluster. Their commands answer an error naming the family (instead
//! of `unknown command`), so a client or a person sees at once why. `FUNCTION FLUSH`
//! and `FUNCTION LIST` are accepted (there are never functions to flush or list), as
//! test suites and clients call them to reset a server.

use super::{is, spec, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

/// Command families not offered, with their commands.
const FAMILIES: &[(&str, &[&str])] = &[
    (
        "scripting",
        &[
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "script",
            "fcall",
            "fcall_ro",
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

/// `FUNCTION`.
pub(crate) static SPECS: &[Spec] = &[spec(
    "function",
    -2,
    A,
    Keys::None,
    "scripting",
    "FUNCTION FLUSH and LIST (no functions exist: scripting is not offered).",
    Ctl(function),
)];

fn function(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "flush") && c.len() <= 3 {
        reply::ok(ctx.out);
    } else if is(sub, "list") {
        reply::array_header(ctx.out, 0);
    } else {
        return Err(CmdError::err(
            "CascadeKV does not support scripting (command 'function')",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn families_are_named() {
        let mut k = Kit::new();
        k.expect(
            &["EVAL", "return 1", "0"],
            "-ERR CascadeKV does not support scripting (command 'eval')\r\n",
        );
        k.expect(
            &["REPLICAOF", "no", "one"],
            "-ERR CascadeKV does not support replication (command 'replicaof')\r\n",
        );
        k.ok(&["FUNCTION", "FLUSH"]);
        k.expect(&["FUNCTION", "LIST"], "*0\r\n");
        k.expect(
            &["FUNCTION", "LOAD", "x"],
            "-ERR CascadeKV does not support scripting (command 'function')\r\n",
        );
        k.ok(&["CONFIG", "SET", "hash-max-ziplist-value", "16"]);
        k.expect(
            &["CONFIG", "GET", "hash-max-ziplist-value"],
            "*2\r\n$22\r\nhash-max-ziplist-value\r\n$2\r\n16\r\n",
        );
    }
}
