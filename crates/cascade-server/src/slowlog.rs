//! SLOWLOG: the most recent commands that ran longer than `slowlog-log-slower-than`
//! microseconds (Redis's defaults: 10 000 µs, 128 entries, `slowlog-max-len`).
//!
//! The time is the command's execution, as Redis measures it: from dispatch to its
//! reply being built (a blocking command: the run that completed it), not the time it
//! waited for input, for a persist or while parked. An entry keeps at most 32
//! arguments (the last says how many more there were) of at most 128 bytes each (with
//! how many more bytes), the client's address and name. AUTH and HELLO ... AUTH are
//! never logged; the secrets of CONFIG SET masterauth / requirepass and of MIGRATE's
//! AUTH / AUTH2 are replaced by `(redacted)`.
//!
//! One mutex guards the entries and the next id; the two settings are atomics. A
//! command below the threshold costs one atomic load. Any thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use crate::resp::parse::Command;

/// Arguments kept per entry (the last one then says how many more there were).
const MAX_ARGS: usize = 32;
/// Bytes kept per argument.
const MAX_ARG_BYTES: usize = 128;

/// One logged command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Its number: ids only grow, also across SLOWLOG RESET.
    pub(crate) id: u64,
    /// When it ran (Unix seconds).
    pub(crate) at: u64,
    /// How long it ran (µs).
    pub(crate) micros: u64,
    /// The arguments, trimmed.
    pub(crate) args: Vec<Vec<u8>>,
    /// The client's `ip:port`.
    pub(crate) addr: String,
    /// The client's name (CLIENT SETNAME), empty if none.
    pub(crate) name: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    /// Newest first.
    entries: VecDeque<Entry>,
}

/// The log and its settings.
#[derive(Debug)]
pub(crate) struct SlowLog {
    inner: Mutex<Inner>,
    /// `slowlog-log-slower-than` (µs): negative disables the log, 0 logs everything.
    pub(crate) slower_than: AtomicI64,
    /// `slowlog-max-len`.
    pub(crate) max_len: AtomicU64,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            inner: Mutex::new(Inner::default()),
            slower_than: AtomicI64::new(10_000),
            max_len: AtomicU64::new(128),
        }
    }
}

