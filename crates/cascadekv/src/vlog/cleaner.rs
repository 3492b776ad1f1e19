//! Choosing what log cleaning cleans: victims by dead ratio and free-space pressure
//! (FlatStore §3.4: "whether a block is inserted into a reclaim list depends on both the
//! ratio of live entries in it and the total number of free chunks").
//!
//! A retained segment's *dead ratio* is the share of its bytes no table references
//! (`1 − live / size`, from the manifest's accounting). The bar a segment must clear
//! falls as space gets scarce:
//!
//! | situation | dead ratio at least |
//! |---|---|
//! | normal | `Options::vlog_dead_ratio` (default 0.5: retained values take at most 2× their live bytes) |
//! | idle (no reads or writes for a second) | half of that |
//! | free chunks below 25 % of the pool | half of that |
//! | free chunks below 10 % of the pool | an eighth of that |
//!
//! Victims are taken most-dead first (least copying per byte reclaimed) until their
//! live bytes reach the cycle's budget, so one cleaning is bounded work; the compaction
//! thread runs cycles back to back only while victims remain.

use std::collections::BTreeSet;

use super::RetainedSegments;
use crate::coding::ratio;

/// What the cleaner weighs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pressure {
    /// Free chunks / all chunks.
    pub free_fraction: f64,
    /// No reads or writes lately.
    pub idle: bool,
}

/// The dead ratio a segment must reach to be cleaned under `p`.
pub(crate) fn threshold(base: f64, p: Pressure) -> f64 {
    let mut t = base;
    if p.idle || p.free_fraction < 0.25 {
        t = base / 2.0;
    }
    if p.free_fraction < 0.10 {
        t = base / 8.0;
    }
    t
}

/// The retained segments whose dead ratio reaches the bar under `p`, as (dead ratio,
/// chunk, live bytes): the only ones [`victims`] may pick. Cheap (one pass over the
/// manifest's accounting), so callers check it before working out `exclude`.
pub(crate) fn dead_enough(
    retained: &RetainedSegments,
    chunk_size: u64,
    base: f64,
    p: Pressure,
) -> impl Iterator<Item = (f64, u64, u64)> + '_ {
    let t = threshold(base, p);
    retained.iter().filter_map(move |(c, u)| {
        let size = u.span * chunk_size;
        let live = u.live.min(size);
        let dead = dead_ratio(live, size);
        (dead >= t && dead > 0.0).then_some((dead, c, live))
    })
}

/// Picks victims among `retained`, skipping `exclude`: segments whose dead ratio reaches
/// the threshold, most dead first, until their live bytes reach `budget` (at least one
/// victim if any qualifies) — or none, if copying their live bytes with `writers`
/// relocating threads would not free at least one chunk.
pub(crate) fn victims(
    retained: &RetainedSegments,
    chunk_size: u64,
    base: f64,
    p: Pressure,
    budget: u64,
    exclude: &BTreeSet<u64>,
    writers: u64,
) -> BTreeSet<u64> {
    let mut cands: Vec<(f64, u64, u64)> = dead_enough(retained, chunk_size, base, p)
        .filter(|(_, c, _)| !exclude.contains(c))
        .collect();
    cands.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out = BTreeSet::new();
    let mut moved = 0u64;
    let mut chunks = 0u64;
    for (_, c, live) in cands {
        if !out.is_empty() && moved + live > budget {
            break;
        }
        moved += live;
        chunks += retained.get(c).map_or(0, |u| u.span);
        out.insert(c);
    }
    // Copying must free at least one chunk net, or a cleaning would only move values
    // from one partly filled segment to another (and the last segment a cleaning
    // writes, partly filled, would be picked again and again). Each of the `writers`
    // merge threads may leave one segment partly filled.
    if chunks < chunks_needed(moved, chunk_size) + writers.max(1) {
        out.clear();
    }
    out
}

/// Chunks a cleaning needs to hold `live` record bytes, allowing a sixteenth of each
/// chunk for its header and the tail a record does not fit into.
fn chunks_needed(live: u64, chunk_size: u64) -> u64 {
    let usable = (chunk_size - chunk_size / 16).max(1);
    live.div_ceil(usable)
}

fn dead_ratio(live: u64, size: u64) -> f64 {
    if size == 0 {
        0.0
    } else {
        1.0 - ratio(live, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vlog::SegmentLive;

    #[test]
    fn most_dead_first_within_budget_and_pressure_lowers_the_bar() {
        let cs = 1000;
        let mut r = RetainedSegments::default();
        for (chunk, live) in [(1, 900), (2, 400), (3, 100), (4, 600), (5, 0)] {
            r.add_live(SegmentLive {
                chunk,
                span: 1,
                live,
            });
        }
        let calm = Pressure {
            free_fraction: 0.9,
            idle: false,
        };
        let none = BTreeSet::new();
        // Dead ratios: 1: 0.1, 2: 0.6, 3: 0.9, 4: 0.4, 5: 1.0. Every pick below frees
        // at least one chunk net.
        let v = victims(&r, cs, 0.5, calm, u64::MAX, &none, 1);
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![2, 3, 5]);
        // A budget of 100 live bytes: 5 (0 live), then 3 (100 live); 2 would exceed it.
        let v = victims(&r, cs, 0.5, calm, 100, &none, 1);
        assert_eq!(v.into_iter().collect::<Vec<_>>(), vec![3, 5]);
        // Idle: the bar halves to 0.25, segment 4 (0.4 dead) qualifies.
        let idle = Pressure {
            free_fraction: 0.9,
            idle: true,
        };
        assert!(victims(&r, cs, 0.5, idle, u64::MAX, &none, 1).contains(&4));
        // Nearly full: even segment 1 (0.1 dead) is cleaned.
        let full = Pressure {
            free_fraction: 0.05,
            idle: false,
        };
        assert_eq!(victims(&r, cs, 0.5, full, u64::MAX, &none, 1).len(), 5);
        // Excluded segments are never picked.
        let ex: BTreeSet<u64> = [3].into_iter().collect();
        assert_eq!(
            victims(&r, cs, 0.5, calm, u64::MAX, &ex, 1)
                .into_iter()
                .collect::<Vec<_>>(),
            vec![2, 5]
        );
    }

    #[test]
    fn a_cleaning_that_frees_no_chunk_is_not_started() {
        let cs = 1000;
        let mut r = RetainedSegments::default();
        // Two segments 40 % dead: 1,200 live bytes need two chunks again.
        for chunk in [1, 2] {
            r.add_live(SegmentLive {
                chunk,
                span: 1,
                live: 600,
            });
        }
        let idle = Pressure {
            free_fraction: 0.9,
            idle: true,
        };
        let none = BTreeSet::new();
        assert!(victims(&r, cs, 0.5, idle, u64::MAX, &none, 1).is_empty());
        // A third one makes 1,800 live bytes in three chunks: two suffice.
        r.add_live(SegmentLive {
            chunk: 3,
            span: 1,
            live: 600,
        });
        assert_eq!(victims(&r, cs, 0.5, idle, u64::MAX, &none, 1).len(), 3);
    }
}
