//! Client-side caching over real sockets: RESP3 invalidation pushes across worker
//! threads, a client's own write invalidated right after its reply (before the next
//! pipelined reply), REDIRECT to a RESP2 `__redis__:invalidate` subscriber with the
//! broken-redirect push when it leaves, BCAST prefixes, and a cache kept by the rules
//! of client-side caching that never ends up stale while other threads write.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{Client, Reply, Server};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// The push `invalidate [keys]`.
fn invalidate(keys: &[&str]) -> Reply {
    Reply::Push(vec![
        bulk("invalidate"),
        Reply::Array(Some(keys.iter().map(|k| bulk(k)).collect())),
    ])
}

fn resp3(c: &mut Client) {
    match c.cmd(&["HELLO", "3"]) {
        Reply::Array(Some(_)) => {}
        r => panic!("HELLO 3: {r:?}"),
    }
}

#[test]
fn invalidations_cross_workers_and_follow_the_own_reply() {
    let srv = Server::start(&[]); // two worker threads
    let mut t = srv.connect();
    let mut w = srv.connect(); // the other worker
    resp3(&mut t);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(t.cmd(&["GET", "k"]), bulk("1"));
    assert_eq!(w.cmd(&["SET", "k", "2"]), ok());
    // The writer had its reply after the invalidation was queued: it is already there.
    assert_eq!(t.read(), Some(invalidate(&["k"])));
    // Its own write, pipelined: GET's reply, SET's reply, the invalidation, PONG.
    t.send_raw(&common::encode(&[b"GET", b"own"]));
    t.send_raw(&common::encode(&[b"SET", b"own", b"x"]));
    t.send_raw(&common::encode(&[b"PING"]));
    assert_eq!(t.read(), Some(Reply::Bulk(None)));
    assert_eq!(t.read(), Some(ok()));
    assert_eq!(t.read(), Some(invalidate(&["own"])));
    assert_eq!(t.read(), Some(Reply::Simple("PONG".into())));
    // FLUSHALL: a null key list.
    assert_eq!(t.cmd(&["GET", "k"]), bulk("2"));
    assert_eq!(w.cmd(&["FLUSHALL"]), ok());
    assert_eq!(
        t.read(),
        Some(Reply::Push(vec![bulk("invalidate"), Reply::Bulk(None)]))
    );
    match t.cmd(&["CLIENT", "INFO"]) {
        Reply::Bulk(Some(b)) => {
            let line = String::from_utf8_lossy(&b).into_owned();
            assert!(
                line.contains(" flags=t ") && line.contains(" redir=0 "),
                "{line}"
            );
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_script_that_reads_tracks_its_declared_keys_and_noloop_skips_its_writes() {
    let srv = Server::start(&[]);
    let mut t = srv.connect();
    let mut w = srv.connect();
    resp3(&mut t);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "NOLOOP"]), ok());
    assert_eq!(w.cmd(&["SET", "a", "1"]), ok());
    // A script that reads one key: every declared key is remembered (as Redis).
    let read = "return redis.call('get', KEYS[1])";
    assert_eq!(t.cmd(&["EVAL", read, "2", "a", "b"]), bulk("1"));
    assert_eq!(w.cmd(&["SET", "b", "2"]), ok());
    assert_eq!(t.read(), Some(invalidate(&["b"])));
    // A script that only writes remembers nothing, and NOLOOP hides its own write.
    let write = "return redis.call('set', KEYS[1], ARGV[1])";
    assert_eq!(t.cmd(&["EVAL", write, "1", "c", "x"]), ok());
    assert_eq!(t.cmd(&["EVAL", write, "1", "a", "y"]), ok());
    assert_eq!(w.cmd(&["SET", "c", "3"]), ok());
    assert_eq!(w.cmd(&["SET", "a", "4"]), ok());
    // `a` was invalidated by nobody but the tracked client itself (NOLOOP): the next
    // thing on the connection is PONG.
    assert_eq!(t.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

#[test]
fn redirect_to_a_resp2_subscriber_then_broken() {
    let srv = Server::start(&[]);
    let mut sub = srv.connect();
    let id = match sub.cmd(&["CLIENT", "ID"]) {
        Reply::Int(n) => n.to_string(),
        r => panic!("{r:?}"),
    };
    sub.send(&[b"SUBSCRIBE", b"__redis__:invalidate"]);
    sub.read();
    let mut t = srv.connect();
    resp3(&mut t);
    assert_eq!(t.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]), ok());
    assert_eq!(
        t.cmd(&["CLIENT", "GETREDIR"]),
        Reply::Int(id.parse().expect("client id"))
    );
    let mut w = srv.connect();
    w.cmd(&["MSET", "a", "1", "b", "1"]);
    t.cmd(&["MGET", "a", "b"]);
    w.cmd(&["INCR", "b"]);
    assert_eq!(
        sub.read(),
        Some(Reply::Array(Some(vec![
            bulk("message"),
            bulk("__redis__:invalidate"),
            Reply::Array(Some(vec![bulk("b")])),
        ])))
    );
    // The target leaves: the tracking client is told once, with the target's id.
    assert_eq!(sub.cmd(&["QUIT"]), ok());
    assert!(sub.closed());
    let mut pushed = None;
    for _ in 0..100 {
        w.cmd(&["INCR", "a"]);
        match t.cmd(&["PING"]) {
            Reply::Push(v) => {
                pushed = Some(v);
                assert_eq!(t.read(), Some(Reply::Simple("PONG".into())));
                break;
            }
            Reply::Simple(_) => t.cmd(&["GET", "a"]),
            r => panic!("{r:?}"),
        };
    }
    assert_eq!(
        pushed,
        Some(vec![
            bulk("tracking-redir-broken"),
            Reply::Int(id.parse().expect("client id"))
        ])
    );
}

