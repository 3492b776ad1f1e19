//! The fast-tier pool: one file (or simulated device) mapped shared, cut into chunks.
//!
//! Layout: the *header region* (the first chunk or chunks) holds the 64-byte pool
//! header at offset 0 and the two bitmap copies at offset 4096; every later chunk is
//! handed out by the [`Allocator`] and starts with a [`ChunkHeader`].
//!
//! Pool header (offset 0, see docs/formats.md):
//! ```text
//! 0  magic "CASCADKV"  8  format_version u32  12 header_len u32 (64)
//! 16 pool_size u64     24 chunk_size u64      32 chunk_count u64
//! 40 reserved_chunks u32  44 reserved u32     48 pool_id u64
//! 56 reserved u32      60 crc32c u32 over [0, 60)
//! ```
//! The header is written once at creation and never changed; mutable state (the
//! clean-shutdown flag) lives in the double-buffered bitmap copies.
//!
//! Thread-safety: `Pool` is `Sync`. Chunk contents follow the ownership rule of
//! [`Mem`]; allocation is serialized inside the allocator.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::alloc::{Allocation, Allocator, BitmapGeometry};
use super::chunk::{ChunkHeader, ChunkKind, CHUNK_HEADER_LEN};
use super::persist::{Backend, Mem};
use super::sim::SimDevice;
use crate::coding::{crc32c, get_u32, get_u64, put_u32, put_u64, usize_from};
use crate::error::{Error, Result};

/// Newest pool format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
pub(super) const MAGIC: &[u8; 8] = b"CASCADKV";
/// The pool header's length, as its `header_len` field stores it.
const HEADER_LEN_FIELD: u32 = 64;
pub(super) const HEADER_LEN: u64 = HEADER_LEN_FIELD as u64;
pub(super) const BITMAP_BASE: u64 = 4096;
/// Smallest chunk size accepted.
pub const MIN_CHUNK: u64 = 16 * 1024;
/// Largest chunk size accepted (a log pad record must be able to span a chunk).
pub const MAX_CHUNK: u64 = 64 * 1024 * 1024;

/// How the pool is backed.
#[derive(Debug, Clone)]
pub enum Device {
    /// A file in the data directory; DAX (`MAP_SYNC`) is used when the kernel accepts
    /// it unless `dax` says otherwise.
    File {
        /// `Some(true)`: require DAX; `Some(false)`: never try; `None`: try, fall back.
        dax: Option<bool>,
    },
    /// A simulated device (tests): persistence is tracked per line.
    Sim(Arc<SimDevice>),
    /// The existing pool file, opened read-only and mapped copy-on-write: the store
    /// can be opened, recovered and read, and nothing written reaches the file
    /// (`cascade verify`, the salvage pass of `cascade repair`).
    Private {
        /// When the pool header or both bitmap copies are damaged, rebuild them in the
        /// private mapping from the chunk headers found (see [`Pool::rebuild`]).
        rebuild: bool,
    },
}

/// Sizes used when creating a pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolGeometry {
    /// Total bytes (rounded down to whole chunks).
    pub pool_size: u64,
    /// Bytes per chunk (power of two, at least [`MIN_CHUNK`]).
    pub chunk_size: u64,
}

/// The mapped pool with its allocator.
#[derive(Debug)]
pub struct Pool {
    mem: Mem,
    path: PathBuf,
    chunk_size: u64,
    chunk_count: u64,
    reserved_chunks: u64,
    alloc: Allocator,
    created: bool,
    /// Epoch of the allocation each chunk belongs to (0 = none known); lets a reader
    /// verify a record given only its address.
    epochs: Vec<AtomicU64>,
    /// Chunks ordinary writes leave free for deletes and background work (atomic).
    headroom: AtomicU64,
    /// Allocations whose last holder let go, waiting to be freed in one batch (so a
    /// reader that drops the last reference never pays for a bitmap persist).
    released: Mutex<Vec<(u64, u64)>>,
    /// Set by the first sync of a FastStore log (atomic, never cleared): from then on
    /// new log segments are pre-written with zeros on block storage (`LogWriter`).
    durable_logs: AtomicBool,
    /// The sync journal (`journal/`), set at open on block storage: FastStore log
    /// ranges are made durable through it instead of through the seam's fence.
    journal: Option<super::journal::Journal>,
}

