//! Blocked clients over real sockets: Redis's first-come-first-served order across
//! worker threads, CLIENT UNBLOCK, and a woken client passing over a key that now
//! holds another type; a writer hears back only after the clients it woke ran.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Reply, Server};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn int(c: &mut Client, args: &[&str]) -> i64 {
    match c.cmd(args) {
        Reply::Int(n) => n,
        r => panic!("{args:?}: {r:?}"),
    }
}

/// Waits until INFO reports `n` blocked clients.
fn wait_blocked(c: &mut Client, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.cmd(&["INFO", "clients"]).text();
        if info.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(Instant::now() < deadline, "never {n} blocked: {info}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn first_parked_is_served_first() {
    let srv = Server::start(&[]); // two worker threads
    let mut r = srv.connect();
    // Four clients on alternating workers, each parked in turn.
    let mut waiters: Vec<Client> = (0..4).map(|_| srv.connect()).collect();
    for (i, w) in waiters.iter_mut().enumerate() {
        w.send(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut r, i + 1);
    }
    // One push with all four elements: the first parked takes the first, and so on.
    int(&mut r, &["RPUSH", "q", "a", "b", "c", "d"]);
    for (w, want) in waiters.iter_mut().zip(["a", "b", "c", "d"]) {
        assert_eq!(
            w.read(),
            Some(Reply::Array(Some(vec![bulk("q"), bulk(want)])))
        );
    }
}

#[test]
fn client_unblock_and_wrong_type_wakeups() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut w = srv.connect();
    let id = int(&mut w, &["CLIENT", "ID"]);
    let id = id.to_string();

    w.send(&[b"BZPOPMIN", b"z", b"0"]);
    wait_blocked(&mut r, 1);
    assert_eq!(int(&mut r, &["CLIENT", "UNBLOCK", &id]), 1);
    assert_eq!(w.read(), Some(Reply::Array(None)));

    w.send(&[b"BLPOP", b"l", b"0"]);
    wait_blocked(&mut r, 1);
    assert_eq!(int(&mut r, &["CLIENT", "UNBLOCK", &id, "ERROR"]), 1);
    assert_eq!(
        w.read(),
        Some(Reply::Error(
            "UNBLOCKED client unblocked via CLIENT UNBLOCK".into()
        ))
    );
    assert_eq!(int(&mut r, &["CLIENT", "UNBLOCK", &id]), 0);

    // A key that becomes a string wakes the client, which keeps waiting.
    w.send(&[b"BLPOP", b"l", b"0"]);
    wait_blocked(&mut r, 1);
    assert_eq!(r.cmd(&["SET", "l", "x"]), Reply::Simple("OK".into()));
    assert_eq!(int(&mut r, &["DEL", "l"]), 1);
    int(&mut r, &["RPUSH", "l", "v"]);
    assert_eq!(
        w.read(),
        Some(Reply::Array(Some(vec![bulk("l"), bulk("v")])))
    );
}

#[test]
fn a_writer_hears_back_after_the_clients_it_woke() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut first = srv.connect();
    let mut second = srv.connect();
    for round in 0..20 {
        first.send(&[b"BLMOVE", b"l1", b"l2", b"RIGHT", b"LEFT", b"0"]);
        wait_blocked(&mut r, 1);
        second.send(&[b"BLMOVE", b"l2", b"l3", b"LEFT", b"RIGHT", b"0"]);
        wait_blocked(&mut r, 2);
        int(&mut r, &["RPUSH", "l1", "foo"]);
        // Both moves happened before RPUSH's reply, as in Redis.
        assert_eq!(int(&mut r, &["LLEN", "l1"]), 0, "round {round}");
        assert_eq!(int(&mut r, &["LLEN", "l2"]), 0, "round {round}");
        assert_eq!(int(&mut r, &["LLEN", "l3"]), 1, "round {round}");
        assert_eq!(first.read(), Some(bulk("foo")));
        assert_eq!(second.read(), Some(bulk("foo")));
        int(&mut r, &["DEL", "l3"]);
    }
}

fn ok(c: &mut Client, args: &[&str]) {
    assert_eq!(c.cmd(args), Reply::Simple("OK".into()), "{args:?}");
}

/// Blocked clients and WATCH stay with their logical database across SWAPDB, as in
/// Redis: a swap that brings the awaited key wakes the client (with no timeout it
/// would otherwise wait forever), and MOVE into a database wakes a client there.
#[test]
fn swapdb_and_move_wake_parked_clients_of_the_logical_database() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut w = srv.connect();
    ok(&mut r, &["SELECT", "1"]);
    int(&mut r, &["RPUSH", "k", "hello"]);
    ok(&mut w, &["SELECT", "9"]);
    w.send(&[b"BRPOP", b"k", b"0"]);
    wait_blocked(&mut r, 1);
    ok(&mut r, &["SWAPDB", "1", "9"]);
    assert!(
        w.reply_within(Duration::from_secs(5)),
        "SWAPDB did not wake"
    );
    assert_eq!(
        w.read(),
        Some(Reply::Array(Some(vec![bulk("k"), bulk("hello")])))
    );
    // Parked in 9 again; a swap brings nothing (the key is in neither): still parked.
    w.send(&[b"BRPOP", b"k", b"0"]);
    wait_blocked(&mut r, 1);
    ok(&mut r, &["SWAPDB", "1", "9"]);
    // After the swap, logical 9 is the other physical database: a push there wakes.
    ok(&mut r, &["SELECT", "2"]);
    int(&mut r, &["RPUSH", "k", "moved"]);
    assert_eq!(int(&mut r, &["MOVE", "k", "9"]), 1);
    assert!(w.reply_within(Duration::from_secs(5)), "MOVE did not wake");
    assert_eq!(
        w.read(),
        Some(Reply::Array(Some(vec![bulk("k"), bulk("moved")])))
    );
}

#[test]
fn swapdb_and_move_touch_watched_keys() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut w = srv.connect();
    let exec = |w: &mut Client| {
        ok(w, &["MULTI"]);
        assert_eq!(w.cmd(&["PING"]), Reply::Simple("QUEUED".into()));
        w.cmd(&["EXEC"])
    };
    // A watched key that exists: the swap changes it.
    ok(&mut w, &["SET", "x", "30"]);
    ok(&mut w, &["WATCH", "x"]);
    ok(&mut r, &["SWAPDB", "0", "1"]);
    assert_eq!(exec(&mut w), Reply::Array(None));
    // A missing key the swap brings.
    ok(&mut w, &["WATCH", "x"]);
    ok(&mut r, &["SWAPDB", "0", "1"]);
    assert_eq!(exec(&mut w), Reply::Array(None));
    // A key in neither database: the swap changes nothing, and the watch now
    // follows database 0 (the other physical database): a write there counts.
    ok(&mut w, &["WATCH", "nope"]);
    ok(&mut r, &["SWAPDB", "0", "1"]);
    assert_eq!(
        exec(&mut w),
        Reply::Array(Some(vec![Reply::Simple("PONG".into())]))
    );
    ok(&mut w, &["WATCH", "nope"]);
    ok(&mut r, &["SWAPDB", "0", "1"]);
    ok(&mut r, &["SET", "nope", "1"]);
    assert_eq!(exec(&mut w), Reply::Array(None));
    // MOVE into the watching client's database.
    ok(&mut w, &["SELECT", "3"]);
    ok(&mut w, &["WATCH", "m"]);
    ok(&mut r, &["SET", "m", "v"]);
    assert_eq!(int(&mut r, &["MOVE", "m", "3"]), 1);
    assert_eq!(exec(&mut w), Reply::Array(None));
}
