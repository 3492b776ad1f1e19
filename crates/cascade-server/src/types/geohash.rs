//! Geohashes as Redis's GEO commands compute them, so sorted-set scores, positions,
//! distances and search areas equal Redis's.
//!
//! A position is a 52-bit integer score: latitude (over -85.05112878..85.05112878,
//! the Web Mercator limits) and longitude (over -180..180) each scaled to 26 bits,
//! interleaved with latitude in the even bits. Decoding gives the centre of the cell.
//! Distances use the haversine formula with Redis's earth radius, 6372797.560856 m.
//! A search covers the cell containing the centre at a step chosen from the radius,
//! plus its 8 neighbours (Redis's `geohashCalculateAreasByShapeWGS84`), each cell
//! being one score range `[min, max)`; candidates are then filtered by exact
//! distance or box test. Pure functions; any thread.

use std::f64::consts::PI;

/// Longitude limits.
pub(crate) const LONG_MIN: f64 = -180.0;
/// Longitude limits.
pub(crate) const LONG_MAX: f64 = 180.0;
/// Latitude limits (Web Mercator).
pub(crate) const LAT_MIN: f64 = -85.051_128_78;
/// Latitude limits (Web Mercator).
pub(crate) const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate of a stored score.
pub(crate) const STEP_MAX: u8 = 26;
/// Redis's earth radius in metres.
pub(crate) const EARTH_RADIUS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;

/// A cell: `bits` of `2 * step` interleaved bits (`step == 0 && bits == 0`: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hash {
    /// Interleaved bits.
    pub(crate) bits: u64,
    /// Bits per coordinate.
    pub(crate) step: u8,
}

impl Hash {
    const NONE: Hash = Hash { bits: 0, step: 0 };

    fn is_none(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

/// A coordinate range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Range {
    /// Lower end.
    pub(crate) min: f64,
    /// Upper end.
    pub(crate) max: f64,
}

/// The area a cell covers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Area {
    /// Longitudes.
    pub(crate) lon: Range,
    /// Latitudes.
    pub(crate) lat: Range,
}

const WGS_LON: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
const WGS_LAT: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

fn squash(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// Truncates a non-negative offset to an integer cell number, as C's cast does.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the offset is within 0..=2^32 by construction, as in Redis"
)]
fn cell(x: f64) -> u32 {
    x as u32
}

/// Encodes a position at `step` bits per coordinate over the given ranges (`None`
/// outside them).
pub(crate) fn encode_in(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let scale = 2f64.powi(i32::from(step));
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Hash {
        bits: spread(cell(lat_off)) | (spread(cell(lon_off)) << 1),
        step,
    })
}

/// Encodes a position in Redis's ranges.
pub(crate) fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in(WGS_LON, WGS_LAT, lon, lat, step)
}

/// The 52-bit sorted-set score of a position (`None`: out of range).
pub(crate) fn score(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(align52)
}

/// A cell's bits shifted to 52 bits.
pub(crate) fn align52(h: Hash) -> u64 {
    h.bits << (52 - u32::from(h.step) * 2)
}

/// The area of a cell (`None` for the empty cell).
pub(crate) fn decode_area(h: Hash) -> Option<Area> {
    if h.is_none() {
        return None;
    }
    let lat_i = f64::from(squash(h.bits));
    let lon_i = f64::from(squash(h.bits >> 1));
    let div = 2f64.powi(i32::from(h.step));
    let (lat_s, lon_s) = (WGS_LAT.max - WGS_LAT.min, WGS_LON.max - WGS_LON.min);
    Some(Area {
        lat: Range {
            min: WGS_LAT.min + (lat_i / div) * lat_s,
            max: WGS_LAT.min + ((lat_i + 1.0) / div) * lat_s,
        },
        lon: Range {
            min: WGS_LON.min + (lon_i / div) * lon_s,
            max: WGS_LON.min + ((lon_i + 1.0) / div) * lon_s,
        },
    })
}

/// The position (longitude, latitude) a score stands for: its cell's centre.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "C's (uint64_t) cast of a score, as Redis decodes it"
)]
pub(crate) fn decode_score(score: f64) -> Option<(f64, f64)> {
    let bits = if score.is_nan() || score <= 0.0 {
        0
    } else {
        score as u64
    };
    let a = decode_area(Hash {
        bits,
        step: STEP_MAX,
    })?;
    let lon = f64::midpoint(a.lon.min, a.lon.max).clamp(LONG_MIN, LONG_MAX);
    let lat = f64::midpoint(a.lat.min, a.lat.max).clamp(LAT_MIN, LAT_MAX);
    Some((lon, lat))
}

