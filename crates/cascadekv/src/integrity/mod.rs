//! Integrity of a store at rest: `cascade verify` lists every damaged record without
//! changing anything, `cascade repair` salvages what is intact into a fresh store and
//! reports exactly what was lost, and the scrubber re-reads tables in the background.
//!
//! All three cover the slow tier (issue #14) too: its table files are walked after
//! StableStore (blocks and blobs), a missing or truncated file is a finding of its own
//! ([`Structure::SlowFile`]), and findings in a slow-tier file name it
//! ([`Finding::file`]). A store with slow-tier data is checked and repaired with its
//! slow directory (`Options::slow_dir` given to [`verify_with`] / [`repair_with`]);
//! without it they refuse (`InvalidArgument`) rather than report the whole tier as
//! lost.
//!
//! * `walk` — the one read-only pass over every structure both tools share;
//! * [`verify`](fn@verify) — the walk plus a copy-on-write open and full read;
//! * [`repair`](fn@repair) — the walk feeding a new store, then a directory swap;
//! * `scrub` — the background re-read of tables at a bounded rate.
//!
//! What a flipped bit in each structure leads to is tabulated in docs/formats.md §9.

mod repair;
pub(crate) mod scrub;
mod walk;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::db::{Db, Options};
use crate::error::{Error, Result};

pub use repair::{render as render_repair, repair, repair_with, RepairReport};
use walk::Rank;
pub use walk::WalkStats;

/// Which on-media structure a finding is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Structure {
    /// The pool header or both bitmap copies (nothing else can be read).
    PoolHeader,
    /// The header of an allocated chunk.
    ChunkHeader,
    /// A manifest record, or the table list it describes.
    Manifest,
    /// A record of a live FastStore log.
    LogRecord,
    /// A table's data or index block, or (slow tier) a blob an entry points at.
    TableBlock,
    /// The log record holding a table entry's separated value.
    SeparatedValue,
    /// A check made by opening the store and reading every key.
    Open,
    /// A slow-tier table file the manifest names: missing, or shorter than the tables
    /// it should hold (their keys are lost).
    SlowFile,
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Structure::PoolHeader => "pool header",
            Structure::ChunkHeader => "chunk header",
            Structure::Manifest => "manifest",
            Structure::LogRecord => "log record",
            Structure::TableBlock => "table block",
            Structure::SeparatedValue => "separated value",
            Structure::Open => "open",
            Structure::SlowFile => "slow-tier file",
        })
    }
}

/// One damaged part of a store.
#[derive(Debug)]
#[non_exhaustive]
pub struct Finding {
    /// The structure.
    pub structure: Structure,
    /// Byte offset in the pool file, or in [`Finding::file`].
    pub offset: u64,
    /// The slow-tier file the damage is in (`None`: the pool file).
    pub file: Option<PathBuf>,
    /// The key it held (unverified for a damaged log record), or the first key of the
    /// range a damaged block covered.
    pub key: Option<Vec<u8>>,
    /// For a damaged block: the first key after its range, if known.
    pub until: Option<Vec<u8>>,
    /// What was wrong.
    pub detail: String,
    /// The damaged part may have held versions of keys it cannot name (a log record
    /// whose key could not be recovered, a chunk header beyond correction, a manifest
    /// edit): `repair` then flags every key it kept from an older source.
    pub unknown_keys: bool,
    /// Precedence of what was lost (0 live logs, then buffer-trees, then StableStore,
    /// then the slow tier's runs).
    pub(crate) rank: Rank,
    /// For a key range without `until`: its last key (inclusive), when known — the
    /// largest key of the table (or tables) the damage ran to the end of.
    pub(crate) last: Option<Vec<u8>>,
}

impl Finding {
    fn from_error(structure: Structure, e: &Error, key: Option<Vec<u8>>) -> Finding {
        Finding {
            structure,
            offset: e.offset(),
            file: None,
            key,
            until: None,
            detail: e.to_string(),
            unknown_keys: false,
            rank: 0,
            last: None,
        }
    }

    fn at(mut self, offset: u64) -> Finding {
        self.offset = offset;
        self
    }

