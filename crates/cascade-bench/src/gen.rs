//! YCSB request generators: the key-number distributions and key naming of YCSB's
//! core package (brianfrankcooper/YCSB, `site.ycsb.generator` and `site.ycsb.Utils`),
//! ported as math, so a CascadeKV run draws the same distributions YCSB does.
//!
//! * [`fnvhash64`] — `Utils.fnvhash64`: 64-bit FNV-1a over the 8 bytes of the value
//!   (low byte first), then Java's `Math.abs` on the signed result.
//! * [`Zipfian`] — `ZipfianGenerator` (Gray et al., SIGMOD 1994): item `base` is the
//!   most popular; zeta is extended incrementally when a draw asks for more items
//!   (`nextLong(itemcount)`), never recomputed when it asks for fewer (unless allowed).
//! * [`ScrambledZipfian`] — `ScrambledZipfianGenerator`: a Zipfian over
//!   [`SCRAMBLED_ITEM_COUNT`]` + 1` items with the precomputed [`SCRAMBLED_ZETAN`],
//!   scattered over `min..=max` by `min + fnvhash64(v) % itemcount`.
//! * [`SkewedLatest`] — `SkewedLatestGenerator`: `latest - zipfian(latest)`, favouring
//!   the most recently inserted key numbers (workload D).
//! * Another Zipfian constant (`cascade bench --zipf-constant`, [`check_zipf_constant`]):
//!   [`ScrambledZipfian::with_theta`] and [`SkewedLatest::with_theta`]. At exactly
//!   [`ZIPFIAN_CONSTANT`] they are the generators above, unchanged. Otherwise the
//!   scrambled generator's inner Zipfian is over the range's own item count with zeta
//!   computed for it (O(items), once), not over 1e10 items as YCSB's
//!   `ScrambledZipfianGenerator(min, max, constant)` does; the scattering is the
//!   same `min + fnvhash64(v) % itemcount`.
//! * [`Uniform`] — `UniformLongGenerator`, inclusive bounds.
//! * [`KeyChooser`] — the `requestdistribution` choice of `CoreWorkload.init`
//!   ("uniform", "zipfian", "latest"), built exactly as YCSB builds its `keychooser`.
//! * [`key_name`] — `CoreWorkload.buildKeyName` (`"user"` + hashed or plain number),
//!   plus a fixed-width binary form.
//!
//! Random doubles are 53-bit (`next_u64() >> 11`, as `java.util.Random.nextDouble`
//! has 53 random bits) from [`crate::keys::Rng`]; the generators take the RNG as an
//! argument instead of YCSB's thread-local `Random`.
//!
//! Deviations from the Java code, all outside the distributions' definitions:
//! constructors do not consume a first draw (YCSB's call `nextValue()` once);
//! [`Uniform`] uses an unbiased multiply-shift instead of `abs(nextLong()) % n`;
//! key numbers are not truncated to `int` as `CoreWorkload` does with `intValue()`.
//!
//! Thread safety: every generator is a plain value mutated through `&mut self` (the
//! Zipfian's zeta cache changes as item counts grow), so it is `Send` but meant to
//! be owned by one thread; clone a prototype per thread. YCSB shares one generator
//! under a lock instead; the per-thread copies compute the same zeta values.

use serde::Serialize;

use crate::keys::Rng;

/// YCSB's default Zipfian constant (`ZipfianGenerator.ZIPFIAN_CONSTANT`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Largest Zipfian constant [`check_zipf_constant`] accepts. Gray's algorithm is
/// defined for `0 < theta < 1` and raises to `1 / (1 - theta)`: as theta nears 1 the
/// rounding of `1 - (2/n)^(1-theta)` and of the base it raises is amplified until the
/// draws no longer follow the distribution; up to `1 - 1e-6` the error stays below
/// 1e-9 relative.
pub const MAX_ZIPF_CONSTANT: f64 = 0.999_999;

/// Validates a Zipfian constant for [`ScrambledZipfian::with_theta`] and
/// [`SkewedLatest::with_theta`]: finite, above 0 and at most [`MAX_ZIPF_CONSTANT`].
///
/// # Errors
///
/// A message naming the accepted range.
pub fn check_zipf_constant(theta: f64) -> Result<f64, String> {
    if theta.is_finite() && theta > 0.0 && theta <= MAX_ZIPF_CONSTANT {
        Ok(theta)
    } else {
        Err(format!(
            "zipfian constant {theta}: must be above 0 and below 1 (at most \
             {MAX_ZIPF_CONSTANT}; YCSB's default is {ZIPFIAN_CONSTANT})"
        ))
    }
}

/// True if `theta` is YCSB's default [`ZIPFIAN_CONSTANT`] (exactly, as YCSB's
/// `ScrambledZipfianGenerator` compares it).
#[must_use]
pub fn is_default_zipf_constant(theta: f64) -> bool {
    theta == ZIPFIAN_CONSTANT
}

/// `ScrambledZipfianGenerator.ITEM_COUNT`: the scrambled generator's inner Zipfian is
/// built over `0..=ITEM_COUNT` (YCSB master; one later revision raised it to 1e16
/// without recomputing [`SCRAMBLED_ZETAN`], which belongs to 1e10).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// `ScrambledZipfianGenerator.ZETAN`: zeta(1e10, 0.99), precomputed by YCSB.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, lowest byte first,
/// then `Math.abs` of the result read as a Java `long`.
///
/// `Math.abs(Long.MIN_VALUE)` is `Long.MIN_VALUE`, so a hash of exactly `1 << 63`
/// comes back unchanged: the result is below `2^63` except for that one value, which
/// is returned as the same bits (`1 << 63`). [`key_name`] prints it as Java does
/// (`-9223372036854775808`).
#[must_use]
pub fn fnvhash64(val: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    let mut v = val;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    java_abs(hash)
}