impl SlowLog {
    /// Logs `cmd` if it ran at least the threshold (`addr` and `name`: its client).
    pub(crate) fn note(&self, cmd: &Command, took: Duration, addr: &str, name: Option<&[u8]>) {
        let Ok(limit) = u64::try_from(self.slower_than.load(Ordering::Relaxed)) else {
            return;
        };
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if micros < limit || cmd.is_empty() {
            return;
        }
        let Some(args) = logged_args(cmd) else {
            return;
        };
        let at = crate::keyspace::now_ms() / 1000;
        let max = usize::try_from(self.max_len.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        let mut inner = self.inner.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.entries.push_front(Entry {
            id,
            at,
            micros,
            args,
            addr: addr.to_string(),
            name: name.unwrap_or_default().to_vec(),
        });
        inner.entries.truncate(max);
    }

    /// Entries kept.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// Drops every entry (ids go on).
    pub(crate) fn reset(&self) {
        self.inner.lock().entries.clear();
    }

    /// The newest `count` entries (`None`: all).
    pub(crate) fn newest(&self, count: Option<usize>) -> Vec<Entry> {
        let inner = self.inner.lock();
        let n = count.unwrap_or(usize::MAX).min(inner.entries.len());
        inner.entries.iter().take(n).cloned().collect()
    }

    /// `slowlog-max-len` changed: older entries beyond it go at once.
    pub(crate) fn set_max_len(&self, n: u64) {
        self.max_len.store(n, Ordering::Relaxed);
        let max = usize::try_from(n).unwrap_or(usize::MAX);
        self.inner.lock().entries.truncate(max);
    }
}

/// The arguments an entry keeps: trimmed, secrets redacted; `None` for a command
/// that is never logged.
fn logged_args(cmd: &Command) -> Option<Vec<Vec<u8>>> {
    let word = |i: usize| cmd.arg(i).to_ascii_lowercase();
    let name = word(0);
    if name == b"auth" {
        return None;
    }
    if name == b"hello" && (1..cmd.len()).any(|i| word(i) == b"auth") {
        return None;
    }
    let mut redact = vec![false; cmd.len()];
    if name == b"config"
        && cmd.len() > 3
        && word(1) == b"set"
        && matches!(word(2).as_slice(), b"masterauth" | b"requirepass")
    {
        redact[3] = true;
    }
    if name == b"acl" && cmd.len() > 2 && word(1) == b"setuser" {
        redact[2..].fill(true);
    }
    if name == b"migrate" {
        let mut i = 6;
        while i < cmd.len() {
            match word(i).as_slice() {
                b"auth" => {
                    if let Some(r) = redact.get_mut(i + 1) {
                        *r = true;
                    }
                    i += 2;
                }
                b"auth2" => {
                    for r in redact.iter_mut().skip(i + 1).take(2) {
                        *r = true;
                    }
                    i += 3;
                }
                b"keys" => break,
                _ => i += 1,
            }
        }
    }
    let shown = if cmd.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        cmd.len()
    };
    let mut out: Vec<Vec<u8>> = (0..shown)
        .map(|i| {
            let a = cmd.arg(i);
            if redact[i] {
                b"(redacted)".to_vec()
            } else if a.len() > MAX_ARG_BYTES {
                let mut t = a[..MAX_ARG_BYTES].to_vec();
                t.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
                );
                t
            } else {
                a.to_vec()
            }
        })
        .collect();
    if cmd.len() > MAX_ARGS {
        out.push(format!("... ({} more arguments)", cmd.len() - shown).into_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&[u8]]) -> Command {
        Command::from_args(args)
    }

    #[test]
    fn threshold_length_trimming_and_secrets() {
        let log = SlowLog::default();
        log.note(
            &cmd(&[b"get", b"k"]),
            Duration::from_micros(9_999),
            "a",
            None,
        );
        assert_eq!(log.len(), 0, "below the default 10 ms");
        log.slower_than.store(0, Ordering::Relaxed);
        log.note(
            &cmd(&[b"get", b"k"]),
            Duration::ZERO,
            "1.2.3.4:5",
            Some(b"me"),
        );
        let e = &log.newest(None)[0];
        assert_eq!(
            (e.id, e.args.len(), e.addr.as_str(), &e.name[..]),
            (0, 2, "1.2.3.4:5", &b"me"[..])
        );
        // 33 arguments: 31 kept and a count of the rest; a long argument is cut.
        let many: Vec<Vec<u8>> = (0..33).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(Vec::as_slice).collect();
        log.note(&cmd(&refs), Duration::ZERO, "a", None);
        let args = &log.newest(Some(1))[0].args;
        assert_eq!(args.len(), 32);
        assert_eq!(args[31], b"... (2 more arguments)".to_vec());
        let wide = vec![b'A'; 129];
        log.note(&cmd(&[b"sadd", b"s", &wide]), Duration::ZERO, "a", None);
        let args = &log.newest(Some(1))[0].args;
        let tail = b"... (1 more bytes)";
        assert!(args[2].ends_with(tail) && args[2].len() == 128 + tail.len());
        // Secrets.
        log.note(&cmd(&[b"AUTH", b"pw"]), Duration::ZERO, "a", None);
        log.note(
            &cmd(&[b"hello", b"3", b"AUTH", b"u", b"pw"]),
            Duration::ZERO,
            "a",
            None,
        );
        assert_eq!(log.len(), 3);
        log.note(
            &cmd(&[b"config", b"set", b"requirepass", b"pw"]),
            Duration::ZERO,
            "a",
            None,
        );
        assert_eq!(log.newest(Some(1))[0].args[3], b"(redacted)".to_vec());
        log.note(
            &cmd(&[
                b"migrate", b"h", b"1", b"k", b"0", b"5000", b"AUTH2", b"u", b"p",
            ]),
            Duration::ZERO,
            "a",
            None,
        );
        let args = &log.newest(Some(1))[0].args;
        assert_eq!(
            &args[7..],
            &[b"(redacted)".to_vec(), b"(redacted)".to_vec()]
        );
        // Max length, reset, disabled.
        log.set_max_len(2);
        assert_eq!(log.len(), 2);
        log.reset();
        assert_eq!(log.len(), 0);
        log.slower_than.store(-1, Ordering::Relaxed);
        log.note(&cmd(&[b"get", b"k"]), Duration::from_secs(1), "a", None);
        assert_eq!(log.len(), 0);
        // Ids go on after a reset.
        log.slower_than.store(0, Ordering::Relaxed);
        log.note(&cmd(&[b"get", b"k"]), Duration::ZERO, "a", None);
        assert_eq!(log.newest(None)[0].id, 5);
    }
}