fn deg_rad(d: f64) -> f64 {
    d * (PI / 180.0)
}

fn rad_deg(r: f64) -> f64 {
    r / (PI / 180.0)
}

/// Metres between two latitudes on one meridian.
pub(crate) fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in metres.
pub(crate) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// A search shape, sizes in metres.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Shape {
    /// A circle of this radius.
    Radius(f64),
    /// A box of this width and height.
    Box(f64, f64),
}

/// The distance from the centre if `(lon, lat)` is inside the shape around
/// `(clon, clat)` (Redis's `geoWithinShape`).
pub(crate) fn within(shape: Shape, clon: f64, clat: f64, lon: f64, lat: f64) -> Option<f64> {
    match shape {
        Shape::Radius(r) => {
            let d = distance(clon, clat, lon, lat);
            (d <= r).then_some(d)
        }
        Shape::Box(w, h) => {
            if lat_distance(lat, clat) > h / 2.0 {
                return None;
            }
            if distance(lon, lat, clon, lat) > w / 2.0 {
                return None;
            }
            Some(distance(clon, clat, lon, lat))
        }
    }
}

fn steps_for_radius(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    u8::try_from(step.clamp(1, 26)).unwrap_or(26)
}

/// The bounding box (min lon, min lat, max lon, max lat) of a shape.
fn bounding_box(shape: Shape, lon: f64, lat: f64) -> [f64; 4] {
    let (height, width) = match shape {
        Shape::Radius(r) => (r, r),
        Shape::Box(w, h) => (h / 2.0, w / 2.0),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS);
    let top = rad_deg(width / EARTH_RADIUS / deg_rad(lat + lat_delta).cos());
    let bottom = rad_deg(width / EARTH_RADIUS / deg_rad(lat - lat_delta).cos());
    let south = lat < 0.0;
    [
        if south { lon - bottom } else { lon - top },
        lat - lat_delta,
        if south { lon + bottom } else { lon + top },
        lat + lat_delta,
    ]
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    let x = if d > 0 {
        x.wrapping_add(zz + 1)
    } else {
        (x | zz).wrapping_sub(zz + 1)
    };
    h.bits = (x & (0xaaaa_aaaa_aaaa_aaaau64 >> shift)) | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    let y = if d > 0 {
        y.wrapping_add(zz + 1)
    } else {
        (y | zz).wrapping_sub(zz + 1)
    };
    h.bits = x | (y & (0x5555_5555_5555_5555u64 >> shift));
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// The cells to scan, in Redis's order (centre, N, S, E, W, NE, NW, SE, SW), less
/// those that cannot hold a match and repeats, as Redis leaves them out.
pub(crate) fn search_cells(shape: Shape, lon: f64, lat: f64) -> Vec<Hash> {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape, lon, lat);
    let radius = match shape {
        Shape::Radius(r) => r,
        Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    };
    let mut steps = steps_for_radius(radius, lat);
    let Some(mut hash) = encode(lon, lat, steps) else {
        return Vec::new(); // a centre outside the limits: nothing to scan
    };
    let n = |h: Hash, dx, dy| decode_area(moved(h, dx, dy));
    let too_small = |h: Hash| {
        n(h, 0, 1).is_some_and(|a| a.lat.max < max_lat)
            || n(h, 0, -1).is_some_and(|a| a.lat.min > min_lat)
            || n(h, 1, 0).is_some_and(|a| a.lon.max < max_lon)
            || n(h, -1, 0).is_some_and(|a| a.lon.min > min_lon)
    };
    if steps > 1 && too_small(hash) {
        steps -= 1;
        let Some(h) = encode(lon, lat, steps) else {
            return Vec::new();
        };
        hash = h;
    }
    // centre, N, S, E, W, NE, NW, SE, SW
    let dirs: [(i8, i8); 9] = [
        (0, 0),
        (0, 1),
        (0, -1),
        (1, 0),
        (-1, 0),
        (1, 1),
        (-1, 1),
        (1, -1),
        (-1, -1),
    ];
    let mut cells: Vec<Hash> = dirs.iter().map(|&(dx, dy)| moved(hash, dx, dy)).collect();
    if steps >= 2 {
        if let Some(area) = decode_area(hash) {
            let mut drop = |idx: &[usize]| {
                for &i in idx {
                    cells[i] = Hash::NONE;
                }
            };
            if area.lat.min < min_lat {
                drop(&[2, 8, 7]);
            }
            if area.lat.max > max_lat {
                drop(&[1, 5, 6]);
            }
            if area.lon.min < min_lon {
                drop(&[4, 8, 6]);
            }
            if area.lon.max > max_lon {
                drop(&[3, 7, 5]);
            }
        }
    }
    // Redis skips a cell equal to the last one scanned, except when that was the
    // centre (its `last_processed` index is then 0, which reads as "none").
    let mut out: Vec<Hash> = Vec::with_capacity(9);
    let mut prev_idx = 0usize;
    for (i, &c) in cells.iter().enumerate() {
        if c.is_none() || (prev_idx != 0 && cells[prev_idx] == c) {
            continue;
        }
        out.push(c);
        prev_idx = i;
    }
    out
}

