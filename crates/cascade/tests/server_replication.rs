//! Replication between real `cascade serve` processes (issue #32 item 1): full sync and
//! the stream of every data type, numbered databases, expiry, scripts, FLUSHDB and
//! SWAPDB; `WAIT`, `ROLE`, `INFO replication`, `-READONLY`; a replica restarted after
//! SIGKILL continuing partially; a promotion followed by the second id; a backlog
//! overrun falling back to a full sync; a SIGSTOP partition; a primary that vanishes in
//! the middle of a full sync; `CONFIG REWRITE`; `CLIENT KILL TYPE`.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{temp_dir, Client, Reply, Server};

fn text(r: &Reply) -> String {
    match r {
        Reply::Simple(s) | Reply::Error(s) => s.clone(),
        Reply::Int(n) => n.to_string(),
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Reply::Bulk(None) | Reply::Array(None) => "(nil)".into(),
        Reply::Array(Some(items)) | Reply::Push(items) => {
            let v: Vec<String> = items.iter().map(text).collect();
            format!("[{}]", v.join(","))
        }
    }
}

fn info_field(c: &mut Client, section: &str, name: &str) -> Option<String> {
    let r = text(&c.cmd(&["INFO", section]));
    r.lines().find_map(|l| {
        l.strip_prefix(&format!("{name}:"))
            .map(|v| v.trim().to_string())
    })
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the replica has applied everything the primary produced.
fn caught_up(primary: &Server, replica: &Server) {
    let (mut p, mut r) = (primary.connect(), replica.connect());
    wait_for("the replica to catch up", 30, || {
        let want = info_field(&mut p, "replication", "master_repl_offset");
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && info_field(&mut r, "replication", "slave_repl_offset") == want
    });
}

/// Every key of every database with its type, value and whether it expires.
fn dump(c: &mut Client) -> Vec<String> {
    let mut out = Vec::new();
    for db in 0..16 {
        c.cmd(&["SELECT", &db.to_string()]);
        let mut keys: Vec<String> = match c.cmd(&["KEYS", "*"]) {
            Reply::Array(Some(v)) => v.iter().map(text).collect(),
            r => panic!("KEYS: {r:?}"),
        };
        keys.sort();
        for k in keys {
            let ty = text(&c.cmd(&["TYPE", &k]));
            let v = match ty.as_str() {
                "string" => c.cmd(&["GET", &k]),
                "hash" => c.cmd(&["HGETALL", &k]),
                "list" => c.cmd(&["LRANGE", &k, "0", "-1"]),
                "set" => sorted(c.cmd(&["SMEMBERS", &k])),
                "zset" => c.cmd(&["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
                "stream" => c.cmd(&["XRANGE", &k, "-", "+"]),
                t => panic!("type {t}"),
            };
            let ttl = text(&c.cmd(&["TTL", &k])) != "-1";
            out.push(format!("{db} {k} {ty} {} ttl={ttl}", text(&v)));
        }
        out.push(format!("{db} dbsize={}", text(&c.cmd(&["DBSIZE"]))));
    }
    c.cmd(&["SELECT", "0"]);
    out
}

fn sorted(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(mut v)) => {
            v.sort_by_key(text);
            Reply::Array(Some(v))
        }
        r => r,
    }
}

fn fill(c: &mut Client, tag: &str) {
    for (args, _) in [
        (vec!["SET", &format!("s:{tag}"), "v"], ()),
        (vec!["SET", &format!("e:{tag}"), "v", "EX", "1000"], ()),
        (vec!["HSET", &format!("h:{tag}"), "f1", "a", "f2", "b"], ()),
        (vec!["RPUSH", &format!("l:{tag}"), "1", "2", "3"], ()),
        (vec!["SADD", &format!("set:{tag}"), "x", "y"], ()),
        (
            vec!["ZADD", &format!("z:{tag}"), "1.5", "m1", "2", "m2"],
            (),
        ),
        (vec!["XADD", &format!("x:{tag}"), "1-1", "k", "v"], ()),
        (vec!["INCRBY", &format!("n:{tag}"), "41"], ()),
        (vec!["PFADD", &format!("hll:{tag}"), "a", "b"], ()),
    ] {
        let r = c.cmd(&args);
        assert!(!matches!(r, Reply::Error(_)), "{args:?}: {r:?}");
    }
}

#[test]
fn full_sync_then_stream_of_every_type() {
    let primary = Server::start(&[]);
    let mut p = primary.connect();
    fill(&mut p, "before");
    p.cmd(&["SELECT", "3"]);
    fill(&mut p, "db3");
    p.cmd(&["SELECT", "0"]);
    let r = p.cmd(&[
        "EVAL",
        "redis.call('SET', KEYS[1], ARGV[1]); return 1",
        "1",
        "lua",
        "x",
    ]);
    assert_eq!(r, Reply::Int(1));

    let port = primary.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    caught_up(&primary, &replica);
    let mut r = replica.connect();
    assert_eq!(dump(&mut p), dump(&mut r));

    // The stream: writes after the sync, scripts, FLUSHDB, SWAPDB, deletions.
    fill(&mut p, "after");
    p.cmd(&[
        "EVAL",
        "redis.call('INCR', KEYS[1]); redis.call('DEL', KEYS[2]); return 0",
        "2",
        "n:after",
        "s:before",
    ]);
    p.cmd(&["SELECT", "7"]);
    fill(&mut p, "gone");
    assert_eq!(p.cmd(&["FLUSHDB"]), Reply::Simple("OK".into()));
    p.cmd(&["SELECT", "0"]);
    assert_eq!(p.cmd(&["SWAPDB", "3", "5"]), Reply::Simple("OK".into()));
    p.cmd(&["SET", "short", "v", "PX", "200"]);
    p.cmd(&["LPOP", "l:after"]);
    p.cmd(&["HDEL", "h:after", "f1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    // An expired key disappears from the replica by the primary's deletion.
    std::thread::sleep(Duration::from_millis(400));
    wait_for("the expired key to be swept", 10, || {
        p.cmd(&["DBSIZE"]) == r.cmd(&["DBSIZE"]) && r.cmd(&["EXISTS", "short"]) == Reply::Int(0)
    });
    caught_up(&primary, &replica);
    let (dp, dr) = (dump(&mut p), dump(&mut r));
    assert_eq!(dp, dr);
    assert!(dr.iter().any(|l| l.starts_with("5 s:db3 string")), "{dr:?}");
    assert!(dr.iter().any(|l| l == "7 dbsize=0"), "{dr:?}");

    // Roles and read-only replicas.
    assert_eq!(
        r.cmd(&["SET", "k", "v"]),
        Reply::Error("READONLY You can't write against a read only replica.".into())
    );
    assert!(
        matches!(r.cmd(&["EVAL", "return redis.call('SET','k','v')", "0"]), Reply::Error(e) if e.contains("READONLY"))
    );
    assert!(matches!(r.cmd(&["WAIT", "1", "0"]), Reply::Error(e) if e.contains("replica")));
    let role = text(&r.cmd(&["ROLE"]));
    assert_eq!(
        role.split(',').take(4).collect::<Vec<_>>().join(","),
        format!("[slave,127.0.0.1,{port},connected")
    );
    let role = text(&p.cmd(&["ROLE"]));
    assert!(
        role.starts_with("[master,") && role.contains(&format!("[127.0.0.1,{},", replica.port)),
        "{role}"
    );
    assert_eq!(
        info_field(&mut r, "replication", "role").as_deref(),
        Some("slave")
    );
    assert_eq!(
        info_field(&mut r, "replication", "master_host").as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(
        info_field(&mut r, "replication", "slave_priority").as_deref(),
        Some("100")
    );
    assert_eq!(
        info_field(&mut p, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let s0 = info_field(&mut p, "replication", "slave0").expect("test setup");
    assert!(
        s0.starts_with(&format!(
            "ip=127.0.0.1,port={},state=online,offset=",
            replica.port
        )),
        "{s0}"
    );
    assert_eq!(
        info_field(&mut p, "replication", "master_replid"),
        info_field(&mut r, "replication", "master_replid")
    );
    assert_eq!(
        info_field(&mut p, "stats", "sync_full").as_deref(),
        Some("1")
    );
    // A replica of itself is refused; so is an unknown REPLCONF option.
    assert!(
        matches!(p.cmd(&["REPLICAOF", "127.0.0.1", &port]), Reply::Error(e) if e.contains("myself"))
    );
    assert!(
        matches!(p.cmd(&["REPLICAOF", "localhost", "x"]), Reply::Error(e) if e.contains("port"))
    );
    assert!(matches!(
        p.cmd(&["REPLCONF", "bogus", "1"]),
        Reply::Error(_)
    ));
    // WAIT for more replicas than there are times out with the count.
    p.cmd(&["SET", "w", "1"]);
    let t = Instant::now();
    assert_eq!(p.cmd(&["WAIT", "2", "300"]), Reply::Int(1));
    assert!(t.elapsed() >= Duration::from_millis(250));
}

#[test]
fn restart_promotion_and_backlog_overrun() {
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let mut p = primary.connect();
    fill(&mut p, "a");
    let rdir = temp_dir("replica");
    let mut replica = Server::start_in(&rdir, &["--replicaof", "127.0.0.1", &port]);
    replica.keep_dir = true;
    caught_up(&primary, &replica);

    // SIGKILL the replica, write meanwhile: it comes back with a partial resync.
    replica.kill9();
    fill(&mut p, "b");
    let mut replica = Server::start_in(&rdir, &["--replicaof", "127.0.0.1", &port]);
    replica.keep_dir = true;
    caught_up(&primary, &replica);
    assert_eq!(
        info_field(&mut p, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut p, "stats", "sync_full").as_deref(),
        Some("1")
    );
    let mut r = replica.connect();
    assert_eq!(dump(&mut p), dump(&mut r));

    // Promote the replica; the old primary follows it by the second id.
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Reply::Simple("OK".into())
    );
    let old_id = info_field(&mut p, "replication", "master_replid");
    assert_eq!(info_field(&mut r, "replication", "master_replid2"), old_id);
    r.cmd(&["SET", "after-promotion", "1"]);
    let rport = replica.port.to_string();
    assert_eq!(
        p.cmd(&["SLAVEOF", "127.0.0.1", &rport]),
        Reply::Simple("OK".into())
    );
    caught_up(&replica, &primary);
    assert_eq!(
        info_field(&mut r, "stats", "sync_partial_ok").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut r, "stats", "sync_full").as_deref(),
        Some("0")
    );
    assert_eq!(text(&p.cmd(&["GET", "after-promotion"])), "1");
    r.cmd(&["SET", "acked", "yes"]);
    assert_eq!(r.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));
    assert_eq!(text(&p.cmd(&["GET", "acked"])), "yes");

    // Backlog overrun: a tiny backlog, the replica down while 200 KB are written; it
    // comes back with a full sync and nothing missing.
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "repl-backlog-size", "16384"]),
        Reply::Simple("OK".into())
    );
    let pdir = primary.dir.clone();
    let mut old = primary;
    old.keep_dir = true;
    old.kill9();
    let big = "x".repeat(1000);
    for i in 0..200 {
        r.cmd(&["SET", &format!("big:{i}"), &big]);
    }
    let old = Server::start_in(&pdir, &["--replicaof", "127.0.0.1", &rport]);
    caught_up(&replica, &old);
    assert_eq!(
        info_field(&mut r, "stats", "sync_full").as_deref(),
        Some("1")
    );
    assert_eq!(
        info_field(&mut r, "stats", "sync_partial_err").as_deref(),
        Some("1")
    );
    let mut o = old.connect();
    assert_eq!(dump(&mut r), dump(&mut o));
    drop(replica);
    let _ = std::fs::remove_dir_all(&rdir);
    let _ = std::fs::remove_dir_all(&pdir);
}

