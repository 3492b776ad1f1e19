//! Coarse-grained chunk allocator with a persistent, double-buffered bitmap
//! (FluidKV §4.2).
//!
//! The pool is cut into fixed-size chunks; one bit per chunk says "allocated". The
//! bitmap lives in two *copies* in the pool's first chunk(s). Each persist writes the
//! whole bitmap with a generation number one higher than the last into the copy the
//! last persist did not use, so a torn write only ever damages the copy being
//! replaced: recovery takes the valid copy (checksum) with the highest generation.
//!
//! Copy layout (see docs/formats.md):
//! ```text
//! 0  generation u64   8  flags u32 (bit 0 = clean shutdown)   12 bitmap_len u32
//! 16 bitmap (bitmap_len bytes, bit i of byte j = chunk 8j+i)
//! 16+bitmap_len  crc32c u32 over [0, 16+bitmap_len)
//! ```
//! The generation doubles as the source of chunk epochs: every allocation persists a
//! new generation and hands it out as the epoch of the allocated chunk(s), so epochs
//! are unique and increase for the life of the pool.
//!
//! Thread-safety: [`Allocator`] is internally locked; allocation and free are rare
//! (once per chunk), so one mutex is enough and keeps the bitmap and its copies in step.

use parking_lot::Mutex;

use super::persist::Mem;
use crate::coding::{crc32c, get_u32, get_u64, put_u32, put_u64, usize_from};
use crate::error::{Error, Result};

/// Flag bit in a bitmap copy: the store was closed cleanly.
pub const FLAG_CLEAN: u32 = 1;
const COPY_FIXED: u64 = 20;

/// Where the bitmap copies live and how big they are.
#[derive(Debug, Clone, Copy)]
pub struct BitmapGeometry {
    /// Offset of copy 0; copy 1 follows at `base + copy_size`.
    pub base: u64,
    /// Bytes per copy (line-aligned).
    pub copy_size: u64,
    /// Chunks tracked.
    pub chunk_count: u64,
}

impl BitmapGeometry {
    /// Geometry for `chunk_count` chunks with copies starting at `base`.
    pub fn new(base: u64, chunk_count: u64) -> Self {
        let bitmap_len = chunk_count.div_ceil(8);
        BitmapGeometry {
            base,
            copy_size: (COPY_FIXED + bitmap_len).div_ceil(64) * 64,
            chunk_count,
        }
    }

    fn bitmap_len(&self) -> u64 {
        self.chunk_count.div_ceil(8)
    }

    /// First byte past both copies.
    pub fn end(&self) -> u64 {
        self.base + 2 * self.copy_size
    }
}

struct State {
    bits: Vec<u8>,
    generation: u64,
    flags: u32,
    used: u64,
    hint: u64,
}

/// The allocator.
pub struct Allocator {
    geo: BitmapGeometry,
    chunk_size: u64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator")
            .field("geo", &self.geo)
            .finish_non_exhaustive()
    }
}

/// A successful allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// First chunk index.
    pub chunk: u64,
    /// Number of contiguous chunks.
    pub span: u64,
    /// Unique epoch for these chunks.
    pub epoch: u64,
}

impl Allocator {
    /// A fresh bitmap with the first `reserved` chunks marked allocated (the header
    /// region); persists generation 1.
    pub fn create(mem: &Mem, geo: BitmapGeometry, chunk_size: u64, reserved: u64) -> Result<Self> {
        let mut bits = vec![0u8; usize_from(geo.bitmap_len())];
        for c in 0..reserved {
            bits[(c / 8) as usize] |= 1 << (c % 8);
        }
        let a = Allocator {
            geo,
            chunk_size,
            state: Mutex::new(State {
                bits,
                generation: 0,
                flags: 0,
                used: reserved,
                hint: reserved,
            }),
        };
        {
            let mut st = a.state.lock();
            a.persist_locked(mem, &mut st)?;
        }
        Ok(a)
    }

