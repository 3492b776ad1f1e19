//! Cluster mode with real processes: three `cascade serve --cluster-enabled` primaries
//! whose topology the test sets with CLUSTERX as a controller would; errors for bad
//! topology input; redirects (MOVED, CROSSSLOT, CLUSTERDOWN) for every kind of
//! command; a slave line (READONLY reads); redis-py's `RedisCluster`, go-redis's
//! `ClusterClient` and `redis-cli --cluster check`; a slot migration under
//! concurrent writes checked by an oracle (no acknowledged write lost, none applied
//! twice, no key on two nodes); and three primaries with a replica each (real
//! replication): WAIT, READONLY reads on replicas, MOVED writes, redis-py reading
//! from replicas.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect_addr, Client, Reply, Server};

const IDS: [&str; 4] = [
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2",
    "ccccccccccccccccccccccccccccccccccccccc3",
    "ddddddddddddddddddddddddddddddddddddddd4",
];

/// Three primaries (slots 0-5460, 5461-10922, 10923-16383) at version 1.
struct Cluster {
    nodes: Vec<Server>,
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| Server::start(&["--cluster-enabled"]))
            .collect();
        let c = Cluster { nodes };
        for (i, n) in c.nodes.iter().enumerate() {
            let mut cl = n.connect();
            assert_eq!(ok(&mut cl, &["CLUSTERX", "SETNODEID", IDS[i]]), "OK");
        }
        c.set(&c.layout(None), 1);
        c
    }

    fn layout(&self, slave: Option<u16>) -> String {
        let p = |i: usize| self.nodes[i].port;
        let mut s = format!(
            "{} 127.0.0.1 {} master - 0-5460\n{} 127.0.0.1 {} master - 5461-10922\n{} 127.0.0.1 {} master - 10923-16383",
            IDS[0], p(0), IDS[1], p(1), IDS[2], p(2)
        );
        if let Some(port) = slave {
            s.push_str(&format!("\n{} 127.0.0.1 {port} slave {}", IDS[3], IDS[0]));
        }
        s
    }

    fn set(&self, layout: &str, version: i64) {
        for n in &self.nodes {
            let mut cl = n.connect();
            let r = cl.cmd(&["CLUSTERX", "SETNODES", layout, &version.to_string()]);
            assert_eq!(r, Reply::Simple("OK".into()));
        }
    }

    fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(Server::addr).collect()
    }

    fn by_port(&self, port: u16) -> &Server {
        self.nodes.iter().find(|n| n.port == port).expect("node")
    }
}

fn ok(c: &mut Client, args: &[&str]) -> String {
    match c.cmd(args) {
        Reply::Simple(s) => s,
        Reply::Bulk(Some(b)) => String::from_utf8(b).expect("utf8"),
        r => panic!("{args:?}: {r:?}"),
    }
}

fn err(c: &mut Client, args: &[&str]) -> String {
    match c.cmd(args) {
        Reply::Error(e) => e,
        r => panic!("{args:?}: expected an error, got {r:?}"),
    }
}

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Int(n) => n,
        r => panic!("{args:?}: {r:?}"),
    }
}

/// Runs `args` on the cluster from `start`, following MOVED/ASK and waiting out
/// TRYAGAIN, as a cluster client does. Connections are cached by address.
fn route(conns: &mut HashMap<String, Client>, start: &str, args: &[&str]) -> Reply {
    let mut addr = start.to_string();
    let mut asking = false;
    for _ in 0..500 {
        let c = conns
            .entry(addr.clone())
            .or_insert_with(|| connect_addr(&addr));
        if asking {
            c.cmd(&["ASKING"]);
        }
        match c.cmd(args) {
            Reply::Error(e) if e.starts_with("MOVED ") || e.starts_with("ASK ") => {
                asking = e.starts_with("ASK ");
                addr = e.split(' ').nth(2).expect("addr").to_string();
            }
            Reply::Error(e) if e.starts_with("TRYAGAIN") => {
                std::thread::sleep(Duration::from_millis(2));
            }
            r => return r,
        }
    }
    panic!("{args:?}: too many redirects");
}