    /// True if `key` lies in what this finding lost.
    #[must_use]
    pub fn covers(&self, key: &[u8]) -> bool {
        match (&self.key, self.structure) {
            (Some(from), Structure::TableBlock | Structure::SlowFile) => {
                key >= from.as_slice()
                    && match (&self.until, &self.last) {
                        (Some(u), _) => key < u.as_slice(),
                        (None, Some(l)) => key <= l.as_slice(),
                        (None, None) => true,
                    }
            }
            (Some(k), _) => k.as_slice() == key,
            (None, _) => false,
        }
    }
}

/// Shows a key: printable ASCII as is, anything else escaped (`\xNN`).
#[must_use]
pub fn show_key(k: &[u8]) -> String {
    k.escape_ascii().to_string()
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.structure)?;
        match (&self.file, self.structure) {
            (Some(p), Structure::SlowFile) => write!(f, " {}", p.display())?,
            (Some(p), _) => write!(f, " in {}", p.display())?,
            (None, _) => {}
        }
        write!(f, " at offset {}", self.offset)?;
        match (&self.key, &self.until, self.structure) {
            (Some(k), None, Structure::SlowFile) => write!(
                f,
                ", keys from \"{}\" through \"{}\"",
                show_key(k),
                self.last.as_deref().map_or(String::new(), show_key)
            )?,
            (Some(k), u, Structure::TableBlock) => write!(
                f,
                ", keys from \"{}\" {}",
                show_key(k),
                u.as_ref()
                    .map_or("to the table's end".to_string(), |u| format!(
                        "up to \"{}\"",
                        show_key(u)
                    ))
            )?,
            (Some(k), _, Structure::LogRecord) if self.unknown_keys => {
                write!(f, ", key \"{}\" (as the damaged header reads)", show_key(k))?;
            }
            (Some(k), _, _) => write!(f, ", key \"{}\"", show_key(k))?,
            (None, _, _) => {}
        }
        write!(f, ": {}", self.detail)
    }
}

/// What `cascade verify` found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Every damaged part, in walk order.
    pub findings: Vec<Finding>,
    /// What the walk read.
    pub stats: WalkStats,
    /// Keys the full read through a copy-on-write open returned (0 if it did not run).
    pub keys_read: u64,
}

impl VerifyReport {
    /// True when nothing is damaged.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// [`verify_with`] with the default options: for a store without a slow tier.
///
/// # Errors
/// As [`verify_with`].
pub fn verify(dir: &Path) -> Result<VerifyReport> {
    verify_with(dir, &Options::default())
}

/// Reads every structure of the store in `dir` — and of its slow tier, in
/// `opts.slow_dir` — and reports each damaged part, without changing anything (the
/// pool is mapped copy-on-write, the lock is taken so a running server is refused;
/// slow-tier files are only read). When the walk finds nothing, the store is also
/// opened copy-on-write with `opts` (the slow tier read-only) and every key read, so
/// whatever open or a read would refuse is reported too.
///
/// # Errors
/// `NotAStore`, `Locked`, `Io`: the store could not be read at all;
/// `InvalidArgument`: it has slow-tier data and `opts.slow_dir` is unset, missing or
/// another store's, or `opts` are invalid. Damage is not an error; it is in the
/// report.
pub fn verify_with(dir: &Path, opts: &Options) -> Result<VerifyReport> {
    opts.validate()?;
    let mut r = VerifyReport::default();
    let mut findings = Vec::new();
    r.stats = walk::walk(dir, opts, &mut |_| {}, &mut |f| findings.push(f))?;
    r.findings = findings;
    if !r.findings.is_empty() {
        return Ok(r);
    }
    let open = |e: Error| Finding::from_error(Structure::Open, &e, None);
    let db = match Db::open_private(dir, opts.clone()) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => {
            r.findings.push(open(e));
            return Ok(r);
        }
        Err(e) => return Err(e),
    };
    let it = match db.iter(..) {
        Ok(it) => it,
        Err(e) => {
            r.findings.push(open(e));
            return Ok(r);
        }
    };
    for kv in it {
        match kv {
            Ok(_) => r.keys_read += 1,
            Err(e) => {
                r.findings.push(open(e));
                break;
            }
        }
    }
    Ok(r)
}
