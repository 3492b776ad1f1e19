//! Lua scripting over real sockets: a runaway script makes other clients answer
//! `-BUSY` (on either worker thread) until `SCRIPT KILL` from another connection stops
//! it, the script's connection stays usable, pipelined commands after an EVAL keep
//! their order, concurrent EVALSHA increments are atomic, and function libraries
//! survive a restart.

mod common;

use std::time::{Duration, Instant};

use common::{Reply, Server};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

#[test]
fn busy_script_is_killed_from_another_connection() {
    let srv = Server::start(&[]); // two worker threads
    let mut admin = srv.connect();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]),
        Reply::Simple("OK".into())
    );
    let mut runner = srv.connect();
    runner.send(&[b"EVAL", b"local i = 0 while true do i = i + 1 end", b"0"]);
    // Clients on both workers get -BUSY, not a stall.
    let mut others: Vec<_> = (0..2).map(|_| srv.connect()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    for o in &mut others {
        loop {
            match o.cmd(&["GET", "x"]) {
                Reply::Error(e) if e.starts_with("BUSY Redis is busy running a script.") => break,
                r => {
                    assert!(Instant::now() < deadline, "never busy: {r:?}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]), Reply::Simple("OK".into()));
    match runner.read() {
        Some(Reply::Error(e)) => assert!(e.contains("Script killed by user"), "{e}"),
        r => panic!("{r:?}"),
    }
    assert_eq!(runner.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        others[0].cmd(&["SET", "x", "1"]),
        Reply::Simple("OK".into())
    );
    // A script that wrote cannot be killed.
    runner.send(&[
        b"EVAL",
        b"redis.call('set','y','1') while true do end",
        b"0",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match admin.cmd(&["SCRIPT", "KILL"]) {
            Reply::Error(e) if e.starts_with("UNKILLABLE") => break,
            r => {
                assert!(Instant::now() < deadline, "{r:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    // SHUTDOWN NOSAVE is the way out, as in Redis: the server process ends.
    let _ = admin.try_cmd(&["SHUTDOWN", "NOSAVE"]);
}

#[test]
fn pipelined_order_and_atomic_increments() {
    let srv = Server::start(&[]);
    let mut c = srv.connect();
    // EVAL between two commands in one pipeline: replies come back in order.
    c.send(&[b"SET", b"k", b"1"]);
    c.send(&[b"EVAL", b"return redis.call('incr', KEYS[1])", b"1", b"k"]);
    c.send(&[b"GET", b"k"]);
    assert_eq!(c.read(), Some(Reply::Simple("OK".into())));
    assert_eq!(c.read(), Some(Reply::Int(2)));
    assert_eq!(c.read(), Some(bulk("2")));
    let sha = match c.cmd(&["SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"]) {
        Reply::Bulk(Some(s)) => String::from_utf8(s).expect("sha"),
        r => panic!("{r:?}"),
    };
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = srv.addr();
            let sha = sha.clone();
            std::thread::spawn(move || {
                let mut c = common::connect_addr(&addr);
                for _ in 0..250 {
                    assert!(matches!(c.cmd(&["EVALSHA", &sha, "1", "n"]), Reply::Int(_)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    assert_eq!(c.cmd(&["GET", "n"]), bulk("1000"));
}

#[test]
fn functions_survive_a_restart() {
    let dir = common::temp_dir("scripting-restart");
    let lib = "#!lua name=lib\nredis.register_function('twice', function(keys, args) return args[1] * 2 end)";
    {
        let mut srv = Server::start_in(&dir, &[]);
        srv.keep_dir = true;
        let mut c = srv.connect();
        assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("lib"));
        assert_eq!(c.cmd(&["FCALL", "twice", "0", "21"]), Reply::Int(42));
        let _ = srv.signal_and_wait("-TERM");
    }
    let srv = Server::start_in(&dir, &[]);
    let mut c = srv.connect();
    assert_eq!(c.cmd(&["FCALL", "twice", "0", "5"]), Reply::Int(10));
    match c.cmd(&["FUNCTION", "LIST", "WITHCODE"]) {
        Reply::Array(Some(libs)) => assert_eq!(libs.len(), 1),
        r => panic!("{r:?}"),
    }
}
