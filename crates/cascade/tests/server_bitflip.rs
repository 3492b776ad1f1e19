//! Bit-flip sweep through a real `cascade serve` (issue #11, part 2): a store of
//! strings (inline and separated values, overwritten and deleted), hashes and sorted
//! sets (with HDEL / ZREM) and keys with a long TTL is written over a socket, with a
//! small FastStore so that flushes and compactions spread it over tables, buffer-trees
//! and live logs. It is closed by `SHUTDOWN`, or by SIGKILL right after the last
//! acknowledged write under `--durability sync`. Then, one bit at a time at offsets
//! drawn from the non-zero bytes of `<dir>/pool`, a server is started on a flipped copy
//! and every key is read back against an oracle. A flip must end with the server
//! refusing to start (naming the corruption), with error replies, or with every reply
//! exact — never a wrong, stale or missing value, field, member or TTL. Before each
//! start, `cascade verify` runs on the copy and must report damage whenever the server
//! refuses to start or answers with errors.
//!
//! Knobs: `SERVER_BITFLIP_SAMPLES` flips per scenario (default 300; `all` = every
//! non-zero byte) at offsets drawn with `SERVER_BITFLIP_SEED`. The store's layout
//! depends on when the server's background flushes ran, so the same seed may hit other
//! structures from run to run. Run with `--nocapture` to see the counts.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;