    /// Loads the newest valid copy. Both copies invalid is corruption.
    pub fn load(
        mem: &Mem,
        geo: BitmapGeometry,
        chunk_size: u64,
        path: &std::path::Path,
    ) -> Result<Self> {
        let mut best: Option<(u64, u32, Vec<u8>)> = None;
        for i in 0..2 {
            let off = geo.base + i * geo.copy_size;
            let raw = mem.read(off, geo.copy_size)?;
            if let Some((g, f, bits)) = decode_copy(raw, geo.bitmap_len()) {
                if best.as_ref().is_none_or(|b| g > b.0) {
                    best = Some((g, f, bits));
                }
            }
        }
        let (generation, flags, bits) = best.ok_or_else(|| {
            Error::corruption(
                path,
                geo.base,
                "both chunk-bitmap copies fail their checksum",
            )
        })?;
        let used = (0..geo.chunk_count).filter(|c| bit(&bits, *c)).count() as u64;
        Ok(Allocator {
            geo,
            chunk_size,
            state: Mutex::new(State {
                bits,
                generation,
                flags,
                used,
                hint: 0,
            }),
        })
    }

    fn persist_locked(&self, mem: &Mem, st: &mut State) -> Result<()> {
        st.generation += 1;
        let copy = st.generation % 2;
        let mut buf = vec![0u8; usize_from(COPY_FIXED + self.geo.bitmap_len())];
        put_u64(&mut buf, 0, st.generation);
        put_u32(&mut buf, 8, st.flags);
        let len = u32::try_from(self.geo.bitmap_len())
            .map_err(|_| Error::invalid("the chunk bitmap does not fit its 32-bit length"))?;
        put_u32(&mut buf, 12, len);
        let n = st.bits.len();
        buf[16..16 + n].copy_from_slice(&st.bits);
        let crc = crc32c(&buf[..16 + n]);
        put_u32(&mut buf, 16 + n, crc);
        mem.persist(self.geo.base + copy * self.geo.copy_size, &buf)
    }

    /// Allocates `span` contiguous chunks. Under the allocator lock it reserves space
    /// on the backing file (so a full disk is an error here, not a fault on first
    /// write), calls `init(first_chunk, epoch)` — which must make the chunk's header
    /// durable — and only then persists the bitmap marking the chunks allocated. So an
    /// allocated chunk always has a valid header; a crash before the bitmap persist
    /// leaves a header in a chunk the bitmap still calls free, which nothing reads.
    ///
    /// `keep_free` chunks must stay free after this allocation (the headroom ordinary
    /// writes leave for deletes and background work); otherwise it is `PoolFull`.
    pub fn alloc(
        &self,
        mem: &Mem,
        span: u64,
        keep_free: u64,
        init: impl FnOnce(u64, u64) -> Result<()>,
    ) -> Result<Allocation> {
        let mut st = self.state.lock();
        let total = self.geo.chunk_count;
        let full = Error::PoolFull {
            chunks: total,
            wanted: span,
        };
        if total.saturating_sub(st.used) < span.saturating_add(keep_free) {
            return Err(full);
        }
        let start = find_run(&st.bits, total, span, st.hint).ok_or(full)?;
        mem.reserve(start * self.chunk_size, span * self.chunk_size)?;
        // The epoch is the generation the bitmap persist below will carry.
        let epoch = st.generation + 1;
        init(start, epoch)?;
        for c in start..start + span {
            set_bit(&mut st.bits, c, true);
        }
        st.used += span;
        st.hint = start + span;
        if let Err(e) = self.persist_locked(mem, &mut st) {
            for c in start..start + span {
                set_bit(&mut st.bits, c, false);
            }
            st.used -= span;
            return Err(e);
        }
        debug_assert_eq!(st.generation, epoch);
        Ok(Allocation {
            chunk: start,
            span,
            epoch,
        })
    }

    #[cfg(test)]
    /// Frees chunks and persists the bitmap.
    pub fn free(&self, mem: &Mem, chunk: u64, span: u64) -> Result<()> {
        self.free_many(mem, &[(chunk, span)])
    }

