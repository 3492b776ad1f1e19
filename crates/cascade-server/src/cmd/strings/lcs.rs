//! LCS: the longest common subsequence of two strings, Redis 7.0's command —
//! the subsequence itself, its length (`LEN`), or the matching ranges (`IDX`, with
//! `MINMATCHLEN` and `WITHMATCHLEN`), reported from the end of the strings as Redis
//! does.
//!
//! Cost: two point reads, then O(len(a) × len(b)) time and 4 bytes of memory per
//! cell of the dynamic-programming table (refused above [`MAX_CELLS`]). A data command.

use crate::cmd::{int_arg, is, spec, Keys, Run::Data, Spec, R};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

/// The command.
pub(crate) static SPECS: &[Spec] = &[spec(
    "lcs",
    -3,
    R,
    Keys::Range(1, 2, 1),
    "string",
    "Longest common subsequence of two strings.",
    Data(lcs),
)];

/// The largest table LCS builds (1 GiB of u32 cells).
const MAX_CELLS: usize = 1 << 28;

/// The string at `key` (missing: empty).
fn read(tx: &Tx<'_>, key: &[u8]) -> CmdResult<Vec<u8>> {
    match tx.meta(key)? {
        None => Ok(Vec::new()),
        Some(m) if m.ty == Type::String => Ok(m.payload),
        Some(_) => Err(CmdError::err(
            "The specified keys must contain string values",
        )),
    }
}

/// A match: ranges in a and b (inclusive) and its length.
type Range = ((usize, usize), (usize, usize), usize);

/// The LCS of `a` and `b`, and its matching ranges of at least `min_len` (0: all),
/// last range first.
#[expect(
    clippy::many_single_char_names,
    reason = "a, b, i, j, t, w: the textbook names of the LCS table"
)]
fn compute(a: &[u8], b: &[u8], min_len: usize) -> (Vec<u8>, Vec<Range>) {
    let w = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * w];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let mut idx = usize::try_from(t[a.len() * w + b.len()]).unwrap_or(0);
    let mut seq = vec![0u8; idx];
    let mut ranges = Vec::new();
    // The range being grown backwards: (a_start, a_end, b_start, b_end).
    let mut cur: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            seq[idx - 1] = a[i - 1];
            match &mut cur {
                None => cur = Some((i - 1, i - 1, j - 1, j - 1)),
                Some(r) if r.0 == i && r.2 == j => {
                    r.0 -= 1;
                    r.2 -= 1;
                }
                Some(_) => emit = true,
            }
            if cur.is_some_and(|r| r.0 == 0 || r.2 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = cur.is_some();
        }
        if emit {
            if let Some((a0, a1, b0, b1)) = cur.take() {
                let len = a1 - a0 + 1;
                if min_len == 0 || len >= min_len {
                    ranges.push(((a0, a1), (b0, b1), len));
                }
            }
        }
    }
    (seq, ranges)
}

fn lcs(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (first, second) = (read(tx, c.arg(1))?, read(tx, c.arg(2))?);
    let (mut len, mut idx, mut with_len, mut min_len) = (false, false, false, 0usize);
    let mut i = 3;
    while i < c.len() {
        let arg = c.arg(i);
        if is(arg, "idx") {
            idx = true;
        } else if is(arg, "len") {
            len = true;
        } else if is(arg, "withmatchlen") {
            with_len = true;
        } else if is(arg, "minmatchlen") && i + 1 < c.len() {
            min_len = usize::try_from(int_arg(c.arg(i + 1))?).unwrap_or(0);
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if len && idx {
        return Err(CmdError::err(
            "If you want both the length and indexes, please just use IDX.",
        ));
    }
    if (first.len() + 1).saturating_mul(second.len() + 1) > MAX_CELLS {
        return Err(CmdError::err(
            "Insufficient memory, transient memory for LCS exceeds the server's limit",
        ));
    }
    let (seq, ranges) = compute(&first, &second, min_len);
    let n = i64::try_from(seq.len()).unwrap_or(i64::MAX);
    if idx {
        reply::map_header(out, 2);
        reply::bulk(out, b"matches");
        reply::array_header(out, ranges.len());
        for ((a0, a1), (b0, b1), l) in ranges {
            reply::array_header(out, 2 + usize::from(with_len));
            for (x, y) in [(a0, a1), (b0, b1)] {
                reply::array_header(out, 2);
                reply::int(out, i64::try_from(x).unwrap_or(i64::MAX));
                reply::int(out, i64::try_from(y).unwrap_or(i64::MAX));
            }
            if with_len {
                reply::int(out, i64::try_from(l).unwrap_or(i64::MAX));
            }
        }
        reply::bulk(out, b"len");
        reply::int(out, n);
    } else if len {
        reply::int(out, n);
    } else {
        reply::bulk(out, &seq);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn lcs_forms() {
        let mut k = Kit::new();
        k.ok(&["SET", "a", "ohmytext"]);
        k.ok(&["SET", "b", "mynewtext"]);
        k.expect(&["LCS", "a", "b"], "$6\r\nmytext\r\n");
        k.expect(&["LCS", "a", "b", "LEN"], ":6\r\n");
        k.expect(
            &["LCS", "a", "b", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
            "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n",
        );
        k.expect(&["LCS", "a", "missing"], "$0\r\n\r\n");
        k.expect(
            &["LCS", "a", "b", "LEN", "IDX"],
            "-ERR If you want both the length and indexes, please just use IDX.\r\n",
        );
        k.int(&["LPUSH", "l", "x"]);
        k.expect(
            &["LCS", "a", "l"],
            "-ERR The specified keys must contain string values\r\n",
        );
    }
}
