//! The cluster nodes file: what `CLUSTERX SETNODEID`, `SETNODES`, `SETSLOT` and a
//! finished migration set, kept in `<dir>/nodes.conf` so that a restarted node comes
//! back with the same id, topology, version and moved slots (as Kvrocks keeps its
//! `nodes.conf`), and `cluster-enabled yes` read from a `--config` file.
//!
//! The file is text (`docs/formats.md` §15) and is replaced whole on every change:
//! written to `nodes.conf.tmp`, fsynced, renamed over `nodes.conf`, then the directory
//! is fsynced, so a crash leaves the old file or the new one, never a mix. It is
//! written under the view's write lock (`Cluster::update`), before the new view is
//! published: a change a client saw acknowledged is on disk, and two changes reach
//! the file in the order they were made.
//!
//! State: the file's path, set once at start (`Cluster::nodes_file`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::topology::{parse_slot, valid_id, Topology};
use super::View;

/// The file's name in the data directory.
pub(crate) const FILE: &str = "nodes.conf";

/// A failure to write the nodes file; the change it carried is not made.
#[derive(Debug)]
pub(crate) struct PersistError(pub(crate) String);

impl From<PersistError> for String {
    fn from(e: PersistError) -> String {
        e.0
    }
}

impl From<PersistError> for crate::error::CmdError {
    fn from(e: PersistError) -> Self {
        crate::error::CmdError::Msg(e.0)
    }
}

/// The file's text for `v`.
pub(crate) fn encode(v: &View) -> String {
    let mut o = String::from(
        "# CascadeKV cluster nodes file (docs/formats.md §15); written by CLUSTERX, \
         do not edit while the node runs\n",
    );
    let _ = writeln!(o, "version {}", v.topo.version);
    if let Some(id) = &v.myid {
        let _ = writeln!(o, "myid {id}");
    }
    for (i, n) in v.topo.nodes.iter().enumerate() {
        let _ = write!(o, "node {} {} {}", n.id, n.ip, n.port);
        if let Some(m) = &n.master {
            let _ = write!(o, " slave {m}");
        } else {
            o.push_str(" master -");
            for (a, b) in v.topo.ranges_of(i) {
                if a == b {
                    let _ = write!(o, " {a}");
                } else {
                    let _ = write!(o, " {a}-{b}");
                }
            }
        }
        o.push('\n');
    }
    let mut migrated: Vec<_> = v.migrated.iter().collect();
    migrated.sort_unstable();
    for (slot, &i) in migrated {
        if let Some(n) = v.topo.nodes.get(i) {
            let _ = writeln!(o, "migrated {slot} {}", n.id);
        }
    }
    let mut imported: Vec<_> = v.imported.iter().collect();
    imported.sort_unstable();
    for slot in imported {
        let _ = writeln!(o, "imported {slot}");
    }
    o
}

/// Parses the file's text.
///
/// # Errors
/// A line that does not parse, with its number.
pub(crate) fn decode(text: &str) -> Result<View, String> {
    let mut version = -1i64;
    let mut myid = None;
    let mut nodes = String::new();
    let mut migrated = Vec::new();
    let mut imported = std::collections::HashSet::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: cannot parse '{line}'", n + 1);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "version" => version = rest.trim().parse().map_err(|_| bad())?,
            "myid" if valid_id(rest.trim()) => myid = Some(rest.trim().to_string()),
            "node" => {
                nodes.push_str(rest);
                nodes.push('\n');
            }
            "migrated" => {
                let (slot, id) = rest.split_once(' ').ok_or_else(bad)?;
                migrated.push((parse_slot(slot)?, id.trim().to_string()));
            }
            "imported" => {
                imported.insert(parse_slot(rest.trim())?);
            }
            _ => return Err(bad()),
        }
    }
    let topo = if version < 0 {
        Topology::default()
    } else {
        Topology::parse(&nodes, version)?
    };
    let mut v = View {
        topo,
        myid,
        imported,
        ..View::default()
    };
    for (slot, id) in migrated {
        let i = v
            .topo
            .index(&id)
            .ok_or_else(|| format!("migrated slot {slot}: node {id} is not in the topology"))?;
        v.migrated.insert(slot, i);
    }
    Ok(v)
}

