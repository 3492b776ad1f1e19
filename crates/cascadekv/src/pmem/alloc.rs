//! Coarse-grained chunk allocator with a persistent, double-buffered bitmap
//! (FluidKV §4.2).
//!
//! The pool is cut into fixed-size chunks; one bit per chunk says "allocated". The
//! bitmap lives in two *copies* in the pool's first chunk(s). Each persist writes the
//! whole bitmap with a generation number higher than the last into the copy the last
//! persist did not use (generations alternate in parity), so a torn write only ever
//! damages the copy being replaced: recovery takes the valid copy (checksum) with the
//! highest generation.
//!
//! Copy layout (see docs/formats.md):
//! ```text
//! 0  generation u64   8  flags u32 (bit 0 = clean shutdown)   12 bitmap_len u32
//! 16 bitmap (bitmap_len bytes, bit i of byte j = chunk 8j+i)
//! 16+bitmap_len  crc32c u32 over [0, 16+bitmap_len)
//! ```
//! Epochs: every allocation gets a new epoch from a counter that starts above the
//! loaded generation, and every persist's generation is at least the newest epoch
//! handed out; so the epochs of chunks the bitmap calls allocated are unique and
//! increase for the life of the pool. (A header written by an allocation a crash cut
//! short, in a chunk the bitmap still calls free, may share its epoch with a later
//! allocation; only `cascade repair` with both bitmap copies damaged looks at such a
//! chunk.)
//!
//! Thread-safety: [`Allocator`] is internally locked (`state`); allocation and free are
//! rare (once per chunk), so one mutex keeps the bitmap and its copies in step. Nothing
//! slow runs under it: a chunk header is written, freed chunks are punched out of the
//! file and the bitmap copy is written with the lock *released*. Meanwhile chunks are
//! `pending` (an allocation whose header is not durable) or `draining` (freed, being
//! punched): taken in DRAM so no allocation can hand them out, free in every persisted
//! copy. Bitmap persists are group-committed and run one at a time (`persisting`,
//! `persist_done`). Before this, one writer's device round trips and a 0.4 s punch of a
//! hundred 8 MiB chunks ran under the lock and stalled every writer that needed a new
//! segment for up to 0.7 s (docs/design.md §10).