/// Who asks for space: ordinary writes must leave the pool's headroom free; deletes,
/// flushes, compactions, cleaning and the manifest may use it, so that deleting data
/// and moving it on keep working when writes no longer fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocClass {
    /// Puts (user data growing).
    Writes,
    /// Deletes and the engine's own upkeep.
    Upkeep,
}

impl Pool {
    /// Opens the pool at `path`, creating it with `geo` if it does not exist and
    /// `create` is set. Validates magic, version and checksums.
    pub fn open(path: &Path, device: &Device, geo: PoolGeometry, create: bool) -> Result<Pool> {
        let geo = match device {
            Device::Sim(dev) => PoolGeometry {
                pool_size: dev.len(),
                ..geo
            },
            Device::File { .. } | Device::Private { .. } => geo,
        };
        validate_geometry(geo)?;
        match device {
            Device::Private { rebuild } => {
                let map = || -> Result<Mem> {
                    let file = OpenOptions::new().read(true).open(path).map_err(|e| {
                        Error::io(format!("opening pool file {}", path.display()), e)
                    })?;
                    let len = file
                        .metadata()
                        .map_err(|e| Error::io("reading pool file size", e))?
                        .len();
                    if len < HEADER_LEN {
                        return Err(Error::NotAStore(path.to_path_buf()));
                    }
                    Mem::map_private(&file, len)
                };
                match Self::load(map()?, path) {
                    Err(e) if *rebuild && e.is_corruption() => {
                        let mem = map()?;
                        super::rebuild::rebuild(&mem, path)?;
                        Self::load(mem, path)
                    }
                    r => r,
                }
            }
            Device::Sim(dev) => {
                let mem = Mem::sim(dev.clone());
                let blank = mem.read(0, 8)?.iter().all(|b| *b == 0);
                if blank {
                    if !create {
                        return Err(Error::NotAStore(path.to_path_buf()));
                    }
                    let geo = PoolGeometry {
                        pool_size: dev.len(),
                        ..geo
                    };
                    Self::format(mem, path, geo)
                } else {
                    Self::load(mem, path)
                }
            }
            Device::File { dax } => {
                let exists = path.exists();
                if !exists && !create {
                    return Err(Error::NotAStore(path.to_path_buf()));
                }
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(!exists)
                    .truncate(false)
                    .open(path)
                    .map_err(|e| Error::io(format!("opening pool file {}", path.display()), e))?;
                let len = file
                    .metadata()
                    .map_err(|e| Error::io("reading pool file size", e))?
                    .len();
                let want_dax = *dax != Some(false);
                let require = *dax == Some(true);
                if !exists || len == 0 {
                    let size = geo.pool_size / geo.chunk_size * geo.chunk_size;
                    file.set_len(size)
                        .map_err(|e| Error::io("sizing the pool file", e))?;
                    let mem = Mem::map_file(file, size, want_dax, require)?;
                    Self::format(
                        mem,
                        path,
                        PoolGeometry {
                            pool_size: size,
                            ..geo
                        },
                    )
                } else {
                    if len < HEADER_LEN {
                        return Err(Error::NotAStore(path.to_path_buf()));
                    }
                    let mem = Mem::map_file(file, len, want_dax, require)?;
                    if create && mem.read(0, HEADER_LEN)?.iter().all(|b| *b == 0) {
                        // Creation was interrupted before the header (written last)
                        // reached the file: nothing else can be in it.
                        return Self::format(
                            mem,
                            path,
                            PoolGeometry {
                                pool_size: len,
                                ..geo
                            },
                        );
                    }
                    Self::load(mem, path)
                }
            }
        }
    }

