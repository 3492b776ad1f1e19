//! Loom models of the node protocol: every interleaving (up to a preemption bound) of
//! insert, split, remove, Algorithm 1 replacement and optimistic reads on the same
//! tiny nodes (`LEAF_MAX` = `INNER_MAX` = 2 under loom, so the first insert into a full
//! leaf splits it and grows a new root), with `crossbeam-epoch` itself running on loom's
//! atomics (`--cfg crossbeam_loom`), so retiring replaced and removed entries is part
//! of each model. Entries with fixed-size values (all of these) are updated in place
//! through their sequence word, so a replacement is also a seqlock write racing the
//! reader's copy.
//!
//! Run: `RUSTFLAGS="--cfg loom --cfg crossbeam_loom" cargo test --release -p cascadekv
//! --lib olc::loom` (scripts/test.sh does).

use loom::sync::Arc;
use loom::thread;

use super::Olc;
use crate::epoch::Snapshots;
use crate::faststore::version::{ver, Val};
use crate::faststore::PutOutcome;

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(1, f);
}

/// `model` with up to `bound` preemptions per execution (unless `LOOM_MAX_PREEMPTIONS`
/// says otherwise).
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

fn lsn_of(i: &Olc, k: &[u8]) -> Option<u64> {
    i.get(k).map(|v| v.lsn)
}

/// A reader racing an insert that splits the root leaf (and grows a root) always
/// finds the keys that were there, never a key twice in a scan.
#[test]
fn read_during_split() {
    model(|| {
        let s = Snapshots::default();
        let i = Arc::new(Olc::new());
        i.put_validate(b"a", ver(1, 1, b"a"), &s);
        i.put_validate(b"c", ver(2, 1, b"c"), &s);
        let w = {
            let i = i.clone();
            thread::spawn(move || {
                let s = Snapshots::default();
                assert_eq!(
                    i.put_validate(b"b", ver(3, 1, b"b"), &s),
                    PutOutcome::Inserted
                );
            })
        };
        assert_eq!(lsn_of(&i, b"c"), Some(2));
        let mut out = Vec::new();
        i.collect_range(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            u64::MAX,
            9,
            &mut out,
        );
        let keys: Vec<&[u8]> = out.iter().map(|(k, _)| &k[..]).collect();
        assert!(
            keys == [&b"a"[..], b"c"] || keys == [&b"a"[..], b"b", b"c"],
            "{keys:?}"
        );
        w.join().unwrap_or_else(|_| panic!("writer panicked"));
        assert_eq!(lsn_of(&i, b"a"), Some(1));
        assert_eq!(lsn_of(&i, b"b"), Some(3));
        assert_eq!(lsn_of(&i, b"c"), Some(2));
    });
}

/// Two inserts racing into one full leaf: both land, in order.
#[test]
fn racing_inserts_split_once() {
    model(|| {
        let s = Snapshots::default();
        let i = Arc::new(Olc::new());
        i.put_validate(b"b", ver(1, 1, b"b"), &s);
        i.put_validate(b"d", ver(2, 1, b"d"), &s);
        let w = {
            let i = i.clone();
            thread::spawn(move || {
                let s = Snapshots::default();
                i.put_validate(b"a", ver(3, 1, b"a"), &s);
            })
        };
        i.put_validate(b"c", ver(4, 1, b"c"), &s);
        w.join().unwrap_or_else(|_| panic!("writer panicked"));
        let mut keys = Vec::new();
        i.for_each(|k, _| keys.push(k.to_vec()));
        assert_eq!(keys, [b"a", b"b", b"c", b"d"]);
    });
}