/// Java's `Math.abs` on the `long` with these bits, returned as bits.
#[expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "reinterprets the bits as Java's signed long and back, as the Java code does"
)]
fn java_abs(bits: u64) -> u64 {
    (bits as i64).wrapping_abs() as u64
}

/// A uniform double in `[0, 1)` with 53 random bits.
pub fn next_f64(rng: &mut Rng) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (rng.next_u64() >> 11) as f64 * SCALE
}

/// `ZipfianGenerator.zetastatic(st, n, theta, initialsum)`: `initial` plus
/// `sum_{i=st}^{n-1} 1 / (i+1)^theta`.
#[must_use]
pub fn zeta_static(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: items `base..base + items`, item `base` the most
/// popular, P(base + k) ≈ (1 / (k+1)^theta) / zeta(items, theta).
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    half_pow_theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
    allow_item_count_decrease: bool,
}

impl Zipfian {
    /// Items `0..items` with theta = [`ZIPFIAN_CONSTANT`] (computes zeta: O(items)).
    #[must_use]
    pub fn new(items: u64) -> Self {
        Self::build(
            0,
            items,
            ZIPFIAN_CONSTANT,
            zeta_static(0, items, ZIPFIAN_CONSTANT, 0.0),
        )
    }

    /// Items `0..items` with Zipfian constant `theta` (computes zeta: O(items)).
    #[must_use]
    pub fn with_items_theta(items: u64, theta: f64) -> Self {
        Self::build(0, items, theta, zeta_static(0, items, theta, 0.0))
    }

    /// Items `min..=max` with theta = [`ZIPFIAN_CONSTANT`].
    #[must_use]
    pub fn with_range(min: u64, max: u64) -> Self {
        Self::with_theta(min, max, ZIPFIAN_CONSTANT)
    }

    /// Items `min..=max` with Zipfian constant `theta` (in `(0, 1)`).
    #[must_use]
    pub fn with_theta(min: u64, max: u64, theta: f64) -> Self {
        let items = range_len(min, max);
        Self::build(min, items, theta, zeta_static(0, items, theta, 0.0))
    }

    /// Items `min..=max` with a precomputed `zetan` (YCSB's 4-argument constructor).
    #[must_use]
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Self {
        Self::build(min, range_len(min, max), theta, zetan)
    }

    fn build(base: u64, items: u64, theta: f64, zetan: f64) -> Self {
        let half_pow_theta = 0.5f64.powf(theta);
        let mut z = Zipfian {
            items,
            base,
            theta,
            zeta2theta: 1.0 + half_pow_theta,
            half_pow_theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
            allow_item_count_decrease: false,
        };
        z.eta = z.eta_for(zetan);
        z
    }

    /// eta as YCSB computes it, always from the constructor's item count.
    fn eta_for(&self, zetan: f64) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / zetan)
    }

    /// YCSB's `allowitemcountdecrease` (default false): when true, a draw with fewer
    /// items than the cached zeta recomputes zeta from scratch.
    pub fn set_allow_item_count_decrease(&mut self, allow: bool) {
        self.allow_item_count_decrease = allow;
    }

    /// Items of the constructor.
    #[must_use]
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Smallest (and most popular) item.
    #[must_use]
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The Zipfian constant.
    #[must_use]
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// Current zeta(n, theta) and the n it was computed for.
    #[must_use]
    pub fn zetan(&self) -> (f64, u64) {
        (self.zetan, self.count_for_zeta)
    }

    /// Current eta.
    #[must_use]
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// `nextValue()`: a draw over the constructor's items.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_with_count(self.items, rng)
    }

    /// `nextLong(itemcount)`: a draw over `base..base + itemcount`. A larger count than
    /// the cached zeta's extends zeta incrementally (O(growth)); a smaller one keeps
    /// the cached zeta unless [`Self::set_allow_item_count_decrease`] was set.
    pub fn next_with_count(&mut self, itemcount: u64, rng: &mut Rng) -> u64 {
        if itemcount != self.count_for_zeta {
            if itemcount > self.count_for_zeta {
                self.zetan = zeta_static(self.count_for_zeta, itemcount, self.theta, self.zetan);
                self.count_for_zeta = itemcount;
                self.eta = self.eta_for(self.zetan);
            } else if self.allow_item_count_decrease {
                self.zetan = zeta_static(0, itemcount, self.theta, 0.0);
                self.count_for_zeta = itemcount;
                self.eta = self.eta_for(self.zetan);
            }
        }
        let u = next_f64(rng);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + self.half_pow_theta {
            return self.base + 1;
        }
        // `as` saturates (NaN -> 0), like Java's (long) cast.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "Java's (long) cast of a non-negative double: saturating, as intended"
        )]
        let offset = (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + offset
    }
}

/// `max - min + 1` for an inclusive range (0 when `max < min`).
fn range_len(min: u64, max: u64) -> u64 {
    if max < min {
        0
    } else {
        (max - min).saturating_add(1)
    }
}