    fn format(mem: Mem, path: &Path, geo: PoolGeometry) -> Result<Pool> {
        let chunk_count = geo.pool_size / geo.chunk_size;
        let bgeo = BitmapGeometry::new(BITMAP_BASE, chunk_count);
        let reserved = bgeo.end().div_ceil(geo.chunk_size);
        if chunk_count <= reserved {
            return Err(Error::invalid(format!(
                "pool of {} bytes holds no chunk beyond its header region",
                geo.pool_size
            )));
        }
        let h = encode_header(chunk_count, geo.chunk_size, reserved)?;
        // Bitmap first, header last: a pool without a valid header is "not a store"
        // and gets formatted again, never half-trusted.
        mem.reserve(0, reserved * geo.chunk_size)?;
        let alloc = Allocator::create(&mem, bgeo, geo.chunk_size, reserved)?;
        mem.persist(0, &h)?;
        Ok(Pool {
            mem,
            path: path.to_path_buf(),
            chunk_size: geo.chunk_size,
            chunk_count,
            reserved_chunks: reserved,
            alloc,
            created: true,
            epochs: (0..chunk_count).map(|_| AtomicU64::new(0)).collect(),
            headroom: AtomicU64::new(0),
            released: Mutex::new(Vec::new()),
            durable_logs: AtomicBool::new(false),
            journal: None,
        })
    }