    /// Frees several runs with one bitmap persist.
    pub fn free_many(&self, mem: &Mem, runs: &[(u64, u64)]) -> Result<()> {
        if runs.is_empty() {
            return Ok(());
        }
        let mut st = self.state.lock();
        for &(chunk, span) in runs {
            for c in chunk..chunk.saturating_add(span).min(self.geo.chunk_count) {
                if bit(&st.bits, c) {
                    set_bit(&mut st.bits, c, false);
                    st.used -= 1;
                }
            }
            st.hint = st.hint.min(chunk);
        }
        self.persist_locked(mem, &mut st)?;
        // Give the space back to the file system while the runs cannot be handed out
        // yet (the lock is held) and the bitmap already says they are free: a crash
        // before this leaves free chunks unpunched, never an allocated chunk zeroed.
        // A reused chunk is then a fresh, unwritten extent again, on which a synced
        // store costs about a third of what it costs on written blocks here
        // (docs/design.md §10), and the pool file stays as large on disk as its data.
        for &(chunk, span) in runs {
            mem.discard(chunk * self.chunk_size, span * self.chunk_size);
        }
        Ok(())
    }

    /// Sets or clears the clean-shutdown flag and persists. Setting it (a clean close)
    /// persists twice, so both copies hold the same bitmap: a bit flipped in either at
    /// rest then changes nothing (the other, intact copy says the same).
    pub fn set_clean(&self, mem: &Mem, clean: bool) -> Result<()> {
        let mut st = self.state.lock();
        if clean {
            st.flags |= FLAG_CLEAN;
            self.persist_locked(mem, &mut st)?;
        } else {
            st.flags &= !FLAG_CLEAN;
        }
        self.persist_locked(mem, &mut st)
    }

    /// Writes a bitmap from scratch (both copies, generation `generation` and the one
    /// after) marking the first `reserved` chunks and every run of `allocated` as
    /// allocated. Only `cascade verify`/`repair` call it, on a copy-on-write mapping,
    /// when both copies are damaged: every chunk holding a valid header is taken.
    pub fn rebuild(
        mem: &Mem,
        geo: BitmapGeometry,
        chunk_size: u64,
        reserved: u64,
        allocated: &[(u64, u64)],
        generation: u64,
    ) -> Result<()> {
        let mut bits = vec![0u8; usize_from(geo.bitmap_len())];
        let runs = std::iter::once((0, reserved)).chain(allocated.iter().copied());
        for (c0, span) in runs {
            for c in c0..(c0 + span).min(geo.chunk_count) {
                set_bit(&mut bits, c, true);
            }
        }
        let a = Allocator {
            geo,
            chunk_size,
            state: Mutex::new(State {
                bits,
                generation,
                flags: 0,
                used: 0,
                hint: reserved,
            }),
        };
        let mut st = a.state.lock();
        a.persist_locked(mem, &mut st)?;
        a.persist_locked(mem, &mut st)
    }

    /// Whether the loaded bitmap carried the clean-shutdown flag.
    pub fn was_clean(&self) -> bool {
        self.state.lock().flags & FLAG_CLEAN != 0
    }

    /// Whether chunk `c` is allocated.
    pub fn is_allocated(&self, c: u64) -> bool {
        bit(&self.state.lock().bits, c)
    }

    /// Chunks currently allocated (including the header region).
    pub fn used_chunks(&self) -> u64 {
        self.state.lock().used
    }

    #[cfg(test)]
    /// The current generation (= newest epoch handed out).
    pub fn generation(&self) -> u64 {
        self.state.lock().generation
    }
}

fn bit(bits: &[u8], c: u64) -> bool {
    bits.get((c / 8) as usize)
        .is_some_and(|b| b & (1 << (c % 8)) != 0)
}

fn set_bit(bits: &mut [u8], c: u64, on: bool) {
    if let Some(b) = bits.get_mut((c / 8) as usize) {
        if on {
            *b |= 1 << (c % 8);
        } else {
            *b &= !(1 << (c % 8));
        }
    }
}

