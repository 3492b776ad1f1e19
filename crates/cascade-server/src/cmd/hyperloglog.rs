//! `HyperLogLog` commands: `PFADD PFCOUNT PFMERGE PFDEBUG PFSELFTEST`. An HLL is a
//! string key whose bytes are Redis's HLL representation (`types/hll.rs`), so GET,
//! SET, DUMP and RESTORE move it between this server and Redis unchanged. Data
//! commands; each reads and rewrites the one `0x01` entry of each key it names
//! (at most 12 KiB). `hll-sparse-max-bytes` is fixed at Redis's default, 3000.
//!
//! PFCOUNT of one key stores the computed count in the value's header, as Redis does
//! (so a GET after PFCOUNT shows the same bytes as Redis's).

use super::{is, spec, Keys, Run::Data, Spec, ALLKEYS};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Meta, Type};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::hll::{self, HllError, REGISTERS, SPARSE_MAX_BYTES};

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "pfadd",
        -2,
        &["write", "denyoom", "fast"],
        Keys::Range(1, 1, 1),
        "hyperloglog",
        "Adds elements to a HyperLogLog.",
        Data(pfadd),
    ),
    spec(
        "pfcount",
        -2,
        &["readonly", "may-replicate"],
        ALLKEYS,
        "hyperloglog",
        "Approximate number of distinct elements added to HyperLogLogs.",
        Data(pfcount),
    ),
    spec(
        "pfmerge",
        -2,
        &["write", "denyoom"],
        ALLKEYS,
        "hyperloglog",
        "Merges HyperLogLogs into one.",
        Data(pfmerge),
    ),
    spec(
        "pfdebug",
        3,
        &["write", "denyoom", "admin"],
        Keys::Range(2, 2, 1),
        "hyperloglog",
        "Internal HyperLogLog commands for testing.",
        Data(pfdebug),
    ),
    spec(
        "pfselftest",
        1,
        &["admin"],
        Keys::None,
        "hyperloglog",
        "Self test of the HyperLogLog implementation.",
        Data(pfselftest),
    ),
];

fn hll_err(e: HllError) -> CmdError {
    CmdError::Msg(e.text().into())
}

/// The live string at `key` checked as an HLL (`None`: no key).
fn read_hll(tx: &mut Tx<'_>, key: &[u8], write: bool) -> CmdResult<Option<Meta>> {
    let m = if write {
        tx.begin_typed(key, Type::String)?
    } else {
        tx.typed(key, Type::String)?
    };
    if let Some(m) = &m {
        hll::check(&m.payload).map_err(hll_err)?;
    }
    Ok(m)
}

fn pfadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let old = read_hll(tx, key, true)?;
    let mut updated = old.is_none();
    let mut v = old
        .as_ref()
        .map_or_else(hll::new_sparse, |m| m.payload.clone());
    for ele in c.args().skip(2) {
        updated |= hll::add(&mut v, ele, SPARSE_MAX_BYTES).map_err(hll_err)?;
    }
    if updated {
        hll::invalidate(&mut v);
        let exp = old.as_ref().and_then(|m| m.expire_at);
        tx.set_meta(key, old.as_ref(), &Meta::string(&v, exp));
    }
    reply::int(out, i64::from(updated));
    Ok(())
}

/// The union of the HLLs at `keys` as raw registers, and whether one was dense.
fn union(tx: &mut Tx<'_>, keys: impl Iterator<Item = Vec<u8>>) -> CmdResult<(Vec<u8>, bool)> {
    let mut max = vec![0u8; REGISTERS];
    let mut dense = false;
    for k in keys {
        if let Some(m) = read_hll(tx, &k, false)? {
            dense |= hll::check(&m.payload).map_err(hll_err)?;
            hll::merge_into(&mut max, &m.payload).map_err(hll_err)?;
        }
    }
    Ok((max, dense))
}

fn pfcount(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    if c.len() > 2 {
        let keys: Vec<Vec<u8>> = c.args().skip(1).map(<[u8]>::to_vec).collect();
        let (max, _) = union(tx, keys.into_iter())?;
        reply::int(out, i64::try_from(hll::count_raw(&max)).unwrap_or(i64::MAX));
        return Ok(());
    }
    let key = c.arg(1);
    let Some(m) = read_hll(tx, key, true)? else {
        reply::int(out, 0);
        return Ok(());
    };
    let mut v = m.payload.clone();
    let (card, changed) = hll::count(&mut v).map_err(hll_err)?;
    if changed {
        tx.set_meta(key, Some(&m), &Meta::string(&v, m.expire_at));
    }
    reply::int(out, i64::try_from(card).unwrap_or(i64::MAX));
    Ok(())
}

fn pfmerge(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let dst = c.arg(1);
    let keys: Vec<Vec<u8>> = c.args().skip(1).map(<[u8]>::to_vec).collect();
    let (max, dense) = union(tx, keys.into_iter())?;
    let old = read_hll(tx, dst, true)?;
    let mut v = old
        .as_ref()
        .map_or_else(hll::new_sparse, |m| m.payload.clone());
    hll::set_registers(&mut v, &max, dense, SPARSE_MAX_BYTES).map_err(hll_err)?;
    let exp = old.as_ref().and_then(|m| m.expire_at);
    tx.set_meta(dst, old.as_ref(), &Meta::string(&v, exp));
    reply::ok(out);
    Ok(())
}