use common::{temp_dir, Client, Reply, Server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use Want::{Exact, Expiring, Pairs};

/// Small pool (256 KiB chunks, cheap copies) and FastStore (frequent flushes).
const ENGINE: [&str; 4] = ["--pool-size", "32M", "--faststore-capacity", "64K"];
const TTL: i64 = 1_000_000;

/// What a reply must be.
enum Want {
    Exact(Reply),
    /// HGETALL: these field/value pairs (an array in field order), in any order.
    Pairs(Reply),
    /// TTL of a key with an expiry: in (0, TTL].
    Expiring,
}

/// A user key's content in the oracle.
enum Val {
    Str(String),
    Hash(BTreeMap<String, String>),
    ZSet(BTreeMap<String, i64>),
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_string()).collect()
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

/// A reply for a failure message, long strings cut.
fn show(r: &Reply) -> String {
    match r {
        Reply::Bulk(Some(b)) => {
            let n = b.len();
            format!("{:?}({n} B)", String::from_utf8_lossy(&b[..n.min(24)]))
        }
        Reply::Array(Some(v)) => {
            let items: Vec<String> = v.iter().map(show).collect();
            format!("[{}]", items.join(", "))
        }
        other => format!("{other:?}"),
    }
}

/// Value `ver` of string `i`: 700 bytes (separated) or 20 (inline).
fn value(i: usize, ver: usize) -> String {
    let (mut v, pad) = (format!("v{i}.{ver}:"), char::from(b'a' + (i % 26) as u8));
    let len = if (i + ver).is_multiple_of(3) { 700 } else { 20 };
    v.extend(std::iter::repeat_n(pad, len - v.len()));
    v
}

/// Sends `cmds` pipelined, 256 at a time; the replies (`None`: connection closed).
fn pipeline(c: &mut Client, cmds: &[Vec<String>]) -> Vec<Option<Reply>> {
    let mut out = Vec::new();
    for part in cmds.chunks(256) {
        for cmd in part {
            c.send(&cmd.iter().map(String::as_bytes).collect::<Vec<_>>());
        }
        out.extend(part.iter().map(|_| c.read()));
    }
    out
}

/// The oracle: every key's content (`None`: deleted) and whether it has an expiry.
type Oracle = BTreeMap<String, Option<(Val, bool)>>;

/// `SET k v` (with `EX TTL` if `ex`), in the writes and in the oracle.
fn set(w: &mut Vec<Vec<String>>, m: &mut Oracle, k: String, v: String, ex: bool) {
    let ttl = TTL.to_string();
    let ex_args: &[&str] = if ex { &["EX", &ttl] } else { &[] };
    w.push(args(&[&["SET", &k, &v][..], ex_args].concat()));
    m.insert(k, Some((Val::Str(v), ex)));
}

/// The writes that build the store, and the oracle.
fn build() -> (Vec<Vec<String>>, Oracle) {
    let (mut w, mut m, ttl) = (Vec::new(), BTreeMap::new(), TTL.to_string());
    let skey = |i: usize| format!("s:{i:04}");
    for i in 0..1500 {
        set(&mut w, &mut m, skey(i), value(i, 0), false);
    }
    // 200 overwrites (some move between inline and separated), keys with a TTL.
    for n in 0..200 {
        let i = (n * 7) % 1500;
        set(&mut w, &mut m, skey(i), value(i, 1 + n % 2), false);
    }
    for t in 0..30 {
        set(&mut w, &mut m, format!("t:{t:02}"), value(t, 5), true);
    }
    for h in 0..60usize {
        let (hk, zk) = (format!("h:{h:02}"), format!("z:{h:02}"));
        let (mut hash, mut zset) = (BTreeMap::new(), BTreeMap::new());
        let (mut hset, mut zadd) = (args(&["HSET", &hk]), args(&["ZADD", &zk]));
        for f in 0..8 {
            let v = value(h * 8 + f, f);
            hset.extend([format!("f{f}"), v.clone()]);
            hash.insert(format!("f{f}"), v);
            let score = ((h * 7 + f * 13) % 50) as i64 - 10;
            zadd.extend([score.to_string(), format!("m{f}")]);
            zset.insert(format!("m{f}"), score);
        }
        w.extend([hset, zadd]);
        if h % 3 == 0 {
            w.push(args(&["HDEL", &hk, "f1", "f3"]));
            w.push(args(&["ZREM", &zk, "m3", "m5"]));
            hash.retain(|f, _| f != "f1" && f != "f3");
            zset.retain(|f, _| f != "m3" && f != "m5");
        }
        if h % 5 == 0 {
            w.push(args(&["HSET", &hk, "f0", "new"]));
            hash.insert("f0".into(), "new".into());
        }
        let (live, ex) = (h % 10 != 7, h % 10 == 2);
        if !live {
            w.push(args(&["DEL", &hk, &zk]));
        } else if ex {
            w.push(args(&["EXPIRE", &hk, &ttl]));
            w.push(args(&["EXPIRE", &zk, &ttl]));
        }
        m.insert(hk, live.then_some((Val::Hash(hash), ex)));
        m.insert(zk, live.then_some((Val::ZSet(zset), ex)));
    }
    for i in (0..1500).step_by(41) {
        w.push(args(&["DEL", &skey(i)]));
        m.insert(skey(i), None);
    }
    // A last round of overwrites: the newest versions are in the live logs.
    for n in 0..60 {
        let i = (n * 7 + 3) % 1500;
        set(&mut w, &mut m, skey(i), value(i, 3 + n % 2), false);
    }
    (w, m)
}

/// Every read of the oracle: GET, HGETALL + HLEN, ZRANGEBYSCORE + ZCARD + ZSCORE of
/// every member ever added, TTL of live keys, EXISTS of deleted collections, DBSIZE.
fn checks(m: &Oracle) -> Vec<(Vec<String>, Want)> {
    let mut out = Vec::new();
    let mut add = |a: &[&str], w: Want| out.push((args(a), w));
    let int = |n: i64| Exact(Reply::Int(n));
    for (k, v) in m {
        match v.as_ref().map(|(v, _)| v) {
            None if k.starts_with("s:") => add(&["GET", k], Exact(Reply::Bulk(None))),
            None => add(&["EXISTS", k], int(0)),
            Some(Val::Str(s)) => add(&["GET", k], Exact(bulk(s))),
            Some(Val::Hash(h)) => {
                let pairs = h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect();
                add(&["HGETALL", k], Pairs(Reply::Array(Some(pairs))));
                add(&["HLEN", k], int(h.len() as i64));
            }
            Some(Val::ZSet(z)) => {
                let mut by: Vec<_> = z.iter().map(|(m, s)| (s, m)).collect();
                by.sort();
                let items = by.iter().flat_map(|(s, m)| [bulk(m), bulk(&s.to_string())]);
                let range = Exact(Reply::Array(Some(items.collect())));
                add(&["ZRANGEBYSCORE", k, "-inf", "+inf", "WITHSCORES"], range);
                add(&["ZCARD", k], int(z.len() as i64));
                for m in (0..8).map(|f| format!("m{f}")) {
                    let score = z.get(&m).map(|s| s.to_string().into_bytes());
                    add(&["ZSCORE", k, &m], Exact(Reply::Bulk(score)));
                }
            }
        }
        if let Some((_, ex)) = v {
            add(&["TTL", k], if *ex { Expiring } else { int(-1) });
        }
    }
    add(&["DBSIZE"], int(m.values().flatten().count() as i64));
    out
}

/// Runs `checks` on a server: `Ok(true)` if some reply was an error reply; `Err`
/// naming the first wrong reply and how many there were.
fn verify(c: &mut Client, checks: &[(Vec<String>, Want)]) -> Result<bool, String> {
    let cmds: Vec<Vec<String>> = checks.iter().map(|(c, _)| c.clone()).collect();
    let (mut errors, mut wrong) = (false, Vec::new());
    for ((cmd, want), got) in checks.iter().zip(pipeline(c, &cmds)) {
        errors |= matches!(got, Some(Reply::Error(_)));
        let ok = match (&got, want) {
            (Some(Reply::Error(_)), _) => true,
            (Some(r), Exact(w)) => r == w,
            (Some(Reply::Int(t)), Expiring) => (1..=TTL).contains(t),
            (Some(Reply::Array(Some(v))), Pairs(w)) => {
                let mut pairs: Vec<&[Reply]> = v.chunks(2).collect();
                pairs.sort_by_key(|p| show(&p[0]));
                Reply::Array(Some(pairs.concat())) == *w
            }
            _ => false,
        };
        if !ok {
            let want = match want {
                Exact(r) | Pairs(r) => show(r),
                Expiring => format!("a TTL in 1..={TTL}"),
            };
            let got = got.as_ref().map_or("connection closed".into(), show);
            wrong.push(format!("{cmd:?}: expected {want}, got {got}"));
        }
    }
    match wrong.first() {
        None => Ok(errors),
        Some(first) => Err(format!("{} wrong replies; first: {first}", wrong.len())),
    }
}

/// Where `off` is: the chunk (its kind, owner and seq if it starts an allocation).
fn locate(pool: &[u8], off: usize) -> String {
    let u64_at = |a: usize| u64::from_le_bytes(pool[a..a + 8].try_into().unwrap_or([0; 8]));
    let cs = u64_at(24) as usize;
    let h = off / cs * cs;
    if h == 0 || &pool[h..h + 4] != b"CKCH" {
        return format!("chunk {} +{}, no chunk header", off / cs, off - h);
    }
    let kinds = ["?", "log", "table", "manifest", "value"];
    let kind = kinds.get(usize::from(pool[h + 4])).unwrap_or(&"?");
    let (owner, seq, c) = (u64_at(h + 16), u64_at(h + 24), off / cs);
    format!("chunk {c}: {kind}, owner {owner}, seq {seq}, +{}", off - h)
}

/// Builds a store (closing it with `close`) and sweeps flips over it.
fn sweep(scenario: &str, extra: &[&str], close: fn(&mut Server, Client)) {
    let dir = temp_dir(&format!("sweep-{scenario}"));
    let mut srv = Server::start_in(&dir, &[&ENGINE[..], extra].concat());
    srv.keep_dir = true;
    let mut c = srv.connect();
    let (writes, model) = build();
    for (cmd, r) in writes.iter().zip(pipeline(&mut c, &writes)) {
        let ok = matches!(r, Some(Reply::Simple(_) | Reply::Int(_)));
        assert!(ok, "{cmd:?}: {r:?}");
    }
    let info = c.cmd(&["INFO", "cascade"]).text();
    let stats: BTreeMap<&str, &str> = info.lines().filter_map(|l| l.split_once(':')).collect();
    let stat = |n: &str| -> u64 { stats[n].trim().parse().expect(n) };
    let (flushes, compactions) = (stat("flushes"), stat("compactions"));
    assert!(flushes >= 1, "no FastStore flush while writing:\n{info}");
    close(&mut srv, c);
    let checks = checks(&model);

    let pool = std::fs::read(dir.join("pool")).expect("read pool");
    let nonzero: Vec<usize> = (0..pool.len()).filter(|&i| pool[i] != 0).collect();
    let mut blocks: Vec<usize> = nonzero.iter().map(|i| i / 4096).collect();
    blocks.dedup();
    let stderr = dir.with_extension("stderr");
    // Copies the store (the pool sparsely, `mask` XORed into byte `off`), checks it.
    let trial = |off: usize, mask: u8| -> Result<&str, String> {
        let work = temp_dir("flip");
        for e in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            if e.file_name() != "LOCK" && e.file_name() != "pool" {
                std::fs::copy(e.path(), work.join(e.file_name())).expect("copy");
            }
        }
        let f = std::fs::File::create(work.join("pool")).expect("create pool");
        f.set_len(pool.len() as u64).expect("set_len");
        for &b in &blocks {
            let (a, e) = (b * 4096, (b * 4096 + 4096).min(pool.len()));
            f.write_all_at(&pool[a..e], a as u64).expect("write pool");
        }
        f.write_all_at(&[pool[off] ^ mask], off as u64)
            .expect("flip");
        let bit = mask.trailing_zeros();
        let at = || format!("flip at {off} bit {bit} ({})", locate(&pool, off));
        // `cascade verify` first: it changes nothing and must see what the server sees.
        let v = std::process::Command::new(env!("CARGO_BIN_EXE_cascade"))
            .args(["verify", "--dir"])
            .arg(&work)
            .output()
            .expect("run cascade verify");
        let found = match v.status.code() {
            Some(0) => false,
            Some(1) => true,
            c => return Err(format!("{}: cascade verify exited {c:?}", at())),
        };
        let missed = |what: &str| Err(format!("{}: {what}, cascade verify clean", at()));
        match Server::try_start_in(&work, &ENGINE, Some(&stderr)) {
            Ok(srv) => match verify(&mut srv.connect(), &checks) {
                Ok(true) if !found => missed("error replies"),
                Ok(errors) => Ok(if errors { "read" } else { "harmless" }),
                Err(e) => Err(format!("SILENT {}: {e}", at())),
            },
            Err((code, text)) => {
                let _ = std::fs::remove_dir_all(&work);
                // The refusal names the damage and what to run next.
                let named = (text.contains("corruption") || text.contains("checksum"))
                    && text.contains("cascade verify");
                match code {
                    _ if !found => missed("refused at open"),
                    Some(c) if c != 0 && named && !text.contains("panicked") => Ok("open"),
                    _ => Err(format!("{}: odd start failure {code:?}: {text}", at())),
                }
            }
        }
    };
    assert_eq!(
        trial(0, 0),
        Ok("harmless"),
        "the unflipped copy against the oracle"
    );

    let env = |name: &str| std::env::var(format!("SERVER_BITFLIP_{name}")).ok();
    let seed: u64 = env("SEED").map_or(20_261_211, |s| s.parse().expect("SEED"));
    let samples = env("SAMPLES").unwrap_or_else(|| "300".into());
    let mut rng = StdRng::seed_from_u64(seed);
    let offsets: Vec<usize> = match samples.parse() {
        Ok(n) => (0..n)
            .map(|_| nonzero[rng.gen_range(0..nonzero.len())])
            .collect(),
        Err(_) if samples == "all" => nonzero.clone(),
        Err(e) => panic!("SERVER_BITFLIP_SAMPLES={samples}: {e}"),
    };
    let (mut counts, mut failures) = (BTreeMap::new(), Vec::new());
    for &off in &offsets {
        match trial(off, 1 << rng.gen_range(0..8u8)) {
            Ok(outcome) => *counts.entry(outcome).or_insert(0) += 1,
            Err(e) => {
                eprintln!("{scenario}: {e}");
                failures.push(e);
            }
        }
    }
    let n = |k: &str| counts.get(k).copied().unwrap_or(0);
    let (open, read, harmless) = (n("open"), n("read"), n("harmless"));
    let (bytes, tried) = (nonzero.len(), offsets.len());
    let silent = failures.iter().filter(|f| f.starts_with("SILENT")).count();
    let other = failures.len() - silent;
    eprintln!(
        "server bit flips, {scenario} ({flushes} flushes, {compactions} compactions, \
         {bytes} non-zero pool bytes, seed {seed}): tried {tried}, detected at open {open}, \
         detected at read {read}, harmless {harmless}, silent {silent}, other failures {other}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&stderr);
    assert!(failures.is_empty(), "flips that went wrong: {failures:#?}");
}

#[test]
fn clean_shutdown_flips_are_detected_or_harmless() {
    sweep("clean", &[], |srv, mut c| {
        c.send(&[b"SHUTDOWN"]);
        assert!(c.closed(), "SHUTDOWN closes the connection");
        assert_eq!(srv.wait(), Some(0), "exit code after SHUTDOWN");
    });
}

#[test]
fn crash_flips_are_detected_or_harmless() {
    sweep("crash", &["--durability", "sync"], |srv, _c| srv.kill9());
}
