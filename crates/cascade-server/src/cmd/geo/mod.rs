//! Geo sets: `GEOADD GEODIST GEOHASH GEOPOS`, and the argument parsing and reply
//! formats the searches (`search.rs`) share. A place is a zset member whose score
//! is its 52-bit geohash (`types/geohash.rs`), so scores equal Redis's and every zset
//! command works on a geo set. Error texts and number formats follow Redis 7.0
//! (`geo.c`). Data commands: GEOADD is ZADD with computed scores; the others are
//! point reads.

pub(crate) mod search;

use super::args::parse_f64;
use super::zsets::{member_score, zadd};
use super::{is, spec, Run::Data, Spec, KEY1, R};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::Type;
use crate::resp::parse::Command;
use crate::resp::reply::{self, Out};
use crate::store::Tx;
use crate::types::geohash;

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
];

/// A double argument with Redis's text for a bad one (`None`: the generic text).
pub(super) fn double(arg: &[u8], what: Option<&str>) -> CmdResult<f64> {
    parse_f64(arg).ok_or_else(|| match what {
        Some(w) => CmdError::err(w),
        None => CmdError::NotFloat,
    })
}

pub(super) fn lon_lat(c: &Command, at: usize) -> CmdResult<(f64, f64)> {
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

pub(super) fn unit(arg: &[u8]) -> CmdResult<f64> {
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
pub(super) fn radius(c: &Command, at: usize) -> CmdResult<(f64, f64)> {
    let r = double(c.arg(at), Some("need numeric radius"))?;
    if r < 0.0 {
        return Err(CmdError::err("radius cannot be negative"));
    }
    Ok((r, unit(c.arg(at + 1))?))
}

/// `width height unit` at `at`.
pub(super) fn boxed(c: &Command, at: usize) -> CmdResult<(f64, f64, f64)> {
    let w = double(c.arg(at), Some("need numeric width"))?;
    let h = double(c.arg(at + 1), Some("need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::err("height or width cannot be negative"));
    }
    Ok((w, h, unit(c.arg(at + 2))?))
}

/// A distance as Redis prints one: 4 decimals, rounded half to even.
pub(super) fn fmt_distance(d: f64) -> String {
    let v = (d * 10_000.0).round_ties_even();
    format!("{:.4}", v / 10_000.0)
}

/// A coordinate as Redis prints one (`%.17Lf`, trailing zeros dropped).
pub(super) fn fmt_coord(d: f64) -> String {
    let s = format!("{d:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

pub(super) fn coord(out: &mut Out, d: f64) {
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
pub(super) fn zset_exists(tx: &Tx<'_>, key: &[u8]) -> CmdResult<bool> {
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

pub(super) fn position(tx: &Tx<'_>, key: &[u8], member: &[u8]) -> CmdResult<Option<(f64, f64)>> {
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
}
