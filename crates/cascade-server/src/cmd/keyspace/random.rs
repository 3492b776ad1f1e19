//! ZRANDMEMBER and HRANDFIELD: random members of a sorted set or fields of a hash,
//! with their scores / values on request, Redis's count rules (positive: distinct,
//! negative: repeats allowed) and reply shapes (RESP3 nests each pair).
//!
//! Both sample the element index (`0x03` member → score, `0x02` field → value) as
//! SRANDMEMBER samples a set (`sets.rs`): uniformly for collections up to
//! [`SAMPLE_ALL`] elements, by random seeks above that; a negative count draws with
//! repetition from such a sample. Data commands on one key.

use crate::cmd::sets::{sample_entries, SAMPLE_ALL};
use crate::cmd::zsets::score_of;
use crate::cmd::{int_arg, is};
use crate::error::{CmdError, CmdResult};
use crate::hash::random_below;
use crate::keyspace::{Type, NS_HASH, NS_ZMEMBER};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The most elements a negative count may ask for (the reply is built in memory).
const MAX_REPEATS: usize = 16 << 20;

/// An element and its stored value.
type Entry = (Vec<u8>, Vec<u8>);

/// `n` elements of the collection `key` (`card` elements in namespace `ns`),
/// distinct unless `repeat`.
fn pick(
    tx: &Tx<'_>,
    ns: u8,
    key: &[u8],
    card: u64,
    n: usize,
    repeat: bool,
) -> CmdResult<Vec<Entry>> {
    if !repeat {
        return sample_entries(tx, ns, key, card, n);
    }
    let pool_size = usize::try_from(card.min(SAMPLE_ALL)).unwrap_or(usize::MAX);
    let pool = sample_entries(tx, ns, key, card, pool_size)?;
    if pool.is_empty() {
        return Ok(Vec::new());
    }
    Ok((0..n)
        .map(|_| pool[random_below(pool.len())].clone())
        .collect())
}

/// Writes one stored value: a zset score as a double, a hash value as a bulk string.
fn value(out: &mut Out, ty: Type, v: &[u8]) -> CmdResult<()> {
    if ty == Type::ZSet {
        reply::double(out, score_of(v)?);
    } else {
        reply::bulk(out, v);
    }
    Ok(())
}

/// `ZRANDMEMBER key [count [WITHSCORES]]` (`ty` = `ZSet`) or `HRANDFIELD key [count
/// [WITHVALUES]]` (`ty` = `Hash`).
pub(crate) fn random_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out, ty: Type) -> CmdResult<()> {
    let (ns, kw) = if ty == Type::ZSet {
        (NS_ZMEMBER, "withscores")
    } else {
        (NS_HASH, "withvalues")
    };
    let key = c.arg(1);
    let with = match c.len() {
        2 | 3 => false,
        4 if is(c.arg(3), kw) => true,
        _ => return Err(CmdError::Syntax),
    };
    let count = if c.len() > 2 {
        let n = int_arg(c.arg(2))?;
        if n == i64::MIN {
            return Err(CmdError::err(
                "value is out of range, value must between -9223372036854775807 and \
                 9223372036854775807",
            ));
        }
        if with && n < -(i64::MAX / 2) {
            return Err(CmdError::err("value is out of range"));
        }
        Some(n)
    } else {
        None
    };
    let card = tx.typed(key, ty)?.map_or(0, |m| m.count());
    let Some(count) = count else {
        let one = if card == 0 {
            Vec::new()
        } else {
            pick(tx, ns, key, card, 1, false)?
        };
        reply::opt_bulk(out, one.first().map(|(m, _)| m.as_slice()));
        return Ok(());
    };
    let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    if count < 0 && n > MAX_REPEATS {
        return Err(CmdError::err("value is out of range"));
    }
    let items = if card == 0 || n == 0 {
        Vec::new()
    } else {
        pick(tx, ns, key, card, n, count < 0)?
    };
    let nested = with && out.resp3;
    let per = if with && !nested { 2 } else { 1 };
    let mut buf = Out {
        buf: Vec::new(),
        resp3: out.resp3,
    };
    reply::array_header(&mut buf, items.len() * per);
    for (m, v) in &items {
        if nested {
            reply::array_header(&mut buf, 2);
        }
        reply::bulk(&mut buf, m);
        if with {
            value(&mut buf, ty, v)?;
        }
    }
    out.buf.extend_from_slice(&buf.buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::{Kit, Value};

    #[test]
    fn hrandfield() {
        let mut k = Kit::new();
        k.int(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.extend(k.strings(&["HRANDFIELD", "h"]));
        }
        assert_eq!(seen.len(), 3);
        let mut all = k.strings(&["HRANDFIELD", "h", "5", "WITHVALUES"]);
        all.sort();
        assert_eq!(all, ["1", "2", "3", "a", "b", "c"]);
        assert_eq!(k.strings(&["HRANDFIELD", "h", "-5"]).len(), 5);
        k.expect(&["HRANDFIELD", "h", "0"], "*0\r\n");
        k.expect(&["HRANDFIELD", "none", "3"], "*0\r\n");
        k.expect(&["HRANDFIELD", "none"], "$-1\r\n");
        k.expect(
            &["HRANDFIELD", "h", "-9223372036854770000", "WITHVALUES"],
            "-ERR value is out of range\r\n",
        );
        k.expect(
            &["HRANDFIELD", "h", "1", "WITHSCORES"],
            "-ERR syntax error\r\n",
        );
        k.value(&["HELLO", "3"]);
        let v = k.value(&["HRANDFIELD", "h", "-1", "WITHVALUES"]);
        assert!(
            matches!(&v, Value::Arr(items) if matches!(&items[..], [Value::Arr(p)] if p.len() == 2)),
            "{v:?}"
        );
    }

    #[test]
    fn zrandmember() {
        let mut k = Kit::new();
        k.int(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.extend(k.strings(&["ZRANDMEMBER", "z", "1"]));
        }
        assert_eq!(seen.len(), 3);
        let all = k.strings(&["ZRANDMEMBER", "z", "10", "WITHSCORES"]);
        assert_eq!(all.len(), 6);
        assert_eq!(k.strings(&["ZRANDMEMBER", "z", "-7"]).len(), 7);
        k.expect(&["ZRANDMEMBER", "z", "0"], "*0\r\n");
        k.expect(&["ZRANDMEMBER", "nokey"], "$-1\r\n");
        k.expect(
            &["ZRANDMEMBER", "z", "-9223372036854775808"],
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
        );
        k.expect(&["ZRANDMEMBER", "z", "1", "x"], "-ERR syntax error\r\n");
    }
}
