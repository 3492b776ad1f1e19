//! Replication parameters: `replicaof`, `replica-priority`, `replica-announce-ip`,
//! `replica-announce-port`, `masterauth`, `masteruser`, `repl-timeout`,
//! `repl-backlog-size` — read from the `--config` file at start, changed by
//! `CONFIG SET`, read by `CONFIG GET`, and written back by `CONFIG REWRITE`.
//!
//! The config file uses Redis's syntax (`name value ...` per line, `#` comments).
//! `CONFIG REWRITE` replaces the lines of these parameters and keeps every other line
//! as it was; it writes a temporary file and renames it over the old one, so a crash
//! leaves the old or the new file, never a torn one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{CmdError, CmdResult};

/// Replication parameters (guarded by `Repl::settings`).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The primary to replicate at start (and as `CONFIG REWRITE` records it).
    pub(crate) replicaof: Option<(String, u16)>,
    /// `replica-priority` (Sentinel promotes the lowest non-zero one).
    pub(crate) priority: u64,
    /// `replica-announce-ip`.
    pub(crate) announce_ip: Option<String>,
    /// `replica-announce-port` (0: the listening port).
    pub(crate) announce_port: u16,
    /// `masterauth`.
    pub(crate) masterauth: Option<String>,
    /// `masteruser`.
    pub(crate) masteruser: Option<String>,
    /// `repl-timeout` in seconds.
    pub(crate) timeout_secs: u64,
    /// The file `CONFIG REWRITE` writes (`--config`).
    pub(crate) config_file: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            replicaof: None,
            priority: 100,
            announce_ip: None,
            announce_port: 0,
            masterauth: None,
            masteruser: None,
            timeout_secs: 60,
            config_file: None,
        }
    }
}

/// The names this module answers for in CONFIG GET/SET.
pub(crate) const NAMES: &[&str] = &[
    "replicaof",
    "slaveof",
    "replica-priority",
    "slave-priority",
    "replica-announce-ip",
    "slave-announce-ip",
    "replica-announce-port",
    "slave-announce-port",
    "masterauth",
    "masteruser",
    "repl-timeout",
    "repl-backlog-size",
];

fn canonical(name: &str) -> &str {
    match name {
        "slaveof" => "replicaof",
        "slave-priority" => "replica-priority",
        "slave-announce-ip" => "replica-announce-ip",
        "slave-announce-port" => "replica-announce-port",
        n => n,
    }
}