use parking_lot::{Condvar, Mutex, MutexGuard};

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
    /// Taken chunks in DRAM: what the newest persisted copy says, plus `draining`.
    bits: Vec<u8>,
    /// Freed chunks whose punch is still running: set in `bits` (not allocatable),
    /// clear in every persisted copy (free if the process dies now).
    draining: Vec<u8>,
    /// Chunks set in `draining`.
    draining_count: u64,
    /// Chunks an allocation has taken whose header is not durable yet: set in `bits`,
    /// clear in every persisted copy.
    pending: Vec<u8>,
    /// The epoch the next allocation gets (> every persisted generation).
    next_epoch: u64,
    /// Changes made to the bitmap state (each caller that needs a persist bumps it),
    /// the change count the last successful persist covered, whether a persist is
    /// running, and the last failed persist (change count, message).
    changes: u64,
    persisted: u64,
    persisting: bool,
    failed: Option<(u64, String)>,
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
    /// Signalled when a punch ends or an allocation is undone (an allocation that
    /// found the pool full waits for the chunks being drained instead of failing).
    drained: Condvar,
    /// Signalled when a persist ends.
    persist_done: Condvar,
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
        let a = Allocator::from_parts(geo, chunk_size, bits, (0, 0), (reserved, reserved));
        {
            let mut st = a.state.lock();
            a.persist_changes(mem, &mut st)?;
        }
        Ok(a)
    }

    /// An allocator over `bits` as last persisted with `(generation, flags)`, `used`
    /// chunks taken, searching from `hint`.
    fn from_parts(
        geo: BitmapGeometry,
        chunk_size: u64,
        bits: Vec<u8>,
        (generation, flags): (u64, u32),
        (used, hint): (u64, u64),
    ) -> Self {
        let none = vec![0u8; usize_from(geo.bitmap_len())];
        Allocator {
            geo,
            chunk_size,
            drained: Condvar::new(),
            persist_done: Condvar::new(),
            state: Mutex::new(State {
                draining: none.clone(),
                draining_count: 0,
                pending: none,
                changes: 0,
                persisted: 0,
                persisting: false,
                failed: None,
                bits,
                next_epoch: generation + 1,
                generation,
                flags,
                used,
                hint,
            }),
        }
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
        Ok(Allocator::from_parts(
            geo,
            chunk_size,
            bits,
            (generation, flags),
            (used, 0),
        ))
    }

    /// Makes the caller's changes to the state durable: one of the two copies is
    /// rewritten with a new generation. Group commit: a persist covers every change
    /// made before it started, persists run one at a time (they alternate copies), and
    /// the device write happens with the lock released. Returns with the lock held.
    fn persist_changes(&self, mem: &Mem, st: &mut MutexGuard<'_, State>) -> Result<()> {
        st.changes += 1;
        let mine = st.changes;
        loop {
            if st.persisted >= mine {
                return Ok(());
            }
            if let Some((at, msg)) = &st.failed {
                if *at >= mine {
                    return Err(Error::io(
                        "persisting the chunk bitmap",
                        std::io::Error::other(msg.clone()),
                    ));
                }
            }
            if st.persisting {
                self.persist_done.wait(st);
                continue;
            }
            // The copy's buffer is allocated without the lock: a thread's first
            // allocations may fault in a fresh (huge) page of its allocator heap, and
            // 32 writers that need segments at once queued behind each such fault
            // (docs/benchmarks.md, session 14). Meanwhile another thread may have
            // persisted (or begun to): look again.
            let len = usize_from(COPY_FIXED + self.geo.bitmap_len());
            let mut buf = MutexGuard::unlocked(st, || vec![0u8; len]);
            let failed_mine = st.failed.as_ref().is_some_and(|(at, _)| *at >= mine);
            if st.persisted >= mine || st.persisting || failed_mine {
                continue;
            }
            let covers = st.changes;
            let off = self.encode_copy(st, &mut buf)?;
            st.persisting = true;
            let r = MutexGuard::unlocked(st, || mem.persist(off, &buf));
            st.persisting = false;
            match &r {
                Ok(()) => st.persisted = covers,
                Err(e) => st.failed = Some((covers, e.to_string())),
            }
            self.persist_done.notify_all();
            r?;
        }
    }

    /// The next copy to write (its offset and bytes), under the lock: the generation
    /// goes up by one — or more, to cover every epoch handed out — keeping the copies
    /// alternating, so a torn write only damages the copy being replaced. Chunks being
    /// drained or whose allocation is pending are written as free.
    fn encode_copy(&self, st: &mut State, buf: &mut [u8]) -> Result<u64> {
        let mut generation = st.generation + 1;
        let floor = st.next_epoch.saturating_sub(1);
        if generation < floor {
            generation = floor + u64::from(floor % 2 != generation % 2);
        }
        st.generation = generation;
        let copy = generation % 2;
        put_u64(buf, 0, generation);
        put_u32(buf, 8, st.flags);
        let len = u32::try_from(self.geo.bitmap_len())
            .map_err(|_| Error::invalid("the chunk bitmap does not fit its 32-bit length"))?;
        put_u32(buf, 12, len);
        let n = st.bits.len();
        for (i, ((b, d), p)) in st
            .bits
            .iter()
            .zip(&st.draining)
            .zip(&st.pending)
            .enumerate()
        {
            buf[16 + i] = b & !d & !p;
        }
        let crc = crc32c(&buf[..16 + n]);
        put_u32(buf, 16 + n, crc);
        Ok(self.geo.base + copy * self.geo.copy_size)
    }

    /// Allocates `span` contiguous chunks. Under the allocator lock it picks the run
    /// and an epoch and marks the chunks *pending* (taken in DRAM, free in every
    /// persisted copy); with the lock released it reserves space on the backing file
    /// (so a full disk is an error here, not a fault on first write) and calls
    /// `init(first_chunk, epoch)` — which must make the chunk's header durable — and
    /// only then persists the bitmap marking the chunks allocated (a group persist,
    /// [`Allocator::persist_changes`]). So an allocated chunk always has a valid
    /// header; a crash before the bitmap persist leaves a header in a chunk the bitmap
    /// still calls free, which nothing reads. Only the choice of the run and the
    /// bitmap bookkeeping are serialized: before, one writer's two device round trips
    /// under the lock queued 32 writers that needed segments at once for up to 0.7 s.
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
        let total = self.geo.chunk_count;
        let (start, epoch) = {
            let mut st = self.state.lock();
            let start = loop {
                let room = total.saturating_sub(st.used) >= span.saturating_add(keep_free);
                match room
                    .then(|| find_run(&st.bits, total, span, st.hint))
                    .flatten()
                {
                    Some(start) => break start,
                    // Freed chunks are being punched: they are free in a moment.
                    None if st.draining_count > 0 => self.drained.wait(&mut st),
                    None => {
                        return Err(Error::PoolFull {
                            chunks: total,
                            wanted: span,
                        })
                    }
                }
            };
            for c in start..start + span {
                set_bit(&mut st.bits, c, true);
                set_bit(&mut st.pending, c, true);
            }
            st.used += span;
            st.hint = start + span;
            let epoch = st.next_epoch;
            st.next_epoch += 1;
            (start, epoch)
        };
        let undo = |st: &mut State| {
            for c in start..start + span {
                set_bit(&mut st.bits, c, false);
                set_bit(&mut st.pending, c, false);
            }
            st.used -= span;
            st.hint = st.hint.min(start);
            self.drained.notify_all();
        };
        let ready = mem
            .reserve(start * self.chunk_size, span * self.chunk_size)
            .and_then(|()| init(start, epoch));
        let mut st = self.state.lock();
        if let Err(e) = ready {
            undo(&mut st);
            return Err(e);
        }
        for c in start..start + span {
            set_bit(&mut st.pending, c, false);
        }
        if let Err(e) = self.persist_changes(mem, &mut st) {
            undo(&mut st);
            return Err(e);
        }
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
        let end = |chunk: u64, span: u64| chunk.saturating_add(span).min(self.geo.chunk_count);
        let mut freeing = Vec::new();
        {
            let mut st = self.state.lock();
            for &(chunk, span) in runs {
                for c in chunk..end(chunk, span) {
                    if bit(&st.bits, c) && !bit(&st.draining, c) {
                        set_bit(&mut st.draining, c, true);
                        freeing.push(c);
                    }
                }
            }
            st.draining_count += freeing.len() as u64;
            if let Err(e) = self.persist_changes(mem, &mut st) {
                for &c in &freeing {
                    set_bit(&mut st.draining, c, false);
                }
                st.draining_count -= freeing.len() as u64;
                self.drained.notify_all();
                return Err(e);
            }
        }
        // Give the space back to the file system outside the lock, while the runs
        // cannot be handed out yet (still taken in `bits`) and every persisted copy
        // already says they are free: a crash before this leaves free chunks
        // unpunched, never an allocated chunk zeroed. A reused chunk is then a fresh,
        // unwritten extent again, on which a synced store costs about a third of what
        // it costs on written blocks here (docs/design.md §10), and the pool file stays
        // as large on disk as its data.
        for &(chunk, span) in runs {
            mem.discard(chunk * self.chunk_size, span * self.chunk_size);
        }
        let mut st = self.state.lock();
        for &c in &freeing {
            set_bit(&mut st.draining, c, false);
            set_bit(&mut st.bits, c, false);
        }
        st.used -= freeing.len() as u64;
        st.draining_count -= freeing.len() as u64;
        for &(chunk, _) in runs {
            st.hint = st.hint.min(chunk);
        }
        self.drained.notify_all();
        Ok(())
    }

    /// Sets or clears the clean-shutdown flag and persists. Setting it (a clean close)
    /// persists twice, so both copies hold the same bitmap: a bit flipped in either at
    /// rest then changes nothing (the other, intact copy says the same).
    pub fn set_clean(&self, mem: &Mem, clean: bool) -> Result<()> {
        let mut st = self.state.lock();
        if clean {
            st.flags |= FLAG_CLEAN;
            self.persist_changes(mem, &mut st)?;
        } else {
            st.flags &= !FLAG_CLEAN;
        }
        self.persist_changes(mem, &mut st)
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
        let a = Allocator::from_parts(geo, chunk_size, bits, (generation, 0), (0, reserved));
        let mut st = a.state.lock();
        a.persist_changes(mem, &mut st)?;
        a.persist_changes(mem, &mut st)
    }

    /// Whether the loaded bitmap carried the clean-shutdown flag.
    pub fn was_clean(&self) -> bool {
        self.state.lock().flags & FLAG_CLEAN != 0
    }

    /// Whether chunk `c` is allocated (a freed chunk still being punched is not, nor
    /// one whose allocation has not persisted yet).
    pub fn is_allocated(&self, c: u64) -> bool {
        let st = self.state.lock();
        bit(&st.bits, c) && !bit(&st.draining, c) && !bit(&st.pending, c)
    }

    /// Chunks currently allocated (including the header region), counting freed chunks
    /// until their punch is over (they take space on disk until then).
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
    use std::sync::atomic::Ordering::SeqCst;
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

    /// Allocations and frees from several threads at once (headers written, chunks
    /// punched and bitmap copies written with the lock released): no chunk is handed
    /// out twice, epochs are unique, a failed `init` gives its chunks back, and the
    /// persisted bitmap says exactly what is allocated.
    #[test]
    fn concurrent_alloc_and_free_keep_the_bitmap_exact() -> Result<()> {
        let (_dev, mem, geo) = setup();
        let a = Allocator::create(&mem, geo, 512, 2)?;
        let owner: Vec<std::sync::atomic::AtomicU64> = (0..100)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect();
        let kept = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|sc| -> Result<()> {
            let mut handles = Vec::new();
            for t in 1..=4u64 {
                let (a, mem, owner, kept) = (&a, &mem, &owner, &kept);
                handles.push(sc.spawn(move || -> Result<()> {
                    let mut mine = Vec::new();
                    for i in 0..200u64 {
                        let fail = i % 7 == 3;
                        let span = 1 + i % 2;
                        let r = a.alloc(mem, span, 0, |c0, _| {
                            if fail {
                                return Err(Error::invalid("init failed"));
                            }
                            // Nobody else may hold these chunks now.
                            for c in c0..c0 + span {
                                let prev = owner[usize_from(c)].swap(t, SeqCst);
                                assert_eq!(prev, 0, "chunk {c} handed out twice");
                            }
                            Ok(())
                        });
                        match r {
                            Ok(x) => mine.push(x),
                            Err(Error::PoolFull { .. } | Error::InvalidArgument(_)) => {}
                            Err(e) => return Err(e),
                        }
                        if mine.len() > 6 {
                            let x = mine.remove(0);
                            for c in x.chunk..x.chunk + x.span {
                                owner[usize_from(c)].store(0, SeqCst);
                            }
                            a.free(mem, x.chunk, x.span)?;
                        }
                    }
                    kept.lock()
                        .map_err(|_| Error::Internal("poisoned".into()))?
                        .extend(mine);
                    Ok(())
                }));
            }
            for h in handles {
                h.join()
                    .map_err(|_| Error::Internal("a thread panicked".into()))??;
            }
            Ok(())
        })?;
        let kept = kept
            .into_inner()
            .map_err(|_| Error::Internal("poisoned".into()))?;
        let mut epochs: Vec<u64> = kept.iter().map(|x| x.epoch).collect();
        epochs.sort_unstable();
        epochs.dedup();
        assert_eq!(epochs.len(), kept.len(), "an epoch was handed out twice");
        let b = Allocator::load(&mem, geo, 512, std::path::Path::new("pool"))?;
        let mut want = [false; 100];
        want[0] = true;
        want[1] = true;
        for x in &kept {
            for c in x.chunk..x.chunk + x.span {
                want[usize_from(c)] = true;
            }
        }
        for (c, w) in want.iter().enumerate() {
            assert_eq!(b.is_allocated(c as u64), *w, "chunk {c}");
        }
        assert_eq!(b.used_chunks(), want.iter().filter(|w| **w).count() as u64);
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
