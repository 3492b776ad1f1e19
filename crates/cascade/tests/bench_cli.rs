//! `cascade bench` as a user runs it: which process settings it reports.

mod common;

use std::process::Command;

use common::temp_dir;

const NOTE: &str = "transparent huge pages were off";

/// Runs a tiny fillrandom with `durability`; `thp` sets `CASCADE_THP`. Returns stdout.
fn bench(durability: &str, thp: Option<&str>) -> String {
    let dir = temp_dir("benchcli");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cascade"));
    cmd.args(["bench", "--engine", "cascade", "--dir"])
        .arg(&dir)
        .args(["--durability", durability, "--pool-size", "64M"])
        .args(["--num", "200", "--workloads", "fillrandom", "--quiet"])
        .env_remove("CASCADE_THP");
    if let Some(v) = thp {
        cmd.env("CASCADE_THP", v);
    }
    let out = cmd.output().expect("run cascade bench");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "bench failed: {text}");
    assert!(text.contains("| cascade | fillrandom |"), "{text}");
    text
}

/// Durable-write benchmarks run without transparent huge pages, as the server does
/// (`cascade_bench::alloc::choose_transparent_huge_pages`), and say so; the others
/// keep them, and `CASCADE_THP` decides over both.
#[test]
fn sync_benchmarks_run_without_huge_pages_and_say_so() {
    if !cfg!(target_os = "linux") {
        return;
    }
    assert!(bench("sync", None).contains(NOTE));
    assert!(!bench("sync", Some("on")).contains(NOTE));
    assert!(!bench("buffered", None).contains(NOTE));
    assert!(bench("buffered", Some("off")).contains(NOTE));
}
