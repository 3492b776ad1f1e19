//! Handler tests for the stream commands (in-process, exact replies).

use crate::cmd::testkit::{Kit, Value};

fn s(x: &str) -> Value {
    Value::Str(x.into())
}

fn arr(v: Vec<Value>) -> Value {
    Value::Arr(v)
}

/// `[id, [f, v, ...]]`.
fn entry(id: &str, fields: &[&str]) -> Value {
    arr(vec![s(id), arr(fields.iter().map(|f| s(f)).collect())])
}

#[test]
fn xadd_ids_and_errors() {
    let mut k = Kit::new();
    k.expect(&["XADD", "s", "1-1", "a", "1"], "$3\r\n1-1\r\n");
    k.expect(&["XADD", "s", "1-*", "b", "2"], "$3\r\n1-2\r\n");
    k.expect(&["XADD", "s", "5-*", "c", "3"], "$3\r\n5-0\r\n");
    k.expect(&["XADD", "s", "7", "d", "4"], "$3\r\n7-0\r\n");
    k.expect(
        &["XADD", "s", "7-0", "x", "y"],
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    k.expect(
        &["XADD", "s", "3-*", "x", "y"],
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    k.expect(
        &["XADD", "t", "0-0", "x", "y"],
        "-ERR The ID specified in XADD must be greater than 0-0\r\n",
    );
    assert_eq!(k.int(&["EXISTS", "t"]), 0);
    k.expect(&["XADD", "t", "0-*", "x", "y"], "$3\r\n0-1\r\n");
    k.expect(
        &["XADD", "s", "abc", "x", "y"],
        "-ERR Invalid stream ID specified as stream command argument\r\n",
    );
    k.expect(
        &["XADD", "s", "*", "x"],
        "-ERR wrong number of arguments for 'xadd' command\r\n",
    );
    k.expect(
        &["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "x", "y"],
        "-ERR syntax error, MAXLEN and MINID options at the same time are not compatible\r\n",
    );
    k.expect(
        &["XADD", "s", "MAXLEN", "1", "LIMIT", "5", "*", "x", "y"],
        "-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n",
    );
    k.expect(&["XADD", "nope", "NOMKSTREAM", "*", "x", "y"], "$-1\r\n");
    assert_eq!(k.int(&["EXISTS", "nope"]), 0);
    assert_eq!(k.int(&["XLEN", "s"]), 4);
    k.ok(&["SET", "str", "v"]);
    k.expect(
        &["XADD", "str", "*", "a", "b"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    k.expect(&["TYPE", "s"], "+stream\r\n");
    k.expect(&["OBJECT", "ENCODING", "s"], "$6\r\nstream\r\n");
    // Auto ids never go backwards, also after an explicit future id.
    k.expect(
        &["XADD", "f", "99999999999999-5", "a", "b"],
        "$16\r\n99999999999999-5\r\n",
    );
    k.expect(&["XADD", "f", "*", "a", "b"], "$16\r\n99999999999999-6\r\n");
    k.expect(
        &[
            "XADD",
            "max",
            "18446744073709551615-18446744073709551615",
            "a",
            "b",
        ],
        "$41\r\n18446744073709551615-18446744073709551615\r\n",
    );
    k.expect(
        &["XADD", "max", "*", "a", "b"],
        "-ERR The stream has exhausted the last possible ID, unable to add more items\r\n",
    );
}

#[test]
fn xrange_and_xrevrange() {
    let mut k = Kit::new();
    for i in 1..=5 {
        k.raw(&["XADD", "s", &format!("{i}-0"), "n", &i.to_string()]);
    }
    assert_eq!(
        k.value(&["XRANGE", "s", "2", "(4-0"]),
        arr(vec![entry("2-0", &["n", "2"]), entry("3-0", &["n", "3"])])
    );
    assert_eq!(
        k.value(&["XREVRANGE", "s", "+", "-", "COUNT", "2"]),
        arr(vec![entry("5-0", &["n", "5"]), entry("4-0", &["n", "4"])])
    );
    assert_eq!(k.value(&["XRANGE", "s", "(1-0", "(2-0"]), arr(vec![]));
    k.expect(&["XRANGE", "s", "-", "+", "COUNT", "0"], "*-1\r\n");
    k.expect(&["XRANGE", "missing", "-", "+"], "*0\r\n");
    k.expect(
        &["XRANGE", "s", "(-", "+"],
        "-ERR Invalid stream ID specified as stream command argument\r\n",
    );
    k.expect(
        &["XRANGE", "s", "-", "(0-0"],
        "-ERR invalid end ID for the interval\r\n",
    );
    k.expect(&["XRANGE", "s", "-", "+", "LIMIT"], "-ERR syntax error\r\n");
}

#[test]
fn xdel_xtrim_and_header() {
    let mut k = Kit::new();
    for i in 1..=5 {
        k.raw(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    assert_eq!(k.int(&["XDEL", "s", "2-0", "9-0"]), 1);
    assert_eq!(k.int(&["XDEL", "s", "1-0"]), 1);
    let info = k.value(&["XINFO", "STREAM", "s"]);
    let Value::Arr(f) = info else {
        panic!("{info:?}")
    };
    let get = |name: &str| {
        let i = f.iter().position(|v| *v == s(name)).expect(name);
        f[i + 1].clone()
    };
    assert_eq!(get("length"), Value::Int(3));
    assert_eq!(get("max-deleted-entry-id"), s("2-0"));
    assert_eq!(get("recorded-first-entry-id"), s("3-0"));
    assert_eq!(get("entries-added"), Value::Int(5));
    assert_eq!(get("first-entry"), entry("3-0", &["f", "v"]));
    assert_eq!(get("last-entry"), entry("5-0", &["f", "v"]));
    assert_eq!(k.int(&["XTRIM", "s", "MAXLEN", "=", "1"]), 2);
    assert_eq!(k.int(&["XLEN", "s"]), 1);
    assert_eq!(k.int(&["XTRIM", "s", "MINID", "6"]), 1);
    // An empty stream still exists.
    assert_eq!(k.int(&["EXISTS", "s"]), 1);
    k.expect(
        &["XTRIM", "s", "LIMIT", "3"],
        "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n",
    );
    k.expect(
        &["XTRIM", "s", "LIMIT", "0"],
        "-ERR syntax error, XTRIM must be called with a trimming strategy\r\n",
    );
    k.expect(
        &["XTRIM", "s", "MAXLEN", "-1"],
        "-ERR The MAXLEN argument must be >= 0.\r\n",
    );
    assert_eq!(k.int(&["XTRIM", "missing", "MAXLEN", "1"]), 0);
}

#[test]
fn approximate_trim_removes_whole_nodes() {
    let mut k = Kit::new();
    k.ok(&["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for _ in 0..100 {
        k.raw(&["XADD", "s", "*", "x", "v"]);
    }
    k.raw(&[
        "XADD", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "x", "v",
    ]);
    assert_eq!(k.int(&["XLEN", "s"]), 71);
    k.raw(&[
        "XADD", "s", "MAXLEN", "~", "55", "LIMIT", "30", "*", "x", "v",
    ]);
    assert_eq!(k.int(&["XLEN", "s"]), 62);
    assert_eq!(k.int(&["XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "5"]), 0);
    k.ok(&["CONFIG", "SET", "stream-node-max-entries", "100"]);
}

#[test]
fn xsetid_rules() {
    let mut k = Kit::new();
    k.expect(&["XSETID", "s", "1-1"], "-ERR no such key\r\n");
    k.expect(&["XSETID", "s", "1-1", "0"], "-ERR syntax error\r\n");
    k.raw(&["XADD", "s", "5-0", "a", "b"]);
    k.expect(
        &["XSETID", "s", "4-0"],
        "-ERR The ID specified in XSETID is smaller than the target stream top item\r\n",
    );
    k.expect(
        &[
            "XSETID",
            "s",
            "9-0",
            "ENTRIESADDED",
            "0",
            "MAXDELETEDID",
            "0-0",
        ],
        "-ERR The entries_added specified in XSETID is smaller than the target stream length\r\n",
    );
    k.expect(
        &[
            "XSETID",
            "s",
            "9-0",
            "ENTRIESADDED",
            "-1",
            "MAXDELETEDID",
            "0-0",
        ],
        "-ERR entries_added must be positive\r\n",
    );
    k.ok(&[
        "XSETID",
        "s",
        "9-0",
        "ENTRIESADDED",
        "7",
        "MAXDELETEDID",
        "3-0",
    ]);
    k.expect(
        &["XADD", "s", "9-0", "a", "b"],
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n",
    );
    let v = k.raw(&["XINFO", "STREAM", "s"]);
    assert!(
        v.contains("$17\r\nlast-generated-id\r\n$3\r\n9-0\r\n"),
        "{v}"
    );
    assert!(v.contains("$13\r\nentries-added\r\n:7\r\n"), "{v}");
    assert!(
        v.contains("$20\r\nmax-deleted-entry-id\r\n$3\r\n3-0\r\n"),
        "{v}"
    );
}

#[test]
fn xread_non_blocking_and_blocking() {
    let mut k = Kit::new();
    k.raw(&["XADD", "a", "1-0", "f", "1"]);
    k.raw(&["XADD", "a", "2-0", "f", "2"]);
    assert_eq!(
        k.value(&["XREAD", "COUNT", "1", "STREAMS", "b", "a", "0", "0"]),
        arr(vec![arr(vec![
            s("a"),
            arr(vec![entry("1-0", &["f", "1"])])
        ])])
    );
    k.expect(&["XREAD", "STREAMS", "a", "2-0"], "*-1\r\n");
    // Blocking with nothing to read parks; `$` is rewritten to the id it meant.
    k.expect(&["XREAD", "BLOCK", "0", "STREAMS", "a", "$"], "(blocked 0)");
    let parked = k.client.park_as.take().expect("rewritten command");
    assert_eq!(parked.arg(5), b"2-0");
    k.expect(
        &["XREAD", "BLOCK", "1500", "STREAMS", "a", "2"],
        "(blocked 1.5)",
    );
    assert!(k.client.park_as.is_none());
    k.expect(
        &["XREAD", "STREAMS", "a"],
        "-ERR wrong number of arguments for 'xread' command\r\n",
    );
    k.expect(
        &["XREAD", "STREAMS", "a", "b", "0"],
        "-ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.\r\n",
    );
    k.expect(
        &["XREAD", "STREAMS", "a", ">"],
        "-ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.\r\n",
    );
    k.expect(
        &["XREAD", "GROUP", "g", "c", "STREAMS", "a", "0"],
        "-ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.\r\n",
    );
    k.expect(
        &["XREAD", "BLOCK", "-1", "STREAMS", "a", "0"],
        "-ERR timeout is negative\r\n",
    );
    k.ok(&["SET", "str", "x"]);
    k.expect(
        &["XREAD", "STREAMS", "str", "0"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    // Inside MULTI a blocking read that finds nothing answers the null array.
    k.ok(&["MULTI"]);
    k.expect(&["XREAD", "BLOCK", "0", "STREAMS", "a", "$"], "+QUEUED\r\n");
    k.expect(&["EXEC"], "*1\r\n*-1\r\n");
}

#[test]
fn xread_resp3_is_a_map() {
    let mut k = Kit::new();
    k.raw(&["XADD", "a", "1-0", "f", "1"]);
    k.raw(&["HELLO", "3"]);
    k.expect(
        &["XREAD", "STREAMS", "a", "0"],
        "%1\r\n$1\r\na\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\n1\r\n",
    );
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, step by step")]
fn groups_read_ack_and_pending() {
    let mut k = Kit::new();
    k.raw(&["XADD", "s", "1-0", "a", "1"]);
    k.ok(&["XGROUP", "CREATE", "s", "g", "$"]);
    k.expect(
        &["XGROUP", "CREATE", "s", "g", "$"],
        "-BUSYGROUP Consumer Group name already exists\r\n",
    );
    k.expect(
        &["XGROUP", "CREATE", "nokey", "g", "$"],
        "-ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.\r\n",
    );
    k.ok(&["XGROUP", "CREATE", "made", "g", "$", "MKSTREAM"]);
    assert_eq!(k.int(&["XLEN", "made"]), 0);
    k.raw(&["XADD", "s", "2-0", "b", "2"]);
    k.raw(&["XADD", "s", "3-0", "c", "3"]);
    assert_eq!(
        k.value(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">"
        ]),
        arr(vec![arr(vec![
            s("s"),
            arr(vec![entry("2-0", &["b", "2"])])
        ])])
    );
    assert_eq!(
        k.value(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"]),
        arr(vec![arr(vec![
            s("s"),
            arr(vec![entry("3-0", &["c", "3"])])
        ])])
    );
    // Nothing new: null array; history: the consumer's own pending entries.
    k.expect(
        &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
        "*-1\r\n",
    );
    assert_eq!(
        k.value(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"]),
        arr(vec![arr(vec![
            s("s"),
            arr(vec![entry("2-0", &["b", "2"])])
        ])])
    );
    let sum = k.value(&["XPENDING", "s", "g"]);
    assert_eq!(
        sum,
        arr(vec![
            Value::Int(2),
            s("2-0"),
            s("3-0"),
            arr(vec![
                arr(vec![s("alice"), s("1")]),
                arr(vec![s("bob"), s("1")])
            ]),
        ])
    );
    let Value::Arr(ext) = k.value(&["XPENDING", "s", "g", "-", "+", "10"]) else {
        panic!()
    };
    assert_eq!(ext.len(), 2);
    let Value::Arr(first) = &ext[0] else { panic!() };
    assert_eq!(first[0], s("2-0"));
    assert_eq!(first[1], s("alice"));
    // Read twice: once by `>`, once from history.
    assert_eq!(first[3], Value::Int(2));
    assert_eq!(
        k.value(&["XPENDING", "s", "g", "IDLE", "999999", "-", "+", "10"]),
        arr(vec![])
    );
    // Bob's own list equals the group's list after alice's entry.
    let bobs = k.value(&["XPENDING", "s", "g", "-", "+", "10", "bob"]);
    assert_eq!(bobs, k.value(&["XPENDING", "s", "g", "(2-0", "+", "10"]));
    let Value::Arr(b) = bobs else { panic!() };
    assert_eq!(b.len(), 1);
    assert_eq!(k.int(&["XACK", "s", "g", "2-0", "2-0", "9-0"]), 1);
    assert_eq!(k.int(&["XACK", "s", "nogroup", "3-0"]), 0);
    k.expect(
        &["XACK", "s", "g", "3-0", "bad"],
        "-ERR Invalid stream ID specified as stream command argument\r\n",
    );
    k.expect(
        &["XPENDING", "s", "nog"],
        "-NOGROUP No such key 's' or consumer group 'nog'\r\n",
    );
    k.expect(
        &["XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"],
        "-NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option\r\n",
    );
    k.expect(
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"],
        "-ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.\r\n",
    );
    k.expect(
        &["XREADGROUP", "COUNT", "1", "STREAMS", "s", ">"],
        "-ERR wrong number of arguments for 'xreadgroup' command\r\n",
    );
    // NOACK delivers without a pending entry.
    k.raw(&["XADD", "s", "4-0", "d", "4"]);
    k.raw(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "carol",
        "NOACK",
        "STREAMS",
        "s",
        ">",
    ]);
    assert_eq!(
        k.value(&["XPENDING", "s", "g", "-", "+", "10", "carol"]),
        arr(vec![])
    );
    // Blocking with nothing new parks.
    k.expect(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
        "(blocked 0)",
    );
}

#[test]
fn xgroup_subcommands() {
    let mut k = Kit::new();
    k.raw(&["XADD", "s", "1-0", "a", "1"]);
    k.raw(&["XADD", "s", "2-0", "a", "2"]);
    k.ok(&["XGROUP", "CREATE", "s", "g", "0"]);
    assert_eq!(k.int(&["XGROUP", "CREATECONSUMER", "s", "g", "c1"]), 1);
    assert_eq!(k.int(&["XGROUP", "CREATECONSUMER", "s", "g", "c1"]), 0);
    k.raw(&["XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"]);
    assert_eq!(k.int(&["XGROUP", "DELCONSUMER", "s", "g", "c2"]), 2);
    assert_eq!(k.int(&["XGROUP", "DELCONSUMER", "s", "g", "none"]), 0);
    assert_eq!(
        k.value(&["XPENDING", "s", "g"]),
        arr(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil])
    );
    k.ok(&["XGROUP", "SETID", "s", "g", "-"]);
    let Value::Arr(r) = k.value(&["XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", ">"]) else {
        panic!()
    };
    let Value::Arr(one) = &r[0] else { panic!() };
    assert_eq!(
        one[1],
        arr(vec![entry("1-0", &["a", "1"]), entry("2-0", &["a", "2"])])
    );
    k.expect(
        &["XGROUP", "SETID", "s", "nog", "0"],
        "-NOGROUP No such consumer group 'nog' for key name 's'\r\n",
    );
    k.expect(
        &["XGROUP", "CREATECONSUMER", "s", "nog", "c"],
        "-NOGROUP No such consumer group 'nog' for key name 's'\r\n",
    );
    k.expect(
        &["XGROUP", "HELP", "x"],
        "-ERR wrong number of arguments for 'xgroup|help' command\r\n",
    );
    k.expect(
        &["XGROUP", "NOPE", "s"],
        "-ERR unknown subcommand 'NOPE'. Try XGROUP HELP.\r\n",
    );
    k.expect(
        &["XGROUP", "CREATE", "s", "g2", "0", "ENTRIESREAD", "-5"],
        "-ERR value for ENTRIESREAD must be positive or -1\r\n",
    );
    assert_eq!(k.int(&["XGROUP", "DESTROY", "s", "g"]), 1);
    assert_eq!(k.int(&["XGROUP", "DESTROY", "s", "g"]), 0);
    assert_eq!(k.value(&["XINFO", "GROUPS", "s"]), arr(vec![]));
    assert!(matches!(k.value(&["XGROUP", "HELP"]), Value::Arr(v) if v.len() > 5));
}

#[test]
fn xclaim_and_xautoclaim() {
    let mut k = Kit::new();
    for i in 1..=3 {
        k.raw(&["XADD", "x", &format!("{i}-0"), "f", "v"]);
    }
    k.ok(&["XGROUP", "CREATE", "x", "grp", "0"]);
    k.raw(&["XREADGROUP", "GROUP", "grp", "Alice", "STREAMS", "x", ">"]);
    k.raw(&["XDEL", "x", "2-0"]);
    assert_eq!(
        k.value(&["XCLAIM", "x", "grp", "Bob", "0", "1-0", "2-0", "3-0"]),
        arr(vec![entry("1-0", &["f", "v"]), entry("3-0", &["f", "v"])])
    );
    assert_eq!(
        k.value(&["XPENDING", "x", "grp", "-", "+", "10", "Alice"]),
        arr(vec![])
    );
    let Value::Arr(p) = k.value(&["XPENDING", "x", "grp", "-", "+", "10"]) else {
        panic!()
    };
    assert_eq!(p.len(), 2);
    assert_eq!(
        p[0],
        arr(vec![s("1-0"), s("Bob"), p_idle(&p[0]), Value::Int(2)])
    );
    // JUSTID does not count a delivery; RETRYCOUNT sets it.
    assert_eq!(
        k.value(&["XCLAIM", "x", "grp", "Carol", "0", "1-0", "JUSTID"]),
        arr(vec![s("1-0")])
    );
    k.raw(&[
        "XCLAIM",
        "x",
        "grp",
        "Carol",
        "0",
        "3-0",
        "RETRYCOUNT",
        "7",
        "JUSTID",
    ]);
    let Value::Arr(p) = k.value(&["XPENDING", "x", "grp", "-", "+", "10", "Carol"]) else {
        panic!()
    };
    assert_eq!(p.len(), 2);
    let Value::Arr(first) = &p[0] else { panic!() };
    assert_eq!(first[3], Value::Int(2));
    let Value::Arr(second) = &p[1] else { panic!() };
    assert_eq!(second[3], Value::Int(7));
    // A large min-idle time claims nothing.
    assert_eq!(
        k.value(&["XCLAIM", "x", "grp", "Bob", "3600000", "1-0"]),
        arr(vec![])
    );
    k.expect(
        &["XCLAIM", "x", "grp", "Bob", "0", "1-0", "BOGUS"],
        "-ERR Unrecognized XCLAIM option 'BOGUS'\r\n",
    );
    k.expect(
        &["XCLAIM", "x", "nog", "Bob", "0", "1-0"],
        "-NOGROUP No such key 'x' or consumer group 'nog'\r\n",
    );
    // XAUTOCLAIM: deleted entries are dropped and reported.
    k.raw(&["XADD", "x", "4-0", "f", "v"]);
    k.raw(&["XREADGROUP", "GROUP", "grp", "Alice", "STREAMS", "x", ">"]);
    k.raw(&["XDEL", "x", "1-0"]);
    assert_eq!(
        k.value(&["XAUTOCLAIM", "x", "grp", "Dave", "0", "0-0", "COUNT", "1"]),
        arr(vec![s("3-0"), arr(vec![]), arr(vec![s("1-0")])])
    );
    assert_eq!(
        k.value(&["XAUTOCLAIM", "x", "grp", "Dave", "0", "3-0"]),
        arr(vec![
            s("0-0"),
            arr(vec![entry("3-0", &["f", "v"]), entry("4-0", &["f", "v"])]),
            arr(vec![])
        ])
    );
    assert_eq!(
        k.value(&["XAUTOCLAIM", "x", "grp", "Eve", "0", "-", "JUSTID"]),
        arr(vec![s("0-0"), arr(vec![s("3-0"), s("4-0")]), arr(vec![])])
    );
    k.expect(
        &["XAUTOCLAIM", "x", "grp", "Eve", "0", "-", "COUNT", "0"],
        "-ERR COUNT must be > 0\r\n",
    );
    // FORCE creates a pending entry for an entry never delivered.
    k.raw(&["XADD", "x", "5-0", "f", "v"]);
    assert_eq!(
        k.value(&["XCLAIM", "x", "grp", "Fay", "0", "5-0", "FORCE", "JUSTID"]),
        arr(vec![s("5-0")])
    );
    let Value::Arr(p) = k.value(&["XPENDING", "x", "grp", "5-0", "5-0", "1"]) else {
        panic!()
    };
    assert_eq!(p.len(), 1);
}

fn p_idle(v: &Value) -> Value {
    match v {
        Value::Arr(x) => x[2].clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn xinfo_groups_consumers_and_lag() {
    let mut k = Kit::new();
    for i in 1..=5 {
        k.raw(&["XADD", "x", &format!("{i}-0"), "data", "v"]);
    }
    k.ok(&["XGROUP", "CREATE", "x", "g1", "0"]);
    k.raw(&[
        "XREADGROUP",
        "GROUP",
        "g1",
        "c1",
        "COUNT",
        "2",
        "STREAMS",
        "x",
        ">",
    ]);
    assert_eq!(
        k.value(&["XINFO", "GROUPS", "x"]),
        arr(vec![arr(vec![
            s("name"),
            s("g1"),
            s("consumers"),
            Value::Int(1),
            s("pending"),
            Value::Int(2),
            s("last-delivered-id"),
            s("2-0"),
            s("entries-read"),
            Value::Int(2),
            s("lag"),
            Value::Int(3),
        ])])
    );
    let Value::Arr(cons) = k.value(&["XINFO", "CONSUMERS", "x", "g1"]) else {
        panic!()
    };
    let Value::Arr(c1) = &cons[0] else { panic!() };
    assert_eq!(&c1[..4], &[s("name"), s("c1"), s("pending"), Value::Int(2)]);
    k.expect(
        &["XINFO", "CONSUMERS", "x", "nog"],
        "-NOGROUP No such consumer group 'nog' for key name 'x'\r\n",
    );
    k.expect(&["XINFO", "STREAM", "nokey"], "-ERR no such key\r\n");
    k.expect(
        &["XINFO", "HELP", "x"],
        "-ERR wrong number of arguments for 'xinfo|help' command\r\n",
    );
    let Value::Arr(full) = k.value(&["XINFO", "STREAM", "x", "FULL", "COUNT", "1"]) else {
        panic!()
    };
    assert_eq!(full.len(), 18);
    let i = full
        .iter()
        .position(|v| *v == s("entries"))
        .expect("entries");
    assert_eq!(full[i + 1], arr(vec![entry("1-0", &["data", "v"])]));
    // An XDEL after the group's position makes the lag unknown.
    k.raw(&["XDEL", "x", "4-0"]);
    let g = k.value(&["XINFO", "GROUPS", "x"]);
    let Value::Arr(g) = g else { panic!() };
    let Value::Arr(g) = &g[0] else { panic!() };
    assert_eq!(g[11], Value::Nil);
}

#[test]
fn generic_commands_handle_streams() {
    let mut k = Kit::new();
    k.raw(&["XADD", "s", "1-0", "a", "1"]);
    k.ok(&["XGROUP", "CREATE", "s", "g", "0"]);
    k.raw(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]);
    k.ok(&["RENAME", "s", "t"]);
    assert_eq!(k.int(&["EXISTS", "s"]), 0);
    assert_eq!(
        k.value(&["XRANGE", "t", "-", "+"]),
        arr(vec![entry("1-0", &["a", "1"])])
    );
    assert_eq!(k.int(&["XACK", "t", "g", "1-0"]), 1);
    let dump = k.bytes(&[b"DUMP", b"t"]);
    assert!(dump.starts_with(b"$"));
    assert_eq!(k.int(&["EXPIRE", "t", "100"]), 1);
    k.raw(&["XADD", "t", "2-0", "b", "2"]);
    assert!(k.int(&["TTL", "t"]) > 0, "XADD keeps the expiry");
    assert_eq!(k.int(&["DEL", "t"]), 1);
    // Nothing of the stream is left in any of its namespaces.
    k.ok(&["XGROUP", "CREATE", "t", "g", "$", "MKSTREAM"]);
    let Value::Arr(groups) = k.value(&["XINFO", "GROUPS", "t"]) else {
        panic!()
    };
    assert_eq!(groups.len(), 1);
    let Value::Arr(g) = &groups[0] else { panic!() };
    // The new group has no consumers and nothing pending from the deleted stream's.
    assert_eq!(
        &g[2..6],
        &[s("consumers"), Value::Int(0), s("pending"), Value::Int(0)]
    );
    assert_eq!(k.value(&["XRANGE", "t", "-", "+"]), arr(vec![]));
    assert_eq!(
        k.value(&["XPENDING", "t", "g"]),
        arr(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil])
    );
}

#[test]
fn xreadgroup_group_named_streams() {
    let mut k = Kit::new();
    k.raw(&["XADD", "s", "1-0", "a", "1"]);
    k.ok(&["XGROUP", "CREATE", "s", "streams", "0"]);
    assert_eq!(
        k.value(&["XREADGROUP", "GROUP", "streams", "c", "STREAMS", "s", ">"]),
        arr(vec![arr(vec![
            s("s"),
            arr(vec![entry("1-0", &["a", "1"])])
        ])])
    );
    let c = crate::resp::parse::Command::from_args(&[
        "XREADGROUP",
        "GROUP",
        "streams",
        "c",
        "STREAMS",
        "s",
        ">",
    ]);
    assert_eq!(
        crate::cmd::Keys::Streams { from: 4 }.of(&c),
        vec![&b"s"[..]]
    );
}