/// YCSB's `ScrambledZipfianGenerator` (theta 0.99): Zipfian popularity scattered over
/// `min..=max` by hashing, so the hot items are not clustered at `min`.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    gen: Zipfian,
    min: u64,
    item_count: u64,
}

impl ScrambledZipfian {
    /// Items `min..=max`. The inner Zipfian is over `0..=`[`SCRAMBLED_ITEM_COUNT`] with
    /// [`SCRAMBLED_ZETAN`], whatever the range (as in YCSB), so construction is O(1).
    #[must_use]
    pub fn new(min: u64, max: u64) -> Self {
        ScrambledZipfian {
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
            min,
            item_count: range_len(min, max).max(1),
        }
    }

    /// Items `min..=max` with Zipfian constant `theta` (see [`check_zipf_constant`]).
    /// [`ZIPFIAN_CONSTANT`] gives exactly [`Self::new`]; any other theta an inner
    /// Zipfian over the range's own `itemcount` items, zeta computed for it
    /// (O(itemcount), once), scattered by the same `min + fnvhash64(v) % itemcount`.
    /// The most popular item, `min + fnvhash64(0) % itemcount`, then has probability
    /// `1 / zeta(itemcount, theta)` (plus whatever other ranks hash onto it).
    #[must_use]
    pub fn with_theta(min: u64, max: u64, theta: f64) -> Self {
        if is_default_zipf_constant(theta) {
            return Self::new(min, max);
        }
        let item_count = range_len(min, max).max(1);
        ScrambledZipfian {
            gen: Zipfian::with_items_theta(item_count, theta),
            min,
            item_count,
        }
    }

    /// Items `0..items`.
    #[must_use]
    pub fn with_items(items: u64) -> Self {
        Self::new(0, items.saturating_sub(1))
    }

    /// The inner Zipfian (its theta and zeta).
    #[must_use]
    pub fn zipfian(&self) -> &Zipfian {
        &self.gen
    }

    /// Number of items in the range (`itemcount`).
    #[must_use]
    pub fn item_count(&self) -> u64 {
        self.item_count
    }

    /// `nextValue()`: `min + fnvhash64(zipfian) % itemcount`.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let v = self.gen.next(rng);
        self.min + fnvhash64(v) % self.item_count
    }
}

/// YCSB's `SkewedLatestGenerator`: `latest - zipfian.nextLong(latest)`, where `latest`
/// is the last acknowledged insert; values fall in `1..=latest` (key 0 only when
/// `latest` is 0), the newest key being the most popular.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Built for `latest` = the basis counter's last value (`new ZipfianGenerator(latest)`).
    #[must_use]
    pub fn new(latest: u64) -> Self {
        SkewedLatest {
            zipfian: Zipfian::new(latest),
        }
    }

    /// [`Self::new`] with Zipfian constant `theta` (see [`check_zipf_constant`]);
    /// [`ZIPFIAN_CONSTANT`] gives exactly [`Self::new`].
    #[must_use]
    pub fn with_theta(latest: u64, theta: f64) -> Self {
        SkewedLatest {
            zipfian: Zipfian::with_items_theta(latest, theta),
        }
    }

    /// A draw skewed towards `latest` (zeta grows incrementally with `latest`).
    pub fn next(&mut self, latest: u64, rng: &mut Rng) -> u64 {
        latest.saturating_sub(self.zipfian.next_with_count(latest, rng))
    }

    /// The inner Zipfian (for its zeta).
    #[must_use]
    pub fn zipfian(&self) -> &Zipfian {
        &self.zipfian
    }
}

/// YCSB's `UniformLongGenerator`: uniform over `lb..=ub`.
#[derive(Debug, Clone)]
pub struct Uniform {
    lb: u64,
    ub: u64,
}

impl Uniform {
    /// Uniform over `lb..=ub` (`ub >= lb`).
    #[must_use]
    pub fn new(lb: u64, ub: u64) -> Self {
        Uniform { lb, ub: ub.max(lb) }
    }

    /// A uniform draw.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        match (self.ub - self.lb).checked_add(1) {
            Some(n) => self.lb + rng.below(n),
            None => rng.next_u64(),
        }
    }
}

/// YCSB's `requestdistribution` values supported here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// `uniform`: [`Uniform`] over the loaded records.
    Uniform,
    /// `zipfian`: [`ScrambledZipfian`] over the records plus expected inserts.
    Zipfian,
    /// `latest`: [`SkewedLatest`] over the inserted records.
    Latest,
}

