//! A simulated persistent-memory device for crash tests.
//!
//! The device keeps two images: `live` (what the CPU sees) and `durable` (what would
//! survive power loss). Every 64 B line is *clean* (live == durable), or *dirty*
//! (written since its last fence; its content as of the last write is captured then).
//! A fence copies the lines a thread wrote back into `durable`. [`SimDevice::crash_image`] builds what a machine could hold
//! after power loss at this instant: durable content, plus for each dirty line a choice
//! made by [`CrashMode`] — dropped, kept, or torn at 8-byte granularity.
//!
//! A fence hook lets a test look at crash images taken just *before* each fence takes
//! effect, i.e. with every not-yet-fenced line still at risk.
//!
//! The device also simulates the store's sync journal file (`pmem/journal/`, used when
//! `Options::sync_journal` turns it on for a simulated pool): a journal write is
//! durable when it returns, as an `O_DIRECT | O_DSYNC` write is, and counts as a fence
//! (the hook runs just before it takes effect, so an image taken there lacks it).
//! [`SimDevice::crash_images`] returns the pool image and the journal together, taken
//! at one instant; [`SimDevice::from_images`] builds the device a recovery opens.
//!
//! Thread-safety: all methods take `&self`; line bookkeeping sits behind one mutex.
//! Writes to `live` go through the raw base pointer in `Mem` (`pmem/persist.rs`), with
//! the same one-writer-per-line rule as a real mapping. `live` is read only by the
//! thread that just wrote a line (to capture it), so crash images and fences, which
//! may run on any thread, never read memory another thread is writing.

use crate::coding::usize_from;
use std::cell::UnsafeCell;
use std::collections::BTreeMap;

use parking_lot::Mutex;

use super::persist::LINE;

/// What happens to each unfenced line in a crash image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Every unfenced line loses its new content.
    DropAll,
    /// Every unfenced line keeps its new content (as if it had been written back).
    KeepAll,
    /// Each unfenced line is dropped, kept, or torn (each 8 B word from either image),
    /// decided by a pseudo-random generator seeded with the value.
    Random(u64),
}

/// Called with the device just before fence number `n` (1-based) takes effect.
pub type FenceHook = Box<dyn Fn(&SimDevice, u64) + Send + Sync>;

struct State {
    durable: Vec<u8>,
    /// The simulated journal file: what its completed writes left (durable at once).
    journal: Vec<u8>,
    /// Lines written since their last fence, with the content they had when last
    /// written (captured by the writing thread, which owns the line at that moment).
    dirty: BTreeMap<u64, [u8; usize_from(LINE)]>,
    fences: u64,
}

/// The simulated device.
pub struct SimDevice {
    live: Box<[UnsafeCell<u8>]>,
    state: Mutex<State>,
    hook: Mutex<Option<std::sync::Arc<FenceHook>>>,
}

// SAFETY: `live` is only accessed through raw pointers under the disjoint-writer rule
// of `Mem`, and `state` is behind a mutex.
unsafe impl Sync for SimDevice {}
// SAFETY: as above.
unsafe impl Send for SimDevice {}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("len", &self.live.len())
            .finish_non_exhaustive()
    }
}

impl SimDevice {
    /// A zeroed device of `len` bytes (rounded up to whole lines).
    #[must_use]
    pub fn new(len: u64) -> Self {
        let len = len.div_ceil(LINE) * LINE;
        Self::from_image(vec![0; usize_from(len)])
    }

    /// A device whose live and durable content is `image` (e.g. a crash image).
    #[must_use]
    pub fn from_image(image: Vec<u8>) -> Self {
        Self::from_images(image, Vec::new())
    }