    fn load(mem: Mem, path: &Path) -> Result<Pool> {
        let h = mem.read(0, HEADER_LEN)?;
        if &h[0..8] != MAGIC {
            // A magic a few bits away from ours is our header damaged, not a foreign
            // file.
            let dist: u32 = h[0..8]
                .iter()
                .zip(MAGIC)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            if dist <= 4 {
                return Err(Error::corruption(path, 0, "pool header magic is damaged"));
            }
            return Err(Error::NotAStore(path.to_path_buf()));
        }
        let version = get_u32(h, 8).unwrap_or(0);
        let stored = get_u32(h, 60).unwrap_or(0);
        let actual = crc32c(&h[0..60]);
        if stored != actual {
            return Err(Error::ChecksumMismatch {
                file: path.to_path_buf(),
                offset: 0,
                expected: stored,
                actual,
            });
        }
        if version == 0 {
            return Err(Error::corruption(path, 8, "format version 0"));
        }
        if version > FORMAT_VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let bad = |why: &str| Error::corruption(path, 0, why.to_string());
        let pool_size = get_u64(h, 16).ok_or_else(|| bad("short header"))?;
        let chunk_size = get_u64(h, 24).ok_or_else(|| bad("short header"))?;
        let chunk_count = get_u64(h, 32).ok_or_else(|| bad("short header"))?;
        let reserved = u64::from(get_u32(h, 40).ok_or_else(|| bad("short header"))?);
        if !chunk_size.is_power_of_two()
            || !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk_size)
            || chunk_count.checked_mul(chunk_size) != Some(pool_size)
            || reserved >= chunk_count
        {
            return Err(bad("inconsistent pool geometry"));
        }
        if mem.len() < pool_size {
            return Err(Error::corruption(
                path,
                mem.len(),
                format!("pool file is {} bytes, header says {pool_size}", mem.len()),
            ));
        }
        let bgeo = BitmapGeometry::new(BITMAP_BASE, chunk_count);
        if bgeo.end() > reserved * chunk_size {
            return Err(bad("bitmap does not fit the header region"));
        }
        let alloc = Allocator::load(&mem, bgeo, chunk_size, path)?;
        Ok(Pool {
            mem,
            path: path.to_path_buf(),
            chunk_size,
            chunk_count,
            reserved_chunks: reserved,
            alloc,
            created: false,
            epochs: (0..chunk_count).map(|_| AtomicU64::new(0)).collect(),
            headroom: AtomicU64::new(0),
            released: Mutex::new(Vec::new()),
            durable_logs: AtomicBool::new(false),
            journal: None,
        })
    }

    /// Notes that a log was synced: the store takes durable writes, so new FastStore
    /// log segments are pre-written (see [`Mem::prewrite_zeros`]).
    pub fn note_durable_log(&self) {
        if !self.durable_logs.load(Ordering::Relaxed) {
            self.durable_logs.store(true, Ordering::Relaxed);
        }
    }

    /// Whether new FastStore log segments are pre-written (a log was synced, and
    /// `Options::log_prewrite`, [`super::persist::LogIo`]).
    pub fn prewrites_logs(&self) -> bool {
        self.durable_logs.load(Ordering::Relaxed)
            && self.mem.log_io().prewrite
            && self.journal.is_none()
    }

    /// Makes FastStore log ranges durable through `journal` from now on (at open,
    /// after the journal's redo).
    pub(crate) fn set_journal(&mut self, journal: super::journal::Journal) {
        self.journal = Some(journal);
    }

    /// The sync journal, if this store uses one.
    pub(crate) fn journal(&self) -> Option<&super::journal::Journal> {
        self.journal.as_ref()
    }

    /// Sets how logs reach a file-backed pool (at open, before any log is written).
    pub(crate) fn set_log_io(&mut self, io: super::persist::LogIo) {
        self.mem.set_log_io(io);
    }

    /// The persistence seam.
    pub fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Pool file path (used in error messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes per chunk.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// Chunks in the pool, header region included.
    pub fn chunk_count(&self) -> u64 {
        self.chunk_count
    }

    /// Chunks taken by the header region.
    pub fn reserved_chunks(&self) -> u64 {
        self.reserved_chunks
    }

    /// True if this open created the pool.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The persistence backend in use.
    pub fn backend(&self) -> Backend {
        self.mem.backend()
    }

    /// The chunk allocator.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }

    /// Byte offset of chunk `c`.
    pub fn chunk_offset(&self, c: u64) -> u64 {
        c * self.chunk_size
    }

    /// Allocates `span` chunks for `kind`; their header is durable before the bitmap
    /// calls them allocated (see [`Allocator::alloc`]), so recovery never meets an
    /// allocated chunk without a valid header. `owner: None` uses the allocation's
    /// (unique) epoch as the owner id.
    pub fn alloc_chunk(
        &self,
        kind: ChunkKind,
        span: u64,
        owner: Option<u64>,
        seq: u64,
        aux: u64,
        class: AllocClass,
    ) -> Result<(Allocation, ChunkHeader)> {
        match self.try_alloc(kind, span, owner, seq, aux, class) {
            Err(Error::PoolFull { .. }) if self.free_released()? > 0 => {
                self.try_alloc(kind, span, owner, seq, aux, class)
            }
            other => other,
        }
    }

    fn try_alloc(
        &self,
        kind: ChunkKind,
        span: u64,
        owner: Option<u64>,
        seq: u64,
        aux: u64,
        class: AllocClass,
    ) -> Result<(Allocation, ChunkHeader)> {
        let span16 =
            u16::try_from(span).map_err(|_| Error::invalid("allocation spans too many chunks"))?;
        let keep_free = match class {
            AllocClass::Writes => self.headroom.load(Ordering::Relaxed),
            AllocClass::Upkeep => 0,
        };
        let mut header = None;
        let a = self
            .alloc
            .alloc(&self.mem, span, keep_free, |chunk, epoch| {
                let h = ChunkHeader {
                    kind,
                    span: span16,
                    epoch,
                    owner: owner.unwrap_or(epoch),
                    seq,
                    aux,
                };
                self.mem.persist(self.chunk_offset(chunk), &h.encode())?;
                header = Some(h);
                Ok(())
            })?;
        let h = header.ok_or_else(|| Error::Internal("chunk header not written".into()))?;
        self.note_epoch(a.chunk, span, a.epoch);
        Ok((a, h))
    }

    /// Records that chunks `[chunk, chunk+span)` carry `epoch` (recovery calls this for
    /// every valid header it finds).
    pub fn note_epoch(&self, chunk: u64, span: u64, epoch: u64) {
        for c in chunk..chunk.saturating_add(span) {
            if let Some(e) = self.epochs.get(usize_from(c)) {
                e.store(epoch, Ordering::Release);
            }
        }
    }

    /// Epoch of the allocation holding byte `off` (0 if unknown).
    pub fn epoch_at(&self, off: u64) -> u64 {
        self.epochs
            .get(usize_from(off / self.chunk_size))
            .map_or(0, |e| e.load(Ordering::Acquire))
    }

    /// Frees allocations with one bitmap persist. Headers are left in place: a chunk
    /// is re-initialised (new header, new epoch) before it is allocated again, and
    /// stale records in it fail their epoch-seeded checksums.
    pub fn free_chunks(&self, runs: &[(u64, u64)]) -> Result<()> {
        for &(c, span) in runs {
            self.note_epoch(c, span, 0);
        }
        self.alloc.free_many(&self.mem, runs)
    }

    /// Queues an allocation for freeing: its last holder let go. Freed by the next
    /// [`Pool::free_released`] (background threads call it after each job, an
    /// allocation that finds the pool full calls it before giving up).
    pub fn release(&self, chunk: u64, span: u64) {
        self.released.lock().push((chunk, span));
    }

    /// Frees every queued allocation with one bitmap persist; returns how many.
    pub fn free_released(&self) -> Result<usize> {
        let runs = std::mem::take(&mut *self.released.lock());
        if runs.is_empty() {
            return Ok(0);
        }
        match self.free_chunks(&runs) {
            Ok(()) => Ok(runs.len()),
            Err(e) => {
                // Keep them queued: the next attempt frees them.
                self.released.lock().extend(runs);
                Err(e)
            }
        }
    }

    /// Sets the headroom ordinary writes leave free (in chunks).
    pub fn set_headroom(&self, chunks: u64) {
        self.headroom.store(chunks, Ordering::Relaxed);
    }

    /// Chunks currently free (not counting ones waiting in the release queue).
    pub fn free_chunk_count(&self) -> u64 {
        self.chunk_count - self.alloc.used_chunks()
    }

    /// Reads the header of chunk `c` if it is allocated and valid.
    pub fn chunk_header(&self, c: u64) -> Result<Option<ChunkHeader>> {
        if c < self.reserved_chunks || c >= self.chunk_count || !self.alloc.is_allocated(c) {
            return Ok(None);
        }
        Ok(ChunkHeader::decode(
            self.mem.read(self.chunk_offset(c), CHUNK_HEADER_LEN)?,
        ))
    }

    /// Bytes in allocated chunks (header region included).
    pub fn used_bytes(&self) -> u64 {
        self.alloc.used_chunks() * self.chunk_size
    }

    /// Bytes in free chunks.
    pub fn free_bytes(&self) -> u64 {
        (self.chunk_count - self.alloc.used_chunks()) * self.chunk_size
    }
}

