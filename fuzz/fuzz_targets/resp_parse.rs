//! RESP request parser (`cascade_server::resp::parse::Parser`).
//!
//! Input: the bytes a client sends on one connection.
//! Asserts: parsing never panics; every completion consumes at least one byte and no more
//! than it was given, and its arguments are no larger than the bytes consumed; the sequence
//! of outcomes (commands, the first error, or a trailing incomplete command) is the same
//! whether the input arrives all at once, one byte per read, or in chunks whose sizes are
//! derived from the data; `pending_hint` is never `Some(0)` while a command is incomplete.
//! Each mode runs with the default limits and with small limits (so limit errors are hit).
//! Inputs are fed as growing slices of `data` (no copying), so an O(n²) parser would time
//! out on the byte-by-byte run.
#![no_main]

use cascade_server::resp::parse::{Limits, Parser, ProtocolError};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Cmd(Vec<Vec<u8>>),
    Err(ProtocolError),
    Incomplete(usize),
}

/// Feeds `data` to a fresh parser, the visible input growing by `next_chunk()` bytes at a
/// time; consumed bytes are dropped from the front.
fn feed(data: &[u8], limits: Limits, mut next_chunk: impl FnMut() -> usize) -> Vec<Outcome> {
    let mut p = Parser::new(limits);
    let mut out = Vec::new();
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        match p.parse(&data[start..end]) {
            Ok(Some(n)) => {
                assert!(n > 0, "a command consumed no bytes");
                assert!(n <= end - start, "consumed {n} of {} bytes", end - start);
                let cmd = p.command();
                assert_eq!(cmd.len(), cmd.args().count());
                assert_eq!(cmd.is_empty(), cmd.len() == 0);
                let arg_bytes: usize = cmd.args().map(<[u8]>::len).sum();
                assert!(arg_bytes <= n, "{arg_bytes} argument bytes from {n} consumed");
                out.push(Outcome::Cmd(cmd.to_vecs()));
                start += n;
            }
            Ok(None) => {
                assert_ne!(p.pending_hint(), Some(0), "incomplete but nothing pending");
                if end == data.len() {
                    if start < end {
                        out.push(Outcome::Incomplete(end - start));
                    }
                    return out;
                }
                end = end.saturating_add(next_chunk().max(1)).min(data.len());
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                out.push(Outcome::Err(e));
                return out;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let small = Limits {
        max_bulk: 4096,
        max_args: 64,
    };
    for limits in [Limits::default(), small] {
        let whole = feed(data, limits, || usize::MAX);
        let bytewise = feed(data, limits, || 1);
        assert_eq!(whole, bytewise, "one-shot vs byte-by-byte ({limits:?})");
        let mut i = 0usize;
        let chunked = feed(data, limits, || {
            let b = data.get(i % data.len().max(1)).copied().unwrap_or(0);
            i = i.wrapping_add(7);
            usize::from(b % 32) + 1
        });
        assert_eq!(whole, chunked, "one-shot vs chunked ({limits:?})");
    }
});
