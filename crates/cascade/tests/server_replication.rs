//! Replication between real `cascade serve` processes (issue #32 item 1): full sync and
//! the stream of every data type, numbered databases, expiry, scripts, FLUSHDB and
//! SWAPDB; `WAIT`, `ROLE`, `INFO replication`, `-READONLY`; a replica restarted after
//! SIGKILL continuing partially; a promotion followed by the second id; a backlog
//! overrun falling back to a full sync; a SIGSTOP partition; a primary that vanishes in
//! the middle of a full sync; a replica SIGKILLed in the middle of a full sync (never
//! serves the partial data); `REPLICAOF NO ONE` mid full sync; keyspace
//! notifications, WATCH and client-side-caching invalidations raised on a replica;
//! `CONFIG REWRITE`; `CLIENT KILL TYPE`.

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
    // One MULTI block that writes database 0, flushes database 9 and writes there
    // after the flush: the replica must flush 9 only (one record per flushed
    // database), and COPY into another database.
    p.cmd(&["SELECT", "9"]);
    fill(&mut p, "nine");
    p.cmd(&["SELECT", "0"]);
    assert_eq!(p.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    for c in [
        &["SET", "m:0", "before"][..],
        &["SELECT", "9"],
        &["FLUSHDB"],
        &["SET", "m:9", "after"],
        &["SELECT", "0"],
        &["COPY", "h:after", "h:copy", "DB", "4"],
    ] {
        assert_eq!(p.cmd(c), Reply::Simple("QUEUED".into()), "{c:?}");
    }
    assert!(matches!(p.cmd(&["EXEC"]), Reply::Array(Some(v)) if v.len() == 6));
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
    assert!(dr.iter().any(|l| l == "9 dbsize=1"), "{dr:?}");
    assert!(
        dr.iter().any(|l| l.starts_with("0 m:0 string before")),
        "{dr:?}"
    );
    assert!(dr.iter().any(|l| l.starts_with("4 h:copy hash")), "{dr:?}");

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
    // A connection is a client once the server has accepted it (a PING answered),
    // and one closed by the test (caught_up's) is gone once the server has seen the
    // close: wait for exactly the caller and `other` as normal clients.
    let mut other = primary.connect();
    assert_eq!(other.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let mut sub = primary.connect();
    sub.send(&[b"SUBSCRIBE", b"ch"]);
    sub.read();
    wait_for("stale connections to be closed", 20, || {
        text(&p.cmd(&["CLIENT", "LIST"]))
            .lines()
            .filter(|l| l.contains(" flags=N "))
            .count()
            == 2
    });
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
    let s = fake_full_sync(&fake, &[(b"\x7fjunk", b"v")]);
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

/// Plays a primary on `fake` up to the middle of a full sync: answers the replica's
/// handshake, sends `+FULLRESYNC` and one chunk frame of `pairs` (engine entries),
/// and returns the open connection.
fn fake_full_sync(fake: &TcpListener, pairs: &[(&[u8], &[u8])]) -> std::net::TcpStream {
    let (mut s, _) = fake.accept().expect("test setup");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("test setup");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
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
                let mut body = vec![b'K'];
                body.extend_from_slice(
                    &u32::try_from(pairs.len())
                        .expect("test setup")
                        .to_le_bytes(),
                );
                for (k, v) in pairs {
                    for part in [k, v] {
                        body.extend_from_slice(
                            &u32::try_from(part.len()).expect("test setup").to_le_bytes(),
                        );
                        body.extend_from_slice(part);
                    }
                }
                s.write_all(&u32::try_from(body.len()).expect("test setup").to_le_bytes())
                    .expect("test setup");
                s.write_all(&body).expect("test setup");
                return s;
            } else if cmd.contains("PING") {
                s.write_all(b"+PONG\r\n").expect("test setup");
            } else {
                s.write_all(b"+OK\r\n").expect("test setup");
            }
        }
    }
}

fn loading_error() -> Reply {
    Reply::Error("LOADING Redis is loading the dataset in memory".into())
}

/// Waits until the replica has applied the first chunk of its full sync.
fn chunk_applied(c: &mut Client) {
    wait_for("the first chunk to be applied", 10, || {
        info_field(c, "persistence", "loading_loaded_bytes")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    });
}

