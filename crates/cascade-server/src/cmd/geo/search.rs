//! Geo searches: `GEOSEARCH GEOSEARCHSTORE GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER
//! GEORADIUSBYMEMBER_RO`, over the geo sets of `mod.rs`.
//!
//! A search scans up to 9 score ranges of the zset's score index (the geohash cells
//! around the centre, Redis's choice of cells, `types/geohash.rs`), keeps the members
//! inside the circle or box, then sorts by distance if asked (COUNT without ANY
//! implies ASC). Replies, error texts and the order of argument checks follow Redis
//! 7.0's `georadiusGeneric`. Data commands; the STORE forms write the destination
//! zset in the same batch.

use std::ops::Bound;

use super::{boxed, coord, fmt_distance, lon_lat, position, radius, zset_exists};
use crate::cmd::zsets::{split_index, store_zset, Scored};
use crate::cmd::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sortable_score, sub_prefix, NS_ZSCORE};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::geohash::{self, Shape};

const WRITE: &[&str] = &["write", "denyoom"];

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "geosearch",
        -7,
        R,
        KEY1,
        "geo",
        "Places within a circle or a box.",
        Data(geosearch),
    ),
    spec(
        "geosearchstore",
        -8,
        WRITE,
        Keys::Range(1, 2, 1),
        "geo",
        "Stores the places within a circle or a box.",
        Data(geosearchstore),
    ),
    // STORE names a key anywhere in the options: every argument is locked as a key.
    spec(
        "georadius",
        -6,
        WRITE,
        Keys::Range(1, -1, 1),
        "geo",
        "Places within a radius of a position.",
        Data(georadius),
    ),
    spec(
        "georadius_ro",
        -6,
        R,
        KEY1,
        "geo",
        "Places within a radius of a position (read-only).",
        Data(georadius_ro),
    ),
    spec(
        "georadiusbymember",
        -5,
        WRITE,
        Keys::Range(1, -1, 1),
        "geo",
        "Places within a radius of a member.",
        Data(georadiusbymember),
    ),
    spec(
        "georadiusbymember_ro",
        -5,
        R,
        KEY1,
        "geo",
        "Places within a radius of a member (read-only).",
        Data(georadiusbymember_ro),
    ),
];

/// Which command form is parsing (Redis's flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// GEORADIUS[_RO]: `key lon lat radius unit`.
    Coords,
    /// GEORADIUSBYMEMBER[_RO]: `key member radius unit`.
    Member,
    /// GEOSEARCH: `key FROM... BY...`.
    Search,
    /// GEOSEARCHSTORE: `dst key FROM... BY...`.
    SearchStore,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// One match.
struct Place {
    member: Vec<u8>,
    dist: f64,
    score: f64,
    lon: f64,
    lat: f64,
}

/// The members of the zset `key` inside `shape` around `(lon, lat)`; with `limit`
/// (COUNT ANY) the scan stops once that many are found.
fn search(
    tx: &Tx<'_>,
    key: &[u8],
    shape: Shape,
    (lon, lat): (f64, f64),
    limit: usize,
) -> CmdResult<Vec<Place>> {
    let prefix = sub_prefix(NS_ZSCORE, key);
    let mut found = Vec::new();
    for cell in geohash::search_cells(shape, lon, lat) {
        if limit > 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::cell_scores(cell);
        let mut lo = prefix.clone();
        #[expect(clippy::cast_precision_loss, reason = "52-bit scores are exact")]
        lo.extend_from_slice(&sortable_score(min as f64));
        let mut hi = prefix.clone();
        #[expect(clippy::cast_precision_loss, reason = "52-bit scores are exact")]
        hi.extend_from_slice(&sortable_score(max as f64));
        for kv in tx.range(Bound::Included(lo), Bound::Excluded(hi))? {
            let (k, _) = kv?;
            let Some((member, score)) = split_index(prefix.len(), &k) else {
                continue;
            };
            let Some((x, y)) = geohash::decode_score(score) else {
                continue;
            };
            if let Some(dist) = geohash::within(shape, lon, lat, x, y) {
                found.push(Place {
                    member,
                    dist,
                    score,
                    lon: x,
                    lat: y,
                });
                if limit > 0 && found.len() >= limit {
                    break;
                }
            }
        }
    }
    Ok(found)
}

