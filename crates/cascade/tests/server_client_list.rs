//! CLIENT LIST's fields over real sockets: a client's buffer is published as
//! `qbuf`/`qbuf-free`, a big argument does not pin a big buffer, and an idle client
//! gives its buffer back (Redis's behaviour, checked by its querybuf unit); `db` and
//! `cmd` show the selected database and the last command.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Server};

/// `qbuf + qbuf-free` of the client named `name`.
fn query_buffer(r: &mut Client, name: &str) -> u64 {
    let list = r.cmd(&["CLIENT", "LIST"]).text();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no {name} in {list}"));
    let field = |f: &str| -> u64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(f))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {f} in {line}"))
    };
    field("qbuf=") + field("qbuf-free=")
}

#[test]
fn query_buffer_is_published_fitted_and_trimmed_when_idle() {
    let srv = Server::start(&[]);
    let mut r = srv.connect();
    let mut c = srv.connect();
    c.cmd(&["CLIENT", "SETNAME", "probe"]);
    let small = query_buffer(&mut r, "probe");
    assert!((16384..32768).contains(&small), "{small}");

    let big = "A".repeat(400_000);
    c.cmd(&["SET", "x", &big]);
    let after_big = query_buffer(&mut r, "probe");
    assert!(after_big > 32768, "{after_big}");
    // Small commands for a while: the buffer is fitted to them again.
    let deadline = Instant::now() + Duration::from_secs(2);
    while query_buffer(&mut r, "probe") >= after_big {
        assert!(Instant::now() < deadline, "never shrank from {after_big}");
        c.cmd(&["SET", "x", "y"]);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Idle for over two seconds: given back.
    let deadline = Instant::now() + Duration::from_secs(10);
    while query_buffer(&mut r, "probe") != 0 {
        assert!(Instant::now() < deadline, "idle buffer never freed");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn db_and_cmd_fields() {
    let srv = Server::start(&[]);
    let mut a = srv.connect();
    let mut b = srv.connect();
    a.cmd(&["CLIENT", "SETNAME", "a"]);
    a.cmd(&["SELECT", "3"]);
    a.cmd(&["SET", "k", "v"]);
    let list = b.cmd(&["CLIENT", "LIST"]).text();
    let line = |name: &str| {
        list.lines()
            .find(|l| l.contains(&format!(" name={name} ")))
            .unwrap_or_else(|| panic!("no {name} in {list}"))
            .to_string()
    };
    let la = line("a");
    assert!(la.contains(" db=3 ") && la.contains(" cmd=set "), "{la}");
    let lb = line("");
    assert!(
        lb.contains(" db=0 ") && lb.contains(" cmd=client|list "),
        "{lb}"
    );
    let info = a.cmd(&["CLIENT", "INFO"]).text();
    assert!(
        info.contains(" db=3 ") && info.contains(" cmd=client|info "),
        "{info}"
    );
    // Filters: ID (several), TYPE.
    let id = info
        .split(' ')
        .find_map(|kv| kv.strip_prefix("id="))
        .expect("id")
        .to_string();
    let only = b.cmd(&["CLIENT", "LIST", "ID", &id, "999999"]).text();
    assert_eq!(only.lines().count(), 1, "{only}");
    assert!(only.contains(&format!("id={id} ")), "{only}");
    let normal = b.cmd(&["CLIENT", "LIST", "TYPE", "normal"]).text();
    assert_eq!(normal.lines().count(), 2, "{normal}");
    assert_eq!(b.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]).text(), "");
    assert_eq!(b.cmd(&["CLIENT", "LIST", "TYPE", "replica"]).text(), "");
    let err = |r: common::Reply| match r {
        common::Reply::Error(e) => e,
        r => panic!("{r:?}"),
    };
    assert_eq!(
        err(b.cmd(&["CLIENT", "LIST", "ID", "x"])),
        "ERR Invalid client ID"
    );
    assert!(err(b.cmd(&["CLIENT", "LIST", "TYPE", "x"])).starts_with("ERR Unknown client type"));
}
