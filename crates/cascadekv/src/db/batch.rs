//! [`WriteBatch`]: several puts and deletes applied atomically.
//!
//! A batch is written to one thread-exclusive log as a `BatchHeader` record followed
//! by its entries; recovery applies it only if every entry is present, so after a crash
//! a batch is either wholly there or wholly absent.

/// One operation in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Set a key.
    Put(Vec<u8>, Vec<u8>),
    /// Delete a key.
    Delete(Vec<u8>),
}

/// An ordered list of operations applied atomically by [`super::Db::write`].
/// Later operations on the same key win.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// An empty batch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Put(key.into(), value.into()));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(BatchOp::Delete(key.into()));
        self
    }

    /// Number of operations.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The operations in order.
    #[must_use]
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Removes all operations.
    pub fn clear(&mut self) {
        self.ops.clear();
    }
}
