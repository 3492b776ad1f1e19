//! Values as every stage sees them — the types the stages share and none of them owns
//! (the role of LevelDB's `db/dbformat.h`).
//!
//! * [`ValuePtr`] — where a key-value-separated value lives: the pool address of the
//!   log record that holds it and the value's length (FluidKV §4.2 "KV separation").
//!   Only the value log ([`crate::vlog`]) turns one into bytes.
//! * [`ValueRef`] — a value borrowed from wherever it is stored: a table block, a
//!   FastStore version, a merge cursor's buffer. Compaction and flush pass these along
//!   without allocating.
//! * [`Value`] — an owned value, what a read carries out of a stage before the value
//!   log resolves separated values.
//!
//! A tombstone is a value too: the newest stage that knows a key answers, and a
//! tombstone answers "deleted".

/// Pool address and length of a key-value-separated value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValuePtr {
    /// Pool offset of the log record holding the value.
    pub addr: u64,
    /// Value length in bytes.
    pub len: u32,
}

/// A value borrowed from its storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// The key was deleted.
    Tombstone,
    /// The value bytes, stored in place.
    Inline(&'a [u8]),
    /// Key-value separated: the value is in the log record `ptr` points at.
    Separated(ValuePtr),
}

impl ValueRef<'_> {
    /// An owned copy.
    #[must_use]
    pub fn to_owned_value(self) -> Value {
        match self {
            ValueRef::Tombstone => Value::Tombstone,
            ValueRef::Inline(b) => Value::Inline(b.to_vec()),
            ValueRef::Separated(p) => Value::Separated(p),
        }
    }

    /// The separated value's pointer, if this is one.
    #[must_use]
    pub fn ptr(self) -> Option<ValuePtr> {
        match self {
            ValueRef::Separated(p) => Some(p),
            _ => None,
        }
    }
}

/// An owned value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// The key was deleted.
    Tombstone,
    /// The value bytes.
    Inline(Vec<u8>),
    /// Key-value separated.
    Separated(ValuePtr),
}

impl Value {
    /// Borrows the value.
    #[must_use]
    pub fn as_value_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Tombstone => ValueRef::Tombstone,
            Value::Inline(b) => ValueRef::Inline(b),
            Value::Separated(p) => ValueRef::Separated(*p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_and_borrowed_forms_round_trip() {
        let p = ValuePtr { addr: 4096, len: 9 };
        for v in [
            ValueRef::Tombstone,
            ValueRef::Inline(b"abc"),
            ValueRef::Separated(p),
        ] {
            assert_eq!(v.to_owned_value().as_value_ref(), v);
        }
        assert_eq!(ValueRef::Separated(p).ptr(), Some(p));
        assert_eq!(ValueRef::Inline(b"x").ptr(), None);
    }
}
