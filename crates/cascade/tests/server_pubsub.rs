//! Pub/sub over real sockets: delivery across worker threads in publish order, RESP3
//! pushes, keyspace notifications, a subscriber that never reads being disconnected at
//! its output limit (while the server keeps serving), and redis-py's `PubSub`.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{Client, Reply, Server};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn message(ch: &str, msg: &str) -> Reply {
    Reply::Array(Some(vec![bulk("message"), bulk(ch), bulk(msg)]))
}

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Int(n) => n,
        r => panic!("{args:?}: {r:?}"),
    }
}

#[test]
fn messages_cross_workers_in_publish_order() {
    let srv = Server::start(&[]); // two worker threads
                                  // Subscribers on both workers (connections alternate between them).
    let mut subs: Vec<Client> = (0..4).map(|_| srv.connect()).collect();
    for s in &mut subs {
        s.send(&[b"SUBSCRIBE", b"news"]);
        assert_eq!(
            s.read(),
            Some(Reply::Array(Some(vec![
                bulk("subscribe"),
                bulk("news"),
                Reply::Int(1)
            ])))
        );
    }
    // Two publishers, also on both workers, interleaving.
    let mut p1 = srv.connect();
    let mut p2 = srv.connect();
    let mut sent = Vec::new();
    for i in 0..200 {
        let (p, tag) = if i % 2 == 0 {
            (&mut p1, "a")
        } else {
            (&mut p2, "b")
        };
        let m = format!("{tag}{i}");
        assert_eq!(int(p, &["PUBLISH", "news", &m]), 4);
        sent.push(m);
    }
    // Every subscriber sees every message, in the one order they were published.
    for s in &mut subs {
        for m in &sent {
            assert_eq!(s.read(), Some(message("news", m)));
        }
    }
    // A subscribed RESP2 connection may only run the pub/sub family.
    let s = &mut subs[0];
    match s.cmd(&["GET", "x"]) {
        Reply::Error(e) => assert!(e.contains("only (P|S)SUBSCRIBE"), "{e}"),
        r => panic!("{r:?}"),
    }
    s.send(&[b"UNSUBSCRIBE"]);
    s.read();
    assert_eq!(s.cmd(&["GET", "x"]), Reply::Bulk(None));
    assert_eq!(int(&mut p1, &["PUBLISH", "news", "late"]), 3);
}

#[test]
fn resp3_pushes_and_keyspace_notifications() {
    let srv = Server::start(&[]);
    let mut c = srv.connect();
    c.cmd(&["HELLO", "3"]);
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    c.send(&[b"PSUBSCRIBE", b"__key*__:*"]);
    c.read();
    let mut w = srv.connect();
    w.cmd(&["SET", "k", "v"]);
    // RESP3: pushes arrive, and the subscriber may still run commands.
    let mut seen = Vec::new();
    for _ in 0..2 {
        match c.read() {
            Some(Reply::Push(v)) => {
                seen.push(v.iter().map(Reply::text).collect::<Vec<_>>().join(" "))
            }
            r => panic!("{r:?}"),
        }
    }
    assert_eq!(seen[0], "pmessage __key*__:* __keyspace@0__:k set");
    assert_eq!(seen[1], "pmessage __key*__:* __keyevent@0__:set k");
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    // Expiry of a key is an `expired` event (from the background sweeper).
    w.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
    w.cmd(&["PSETEX", "gone", "50", "1"]);
    match c.read() {
        Some(Reply::Push(v)) => {
            let text: Vec<String> = v.iter().map(Reply::text).collect();
            assert_eq!(
                text.join(" "),
                "pmessage __key*__:* __keyevent@0__:expired gone"
            );
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected_at_its_limit() {
    let srv = Server::start(&[]);
    let mut admin = srv.connect();
    admin.cmd(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 1mb 256kb 1",
    ]);
    let mut slow = srv.connect();
    slow.send(&[b"SUBSCRIBE", b"flood"]);
    slow.read();
    // Publish far more than the limit while the subscriber reads nothing.
    let payload = "x".repeat(16 << 10);
    let mut p = srv.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut published = 0usize;
    loop {
        let n = int(&mut p, &["PUBLISH", "flood", &payload]);
        published += 1;
        if n == 0 {
            break; // The subscriber is gone.
        }
        assert!(Instant::now() < deadline, "never disconnected");
        if published.is_multiple_of(64) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert!(published * payload.len() > 1 << 20, "published {published}");
    // The server still serves, and the client list no longer shows the subscriber.
    assert_eq!(int(&mut p, &["PUBLISH", "flood", "m"]), 0);
    let list = admin.cmd(&["CLIENT", "LIST"]).text();
    assert!(!list.contains("sub=1"), "{list}");
    // Its socket reads to the end: the server closed it.
    slow.s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut sink = vec![0u8; 1 << 16];
    let mut closed = false;
    for _ in 0..10_000 {
        match slow.s.read(&mut sink) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(closed, "the slow subscriber's connection was not closed");
}

#[test]
fn redis_py_pubsub() {
    let srv = Server::start(&[]);
    let script = format!(
        r#"
import redis, threading, time
r = redis.Redis.from_url("redis://{addr}")
p = r.pubsub()
p.subscribe("chan")
p.psubscribe("pat.*")
assert p.get_message(timeout=5)["type"] == "subscribe"
assert p.get_message(timeout=5)["type"] == "psubscribe"
assert r.publish("chan", "hello") == 1
assert r.publish("pat.x", "world") == 1
m = p.get_message(timeout=5)
assert (m["type"], m["channel"], m["data"]) == ("message", b"chan", b"hello"), m
m = p.get_message(timeout=5)
assert (m["type"], m["pattern"], m["channel"], m["data"]) == ("pmessage", b"pat.*", b"pat.x", b"world"), m
assert r.pubsub_numsub("chan") == [(b"chan", 1)]
assert r.pubsub_numpat() == 1
p.unsubscribe("chan")
p.punsubscribe()
print("ok")
"#,
        addr = srv.addr()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn go_redis_pubsub_and_databases() {
    let srv = Server::start(&[]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goredis");
    let out = std::process::Command::new("go")
        .args(["run", ".", &srv.addr()])
        .current_dir(&dir)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .expect("go (installed by scripts/test.sh's prerequisites)");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
