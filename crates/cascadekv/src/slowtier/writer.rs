//! Writes one run: sorted entries into LSTs of the slow tier's block unit, appended to
//! a new slow-tier file in order, with one sequential stream of `write`s (LightKV
//! §III-E: large sequential writes suit the SSD).
//!
//! A value too large for a block (an entry over 255 units) becomes a *blob*: its bytes
//! are appended first, checksummed (`table/place.rs`), and the entry is a `Separated`
//! pointer to that offset of the same file, which the table resolves when read.
//!
//! Writes are paced by an optional rate limit (LightKV §IV: compaction I/O limited so
//! reads keep their tail latency while writes stream in).
//!
//! Thread-safety: owned by the one job writing the run.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::file::{SlowFile, SlowIo};
use crate::error::Result;
use crate::table::block::{data_entry_len, BLOCK_HEADER};
use crate::table::builder::LstBuilder;
use crate::table::place::encode_blob;
use crate::table::{BuiltLst, Lst, Place};
use crate::value::{ValuePtr, ValueRef};

/// Largest slow-tier LST (an LST also ends when its index block is full).
const MAX_TABLE_BYTES: usize = 16 << 20;

/// A sealed run file: the file, its live tables, and where its filter section lies
/// (offset, bytes).
pub type Sealed = (Arc<SlowFile>, Vec<Arc<Lst>>, (u64, u64));

/// Pacing of slow-tier writes.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Bytes per second; 0 = unlimited.
    pub rate: u64,
}

/// A run being written: its tables, then the filter section (`filters.rs`).
#[derive(Debug)]
pub struct RunWriter {
    file: SlowFile,
    block_size: usize,
    builder: LstBuilder,
    /// Finished tables (bytes already appended) and where they start.
    done: Vec<(BuiltLst, u64)>,
    scratch: Vec<u8>,
    pace: Pace,
    started: Instant,
}

impl RunWriter {
    /// A run in new file `number` of `dir`, tables with block unit `block_size`.
    ///
    /// # Errors
    /// `Io` if the file cannot be created.
    pub fn new(
        dir: &Path,
        number: u64,
        block_size: usize,
        ids: Arc<AtomicU64>,
        pace: Pace,
        io: Arc<SlowIo>,
    ) -> Result<Self> {
        let mut builder = LstBuilder::new(block_size, MAX_TABLE_BYTES, ids);
        builder.set_filters(true);
        Ok(RunWriter {
            file: SlowFile::create(dir, number, io)?,
            block_size,
            builder,
            done: Vec::new(),
            scratch: Vec::new(),
            pace,
            started: Instant::now(),
        })
    }

    /// Adds an entry (keys strictly increasing). `Separated` values are not accepted:
    /// the caller resolves pool pointers first.
    ///
    /// # Errors
    /// `Io` from the file; `Internal` for a separated value.
    pub fn add(&mut self, key: &[u8], v: ValueRef<'_>) -> Result<()> {
        let v = match v {
            ValueRef::Separated(_) => {
                return Err(crate::error::Error::Internal(
                    "a pool value pointer reached the slow tier".into(),
                ))
            }
            ValueRef::Inline(b)
                if BLOCK_HEADER + 2 + data_entry_len(key, &v) > 255 * self.block_size =>
            {
                encode_blob(self.file.number(), b, &mut self.scratch);
                let addr = self.file.append(&self.scratch)?;
                self.paced(self.scratch.len() as u64);
                let len = u32::try_from(b.len()).map_err(|_| {
                    crate::error::Error::invalid("a value too large for the slow tier")
                })?;
                ValueRef::Separated(ValuePtr { addr, len })
            }
            v => v,
        };
        if let Some(b) = self.builder.add(key, &v) {
            self.append(b)?;
        }
        Ok(())
    }

    fn append(&mut self, mut b: BuiltLst) -> Result<()> {
        let at = self.file.append(&b.bytes)?;
        self.paced(b.bytes.len() as u64);
        b.bytes = Vec::new();
        self.done.push((b, at));
        Ok(())
    }

    /// Sleeps as long as the writes so far ran ahead of the rate limit.
    fn paced(&self, _just_written: u64) {
        if self.pace.rate == 0 {
            return;
        }
        let due_us = u128::from(self.file.size()) * 1_000_000 / u128::from(self.pace.rate);
        let due = Duration::from_micros(u64::try_from(due_us).unwrap_or(u64::MAX));
        if let Some(ahead) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(ahead.min(Duration::from_millis(200)));
        }
    }

    /// Finishes the last table, makes the file durable under its final name and
    /// returns its tables, live (the caller publishes or drops them; dropping them
    /// unpublished removes the file). `None` for a run that got no entry (its
    /// temporary file is removed).
    ///
    /// # Errors
    /// `Io` from the file.
    pub fn finish(mut self) -> Result<Option<Sealed>> {
        if let Some(b) = self.builder.finish() {
            self.append(b)?;
        }
        if self.done.is_empty() {
            return Ok(None);
        }
        let section = super::filters::encode(
            self.file.number(),
            self.done.iter().map(|(b, _)| b.filter.as_ref()),
        );
        let at = self.file.append(&section)?;
        self.file.seal()?;
        let file = Arc::new(self.file);
        let lsts = self
            .done
            .into_iter()
            .map(|(b, at)| {
                // The table's size was recorded before its bytes were released.
                Lst::placed(b, at, Place::File(file.clone()), Vec::new())
            })
            .collect();
        Ok(Some((file, lsts, (at, section.len() as u64))))
    }
}
