//! Handler tests of client-side caching: several clients on one in-process store, the
//! messages each finds in its mailbox, byte for byte where the shape matters.

use crate::cmd::testkit::{decode, Kit, Value};
use crate::cmd::Client;

/// A second connection, registered as a REDIRECT target.
fn other(k: &Kit, id: u64) -> Client {
    let c = Client::new(id, format!("127.0.0.1:{}", 50000 + id), true);
    k.shared.store.tracking().register(&c.mailbox);
    k.shared
        .clients
        .add(id, c.addr.clone(), "127.0.0.1:6380".into());
    c
}

/// A kit whose own client (id 1) is registered like a real connection.
fn kit() -> Kit {
    let k = Kit::new();
    k.shared.store.tracking().register(&k.client.mailbox);
    k.shared
        .clients
        .add(1, "127.0.0.1:50000".into(), "127.0.0.1:6380".into());
    k
}

/// Runs `args` as client `c` (with its own protocol) and returns the raw reply.
fn run_as(k: &mut Kit, c: &mut Client, args: &[&str]) -> String {
    std::mem::swap(&mut k.client, c);
    let own = k.out.resp3;
    k.out.resp3 = k.client.mailbox.resp3();
    let r = k.raw(args);
    std::mem::swap(&mut k.client, c);
    k.out.resp3 = own;
    r
}