/// The string `partial` = "v" as an engine entry (metadata namespace 01, type 0).
const PARTIAL: (&[u8], &[u8]) = (b"\x01partial", b"\x00\x00v");

/// A replica (its data in `temp_dir(tag)`, kept) in the middle of a full sync from a
/// fake primary that has sent one chunk (`PARTIAL`), which the replica applied: the
/// fake primary's listener, the directory, the replica, the sync link (dropping it
/// cuts the sync) and a client of the replica.
fn replica_mid_full_sync(
    tag: &str,
) -> (
    TcpListener,
    std::path::PathBuf,
    Server,
    std::net::TcpStream,
    Client,
) {
    let fake = TcpListener::bind("127.0.0.1:0").expect("test setup");
    let fport = fake.local_addr().expect("test setup").port().to_string();
    let rdir = temp_dir(tag);
    let mut replica = Server::start_in(&rdir, &["--replicaof", "127.0.0.1", &fport]);
    replica.keep_dir = true;
    let link = fake_full_sync(&fake, &[PARTIAL]);
    let mut r = replica.connect();
    chunk_applied(&mut r);
    (fake, rdir, replica, link, r)
}

/// A replica SIGKILLed in the middle of a full sync (one chunk applied) never serves
/// the partial data: restarted as a primary it refuses to start and says how to
/// recover; restarted as a replica it answers -LOADING until a full sync completes.
#[test]
fn replica_killed_mid_full_sync_never_serves_partial_data() {
    let (_fake, rdir, mut replica, link, mut r) = replica_mid_full_sync("midsync");
    assert_eq!(
        info_field(&mut r, "persistence", "loading").as_deref(),
        Some("1")
    );
    replica.kill9();
    drop(link);

    // As a primary: refused, with the reason and the way out.
    let log = rdir.with_extension("stderr");
    match Server::try_start_in(&rdir, &[], Some(&log)) {
        Ok(_) => panic!("a store with a partial full sync started as a primary"),
        Err((code, text)) => {
            assert_ne!(code, Some(0));
            assert!(
                text.contains("full sync") && text.contains("--replicaof"),
                "{text}"
            );
        }
    }
    let _ = std::fs::remove_file(&log);

    // As a replica of a primary that does not answer yet: -LOADING, never the data.
    let silent = TcpListener::bind("127.0.0.1:0").expect("test setup");
    let sport = silent.local_addr().expect("test setup").port().to_string();
    let mut replica = Server::start_in(&rdir, &["--replicaof", "127.0.0.1", &sport]);
    replica.keep_dir = true;
    let mut r = replica.connect();
    assert_eq!(r.cmd(&["GET", "partial"]), loading_error());
    assert_eq!(r.cmd(&["DBSIZE"]), loading_error());
    assert_eq!(
        info_field(&mut r, "persistence", "loading").as_deref(),
        Some("1")
    );
    // Pointed at a real primary, it loads a full sync and serves exactly its data.
    let primary = Server::start(&[]);
    let mut p = primary.connect();
    fill(&mut p, "real");
    let port = primary.port.to_string();
    assert_eq!(
        r.cmd(&["REPLICAOF", "127.0.0.1", &port]),
        Reply::Simple("OK".into())
    );
    caught_up(&primary, &replica);
    assert_eq!(r.cmd(&["GET", "partial"]), Reply::Bulk(None));
    assert_eq!(dump(&mut p), dump(&mut r));
    // Synced: it restarts as a primary with that data.
    replica.kill9();
    let replica = Server::start_in(&rdir, &[]);
    let mut r = replica.connect();
    assert_eq!(dump(&mut p), dump(&mut r));
    drop(silent);
}

/// REPLICAOF NO ONE in the middle of a full sync discards the partial data (as Redis
/// empties its data set after a failed load): the node is an empty primary, also
/// after a restart.
#[test]
fn promotion_mid_full_sync_discards_partial_data() {
    let (_fake, rdir, mut replica, link, mut r) = replica_mid_full_sync("midsync-noone");
    assert_eq!(r.cmd(&["GET", "partial"]), loading_error());
    assert_eq!(
        r.cmd(&["REPLICAOF", "NO", "ONE"]),
        Reply::Simple("OK".into())
    );
    drop(link);
    assert_eq!(r.cmd(&["GET", "partial"]), Reply::Bulk(None));
    assert_eq!(r.cmd(&["DBSIZE"]), Reply::Int(0));
    assert_eq!(r.cmd(&["SET", "fresh", "1"]), Reply::Simple("OK".into()));
    replica.kill9();
    let replica = Server::start_in(&rdir, &[]);
    let mut r = replica.connect();
    assert_eq!(r.cmd(&["GET", "partial"]), Reply::Bulk(None));
    assert_eq!(text(&r.cmd(&["GET", "fresh"])), "1");
}