#[test]
fn bcast_prefixes_get_every_matching_write() {
    let srv = Server::start(&[]);
    let mut t = srv.connect();
    resp3(&mut t);
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "user:", "PREFIX", "cfg:"]),
        ok()
    );
    let mut w = srv.connect();
    w.cmd(&[
        "MSET", "user:2", "x", "other", "y", "user:1", "z", "cfg:a", "1",
    ]);
    assert_eq!(t.read(), Some(invalidate(&["cfg:a"])));
    assert_eq!(t.read(), Some(invalidate(&["user:1", "user:2"])));
    w.cmd(&["DEL", "other", "user:1"]);
    assert_eq!(t.read(), Some(invalidate(&["user:1"])));
    match t.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "use"]) {
        Reply::Error(e) => assert!(e.starts_with("ERR Prefix 'use' overlaps"), "{e}"),
        r => panic!("{r:?}"),
    }
}

/// Drops the keys an invalidation push names from `cache`.
fn drop_keys(r: &Reply, cache: &mut HashMap<String, Vec<u8>>) {
    if let Reply::Push(v) = r {
        if let Some(Reply::Array(Some(ks))) = v.get(1) {
            for k in ks {
                cache.remove(&k.text());
            }
        }
    }
}

/// A client caching by the rules (cache a GET reply; drop a key when its
/// invalidation arrives) while writers on other threads change the keys: once the
/// writers stop and the pushes are drained, every cached value is the stored one.
#[test]
fn a_tracking_cache_is_never_left_stale() {
    let srv = Server::start(&[]);
    let keys: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let mut setup = srv.connect();
    for k in &keys {
        setup.cmd(&["SET", k, "0"]);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let mut c = srv.connect();
            let keys = keys.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    c.cmd(&["INCR", &keys[i % keys.len()]]);
                    i += 7;
                }
            })
        })
        .collect();
    let mut t = srv.connect();
    resp3(&mut t);
    t.cmd(&["CLIENT", "TRACKING", "on"]);
    let mut cache: HashMap<String, Vec<u8>> = HashMap::new();
    for n in 0..3000 {
        let k = &keys[n % keys.len()];
        if cache.contains_key(k) {
            // A cache hit: let the invalidations that arrived meanwhile in.
            t.send(&[b"PING"]);
            loop {
                match t.read().expect("reply") {
                    Reply::Simple(s) if s == "PONG" => break,
                    r => drop_keys(&r, &mut cache),
                }
            }
            continue;
        }
        t.send(&[b"GET", k.as_bytes()]);
        loop {
            match t.read().expect("reply") {
                Reply::Bulk(Some(v)) => {
                    cache.insert(k.clone(), v);
                    break;
                }
                r @ Reply::Push(_) => drop_keys(&r, &mut cache),
                r => panic!("{r:?}"),
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().expect("writer thread");
    }
    // Every write has replied, so every invalidation is queued: drain up to PONG.
    t.send(&[b"PING"]);
    loop {
        match t.read().expect("reply") {
            Reply::Simple(s) if s == "PONG" => break,
            r => drop_keys(&r, &mut cache),
        }
    }
    for (k, v) in &cache {
        assert_eq!(setup.cmd(&["GET", k]), Reply::Bulk(Some(v.clone())), "{k}");
    }
}