fn python(script: &str) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("python3");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn topology_commands_and_bad_input() {
    let c = Cluster::start();
    let mut a = c.nodes[0].connect();
    // Node ids and versions.
    assert_eq!(ok(&mut a, &["CLUSTER", "MYID"]), IDS[0]);
    assert_eq!(int(&mut a, &["CLUSTERX", "VERSION"]), 1);
    let e = err(&mut a, &["CLUSTERX", "SETNODEID", "abc"]);
    assert!(e.contains("Invalid node id"), "{e}");
    // A version that is not newer is refused and changes nothing; FORCE sets it.
    let layout = c.layout(None);
    let e = err(&mut a, &["CLUSTERX", "SETNODES", &layout, "1"]);
    assert!(e.starts_with("ERR Invalid cluster version"), "{e}");
    let e = err(&mut a, &["CLUSTERX", "SETNODES", &layout, "0"]);
    assert!(e.starts_with("ERR Invalid cluster version"), "{e}");
    let e = err(&mut a, &["CLUSTERX", "SETNODES", &layout, "x"]);
    assert!(e.starts_with("ERR Invalid cluster version"), "{e}");
    assert_eq!(
        ok(&mut a, &["CLUSTERX", "SETNODES", &layout, "1", "FORCE"]),
        "OK"
    );
    // Malformed node lines.
    for (bad, why) in [
        (format!("{} 127.0.0.1 1 master - 0-16384", IDS[0]), "slot"),
        (format!("{} 127.0.0.1 1 chief - 0", IDS[0]), "role"),
        ("xyz 127.0.0.1 1 master - 0".to_string(), "40 hex"),
        (format!("{} 127.0.0.1", IDS[0]), "expected"),
        (
            format!("{} 127.0.0.1 1 slave {}", IDS[0], IDS[1]),
            "not a master",
        ),
        (
            format!(
                "{} 127.0.0.1 1 master - 5\n{} 127.0.0.1 2 master - 5",
                IDS[0], IDS[1]
            ),
            "assigned twice",
        ),
    ] {
        let e = err(&mut a, &["CLUSTERX", "SETNODES", &bad, "9"]);
        assert!(
            e.starts_with("ERR Invalid") && e.contains(why),
            "{bad}: {e}"
        );
    }
    assert_eq!(int(&mut a, &["CLUSTERX", "VERSION"]), 1);
    // SETSLOT: unknown node, slot out of range, wrong version.
    let e = err(&mut a, &["CLUSTERX", "SETSLOT", "5", "NODE", IDS[3], "2"]);
    assert!(e.contains("Invalid node id"), "{e}");
    let e = err(
        &mut a,
        &["CLUSTERX", "SETSLOT", "16384", "NODE", IDS[1], "2"],
    );
    assert!(e.contains("Invalid slot id"), "{e}");
    let e = err(&mut a, &["CLUSTERX", "SETSLOT", "5", "NODE", IDS[1], "7"]);
    assert!(e.contains("Invalid cluster version"), "{e}");
    let e = err(&mut a, &["CLUSTERX", "MIGRATE", "6000", IDS[2]]);
    assert!(e.contains("not served by this node"), "{e}");
    let e = err(&mut a, &["CLUSTERX", "MIGRATE", "5", IDS[3]]);
    assert!(e.contains("Invalid node id"), "{e}");

    // What cluster clients read.
    let info = ok(&mut a, &["CLUSTER", "INFO"]);
    for want in [
        "cluster_state:ok",
        "cluster_slots_assigned:16384",
        "cluster_known_nodes:3",
        "cluster_size:3",
        "cluster_current_epoch:1",
        "cluster_my_epoch:1",
    ] {
        assert!(info.contains(want), "{want} in {info}");
    }
    let nodes = ok(&mut a, &["CLUSTER", "NODES"]);
    let mine = format!(
        "{} 127.0.0.1:{}@{} myself,master - 0 0 1 connected 0-5460\n",
        IDS[0],
        c.nodes[0].port,
        u32::from(c.nodes[0].port) + 10000
    );
    assert!(nodes.starts_with(&mine), "{nodes}");
    assert_eq!(nodes.lines().count(), 3);
    match a.cmd(&["CLUSTER", "SLOTS"]) {
        Reply::Array(Some(v)) => {
            assert_eq!(v.len(), 3);
            let Reply::Array(Some(e)) = &v[1] else {
                panic!("{v:?}")
            };
            assert_eq!(e[0], Reply::Int(5461));
            assert_eq!(e[1], Reply::Int(10922));
            assert_eq!(
                e[2],
                Reply::Array(Some(vec![
                    Reply::Bulk(Some(b"127.0.0.1".to_vec())),
                    Reply::Int(i64::from(c.nodes[1].port)),
                    Reply::Bulk(Some(IDS[1].as_bytes().to_vec())),
                ]))
            );
        }
        r => panic!("{r:?}"),
    }
    match a.cmd(&["CLUSTER", "SHARDS"]) {
        Reply::Array(Some(v)) => assert_eq!(v.len(), 3),
        r => panic!("{r:?}"),
    }
    assert_eq!(int(&mut a, &["CLUSTER", "KEYSLOT", "foo"]), 12182);
    assert_eq!(
        int(&mut a, &["CLUSTER", "KEYSLOT", "{user1000}.following"]),
        3443
    );
    let info = ok(&mut a, &["INFO", "cluster"]);
    assert!(info.contains("cluster_enabled:1"), "{info}");
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "cluster-enabled"]),
        Reply::Array(Some(vec![
            Reply::Bulk(Some(b"cluster-enabled".to_vec())),
            Reply::Bulk(Some(b"yes".to_vec())),
        ]))
    );

    // Redirects, for every kind of command.
    let moved_foo = format!("MOVED 12182 127.0.0.1:{}", c.nodes[2].port);
    assert_eq!(err(&mut a, &["SET", "foo", "1"]), moved_foo);
    assert_eq!(err(&mut a, &["GET", "foo"]), moved_foo);
    assert_eq!(err(&mut a, &["BLPOP", "foo", "0"]), moved_foo);
    assert_eq!(err(&mut a, &["EVAL", "return 1", "1", "foo"]), moved_foo);
    assert_eq!(
        err(&mut a, &["MSET", "a", "1", "b", "2"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(ok(&mut a, &["MSET", "{b}1", "1", "{b}2", "2"]), "OK");
    assert_eq!(
        int(
            &mut a,
            &["EVAL", "return redis.call('incr', KEYS[1])", "1", "{b}1"]
        ),
        2
    );
    assert_eq!(
        err(&mut a, &["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    );
    assert_eq!(ok(&mut a, &["SELECT", "0"]), "OK");
    // Only database 0 exists in cluster mode.
    assert_eq!(
        err(&mut a, &["SWAPDB", "0", "1"]),
        "ERR SWAPDB is not allowed in cluster mode"
    );
    assert_eq!(
        err(&mut a, &["MOVE", "{b}1", "1"]),
        "ERR MOVE is not allowed in cluster mode"
    );
    assert_eq!(
        err(&mut a, &["COPY", "{b}1", "{b}3", "DB", "1"]),
        "ERR Copying to another database is not allowed in cluster mode"
    );
    assert_eq!(int(&mut a, &["COPY", "{b}1", "{b}3", "DB", "0"]), 1);
    assert_eq!(int(&mut a, &["DEL", "{b}3"]), 1);
    // MULTI: a queued command for another node flags the transaction; keys of two
    // slots in one EXEC are CROSSSLOT and discard it.
    assert_eq!(ok(&mut a, &["MULTI"]), "OK");
    assert_eq!(err(&mut a, &["SET", "foo", "1"]), moved_foo);
    assert!(err(&mut a, &["EXEC"]).starts_with("EXECABORT"));
    assert_eq!(ok(&mut a, &["MULTI"]), "OK");
    assert_eq!(ok(&mut a, &["SET", "{b}1", "x"]), "QUEUED");
    assert_eq!(ok(&mut a, &["SET", "{user1000}1", "y"]), "QUEUED");
    assert_eq!(
        err(&mut a, &["EXEC"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    assert_eq!(ok(&mut a, &["GET", "{b}1"]), "2");
    assert!(err(&mut a, &["EXEC"]).contains("EXEC without MULTI"));
    assert_eq!(int(&mut a, &["CLUSTER", "COUNTKEYSINSLOT", "3300"]), 2);
    match a.cmd(&["CLUSTER", "GETKEYSINSLOT", "3300", "10"]) {
        Reply::Array(Some(v)) => assert_eq!(v.len(), 2),
        r => panic!("{r:?}"),
    }
    let e = err(&mut a, &["CLUSTER", "COUNTKEYSINSLOT", "16384"]);
    assert_eq!(e, "ERR Invalid slot");

    // A slot nobody serves; then a node before any topology.
    let partial = c.layout(None).replace(" 0-5460", " 1-5460");
    c.set(&partial, 2);
    assert_eq!(
        err(&mut a, &["SET", "{k596}", "1"]),
        "CLUSTERDOWN Hash slot not served",
        "slot {}",
        int(&mut a, &["CLUSTER", "KEYSLOT", "{k596}"])
    );
    assert!(ok(&mut a, &["CLUSTER", "INFO"]).contains("cluster_state:fail"));
    let fresh = Server::start(&["--cluster-enabled"]);
    let mut f = fresh.connect();
    assert!(err(&mut f, &["GET", "x"]).starts_with("CLUSTERDOWN"));
    assert_eq!(int(&mut f, &["CLUSTERX", "VERSION"]), -1);
    let plain = Server::start(&[]);
    let mut p = plain.connect();
    assert_eq!(
        err(&mut p, &["CLUSTER", "INFO"]),
        "ERR This instance has cluster support disabled"
    );
    assert!(ok(&mut p, &["INFO", "cluster"]).contains("cluster_enabled:0"));

    // A slave line: the fourth node replicates the first. It answers for its
    // master's slots: writes MOVED to the master, reads after READONLY.
    let slave = Server::start(&["--cluster-enabled"]);
    let mut s = slave.connect();
    assert_eq!(ok(&mut s, &["CLUSTERX", "SETNODEID", IDS[3]]), "OK");
    let with_slave = c.layout(Some(slave.port));
    c.set(&with_slave, 3);
    assert_eq!(
        ok(&mut s, &["CLUSTERX", "SETNODES", &with_slave, "3"]),
        "OK"
    );
    let moved_b = format!("MOVED 3300 127.0.0.1:{}", c.nodes[0].port);
    assert_eq!(err(&mut s, &["SET", "{b}1", "z"]), moved_b);
    assert_eq!(err(&mut s, &["GET", "{b}1"]), moved_b);
    assert_eq!(ok(&mut s, &["READONLY"]), "OK");
    assert_eq!(s.cmd(&["GET", "{b}1"]), Reply::Bulk(None)); // no replication here
    assert_eq!(err(&mut s, &["SET", "{b}1", "z"]), moved_b);
    assert_eq!(err(&mut s, &["GET", "foo"]), moved_foo);
    assert_eq!(ok(&mut s, &["READWRITE"]), "OK");
    assert_eq!(err(&mut s, &["GET", "{b}1"]), moved_b);
    match s.cmd(&["CLUSTER", "SLOTS"]) {
        Reply::Array(Some(v)) => {
            let Reply::Array(Some(e)) = &v[0] else {
                panic!("{v:?}")
            };
            assert_eq!(e.len(), 4, "master and its slave: {e:?}");
        }
        r => panic!("{r:?}"),
    }
    let nodes = ok(&mut s, &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(&format!(
            "{} 127.0.0.1:{}@{} myself,slave {}",
            IDS[3],
            slave.port,
            u32::from(slave.port) + 10000,
            IDS[0]
        )),
        "{nodes}"
    );
}

#[test]
fn redis_py_go_redis_and_redis_cli() {
    let c = Cluster::start();
    let addr = c.addrs();
    let (host, port) = addr[1].split_once(':').expect("addr");
    let out = python(&format!(
        r#"
import redis
from redis.cluster import RedisCluster
rc = RedisCluster(host="{host}", port={port}, decode_responses=True)
assert len(rc.get_primaries()) == 3, rc.get_nodes()
for i in range(600):
    rc.set(f"key:{{i}}", i)
for i in range(600):
    assert rc.get(f"key:{{i}}") == str(i), i
# Keys went to all three primaries.
sizes = [rc.dbsize(target_nodes=n) for n in rc.get_primaries()]
assert sum(sizes) == 600 and all(s > 100 for s in sizes), sizes
assert rc.mget_nonatomic([f"key:{{i}}" for i in range(50)]) == [str(i) for i in range(50)]
p = rc.pipeline()
for i in range(100):
    p.incr(f"ctr:{{i}}")
assert p.execute() == [1] * 100
assert rc.keyslot("foo") == 12182
assert rc.cluster_keyslot("foo") == 12182
# A transaction in one slot.
with rc.pipeline(transaction=True) as t:
    t.set("{{u}}a", 1).incr("{{u}}a").get("{{u}}a")
    r = t.execute()
    assert r[1:] == [2, "2"] and r[0] in (True, "OK"), r
try:
    rc.execute_command("MSET", "a", 1, "b", 2, target_nodes=rc.get_primaries()[0])
    raise SystemExit("no CROSSSLOT")
except redis.exceptions.ClusterCrossSlotError as e:
    # redis-py maps the -CROSSSLOT prefix to this class.
    assert "same slot" in str(e), e
# A slot migration while redis-py writes to it: the client follows -TRYAGAIN and
# -MOVED by itself, and every acknowledged INCR is counted once.
import threading
slot = rc.keyslot("{{py}}")
src = rc.nodes_manager.get_node_from_slot(slot)
dst = [n for n in rc.get_primaries() if n.name != src.name][0]
ids = {{}}
for n in rc.get_primaries():
    ids[n.name] = redis.Redis(host=n.host, port=n.port).execute_command("CLUSTER", "MYID").decode()
stop = threading.Event()
acked = {{}}
def writer():
    i = 0
    while not stop.is_set():
        k = f"{{{{py}}}}:{{i % 100}}"
        assert rc.incr(k) == acked.get(k, 0) + 1, k
        acked[k] = acked.get(k, 0) + 1
        i += 1
t = threading.Thread(target=writer)
t.start()
import time
time.sleep(0.2)
direct = redis.Redis(host=src.host, port=src.port, decode_responses=True)
assert direct.execute_command("CLUSTERX", "MIGRATE", slot, ids[dst.name]) == "OK"
for _ in range(1500):
    info = direct.execute_command("CLUSTER", "INFO")
    if "migrating_state:start" not in info:
        break
    time.sleep(0.02)
assert "migrating_state:success" in info, info
for n in rc.get_primaries():
    c = redis.Redis(host=n.host, port=n.port)
    assert c.execute_command("CLUSTERX", "SETSLOT", slot, "NODE", ids[dst.name], 2) == b"OK"
time.sleep(0.3)
stop.set()
t.join()
assert sum(acked.values()) > 50, acked
d = redis.Redis(host=dst.host, port=dst.port, decode_responses=True)
for k, v in acked.items():
    assert d.get(k) == str(v), (k, v, d.get(k))
assert direct.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
print("ok", sizes, "migrated with", sum(acked.values()), "writes")
"#
    ));
    assert!(out.contains("ok"), "{out}");

    // go-redis's ClusterClient.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goredis");
    let out = std::process::Command::new("go")
        .args(["run", "./cluster", &addr.join(",")])
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("ok"), "{text}");

    // redis-cli --cluster check agrees with the topology.
    let out = std::process::Command::new(common::require_tool("redis-cli"))
        .args(["--cluster", "check", &addr[0]])
        .output()
        .expect("redis-cli");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    for want in [
        "[OK] All nodes agree about slots configuration.",
        "[OK] All 16384 slots covered.",
        "5461 slots",
        "5462 slots",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    assert!(!text.contains("[ERR]"), "{text}");
}

#[test]
fn slot_migration_under_load_loses_nothing() {
    let c = Cluster::start();
    let mut conns = HashMap::new();
    let start = c.nodes[0].addr();
    // Slot of tag "m", its owner, and a destination.
    let slot = match route(&mut conns, &start, &["CLUSTER", "KEYSLOT", "{m}"]) {
        Reply::Int(n) => u16::try_from(n).expect("slot"),
        r => panic!("{r:?}"),
    };
    let src_i = usize::from(slot > 5460) + usize::from(slot > 10922);
    let dst_i = (src_i + 1) % 3;
    // 20,000 keys of every type in the slot, some with a TTL.
    let mut src = c.nodes[src_i].connect();
    for i in 0..20_000 {
        let k = format!("{{m}}:s{i}");
        src.send(&[b"SET", k.as_bytes(), b"v0"]);
    }
    for _ in 0..20_000 {
        assert_eq!(src.read(), Some(Reply::Simple("OK".into())));
    }
    assert_eq!(int(&mut src, &["RPUSH", "{m}:list", "a", "b", "c"]), 3);
    assert_eq!(int(&mut src, &["HSET", "{m}:hash", "f", "v", "g", "w"]), 2);
    assert_eq!(int(&mut src, &["ZADD", "{m}:zset", "1", "x", "2", "y"]), 2);
    assert_eq!(ok(&mut src, &["SET", "{m}:ttl", "t", "PX", "600000"]), "OK");
    // Writers: INCR counters and SET values in the slot (and elsewhere), counting
    // what was acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let addrs = c.addrs();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (stop, start) = (stop.clone(), addrs[w % 3].clone());
            std::thread::spawn(move || {
                let mut conns = HashMap::new();
                let mut acked = vec![0i64; 50];
                let mut last = HashMap::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let i = (n as usize * 7 + w) % 50;
                    let k = format!("{{m}}:ctr{w}:{i}");
                    match route(&mut conns, &start, &["INCR", &k]) {
                        Reply::Int(v) => {
                            acked[i] += 1;
                            assert_eq!(v, acked[i], "{k}: a write lost or applied twice");
                        }
                        r => panic!("{k}: {r:?}"),
                    }
                    // Each writer has its own quarter of the keys (index = w mod 4), so
                    // the last value this writer set is the key's last value.
                    let k = format!("{{m}}:s{}", (n * 13 % 5_000) * 4 + w as u64);
                    let v = format!("w{w}n{n}");
                    assert_eq!(
                        route(&mut conns, &start, &["SET", &k, &v]),
                        Reply::Simple("OK".into())
                    );
                    last.insert(k, v);
                    let other = format!("other{w}:{n}");
                    assert_eq!(
                        route(&mut conns, &start, &["SET", &other, "1"]),
                        Reply::Simple("OK".into())
                    );
                    n += 1;
                }
                (w, acked, last, n)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // The controller: MIGRATE on the source, wait for success, then SETSLOT on all.
    let t0 = Instant::now();
    assert_eq!(
        ok(
            &mut src,
            &["CLUSTERX", "MIGRATE", &slot.to_string(), IDS[dst_i]]
        ),
        "OK"
    );
    let info = loop {
        let info = ok(&mut src, &["CLUSTER", "INFO"]);
        if !info.contains("migrating_state:start") {
            break info;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{info}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(info.contains("migrating_state:success"), "{info}");
    assert!(
        info.contains(&format!("migrating_slot(s):{slot}")),
        "{info}"
    );
    assert!(
        info.contains(&format!("destination_node:{}", IDS[dst_i])),
        "{info}"
    );
    let migrated_in = t0.elapsed();
    // Before the controller updates the topology: the source sends clients to the
    // destination, which serves the slot.
    let moved = err(&mut src, &["GET", "{m}:list"]);
    assert_eq!(
        moved,
        format!("MOVED {slot} 127.0.0.1:{}", c.nodes[dst_i].port)
    );
    std::thread::sleep(Duration::from_millis(200));
    for n in &c.nodes {
        let mut cl = n.connect();
        assert_eq!(
            ok(
                &mut cl,
                &[
                    "CLUSTERX",
                    "SETSLOT",
                    &slot.to_string(),
                    "NODE",
                    IDS[dst_i],
                    "2"
                ]
            ),
            "OK"
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<_> = writers
        .into_iter()
        .map(|h| h.join().expect("writer"))
        .collect();

    // The oracle: every acknowledged INCR is counted exactly once and every key's
    // last acknowledged value is there, on the destination only.
    let mut dst = c.by_port(c.nodes[dst_i].port).connect();
    let mut total = 0;
    for (w, acked, last, n) in &results {
        total += n;
        for (i, &a) in acked.iter().enumerate() {
            let k = format!("{{m}}:ctr{w}:{i}");
            let got = match dst.cmd(&["GET", &k]) {
                Reply::Bulk(Some(b)) => String::from_utf8(b)
                    .expect("utf8")
                    .parse::<i64>()
                    .expect("int"),
                Reply::Bulk(None) => 0,
                r => panic!("{r:?}"),
            };
            assert_eq!(got, a, "{k}");
        }
        for (k, v) in last {
            assert_eq!(ok(&mut dst, &["GET", k]), *v, "{k}");
        }
    }
    assert!(
        total > 200,
        "writers made progress during the migration: {total}"
    );
    assert_eq!(int(&mut dst, &["LLEN", "{m}:list"]), 3);
    assert_eq!(ok(&mut dst, &["HGET", "{m}:hash", "g"]), "w");
    assert_eq!(int(&mut dst, &["ZCARD", "{m}:zset"]), 2);
    let pttl = int(&mut dst, &["PTTL", "{m}:ttl"]);
    assert!(pttl > 500_000 && pttl <= 600_000, "{pttl}");
    let in_dst = int(&mut dst, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]);
    assert!(in_dst >= 20_004, "{in_dst}");
    assert_eq!(
        int(&mut src, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]),
        0
    );
    assert_eq!(
        err(&mut src, &["GET", "{m}:list"]),
        format!("MOVED {slot} 127.0.0.1:{}", c.nodes[dst_i].port)
    );
    let nodes = ok(&mut src, &["CLUSTER", "NODES"]);
    assert!(
        nodes.contains(&format!(" {slot}\n"))
            || nodes.contains(&format!(" {slot} "))
            || nodes.contains(&format!("-{slot}"))
            || nodes.contains(&format!(" {slot}-")),
        "{nodes}"
    );
    eprintln!(
        "migrated slot {slot} ({in_dst} keys) in {migrated_in:?} under {total} writer rounds; {info}"
    );
}

/// Node ids of the replicas in [`primaries_with_a_replica_each`].
const REPLICA_IDS: [&str; 3] = [
    "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee5",
    "fffffffffffffffffffffffffffffffffffffff6",
    "0123456789abcdef0123456789abcdef01234567",
];

#[test]
fn primaries_with_a_replica_each() {
    // Three primaries, each with a replica that replicates from it (`--replicaof`),
    // all in cluster mode with one topology naming the replicas as slave lines.
    let primaries: Vec<Server> = (0..3)
        .map(|_| Server::start(&["--cluster-enabled"]))
        .collect();
    let replicas: Vec<Server> = primaries
        .iter()
        .map(|p| {
            let port = p.port.to_string();
            Server::start(&["--cluster-enabled", "--replicaof", "127.0.0.1", &port])
        })
        .collect();
    let ranges = ["0-5460", "5461-10922", "10923-16383"];
    let mut layout = Vec::new();
    for i in 0..3 {
        let (p, r) = (primaries[i].port, replicas[i].port);
        layout.push(format!("{} 127.0.0.1 {p} master - {}", IDS[i], ranges[i]));
        layout.push(format!("{} 127.0.0.1 {r} slave {}", REPLICA_IDS[i], IDS[i]));
    }
    let layout = layout.join("\n");
    // A replica answers -LOADING until its first sync is in; then the controller
    // sets the topology.
    for r in &replicas {
        let mut c = r.connect();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let info = ok(&mut c, &["INFO", "replication"]);
            if info.contains("master_link_status:up") {
                break;
            }
            assert!(Instant::now() < deadline, "replica never linked: {info}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for (n, id) in primaries
        .iter()
        .zip(IDS)
        .chain(replicas.iter().zip(REPLICA_IDS))
    {
        let mut c = n.connect();
        assert_eq!(ok(&mut c, &["CLUSTERX", "SETNODEID", id]), "OK");
        assert_eq!(ok(&mut c, &["CLUSTERX", "SETNODES", &layout, "1"]), "OK");
    }
    // Writes through the cluster, then WAIT on every primary: its replica has them.
    let mut conns = HashMap::new();
    let start = primaries[0].addr();
    for i in 0..300 {
        let (k, v) = (format!("k{i}"), i.to_string());
        assert_eq!(
            route(&mut conns, &start, &["SET", &k, &v]),
            Reply::Simple("OK".into())
        );
    }
    for p in &primaries {
        assert!(int(&mut p.connect(), &["WAIT", "1", "5000"]) >= 1);
    }
    // A replica sends reads to its master until READONLY, and writes always.
    let mut served = 0;
    for (i, r) in replicas.iter().enumerate() {
        let mut c = r.connect();
        let master = primaries[i].addr();
        assert_eq!(ok(&mut c, &["READONLY"]), "OK");
        for k in 0..300 {
            let key = format!("k{k}");
            match c.cmd(&["GET", &key]) {
                Reply::Bulk(Some(v)) => {
                    assert_eq!(v, k.to_string().into_bytes(), "{key} on replica {i}");
                    served += 1;
                    let e = err(&mut c, &["SET", &key, "x"]);
                    assert!(e.starts_with("MOVED ") && e.ends_with(&master), "{e}");
                }
                Reply::Error(e) => assert!(e.starts_with("MOVED "), "{e}"),
                other => panic!("{key} on replica {i}: {other:?}"),
            }
        }
        assert_eq!(ok(&mut c, &["READWRITE"]), "OK");
        let e = err(&mut c, &["GET", "k0"]);
        assert!(e.starts_with("MOVED "), "{e}");
    }
    assert_eq!(served, 300, "every key is read from exactly one replica");
    // redis-py sees three primaries with a replica each and reads from replicas.
    let (host, port) = start.split_once(':').expect("addr");
    python(&format!(
        r#"
from redis.cluster import RedisCluster
rc = RedisCluster(host="{host}", port={port}, decode_responses=True, read_from_replicas=True)
assert len(rc.get_primaries()) == 3 and len(rc.get_replicas()) == 3, rc.get_nodes()
for i in range(300):
    assert rc.get(f"k{{i}}") == str(i), i
rc.set("after", "1")
assert rc.get("after") in ("1", None)
"#
    ));
}

/// `cluster-enabled yes` in a `--config` file turns cluster mode on; the id, the
/// topology, its version and a SETSLOT change come back after a SIGKILL and restart
/// (the nodes file), and a SETNODES that is not newer is still refused after it.
/// COUNTKEYSINSLOT follows every kind of change, on the node and on a replica.
#[test]
fn topology_survives_a_restart_and_config_file_enables_cluster() {
    let dir = common::temp_dir("cluster-persist");
    let conf = dir.with_extension("conf");
    std::fs::write(&conf, "# test\ncluster-enabled yes\n").expect("test setup");
    let args = ["--config", conf.to_str().expect("test setup")];
    let mut node = Server::start_in(&dir, &args);
    node.keep_dir = true;
    let mut c = node.connect();
    assert!(ok(&mut c, &["INFO", "cluster"]).contains("cluster_enabled:1"));
    assert_eq!(ok(&mut c, &["CLUSTERX", "SETNODEID", IDS[0]]), "OK");
    let layout = format!(
        "{} 127.0.0.1 {} master - 0-8191\n{} 127.0.0.1 7499 master - 8192-16383\n{} 127.0.0.1 7498 slave {}",
        IDS[0], node.port, IDS[1], IDS[2], IDS[1]
    );
    assert_eq!(ok(&mut c, &["CLUSTERX", "SETNODES", &layout, "5"]), "OK");
    assert_eq!(
        ok(
            &mut c,
            &["CLUSTERX", "SETSLOT", "8192", "NODE", IDS[0], "6"]
        ),
        "OK"
    );
    let nodes_before = ok(&mut c, &["CLUSTER", "NODES"]);
    let slots_before = c.cmd(&["CLUSTER", "SLOTS"]);
    node.kill9();

    let node = Server::start_in(&dir, &args);
    let mut c = node.connect();
    assert_eq!(ok(&mut c, &["CLUSTER", "MYID"]), IDS[0]);
    assert_eq!(int(&mut c, &["CLUSTERX", "VERSION"]), 6);
    // Same text but this node's own port (it restarted on another one).
    let nodes_after = ok(&mut c, &["CLUSTER", "NODES"]);
    assert_eq!(nodes_after, nodes_before);
    assert_eq!(c.cmd(&["CLUSTER", "SLOTS"]), slots_before);
    assert!(err(&mut c, &["CLUSTERX", "SETNODES", &layout, "6"]).contains("not newer"));
    // The slot SETSLOT gave it is served here.
    assert_eq!(int(&mut c, &["CLUSTER", "KEYSLOT", "k3962"]), 8192);
    assert_eq!(ok(&mut c, &["SET", "k3962", "v"]), "OK");

    // COUNTKEYSINSLOT from the per-slot counts: creations, overwrites, deletions,
    // expiry deletions, FLUSHALL, a restart (recounted), and a replica's counts.
    let replica = Server::start(&[
        "--cluster-enabled",
        "--replicaof",
        "127.0.0.1",
        &node.port.to_string(),
    ]);
    let mut rc = replica.connect();
    let count = |c: &mut Client| int(c, &["CLUSTER", "COUNTKEYSINSLOT", "8192"]);
    assert_eq!(count(&mut c), 1);
    for k in ["{k3962}a", "{k3962}b", "{k3962}c"] {
        assert_eq!(ok(&mut c, &["SET", k, "1"]), "OK");
    }
    assert_eq!(ok(&mut c, &["SET", "k3962", "again"]), "OK");
    assert_eq!(int(&mut c, &["HSET", "{k3962}h", "f", "v"]), 1);
    assert_eq!(count(&mut c), 5);
    assert_eq!(int(&mut c, &["DEL", "{k3962}a", "{k3962}missing"]), 1);
    assert_eq!(int(&mut c, &["HDEL", "{k3962}h", "f"]), 1);
    assert_eq!(ok(&mut c, &["SET", "{k3962}e", "1", "PX", "1"]), "OK");
    std::thread::sleep(Duration::from_millis(5));
    // A write that finds it expired deletes it.
    assert_eq!(int(&mut c, &["EXPIRE", "{k3962}e", "100"]), 0);
    assert_eq!(count(&mut c), 3);
    assert_eq!(int(&mut c, &["CLUSTER", "COUNTKEYSINSLOT", "0"]), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    // (-LOADING until its full sync is done.)
    loop {
        let r = rc.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "8192"]);
        if r == Reply::Int(3) {
            break;
        }
        assert!(Instant::now() < deadline, "the replica's count: {r:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(replica);
    let mut node = node;
    node.keep_dir = true;
    node.kill9();
    let node = Server::start_in(&dir, &args);
    let mut c = node.connect();
    assert_eq!(count(&mut c), 3);
    assert_eq!(ok(&mut c, &["FLUSHALL"]), "OK");
    assert_eq!(count(&mut c), 0);
    let _ = std::fs::remove_file(&conf);
}
