//! Geo commands over sorted sets: `GEOADD GEODIST GEOHASH GEOPOS GEOSEARCH
//! GEOSEARCHSTORE GEORADIUS GEORADIUS_RO GEORADIUSBYMEMBER GEORADIUSBYMEMBER_RO`.
//! A place is a zset member whose score is its 52-bit geohash (`types/geohash.rs`),
//! so scores equal Redis's and every zset command works on a geo set.
//!
//! A search scans up to 9 score ranges of the zset's score index (the geohash cells
//! around the centre, Redis's choice of cells), keeps the members inside the circle
//! or box, then sorts by distance if asked (COUNT without ANY implies ASC). Replies,
//! error texts and argument order follow Redis 7.0's `georadiusGeneric`. Data
//! commands; the STORE forms write the destination zset in the same batch.

use std::ops::Bound;

use super::args::parse_f64;
use super::zsets::{member_score, split_index, store_zset, zadd, Scored};
use super::{int_arg, is, spec, Keys, Run::Data, Spec, KEY1, R};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{sortable_score, sub_prefix, Type, NS_ZSCORE};
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::geohash::{self, Shape};

const WRITE: &[&str] = &["write", "denyoom"];

/// The commands.
pub(crate) static SPECS: &[Spec] = &[
    spec(
        "geoadd",
        -5,
        WRITE,
        KEY1,
        "geo",
        "Adds places to a geo set.",
        Data(geoadd),
    ),
    spec(
        "geodist",
        -4,
        R,
        KEY1,
        "geo",
        "Distance between two places.",
        Data(geodist),
    ),
    spec(
        "geohash",
        -2,
        R,
        KEY1,
        "geo",
        "Geohash strings of places.",
        Data(geohash_cmd),
    ),
    spec(
        "geopos",
        -2,
        R,
        KEY1,
        "geo",
        "Longitude and latitude of places.",
        Data(geopos),
    ),
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

/// A double argument with Redis's text for a bad one (`None`: the generic text).
fn double(arg: &[u8], what: Option<&str>) -> CmdResult<f64> {
    parse_f64(arg).ok_or_else(|| match what {
        Some(w) => CmdError::err(w),
        None => CmdError::NotFloat,
    })
}

fn lon_lat(c: &Command, at: usize) -> CmdResult<(f64, f64)> {
    let lon = double(c.arg(at), None)?;
    let lat = double(c.arg(at + 1), None)?;
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&lon)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&lat)
    {
        return Err(CmdError::err(format!(
            "invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

fn unit(arg: &[u8]) -> CmdResult<f64> {
    Ok(if is(arg, "m") {
        1.0
    } else if is(arg, "km") {
        1000.0
    } else if is(arg, "ft") {
        0.3048
    } else if is(arg, "mi") {
        1609.34
    } else {
        return Err(CmdError::err(
            "unsupported unit provided. please use M, KM, FT, MI",
        ));
    })
}

/// `radius unit` at `at`: (radius, metres per unit).
fn radius(c: &Command, at: usize) -> CmdResult<(f64, f64)> {
    let r = double(c.arg(at), Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, unit(c.arg(at + 1))?))
}

/// `width height unit` at `at`.
fn boxed(c: &Command, at: usize) -> CmdResult<(f64, f64, f64)> {
    let w = double(c.arg(at), Some("need numeric width"))?;
    let h = double(c.arg(at + 1), Some("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((w, h, unit(c.arg(at + 2))?))
}

/// A distance as Redis prints one: 4 decimals, rounded half to even.
fn fmt_distance(d: f64) -> String {
    let v = (d * 10_000.0).round_ties_even();
    format!("{:.4}", v / 10_000.0)
}

/// A coordinate as Redis prints one (`%.17Lf`, trailing zeros dropped).
fn fmt_coord(d: f64) -> String {
    let s = format!("{d:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn coord(out: &mut Out, d: f64) {
    let s = fmt_coord(d);
    if out.resp3 {
        out.buf.push(b',');
        out.buf.extend_from_slice(s.as_bytes());
        out.buf.extend_from_slice(b"\r\n");
    } else {
        reply::bulk(out, s.as_bytes());
    }
}

/// The live zset at `key` (`WRONGTYPE` for another type).
fn zset_exists(tx: &Tx<'_>, key: &[u8]) -> CmdResult<bool> {
    Ok(tx.typed(key, Type::ZSet)?.is_some())
}

fn geoadd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let (mut nx, mut xx) = (false, false);
    let mut at = 2;
    while at < c.len() {
        let a = c.arg(at);
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if !is(a, "ch") {
            break;
        }
        at += 1;
    }
    if !(c.len() - at).is_multiple_of(3) || (nx && xx) {
        return Err(CmdError::Syntax);
    }
    let mut args: Vec<Vec<u8>> = vec![b"zadd".to_vec()];
    args.extend(c.args().skip(1).take(at - 1).map(<[u8]>::to_vec));
    for i in (at..c.len()).step_by(3) {
        let (lon, lat) = lon_lat(c, i)?;
        let score = geohash::score(lon, lat).ok_or_else(|| {
            CmdError::err(format!("invalid longitude,latitude pair {lon:.6},{lat:.6}"))
        })?;
        args.push(score.to_string().into_bytes());
        args.push(c.arg(i + 2).to_vec());
    }
    zadd(tx, &Command::from_args(&args), out)
}

fn position(tx: &Tx<'_>, key: &[u8], member: &[u8]) -> CmdResult<Option<(f64, f64)>> {
    Ok(member_score(tx, key, member)?.and_then(geohash::decode_score))
}

fn geodist(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let to_m = match c.len() {
        4 => 1.0,
        5 => unit(c.arg(4))?,
        _ => return Err(CmdError::Syntax),
    };
    let key = c.arg(1);
    if !zset_exists(tx, key)? {
        reply::nil(out);
        return Ok(());
    }
    match (position(tx, key, c.arg(2))?, position(tx, key, c.arg(3))?) {
        (Some((x1, y1)), Some((x2, y2))) => {
            let d = geohash::distance(x1, y1, x2, y2) / to_m;
            reply::bulk(out, fmt_distance(d).as_bytes());
        }
        _ => reply::nil(out),
    }
    Ok(())
}

fn geohash_cmd(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let live = zset_exists(tx, key)?;
    reply::array_header(out, c.len() - 2);
    for m in c.args().skip(2) {
        let s = if live {
            member_score(tx, key, m)?.and_then(geohash::geohash_string)
        } else {
            None
        };
        match s {
            Some(s) => reply::bulk(out, s.as_bytes()),
            None => reply::nil(out),
        }
    }
    Ok(())
}

fn geopos(tx: &mut Tx<'_>, c: &Command, out: &mut Out) -> CmdResult<()> {
    let key = c.arg(1);
    let live = zset_exists(tx, key)?;
    reply::array_header(out, c.len() - 2);
    for m in c.args().skip(2) {
        let p = if live { position(tx, key, m)? } else { None };
        match p {
            Some((x, y)) => {
                reply::array_header(out, 2);
                coord(out, x);
                coord(out, y);
            }
            None => reply::nil_array(out),
        }
    }
    Ok(())
}

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
    use super::{fmt_coord, fmt_distance};
    use crate::cmd::testkit::Kit;

    #[test]
    fn formats() {
        assert_eq!(fmt_distance(166_274.151_6), "166274.1516");
        assert_eq!(fmt_distance(0.0), "0.0000");
        assert_eq!(fmt_coord(13.361_389_338_970_184), "13.36138933897018433");
        assert_eq!(fmt_coord(-0.0), "0");
        assert_eq!(fmt_coord(2.0), "2");
    }

    #[test]
    fn sicily() {
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
            &["ZSCORE", "Sicily", "Palermo"],
            "$16\r\n3479099956230698\r\n",
        );
        k.expect(
            &["GEODIST", "Sicily", "Palermo", "Catania"],
            "$11\r\n166274.1516\r\n",
        );
        k.expect(
            &["GEODIST", "Sicily", "Palermo", "Catania", "km"],
            "$8\r\n166.2742\r\n",
        );
        k.expect(&["GEODIST", "Sicily", "Palermo", "Nope"], "$-1\r\n");
        k.expect(
            &["GEOHASH", "Sicily", "Palermo", "Catania", "Nope"],
            "*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n",
        );
        k.expect(
            &["GEOPOS", "Sicily", "Palermo", "Nope"],
            "*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n",
        );
        assert_eq!(
            k.strings(&["GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC"]),
            vec!["Catania", "Palermo"]
        );
        assert_eq!(
            k.strings(&[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYBOX",
                "400",
                "400",
                "km",
                "DESC"
            ]),
            vec!["Palermo", "Catania"]
        );
        k.expect(
            &[
                "GEORADIUS",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "WITHDIST",
                "COUNT",
                "1",
            ],
            "*1\r\n*2\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n",
        );
    }

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