/// First-fit search for `span` free chunks, starting at `hint` and wrapping once.
fn find_run(bits: &[u8], total: u64, span: u64, hint: u64) -> Option<u64> {
    if span == 0 || span > total {
        return None;
    }
    let scan = |from: u64, to: u64| -> Option<u64> {
        let mut run = 0;
        let mut c = from;
        while c < to {
            if bit(bits, c) {
                run = 0;
            } else {
                run += 1;
                if run == span {
                    return Some(c + 1 - span);
                }
            }
            c += 1;
        }
        None
    };
    let hint = hint.min(total);
    scan(hint, total).or_else(|| scan(0, total))
}

fn decode_copy(raw: &[u8], bitmap_len: u64) -> Option<(u64, u32, Vec<u8>)> {
    let n = usize::try_from(bitmap_len).ok()?;
    let generation = get_u64(raw, 0)?;
    let flags = get_u32(raw, 8)?;
    if u64::from(get_u32(raw, 12)?) != bitmap_len || generation == 0 {
        return None;
    }
    let body = raw.get(0..16 + n)?;
    if get_u32(raw, 16 + n)? != crc32c(body) {
        return None;
    }
    Some((generation, flags, body[16..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::sim::{CrashMode, SimDevice};
    use std::sync::Arc;

    fn setup() -> (Arc<SimDevice>, Mem, BitmapGeometry) {
        let dev = Arc::new(SimDevice::new(64 * 1024));
        let mem = Mem::sim(dev.clone());
        (dev, mem, BitmapGeometry::new(4096, 100))
    }

    #[test]
    fn alloc_free_reload_and_pool_full() -> Result<()> {
        let (_dev, mem, geo) = setup();
        let a = Allocator::create(&mem, geo, 1024, 2)?;
        let x = a.alloc(&mem, 3, 0, |_, _| Ok(()))?;
        assert_eq!((x.chunk, x.span), (2, 3));
        let y = a.alloc(&mem, 1, 0, |_, _| Ok(()))?;
        assert!(y.epoch > x.epoch);
        a.free(&mem, 2, 3)?;
        let b = Allocator::load(&mem, geo, 1024, std::path::Path::new("pool"))?;
        assert!(!b.is_allocated(2) && b.is_allocated(5) && b.is_allocated(0));
        assert_eq!(b.used_chunks(), 3);
        assert!(matches!(
            a.alloc(&mem, 1000, 0, |_, _| Ok(())),
            Err(Error::PoolFull { .. })
        ));
        Ok(())
    }

    #[test]
    fn torn_copy_falls_back_to_the_older_one() -> Result<()> {
        let (dev, mem, geo) = setup();
        let a = Allocator::create(&mem, geo, 1024, 1)?;
        a.alloc(&mem, 1, 0, |_, _| Ok(()))?; // generation 2 in copy 0
        let img = dev.crash_image(CrashMode::DropAll);
        // Damage the newest copy: the older one must win.
        let mut bad = img.clone();
        bad[usize_from(geo.base + 20)] ^= 0xFF;
        let dev2 = Arc::new(SimDevice::from_image(bad));
        let mem2 = Mem::sim(dev2);
        let b = Allocator::load(&mem2, geo, 1024, std::path::Path::new("pool"))?;
        assert_eq!(b.generation(), 1);
        // Damage both: corruption.
        let mut worse = img;
        worse[usize_from(geo.base + 20)] ^= 0xFF;
        worse[usize_from(geo.base + geo.copy_size + 20)] ^= 0xFF;
        let mem3 = Mem::sim(Arc::new(SimDevice::from_image(worse)));
        let err = Allocator::load(&mem3, geo, 1024, std::path::Path::new("pool"));
        assert!(matches!(err, Err(e) if e.is_corruption()));
        Ok(())
    }

    #[test]
    fn find_run_wraps_and_respects_holes() {
        let bits = [0b0000_1011u8, 0];
        assert_eq!(find_run(&bits, 16, 1, 0), Some(2));
        assert_eq!(find_run(&bits, 16, 2, 0), Some(4));
        assert_eq!(find_run(&bits, 16, 1, 15), Some(15));
        assert_eq!(find_run(&bits, 16, 20, 0), None);
    }
}
