//! Byte sweeps over logs: torn tails end a log cleanly, damage followed by records
//! that were durable is `Corruption`, stale records of a reused chunk never come back.

use crate::coding::usize_from;
use std::path::Path;
use std::sync::Arc;

use crate::error::Error;
use crate::log::{self, Kind, LogWriter, RecordIn};
use crate::pmem::persist::LogIo;
use crate::pmem::sim::CrashMode;
use crate::pmem::{AllocClass, Device, Pool, PoolGeometry, SimDevice, CHUNK_HEADER_LEN};

const CHUNK: u64 = 64 << 10;

fn pool_on(dev: Arc<SimDevice>) -> Pool {
    let geo = PoolGeometry {
        pool_size: dev.len(),
        chunk_size: CHUNK,
    };
    Pool::open(Path::new("sim-pool"), &Device::Sim(dev), geo, true)
        .unwrap_or_else(|e| panic!("pool: {e}"))
}

/// Writes `n` synced puts to one log and returns (pool, record addresses).
fn synced_log(n: u64) -> (Arc<SimDevice>, Arc<Pool>, Vec<u64>) {
    write_log(n, false)
}

/// [`synced_log`], sealed at the end if `seal`.
fn write_log(n: u64, seal: bool) -> (Arc<SimDevice>, Arc<Pool>, Vec<u64>) {
    let dev = Arc::new(SimDevice::new(2 << 20));
    let pool = Arc::new(pool_on(dev.clone()));
    let mut w = LogWriter::new(pool.clone(), 1);
    let mut addrs = Vec::new();
    for i in 0..n {
        let key = format!("key{i:04}");
        let val = vec![i.to_le_bytes()[0]; (i % 50) as usize];
        let a = w
            .append(
                &RecordIn {
                    kind: Kind::Put,
                    lsn: i + 1,
                    in_batch: false,
                    key: key.as_bytes(),
                    value: &val,
                },
                AllocClass::Upkeep,
            )
            .unwrap_or_else(|e| panic!("append: {e}"));
        w.sync().unwrap_or_else(|e| panic!("sync: {e}"));
        addrs.push(a);
    }
    if seal {
        w.seal().unwrap_or_else(|e| panic!("seal: {e}"));
    }
    (dev, pool, addrs)
}

fn replayed(pool: &Pool) -> Result<Vec<u64>, Error> {
    let d = log::discover(pool)?;
    let mut lsns = Vec::new();
    for l in &d.logs {
        log::replay(pool, l, |r, _| {
            lsns.push(r.lsn);
            Ok(())
        })?;
    }
    Ok(lsns)
}

fn reopen(img: Vec<u8>) -> Pool {
    pool_on(Arc::new(SimDevice::from_image(img)))
}

#[test]
fn torn_tail_at_every_offset_ends_the_log_cleanly() {
    let (dev, _pool, addrs) = synced_log(40);
    let clean = dev.crash_image(CrashMode::DropAll);
    // Damage the last three records at every byte: zero from that byte to the end of
    // the chunk, as a tail that never reached media would look.
    let first = addrs[addrs.len() - 3];
    let chunk_end = (first / CHUNK + 1) * CHUNK;
    for cut in first..chunk_end.min(first + 400) {
        let mut img = clean.clone();
        for b in &mut img[usize_from(cut)..usize_from(chunk_end)] {
            *b = 0;
        }
        let pool = reopen(img);
        let got = replayed(&pool).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole = addrs.iter().filter(|a| **a < cut).count();
        // Records that start before the cut survive only if they end before it.
        assert!(
            got.len() == whole || got.len() + 1 == whole,
            "cut {cut}: {} of {whole}",
            got.len()
        );
        assert_eq!(
            got,
            (1..=got.len() as u64).collect::<Vec<_>>(),
            "cut {cut}: not a prefix"
        );
    }
}

#[test]
fn damaged_record_followed_by_durable_records_is_corruption() {
    let (dev, _pool, addrs) = synced_log(40);
    let clean = dev.crash_image(CrashMode::DropAll);
    for (i, a) in addrs.iter().enumerate().take(35).skip(1) {
        for byte in [0u64, 5, 12, 17] {
            let mut img = clean.clone();
            img[usize_from(a + byte)] ^= 0x40;
            let pool = reopen(img);
            match replayed(&pool) {
                Err(e) => assert!(e.is_corruption(), "record {i}: {e}"),
                Ok(l) => panic!(
                    "record {i} byte {byte}: flip went unnoticed, replayed {}",
                    l.len()
                ),
            }
        }
    }
}