fn validate_geometry(geo: PoolGeometry) -> Result<()> {
    if geo.chunk_size > 0 && geo.pool_size / geo.chunk_size > u64::from(u32::MAX) {
        return Err(Error::invalid(format!(
            "pool_size {} holds more than 2^32 chunks of {} bytes",
            geo.pool_size, geo.chunk_size
        )));
    }
    if !geo.chunk_size.is_power_of_two() || geo.chunk_size < MIN_CHUNK || geo.chunk_size > MAX_CHUNK
    {
        return Err(Error::invalid(format!(
            "chunk_size {} must be a power of two between {MIN_CHUNK} and {MAX_CHUNK}",
            geo.chunk_size
        )));
    }
    if geo.pool_size < 4 * geo.chunk_size {
        return Err(Error::invalid(format!(
            "pool_size {} must hold at least 4 chunks of {} bytes",
            geo.pool_size, geo.chunk_size
        )));
    }
    Ok(())
}

/// The 64-byte pool header for this geometry (a fresh pool id), checksummed.
pub(super) fn encode_header(
    chunk_count: u64,
    chunk_size: u64,
    reserved: u64,
) -> Result<[u8; usize_from(HEADER_LEN)]> {
    let mut h = [0u8; usize_from(HEADER_LEN)];
    h[0..8].copy_from_slice(MAGIC);
    put_u32(&mut h, 8, FORMAT_VERSION);
    put_u32(&mut h, 12, HEADER_LEN_FIELD);
    put_u64(&mut h, 16, chunk_count * chunk_size);
    put_u64(&mut h, 24, chunk_size);
    put_u64(&mut h, 32, chunk_count);
    let reserved32 = u32::try_from(reserved)
        .map_err(|_| Error::invalid("the pool's header region is too large"))?;
    put_u32(&mut h, 40, reserved32);
    put_u64(&mut h, 48, pool_id_seed());
    let crc = crc32c(&h[0..60]);
    put_u32(&mut h, 60, crc);
    Ok(h)
}

