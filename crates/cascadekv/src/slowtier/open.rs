//! Opening the slow tier at store open: the directory's ownership and lock, orphan
//! removal, and the runs the manifest names.
//!
//! Ownership: the first open with a slow directory writes a random store id to
//! `SLOW_ID` in the data directory and to `OWNER` in the slow directory. Every later
//! open compares them and refuses a slow directory that belongs to another store —
//! removing "orphans" there would delete that store's data. `LOCK` in the slow
//! directory is held (flock) for the life of the store, like the data directory's.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use super::file::{sweep_orphans, sync_dir, SlowFile, SlowIo};
use super::tier::{Partition, Run, SlowTier};
use crate::error::{Error, Result};
use crate::manifest::{RunMeta, SlowState};
use crate::table::filter::Filter;
use crate::table::Lst;

const ID_FILE: &str = "SLOW_ID";
const OWNER_FILE: &str = "OWNER";

/// The slow tier of a store being opened, and the lock of its directory.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The tier the manifest describes.
    pub tier: SlowTier,
    /// Held while the store is open (`None` without a slow directory).
    pub lock: Option<std::fs::File>,
    /// Orphan files removed.
    pub orphans: usize,
}

/// Opens the slow tier in `slow_dir` for the store in `data_dir` whose manifest says
/// `state`. `readonly` (a private open for inspection): nothing in either directory is
/// created, locked, written or removed.
///
/// # Errors
/// `InvalidArgument` if the store has slow data but no slow directory was given, or
/// the directory belongs to another store; `Locked`; `Corruption` for a named file
/// that is missing or too short; `Io`.
pub(crate) fn open(
    data_dir: &Path,
    slow_dir: Option<&Path>,
    state: &SlowState,
    readonly: bool,
    io: &Arc<SlowIo>,
) -> Result<Opened> {
    let Some(dir) = slow_dir else {
        if !state.parts.is_empty() {
            return Err(Error::invalid(
                "this store keeps data in a slow tier: open it with its slow directory \
                 (Options::slow_dir, --slow-dir)",
            ));
        }
        return Ok(Opened {
            tier: SlowTier::default(),
            lock: None,
            orphans: 0,
        });
    };
    let (lock, orphans) = if readonly {
        (None, 0)
    } else {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("creating slow directory {}", dir.display()), e))?;
        let lock = crate::db::take_lock(dir)?;
        check_owner(data_dir, dir)?;
        let live: HashSet<u64> = state.files().collect();
        (Some(lock), sweep_orphans(dir, &live)?)
    };
    let mut parts = Vec::with_capacity(state.parts.len());
    for (lo, runs) in &state.parts {
        let mut rs = Vec::with_capacity(runs.len());
        for r in runs {
            let f = Arc::new(SlowFile::open(dir, r.file, io.clone())?);
            for m in &r.lsts {
                if m.base + u64::from(m.size) > f.size() {
                    return Err(Error::corruption(
                        f.path(),
                        m.base,
                        format!("table {} runs past the end of its file", m.id),
                    ));
                }
            }
            let mut filters = load_filters(&f, r).into_iter();
            let lsts = r
                .lsts
                .iter()
                .map(|m| Lst::from_file_meta(m, f.clone(), filters.next().flatten()))
                .collect();
            rs.push(Arc::new(Run::new(r.file, r.weight, lsts, r.filters)));
        }
        parts.push(Partition {
            lo: lo.clone(),
            runs: rs,
        });
    }
    Ok(Opened {
        tier: SlowTier::new(parts),
        lock,
        orphans,
    })
}

/// The filters stored in run `r`'s file, one per table; empty if the section is
/// missing, unreadable or damaged (the tables then build theirs on first use).
fn load_filters(f: &SlowFile, r: &RunMeta) -> Vec<Option<Filter>> {
    let (at, len) = r.filters;
    let Ok(len) = usize::try_from(len) else {
        return Vec::new();
    };
    if len == 0 || at.saturating_add(len as u64) > f.size() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    f.read_into(at, len, &mut buf)
        .ok()
        .and_then(|b| super::filters::decode(f.number(), b, r.lsts.len()))
        .unwrap_or_default()
}

fn read_id(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
    }
}

fn write_id(dir: &Path, name: &str, id: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, format!("{id}\n"))
        .and_then(|()| std::fs::File::open(&tmp).and_then(|f| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    sync_dir(dir)
}

/// Pairs the data directory with the slow directory (see the module docs).
fn check_owner(data_dir: &Path, slow_dir: &Path) -> Result<()> {
    let mine = read_id(&data_dir.join(ID_FILE))?;
    let owner = read_id(&slow_dir.join(OWNER_FILE))?;
    match (mine, owner) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some(a), None) => write_id(slow_dir, OWNER_FILE, &a),
        (None, None) => {
            // The data directory first: a crash between the two leaves a case the
            // next open completes (`Some, None`).
            let id = new_id();
            write_id(data_dir, ID_FILE, &id)?;
            write_id(slow_dir, OWNER_FILE, &id)
        }
        (_, Some(b)) => Err(Error::invalid(format!(
            "slow directory {} belongs to another store (owner {b}); give each store its own",
            slow_dir.display()
        ))),
    }
}

/// The ownership check without its repairs, for inspection (`cascade verify` and
/// `cascade repair`): `InvalidArgument` if `slow_dir` is owned by a store other than
/// the one in `data_dir`. Writes nothing.
///
/// # Errors
/// `InvalidArgument` for another store's directory; `Io` reading the id files.
pub(crate) fn check_owner_readonly(data_dir: &Path, slow_dir: &Path) -> Result<()> {
    let mine = read_id(&data_dir.join(ID_FILE))?;
    match (mine, read_id(&slow_dir.join(OWNER_FILE))?) {
        (Some(a), Some(b)) if a != b => Err(foreign(slow_dir, &b)),
        (None, Some(b)) => Err(foreign(slow_dir, &b)),
        _ => Ok(()),
    }
}

fn foreign(slow_dir: &Path, owner: &str) -> Error {
    Error::invalid(format!(
        "slow directory {} belongs to another store (owner {owner})",
        slow_dir.display()
    ))
}

/// A fresh random-enough store id (time and process id, hashed).
fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:016x}", h.finish())
}