/// The raw bytes waiting in `c`'s mailbox.
fn mail(c: &Client) -> String {
    let mut out = Vec::new();
    c.mailbox.take_into(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded messages waiting in `c`'s mailbox.
fn messages(c: &Client) -> Vec<Value> {
    let raw = mail(c);
    let mut pos = 0;
    let mut v = Vec::new();
    while pos < raw.len() {
        v.push(decode(raw.as_bytes(), &mut pos));
    }
    v
}

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

#[test]
fn default_mode_invalidates_each_read_key_once() {
    let mut k = kit();
    let mut w = other(&k, 2);
    k.value(&["HELLO", "3"]);
    k.ok(&["CLIENT", "TRACKING", "on"]);
    run_as(&mut k, &mut w, &["MSET", "a", "1", "b", "1"]);
    k.expect(&["GET", "a"], "$1\r\n1\r\n");
    // b was never read by the tracking client: no message for it.
    run_as(&mut k, &mut w, &["INCR", "b"]);
    assert_eq!(mail(&k.client), "");
    run_as(&mut k, &mut w, &["INCR", "a"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"
    );
    // Told once: the key left the table until it is read again.
    run_as(&mut k, &mut w, &["INCR", "a"]);
    assert_eq!(mail(&k.client), "");
    // Reads of every kind are remembered: a hash field read, then HDEL of it.
    run_as(&mut k, &mut w, &["HSET", "h", "f", "1"]);
    k.value(&["HGET", "h", "f"]);
    k.value(&["MGET", "a", "x"]);
    run_as(&mut k, &mut w, &["HDEL", "h", "f"]);
    run_as(&mut k, &mut w, &["DEL", "a", "x"]);
    assert_eq!(
        messages(&k.client),
        vec![
            Value::Arr(vec![s("invalidate"), Value::Arr(vec![s("h")])]),
            Value::Arr(vec![s("invalidate"), Value::Arr(vec![s("a")])]),
        ]
    );
    // DEL of the missing x changed nothing: x is still remembered.
    let st = k.shared.store.tracking().stats();
    assert_eq!((st.keys, st.items, st.clients), (1, 1, 1));
    // Its own write is invalidated too (after its reply), unless NOLOOP.
    k.value(&["GET", "a"]);
    k.ok(&["SET", "a", "2"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"
    );
    k.ok(&["CLIENT", "TRACKING", "on", "NOLOOP"]);
    k.value(&["GET", "a"]);
    k.ok(&["SET", "a", "3"]);
    assert_eq!(mail(&k.client), "");
    // The key left the table all the same (as in Redis): read it again.
    k.value(&["GET", "a"]);
    run_as(&mut k, &mut w, &["SET", "a", "4"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"
    );
    // Off: nothing is remembered and the table is emptied when nobody tracks.
    k.value(&["GET", "a"]);
    k.ok(&["CLIENT", "TRACKING", "off"]);
    assert_eq!(k.shared.store.tracking().stats().keys, 0);
    run_as(&mut k, &mut w, &["SET", "a", "5"]);
    assert_eq!(mail(&k.client), "");
}

#[test]
fn resp2_without_redirect_gets_nothing() {
    let mut k = kit();
    let mut w = other(&k, 2);
    k.ok(&["CLIENT", "TRACKING", "on"]);
    k.value(&["GET", "a"]);
    run_as(&mut k, &mut w, &["SET", "a", "1"]);
    assert_eq!(mail(&k.client), "", "RESP2 cannot take a push");
}

#[test]
fn redirect_to_resp2_subscriber_resp3_client_and_broken() {
    let mut k = kit();
    let mut sub = other(&k, 2);
    let mut w = other(&k, 3);
    k.expect(
        &["CLIENT", "TRACKING", "on", "REDIRECT", "99"],
        "-ERR The client ID you want redirect to does not exist\r\n",
    );
    k.ok(&["CLIENT", "TRACKING", "on", "REDIRECT", "2"]);
    k.expect(&["CLIENT", "GETREDIR"], ":2\r\n");
    k.value(&["GET", "a"]);
    // A RESP2 target that does not listen on __redis__:invalidate gets nothing.
    run_as(&mut k, &mut w, &["SET", "a", "1"]);
    assert_eq!(mail(&sub), "");
    run_as(&mut k, &mut sub, &["SUBSCRIBE", "__redis__:invalidate"]);
    k.value(&["GET", "a"]);
    run_as(&mut k, &mut w, &["SET", "a", "2"]);
    assert_eq!(
        mail(&sub),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\na\r\n"
    );
    assert_eq!(mail(&k.client), "");
    // FLUSHALL: a null key list (in the tracking client's protocol, RESP2 here).
    k.value(&["GET", "a"]);
    run_as(&mut k, &mut w, &["FLUSHALL"]);
    assert_eq!(
        mail(&sub),
        "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
    );
    // A RESP3 target gets the push form.
    run_as(&mut k, &mut sub, &["UNSUBSCRIBE"]);
    run_as(&mut k, &mut sub, &["HELLO", "3"]);
    mail(&sub);
    k.value(&["GET", "a"]);
    run_as(&mut k, &mut w, &["SET", "a", "3"]);
    assert_eq!(mail(&sub), ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n");
    // The target goes away: a RESP3 tracking client is told once, then nothing.
    k.value(&["HELLO", "3"]);
    crate::tracking::disconnect(&k.shared.store, &mut sub);
    k.value(&["GET", "a"]);
    k.value(&["GET", "b"]);
    run_as(&mut k, &mut w, &["MSET", "a", "4", "b", "4"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$21\r\ntracking-redir-broken\r\n:2\r\n"
    );
    let info = k.value(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(
        info,
        Value::Arr(vec![
            s("flags"),
            Value::Arr(vec![s("on"), s("broken_redirect")]),
            s("redirect"),
            Value::Int(2),
            s("prefixes"),
            Value::Arr(vec![]),
        ])
    );
}

#[test]
fn bcast_prefixes_one_message_per_prefix_and_noloop() {
    let mut k = kit();
    let mut w = other(&k, 2);
    k.value(&["HELLO", "3"]);
    k.ok(&[
        "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
    ]);
    run_as(
        &mut k,
        &mut w,
        &["MSET", "a:2", "1", "c:1", "1", "b:1", "1", "a:1", "1"],
    );
    assert_eq!(
        messages(&k.client),
        vec![
            Value::Arr(vec![s("invalidate"), Value::Arr(vec![s("a:1"), s("a:2")])]),
            Value::Arr(vec![s("invalidate"), Value::Arr(vec![s("b:1")])]),
        ]
    );
    // Reads are not remembered in BCAST mode.
    k.value(&["GET", "zz"]);
    assert_eq!(k.shared.store.tracking().stats().keys, 0);
    // Prefixes add up; overlapping ones are refused with Redis's texts.
    k.ok(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:"]);
    k.expect(
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"],
        "-ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.\r\n",
    );
    k.expect(
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "xy"],
        "-ERR Prefix 'x' overlaps with another provided prefix 'xy'. Prefixes for a single client must not overlap.\r\n",
    );
    k.expect(
        &["CLIENT", "TRACKING", "on"],
        "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
    let st = k.shared.store.tracking().stats();
    assert_eq!((st.prefixes, st.clients), (3, 1));
    // NOLOOP: its own writes are not broadcast to it, others' are.
    k.ok(&["CLIENT", "TRACKING", "off"]);
    k.ok(&["CLIENT", "TRACKING", "on", "BCAST", "NOLOOP"]);
    k.ok(&["SET", "mine", "1"]);
    assert_eq!(mail(&k.client), "");
    run_as(&mut k, &mut w, &["SET", "theirs", "1"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\ntheirs\r\n"
    );
    let info = k.value(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(
        info,
        Value::Arr(vec![
            s("flags"),
            Value::Arr(vec![s("on"), s("bcast"), s("noloop")]),
            s("redirect"),
            Value::Int(0),
            s("prefixes"),
            Value::Arr(vec![s("")]),
        ])
    );
    let list = k.strings(&["CLIENT", "LIST"]).join("\n");
    assert!(
        list.contains("id=1 ") && list.contains(" flags=tB "),
        "{list}"
    );
    assert!(list.contains(" redir=0 "), "{list}");
}

#[test]
fn optin_optout_and_caching() {
    let mut k = kit();
    let mut w = other(&k, 2);
    k.value(&["HELLO", "3"]);
    k.expect(
        &["CLIENT", "CACHING", "yes"],
        "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n",
    );
    k.expect(
        &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
        "-ERR You can't use both OPTIN and OPTOUT\r\n",
    );
    k.expect(
        &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
        "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n",
    );
    k.expect(
        &["CLIENT", "TRACKING", "on", "PREFIX", "a"],
        "-ERR PREFIX option requires BCAST mode to be enabled\r\n",
    );
    k.expect(&["CLIENT", "TRACKING", "maybe"], "-ERR syntax error\r\n");
    k.ok(&["CLIENT", "TRACKING", "on", "OPTIN"]);
    k.expect(
        &["CLIENT", "CACHING", "no"],
        "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTIN mode.\r\n"
            .replace("OPTIN mode", "OPTOUT mode")
            .as_str(),
    );
    k.value(&["GET", "a"]);
    k.ok(&["CLIENT", "CACHING", "yes"]);
    k.value(&["GET", "b"]);
    // The YES applied to one command only.
    k.value(&["GET", "c"]);
    run_as(&mut k, &mut w, &["MSET", "a", "1", "b", "1", "c", "1"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nb\r\n"
    );
    k.expect(
        &["CLIENT", "TRACKING", "on", "OPTOUT"],
        "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
    );
    k.ok(&["CLIENT", "TRACKING", "off"]);
    k.ok(&["CLIENT", "TRACKING", "on", "OPTOUT"]);
    k.ok(&["CLIENT", "CACHING", "no"]);
    let info = k.value(&["CLIENT", "TRACKINGINFO"]);
    let Value::Arr(fields) = info else {
        panic!("map")
    };
    assert_eq!(
        fields[1],
        Value::Arr(vec![s("on"), s("optout"), s("caching-no")])
    );
    k.value(&["GET", "a"]);
    k.value(&["GET", "b"]);
    run_as(&mut k, &mut w, &["MSET", "a", "2", "b", "2"]);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nb\r\n"
    );
    k.ok(&["CLIENT", "TRACKING", "off"]);
    k.expect(&["CLIENT", "GETREDIR"], ":-1\r\n");
    assert_eq!(
        k.value(&["CLIENT", "TRACKINGINFO"]),
        Value::Arr(vec![
            s("flags"),
            Value::Arr(vec![s("off")]),
            s("redirect"),
            Value::Int(-1),
            s("prefixes"),
            Value::Arr(vec![]),
        ])
    );
    k.expect(
        &["CLIENT", "GETREDIR", "x"],
        "-ERR wrong number of arguments for 'client|getredir' command\r\n",
    );
}

#[test]
fn transactions_flush_and_expiry() {
    let mut k = kit();
    let mut w = other(&k, 2);
    k.value(&["HELLO", "3"]);
    k.ok(&["CLIENT", "TRACKING", "on"]);
    k.ok(&["MSET", "a", "1", "b", "2"]);
    k.value(&["GET", "a"]);
    // Reads inside MULTI/EXEC are remembered; the block's write of a key it read is
    // invalidated after the EXEC reply.
    k.ok(&["MULTI"]);
    k.raw(&["INCR", "a"]);
    k.raw(&["GET", "b"]);
    k.expect(&["EXEC"], "*2\r\n:2\r\n$1\r\n2\r\n");
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n"
    );
    run_as(&mut k, &mut w, &["FLUSHDB"]);
    assert_eq!(mail(&k.client), ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    assert_eq!(k.shared.store.tracking().stats().keys, 0);
    // An expired key removed by the sweeper is a change.
    run_as(&mut k, &mut w, &["SET", "e", "1", "PX", "1"]);
    k.ok(&["CLIENT", "TRACKING", "off"]);
    k.ok(&["CLIENT", "TRACKING", "on", "BCAST"]);
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(k.sweep(), 1);
    assert_eq!(
        mail(&k.client),
        ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n"
    );
    let info = k.strings(&["INFO", "stats"]).join("\n");
    assert!(info.contains("tracking_total_prefixes:1"), "{info}");
    let clients = k.strings(&["INFO", "clients"]).join("\n");
    assert!(clients.contains("tracking_clients:1"), "{clients}");
}

#[test]
fn table_is_bounded_by_max_keys() {
    let mut k = kit();
    let mut r = other(&k, 2);
    run_as(&mut k, &mut r, &["HELLO", "3"]);
    mail(&r);
    run_as(&mut k, &mut r, &["CLIENT", "TRACKING", "on"]);
    for i in 0..20 {
        run_as(&mut k, &mut r, &["GET", &format!("k{i}")]);
    }
    assert_eq!(k.shared.store.tracking().stats().keys, 20);
    k.ok(&["CONFIG", "SET", "tracking-table-max-keys", "5"]);
    assert_eq!(
        k.strings(&["CONFIG", "GET", "tracking-table-max-keys"]),
        vec!["tracking-table-max-keys", "5"]
    );
    let got = messages(&r);
    assert_eq!(got.len(), 15, "{got:?}");
    assert_eq!(k.shared.store.tracking().stats().keys, 5);
    // Reading a new key evicts another one, not the one just read.
    run_as(&mut k, &mut r, &["GET", "fresh"]);
    assert_eq!(messages(&r).len(), 1);
    assert_eq!(k.shared.store.tracking().stats().keys, 5);
    k.ok(&["SET", "fresh", "1"]);
    assert_eq!(mail(&r), ">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nfresh\r\n");
    k.expect(
        &["CONFIG", "SET", "tracking-table-max-keys", "x"],
        "-ERR CONFIG SET failed (possibly related to argument 'tracking-table-max-keys') - argument couldn't be parsed into an integer\r\n",
    );
}