fn pfdebug(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (sub, key) = (c.arg(1), c.arg(2));
    let Some(m) = read_hll(tx, key, true)? else {
        return Err(CmdError::err("The specified key does not exist"));
    };
    let mut v = m.payload.clone();
    if is(sub, "getreg") {
        if hll::encoding(&v) == "sparse" {
            hll::to_dense(&mut v).map_err(hll_err)?;
            tx.set_meta(key, Some(&m), &Meta::string(&v, m.expire_at));
        }
        let regs = hll::registers(&v).map_err(hll_err)?;
        reply::array_header(out, regs.len());
        for r in regs {
            reply::int(out, i64::from(r));
        }
    } else if is(sub, "decode") {
        if hll::encoding(&v) != "sparse" {
            return Err(CmdError::err("HLL encoding is not sparse"));
        }
        reply::bulk(out, hll::decode_sparse(&v).as_bytes());
    } else if is(sub, "encoding") {
        reply::simple(out, hll::encoding(&v));
    } else if is(sub, "todense") {
        let conv = hll::encoding(&v) == "sparse";
        if conv {
            hll::to_dense(&mut v).map_err(hll_err)?;
            tx.set_meta(key, Some(&m), &Meta::string(&v, m.expire_at));
        }
        reply::int(out, i64::from(conv));
    } else {
        return Err(CmdError::err(format!(
            "Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(sub)
        )));
    }
    Ok(())
}

/// Checks that the sparse and the dense representation agree on many random
/// additions, and that the estimate stays within Redis's bound (5 sigma).
fn pfselftest(_tx: &mut Tx<'_>, _c: &Command, out: &mut Out) -> CmdResult<()> {
    let mut sparse = hll::new_sparse();
    let mut dense = hll::new_sparse();
    hll::to_dense(&mut dense).map_err(hll_err)?;
    let fail = |m: &str| CmdError::err(format!("TESTFAILED {m}"));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for n in 1..=20_000u64 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let ele = seed.to_le_bytes();
        hll::add(&mut sparse, &ele, SPARSE_MAX_BYTES).map_err(hll_err)?;
        hll::add(&mut dense, &ele, SPARSE_MAX_BYTES).map_err(hll_err)?;
        if n % 1000 == 0 {
            let a = hll::count(&mut sparse).map_err(hll_err)?.0;
            let b = hll::count(&mut dense).map_err(hll_err)?.0;
            hll::invalidate(&mut sparse);
            hll::invalidate(&mut dense);
            if a != b {
                return Err(fail("sparse and dense counts differ"));
            }
            #[expect(clippy::cast_precision_loss, reason = "counts below 2^53")]
            let (est, real) = (a as f64, n as f64);
            let bound = 1.04 / 128.0 * 5.0; // 5 sigma; sqrt(16384) = 128
            if (est - real).abs() / real > bound {
                return Err(fail("cardinality error out of bounds"));
            }
        }
    }
    reply::ok(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn add_count_merge() {
        let mut k = Kit::new();
        k.expect(&["PFADD", "hll"], ":1\r\n");
        k.expect(&["EXISTS", "hll"], ":1\r\n");
        k.expect(&["PFCOUNT", "hll"], ":0\r\n");
        k.expect(&["PFADD", "hll", "a", "b", "c"], ":1\r\n");
        k.expect(&["PFADD", "hll", "a", "b", "c"], ":0\r\n");
        k.expect(&["PFCOUNT", "hll"], ":3\r\n");
        // The count is cached in the header (byte 15's top bit clear).
        k.expect(&["GETRANGE", "hll", "15", "15"], "$1\r\n\0\r\n");
        k.expect(&["PFADD", "hll", "d"], ":1\r\n");
        k.expect(&["GETRANGE", "hll", "15", "15"], "$1\r\n\u{fffd}\r\n");
        k.expect(&["PFADD", "h2", "c", "d", "e"], ":1\r\n");
        k.expect(&["PFCOUNT", "hll", "h2", "missing"], ":5\r\n");
        k.ok(&["PFMERGE", "u", "hll", "h2"]);
        k.expect(&["PFCOUNT", "u"], ":5\r\n");
        k.expect(&["PFDEBUG", "ENCODING", "u"], "+sparse\r\n");
        k.expect(&["PFDEBUG", "TODENSE", "u"], ":1\r\n");
        k.expect(&["PFDEBUG", "ENCODING", "u"], "+dense\r\n");
        k.expect(&["STRLEN", "u"], ":12304\r\n");
        k.expect(&["PFCOUNT", "u"], ":5\r\n");
        k.expect(&["PFSELFTEST"], "+OK\r\n");
    }

    #[test]
    fn errors() {
        let mut k = Kit::new();
        k.ok(&["SET", "s", "bar"]);
        let wt = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
        k.expect(&["PFADD", "s", "1"], wt);
        k.expect(&["PFCOUNT", "s"], wt);
        k.expect(&["PFMERGE", "x", "s"], wt);
        k.expect(&["PFMERGE", "s", "x"], wt);
        k.expect(&["LPUSH", "l", "a"], ":1\r\n");
        k.expect(
            &["PFADD", "l", "1"],
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        );
        k.expect(&["PFADD", "h", "a", "b", "c"], ":1\r\n");
        k.expect(&["STRLEN", "h"], ":27\r\n");
        k.expect(&["APPEND", "h", "hello"], ":32\r\n");
        k.expect(
            &["PFCOUNT", "h"],
            "-INVALIDOBJ Corrupted HLL object detected\r\n",
        );
        k.expect(
            &["PFDEBUG", "ENCODING", "nokey"],
            "-ERR The specified key does not exist\r\n",
        );
    }
}
