//! Moving and multi-key popping: `LMOVE RPOPLPUSH LMPOP` and the blocking forms
//! `BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP`. O(elements moved or popped).
//!
//! The blocking forms run the same code; when every list is empty they return
//! [`CmdError::Block`] and the worker parks the client until a write to one of the keys
//! (or the timeout). Inside MULTI they do not block. Data commands: the dispatcher
//! holds the keys' locks; no state of its own.

use super::{mpop_args, pop, push, timeout_arg};
use crate::cmd::is;
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;

fn side(arg: &[u8]) -> CmdResult<bool> {
    if is(arg, "left") {
        Ok(true)
    } else if is(arg, "right") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// Moves one element from `src` to `dst`; `None` when `src` is empty.
fn move_one(
    tx: &mut Tx<'_>,
    src: &[u8],
    dst: &[u8],
    from_left: bool,
    to_left: bool,
) -> CmdResult<Option<Vec<u8>>> {
    if tx.skip_on_retry(src, Type::List)? || tx.typed(src, Type::List)?.is_none() {
        return Ok(None);
    }
    tx.typed(dst, Type::List)?;
    let Some(v) = pop(tx, src, from_left, 1)?.pop() else {
        return Ok(None);
    };
    push(tx, dst, &[&v], to_left, false)?;
    Ok(Some(v))
}

pub(super) fn lmove(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (from, to) = (side(c.arg(3))?, side(c.arg(4))?);
    let v = move_one(tx, c.arg(1), c.arg(2), from, to)?;
    reply::opt_bulk(out, v.as_deref());
    Ok(())
}

pub(super) fn rpoplpush(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let v = move_one(tx, c.arg(1), c.arg(2), false, true)?;
    reply::opt_bulk(out, v.as_deref());
    Ok(())
}

/// A key and the elements popped from it.
type Popped = (Vec<u8>, Vec<Vec<u8>>);

/// Pops from the first non-empty list of `keys`: (key, elements), or `None`.
fn mpop(tx: &mut Tx<'_>, keys: &[&[u8]], left: bool, count: u64) -> CmdResult<Option<Popped>> {
    for k in keys {
        if !tx.skip_on_retry(k, Type::List)? && tx.typed(k, Type::List)?.is_some() {
            let vals = pop(tx, k, left, count)?;
            return Ok(Some((k.to_vec(), vals)));
        }
    }
    Ok(None)
}

fn mpop_reply(out: &mut Out, r: Option<Popped>) {
    match r {
        Some((k, vals)) => {
            reply::array_header(out, 2);
            reply::bulk(out, &k);
            reply::bulk_array(out, vals.iter().map(Vec::as_slice));
        }
        None => reply::nil_array(out),
    }
}

pub(super) fn lmpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (keys, left, count) = mpop_args(c, 1, side)?;
    let r = mpop(tx, &keys, left, count)?;
    mpop_reply(out, r);
    Ok(())
}

fn bpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out, left: bool) -> CmdResult<()> {
    let timeout = timeout_arg(c.arg(c.len() - 1))?;
    let keys: Vec<&[u8]> = (1..c.len() - 1).map(|i| c.arg(i)).collect();
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    match mpop(tx, &keys, left, 1)? {
        Some((k, vals)) => {
            reply::array_header(out, 2);
            reply::bulk(out, &k);
            reply::bulk(out, vals.first().map_or(&[][..], Vec::as_slice));
            Ok(())
        }
        None => tx.block(timeout, out),
    }
}

pub(super) fn blpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    bpop(tx, c, out, true)
}

pub(super) fn brpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    bpop(tx, c, out, false)
}

pub(super) fn blmove(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (from, to) = (side(c.arg(3))?, side(c.arg(4))?);
    let timeout = timeout_arg(c.arg(5))?;
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    match move_one(tx, c.arg(1), c.arg(2), from, to)? {
        Some(v) => {
            reply::bulk(out, &v);
            Ok(())
        }
        None => tx.block(timeout, out),
    }
}