/// The score range `[min, max)` of a cell.
pub(crate) fn cell_scores(h: Hash) -> (u64, u64) {
    let min = align52(h);
    let max = align52(Hash {
        bits: h.bits + 1,
        step: h.step,
    });
    (min, max)
}

/// The standard 11-character geohash string of a score (`GEOHASH`): decoded, then
/// re-encoded over latitude -90..90 as the usual geohash alphabet expects.
pub(crate) fn geohash_string(score: f64) -> Option<String> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score)?;
    let h = encode_in(
        WGS_LON,
        Range {
            min: -90.0,
            max: 90.0,
        },
        lon,
        lat,
        26,
    )
    .unwrap_or(Hash::NONE);
    let mut s = String::with_capacity(11);
    for i in 0..11u32 {
        let idx = if i == 10 {
            0
        } else {
            (h.bits >> (52 - (i + 1) * 5)) & 0x1f
        };
        s.push(char::from(ALPHABET[usize::try_from(idx).unwrap_or(0)]));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_redis_scores() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" 15.087269 37.502669 "Catania"
        assert_eq!(score(13.361_389, 38.115_556), Some(3_479_099_956_230_698));
        assert_eq!(score(15.087_269, 37.502_669), Some(3_479_447_370_796_909));
        assert_eq!(score(181.0, 0.0), None);
        assert_eq!(score(0.0, 86.0), None);
    }

    #[test]
    #[expect(clippy::cast_precision_loss, reason = "52-bit scores are exact")]
    fn decode_round_trips() {
        let (lon, lat) = decode_score(3_479_099_956_230_698.0).expect("decode");
        assert_eq!(format!("{lon:.17}"), "13.36138933897018433");
        assert_eq!(format!("{lat:.17}"), "38.11555639549629859");
        for &(x, y) in &[(0.0, 0.0), (-179.9, -85.0), (179.99, 85.05), (2.35, 48.85)] {
            let s = score(x, y).expect("score");
            let (dx, dy) = decode_score(s as f64).expect("decode");
            assert!(
                (dx - x).abs() < 1e-5 && (dy - y).abs() < 1e-5,
                "{x},{y} -> {dx},{dy}"
            );
        }
    }

    #[test]
    fn distances_and_hash_strings() {
        let d = distance(
            13.361_389_338_970_184,
            38.115_556_395_496_3,
            15.087_267_458_438_873,
            37.502_668_423_331_2,
        );
        assert!((d - 166_274.151_6).abs() < 0.01, "{d}");
        let h = geohash_string(3_479_099_956_230_698.0);
        assert_eq!(h.as_deref(), Some("sqc8b49rny0"));
    }

    #[test]
    fn search_cells_survive_extreme_shapes() {
        assert!(search_cells(Shape::Radius(1.0), 200.0, 0.0).is_empty());
        for shape in [
            Shape::Radius(f64::INFINITY),
            Shape::Radius(0.0),
            Shape::Box(f64::MAX, 1.0),
            Shape::Box(0.0, 0.0),
        ] {
            for (lon, lat) in [(180.0, LAT_MAX), (-180.0, LAT_MIN), (0.0, 0.0)] {
                let cells = search_cells(shape, lon, lat);
                assert!(cells.len() <= 9, "{shape:?} {lon} {lat}");
            }
        }
    }

    #[test]
    fn search_cells_cover_the_centre() {
        let cells = search_cells(Shape::Radius(200_000.0), 15.0, 37.0);
        assert!(!cells.is_empty() && cells.len() <= 9);
        let s = score(15.087_269, 37.502_669).expect("score");
        assert!(cells.iter().any(|&c| {
            let (lo, hi) = cell_scores(c);
            (lo..hi).contains(&s)
        }));
    }
}
