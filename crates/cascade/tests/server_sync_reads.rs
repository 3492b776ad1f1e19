//! Reads under `--durability sync` (issue #30, `cascade-server` `visible.rs`): a reply
//! never reveals a write that is not durable yet, but a read of keys whose writes are
//! all durable does not wait for a persist.
//!
//! The server stretches every persist of its shared log to [`PERSIST_MS`]
//! (`CASCADE_TEST_PERSIST_DELAY_MS`, a test hook of the persister threads), so what
//! waits for a persist and what does not is told apart by wide margins of time.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{encode, temp_dir, Client, Reply, Server};

/// How long each persist takes in these tests.
const PERSIST_MS: u64 = 1500;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

fn info_num(c: &mut Client, field: &str) -> u64 {
    let Reply::Bulk(Some(b)) = c.cmd(&["INFO", "persistence"]) else {
        panic!("INFO reply");
    };
    let text = String::from_utf8_lossy(&b).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} missing from INFO persistence"))
}

fn slow_persists() -> Server {
    let delay = PERSIST_MS.to_string();
    Server::start_env(
        &temp_dir("sync-reads"),
        &["--durability", "sync"],
        &[("CASCADE_TEST_PERSIST_DELAY_MS", delay.as_str())],
    )
}

#[test]
fn a_read_of_an_unflushed_write_waits_for_its_persist_and_other_reads_do_not() {
    let srv = slow_persists();
    let mut setup = srv.connect();
    // Durable before the test begins: each reply came after its persist.
    let t = Instant::now();
    assert_eq!(
        setup.cmd(&["SET", "durable", "d1"]),
        Reply::Simple("OK".into())
    );
    assert!(
        t.elapsed() >= Duration::from_millis(PERSIST_MS - 100),
        "a write was acknowledged before its persist"
    );
    let unheld0 = info_num(&mut setup, "cascade_sync_reads_unheld");

    // A write whose persist now takes PERSIST_MS.
    let mut writer = srv.connect();
    let t0 = Instant::now();
    writer.send(&[b"SET", b"fresh", b"v1"]);
    std::thread::sleep(Duration::from_millis(200));
    let mut reader = srv.connect(); // GET of the unflushed key
    let mut keyless = srv.connect(); // DBSIZE counts it
    let mut multi = srv.connect(); // MGET of a durable and the unflushed key
    let mut other = srv.connect(); // GET of a durable key, MGET of untouched ones
    reader.send(&[b"GET", b"fresh"]);
    keyless.send(&[b"DBSIZE"]);
    multi.send(&[b"MGET", b"durable", b"fresh"]);
    let t1 = Instant::now();
    other.send(&[b"GET", b"durable"]);
    assert!(
        other.reply_within(Duration::from_millis(PERSIST_MS / 2)),
        "a read of a durable key waited for the persist in flight"
    );
    assert!(t1.elapsed() < Duration::from_millis(PERSIST_MS / 2));
    assert_eq!(other.read(), Some(bulk("d1")));
    assert_eq!(
        other.cmd(&["MGET", "never-1", "never-2"]),
        Reply::Array(Some(vec![Reply::Bulk(None), Reply::Bulk(None)]))
    );
    assert!(
        t0.elapsed() < Duration::from_millis(PERSIST_MS - 300),
        "too slow to tell"
    );
    // The write is not durable yet: nothing that reveals it may have been answered.
    for (what, c) in [
        ("SET", &mut writer),
        ("GET of it", &mut reader),
        ("DBSIZE", &mut keyless),
        ("MGET with it", &mut multi),
    ] {
        assert!(
            !c.reply_within(Duration::from_millis(50)),
            "{what} was answered before the write's persist ended"
        );
    }
    assert_eq!(writer.read(), Some(Reply::Simple("OK".into())));
    assert_eq!(reader.read(), Some(bulk("v1")));
    assert_eq!(keyless.read(), Some(Reply::Int(2)));
    assert_eq!(
        multi.read(),
        Some(Reply::Array(Some(vec![bulk("d1"), bulk("v1")])))
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(PERSIST_MS - 100),
        "answered before the persist could have ended"
    );
    // Once durable, the key is read at once too.
    let t2 = Instant::now();
    assert_eq!(reader.cmd(&["GET", "fresh"]), bulk("v1"));
    assert!(t2.elapsed() < Duration::from_millis(PERSIST_MS / 2));
    assert!(info_num(&mut setup, "cascade_sync_reads_unheld") >= unheld0 + 3);
}

#[test]
fn a_connection_that_writes_waits_even_for_its_reads_and_keeps_its_order() {
    let srv = slow_persists();
    let mut c = srv.connect();
    assert_eq!(c.cmd(&["SET", "a", "1"]), Reply::Simple("OK".into()));
    // A pipeline: a read of a durable key, then a write, then a read: one round, held
    // whole, replies in order.
    let t = Instant::now();
    let mut pipeline = encode(&[b"GET", b"a"]);
    pipeline.extend(encode(&[b"INCR", b"a"]));
    pipeline.extend(encode(&[b"GET", b"a"]));
    c.send_raw(&pipeline);
    assert!(
        !c.reply_within(Duration::from_millis(PERSIST_MS / 2)),
        "a reply of a round that wrote left before its persist"
    );
    assert_eq!(c.read(), Some(bulk("1")));
    assert_eq!(c.read(), Some(Reply::Int(2)));
    assert_eq!(c.read(), Some(bulk("2")));
    assert!(t.elapsed() >= Duration::from_millis(PERSIST_MS - 100));
    assert!(info_num(&mut c, "cascade_sync_persists") >= 2);
}
