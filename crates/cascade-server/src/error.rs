//! Command errors and the exact reply each one produces.
//!
//! Redis clients match on error prefixes (`ERR`, `WRONGTYPE`, `NOAUTH`, `OOM`, ...) and
//! some on whole messages, so the texts below copy Redis 7.0's wording where Redis has
//! the same condition.

use std::fmt;

/// Why a command failed; [`fmt::Display`] is the reply text without the leading `-`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) enum CmdError {
    /// The key holds another type.
    WrongType,
    /// An argument or stored value is not a 64-bit integer.
    NotInteger,
    /// An argument is not a float.
    NotFloat,
    /// Unexpected or conflicting options.
    Syntax,
    /// INCR/DECR would leave the i64 range.
    Overflow,
    /// Any other message, starting with its code (`ERR ...`).
    Msg(String),
    /// The engine failed; the message is the reply text.
    Engine(String),
    /// A blocking command found nothing: park the client for this many seconds
    /// (0 = forever) and run the command again when one of its keys changes.
    Block(f64),
    /// Like [`CmdError::Block`], but the client is parked with these arguments
    /// instead of the command it sent (XREAD's `$` becomes the id it meant).
    BlockAs(f64, Vec<Vec<u8>>),
}

impl CmdError {
    /// `ERR <msg>`.
    pub(crate) fn err(msg: impl fmt::Display) -> CmdError {
        CmdError::Msg(format!("ERR {msg}"))
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CmdError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            CmdError::NotFloat => f.write_str("ERR value is not a valid float"),
            CmdError::Syntax => f.write_str("ERR syntax error"),
            CmdError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            CmdError::Msg(m) | CmdError::Engine(m) => f.write_str(m),
            CmdError::Block(_) | CmdError::BlockAs(..) => f.write_str("ERR blocked"),
        }
    }
}

impl From<cascadekv::Error> for CmdError {
    fn from(e: cascadekv::Error) -> Self {
        use cascadekv::Error as E;
        CmdError::Engine(match &e {
            E::InvalidArgument(m) => format!("ERR {m}"),
            E::PoolFull { .. } => format!("OOM command not allowed: {e}"),
            E::Closed => "ERR the store is shutting down".into(),
            _ => format!("ERR storage error: {e}"),
        })
    }
}

/// Result of a command step.
pub(crate) type CmdResult<T> = Result<T, CmdError>;