/// An Algorithm 1 replacement and a remove race a reader on one leaf: the reader sees
/// the old or the new version (never freed memory: the replaced and the removed entry
/// are retired through the epoch collector while the reader may hold them).
#[test]
fn replace_and_remove_against_a_reader() {
    model(|| {
        let s = Snapshots::default();
        let i = Arc::new(Olc::new());
        i.put_validate(b"k", ver(1, 1, b"one"), &s);
        i.put_validate(b"x", ver(1, 1, b"x"), &s);
        let w = {
            let i = i.clone();
            thread::spawn(move || {
                let s = Snapshots::default();
                assert_eq!(
                    i.put_validate(b"k", ver(5, 1, b"five"), &s),
                    PutOutcome::Replaced
                );
                assert!(i.remove(b"x"));
            })
        };
        let seen = i.get(b"k").map(|v| (v.lsn, v.val));
        assert!(
            seen == Some((1, Val::inline(b"one"))) || seen == Some((5, Val::inline(b"five"))),
            "{seen:?}"
        );
        let x = i.get(b"x");
        assert!(x.is_none() || x.is_some_and(|v| v.lsn == 1));
        w.join().unwrap_or_else(|_| panic!("writer panicked"));
        assert_eq!(lsn_of(&i, b"k"), Some(5));
        assert_eq!(i.get(b"x"), None);
    });
}

/// Two puts of one key race with different LSNs, one of a fixed-size value (in place)
/// and one of a heap value (a new entry): the newer one wins in either order
/// (Algorithm 1), and the loser's outcome says so.
#[test]
fn racing_lsns_newest_wins() {
    model(|| {
        let s = Snapshots::default();
        let i = Arc::new(Olc::new());
        i.put_validate(b"k", ver(1, 1, b"one"), &s);
        let w = {
            let i = i.clone();
            thread::spawn(move || {
                let s = Snapshots::default();
                // A heap value: the entry turns into a chain and back, so both
                // swaps retire an entry through the collector.
                let v = crate::faststore::version::Version {
                    lsn: 3,
                    epoch: 1,
                    val: Val::Heap(vec![3; 20].into()),
                };
                i.put_validate(b"k", v, &s)
            })
        };
        let mine = i.put_validate(b"k", ver(5, 1, b"five"), &s);
        let theirs = w.join().unwrap_or_else(|_| panic!("writer panicked"));
        assert_eq!(mine, PutOutcome::Replaced);
        assert!(matches!(theirs, PutOutcome::Replaced | PutOutcome::Stale));
        assert_eq!(lsn_of(&i, b"k"), Some(5));
    });
}

/// An in-place update of a fixed-size version (the entry's seqlock, `entry.rs`) races
/// an insert that splits the same full leaf (moving the updated entry to the new right
/// leaf) and then an optimistic read of the key: the reader sees the old or the new
/// (lsn, value) pair whole — never one's LSN with the other's value — wherever the
/// update is, and the update is never lost to the split. (Two threads: a third, a
/// reader racing the split too, multiplies the model's run time; `read_during_split`
/// covers that race.)
#[test]
fn in_place_update_against_a_split_and_a_reader() {
    model_bounded(2, || {
        let s = Snapshots::default();
        let i = Arc::new(Olc::new());
        i.put_validate(b"b", ver(1, 1, b"b"), &s);
        i.put_validate(b"c", ver(2, 1, b"two"), &s);
        let up = {
            let i = i.clone();
            thread::spawn(move || {
                let s = Snapshots::default();
                assert_eq!(
                    i.put_validate(b"c", ver(5, 1, b"five"), &s),
                    PutOutcome::Replaced
                );
            })
        };
        // Splits the full leaf [b, c]: `c` moves to the new right leaf.
        assert_eq!(
            i.put_validate(b"a", ver(3, 1, b"a"), &s),
            PutOutcome::Inserted
        );
        let seen = i.get(b"c").map(|v| (v.lsn, v.val));
        assert!(
            seen == Some((2, Val::inline(b"two"))) || seen == Some((5, Val::inline(b"five"))),
            "torn or lost: {seen:?}"
        );
        up.join().unwrap_or_else(|_| panic!("updater panicked"));
        let got = i.get(b"c").map(|v| (v.lsn, v.val));
        assert_eq!(got, Some((5, Val::inline(b"five"))));
        assert_eq!(lsn_of(&i, b"a"), Some(3));
        assert_eq!(lsn_of(&i, b"b"), Some(1));
    });
}