#[test]
fn stale_records_of_a_reused_chunk_do_not_come_back() {
    let (_dev, pool, addrs) = synced_log(60);
    let d = log::discover(&pool).unwrap_or_else(|e| panic!("discover: {e}"));
    let segs: Vec<(u64, u64)> = d.logs[0]
        .segments
        .iter()
        .map(|s| (s.chunk, s.span))
        .collect();
    pool.free_chunks(&segs)
        .unwrap_or_else(|e| panic!("free: {e}"));
    // A new log reuses the chunk and writes fewer records over the old ones.
    let mut w = LogWriter::new(pool.clone(), 2);
    for i in 0..3u64 {
        w.append(
            &RecordIn {
                kind: Kind::Put,
                lsn: 1000 + i,
                in_batch: false,
                key: b"fresh",
                value: b"v",
            },
            AllocClass::Upkeep,
        )
        .unwrap_or_else(|e| panic!("append: {e}"));
    }
    w.sync().unwrap_or_else(|e| panic!("sync: {e}"));
    assert_eq!(w.segments()[0].chunk(), segs[0].0, "chunk was not reused");
    assert!(addrs.len() > 3);
    assert_eq!(
        replayed(&pool).unwrap_or_else(|e| panic!("replay: {e}")),
        vec![1000, 1001, 1002]
    );
}

