//! Selecting a range of a sorted set: by rank, by score or by name (lex), forwards
//! or backwards, with LIMIT's offset and count. Used by the ZRANGE family, the counts
//! and the removals (`zrange.rs`).
//!
//! Every range is one range scan of the key's score index (`0x04 len key
//! sortable(score) member`), forwards or backwards:
//! - by score: from `sortable(min)` to the end of `sortable(max)`, O(offset + returned);
//! - by lex (Redis requires one score for all members): when the first and the last
//!   member have the same score, a seek to `sortable(score) min`, O(offset +
//!   returned); otherwise a filtered scan of the whole index (Redis leaves that case
//!   unspecified);
//! - by rank: from whichever end is nearer, O(min(start, N - stop) + returned), the
//!   count coming from the metadata.

use std::ops::Bound;

use super::{split_index, Scored};
use crate::cmd::float_arg;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{prefix_end, sortable_score, sub_prefix, Type, NS_ZSCORE};
use crate::store::Tx;

/// One end of a score range: `(1.5` is exclusive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreEnd {
    /// The score.
    v: f64,
    /// `(`: the score itself is out.
    excl: bool,
}

/// One end of a lex range: `-`, `+`, `[name` or `(name`.
#[derive(Clone, Debug)]
pub(crate) enum LexEnd {
    /// `-`: below every name.
    Min,
    /// `+`: above every name.
    Max,
    /// `[name`.
    Incl(Vec<u8>),
    /// `(name`.
    Excl(Vec<u8>),
}

/// What a range selects.
#[derive(Clone, Debug)]
pub(crate) enum By {
    /// Ranks start..=stop (negative: from the end).
    Rank(i64, i64),
    /// Scores min..=max.
    Score(ScoreEnd, ScoreEnd),
    /// Names min..=max.
    Lex(LexEnd, LexEnd),
}

/// A parsed range: what, in which direction, and LIMIT (offset; `None` = no limit).
#[derive(Clone, Debug)]
pub(crate) struct Query {
    pub(crate) by: By,
    pub(crate) rev: bool,
    pub(crate) offset: i64,
    pub(crate) limit: Option<usize>,
}

pub(crate) fn score_end(arg: &[u8]) -> CmdResult<ScoreEnd> {
    let bad = || CmdError::err("min or max is not a float");
    match arg.strip_prefix(b"(") {
        Some(rest) => Ok(ScoreEnd {
            v: float_arg(rest).map_err(|_| bad())?,
            excl: true,
        }),
        None => Ok(ScoreEnd {
            v: float_arg(arg).map_err(|_| bad())?,
            excl: false,
        }),
    }
}

pub(crate) fn lex_end(arg: &[u8]) -> CmdResult<LexEnd> {
    match arg.split_first() {
        Some((b'-', [])) => Ok(LexEnd::Min),
        Some((b'+', [])) => Ok(LexEnd::Max),
        Some((b'[', rest)) => Ok(LexEnd::Incl(rest.to_vec())),
        Some((b'(', rest)) => Ok(LexEnd::Excl(rest.to_vec())),
        _ => Err(CmdError::err("min or max not valid string range item")),
    }
}

/// True when `m` is at or above `min`.
fn above(min: &LexEnd, m: &[u8]) -> bool {
    match min {
        LexEnd::Min => true,
        LexEnd::Max => false,
        LexEnd::Incl(x) => m >= x.as_slice(),
        LexEnd::Excl(x) => m > x.as_slice(),
    }
}

/// True when `m` is at or below `max`.
fn below(max: &LexEnd, m: &[u8]) -> bool {
    match max {
        LexEnd::Min => false,
        LexEnd::Max => true,
        LexEnd::Incl(x) => m <= x.as_slice(),
        LexEnd::Excl(x) => m < x.as_slice(),
    }
}

/// True when no name can be in `[min, max]`.
fn lex_empty(min: &LexEnd, max: &LexEnd) -> bool {
    match (min, max) {
        (LexEnd::Max, _) | (_, LexEnd::Min) => true,
        (LexEnd::Incl(a), LexEnd::Incl(b)) => a > b,
        (LexEnd::Incl(a) | LexEnd::Excl(a), LexEnd::Incl(b) | LexEnd::Excl(b)) => a >= b,
        _ => false,
    }
}

/// One engine entry as a [`Tx`] range yields it.
type Entry = CmdResult<(Vec<u8>, Vec<u8>)>;

/// Walks the score index of a zset between `lo` and `hi` (backwards when `back`),
/// skipping the first `skip` entries `keep` accepts and stopping after `take`; calls
/// `emit` on each selected entry.
#[expect(
    clippy::too_many_arguments,
    reason = "one walk serves every range form"
)]
fn walk(
    tx: &Tx<'_>,
    prefix_len: usize,
    (lo, hi): (Bound<Vec<u8>>, Bound<Vec<u8>>),
    back: bool,
    mut skip: usize,
    take: Option<usize>,
    keep: impl Fn(f64, &[u8]) -> bool,
    mut emit: impl FnMut(Vec<u8>, f64),
) -> CmdResult<()> {
    if take == Some(0) {
        return Ok(());
    }
    let it: Box<dyn Iterator<Item = Entry> + '_> = if back {
        Box::new(tx.range_rev(lo, hi)?)
    } else {
        Box::new(tx.range(lo, hi)?)
    };
    let mut taken = 0usize;
    for kv in it {
        let (k, _) = kv?;
        let Some((m, s)) = split_index(prefix_len, &k) else {
            continue;
        };
        if !keep(s, &m) {
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        emit(m, s);
        taken += 1;
        if take.is_some_and(|t| taken >= t) {
            break;
        }
    }
    Ok(())
}