impl Distribution {
    /// Parses "uniform", "zipfian" or "latest" (case-insensitive).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "uniform" => Some(Distribution::Uniform),
            "zipfian" => Some(Distribution::Zipfian),
            "latest" => Some(Distribution::Latest),
            _ => None,
        }
    }

    /// The YCSB property value.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
            Distribution::Latest => "latest",
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `CoreWorkload`'s `keychooser`: one draw of a key number, before the
/// "not beyond the last insert" rejection (done by the caller).
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// `uniform`.
    Uniform(Uniform),
    /// `zipfian`.
    Zipfian(ScrambledZipfian),
    /// `latest`.
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// Built as `CoreWorkload.init` does with `insertstart = 0` and
    /// `insertcount = record_count`: uniform over `0..=record_count-1`; scrambled
    /// Zipfian over `0..=record_count + expected_new_keys` (YCSB's inclusive bound,
    /// so `record_count + expected_new_keys + 1` items); latest from the insert
    /// counter's last value `record_count - 1`.
    #[must_use]
    pub fn new(dist: Distribution, record_count: u64, expected_new_keys: u64) -> Self {
        let record_count = record_count.max(1);
        match dist {
            Distribution::Uniform => KeyChooser::Uniform(Uniform::new(0, record_count - 1)),
            Distribution::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::new(
                0,
                record_count.saturating_add(expected_new_keys),
            )),
            Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(record_count - 1)),
        }
    }

    /// [`Self::new`] with Zipfian constant `theta` for `zipfian`
    /// ([`ScrambledZipfian::with_theta`]) and `latest` ([`SkewedLatest::with_theta`]);
    /// `uniform` ignores it. [`ZIPFIAN_CONSTANT`] gives exactly [`Self::new`].
    #[must_use]
    pub fn with_theta(
        dist: Distribution,
        record_count: u64,
        expected_new_keys: u64,
        theta: f64,
    ) -> Self {
        if is_default_zipf_constant(theta) {
            return Self::new(dist, record_count, expected_new_keys);
        }
        let record_count = record_count.max(1);
        match dist {
            Distribution::Uniform => Self::new(dist, record_count, expected_new_keys),
            Distribution::Zipfian => KeyChooser::Zipfian(ScrambledZipfian::with_theta(
                0,
                record_count.saturating_add(expected_new_keys),
                theta,
            )),
            Distribution::Latest => {
                KeyChooser::Latest(SkewedLatest::with_theta(record_count - 1, theta))
            }
        }
    }

    /// [`Self::new`] from a distribution name ("uniform", "zipfian", "latest").
    #[must_use]
    pub fn by_name(name: &str, record_count: u64, expected_new_keys: u64) -> Option<Self> {
        Distribution::parse(name).map(|d| Self::new(d, record_count, expected_new_keys))
    }

    /// Which distribution this is.
    #[must_use]
    pub fn distribution(&self) -> Distribution {
        match self {
            KeyChooser::Uniform(_) => Distribution::Uniform,
            KeyChooser::Zipfian(_) => Distribution::Zipfian,
            KeyChooser::Latest(_) => Distribution::Latest,
        }
    }

    /// One draw; `latest` is the last acknowledged insert (used by `latest` only).
    /// May exceed `latest` for `zipfian`: the caller redraws, as YCSB does.
    pub fn next(&mut self, rng: &mut Rng, latest: u64) -> u64 {
        match self {
            KeyChooser::Uniform(g) => g.next(rng),
            KeyChooser::Zipfian(g) => g.next(rng),
            KeyChooser::Latest(g) => g.next(latest, rng),
        }
    }
}

/// How a key number becomes a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    /// YCSB default (`insertorder=hashed`): `"user"` + `fnvhash64(keynum)` in decimal.
    Hashed,
    /// YCSB `insertorder=ordered`: `"user"` + `keynum` in decimal.
    Ordered,
    /// `keynum` as 8 big-endian bytes, zero-padded on the right to `key_size`.
    Binary,
}

/// Writes the key of `keynum` into `out` (cleared first). `key_size` applies to
/// [`KeyMode::Binary`] only (at least 8 bytes); the string modes follow YCSB's
/// `buildKeyName` with the default `zeropadding=1` (no padding).
pub fn key_name(keynum: u64, mode: KeyMode, key_size: usize, out: &mut Vec<u8>) {
    out.clear();
    match mode {
        KeyMode::Hashed => {
            out.extend_from_slice(b"user");
            // Long.toString of the Java long (negative only for Math.abs(MIN_VALUE)).
            #[expect(
                clippy::cast_possible_wrap,
                reason = "the hash's bits read as Java's signed long"
            )]
            let java_long = fnvhash64(keynum) as i64;
            push_decimal_i64(out, java_long);
        }
        KeyMode::Ordered => {
            out.extend_from_slice(b"user");
            push_decimal_u64(out, keynum);
        }
        KeyMode::Binary => {
            out.extend_from_slice(&keynum.to_be_bytes());
            out.resize(key_size.max(8), 0);
        }
    }
}