#[test]
fn corrupted_chunk_header_or_missing_segment_is_reported() {
    let dev = Arc::new(SimDevice::new(2 << 20));
    let pool = Arc::new(pool_on(dev.clone()));
    let mut w = LogWriter::new(pool.clone(), 1);
    for i in 0..3000u64 {
        w.append(
            &RecordIn {
                kind: Kind::Put,
                lsn: i + 1,
                in_batch: false,
                key: &i.to_be_bytes(),
                value: &[7u8; 40],
            },
            AllocClass::Upkeep,
        )
        .unwrap_or_else(|e| panic!("append: {e}"));
    }
    w.sync().unwrap_or_else(|e| panic!("sync: {e}"));
    let segs: Vec<(u64, u64)> = w.segments().iter().map(|s| (s.chunk(), s.span())).collect();
    assert!(segs.len() >= 3, "need several segments, got {}", segs.len());
    let img = dev.crash_image(CrashMode::DropAll);
    // Destroy the header of a middle segment: the log now has a gap.
    let mut bad = img.clone();
    let mid = segs[1].0 * CHUNK;
    for b in &mut bad[usize_from(mid)..usize_from(mid + CHUNK_HEADER_LEN)] {
        *b = 0xFF;
    }
    let err = log::discover(&reopen(bad))
        .map(|_| ())
        .err()
        .unwrap_or_else(|| panic!("gap not noticed"));
    assert!(err.is_corruption(), "{err}");
    // Damage inside a completed (non-last) segment is corruption even without marks.
    let mut bad = img;
    let off = segs[0].0 * CHUNK + CHUNK / 2;
    bad[usize_from(off)] ^= 1;
    let err = replayed(&reopen(bad))
        .err()
        .unwrap_or_else(|| panic!("damage in a completed segment not noticed"));
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn a_sealed_log_reports_damage_to_its_last_records() {
    let (dev, pool, addrs) = synced_log(10);
    let unsealed = dev.crash_image(CrashMode::DropAll);
    // Where the last record ends (and the seal will start).
    let mut seal_at = 0;
    for l in &log::discover(&pool)
        .unwrap_or_else(|e| panic!("discover: {e}"))
        .logs
    {
        log::replay(&pool, l, |r, a| {
            seal_at = a + r.len;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("replay: {e}"));
    }
    // Power lost right after the last sync: the mark that sync appended was not yet
    // durable, so nothing vouches for the last record and a flip there reads as a
    // torn tail.
    let last = addrs[addrs.len() - 1];
    let mut img = unsealed.clone();
    img[usize_from(last + 12)] ^= 0x04;
    assert_eq!(replayed(&reopen(img)).map(|l| l.len()).ok(), Some(9));
    // A process crash keeps what was written (the page cache holds it): the mark is
    // there, so the same flip in the last synced record is corruption.
    let killed = dev.crash_image(CrashMode::KeepAll);
    assert_eq!(
        replayed(&reopen(killed.clone())).map(|l| l.len()).ok(),
        Some(10)
    );
    for byte in [0u64, 5, 12, 17] {
        let mut img = killed.clone();
        img[usize_from(last + byte)] ^= 0x04;
        match replayed(&reopen(img)) {
            Err(e) => assert!(e.is_corruption(), "byte {byte}: {e}"),
            Ok(l) => panic!(
                "byte {byte}: flip in the last synced record unnoticed ({})",
                l.len()
            ),
        }
    }
    // A writer that never wrote has nothing to seal.
    let mut w = LogWriter::new(pool.clone(), 2);
    w.seal()
        .unwrap_or_else(|e| panic!("seal of an empty writer: {e}"));
    // A seal (what a clean close writes) vouches for every byte before it.
    let (dev, _pool, same) = write_log(10, true);
    assert_eq!(same, addrs, "the same log, laid out the same way");
    let sealed = dev.crash_image(CrashMode::DropAll);
    assert_eq!(
        replayed(&reopen(sealed.clone())).map(|l| l.len()).ok(),
        Some(10)
    );
    for a in addrs.iter().copied().chain([seal_at]) {
        for byte in [0u64, 5, 11, 16, 20] {
            let mut img = sealed.clone();
            img[usize_from(a + byte)] ^= 0x10;
            match replayed(&reopen(img)) {
                Err(e) => assert!(e.is_corruption(), "record at {a} byte {byte}: {e}"),
                // Damage to the seal itself loses nothing: every record before it is
                // whole, and the log ends there.
                Ok(l) if a == seal_at => assert_eq!(l.len(), 10),
                Ok(l) => panic!("record at {a} byte {byte}: unnoticed, replayed {}", l.len()),
            }
        }
    }
}

#[test]
fn a_torn_log_sealed_by_recovery_reports_later_damage() {
    // A log whose last records never reached media: zero everything after record 7.
    let (dev, _pool, addrs) = synced_log(10);
    let mut img = dev.crash_image(CrashMode::DropAll);
    let cut = addrs[7];
    let chunk_end = (cut / CHUNK + 1) * CHUNK;
    for b in &mut img[usize_from(cut)..usize_from(chunk_end)] {
        *b = 0x5A; // garbage, as a torn write may leave
    }
    let dev = Arc::new(SimDevice::from_image(img));
    let pool = pool_on(dev.clone());
    let d = log::discover(&pool).unwrap_or_else(|e| panic!("discover: {e}"));
    let mut tails = Vec::new();
    for l in &d.logs {
        let end = log::replay(&pool, l, |_, _| Ok(())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(end.records, 7);
        tails.extend(end.torn_at);
    }
    assert_eq!(tails.len(), 1, "the torn tail is reported");
    assert_eq!(tails[0].addr, cut);
    log::seal_torn_tail(&pool, &tails[0]).unwrap_or_else(|e| panic!("seal: {e}"));
    // The sealed log replays the same records and ends at the seal.
    assert_eq!(replayed(&pool).map(|l| l.len()).ok(), Some(7));
    // Fenced: even an image that drops every unfenced line holds the seal.
    let sealed = dev.crash_image(CrashMode::DropAll);
    // Now a flip in any earlier record is corruption, not a shorter log.
    for (i, a) in addrs.iter().enumerate().take(7) {
        let mut img = sealed.clone();
        img[usize_from(a + 12)] ^= 0x02;
        match replayed(&reopen(img)) {
            Err(e) => assert!(e.is_corruption(), "record {i}: {e}"),
            Ok(l) => panic!("record {i}: flip unnoticed, replayed {}", l.len()),
        }
    }
}

/// A batch whose write failed part-way (no segment for its next record) leaves its
/// header and first records in the log; the writer goes on with later writes. Replay
/// drops the unfinished batch — it was never acknowledged — and keeps the rest, even in
/// a sealed log.
#[test]
fn an_unfinished_batch_followed_by_later_writes_is_dropped() {
    let dev = Arc::new(SimDevice::new(2 << 20));
    let pool = Arc::new(pool_on(dev.clone()));
    let mut w = LogWriter::new(pool.clone(), 1);
    let mut put = |kind: Kind, lsn: u64, in_batch: bool, key: &[u8], value: &[u8]| {
        w.append(
            &RecordIn {
                kind,
                lsn,
                in_batch,
                key,
                value,
            },
            AllocClass::Upkeep,
        )
        .unwrap_or_else(|e| panic!("append: {e}"));
    };
    put(Kind::BatchHeader, 0, false, b"", &3u32.to_le_bytes());
    put(Kind::Put, 1, true, b"a", b"1"); // then the write failed
    put(Kind::Put, 2, false, b"b", b"2"); // a later plain write
    put(Kind::BatchHeader, 0, false, b"", &3u32.to_le_bytes());
    put(Kind::Put, 3, true, b"c", b"3"); // failed again, before another batch
    put(Kind::BatchHeader, 0, false, b"", &2u32.to_le_bytes());
    put(Kind::Put, 4, true, b"d", b"4");
    put(Kind::Delete, 5, true, b"e", b"");
    w.seal().unwrap_or_else(|e| panic!("seal: {e}"));
    let img = dev.crash_image(CrashMode::DropAll);
    let pool = reopen(img);
    let d = log::discover(&pool).unwrap_or_else(|e| panic!("discover: {e}"));
    let mut lsns = Vec::new();
    let end = log::replay(&pool, &d.logs[0], |r, _| {
        lsns.push(r.lsn);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("replay: {e}"));
    assert_eq!(lsns, vec![2, 4, 5]);
    assert_eq!(end.torn_batch_records, 2);
}

/// Writes `groups` synced packed records of five entries each (LSNs 1, 2, …); returns
/// the device and the records' addresses.
fn packed_log(groups: u64) -> (Arc<SimDevice>, Vec<u64>) {
    let dev = Arc::new(SimDevice::new(2 << 20));
    let pool = Arc::new(pool_on(dev.clone()));
    let mut w = LogWriter::new(pool.clone(), 1);
    let mut addrs = Vec::new();
    for g in 0..groups {
        let mut packed = Vec::new();
        let base = g * 5 + 1;
        for lsn in base..base + 5 {
            let key = format!("key{lsn:04}");
            let value = (lsn % 3 != 0).then(|| lsn.to_le_bytes());
            log::packed::push(
                &mut packed,
                lsn,
                base,
                key.as_bytes(),
                value.as_ref().map(|v| &v[..]),
            );
        }
        let rec = RecordIn {
            kind: Kind::Packed,
            lsn: base,
            in_batch: false,
            key: &[],
            value: &packed,
        };
        addrs.push(
            w.append(&rec, AllocClass::Upkeep)
                .unwrap_or_else(|e| panic!("append: {e}")),
        );
        w.sync().unwrap_or_else(|e| panic!("sync: {e}"));
    }
    (dev, addrs)
}

/// A packed record (FlatStore §3.2 compact entries) replays entry by entry, is cut
/// whole or not at all by a torn tail, and a flipped bit in a covered one is corruption.
#[test]
fn packed_records_replay_whole_or_not_at_all() {
    let (dev, addrs) = packed_log(12);
    let clean = dev.crash_image(CrashMode::DropAll);
    let pool = reopen(clean.clone());
    let d = log::discover(&pool).unwrap_or_else(|e| panic!("discover: {e}"));
    let mut seen = Vec::new();
    log::replay(&pool, &d.logs[0], |r, a| {
        assert!(r.packed && addrs.contains(&a), "entry of a packed record");
        let want_value = (r.lsn % 3 != 0).then(|| r.lsn.to_le_bytes().to_vec());
        assert_eq!(r.key, format!("key{:04}", r.lsn).as_bytes());
        match want_value {
            Some(v) => assert!(r.kind == Kind::Put && r.value == v.as_slice()),
            None => assert_eq!(r.kind, Kind::Delete),
        }
        seen.push(r.lsn);
        Ok(())
    })
    .unwrap_or_else(|e| panic!("replay: {e}"));
    assert_eq!(seen, (1..=60).collect::<Vec<_>>());
    // A torn tail anywhere in the last record drops it whole.
    let last = addrs[addrs.len() - 1];
    let chunk_end = (last / CHUNK + 1) * CHUNK;
    for cut in last..last + 140 {
        let mut img = clean.clone();
        for b in &mut img[usize_from(cut)..usize_from(chunk_end)] {
            *b = 0;
        }
        let got = replayed(&reopen(img)).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert!(
            got.len() == 55 || got.len() == 60,
            "cut {cut}: {} entries, not whole records",
            got.len()
        );
        assert_eq!(got, (1..=got.len() as u64).collect::<Vec<_>>());
    }
    // Every bit of an earlier (covered) packed record: corruption, never other data.
    let (a, b) = (addrs[3], addrs[4]);
    for bit in 0..(b - a) * 8 {
        let mut img = clean.clone();
        img[usize_from(a + bit / 8)] ^= 1 << (bit % 8);
        match replayed(&reopen(img)) {
            Err(e) => assert!(e.is_corruption(), "bit {bit}: {e}"),
            Ok(l) => assert_eq!(
                l,
                (1..=60).collect::<Vec<_>>(),
                "bit {bit} (padding only may be ignored)"
            ),
        }
    }
}

/// The block-storage path (issue #30): on a file-backed pool a synced log writes its
/// records with `pwrite` (or stores) and pre-writes each new segment, and fences with
/// `msync` (or `fdatasync`). Records must read back through the mapping while the log
/// is open, replay whole after a reopen of the file, a bit flip before a durable mark
/// must still be corruption, and every segment after the first sync must have blocks
/// behind it (pre-written, not a hole).
#[test]
fn file_pool_log_with_pwrite_and_prewritten_segments_replays_whole() {
    file_pool_log_replays_whole(LogIo {
        pwrite: true,
        prewrite: true,
        fdatasync: false,
    });
}

/// The same with the defaults' stores into the mapping and `fdatasync` fences.
#[test]
fn file_pool_log_with_stores_and_fdatasync_replays_whole() {
    file_pool_log_replays_whole(LogIo {
        pwrite: false,
        prewrite: true,
        fdatasync: true,
    });
}

fn file_pool_log_replays_whole(io: LogIo) {
    use std::os::unix::fs::FileExt;
    let dir = std::env::temp_dir().join(format!(
        "ckv-logfile-{}-{}-{}",
        std::process::id(),
        io.pwrite,
        io.fdatasync
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let path = dir.join("pool");
    let geo = PoolGeometry {
        pool_size: 4 << 20,
        chunk_size: CHUNK,
    };
    let dev = Device::File { dax: Some(false) };
    let n = 215u64;
    let (addrs, segs) = {
        let mut pool = Pool::open(&path, &dev, geo, true).unwrap_or_else(|e| panic!("{e}"));
        pool.set_log_io(io);
        let pool = Arc::new(pool);
        let mut w = LogWriter::new(pool.clone(), 1);
        let mut addrs = Vec::new();
        for i in 0..n {
            let key = format!("key{i:04}");
            let val = vec![i.to_le_bytes()[0]; 600];
            let a = w
                .append(
                    &RecordIn {
                        kind: Kind::Put,
                        lsn: i + 1,
                        in_batch: false,
                        key: key.as_bytes(),
                        value: &val,
                    },
                    AllocClass::Upkeep,
                )
                .unwrap_or_else(|e| panic!("append: {e}"));
            // Readable through the mapping at once, before any fence.
            let rec = pool
                .mem()
                .read(a, 16 + 8 + 600)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(
                rec.windows(key.len()).any(|k| k == key.as_bytes()),
                "record {i}"
            );
            w.sync().unwrap_or_else(|e| panic!("sync: {e}"));
            addrs.push(a);
        }
        let segs: Vec<u64> = w
            .segments()
            .iter()
            .map(|s| pool.chunk_offset(s.chunk()))
            .collect();
        assert!(segs.len() >= 3, "only {} segments", segs.len());
        (addrs, segs)
    };
    // Segments allocated after the first sync are pre-written: the far end of the
    // last one, beyond its records, is written zeros — data, not the hole (or
    // unwritten extent) a fresh chunk is.
    let last = segs[segs.len() - 1];
    assert!(
        addrs[addrs.len() - 1] < last + CHUNK / 2,
        "last segment too full to tell"
    );
    let pool = Pool::open(&path, &dev, geo, false).unwrap_or_else(|e| panic!("{e}"));
    let at = last + CHUNK - 4096;
    if let Some(data) = pool.mem().has_data_at(at) {
        assert!(data, "the last segment's tail is a hole");
    }
    assert!(pool
        .mem()
        .read(at, 4096)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .all(|b| *b == 0));
    drop(pool);
    let pool = Pool::open(&path, &dev, geo, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        replayed(&pool).unwrap_or_else(|e| panic!("{e}")),
        (1..=n).collect::<Vec<_>>()
    );
    drop(pool);
    // A flipped bit in a record covered by a later durable mark is corruption.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{e}"));
    let victim = addrs[addrs.len() - 5] + 20;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, victim)
        .unwrap_or_else(|e| panic!("{e}"));
    f.write_all_at(&[b[0] ^ 0x08], victim)
        .unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let pool = Pool::open(&path, &dev, geo, false).unwrap_or_else(|e| panic!("{e}"));
    match replayed(&pool) {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(l) => panic!("flip went unnoticed, replayed {}", l.len()),
    }
    drop(pool);
    let _ = std::fs::remove_dir_all(&dir);
}
