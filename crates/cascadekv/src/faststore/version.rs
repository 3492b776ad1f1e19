//! What the FastStore index holds per key: the newest version and, while a snapshot
//! needs them, older ones.
//!
//! A value is either kept in DRAM (`Inline`, small values — FluidKV keeps 8+8 B KVs in
//! the index, §4.2) or referenced by the address of its log record (`Addr`, key-value
//! separation for values above `Options::inline_threshold`), or is a tombstone. `Val` is
//! the FastStore's DRAM representation; the other stages see [`crate::value`] types.

use crate::value::{Value, ValuePtr, ValueRef};

/// A value as the index stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// The key was deleted.
    Tomb,
    /// Up to 16 bytes stored in place.
    Tiny {
        /// Used length.
        len: u8,
        /// Bytes (only `len` are meaningful).
        bytes: [u8; 16],
    },
    /// A longer inline value.
    Heap(Box<[u8]>),
    /// Key-value separated: the value lives in the log record `ptr` points at.
    Addr(ValuePtr),
}

impl Val {
    /// Builds an inline value.
    #[must_use]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a Tiny value is at most 16 bytes long"
    )]
    pub fn inline(v: &[u8]) -> Val {
        if v.len() <= 16 {
            let mut bytes = [0u8; 16];
            bytes[..v.len()].copy_from_slice(v);
            Val::Tiny {
                len: v.len() as u8,
                bytes,
            }
        } else {
            Val::Heap(v.into())
        }
    }

    /// The inline bytes, if this is an inline value.
    #[must_use]
    pub fn inline_bytes(&self) -> Option<&[u8]> {
        match self {
            Val::Tiny { len, bytes } => bytes.get(..*len as usize),
            Val::Heap(b) => Some(b),
            _ => None,
        }
    }

    /// Borrows the value in the stage-neutral form.
    #[must_use]
    pub fn as_value_ref(&self) -> ValueRef<'_> {
        match self {
            Val::Tomb => ValueRef::Tombstone,
            Val::Addr(p) => ValueRef::Separated(*p),
            Val::Tiny { len, bytes } => ValueRef::Inline(bytes.get(..*len as usize).unwrap_or(&[])),
            Val::Heap(b) => ValueRef::Inline(b),
        }
    }

    /// Converts into the stage-neutral owned form (a heap value moves, no copy).
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Val::Heap(b) => Value::Inline(b.into_vec()),
            other => other.as_value_ref().to_owned_value(),
        }
    }

    /// The FastStore form of a value another stage handed over.
    #[must_use]
    pub fn from_value_ref(v: ValueRef<'_>) -> Val {
        match v {
            ValueRef::Tombstone => Val::Tomb,
            ValueRef::Inline(b) => Val::inline(b),
            ValueRef::Separated(p) => Val::Addr(p),
        }
    }

    /// DRAM bytes beyond the enum itself.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        match self {
            Val::Heap(b) => b.len(),
            _ => 0,
        }
    }
}

/// One version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// Log sequence number (newer wins, FluidKV Algorithm 1).
    pub lsn: u64,
    /// Snapshot epoch of the write.
    pub epoch: u64,
    /// The value.
    pub val: Val,
}

impl Version {
    /// True for a tombstone.
    #[must_use]
    pub fn is_tomb(&self) -> bool {
        matches!(self.val, Val::Tomb)
    }
}

/// A version with an inline value (tests).
#[cfg(test)]
pub(crate) fn ver(lsn: u64, epoch: u64, v: &[u8]) -> Version {
    Version {
        lsn,
        epoch,
        val: Val::inline(v),
    }
}