    /// A device whose pool holds `image` and whose simulated journal file holds
    /// `journal` (both from [`SimDevice::crash_images`]).
    #[must_use]
    pub fn from_images(image: Vec<u8>, journal: Vec<u8>) -> Self {
        let live: Box<[UnsafeCell<u8>]> = image.iter().map(|b| UnsafeCell::new(*b)).collect();
        SimDevice {
            live,
            state: Mutex::new(State {
                durable: image,
                journal,
                dirty: BTreeMap::new(),
                fences: 0,
            }),
            hook: Mutex::new(None),
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.live.len() as u64
    }

    /// True for a zero-sized device.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    pub(crate) fn base_ptr(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.live.as_ptr())
    }

    /// Installs a hook run just before each fence takes effect (the device lock is not
    /// held, so the hook may call [`SimDevice::crash_image`]).
    pub fn set_fence_hook(&self, hook: Option<FenceHook>) {
        *self.hook.lock() = hook.map(std::sync::Arc::new);
    }

    /// Fences so far.
    pub fn fence_count(&self) -> u64 {
        self.state.lock().fences
    }

    /// Records that `[off, off+len)` was just written by the calling thread, capturing
    /// the lines' content. Called by `Mem::write` right after the copy, while the
    /// caller still owns those lines (the seam's rule: one writer per line at a time),
    /// so nothing else writes them during the capture.
    pub(crate) fn note_write(&self, off: u64, len: u64) {
        if len == 0 || off.saturating_add(len) > self.len() {
            return;
        }
        let first = off / LINE;
        let last = (off + len - 1) / LINE;
        let mut captured = Vec::with_capacity(usize_from(last - first + 1));
        for line in first..=last {
            let mut content = [0u8; usize_from(LINE)];
            let start = usize_from(line * LINE);
            // SAFETY: the line lies inside the device (checked above; the device is a
            // whole number of lines) and belongs to the calling thread, which has just
            // written into it; no other thread writes it concurrently (see above).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base_ptr().add(start),
                    content.as_mut_ptr(),
                    usize_from(LINE),
                );
            }
            captured.push((line, content));
        }
        let mut st = self.state.lock();
        for (line, content) in captured {
            st.dirty.insert(line, content);
        }
    }

    /// Counts a fence and runs the hook before it takes effect.
    fn before_fence(&self) {
        let n = {
            let mut st = self.state.lock();
            st.fences += 1;
            st.fences
        };
        let hook = self.hook.lock().clone();
        if let Some(h) = hook {
            h(self, n);
        }
    }

    /// Makes every dirty line durable, as `fdatasync` of the pool file does (the sync
    /// journal's checkpoints). A fence for the hook.
    pub(crate) fn fence_all(&self) {
        self.before_fence();
        let mut st = self.state.lock();
        let dirty = std::mem::take(&mut st.dirty);
        for (line, content) in dirty {
            let s = usize_from(line * LINE);
            st.durable[s..s + usize_from(LINE)].copy_from_slice(&content);
        }
    }

    /// A write of the simulated journal file at `off`, durable when it returns (the
    /// file grows as needed). A fence for the hook: an image taken there lacks it.
    pub(crate) fn journal_write(&self, off: u64, data: &[u8]) {
        self.before_fence();
        let mut st = self.state.lock();
        let (start, end) = (usize_from(off), usize_from(off) + data.len());
        if st.journal.len() < end {
            st.journal.resize(end, 0);
        }
        st.journal[start..end].copy_from_slice(data);
    }

    /// The simulated journal file's content.
    pub(crate) fn journal(&self) -> Vec<u8> {
        self.state.lock().journal.clone()
    }

    /// Whether a journal file exists (anything was ever written to it).
    pub(crate) fn has_journal(&self) -> bool {
        !self.state.lock().journal.is_empty()
    }

    pub(crate) fn fence(&self, ranges: &[(u64, u64)]) {
        self.before_fence();
        let mut st = self.state.lock();
        for &(start, end) in ranges {
            let mut line = start / LINE;
            while line * LINE < end && line * LINE < self.len() {
                if let Some(content) = st.dirty.remove(&line) {
                    let s = usize_from(line * LINE);
                    st.durable[s..s + usize_from(LINE)].copy_from_slice(&content);
                }
                line += 1;
            }
        }
    }

    /// True when no line of `[off, off+len)` is dirty.
    pub fn is_durable(&self, off: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let st = self.state.lock();
        let first = off / LINE;
        let last = (off + len - 1) / LINE;
        st.dirty.range(first..=last).next().is_none()
    }

    /// Number of dirty (unfenced) lines.
    pub fn dirty_lines(&self) -> usize {
        self.state.lock().dirty.len()
    }

    /// What the device would hold after a power failure now.
    pub fn crash_image(&self, mode: CrashMode) -> Vec<u8> {
        self.crash_images(mode).0
    }

    /// What the device would hold after a power failure now: the pool image (as
    /// [`SimDevice::crash_image`]) and the journal file, taken at one instant.
    pub fn crash_images(&self, mode: CrashMode) -> (Vec<u8>, Vec<u8>) {
        let st = self.state.lock();
        let journal = st.journal.clone();
        let mut img = st.durable.clone();
        let mut rng = match mode {
            CrashMode::Random(seed) => seed | 1,
            _ => 0,
        };
        for (&line, live) in &st.dirty {
            let s = usize_from(line * LINE);
            let dst = &mut img[s..s + usize_from(LINE)];
            match mode {
                CrashMode::DropAll => {}
                CrashMode::KeepAll => dst.copy_from_slice(live),
                CrashMode::Random(_) => match xorshift(&mut rng) % 3 {
                    0 => {}
                    1 => dst.copy_from_slice(live),
                    _ => {
                        for w in 0..(usize_from(LINE) / 8) {
                            if xorshift(&mut rng) & 1 == 1 {
                                dst[w * 8..w * 8 + 8].copy_from_slice(&live[w * 8..w * 8 + 8]);
                            }
                        }
                    }
                },
            }
        }
        (img, journal)
    }
}