fn pool_id_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut seed = t.to_le_bytes().to_vec();
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    crate::coding::hash64(&seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> PoolGeometry {
        PoolGeometry {
            pool_size: 1 << 20,
            chunk_size: MIN_CHUNK,
        }
    }

    #[test]
    fn create_reopen_and_reject_foreign_files() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("ckv-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", e))?;
        let path = dir.join("pool");
        let dev = Device::File { dax: None };
        assert!(matches!(
            Pool::open(&path, &dev, geo(), false),
            Err(Error::NotAStore(_))
        ));
        let (a, _) = {
            let p = Pool::open(&path, &dev, geo(), true)?;
            assert!(p.created());
            p.alloc_chunk(ChunkKind::Log, 1, Some(9), 0, 0, AllocClass::Upkeep)?
        };
        let p = Pool::open(&path, &dev, geo(), true)?;
        assert!(!p.created());
        let h = p.chunk_header(a.chunk)?;
        assert_eq!(h.map(|h| (h.kind, h.owner)), Some((ChunkKind::Log, 9)));
        drop(p);
        // A newer version is refused.
        let mut bytes = std::fs::read(&path).map_err(|e| Error::io("read", e))?;
        put_u32(&mut bytes, 8, FORMAT_VERSION + 1);
        let crc = crc32c(&bytes[0..60]);
        put_u32(&mut bytes, 60, crc);
        std::fs::write(&path, &bytes).map_err(|e| Error::io("write", e))?;
        assert!(matches!(
            Pool::open(&path, &dev, geo(), true),
            Err(Error::UnsupportedVersion { .. })
        ));
        // A flipped header bit is a checksum error.
        bytes[20] ^= 1;
        std::fs::write(&path, &bytes).map_err(|e| Error::io("write", e))?;
        assert!(matches!(Pool::open(&path, &dev, geo(), true), Err(e) if e.is_corruption()));
        // A foreign file is not a store.
        std::fs::write(&path, vec![7u8; 4096]).map_err(|e| Error::io("write", e))?;
        assert!(matches!(
            Pool::open(&path, &dev, geo(), true),
            Err(Error::NotAStore(_))
        ));
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("rm", e))?;
        Ok(())
    }

    #[test]
    fn bad_geometry_is_invalid_argument() {
        let dev = Device::Sim(Arc::new(SimDevice::new(1 << 20)));
        let g = PoolGeometry {
            pool_size: 1 << 20,
            chunk_size: 1000,
        };
        assert!(matches!(
            Pool::open(Path::new("x"), &dev, g, true),
            Err(Error::InvalidArgument(_))
        ));
    }
}