#[expect(
    clippy::too_many_lines,
    clippy::many_single_char_names,
    reason = "one parser for the six command forms, in Redis's order of checks"
)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "WITHHASH prints the 52-bit score as an integer, as Redis does"
)]
fn generic(
    tx: &mut Tx<'_>,
    c: &Command,
    out: &mut Out,
    form: Form,
    nostore: bool,
) -> CmdResult<()> {
    let src_at = if form == Form::SearchStore { 2 } else { 1 };
    let src = c.arg(src_at);
    let exists = zset_exists(tx, src)?;
    let mut center = (0.0, 0.0);
    let mut conv = 1.0;
    let mut shape: Option<Shape> = None;
    let mut store: Option<Vec<u8>> = None;
    let mut storedist = false;
    let base = match form {
        Form::Coords => {
            center = lon_lat(c, 2)?;
            let (r, u) = radius(c, 4)?;
            conv = u;
            shape = Some(Shape::Radius(r * u));
            6
        }
        Form::Member => {
            if exists {
                center = position(tx, src, c.arg(2))?
                    .ok_or_else(|| CmdError::err("could not decode requested zset member"))?;
                let (r, u) = radius(c, 3)?;
                conv = u;
                shape = Some(Shape::Radius(r * u));
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            store = Some(c.arg(1).to_vec());
            3
        }
    };
    let searching = matches!(form, Form::Search | Form::SearchStore);
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count = 0i64;
    let remaining = c.len().saturating_sub(base);
    let mut i = 0;
    while i < remaining {
        let at = base + i;
        let a = c.arg(at);
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            sort = Sort::Asc;
        } else if is(a, "desc") {
            sort = Sort::Desc;
        } else if is(a, "count") && i + 1 < remaining {
            count = int_arg(c.arg(at + 1))?;
            if count <= 0 {
                return Err(CmdError::err("COUNT must be > 0"));
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist"))
            && i + 1 < remaining
            && !nostore
            && !searching
        {
            store = Some(c.arg(at + 1).to_vec());
            storedist = is(a, "storedist");
            i += 1;
        } else if is(a, "storedist") && form == Form::SearchStore {
            storedist = true;
        } else if is(a, "frommember") && i + 1 < remaining && searching && !fromloc {
            if exists {
                center = position(tx, src, c.arg(at + 1))?
                    .ok_or_else(|| CmdError::err("could not decode requested zset member"))?;
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && i + 2 < remaining && searching && !frommember {
            center = lon_lat(c, at + 1)?;
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && i + 2 < remaining && searching && !bybox {
            let (r, u) = radius(c, at + 1)?;
            conv = u;
            shape = Some(Shape::Radius(r * u));
            byradius = true;
            i += 2;
        } else if is(a, "bybox") && i + 3 < remaining && searching && !byradius {
            let (w, h, u) = boxed(c, at + 1)?;
            conv = u;
            shape = Some(Shape::Box(w * u, h * u));
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(c.arg(0)).into_owned();
    if store.is_some() && (withdist || withhash || withcoord) {
        return Err(CmdError::err(format!(
            "{} is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
            if form == Form::SearchStore {
                "GEOSEARCHSTORE"
            } else {
                "STORE option in GEORADIUS"
            }
        )));
    }
    if searching && !(frommember || fromloc) {
        return Err(CmdError::err(format!(
            "exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !(byradius || bybox) {
        return Err(CmdError::err(format!(
            "exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::err("the ANY argument requires COUNT argument"));
    }
    let (true, Some(shape)) = (exists, shape) else {
        match store {
            Some(dst) => {
                if let Some(old) = tx.begin(&dst)? {
                    tx.remove(&dst, &old)?;
                }
                reply::int(out, 0);
            }
            None => reply::array_header(out, 0),
        }
        return Ok(());
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let limit = if any {
        usize::try_from(count).unwrap_or(usize::MAX)
    } else {
        0
    };
    let mut found = search(tx, src, shape, center, limit)?;
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if count > 0 {
        found.truncate(usize::try_from(count).unwrap_or(usize::MAX));
    }
    if let Some(dst) = store {
        let items: Vec<Scored> = found
            .into_iter()
            .map(|p| {
                let s = if storedist { p.dist / conv } else { p.score };
                (p.member, s)
            })
            .collect();
        let n = items.len();
        store_zset(tx, &dst, &items)?;
        reply::int(out, i64::try_from(n).unwrap_or(i64::MAX));
        return Ok(());
    }
    let extra = usize::from(withdist) + usize::from(withhash) + usize::from(withcoord);
    reply::array_header(out, found.len());
    for p in &found {
        if extra > 0 {
            reply::array_header(out, extra + 1);
        }
        reply::bulk(out, &p.member);
        if withdist {
            reply::bulk(out, fmt_distance(p.dist / conv).as_bytes());
        }
        if withhash {
            reply::int(out, p.score as i64);
        }
        if withcoord {
            reply::array_header(out, 2);
            coord(out, p.lon);
            coord(out, p.lat);
        }
    }
    Ok(())
}

fn geosearch(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::Search, false)
}

fn geosearchstore(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::SearchStore, false)
}

fn georadius(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::Coords, false)
}

fn georadius_ro(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::Coords, true)
}

fn georadiusbymember(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::Member, false)
}

fn georadiusbymember_ro(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    generic(tx, c, out, Form::Member, true)
}

#[cfg(test)]
mod tests {
    use crate::cmd::testkit::Kit;

    #[test]
    fn store_and_errors() {
        let mut k = Kit::new();
        k.expect(
            &[
                "GEOADD",
                "Sicily",
                "13.361389",
                "38.115556",
                "Palermo",
                "15.087269",
                "37.502669",
                "Catania",
            ],
            ":2\r\n",
        );
        k.expect(
            &[
                "GEOSEARCHSTORE",
                "dst",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST",
            ],
            ":2\r\n",
        );
        k.expect(&["ZSCORE", "dst", "Palermo"], "$1\r\n0\r\n");
        k.expect(
            &[
                "GEOADD",
                "Sicily",
                "XX",
                "CH",
                "13.361389",
                "38.115556",
                "Palermo",
            ],
            ":0\r\n",
        );
        k.expect(
            &["GEOADD", "Sicily", "NX", "XX", "1", "1", "x"],
            "-ERR syntax error\r\n",
        );
        k.expect(
            &["GEOADD", "Sicily", "200", "100", "x"],
            "-ERR invalid longitude,latitude pair 200.000000,100.000000\r\n",
        );
        k.expect(
            &[
                "GEOSEARCH",
                "Sicily",
                "BYRADIUS",
                "1",
                "km",
                "ASC",
                "WITHDIST",
            ],
            "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH\r\n",
        );
        k.expect(
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY"],
            "-ERR the ANY argument requires COUNT argument\r\n",
        );
        k.expect(
            &["GEORADIUS", "Sicily", "15", "37", "200", "yd"],
            "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n",
        );
        k.expect(&["GEORADIUS", "nokey", "15", "37", "200", "km"], "*0\r\n");
        k.expect(
            &[
                "GEORADIUS_RO",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "STORE",
                "x",
            ],
            "-ERR syntax error\r\n",
        );
    }
}