/// The first (or, `back`, the last) score of the zset whose index starts `prefix`.
fn end_score(tx: &Tx<'_>, prefix: &[u8], back: bool) -> CmdResult<Option<f64>> {
    let hi = prefix_end(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    let lo = Bound::Included(prefix.to_vec());
    let first = if back {
        tx.range_rev(lo, hi)?.next()
    } else {
        tx.range(lo, hi)?.next()
    };
    match first.transpose()? {
        Some((k, _)) => Ok(split_index(prefix.len(), &k).map(|(_, s)| s)),
        None => Ok(None),
    }
}

/// Ranks `start..=stop` (negative: from the end) of a zset of `n` members whose
/// score index starts `prefix`, read from the nearer end; in reply order.
fn by_rank(
    tx: &Tx<'_>,
    prefix: &[u8],
    n: i64,
    (start, stop): (i64, i64),
    rev: bool,
) -> CmdResult<Vec<Scored>> {
    let a = if start < 0 { start + n } else { start }.max(0);
    let b = if stop < 0 { stop + n } else { stop }.min(n - 1);
    if a > b || a >= n {
        return Ok(Vec::new());
    }
    // Ascending positions lo..=hi.
    let (lo, hi) = if rev { (n - 1 - b, n - 1 - a) } else { (a, b) };
    let len = usize::try_from(hi - lo + 1).unwrap_or(0);
    let from_back = n - 1 - hi < lo;
    let skip = usize::try_from(if from_back { n - 1 - hi } else { lo }).unwrap_or(0);
    let end = prefix_end(prefix);
    let mut items: Vec<Scored> = Vec::with_capacity(len);
    if from_back {
        let whole = (
            Bound::Included(prefix.to_vec()),
            end.map_or(Bound::Unbounded, Bound::Excluded),
        );
        walk(
            tx,
            prefix.len(),
            whole,
            true,
            skip,
            Some(len),
            |_, _| true,
            |m, s| items.push((m, s)),
        )?;
    } else {
        // From the low end: one short scan of exactly the entries needed.
        let got = tx.scan_first(prefix, end.as_deref(), skip + len)?;
        items.extend(
            got.iter()
                .skip(skip)
                .filter_map(|(k, _)| split_index(prefix.len(), k)),
        );
    }
    if from_back != rev {
        items.reverse();
    }
    Ok(items)
}

/// The members `q` selects from the zset `key`, in reply order; calls `emit`.
pub(crate) fn select(
    tx: &Tx<'_>,
    key: &[u8],
    q: &Query,
    mut emit: impl FnMut(Vec<u8>, f64),
) -> CmdResult<()> {
    let Some(meta) = tx.typed(key, Type::ZSet)? else {
        return Ok(());
    };
    let prefix = sub_prefix(NS_ZSCORE, key);
    let whole = (
        Bound::Included(prefix.clone()),
        prefix_end(&prefix).map_or(Bound::Unbounded, Bound::Excluded),
    );
    let (skip, take) = match usize::try_from(q.offset) {
        Ok(o) => (o, q.limit),
        Err(_) => return Ok(()), // a negative offset selects nothing, as in Redis
    };
    match &q.by {
        By::Rank(start, stop) => {
            let count = i64::try_from(meta.count()).unwrap_or(i64::MAX);
            for (m, s) in by_rank(tx, &prefix, count, (*start, *stop), q.rev)? {
                emit(m, s);
            }
            Ok(())
        }
        By::Score(min, max) => {
            if min.v > max.v || (min.v >= max.v && (min.excl || max.excl)) {
                return Ok(());
            }
            let mut lo = prefix.clone();
            lo.extend_from_slice(&sortable_score(min.v));
            let mut hi = prefix.clone();
            hi.extend_from_slice(&sortable_score(max.v));
            let hi = prefix_end(&hi).map_or(Bound::Unbounded, Bound::Excluded);
            let (min, max) = (*min, *max);
            walk(
                tx,
                prefix.len(),
                (Bound::Included(lo), hi),
                q.rev,
                skip,
                take,
                |s, _| !((min.excl && s <= min.v) || (max.excl && s >= max.v)),
                emit,
            )
        }
        By::Lex(min, max) => {
            if lex_empty(min, max) {
                return Ok(());
            }
            let mut bounds = whole;
            let first = end_score(tx, &prefix, false)?;
            if first.is_some() && first == end_score(tx, &prefix, true)? {
                // One score for all members: seek straight to the names.
                let mut at = prefix.clone();
                at.extend_from_slice(&sortable_score(first.unwrap_or(0.0)));
                if let LexEnd::Incl(x) | LexEnd::Excl(x) = min {
                    let mut lo = at.clone();
                    lo.extend_from_slice(x);
                    bounds.0 = Bound::Included(lo);
                }
                if let LexEnd::Incl(x) | LexEnd::Excl(x) = max {
                    let mut hi = at;
                    hi.extend_from_slice(x);
                    bounds.1 = Bound::Included(hi);
                }
            }
            walk(
                tx,
                prefix.len(),
                bounds,
                q.rev,
                skip,
                take,
                |_, m| above(min, m) && below(max, m),
                emit,
            )
        }
    }
}