fn invalid(name: &str, why: &str) -> CmdError {
    CmdError::err(format!(
        "CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// `Ok(None)`: `NO ONE` or empty; `Err`: malformed.
fn parse_host_port(v: &str) -> Result<Option<(String, u16)>, ()> {
    let w: Vec<&str> = v.split_whitespace().collect();
    match w.as_slice() {
        [] => Ok(None),
        [a, b] if a.eq_ignore_ascii_case("no") && b.eq_ignore_ascii_case("one") => Ok(None),
        [h, p] => p
            .parse::<u16>()
            .map(|p| Some(((*h).to_string(), p)))
            .map_err(|_| ()),
        _ => Err(()),
    }
}

impl Settings {
    /// Sets one parameter (`name` lower case; `backlog` gets `repl-backlog-size`).
    /// `replicaof` is only recorded here: the caller changes the role.
    ///
    /// # Errors
    /// An unknown name or a bad value, with Redis's CONFIG SET texts.
    pub(crate) fn set(&mut self, name: &str, v: &str, backlog: &dyn Fn(u64)) -> CmdResult<()> {
        let int = |v: &str| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| invalid(name, "argument couldn't be parsed into an integer"))
        };
        let opt = |v: &str| (!v.is_empty()).then(|| v.to_string());
        match canonical(name) {
            "replicaof" => {
                self.replicaof =
                    parse_host_port(v).map_err(|()| invalid(name, "Invalid master address"))?;
            }
            "replica-priority" => self.priority = int(v)?,
            "replica-announce-ip" => self.announce_ip = opt(v),
            "replica-announce-port" => {
                self.announce_port = u16::try_from(int(v)?)
                    .map_err(|_| invalid(name, "argument must be between 0 and 65535 inclusive"))?;
            }
            "masterauth" => self.masterauth = opt(v),
            "masteruser" => self.masteruser = opt(v),
            "repl-timeout" => self.timeout_secs = int(v)?.max(1),
            "repl-backlog-size" => backlog(
                crate::config::parse_mem(v.trim())
                    .ok_or_else(|| invalid(name, "argument must be a memory value"))?,
            ),
            _ => return Err(CmdError::err(format!("Unknown option '{name}'"))),
        }
        Ok(())
    }

    /// The parameters as CONFIG GET lists them (`backlog`: `repl-backlog-size`).
    pub(crate) fn params(&self, backlog: u64) -> Vec<(&'static str, String)> {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        let of = self
            .replicaof
            .as_ref()
            .map(|(h, p)| format!("{h} {p}"))
            .unwrap_or_default();
        vec![
            ("replicaof", of.clone()),
            ("slaveof", of),
            ("replica-priority", self.priority.to_string()),
            ("slave-priority", self.priority.to_string()),
            ("replica-announce-ip", s(&self.announce_ip)),
            ("slave-announce-ip", s(&self.announce_ip)),
            ("replica-announce-port", self.announce_port.to_string()),
            ("slave-announce-port", self.announce_port.to_string()),
            ("masterauth", s(&self.masterauth)),
            ("masteruser", s(&self.masteruser)),
            ("repl-timeout", self.timeout_secs.to_string()),
            ("repl-backlog-size", backlog.to_string()),
        ]
    }

    /// Reads the replication parameters of a Redis-syntax config file (other lines
    /// are left to whoever owns them; a missing file is an empty one).
    ///
    /// # Errors
    /// The file cannot be read, or a replication line is malformed (with its line).
    pub(crate) fn load(path: &Path, backlog: &dyn Fn(u64)) -> Result<Settings, String> {
        let mut s = Settings {
            config_file: Some(path.to_path_buf()),
            ..Settings::default()
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("reading {}: {e}", path.display())),
        };
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let name = name.to_ascii_lowercase();
            if NAMES.contains(&name.as_str()) {
                let v = rest.trim().trim_matches('"');
                s.set(&name, v, backlog)
                    .map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?;
            }
        }
        Ok(s)
    }

    /// `CONFIG REWRITE`: the file with this module's lines replaced.
    ///
    /// # Errors
    /// No config file (Redis's text), or writing it failed.
    pub(crate) fn rewrite(&self, backlog: u64) -> CmdResult<()> {
        let Some(path) = &self.config_file else {
            return Err(CmdError::err("The server is running without a config file"));
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut out = String::new();
        for line in old.lines() {
            let name = line
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if !NAMES.contains(&name.as_str()) {
                out.push_str(line);
                out.push('\n');
            }
        }
        if let Some((h, p)) = &self.replicaof {
            let _ = writeln!(out, "replicaof {h} {p}");
        }
        let _ = writeln!(out, "replica-priority {}", self.priority);
        if let Some(ip) = &self.announce_ip {
            let _ = writeln!(out, "replica-announce-ip {ip}");
        }
        if self.announce_port != 0 {
            let _ = writeln!(out, "replica-announce-port {}", self.announce_port);
        }
        if let Some(a) = &self.masterauth {
            let _ = writeln!(out, "masterauth \"{a}\"");
        }
        if let Some(u) = &self.masteruser {
            let _ = writeln!(out, "masteruser {u}");
        }
        let _ = writeln!(out, "repl-timeout {}", self.timeout_secs);
        let _ = writeln!(out, "repl-backlog-size {backlog}");
        let tmp = path.with_extension("rewrite.tmp");
        let res = std::fs::write(&tmp, out).and_then(|()| std::fs::rename(&tmp, path));
        res.map_err(|e| CmdError::err(format!("Rewriting config file: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_set_rewrite() {
        let dir = std::env::temp_dir().join(format!("cascade-repl-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test");
        let path = dir.join("node.conf");
        std::fs::write(
            &path,
            "# mine\nport 7000\nslaveof 10.0.0.1 6379\nreplica-priority 7\n",
        )
        .expect("test");
        let s = Settings::load(&path, &|_| {}).expect("test");
        assert_eq!(s.replicaof, Some(("10.0.0.1".into(), 6379)));
        assert_eq!(s.priority, 7);
        let mut s2 = s.clone();
        s2.set("replicaof", "no one", &|_| {}).expect("test");
        s2.set("replica-announce-ip", "1.2.3.4", &|_| {})
            .expect("test");
        assert!(s2.set("replica-priority", "x", &|_| {}).is_err());
        s2.rewrite(1 << 20).expect("test");
        let text = std::fs::read_to_string(&path).expect("test");
        assert!(text.starts_with("# mine\nport 7000\n"), "{text}");
        assert!(
            !text.contains("slaveof") && !text.contains("replicaof"),
            "{text}"
        );
        assert!(text.contains("replica-announce-ip 1.2.3.4\n"), "{text}");
        let s3 = Settings::load(&path, &|_| {}).expect("test");
        assert_eq!(s3.replicaof, None);
        assert_eq!(s3.announce_ip.as_deref(), Some("1.2.3.4"));
        assert!(Settings::default().rewrite(0).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