/// Records applied on a replica raise what the primary's commands raise there:
/// keyspace notifications (by the replica's own notify-keyspace-events), WATCH
/// invalidation (a read-only MULTI/EXEC on the replica aborts), client-side-caching
/// invalidations, and the flush forms of the last two.
#[test]
fn replica_raises_notifications_watch_and_tracking() {
    let primary = Server::start(&[]);
    let port = primary.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let mut p = primary.connect();
    p.cmd(&["SET", "k", "0"]);
    p.cmd(&["SET", "other", "0"]);
    caught_up(&primary, &replica);
    let mut r = replica.connect();
    // Notifications are off on the primary, on on the replica.
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
        Reply::Simple("OK".into())
    );
    let mut sub = replica.connect();
    sub.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]);
    let mut evsub = replica.connect();
    evsub.cmd(&["SUBSCRIBE", "__keyevent@0__:hset"]);
    // WATCH on the replica: one key the primary changes, one it does not.
    let mut w = replica.connect();
    let mut w2 = replica.connect();
    assert_eq!(w.cmd(&["WATCH", "k"]), Reply::Simple("OK".into()));
    assert_eq!(w2.cmd(&["WATCH", "other"]), Reply::Simple("OK".into()));
    // Client-side caching on the replica.
    let mut t = replica.connect();
    assert!(matches!(t.cmd(&["HELLO", "3"]), Reply::Array(Some(_))));
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(text(&t.cmd(&["GET", "k"])), "0");

    p.cmd(&["SET", "k", "1"]);
    p.cmd(&["HSET", "h", "f", "v"]);
    p.cmd(&["DEL", "h"]);
    caught_up(&primary, &replica);
    // KEA: `new` is not among them (as in Redis, `A` leaves out `n`).
    let events: Vec<String> = (0..3)
        .map(|_| text(&sub.read().expect("keyspace event")))
        .collect();
    assert_eq!(
        events,
        [
            "[pmessage,__keyspace@0__:*,__keyspace@0__:k,set]",
            "[pmessage,__keyspace@0__:*,__keyspace@0__:h,hset]",
            "[pmessage,__keyspace@0__:*,__keyspace@0__:h,del]",
        ]
    );
    assert_eq!(
        text(&evsub.read().expect("keyevent")),
        "[message,__keyevent@0__:hset,h]"
    );
    assert_eq!(text(&t.read().expect("invalidation")), "[invalidate,[k]]");
    for (c, aborted) in [(&mut w, true), (&mut w2, false)] {
        assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
        assert_eq!(c.cmd(&["GET", "k"]), Reply::Simple("QUEUED".into()));
        let r = c.cmd(&["EXEC"]);
        if aborted {
            assert_eq!(r, Reply::Array(None), "EXEC after a replicated change");
        } else {
            assert_eq!(text(&r), "[1]");
        }
    }

    // FLUSHALL: the tracking client hears the flush, a watcher of an existing key aborts.
    assert_eq!(text(&t.cmd(&["GET", "k"])), "1");
    assert_eq!(w.cmd(&["WATCH", "other"]), Reply::Simple("OK".into()));
    p.cmd(&["FLUSHALL"]);
    caught_up(&primary, &replica);
    assert_eq!(
        text(&t.read().expect("flush invalidation")),
        "[invalidate,(nil)]"
    );
    w.cmd(&["MULTI"]);
    w.cmd(&["PING"]);
    assert_eq!(w.cmd(&["EXEC"]), Reply::Array(None));
}

/// The length of the first complete RESP array command in `b`.
fn find_command_end(b: &[u8]) -> Option<usize> {
    common::parse_reply(b).map(|(_, n)| n)
}
