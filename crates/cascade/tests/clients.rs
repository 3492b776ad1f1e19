//! Behaviour tests with real Redis clients against `cascade serve`: redis-cli,
//! redis-benchmark, redis-py, go-ycsb and twemproxy (nutcracker) sharding over three
//! instances. Each test starts its own server(s) on free ports.
//!
//! The tools are installed by `scripts/test.sh`; a missing tool fails the test with a
//! message saying so. go-ycsb is looked up in `$GO_YCSB`, else `target/tools/go-ycsb`.

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{connect_addr, require_tool, temp_dir, Reply, Server};

/// The workspace root (`crates/cascade/../..`).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a finished external program printed.
struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` with `stdin` fed to it; kills it and panics after `timeout`.
fn run(cmd: &mut Command, stdin: &[u8], timeout: Duration) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let mut sin = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        // The program may exit without reading all of its input.
        let _ = sin.write_all(&input);
    });
    let mut sout = child.stdout.take().expect("stdout");
    let mut serr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = sout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = serr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    feeder.join().expect("stdin feeder");
    let stdout = out_reader.join().expect("stdout reader");
    let stderr = err_reader.join().expect("stderr reader");
    Output {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Runs `cmd` (no stdin) and asserts it exits 0.
fn run_ok(cmd: &mut Command, timeout: Duration) -> Output {
    let what = format!("{cmd:?}");
    let out = run(cmd, b"", timeout);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    out
}

/// `redis-cli -p PORT args...`
fn redis_cli(port: u16, args: &[&str]) -> Command {
    let mut c = Command::new("redis-cli");
    c.args(["-p", &port.to_string()]).args(args);
    c
}

fn int(r: Reply) -> i64 {
    match r {
        Reply::Int(n) => n,
        other => panic!("expected an integer reply, got {other:?}"),
    }
}

fn strings(r: Reply) -> Vec<String> {
    match r {
        Reply::Array(Some(items)) => items.iter().map(Reply::text).collect(),
        other => panic!("expected an array reply, got {other:?}"),
    }
}

/// The field/value pairs of an HGETALL reply, sorted by field.
fn pairs(r: Reply) -> Vec<(String, String)> {
    let flat = strings(r);
    let mut v: Vec<(String, String)> = flat
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect();
    v.sort();
    v
}

/// A command for redis-cli and the lines it prints for it when stdin is not a tty
/// (raw output: a nil prints an empty line, an error its text and an empty line).
/// Checked against redis-server 7.0 except where cascade differs by design: KEYS
/// returns keys in key order, and CASCADE.RANGE exists.
#[rustfmt::skip]
const SESSION: &[(&str, &[&str])] = &[
    ("PING", &["PONG"]),
    (r#"PING "hello world""#, &["hello world"]),
    (r#"ECHO "quoted \"string\" with spaces""#, &[r#"quoted "string" with spaces"#]),
    ("SET greeting hello", &["OK"]),
    ("GET greeting", &["hello"]),
    ("GET missing", &[""]),
    ("SET greeting world NX", &[""]),
    ("SET greeting world XX", &["OK"]),
    ("GET greeting", &["world"]),
    ("SET greeting again GET", &["world"]),
    ("SET fresh v GET", &[""]),
    ("SETNX greeting x", &["0"]),
    ("SETNX fresh2 1", &["1"]),
    ("GETSET fresh2 2", &["1"]),
    ("GETDEL fresh2", &["2"]),
    ("GETDEL fresh2", &[""]),
    ("EXISTS fresh2", &["0"]),
    (r#"APPEND greeting "!!""#, &["7"]),
    ("APPEND newstr abc", &["3"]),
    ("STRLEN greeting", &["7"]),
    ("STRLEN missing", &["0"]),
    ("GET greeting", &["again!!"]),
    ("SET n 10", &["OK"]),
    ("INCR n", &["11"]),
    ("INCRBY n 5", &["16"]),
    ("DECR n", &["15"]),
    ("DECRBY n 20", &["-5"]),
    ("INCRBY n -1", &["-6"]),
    ("INCR newcounter", &["1"]),
    ("GET n", &["-6"]),
    ("MSET a 1 b 2 c 3", &["OK"]),
    ("MGET a b nope c", &["1", "2", "", "3"]),
    (r#"SET "sp ace" "va lue""#, &["OK"]),
    (r#"GET "sp ace""#, &["va lue"]),
    (r#"SET bin "a\x00b\r\nc""#, &["OK"]),
    ("STRLEN bin", &["6"]),
    ("SET e1 v EX 100", &["OK"]),
    ("TTL e1", &["100"]),
    ("TTL greeting", &["-1"]),
    ("TTL missing", &["-2"]),
    ("PTTL greeting", &["-1"]),
    ("PTTL missing", &["-2"]),
    ("EXPIRE greeting 200", &["1"]),
    ("TTL greeting", &["200"]),
    ("PERSIST greeting", &["1"]),
    ("TTL greeting", &["-1"]),
    ("PERSIST greeting", &["0"]),
    ("EXPIRE missing 10", &["0"]),
    ("SETEX e2 50 v", &["OK"]),
    ("TTL e2", &["50"]),
    ("PSETEX e3 100000 v", &["OK"]),
    ("TTL e3", &["100"]),
    ("SET e3 w KEEPTTL", &["OK"]),
    ("TTL e3", &["100"]),
    ("SET e3 x", &["OK"]),
    ("TTL e3", &["-1"]),
    ("PEXPIRE e3 300000", &["1"]),
    ("TTL e3", &["300"]),
    ("EXPIREAT e3 1", &["1"]),
    ("EXISTS e3", &["0"]),
    ("PEXPIREAT e2 1000", &["1"]),
    ("GET e2", &[""]),
    ("EXPIRE a 0", &["1"]),
    ("EXISTS a", &["0"]),
    ("HSET user:1 lang rust name ada", &["2"]),
    ("HSET user:1 name grace", &["0"]),
    ("HGET user:1 name", &["grace"]),
    ("HGET user:1 nope", &[""]),
    ("HGET nokey name", &[""]),
    ("HMGET user:1 lang nope name", &["rust", "", "grace"]),
    ("HGETALL user:1", &["lang", "rust", "name", "grace"]),
    ("HLEN user:1", &["2"]),
    ("HEXISTS user:1 lang", &["1"]),
    ("HEXISTS user:1 nope", &["0"]),
    ("HKEYS user:1", &["lang", "name"]),
    ("HVALS user:1", &["rust", "grace"]),
    ("HSTRLEN user:1 name", &["5"]),
    ("HSETNX user:1 name x", &["0"]),
    ("HSETNX user:1 visits 36", &["1"]),
    ("HINCRBY user:1 visits 1", &["37"]),
    ("HINCRBY user:1 name 1", &["ERR hash value is not an integer", ""]),
    ("HMSET user:2 a 1 b 2", &["OK"]),
    ("HDEL user:1 lang nope", &["1"]),
    ("HGETALL user:1", &["name", "grace", "visits", "37"]),
    ("HGETALL nokey", &[""]),
    ("HLEN nokey", &["0"]),
    ("TYPE user:1", &["hash"]),
    ("TYPE greeting", &["string"]),
    ("TYPE nokey", &["none"]),
    ("ZADD board 1 ada 2 grace 3 linus", &["3"]),
    ("ZADD board 5 grace", &["0"]),
    ("ZADD board NX 9 ada 4 ken", &["1"]),
    ("ZADD board XX CH 2.5 linus 7 nobody", &["1"]),
    ("ZCARD board", &["4"]),
    ("ZSCORE board grace", &["5"]),
    ("ZSCORE board linus", &["2.5"]),
    ("ZSCORE board nope", &[""]),
    ("ZRANGEBYSCORE board -inf +inf", &["ada", "linus", "ken", "grace"]),
    ("ZRANGEBYSCORE board 2 5 WITHSCORES", &["linus", "2.5", "ken", "4", "grace", "5"]),
    ("ZRANGEBYSCORE board (1 (5", &["linus", "ken"]),
    ("ZRANGEBYSCORE board -inf +inf LIMIT 1 2", &["linus", "ken"]),
    ("ZRANGEBYSCORE board 100 200", &[""]),
    ("ZCOUNT board 2 +inf", &["3"]),
    ("ZCOUNT board (2.5 (5", &["1"]),
    ("ZREM board ada nope", &["1"]),
    ("ZCARD board", &["3"]),
    ("ZADD board -1.5 neg", &["1"]),
    ("ZSCORE board neg", &["-1.5"]),
    ("ZADD board -inf ninf +inf pinf", &["2"]),
    ("ZRANGEBYSCORE board -inf +inf WITHSCORES", &["ninf", "-inf", "neg", "-1.5", "linus", "2.5", "ken", "4", "grace", "5", "pinf", "inf"]),
    ("TYPE board", &["zset"]),
    ("GET user:1", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("HGET greeting x", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("ZADD greeting 1 x", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("ZSCORE user:1 x", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("INCR user:1", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("APPEND board x", &["WRONGTYPE Operation against a key holding the wrong kind of value", ""]),
    ("foo", &["ERR unknown command 'foo', with args beginning with: ", ""]),
    ("foo bar baz", &["ERR unknown command 'foo', with args beginning with: 'bar' 'baz' ", ""]),
    ("GET", &["ERR wrong number of arguments for 'get' command", ""]),
    ("GET a b", &["ERR wrong number of arguments for 'get' command", ""]),
    ("HSET user:1 f", &["ERR wrong number of arguments for 'hset' command", ""]),
    ("ZADD board 1", &["ERR wrong number of arguments for 'zadd' command", ""]),
    ("SET k v EX notanumber", &["ERR value is not an integer or out of range", ""]),
    ("SET k v EX 0", &["ERR invalid expire time in 'set' command", ""]),
    ("SET k v NX XX", &["ERR syntax error", ""]),
    ("SET k v EX 10 PX 10", &["ERR syntax error", ""]),
    ("INCR greeting", &["ERR value is not an integer or out of range", ""]),
    ("INCRBY n notanint", &["ERR value is not an integer or out of range", ""]),
    ("HINCRBY user:1 visits x", &["ERR value is not an integer or out of range", ""]),
    ("ZADD board x y", &["ERR value is not a valid float", ""]),
    ("ZADD board NX XX 1 a", &["ERR XX and NX options at the same time are not compatible", ""]),
    ("ZRANGEBYSCORE board a b", &["ERR min or max is not a float", ""]),
    ("SET big 9223372036854775807", &["OK"]),
    ("INCR big", &["ERR increment or decrement would overflow", ""]),
    ("DEL greeting user:2 nope", &["2"]),
    ("UNLINK board", &["1"]),
    ("EXISTS greeting user:1 user:1 board", &["2"]),
    ("KEYS user:*", &["user:1"]),
    ("KEYS *", &["b", "big", "bin", "c", "e1", "fresh", "n", "newcounter", "newstr", "sp ace", "user:1"]),
    ("DBSIZE", &["11"]),
    ("CASCADE.RANGE - + LIMIT 2", &["b", "2", "big", "9223372036854775807"]),
    ("CASCADE.RANGE c f", &["c", "3", "e1", "v"]),
    ("CASCADE.RANGE x +", &[""]),
    ("FLUSHDB", &["OK"]),
    ("DBSIZE", &["0"]),
    ("KEYS *", &[""]),
    ("GET n", &[""]),
    ("SET e4 v PXAT 1", &["OK"]),
    ("GET e4", &[""]),
    ("EXISTS e4", &["0"]),
    ("TTL e4", &["-2"]),
    ("KEYS *", &[""]),
];

#[test]
fn redis_cli_interactive() {
    require_tool("redis-cli");
    let server = Server::start(&[]);
    let port = server.port;

    // One command per line on stdin, answered in order over one connection.
    let mut input = String::new();
    for (cmd, _) in SESSION {
        input.push_str(cmd);
        input.push('\n');
    }
    let out = run(
        &mut redis_cli(port, &[]),
        input.as_bytes(),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "redis-cli failed: {}", out.stderr);
    let mut rest = out.stdout.as_str();
    for (i, (cmd, lines)) in SESSION.iter().enumerate() {
        let mut want = lines.join("\n");
        want.push('\n');
        assert!(
            rest.starts_with(&want),
            "command {i} `{cmd}`: expected output {want:?}, got {:?}\n(previous command: {:?})",
            rest.chars().take(want.len() + 80).collect::<String>(),
            i.checked_sub(1).map(|p| SESSION[p].0)
        );
        rest = &rest[want.len()..];
    }
    assert!(rest.is_empty(), "unexpected trailing output: {rest:?}");
    // The session left an expired key behind (e4), which DBSIZE and INFO may still count
    // until the server reclaims it; start the next part from an empty store.
    assert_eq!(
        server.connect().cmd(&["FLUSHDB"]),
        Reply::Simple("OK".into())
    );

    // Mass insertion with --pipe: 250 string keys and 250 hashes; the numbers are not
    // zero-padded so key order (user:1, user:10, user:100, ...) is not numeric order.
    let mut all = BTreeSet::new();
    let mut pipe = Vec::new();
    for i in 0..250 {
        let (u, h) = (format!("user:{i}"), format!("item:{i}"));
        pipe.extend(common::encode(&[b"SET", u.as_bytes(), b"v"]));
        pipe.extend(common::encode(&[b"HSET", h.as_bytes(), b"f", b"v"]));
        all.insert(u);
        all.insert(h);
    }
    let out = run(
        &mut redis_cli(port, &["--pipe"]),
        &pipe,
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "redis-cli --pipe: {}{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout.contains("errors: 0, replies: 500"),
        "redis-cli --pipe: {}",
        out.stdout
    );

    // --scan: every key exactly once, in key (byte) order.
    let all: Vec<String> = all.into_iter().collect();
    let out = run_ok(&mut redis_cli(port, &["--scan"]), Duration::from_secs(60));
    let scanned: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(scanned.len(), 500, "--scan returned {} keys", scanned.len());
    assert_eq!(scanned, all, "--scan: every key once, in key order");
    let out = run_ok(
        &mut redis_cli(port, &["--scan", "--pattern", "user:*"]),
        Duration::from_secs(60),
    );
    let users: Vec<&str> = out.stdout.lines().collect();
    let want: Vec<&String> = all.iter().filter(|k| k.starts_with("user:")).collect();
    assert_eq!(users, want, "--scan --pattern 'user:*'");
    let out = run_ok(
        &mut redis_cli(port, &["--scan", "--pattern", "item:1?"]),
        Duration::from_secs(60),
    );
    let want: Vec<String> = (10..20).map(|i| format!("item:{i}")).collect();
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        want,
        "--scan --pattern 'item:1?'"
    );

    // INFO has a keyspace section with the key count.
    let out = run_ok(&mut redis_cli(port, &["INFO"]), Duration::from_secs(30));
    assert!(out.stdout.contains("# Keyspace"), "INFO: {}", out.stdout);
    assert!(
        out.stdout.contains("db0:keys=500,"),
        "INFO keyspace: {}",
        out.stdout
    );
    let out = run_ok(
        &mut redis_cli(port, &["INFO", "keyspace"]),
        Duration::from_secs(30),
    );
    assert!(
        out.stdout.contains("# Keyspace") && out.stdout.contains("db0:keys=500,"),
        "INFO keyspace: {}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("# Server"),
        "INFO keyspace: {}",
        out.stdout
    );

    // COMMAND COUNT in the formatted (tty-like) output.
    let out = run_ok(
        &mut redis_cli(port, &["--no-raw", "COMMAND", "COUNT"]),
        Duration::from_secs(30),
    );
    let n: i64 = out
        .stdout
        .trim()
        .strip_prefix("(integer) ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("COMMAND COUNT: {:?}", out.stdout));
    assert!(n >= 60, "COMMAND COUNT = {n}");
    // --no-raw formats errors and nils as a terminal would show them.
    let out = run_ok(
        &mut redis_cli(port, &["--no-raw", "GET", "nope"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.stdout, "(nil)\n");
    let out = run_ok(
        &mut redis_cli(port, &["--no-raw", "HGET", "user:1", "f"]),
        Duration::from_secs(30),
    );
    assert_eq!(
        out.stdout,
        "(error) WRONGTYPE Operation against a key holding the wrong kind of value\n"
    );
}

#[test]
fn redis_benchmark_completes() {
    require_tool("redis-benchmark");
    let server = Server::start(&[]);
    let port = server.port.to_string();
    let n = 20_000;
    let out = run_ok(
        Command::new("redis-benchmark").args([
            "-p",
            &port,
            "-t",
            "set,get,incr,mset",
            "-P",
            "16",
            "-n",
            &n.to_string(),
            "-q",
            "--csv",
        ]),
        Duration::from_secs(120),
    );
    // "test","rps","avg_latency_ms",... then one line per test.
    assert!(
        !out.stdout.contains("Error") && !out.stderr.contains("Error"),
        "{}{}",
        out.stdout,
        out.stderr
    );
    let mut seen = Vec::new();
    for line in out.stdout.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').map(|c| c.trim_matches('"')).collect();
        assert!(cols.len() >= 2, "bad csv line {line:?}");
        let rps: f64 = cols[1]
            .parse()
            .unwrap_or_else(|_| panic!("rps in {line:?}"));
        assert!(rps > 0.0, "{line}");
        seen.push(cols[0].to_string());
    }
    assert_eq!(
        seen,
        ["SET", "GET", "INCR", "MSET (10 keys)"],
        "benchmark output:\n{}",
        out.stdout
    );

    // Without -r every test uses the literal keys key:__rand_int__ and counter:__rand_int__.
    let mut c = server.connect();
    assert_eq!(int(c.cmd(&["DBSIZE"])), 2);
    assert_eq!(
        c.cmd(&["GET", "counter:__rand_int__"]).text(),
        n.to_string(),
        "one INCR per request"
    );
    assert_eq!(
        c.cmd(&["STRLEN", "key:__rand_int__"]),
        Reply::Int(3),
        "-d defaults to 3 bytes"
    );

    // With -r the keys are random: many distinct keys, all readable.
    run_ok(
        Command::new("redis-benchmark").args([
            "-p", &port, "-t", "set", "-P", "16", "-n", "5000", "-r", "100000", "-q", "--csv",
        ]),
        Duration::from_secs(120),
    );
    let size = int(c.cmd(&["DBSIZE"]));
    assert!(size > 1000, "DBSIZE after -r 100000: {size}");
    let keys = strings(c.cmd(&["KEYS", "key:0*"]));
    assert!(!keys.is_empty());
    for k in keys.iter().take(20) {
        assert_eq!(
            c.cmd(&["STRLEN", k]),
            Reply::Int(3),
            "redis-benchmark's value of {k}"
        );
    }
}

#[test]
fn python_redis_client() {
    let python = require_tool("python3");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/redis_py_check.py");
    let check = run(
        Command::new(&python).args(["-c", "import redis; print(redis.__version__)"]),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        check.status.success(),
        "python3 has no `redis` package: run ./scripts/test.sh or `python3 -m pip install redis`\n{}",
        check.stderr
    );
    let server = Server::start(&[]);
    let out = run(
        Command::new(&python)
            .arg(&script)
            .arg(server.port.to_string()),
        b"",
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{} failed ({}), redis-py {}:\n--- stdout\n{}\n--- stderr\n{}",
        script.display(),
        out.status,
        check.stdout.trim(),
        out.stdout,
        out.stderr
    );
}

/// go-ycsb: `$GO_YCSB`, else `target/tools/go-ycsb` (built by scripts/test.sh).
fn go_ycsb() -> (PathBuf, PathBuf) {
    let tools = workspace_root().join("target/tools");
    let bin = std::env::var_os("GO_YCSB")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools.join("go-ycsb"));
    assert!(
        bin.is_file(),
        "go-ycsb not found at {}: run ./scripts/test.sh (it builds go-ycsb v1.0.1 into target/tools/) or set GO_YCSB=/path/to/go-ycsb",
        bin.display()
    );
    // The workload files: $GO_YCSB_WORKLOADS, else next to the binary (scripts/test.sh
    // copies them), else in the Go module cache.
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(w) = std::env::var_os("GO_YCSB_WORKLOADS") {
        candidates.push(w.into());
    }
    if let Some(dir) = bin.parent() {
        candidates.push(dir.join("go-ycsb-workloads"));
    }
    candidates.push(tools.join("go-ycsb-workloads"));
    if let Ok(o) = Command::new("go").args(["env", "GOMODCACHE"]).output() {
        let cache = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !cache.is_empty() {
            candidates.push(Path::new(&cache).join("github.com/pingcap/go-ycsb@v1.0.1/workloads"));
        }
    }
    let workloads = candidates
        .iter()
        .find(|d| d.join("workloada").is_file())
        .unwrap_or_else(|| {
            panic!("go-ycsb workload files not found in any of {candidates:?}: run ./scripts/test.sh or set GO_YCSB_WORKLOADS")
        })
        .clone();
    (bin, workloads)
}

/// The per-operation summary lines of a go-ycsb run: (operation, Count, OPS).
fn ycsb_summary(out: &str) -> Vec<(String, u64, f64)> {
    let mut ops = Vec::new();
    for line in out.lines() {
        let Some((op, rest)) = line.split_once(" - Takes(s): ") else {
            continue;
        };
        let field = |name: &str| -> &str {
            rest.split(", ")
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        let count: u64 = field("Count: ").parse().expect("Count");
        let ops_per_s: f64 = field("OPS: ").parse().expect("OPS");
        ops.push((op.trim().to_string(), count, ops_per_s));
    }
    ops
}

#[test]
fn go_ycsb_workloads() {
    let (ycsb, workloads) = go_ycsb();
    let server = Server::start(&[]);
    let records = 2000u64;
    let mut inserted = 0u64;
    // The default hash datatype (HSET/HMGET/DEL; go-ycsb ignores HMGET errors, hence the
    // HGETALL checks below) and the string datatype (JSON in SET/GET; read errors count).
    for (datatype, table) in [("hash", "usertable"), ("string", "strtable")] {
        for (phase, workload) in [
            ("load", "a"),
            ("run", "a"),
            ("run", "b"),
            ("run", "c"),
            ("run", "d"),
            ("run", "f"),
        ] {
            let file = workloads.join(format!("workload{workload}"));
            let out = run_ok(
                Command::new(&ycsb)
                    .args([phase, "redis", "-P"])
                    .arg(&file)
                    .args(["-p", &format!("redis.addr={}", server.addr())])
                    .args(["-p", &format!("redis.datatype={datatype}")])
                    .args(["-p", &format!("table={table}")])
                    .args(["-p", &format!("recordcount={records}")])
                    .args(["-p", "operationcount=2000", "-p", "threadcount=4"]),
                Duration::from_secs(180),
            );
            let what = format!("go-ycsb {phase} workload{workload} ({datatype})");
            // go-ycsb prints failed operations as e.g. `READ_ERROR - Takes(s): ...` and
            // exits 0 anyway; nothing in a clean run mentions errors.
            for line in out.stdout.lines().chain(out.stderr.lines()) {
                let l = line.to_ascii_lowercase();
                assert!(
                    !l.contains("error") && !l.contains("failed") && !l.contains("panic"),
                    "{what}: {line}\n--- stdout\n{}\n--- stderr\n{}",
                    out.stdout,
                    out.stderr
                );
            }
            let summary = ycsb_summary(&out.stdout);
            let total = summary
                .iter()
                .find(|(op, ..)| op == "TOTAL")
                .unwrap_or_else(|| panic!("{what}: no TOTAL line in\n{}", out.stdout));
            assert!(total.1 > 0 && total.2 > 0.0, "{what}: {total:?}");
            for (op, count, ops) in &summary {
                assert!(
                    *count > 0 && *ops > 0.0,
                    "{what}: {op} Count {count} OPS {ops}"
                );
            }
            let count_of = |name: &str| {
                summary
                    .iter()
                    .find(|(op, ..)| op == name)
                    .map(|s| s.1)
                    .unwrap_or(0)
            };
            match (phase, workload) {
                ("load", _) => assert_eq!(count_of("INSERT"), records, "{what}"),
                (_, "c") => assert_eq!(count_of("READ"), 2000, "{what}"),
                (_, "f") => assert!(count_of("READ_MODIFY_WRITE") > 0, "{what}"),
                _ => {}
            }
            if phase == "run" {
                // Workload d inserts new records; the others only read and update.
                inserted += count_of("INSERT");
                assert!(count_of("READ") > 0, "{what}: no reads\n{}", out.stdout);
            }
        }
    }
    assert!(inserted > 0, "workload d inserted nothing");

    let mut c = server.connect();
    assert_eq!(
        int(c.cmd(&["DBSIZE"])) as u64,
        2 * records + inserted,
        "records loaded + inserted by workload d, for both datatypes"
    );
    let fields: Vec<String> = (0..10).map(|i| format!("field{i}")).collect();
    let hashes = strings(c.cmd(&["KEYS", "usertable/user*"]));
    assert!(hashes.len() as u64 >= records);
    for key in hashes.iter().step_by(97) {
        let Reply::Array(Some(kv)) = c.cmd(&["HGETALL", key]) else {
            panic!("HGETALL {key}");
        };
        let mut names: Vec<String> = kv.iter().step_by(2).map(Reply::text).collect();
        names.sort();
        assert_eq!(names, fields, "fields of {key}");
        for v in kv.iter().skip(1).step_by(2) {
            assert_eq!(v.text().len(), 100, "fieldlength 100 in {key}");
        }
        assert_eq!(c.cmd(&["TYPE", key]).text(), "hash");
    }
    let strs = strings(c.cmd(&["KEYS", "strtable/user*"]));
    assert!(strs.len() as u64 >= records);
    for key in strs.iter().step_by(97) {
        let json = c.cmd(&["GET", key]).text();
        let v: serde_json::Value = serde_json::from_str(&json).expect("go-ycsb stores JSON");
        let mut names: Vec<String> = v
            .as_object()
            .expect("a JSON object")
            .keys()
            .cloned()
            .collect();
        names.sort();
        assert_eq!(names, fields, "fields of {key}");
    }
}

/// A child process killed when dropped.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port that was free a moment ago.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

#[test]
fn twemproxy_shards_over_three_instances() {
    let nutcracker = require_tool("nutcracker");
    let servers: Vec<Server> = (0..3).map(|_| Server::start(&[])).collect();
    let dir = temp_dir("twemproxy");
    let listen = free_port();
    let stats = free_port();

    // The example config, with this test's ports.
    let example = workspace_root().join("examples/twemproxy/nutcracker.yml");
    let mut conf =
        std::fs::read_to_string(&example).expect("read examples/twemproxy/nutcracker.yml");
    let mut subst = |from: &str, to: &str| {
        assert_eq!(
            conf.matches(from).count(),
            1,
            "{from} in {}",
            example.display()
        );
        conf = conf.replace(from, to);
    };
    subst(
        "listen: 127.0.0.1:22121",
        &format!("listen: 127.0.0.1:{listen}"),
    );
    for (i, s) in servers.iter().enumerate() {
        subst(
            &format!("127.0.0.1:{}:1 cascade{i}", 6380 + i),
            &format!("127.0.0.1:{}:1 cascade{i}", s.port),
        );
    }
    for needle in [
        "redis: true",
        "distribution: ketama",
        "hash: fnv1a_64",
        "auto_eject_hosts: false",
    ] {
        assert!(conf.contains(needle), "example config lacks {needle}");
    }
    let conf_path = dir.join("nutcracker.yml");
    std::fs::write(&conf_path, &conf).expect("write config");
    let log = dir.join("nutcracker.log");

    let t = run(
        Command::new(&nutcracker)
            .arg("-t")
            .arg("-c")
            .arg(&conf_path),
        b"",
        Duration::from_secs(30),
    );
    assert!(
        t.status.success(),
        "nutcracker -t: {}{}",
        t.stdout,
        t.stderr
    );
    let child = Command::new(&nutcracker)
        .arg("-c")
        .arg(&conf_path)
        .args(["-s", &stats.to_string(), "-o"])
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nutcracker");
    let mut proxy = KillOnDrop(child);
    let proxy_addr = format!("127.0.0.1:{listen}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&proxy_addr).is_err() {
        if let Some(st) = proxy.0.try_wait().expect("try_wait") {
            panic!(
                "nutcracker exited ({st}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "nutcracker did not listen on {proxy_addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Through the proxy: 300 strings and a few hashes.
    let mut p = connect_addr(&proxy_addr);
    let keys: Vec<String> = (0..300).map(|i| format!("key:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(
            p.cmd(&["SET", k, &format!("value-{i}")]),
            Reply::Simple("OK".into()),
            "SET {k}"
        );
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(p.cmd(&["GET", k]).text(), format!("value-{i}"), "GET {k}");
    }
    let hashes: Vec<String> = (0..10).map(|i| format!("hash:{i}")).collect();
    for h in &hashes {
        assert_eq!(p.cmd(&["HSET", h, "name", h, "n", "1"]), Reply::Int(2));
        assert_eq!(p.cmd(&["HINCRBY", h, "n", "41"]), Reply::Int(42));
    }
    for h in &hashes {
        let got = pairs(p.cmd(&["HGETALL", h]));
        let want = [("n", "42"), ("name", h.as_str())];
        assert_eq!(
            got,
            want.map(|(f, v)| (f.to_string(), v.to_string())),
            "HGETALL {h}"
        );
    }
    // Multi-key commands are split per instance by the proxy and merged.
    let mget: Vec<&str> = ["MGET"]
        .into_iter()
        .chain(keys[..50].iter().map(String::as_str))
        .collect();
    let Reply::Array(Some(vals)) = p.cmd(&mget) else {
        panic!("MGET through the proxy");
    };
    let want: Vec<Reply> = (0..50)
        .map(|i| Reply::Bulk(Some(format!("value-{i}").into_bytes())))
        .collect();
    assert_eq!(vals, want, "MGET across instances");
    // (twemproxy 0.5.0 miscounts a multi-key EXISTS of more than 10 keys, with
    // redis-server behind it as well, so this one stays small.)
    let mut exists = vec!["EXISTS"];
    exists.extend(keys[..8].iter().map(String::as_str));
    exists.push("no-such-key");
    assert_eq!(p.cmd(&exists), Reply::Int(8), "EXISTS across instances");

    // Directly on each instance: every key is on exactly one of them.
    let mut direct: Vec<_> = servers.iter().map(Server::connect).collect();
    let mut per_instance = [0usize; 3];
    for k in keys.iter().chain(hashes.iter()) {
        let mut holders = Vec::new();
        for (i, c) in direct.iter_mut().enumerate() {
            if int(c.cmd(&["EXISTS", k])) == 1 {
                holders.push(i);
            }
        }
        assert_eq!(holders.len(), 1, "{k} is on instances {holders:?}");
        per_instance[holders[0]] += 1;
    }
    for (i, c) in direct.iter_mut().enumerate() {
        assert!(
            per_instance[i] > 0,
            "instance {i} got no keys: {per_instance:?}"
        );
        assert_eq!(
            int(c.cmd(&["DBSIZE"])) as usize,
            per_instance[i],
            "DBSIZE of instance {i}"
        );
    }
    assert_eq!(
        per_instance.iter().sum::<usize>(),
        keys.len() + hashes.len()
    );

    // DEL through the proxy, split over the instances.
    let mut del = vec!["DEL"];
    del.extend(keys[..30].iter().map(String::as_str));
    assert_eq!(p.cmd(&del), Reply::Int(30));
    let left: i64 = direct.iter_mut().map(|c| int(c.cmd(&["DBSIZE"]))).sum();
    assert_eq!(left as usize, keys.len() + hashes.len() - 30);

    // Commands over the whole keyspace cannot be routed: nutcracker closes the client
    // connection instead of answering (twemproxy 0.5.0).
    for cmd in [
        &["KEYS", "*"][..],
        &["SCAN", "0"],
        &["DBSIZE"],
        &["CASCADE.RANGE", "-", "+"],
    ] {
        let mut c = connect_addr(&proxy_addr);
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
        let a: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
        c.send(&a);
        let reply = c.read();
        assert!(
            reply.is_none() || matches!(reply, Some(Reply::Error(_))),
            "{cmd:?} through twemproxy answered {reply:?}; expected an error or a closed connection"
        );
        assert_eq!(
            reply, None,
            "{cmd:?}: twemproxy 0.5.0 closes the connection"
        );
    }
    // The proxy still serves other clients.
    let mut c = connect_addr(&proxy_addr);
    assert_eq!(c.cmd(&["GET", "key:299"]).text(), "value-299");
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}
