//! Streams over real sockets: XREAD BLOCK with `$` woken by XADD on another worker
//! thread (and served only what came after it blocked), XREADGROUP BLOCK woken by
//! XADD, by XGROUP DESTROY (NOGROUP) and by DEL (UNBLOCKED), and acknowledged XADD
//! ids surviving a SIGKILL of the server with `--durability sync`.

mod common;

use std::time::{Duration, Instant};

use common::{temp_dir, Client, Reply, Server};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn arr(v: Vec<Reply>) -> Reply {
    Reply::Array(Some(v))
}

fn entry(id: &str, f: &str, v: &str) -> Reply {
    arr(vec![bulk(id), arr(vec![bulk(f), bulk(v)])])
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
fn xread_block_dollar_sees_only_new_entries() {
    let srv = Server::start(&[]); // two worker threads
    let mut r = srv.connect();
    let mut w = srv.connect();
    assert_eq!(r.cmd(&["XADD", "s2", "1-0", "old", "x"]), bulk("1-0"));
    w.send(&[
        b"XREAD", b"BLOCK", b"20000", b"STREAMS", b"s1", b"s2", b"$", b"$",
    ]);
    wait_blocked(&mut r, 1);
    // A write to another key leaves it parked; the XADD after it is what it gets
    // (not the entry that was there before `$`).
    assert_eq!(r.cmd(&["SET", "other", "v"]), Reply::Simple("OK".into()));
    assert_eq!(r.cmd(&["XADD", "s2", "2-0", "new", "y"]), bulk("2-0"));
    assert_eq!(
        w.read(),
        Some(arr(vec![arr(vec![
            bulk("s2"),
            arr(vec![entry("2-0", "new", "y")])
        ])]))
    );
    // A timeout answers the null array.
    w.send(&[b"XREAD", b"BLOCK", b"50", b"STREAMS", b"s2", b"$"]);
    assert_eq!(w.read(), Some(Reply::Array(None)));
}

#[test]
fn xreadgroup_block_woken_by_xadd_destroy_and_del() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut w = srv.connect();
    assert_eq!(
        r.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        Reply::Simple("OK".into())
    );
    w.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"alice",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]);
    wait_blocked(&mut r, 1);
    assert_eq!(r.cmd(&["XADD", "s", "5-0", "f", "v"]), bulk("5-0"));
    assert_eq!(
        w.read(),
        Some(arr(vec![arr(vec![
            bulk("s"),
            arr(vec![entry("5-0", "f", "v")])
        ])]))
    );
    // The delivered entry is pending for alice.
    match r.cmd(&["XPENDING", "s", "g"]) {
        Reply::Array(Some(v)) => assert_eq!(v[0], Reply::Int(1)),
        other => panic!("{other:?}"),
    }
    w.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"alice",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]);
    wait_blocked(&mut r, 1);
    assert_eq!(r.cmd(&["XGROUP", "DESTROY", "s", "g"]), Reply::Int(1));
    match w.read() {
        Some(Reply::Error(e)) => assert!(e.starts_with("NOGROUP"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r.cmd(&["XGROUP", "CREATE", "s", "g", "$"]),
        Reply::Simple("OK".into())
    );
    w.send(&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"bob",
        b"BLOCK",
        b"0",
        b"STREAMS",
        b"s",
        b">",
    ]);
    wait_blocked(&mut r, 1);
    assert_eq!(r.cmd(&["DEL", "s"]), Reply::Int(1));
    assert_eq!(
        w.read(),
        Some(Reply::Error(
            "UNBLOCKED the stream key no longer exists".into()
        ))
    );
    wait_blocked(&mut r, 0);
}

#[test]
fn acknowledged_entries_survive_sigkill() {
    let dir = temp_dir("streams-kill");
    let mut ids = Vec::new();
    {
        let mut srv = Server::start_in(&dir, &["--durability", "sync"]);
        srv.keep_dir = true;
        let mut c = srv.connect();
        c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        for i in 0..50 {
            match c.cmd(&["XADD", "s", "*", "i", &i.to_string()]) {
                Reply::Bulk(Some(id)) => ids.push(String::from_utf8(id).expect("utf8")),
                other => panic!("{other:?}"),
            }
        }
        c.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "10",
            "STREAMS",
            "s",
            ">",
        ]);
        srv.kill9();
    }
    let srv = Server::start_in(&dir, &[]);
    let mut c = srv.connect();
    assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(50));
    match c.cmd(&["XRANGE", "s", "-", "+"]) {
        Reply::Array(Some(v)) => {
            let got: Vec<Reply> = v
                .iter()
                .map(|e| match e {
                    Reply::Array(Some(p)) => p[0].clone(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(got, ids.iter().map(|i| bulk(i)).collect::<Vec<_>>());
        }
        other => panic!("{other:?}"),
    }
    match c.cmd(&["XPENDING", "s", "g"]) {
        Reply::Array(Some(v)) => assert_eq!(v[0], Reply::Int(10)),
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