fn push_decimal_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_decimal_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_decimal_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const N: usize = 1_000_000;

    /// A key number as an index into a test's count table.
    fn idx(v: u64) -> usize {
        usize::try_from(v).expect("test key numbers fit in usize")
    }

    /// FNV-1a exactly as the Java source reads, on signed longs (arithmetic shift,
    /// `Math.abs` that leaves `MIN_VALUE` alone).
    fn fnv_java_reference(mut val: i64) -> i64 {
        #[expect(
            clippy::cast_possible_wrap,
            reason = "Java's long literal 0xCBF29CE484222325L has these bits"
        )]
        let mut hashval = 0xCBF2_9CE4_8422_2325u64 as i64;
        for _ in 0..8 {
            let octet = val & 0x00ff;
            val >>= 8;
            hashval ^= octet;
            hashval = hashval.wrapping_mul(1_099_511_628_211);
        }
        if hashval == i64::MIN {
            hashval
        } else {
            hashval.abs()
        }
    }

    #[test]
    fn fnvhash64_matches_the_definition_and_ycsb_keys() {
        // Keynum 0: eight rounds of (h ^ 0) * prime, i.e. basis * prime^8.
        let h0 = FNV_OFFSET_BASIS_64.wrapping_mul(FNV_PRIME_64.wrapping_pow(8));
        assert_eq!(fnvhash64(0), java_abs(h0));
        // Keynum 1: only the first octet is 1.
        let h1 = ((FNV_OFFSET_BASIS_64 ^ 1).wrapping_mul(FNV_PRIME_64))
            .wrapping_mul(FNV_PRIME_64.wrapping_pow(7));
        assert_eq!(fnvhash64(1), java_abs(h1));
        // The first keys of every YCSB load with hashed inserts.
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnvhash64(2), 1_820_151_046_732_198_393);
        // Java Math.abs semantics, including MIN_VALUE.
        assert_eq!(java_abs(1 << 63), 1 << 63);
        assert_eq!(java_abs(u64::MAX), 1);
        assert_eq!(java_abs(5), 5);
        let mut r = Rng::new(7);
        for i in 0..100_000u64 {
            let v = if i < 1000 { i } else { r.next_u64() };
            #[expect(
                clippy::cast_possible_wrap,
                clippy::cast_sign_loss,
                reason = "the Java reference works on the same bits read as a signed long"
            )]
            let java = fnv_java_reference(v as i64) as u64;
            assert_eq!(fnvhash64(v), java, "{v}");
            assert!(fnvhash64(v) < 1 << 63);
        }
    }

    #[test]
    fn key_names_follow_build_key_name() {
        let mut k = Vec::new();
        key_name(0, KeyMode::Hashed, 24, &mut k);
        assert_eq!(k, b"user6284781860667377211");
        key_name(2, KeyMode::Hashed, 0, &mut k);
        assert_eq!(k, b"user1820151046732198393");
        key_name(7, KeyMode::Ordered, 0, &mut k);
        assert_eq!(k, b"user7");
        key_name(0, KeyMode::Ordered, 0, &mut k);
        assert_eq!(k, b"user0");
        key_name(0x0102, KeyMode::Binary, 12, &mut k);
        assert_eq!(k, [0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0]);
        key_name(u64::MAX, KeyMode::Binary, 3, &mut k);
        assert_eq!(k, [0xff; 8]);
        let mut s = Vec::new();
        push_decimal_i64(&mut s, i64::MIN);
        assert_eq!(s, b"-9223372036854775808");
        s.clear();
        push_decimal_u64(&mut s, u64::MAX);
        assert_eq!(s, b"18446744073709551615");
    }

    #[test]
    fn next_f64_is_in_unit_interval_with_mean_one_half() {
        let mut r = Rng::new(3);
        let mut sum = 0.0;
        for _ in 0..100_000 {
            let u = next_f64(&mut r);
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 100_000.0 - 0.5).abs() < 0.005);
    }

    /// Relative tolerance for a frequency estimate: `rel` model error plus 4 sigma.
    fn tol(p: f64, n: usize, rel: f64) -> f64 {
        rel + 4.0 * ((1.0 - p) / (p * n as f64)).sqrt()
    }

    #[test]
    fn zipfian_1000_matches_zipf_law() {
        let mut z = Zipfian::new(1000);
        let zeta = zeta_static(0, 1000, 0.99, 0.0);
        assert_eq!(z.zetan(), (zeta, 1000));
        let mut r = Rng::new(42);
        let mut counts = vec![0u64; 1000];
        for _ in 0..N {
            let v = z.next(&mut r);
            assert!(v < 1000, "{v}");
            counts[idx(v)] += 1;
        }
        let freq = |k: usize| counts[k] as f64 / N as f64;
        let ideal = |k: usize| 1.0 / ((k + 1) as f64).powf(0.99) / zeta;
        eprintln!("zeta(1000,0.99) = {zeta:.6}");
        // Item 0 (exact in Gray's algorithm): within 2%.
        let p0 = ideal(0);
        eprintln!("item 0: measured {:.5} expected {p0:.5}", freq(0));
        assert!((freq(0) / p0 - 1.0).abs() < 0.02);
        // Items 1, 2, 10, 100. Item 1 is exact in Gray's algorithm; items >= 2 come
        // from its continuous approximation, P(k) = (((k+1)/n)^(1-θ) - (k/n)^(1-θ)) / η,
        // which YCSB inherits: item 2 gets ~17% more than Zipf's law (0.0510 vs
        // 0.0436 for n = 1000), items 10 and 100 are within 1%. So each item is checked
        // tightly against what the algorithm defines, and against the law with the
        // algorithm's own error as the allowance (20% for item 2, 2% otherwise).
        for k in [1usize, 2, 10, 100] {
            let p = ideal(k);
            let g = gray_prob(&z, k as u64);
            let law_err = if k == 2 { 0.20 } else { 0.02 };
            eprintln!(
                "item {k}: measured {:.6} zipf law {p:.6} gray {g:.6}",
                freq(k)
            );
            assert!(
                (freq(k) / g - 1.0).abs() < tol(g, N, 0.005),
                "item {k}: {} vs gray {g}",
                freq(k)
            );
            assert!(
                (freq(k) / p - 1.0).abs() < tol(p, N, law_err),
                "item {k}: {} vs law {p}",
                freq(k)
            );
        }
        // Monotone decreasing on average: mean frequency per item over blocks.
        let block = |a: usize, b: usize| counts[a..b].iter().sum::<u64>() as f64 / (b - a) as f64;
        let blocks = [
            (0, 1),
            (1, 2),
            (2, 5),
            (5, 10),
            (10, 50),
            (50, 100),
            (100, 500),
            (500, 1000),
        ];
        let means: Vec<f64> = blocks.iter().map(|&(a, b)| block(a, b)).collect();
        assert!(means.windows(2).all(|w| w[0] > w[1]), "{means:?}");
        // The tail in aggregate, P(k >= 100): Gray's algorithm gives
        // (1 - (100/n)^(1-θ)) / η, a few points below the law's 1 - zeta(100)/zeta(n)
        // (the mass its approximation moves to item 2).
        let tail = counts[100..].iter().sum::<u64>() as f64 / N as f64;
        let tail_gray = 1.0 - (0..100).map(|k| gray_prob(&z, k)).sum::<f64>();
        let tail_law = 1.0 - zeta_static(0, 100, 0.99, 0.0) / zeta;
        eprintln!("P(k>=100): measured {tail:.5} gray {tail_gray:.5} zipf law {tail_law:.5}");
        assert!((tail - tail_gray).abs() < 0.003);
        assert!((tail - tail_law).abs() < 0.05);
    }

    #[test]
    fn zipfian_range_and_incremental_zeta() {
        let mut z = Zipfian::with_range(10, 19);
        let mut r = Rng::new(5);
        for _ in 0..10_000 {
            let v = z.next(&mut r);
            assert!((10..20).contains(&v));
        }
        let mut z = Zipfian::new(1000);
        let eta_1000 = z.eta();
        let mut hit_high = false;
        for _ in 0..100_000 {
            let v = z.next_with_count(2000, &mut r);
            assert!(v < 2000);
            hit_high |= v >= 1000;
        }
        assert!(hit_high);
        let (zn, count) = z.zetan();
        assert_eq!(count, 2000);
        assert!((zn - zeta_static(0, 2000, 0.99, 0.0)).abs() < 1e-9);
        #[expect(
            clippy::float_cmp,
            reason = "any change at all shows eta was recomputed"
        )]
        let eta_changed = z.eta() != eta_1000;
        assert!(eta_changed);
        // Fewer items: zeta kept (YCSB default), recomputed only when allowed.
        z.next_with_count(500, &mut r);
        assert_eq!(z.zetan().1, 2000);
        z.set_allow_item_count_decrease(true);
        z.next_with_count(500, &mut r);
        assert_eq!(z.zetan(), (zeta_static(0, 500, 0.99, 0.0), 500));
    }

    #[test]
    #[expect(
        clippy::many_single_char_names,
        reason = "the Euler-Maclaurin formula in its usual symbols"
    )]
    fn scrambled_zetan_is_zeta_of_ten_billion() {
        // zeta(1e6) summed, the rest by Euler-Maclaurin on x^-0.99.
        let (m, n, t) = (1.0e6f64, 1.0e10f64, 0.99f64);
        let head = zeta_static(0, 1_000_000, t, 0.0);
        let f = |x: f64| x.powf(-t);
        let df = |x: f64| -t * x.powf(-t - 1.0);
        let tail = (n.powf(1.0 - t) - m.powf(1.0 - t)) / (1.0 - t)
            + (f(n) - f(m)) / 2.0
            + (df(n) - df(m)) / 12.0;
        let z = head + tail;
        assert!((z - SCRAMBLED_ZETAN).abs() < 1e-6, "{z}");
    }

    /// P(inner Zipfian = k) under Gray's algorithm as YCSB runs it.
    fn gray_prob(z: &Zipfian, k: u64) -> f64 {
        let (zetan, n) = z.zetan();
        let e = 1.0 - z.theta();
        match k {
            0 => 1.0 / zetan,
            1 => 0.5f64.powf(z.theta()) / zetan,
            _ => (((k + 1) as f64 / n as f64).powf(e) - (k as f64 / n as f64).powf(e)) / z.eta(),
        }
    }

    #[test]
    fn scrambled_zipfian_scatters_the_zipf_profile() {
        const ITEMS: u64 = 1000;
        let mut g = ScrambledZipfian::new(0, ITEMS - 1);
        assert_eq!(g.item_count(), ITEMS);
        // Expected share of each output: exact over the inner head (ranks < 2M), the
        // remaining inner mass spread evenly (hashes of ~1e10 ranks mod 1000).
        let inner = Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN);
        let head = 2_000_000u64;
        let mut expected = vec![0.0f64; idx(ITEMS)];
        let mut head_mass = 0.0;
        for k in 0..head {
            let p = gray_prob(&inner, k);
            head_mass += p;
            expected[idx(fnvhash64(k) % ITEMS)] += p;
        }
        let rest = (1.0 - head_mass) / ITEMS as f64;
        for p in &mut expected {
            *p += rest;
        }

        let mut r = Rng::new(9);
        let mut counts = vec![0u64; idx(ITEMS)];
        for _ in 0..N {
            let v = g.next(&mut r);
            assert!(v < ITEMS);
            counts[idx(v)] += 1;
        }
        let mut by_count: Vec<usize> = (0..idx(ITEMS)).collect();
        by_count.sort_by(|&a, &b| counts[b].cmp(&counts[a]));
        let top = by_count[0];
        let top_freq = counts[top] as f64 / N as f64;
        eprintln!(
            "scrambled: hottest {top} freq {top_freq:.5} expected {:.5} (1/ZETAN = {:.5})",
            expected[top],
            1.0 / SCRAMBLED_ZETAN
        );
        // The hottest item is inner rank 0 hashed: fnvhash64(0) % 1000 = 211.
        assert_eq!(top as u64, fnvhash64(0) % ITEMS);
        assert!((top_freq / expected[top] - 1.0).abs() < tol(expected[top], N, 0.02));
        // Sorted profile: the 20 hottest measured vs expected sorted shares.
        let mut exp_sorted = expected.clone();
        exp_sorted.sort_by(|a, b| b.total_cmp(a));
        for (i, &item) in by_count.iter().take(20).enumerate() {
            let f = counts[item] as f64 / N as f64;
            assert!(
                (f / exp_sorted[i] - 1.0).abs() < tol(exp_sorted[i], N, 0.05),
                "rank {i}: {f} vs {}",
                exp_sorted[i]
            );
        }
        // Every item vs its own expected share.
        for i in 0..idx(ITEMS) {
            let f = counts[i] as f64 / N as f64;
            assert!(
                (f / expected[i] - 1.0).abs() < tol(expected[i], N, 0.05),
                "item {i}: {f} vs {}",
                expected[i]
            );
        }
        // Scrambled: the hottest items are not the smallest numbers.
        let hot10: Vec<usize> = by_count[..10].to_vec();
        eprintln!("scrambled: 10 hottest {hot10:?}");
        assert!(hot10.iter().filter(|&&i| i < 10).count() <= 2, "{hot10:?}");
        assert_ne!(top, 0);
        // Mean is the middle of the range (YCSB's mean()).
        let mean = counts
            .iter()
            .enumerate()
            .map(|(i, c)| i as f64 * *c as f64)
            .sum::<f64>()
            / N as f64;
        assert!((mean - 499.5).abs() < 50.0, "{mean}");
    }

    #[test]
    fn scrambled_zipfian_offset_range() {
        let mut g = ScrambledZipfian::new(1_000, 1_999);
        let mut r = Rng::new(1);
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for _ in 0..100_000 {
            let v = g.next(&mut r);
            assert!((1_000..2_000).contains(&v));
            *counts.entry(v).or_default() += 1;
        }
        let hottest = counts.iter().max_by_key(|(_, c)| **c).map(|(k, _)| *k);
        assert_eq!(hottest, Some(1_000 + fnvhash64(0) % 1_000));
    }

    #[test]
    fn skewed_latest_favours_the_newest_keys() {
        let latest = 99_999u64;
        let mut g = SkewedLatest::new(latest);
        let mut r = Rng::new(11);
        let (mut newest_pct, mut at_latest) = (0u64, 0u64);
        for _ in 0..N {
            let v = g.next(latest, &mut r);
            assert!((1..=latest).contains(&v), "{v}");
            newest_pct += u64::from(latest - v < latest / 100);
            at_latest += u64::from(v == latest);
        }
        let z = g.zipfian();
        let window = latest / 100;
        let expected: f64 = (0..window).map(|k| gray_prob(z, k)).sum();
        let share = newest_pct as f64 / N as f64;
        let top = at_latest as f64 / N as f64;
        eprintln!(
            "latest: newest 1% share {share:.4} expected {expected:.4}; newest key {top:.5} expected {:.5}",
            1.0 / z.zetan().0
        );
        assert!(share > 0.5);
        assert!((share - expected).abs() < 0.005);
        assert!((top * z.zetan().0 - 1.0).abs() < 0.02);

        // More inserts: zeta extends, draws follow the new latest.
        let latest2 = latest + 10_000;
        let mut near_new = 0u64;
        for _ in 0..100_000 {
            let v = g.next(latest2, &mut r);
            assert!(v <= latest2);
            near_new += u64::from(latest2 - v < 100);
        }
        assert_eq!(g.zipfian().zetan().1, latest2);
        assert!((g.zipfian().zetan().0 - zeta_static(0, latest2, 0.99, 0.0)).abs() < 1e-9);
        assert!(near_new > 40_000, "{near_new}");
    }

    #[test]
    fn uniform_covers_its_range_evenly() {
        let g = Uniform::new(5, 14);
        let mut r = Rng::new(2);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = g.next(&mut r);
            assert!((5..=14).contains(&v));
            counts[idx(v - 5)] += 1;
        }
        assert!(
            counts.iter().all(|c| (9_400..10_600).contains(c)),
            "{counts:?}"
        );
        let full = Uniform::new(0, u64::MAX);
        let _ = full.next(&mut r);
    }

    #[test]
    fn key_chooser_by_name() {
        let mut r = Rng::new(4);
        for (name, dist) in [
            ("uniform", Distribution::Uniform),
            ("Zipfian", Distribution::Zipfian),
            ("latest", Distribution::Latest),
        ] {
            let mut c = KeyChooser::by_name(name, 1000, 100).expect("known distribution");
            assert_eq!(c.distribution(), dist);
            assert_eq!(Distribution::parse(dist.name()), Some(dist));
            for _ in 0..1000 {
                let v = c.next(&mut r, 999);
                let bound = if dist == Distribution::Zipfian {
                    1100
                } else {
                    999
                };
                assert!(v <= bound);
            }
        }
        assert!(KeyChooser::by_name("hotspot", 10, 0).is_none());
        match KeyChooser::new(Distribution::Zipfian, 1000, 100) {
            KeyChooser::Zipfian(g) => assert_eq!(g.item_count(), 1101),
            other => panic!("{other:?}"),
        }
    }

    /// Share of the hottest value over `N` draws of `next`, and that value.
    fn hottest(mut next: impl FnMut() -> u64) -> (u64, f64) {
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for _ in 0..N {
            *counts.entry(next()).or_default() += 1;
        }
        let (k, c) = counts
            .into_iter()
            .max_by_key(|&(k, c)| (c, k))
            .unwrap_or((0, 0));
        (k, c as f64 / N as f64)
    }

    #[test]
    fn zipf_constant_0_7_top_item_is_one_over_zeta_and_colder_than_0_99() {
        const ITEMS: u64 = 100_000;
        let zeta = zeta_static(0, ITEMS, 0.7, 0.0);
        let p_top = 1.0 / zeta;
        let mut g = ScrambledZipfian::with_theta(0, ITEMS - 1, 0.7);
        assert_eq!(g.item_count(), ITEMS);
        assert_eq!(g.zipfian().zetan(), (zeta, ITEMS));
        let mut r = Rng::new(21);
        let (top, f07) = hottest(|| {
            let v = g.next(&mut r);
            assert!(v < ITEMS);
            v
        });
        // The default path over the same items (YCSB's inner Zipfian over 1e10 items).
        let mut d = KeyChooser::with_theta(Distribution::Zipfian, ITEMS - 1, 0, ZIPFIAN_CONSTANT);
        let mut r = Rng::new(21);
        let (top99, f99) = hottest(|| d.next(&mut r, ITEMS));
        eprintln!(
            "theta 0.7 over {ITEMS}: hottest {top} freq {f07:.5}, 1/zeta {p_top:.5}; \
             theta 0.99: hottest {top99} freq {f99:.5}"
        );
        // Inner rank 0 hashed is the hottest, at 1/zeta(n, 0.7) within 10%.
        assert_eq!(top, fnvhash64(0) % ITEMS);
        assert!((f07 / p_top - 1.0).abs() < 0.10, "{f07} vs {p_top}");
        assert_eq!(top99, fnvhash64(0) % ITEMS);
        assert!(f07 < f99, "{f07} vs {f99}");

        // Latest with theta 0.7: the newest key at 1/zeta(latest, 0.7).
        let latest = ITEMS - 1;
        let mut l = SkewedLatest::with_theta(latest, 0.7);
        let zl = zeta_static(0, latest, 0.7, 0.0);
        assert_eq!(l.zipfian().zetan(), (zl, latest));
        let mut r = Rng::new(22);
        let (newest, fl) = hottest(|| l.next(latest, &mut r));
        assert_eq!(newest, latest);
        assert!((fl * zl - 1.0).abs() < 0.10, "{fl} vs {}", 1.0 / zl);
        // The chooser builds these for 0.7.
        match KeyChooser::with_theta(Distribution::Zipfian, 1000, 100, 0.7) {
            KeyChooser::Zipfian(g) => {
                assert_eq!(g.item_count(), 1101);
                assert_eq!(g.zipfian().zetan(), (zeta_static(0, 1101, 0.7, 0.0), 1101));
            }
            other => panic!("{other:?}"),
        }
        match KeyChooser::with_theta(Distribution::Latest, 1000, 100, 0.7) {
            KeyChooser::Latest(g) => {
                #[expect(clippy::float_cmp, reason = "the constant is stored as given")]
                let same = g.zipfian().theta() == 0.7;
                assert!(same);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn default_zipf_constant_keeps_the_first_1000_keys() {
        // With ZIPFIAN_CONSTANT the chooser must draw what the existing generators
        // draw, value for value.
        let (records, new_keys) = (100_000u64, 1_000u64);
        let mut r1 = Rng::new(77);
        let mut r2 = Rng::new(77);
        let mut c = KeyChooser::with_theta(Distribution::Zipfian, records, new_keys, 0.99);
        let mut g = ScrambledZipfian::new(0, records + new_keys);
        let a: Vec<u64> = (0..1000).map(|_| c.next(&mut r1, records - 1)).collect();
        let b: Vec<u64> = (0..1000).map(|_| g.next(&mut r2)).collect();
        assert_eq!(a, b);
        let mut c = KeyChooser::with_theta(Distribution::Latest, records, new_keys, 0.99);
        let mut g = SkewedLatest::new(records - 1);
        let a: Vec<u64> = (0..1000)
            .map(|i| c.next(&mut r1, records - 1 + i))
            .collect();
        let b: Vec<u64> = (0..1000)
            .map(|i| g.next(records - 1 + i, &mut r2))
            .collect();
        assert_eq!(a, b);
        let mut c = KeyChooser::with_theta(Distribution::Uniform, records, new_keys, 0.7);
        let g = Uniform::new(0, records - 1);
        let a: Vec<u64> = (0..1000).map(|_| c.next(&mut r1, records - 1)).collect();
        let b: Vec<u64> = (0..1000).map(|_| g.next(&mut r2)).collect();
        assert_eq!(a, b);
        // And another constant does change the zipfian keys.
        let mut c = KeyChooser::with_theta(Distribution::Zipfian, records, new_keys, 0.7);
        let mut g = ScrambledZipfian::new(0, records + new_keys);
        let a: Vec<u64> = (0..1000).map(|_| c.next(&mut r1, records - 1)).collect();
        let b: Vec<u64> = (0..1000).map(|_| g.next(&mut r2)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn zipf_constant_range_is_checked() {
        for ok in [0.99, 0.7, 0.5, 1e-9, MAX_ZIPF_CONSTANT] {
            assert_eq!(check_zipf_constant(ok), Ok(ok));
        }
        for bad in [
            0.0,
            -0.5,
            1.0,
            0.999_999_9,
            1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let e = check_zipf_constant(bad).expect_err("outside (0, 1)");
            assert!(e.contains("below 1"), "{e}");
        }
        assert!(is_default_zipf_constant(0.99));
        assert!(!is_default_zipf_constant(0.990_000_1));
    }
}