/// Writes `v` to `path` atomically (temp file, fsync, rename, fsync of the directory).
///
/// # Errors
/// The write failed; the text says which file.
pub(crate) fn write(path: &Path, v: &View) -> Result<(), PersistError> {
    let err = |e: std::io::Error| {
        PersistError(format!(
            "ERR cannot save the cluster nodes file {}: {e}",
            path.display()
        ))
    };
    let tmp = path.with_extension("conf.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(encode(v).as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(err)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(err)?;
    }
    Ok(())
}

/// Reads the nodes file of data directory `dir`, if there is one.
///
/// # Errors
/// Reading or parsing failed (the start is refused: a node must not come back with a
/// topology other than the one it acknowledged).
pub(crate) fn read(dir: &Path) -> Result<(PathBuf, Option<View>), String> {
    let path = dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => decode(&text)
            .map(|v| (path.clone(), Some(v)))
            .map_err(|e| format!("the cluster nodes file {} is damaged: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((path, None)),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// `cluster-enabled yes|no` in a Redis-syntax config file (`--config`); `false` when
/// the file or the line is absent.
///
/// # Errors
/// The file cannot be read, or the value is neither yes nor no.
pub(crate) fn enabled_in_config(path: Option<&Path>) -> Result<bool, String> {
    let Some(path) = path else {
        return Ok(false);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let mut on = false;
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        if words
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("cluster-enabled"))
        {
            let v = words.next().unwrap_or("").trim_matches('"');
            on = match v.to_ascii_lowercase().as_str() {
                "yes" => true,
                "no" => false,
                _ => {
                    return Err(format!(
                        "{} line {}: cluster-enabled must be yes or no",
                        path.display(),
                        i + 1
                    ))
                }
            };
        }
    }
    Ok(on)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

    #[test]
    fn round_trip() {
        let text = format!(
            "{A} 127.0.0.1 7001 master - 0-5460 5462\n{B} 127.0.0.1 7002 master - 5461 5463-16383\n{C} 127.0.0.1 7003 slave {A}\n"
        );
        let mut v = View {
            topo: Topology::parse(&text, 7).expect("test"),
            myid: Some(C.into()),
            ..View::default()
        };
        v.migrated.insert(5, 1);
        v.imported.insert(9);
        let back = decode(&encode(&v)).expect("test");
        assert_eq!(encode(&back), encode(&v));
        assert_eq!(back.topo.version, 7);
        assert_eq!(back.myid.as_deref(), Some(C));
        assert_eq!(back.topo.ranges_of(0), vec![(0, 5460), (5462, 5462)]);
        assert_eq!(back.migrated.get(&5), Some(&1));
        assert!(back.imported.contains(&9));
        // Never set: an empty view.
        let empty = decode(&encode(&View::default())).expect("test");
        assert_eq!(empty.topo.version, -1);
        assert!(empty.myid.is_none());
        assert!(decode("version x\n").is_err());
        assert!(decode("bogus 1\n").is_err());
    }

    #[test]
    fn cluster_enabled_from_a_config_file() {
        let dir = std::env::temp_dir().join(format!("cascade-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test");
        let f = dir.join("c.conf");
        std::fs::write(&f, "port 1\ncluster-enabled yes\n").expect("test");
        assert_eq!(enabled_in_config(Some(&f)), Ok(true));
        std::fs::write(&f, "cluster-enabled \"no\"\n").expect("test");
        assert_eq!(enabled_in_config(Some(&f)), Ok(false));
        std::fs::write(&f, "cluster-enabled maybe\n").expect("test");
        assert!(enabled_in_config(Some(&f)).is_err());
        assert_eq!(enabled_in_config(None), Ok(false));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
