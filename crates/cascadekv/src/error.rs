//! The one error type of the CascadeKV library.
//!
//! Every fallible library call returns [`Result<T>`]. Corruption is always its own
//! variant: the engine never returns bytes it could not verify as data.

use std::fmt;
use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in CascadeKV.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// What the engine was doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Persistent bytes failed validation (bad magic, impossible length, broken
    /// structure). `file` and `offset` say where.
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Byte offset inside `file`.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A checksum did not match the bytes it covers.
    ChecksumMismatch {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Byte offset inside `file`.
        offset: u64,
        /// Checksum stored on media.
        expected: u32,
        /// Checksum computed over the bytes read.
        actual: u32,
    },
    /// A caller passed a bad argument (key too long, value too large, bad option).
    InvalidArgument(String),
    /// The fast-tier pool has no free chunk left.
    PoolFull {
        /// Chunks in the pool.
        chunks: u64,
        /// Chunks that were requested contiguously.
        wanted: u64,
    },
    /// The directory does not hold a CascadeKV store (and creation was not asked for).
    NotAStore(PathBuf),
    /// The store was written by a newer on-media format than this build understands.
    UnsupportedVersion {
        /// Version found on media.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// Another process holds the store's lock file.
    Locked(PathBuf),
    /// The store hit an I/O error earlier and refuses further writes.
    Poisoned(String),
    /// The database has been closed.
    Closed,
    /// An internal invariant did not hold (a bug in CascadeKV; please report it).
    Internal(String),
}

impl Error {
    /// Wraps an `io::Error` with a description of the operation.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Builds an [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// The file offset a corruption error names (0 for other errors).
    pub(crate) fn offset(&self) -> u64 {
        match self {
            Error::Corruption { offset, .. } | Error::ChecksumMismatch { offset, .. } => *offset,
            _ => 0,
        }
    }

    /// True for the two variants that mean "persistent bytes are damaged".
    #[must_use]
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::ChecksumMismatch { .. }
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { context, source } => write!(f, "I/O error while {context}: {source}"),
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {reason}",
                file.display()
            ),
            Error::ChecksumMismatch {
                file,
                offset,
                expected,
                actual,
            } => write!(
                f,
                "checksum mismatch in {} at offset {offset}: stored {expected:#010x}, computed {actual:#010x}",
                file.display()
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::PoolFull { chunks, wanted } => write!(
                f,
                "fast-tier pool is full: no {wanted} free contiguous chunk(s) among {chunks}; \
                 raise Options::pool_size or delete data"
            ),
            Error::NotAStore(p) => write!(f, "{} is not a CascadeKV store", p.display()),
            Error::UnsupportedVersion { found, supported } => write!(
                f,
                "store format version {found} is newer than this build supports ({supported})"
            ),
            Error::Locked(p) => write!(
                f,
                "store is locked by another process (lock file {})",
                p.display()
            ),
            Error::Poisoned(why) => write!(f, "store refuses writes after an earlier failure: {why}"),
            Error::Closed => write!(f, "database is closed"),
            Error::Internal(why) => write!(f, "internal error (a CascadeKV bug): {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