pub(super) fn brpoplpush(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let timeout = timeout_arg(c.arg(3))?;
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    match move_one(tx, c.arg(1), c.arg(2), false, true)? {
        Some(v) => {
            reply::bulk(out, &v);
            Ok(())
        }
        None => tx.block(timeout, out),
    }
}

pub(super) fn blmpop(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let timeout = timeout_arg(c.arg(1))?;
    let (keys, left, count) = mpop_args(c, 2, side)?;
    if tx.must_queue() {
        return tx.block(timeout, out);
    }
    match mpop(tx, &keys, left, count)? {
        Some(r) => {
            mpop_reply(out, Some(r));
            Ok(())
        }
        None => tx.block(timeout, out),
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn moves_and_mpop() {
        let mut k = Kit::new();
        k.int(&["RPUSH", "a", "1", "2", "3"]);
        k.expect(&["LMOVE", "a", "b", "LEFT", "RIGHT"], "$1\r\n1\r\n");
        k.expect(&["RPOPLPUSH", "a", "b"], "$1\r\n3\r\n");
        k.expect(&["LRANGE", "b", "0", "-1"], "*2\r\n$1\r\n3\r\n$1\r\n1\r\n");
        k.expect(&["RPOPLPUSH", "a", "a"], "$1\r\n2\r\n");
        k.expect(
            &["LMPOP", "2", "none", "b", "LEFT", "COUNT", "5"],
            "*2\r\n$1\r\nb\r\n*2\r\n$1\r\n3\r\n$1\r\n1\r\n",
        );
        k.expect(&["LMPOP", "1", "none", "LEFT"], "*-1\r\n");
        k.expect(
            &["LMPOP", "0", "a", "LEFT"],
            "-ERR numkeys should be greater than 0\r\n",
        );
        k.expect(
            &["LMPOP", "1", "a", "LEFT", "COUNT", "0"],
            "-ERR count should be greater than 0\r\n",
        );
        // Not blocking in this harness's context: an available element is served.
        k.expect(&["BLPOP", "none", "a", "0"], "*2\r\n$1\r\na\r\n$1\r\n2\r\n");
        k.expect(&["BLPOP", "a", "-1"], "-ERR timeout is negative\r\n");
        k.expect(
            &["BLPOP", "a", "x"],
            "-ERR timeout is not a float or out of range\r\n",
        );
    }

    /// A blocking command arriving while a client parked earlier on its key was woken
    /// (and has not run yet) queues behind it instead of taking the element: the
    /// redis suite's "BRPOPLPUSH with multiple blocked clients" hung when a second
    /// client's command reached the other worker after the push.
    #[test]
    fn blocking_commands_queue_behind_woken_clients() {
        use std::sync::Arc;
        let mut k = Kit::new();
        let shared = k.shared.clone();
        let notify = shared.store.notify();
        let wake: crate::notify::WakeFn = Arc::new(|| {});
        // The registries know keys qualified by their database.
        let q = shared.store.qualify(0, b"q");
        let seq = notify.wait(99, std::slice::from_ref(&q), &wake, 1);
        notify.retried(seq); // its run right after parking found nothing
        k.int(&["RPUSH", "q", "x"]); // wakes the parked client
        assert!(notify.woken_on(&[q.as_slice()]));
        k.expect(&["BLPOP", "q", "0"], "(blocked 0)");
        k.expect(&["BRPOPLPUSH", "q", "d", "0"], "(blocked 0)");
        k.expect(&["BLMPOP", "0", "1", "q", "LEFT"], "(blocked 0)");
        // Not blocking commands, and other keys, are not held back.
        k.expect(&["LLEN", "q"], ":1\r\n");
        k.int(&["RPUSH", "other", "y"]);
        k.expect(&["BLPOP", "other", "0"], "*2\r\n$5\r\nother\r\n$1\r\ny\r\n");
        // Once the woken client has run, the element is served.
        notify.unwait(seq);
        k.expect(&["BLPOP", "q", "0"], "*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    }
}
