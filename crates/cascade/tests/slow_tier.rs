//! The slow tier from the command line (issue #14): `cascade serve --slow-dir` moves
//! data past `--fast-budget` into the slow directory and serves it back, also after a
//! restart; the store subcommands (`stats`, `verify`) refuse the store without
//! `--slow-dir` and open it with it; `cascade bench --slow-dir` reports the slow
//! tier's bytes and reads.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{encode, temp_dir, Client, Reply, Server};

/// Removes the test's directory tree on drop (also when the test fails).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const KEYS: usize = 30_000;

fn key(i: usize) -> String {
    format!("slowkey:{i:06}")
}

/// Mostly inline values, every fifth one past the inline threshold (separated).
fn value(i: usize) -> String {
    let len = if i.is_multiple_of(5) { 400 } else { 90 };
    let mut v = format!("value-{i}-");
    while v.len() < len {
        v.push(char::from(b'a' + (i % 26) as u8));
    }
    v
}

/// One numeric field of `INFO cascade`.
fn info_num(c: &mut Client, field: &str) -> u64 {
    let text = c.cmd(&["INFO", "cascade"]).text();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO cascade has no {field}: {text}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("INFO {field}: {e}"))
}

fn config_get(c: &mut Client, name: &str) -> String {
    match c.cmd(&["CONFIG", "GET", name]) {
        Reply::Array(Some(items)) if items.len() == 2 => items[1].text(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

/// Writes every key in one pipeline.
fn write_all(c: &mut Client) {
    let mut buf = Vec::new();
    for i in 0..KEYS {
        buf.extend(encode(&[b"SET", key(i).as_bytes(), value(i).as_bytes()]));
    }
    c.send_raw(&buf);
    for i in 0..KEYS {
        assert_eq!(c.read(), Some(Reply::Simple("OK".into())), "SET {}", key(i));
    }
}

/// Reads every key back (pipelined MGETs of 500).
fn check_all(c: &mut Client) {
    for start in (0..KEYS).step_by(10_000) {
        let end = (start + 10_000).min(KEYS);
        let mut buf = Vec::new();
        for b in (start..end).step_by(500) {
            let keys: Vec<String> = (b..(b + 500).min(end)).map(key).collect();
            let mut args: Vec<&[u8]> = vec![b"MGET"];
            args.extend(keys.iter().map(String::as_bytes));
            buf.extend(encode(&args));
        }
        c.send_raw(&buf);
        for b in (start..end).step_by(500) {
            let Some(Reply::Array(Some(items))) = c.read() else {
                panic!("MGET reply");
            };
            for (i, item) in (b..(b + 500).min(end)).zip(items) {
                assert_eq!(
                    item,
                    Reply::Bulk(Some(value(i).into_bytes())),
                    "key {}",
                    key(i)
                );
            }
        }
    }
}

/// Bytes of the regular files in `dir` (the slow tier's table files; its lock and
/// owner files are a few bytes).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn cascade(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cascade"))
        .args(args)
        .output()
        .expect("run cascade")
}

#[test]
fn serve_demotes_past_the_fast_budget_and_reads_back() {
    let root = temp_dir("slowserve");
    let _cleanup = Cleanup(root.clone());
    let (data, slow) = (root.join("data"), root.join("slow"));
    let slow_s = slow.display().to_string();
    let args = [
        "--slow-dir",
        slow_s.as_str(),
        "--fast-budget",
        "1M",
        "--slow-write-rate",
        "0",
        "--pool-size",
        "64M",
        "--faststore-capacity",
        "1M",
    ];
    let mut srv = Server::start_in(&data, &args);
    srv.keep_dir = true;
    let mut c = srv.connect();
    assert_eq!(config_get(&mut c, "cascade-slow-dir"), slow_s);
    assert_eq!(
        config_get(&mut c, "cascade-fast-budget"),
        (1u64 << 20).to_string()
    );
    assert_eq!(config_get(&mut c, "cascade-slow-write-rate"), "0");

    write_all(&mut c);
    // The background threads flush, compact and, once StableStore is past the budget,
    // demote (an idle store is tidied after a second).
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_num(&mut c, "slow_tier_bytes") == 0 {
        assert!(
            Instant::now() < deadline,
            "nothing reached the slow tier in 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(info_num(&mut c, "demotions") > 0);
    assert!(info_num(&mut c, "slow_tier_files") > 0);
    assert!(
        dir_bytes(&slow) > 4096,
        "no table files in {}",
        slow.display()
    );
    check_all(&mut c);
    assert!(
        info_num(&mut c, "slow_gets") > 0,
        "no get was answered by the slow tier"
    );
    assert_eq!(srv.signal_and_wait("-TERM"), Some(0));

    // Without its slow directory the store is refused; with it, it opens.
    let d = data.display().to_string();
    let out = cascade(&["stats", "--dir", &d]);
    assert_eq!(out.status.code(), Some(2), "stats without --slow-dir");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("slow"), "stderr: {err}");
    let out = cascade(&["stats", "--dir", &d, "--slow-dir", &slow_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stats: {text}");
    let slow_bytes: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("slow_tier_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no slow_tier_bytes in {text}"));
    assert!(slow_bytes > 0, "{text}");
    // `verify` too: refused without the slow directory, clean with it.
    let out = cascade(&["verify", "--dir", &d]);
    assert_eq!(out.status.code(), Some(2), "verify without --slow-dir");
    let out = cascade(&["verify", "--dir", &d, "--slow-dir", &slow_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "verify: {text}");
    assert!(text.contains("clean"), "{text}");

    // A restart with the same directories serves every key again.
    let srv = Server::start_in(&data, &args);
    let mut c = srv.connect();
    assert!(info_num(&mut c, "slow_tier_bytes") > 0);
    check_all(&mut c);
}

#[test]
fn bench_reports_the_slow_tier() {
    let root = temp_dir("slowbench");
    let _cleanup = Cleanup(root.clone());
    let (dir, slow, json) = (root.join("bench"), root.join("slow"), root.join("out.json"));
    let out = cascade(&[
        "bench",
        "--engine",
        "cascade",
        "--dir",
        &dir.display().to_string(),
        "--slow-dir",
        &slow.display().to_string(),
        "--pool-size",
        "64M",
        "--fast-budget",
        "1M",
        "--faststore-capacity",
        "1M",
        "--num",
        "40000",
        "--value-size",
        "100",
        "--workloads",
        "fillrandom,settle,readrandom",
        "--json",
        &json.display().to_string(),
        "--quiet",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed: {table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.contains("slow tier MB"), "{table}");
    assert!(
        dir_bytes(&slow.join("cascade")) > 4096,
        "no table files in the engine's slow directory"
    );
    let text = std::fs::read_to_string(&json).expect("read the JSON report");
    let v: serde_json::Value = serde_json::from_str(&text).expect("parse the JSON report");
    let reports = v.as_array().expect("an array of reports");
    let read = reports
        .iter()
        .find(|r| r["workload"] == "readrandom")
        .expect("a readrandom report");
    let num = |f: &str| read[f].as_f64().unwrap_or_else(|| panic!("{f} in {read}"));
    assert!(num("slow_tier_bytes") > 0.0, "{read}");
    assert!(num("fast_tier_bytes") > 0.0, "{read}");
    assert_eq!(num("found"), num("ops"), "every key is found: {read}");
    assert!(num("slow_gets") > 0.0, "{read}");
    assert!(
        num("slow_get_share") > 0.0 && num("slow_get_share") <= 1.0,
        "{read}"
    );
    assert!(num("fast_write_amp") > 0.0, "{read}");
}

/// A bad engine option fails the bench with the engine's error, labelled once.
#[test]
fn bench_reports_a_bad_option_once() {
    let root = temp_dir("badbench");
    let _cleanup = Cleanup(root.clone());
    let out = cascade(&[
        "bench",
        "--engine",
        "cascade",
        "--dir",
        &root.join("bench").display().to_string(),
        "--block-size",
        "3",
        "--num",
        "10",
        "--workloads",
        "fillrandom",
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cascade: invalid argument: block_size 3"),
        "{err}"
    );
    assert_eq!(err.matches("invalid argument").count(), 1, "{err}");
}

/// CONFIG GET reports the fast budget in effect: a quarter of the pool the store was
/// created with, even when a restart passes another `--pool-size`.
#[test]
fn config_reports_the_budget_of_the_existing_pool() {
    let root = temp_dir("budgetcfg");
    let _cleanup = Cleanup(root.clone());
    let (data, slow) = (root.join("data"), root.join("slow"));
    let slow_s = slow.display().to_string();
    let quarter = |c: &mut Client| {
        let got: u64 = config_get(c, "cascade-fast-budget")
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, info_num(c, "fast_budget_bytes"));
        got
    };
    let mut srv = Server::start_in(&data, &["--slow-dir", &slow_s, "--pool-size", "64M"]);
    srv.keep_dir = true;
    let first = quarter(&mut srv.connect());
    assert!(first > 8 << 20 && first <= 16 << 20, "{first}");
    assert_eq!(srv.signal_and_wait("-TERM"), Some(0));
    let srv = Server::start_in(&data, &["--slow-dir", &slow_s, "--pool-size", "256M"]);
    assert_eq!(quarter(&mut srv.connect()), first);
}