#[test]
fn partition_config_rewrite_and_client_kill() {
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let dir = temp_dir("cfg");
    let conf = dir.join("replica.conf");
    std::fs::write(
        &conf,
        format!("# test\nreplicaof 127.0.0.1 {port}\nrepl-timeout 2\n"),
    )
    .expect("test setup");
    let replica = Server::start(&["--config", conf.to_str().expect("test setup")]);
    caught_up(&primary, &replica);
    let (mut p, mut r) = (primary.connect(), replica.connect());
    p.cmd(&["SET", "k", "1"]);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), Reply::Int(1));

    // SIGSTOP the primary: after repl-timeout the link is down, reads still served.
    let pid = primary.child.as_ref().expect("test setup").id().to_string();
    let sig = |s: &str| {
        assert!(std::process::Command::new("kill")
            .args([s, &pid])
            .status()
            .expect("test setup")
            .success())
    };
    sig("-STOP");
    wait_for("the link to go down", 15, || {
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("down")
    });
    assert!(info_field(&mut r, "replication", "master_link_down_since_seconds").is_some());
    assert_eq!(text(&r.cmd(&["GET", "k"])), "1");
    sig("-CONT");
    p.cmd(&["SET", "k", "2"]);
    caught_up(&primary, &replica);
    assert_eq!(text(&r.cmd(&["GET", "k"])), "2");

    // CONFIG REWRITE records the role and settings in the --config file.
    r.cmd(&["CONFIG", "SET", "replica-priority", "42"]);
    assert_eq!(r.cmd(&["CONFIG", "REWRITE"]), Reply::Simple("OK".into()));
    let written = std::fs::read_to_string(&conf).expect("test setup");
    assert!(written.starts_with("# test\n"), "{written}");
    assert!(
        written.contains(&format!("replicaof 127.0.0.1 {port}\n")),
        "{written}"
    );
    assert!(written.contains("replica-priority 42\n"), "{written}");
    assert_eq!(
        info_field(&mut r, "replication", "slave_priority").as_deref(),
        Some("42")
    );
    assert!(
        matches!(p.cmd(&["CONFIG", "REWRITE"]), Reply::Error(e) if e.contains("without a config file"))
    );

    // CLIENT KILL TYPE: normal clients and subscribers go, the caller and replicas stay.
    let mut other = primary.connect();
    let mut sub = primary.connect();
    sub.send(&[b"SUBSCRIBE", b"ch"]);
    sub.read();
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "normal"]), Reply::Int(1));
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]), Reply::Int(1));
    assert!(other.closed());
    assert!(sub.closed());
    assert_eq!(p.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert!(
        matches!(p.cmd(&["CLIENT", "KILL", "TYPE", "bogus"]), Reply::Error(e) if e.contains("Unknown client type"))
    );
    // MULTI with SLAVEOF inside, as Sentinel sends it.
    p.cmd(&["MULTI"]);
    p.cmd(&["SLAVEOF", "NO", "ONE"]);
    p.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    assert!(matches!(p.cmd(&["EXEC"]), Reply::Array(Some(v)) if v.len() == 2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fake primary that completes the handshake, starts a full sync, sends one chunk
/// and vanishes: the replica reports the link down and answers -LOADING (its data is
/// partial); pointed at a real primary it then loads everything.
#[test]
fn primary_vanishing_mid_full_sync() {
    let fake = TcpListener::bind("127.0.0.1:0").expect("test setup");
    let fport = fake.local_addr().expect("test setup").port().to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &fport]);
    let (mut s, _) = fake.accept().expect("test setup");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("test setup");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut synced = false;
    while !synced {
        let n = s.read(&mut buf).expect("test setup");
        assert!(n > 0, "the replica closed the handshake");
        got.extend_from_slice(&buf[..n]);
        // Answer each complete command in order.
        while let Some(end) = find_command_end(&got) {
            let cmd = String::from_utf8_lossy(&got[..end]).to_string();
            got.drain(..end);
            if cmd.contains("PSYNC") {
                s.write_all(b"+FULLRESYNC 1111111111111111111111111111111111111111 0\r\n")
                    .expect("test setup");
                // One chunk frame with one entry, then the connection drops.
                let mut body = vec![b'K'];
                body.extend_from_slice(&1u32.to_le_bytes());
                for part in [&b"\x7fjunk"[..], b"v"] {
                    body.extend_from_slice(
                        &u32::try_from(part.len()).expect("test setup").to_le_bytes(),
                    );
                    body.extend_from_slice(part);
                }
                s.write_all(&u32::try_from(body.len()).expect("test setup").to_le_bytes())
                    .expect("test setup");
                s.write_all(&body).expect("test setup");
                synced = true;
                break;
            } else if cmd.contains("PING") {
                s.write_all(b"+PONG\r\n").expect("test setup");
            } else {
                s.write_all(b"+OK\r\n").expect("test setup");
            }
        }
    }
    drop(s);
    drop(fake);
    let mut r = replica.connect();
    wait_for("the link to be reported down", 10, || {
        info_field(&mut r, "replication", "master_link_status").as_deref() == Some("down")
    });
    assert_eq!(
        r.cmd(&["GET", "x"]),
        Reply::Error("LOADING Redis is loading the dataset in memory".into())
    );
    let primary = Server::start(&[]);
    let mut p = primary.connect();
    fill(&mut p, "real");
    let port = primary.port.to_string();
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &port]),
        Reply::Simple("OK".into())
    );
    caught_up(&primary, &replica);
    assert_eq!(dump(&mut p), dump(&mut r));
}

/// The length of the first complete RESP array command in `b`.
fn find_command_end(b: &[u8]) -> Option<usize> {
    common::parse_reply(b).map(|(_, n)| n)
}
