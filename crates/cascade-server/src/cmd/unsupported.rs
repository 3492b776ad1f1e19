//! What `CascadeKV` does not offer: modules and coordinated FAILOVER. Their commands
//! answer an error naming the family (instead of `unknown command`), so a client or a
//! person sees at once why.

use crate::error::CmdError;

/// Command families not offered, with their commands.
const FAMILIES: &[(&str, &[&str])] = &[("modules", &["module"]), ("replication", &["failover"])];

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
        k.ok(&["CONFIG", "SET", "hash-max-ziplist-value", "16"]);
        k.expect(
            &["CONFIG", "GET", "hash-max-ziplist-value"],
            "*2\r\n$22\r\nhash-max-ziplist-value\r\n$2\r\n16\r\n",
        );
    }
}