fn xorshift(s: &mut u64) -> u64 {
    let mut x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;
    use crate::pmem::persist::{Mem, WritebackSet};
    use std::sync::Arc;

    #[test]
    fn unfenced_lines_are_at_risk_and_fenced_lines_survive() -> Result<()> {
        let dev = Arc::new(SimDevice::new(4096));
        let mem = Mem::sim(dev.clone());
        let mut set = WritebackSet::new();
        mem.write(0, &[1u8; 64])?;
        mem.write_back(&mut set, 0, 64);
        mem.fence(&mut set)?;
        mem.write(128, &[2u8; 64])?;
        assert!(dev.is_durable(0, 64));
        assert!(!dev.is_durable(128, 1));
        let dropped = dev.crash_image(CrashMode::DropAll);
        assert_eq!(&dropped[0..64], &[1u8; 64]);
        assert_eq!(&dropped[128..192], &[0u8; 64]);
        let kept = dev.crash_image(CrashMode::KeepAll);
        assert_eq!(&kept[128..192], &[2u8; 64]);
        // flushed but not fenced is still at risk
        mem.write_back(&mut set, 128, 64);
        assert!(!dev.is_durable(128, 64));
        mem.fence(&mut set)?;
        assert!(dev.is_durable(128, 64));
        Ok(())
    }

    #[test]
    fn random_mode_tears_at_eight_bytes() {
        let dev = Arc::new(SimDevice::new(64 * 64));
        let mem = Mem::sim(dev.clone());
        for l in 0..64u64 {
            assert!(mem.write(l * 64, &[0xAB; 64]).is_ok());
        }
        let img = dev.crash_image(CrashMode::Random(7));
        for w in img.chunks(8) {
            assert!(w == [0u8; 8] || w == [0xAB; 8], "torn inside an 8 B word");
        }
        assert!(img.contains(&0xAB) && img.contains(&0));
    }
}
