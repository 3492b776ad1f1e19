//! The cluster topology an external controller sets (`CLUSTERX SETNODES`, as Apache
//! Kvrocks): the nodes, which primary serves each slot, and the topology version.
//!
//! A SETNODES text is one node a line: `<id> <ip> <port> master|slave <master-id|->
//! [<slot>|<first>-<last> ...]`. Ids are 40 hex characters; slots 0..16383; a slave
//! names its master and owns no slots (it answers for its master's). A [`Topology`] is
//! immutable once built: a change builds a new one and swaps it in (`mod.rs`), so a
//! reader never sees half an update. Invariants after [`Topology::parse`]: every
//! slot is owned by at most one master; every slave's master is a master of the text;
//! ids are unique.

use super::keyslot::SLOTS;

/// No owner in [`Topology::owner`].
const NONE: u16 = u16::MAX;

/// One node of the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    /// 40 hex characters.
    pub(crate) id: String,
    /// Address clients are sent to.
    pub(crate) ip: String,
    /// Port clients are sent to.
    pub(crate) port: u16,
    /// The id of its master (`None`: it is a master).
    pub(crate) master: Option<String>,
}

impl Node {
    /// `ip:port`.
    pub(crate) fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// Nodes and slot owners at one version.
#[derive(Debug, Clone)]
pub(crate) struct Topology {
    /// The controller's version (-1: never set).
    pub(crate) version: i64,
    /// The nodes in the order given.
    pub(crate) nodes: Vec<Node>,
    /// Per slot: the index in `nodes` of the master serving it, or [`NONE`].
    owner: Vec<u16>,
}

impl Default for Topology {
    fn default() -> Self {
        Topology {
            version: -1,
            nodes: Vec::new(),
            owner: vec![NONE; SLOTS],
        }
    }
}

/// True for a 40-character hex node id.
pub(crate) fn valid_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Parses a slot number, with the error Kvrocks gives.
pub(crate) fn parse_slot(s: &str) -> Result<u16, String> {
    s.parse::<u16>()
        .ok()
        .filter(|&n| usize::from(n) < SLOTS)
        .ok_or_else(|| format!("ERR Invalid slot id: {s} (slots are 0 to 16383)"))
}

impl Topology {
    /// Parses a SETNODES text at `version`.
    pub(crate) fn parse(text: &str, version: i64) -> Result<Topology, String> {
        let mut topo = Topology {
            version,
            ..Topology::default()
        };
        let mut slaves = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| format!("ERR Invalid nodes definition, line {}: {why}", n + 1);
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            if fields.len() < 5 {
                return Err(bad(
                    "expected '<id> <ip> <port> master|slave <master-id|-> [slots...]'",
                ));
            }
            if !valid_id(fields[0]) {
                return Err(bad("the node id must be 40 hex characters"));
            }
            if topo.nodes.iter().any(|x| x.id == fields[0]) {
                return Err(bad("duplicate node id"));
            }
            let port = fields[2]
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("invalid port"))?;
            let idx = u16::try_from(topo.nodes.len()).map_err(|_| bad("too many nodes"))?;
            let master = match fields[3].to_ascii_lowercase().as_str() {
                "master" => {
                    if fields[4] != "-" {
                        return Err(bad("a master's master id must be '-'"));
                    }
                    None
                }
                "slave" | "replica" => {
                    if !valid_id(fields[4]) {
                        return Err(bad("a slave must name its master's 40-hex id"));
                    }
                    if fields.len() > 5 {
                        return Err(bad("a slave cannot own slots"));
                    }
                    slaves.push((n + 1, fields[4].to_string()));
                    Some(fields[4].to_string())
                }
                _ => return Err(bad("the role must be master or slave")),
            };
            for r in &fields[5..] {
                let (lo, hi) = match r.split_once('-') {
                    Some(pair) => pair,
                    None => (*r, *r),
                };
                let (lo, hi) = (parse_slot(lo)?, parse_slot(hi)?);
                if lo > hi {
                    return Err(bad(&format!("invalid slot range {r}")));
                }
                for s in lo..=hi {
                    let owner = &mut topo.owner[usize::from(s)];
                    if *owner != NONE {
                        return Err(bad(&format!("slot {s} is assigned twice")));
                    }
                    *owner = idx;
                }
            }
            topo.nodes.push(Node {
                id: fields[0].to_string(),
                ip: fields[1].to_string(),
                port,
                master,
            });
        }
        for (line, m) in slaves {
            if !topo.nodes.iter().any(|x| x.id == m && x.master.is_none()) {
                return Err(format!(
                    "ERR Invalid nodes definition, line {line}: master {m} is not a master of this topology"
                ));
            }
        }
        Ok(topo)
    }

    /// The master serving `slot`, if any.
    pub(crate) fn owner(&self, slot: u16) -> Option<&Node> {
        let i = *self.owner.get(usize::from(slot))?;
        self.nodes.get(usize::from(i))
    }

    /// A node by id.
    pub(crate) fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// A copy with `slot` served by master `id` at `version` (`CLUSTERX SETSLOT`).
    pub(crate) fn with_slot(&self, slot: u16, id: &str, version: i64) -> Result<Topology, String> {
        let i = self
            .nodes
            .iter()
            .position(|n| n.id == id)
            .ok_or_else(|| format!("ERR Invalid node id: {id} is not in the topology"))?;
        if self.nodes[i].master.is_some() {
            return Err(format!(
                "ERR Invalid node id: {id} is a slave, not a master"
            ));
        }
        let mut t = self.clone();
        t.owner[usize::from(slot)] = u16::try_from(i).unwrap_or(NONE);
        t.version = version;
        Ok(t)
    }

    /// Contiguous slot ranges of the master at `idx`, in order.
    pub(crate) fn ranges_of(&self, idx: usize) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (s, &o) in self.owner.iter().enumerate() {
            if usize::from(o) != idx || o == NONE {
                continue;
            }
            let s = u16::try_from(s).unwrap_or(0);
            match out.last_mut() {
                Some((_, b)) if *b + 1 == s => *b = s,
                _ => out.push((s, s)),
            }
        }
        out
    }

    /// Number of slots with an owner.
    pub(crate) fn assigned(&self) -> usize {
        self.owner.iter().filter(|&&o| o != NONE).count()
    }

    /// Masters that serve at least one slot.
    pub(crate) fn serving_masters(&self) -> usize {
        let mut seen = vec![false; self.nodes.len()];
        for &o in &self.owner {
            if o != NONE {
                seen[usize::from(o)] = true;
            }
        }
        seen.iter().filter(|&&b| b).count()
    }

    /// Index of node `id`.
    pub(crate) fn index(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The slaves of master `id`.
    pub(crate) fn slaves_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |n| n.master.as_deref() == Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

    #[test]
    fn parses_masters_slaves_and_ranges() {
        let text = format!(
            "{A} 127.0.0.1 7001 master - 0-5460 5462\n{B} 127.0.0.1 7002 master - 5461 5463-16383\n{C} 127.0.0.1 7003 slave {A}\n"
        );
        let t = Topology::parse(&text, 3).expect("parse");
        assert_eq!(t.version, 3);
        assert_eq!(t.assigned(), 16384);
        assert_eq!(t.owner(0).map(|n| n.port), Some(7001));
        assert_eq!(t.owner(5461).map(|n| n.port), Some(7002));
        assert_eq!(t.owner(5462).map(|n| n.port), Some(7001));
        assert_eq!(t.ranges_of(0), vec![(0, 5460), (5462, 5462)]);
        assert_eq!(t.slaves_of(A).count(), 1);
        assert_eq!(t.serving_masters(), 2);
        let t2 = t.with_slot(0, B, 4).expect("setslot");
        assert_eq!(t2.owner(0).map(|n| n.port), Some(7002));
        assert!(t.with_slot(0, C, 4).is_err());
    }

    #[test]
    fn refuses_bad_lines() {
        for bad in [
            format!("{A} 127.0.0.1 7001 master - 0-16384"),
            format!("{A} 127.0.0.1 7001 master - 5-3"),
            format!("{A} 127.0.0.1 7001 boss - 1"),
            format!("{A} 127.0.0.1 notaport master - 1"),
            "abc 127.0.0.1 7001 master - 1".to_string(),
            format!("{A} 127.0.0.1 7001 master - 1\n{B} 127.0.0.1 7002 master - 1"),
            format!("{A} 127.0.0.1 7001 slave {B}"),
            format!("{A} 127.0.0.1 7001"),
        ] {
            let e = Topology::parse(&bad, 1).expect_err(&bad);
            assert!(e.starts_with("ERR Invalid"), "{e}");
        }
    }
}
