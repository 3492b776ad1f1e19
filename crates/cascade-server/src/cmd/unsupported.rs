//! What `CascadeKV` does not offer: modules and coordinated FAILOVER. Their commands
//! answer an error naming the family (instead of `unknown command`), so a client or a
//! person sees at once why. `MODULE LIST` answers that no module is loaded (clients
//! ask it to find out which features a server has) and `MODULE HELP` says what the
//! command would do; loading and unloading answer the family's error.

use crate::cmd::{is, spec, Ctx, Keys, Run::Ctl, Spec, A};
use crate::error::{CmdError, CmdResult};
use crate::resp::parse::Command;
use crate::resp::reply;

/// Command families not offered, with their commands.
const FAMILIES: &[(&str, &[&str])] = &[("replication", &["failover"])];

/// MODULE.
pub(crate) static SPECS: &[Spec] = &[spec(
    "module",
    -2,
    A,
    Keys::None,
    "server",
    "MODULE LIST (always empty) | HELP; LOAD, LOADEX and UNLOAD are refused.",
    Ctl(module),
)];

fn module(ctx: &mut Ctx<'_>, c: &Command) -> CmdResult<()> {
    let sub = c.arg(1);
    if is(sub, "list") && c.len() == 2 {
        reply::array_header(ctx.out, 0);
    } else if is(sub, "help") && c.len() == 2 {
        let lines: &[&[u8]] = &[
            b"MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            b"LIST",
            b"    The loaded modules: none, CascadeKV does not load modules.",
            b"LOAD <path> [<arg> ...] | LOADEX <path> [CONFIG ...] [ARGS ...] | UNLOAD <name>",
            b"    Refused: CascadeKV does not support modules.",
            b"HELP",
            b"    This text.",
        ];
        reply::bulk_array(ctx.out, lines.iter().copied());
    } else {
        let what = String::from_utf8_lossy(sub).to_ascii_lowercase();
        return Err(CmdError::err(format!(
            "CascadeKV does not support modules (command 'module {what}')"
        )));
    }
    Ok(())
}

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
            &["FAILOVER"],
            "-ERR CascadeKV does not support replication (command 'failover')\r\n",
        );
        k.expect(&["MODULE", "LIST"], "*0\r\n");
        k.expect(
            &["MODULE", "LOAD", "/x.so"],
            "-ERR CascadeKV does not support modules (command 'module load')\r\n",
        );
        k.ok(&["CONFIG", "SET", "hash-max-ziplist-value", "16"]);
        k.expect(
            &["CONFIG", "GET", "hash-max-ziplist-value"],
            "*2\r\n$22\r\nhash-max-ziplist-value\r\n$2\r\n16\r\n",
        );
    }
}
