//! `HyperLogLog` values, byte for byte as Redis 7 stores them in a string, so a value
//! written by Redis (GET, DUMP) reads here and the other way round, and counts match.
//!
//! Layout (drawn in docs/formats.md): a 16-byte header — `"HYLL"`, encoding (0 dense,
//! 1 sparse), 3 unused bytes, the cached cardinality (u64 LE; bit 7 of its last byte
//! set = stale) — then the registers: 16384 registers of 6 bits each.
//! - dense: 12288 bytes, register `i` at bit `6 i`, least significant bits first;
//! - sparse: run-length opcodes, `00xxxxxx` ZERO (1..64 zero registers),
//!   `01xxxxxx yyyyyyyy` XZERO (1..16384 zero registers), `1vvvvvxx` VAL (1..4
//!   registers of value 1..32).
//!
//! An element is hashed with `MurmurHash64A` (seed `0xadc83b19`): the low 14 bits pick
//! the register, the run of zeros above them (plus one) is the candidate value.
//! Updates of a sparse value follow Redis's own split-and-merge steps, so the bytes
//! match Redis's; a sparse value that would outgrow `hll-sparse-max-bytes` or needs a
//! register above 32 becomes dense. The estimator is Ertl's (Redis 7's `hllCount`).
//! Invariant: a well-formed sparse value's opcodes cover exactly 16384 registers; a
//! value that breaks it is reported as [`HllError::Corrupt`], never trusted.
//! Pure functions; any thread.

/// Register index bits.
const P: u32 = 14;
/// Hash bits left for the zero run.
const Q: u32 = 64 - P;
/// Number of registers.
pub(crate) const REGISTERS: usize = 1 << P;
/// Header size.
pub(crate) const HDR: usize = 16;
/// Size of a dense value.
pub(crate) const DENSE_SIZE: usize = HDR + REGISTERS * 6 / 8;
/// Redis's default `hll-sparse-max-bytes`.
pub(crate) const SPARSE_MAX_BYTES: usize = 3000;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// Why a value cannot be used as a `HyperLogLog`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HllError {
    /// Not an HLL at all (Redis: `WRONGTYPE Key is not a valid HyperLogLog string value.`).
    NotHll,
    /// An HLL header with broken registers (Redis: `INVALIDOBJ Corrupted HLL object detected`).
    Corrupt,
}

impl HllError {
    /// Redis's reply text.
    pub(crate) fn text(self) -> &'static str {
        match self {
            HllError::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            HllError::Corrupt => "INVALIDOBJ Corrupted HLL object detected",
        }
    }
}

/// `MurmurHash64A` as Redis uses it (little-endian word reads on every platform).
pub(crate) fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let len = data.len() as u64;
    let mut h = seed ^ len.wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        let mut k = u64::from_le_bytes(b);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element falls in and the value it proposes (1..=51).
pub(crate) fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = usize::try_from(hash & (REGISTERS as u64 - 1)).unwrap_or(0);
    let rest = (hash >> P) | (1u64 << Q);
    let count = u8::try_from(rest.trailing_zeros() + 1).unwrap_or(u8::MAX);
    (index, count)
}

/// A new, empty HLL: sparse, one XZERO covering every register.
pub(crate) fn new_sparse() -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    v[..4].copy_from_slice(b"HYLL");
    v[4] = SPARSE;
    push_zero_run(&mut v, REGISTERS);
    v
}

/// Checks the header as Redis's `isHLLObjectOrReply`: magic, a known encoding, and a
/// dense value's exact length. Returns true for dense.
pub(crate) fn check(v: &[u8]) -> Result<bool, HllError> {
    if v.len() < HDR || &v[..4] != b"HYLL" || v[4] > SPARSE {
        return Err(HllError::NotHll);
    }
    if v[4] == DENSE && v.len() != DENSE_SIZE {
        return Err(HllError::NotHll);
    }
    Ok(v[4] == DENSE)
}

/// The encoding's name (`PFDEBUG ENCODING`).
pub(crate) fn encoding(v: &[u8]) -> &'static str {
    if v.get(4) == Some(&DENSE) {
        "dense"
    } else {
        "sparse"
    }
}

/// Marks the cached cardinality stale.
pub(crate) fn invalidate(v: &mut [u8]) {
    if let Some(b) = v.get_mut(15) {
        *b |= 0x80;
    }
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u32::from(regs.get(byte).copied().unwrap_or(0));
    let b1 = u32::from(regs.get(byte + 1).copied().unwrap_or(0));
    u8::try_from(((b0 >> fb) | (b1 << (8 - fb))) & 63).unwrap_or(0)
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u16::from(val) << fb;
    let mask = 63u16 << fb;
    let [lo, hi] = v.to_le_bytes();
    let [mlo, mhi] = mask.to_le_bytes();
    if let Some(b) = regs.get_mut(byte) {
        *b = (*b & !mlo) | lo;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b = (*b & !mhi) | hi;
    }
}

/// Sets dense register `i` to `count` if that raises it.
fn dense_set(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

/// One decoded sparse opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `len` zero registers, in `bytes` bytes (1: ZERO, 2: XZERO).
    Zero { len: usize, bytes: usize },
    /// `len` registers of `value`.
    Val { value: u8, len: usize },
}

/// Decodes the opcode at `p` (a truncated XZERO reads its missing byte as 0, as
/// Redis's terminator byte does).
fn op_at(s: &[u8], p: usize) -> Op {
    let b = s[p];
    if b & 0xc0 == 0 {
        Op::Zero {
            len: usize::from(b & 0x3f) + 1,
            bytes: 1,
        }
    } else if b & 0xc0 == 0x40 {
        let lo = usize::from(s.get(p + 1).copied().unwrap_or(0));
        Op::Zero {
            len: ((usize::from(b & 0x3f) << 8) | lo) + 1,
            bytes: 2,
        }
    } else {
        Op::Val {
            value: ((b >> 2) & 0x1f) + 1,
            len: usize::from(b & 3) + 1,
        }
    }
}

fn val_byte(value: u8, len: usize) -> u8 {
    let len = u8::try_from(len - 1).unwrap_or(0);
    0x80 | ((value - 1) << 2) | len
}

/// Appends a zero run of `len` (1..=16384) registers: ZERO up to 64, else XZERO.
fn push_zero_run(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    if len > ZERO_MAX_LEN {
        out.push(0x40 | u8::try_from(l >> 8).unwrap_or(0x3f));
        out.push(u8::try_from(l & 0xff).unwrap_or(0));
    } else {
        out.push(u8::try_from(l).unwrap_or(0));
    }
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in a sparse value,
/// promoting it to dense when needed. Returns whether a register changed.
fn sparse_set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> Result<bool, HllError> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let end = v.len();
    let (mut p, mut first, mut prev) = (HDR, 0usize, None);
    let mut found = None;
    while p < end {
        let op = op_at(v, p);
        let (span, bytes) = match op {
            Op::Zero { len, bytes } => (len, bytes),
            Op::Val { len, .. } => (len, 1),
        };
        if index < first + span {
            found = Some((op, span));
            break;
        }
        prev = Some(p);
        p += bytes;
        first += span;
    }
    let Some((op, span)) = found else {
        return Err(HllError::Corrupt);
    };
    let last = first + span - 1;
    // Step 2: the trivial cases, else the split sequence.
    let mut seq: Vec<u8> = Vec::with_capacity(5);
    let oldlen = match op {
        Op::Val { value, .. } if value >= count => return Ok(false),
        Op::Val { len: 1, .. } | Op::Zero { len: 1, bytes: 1 } => {
            v[p] = val_byte(count, 1);
            merge_after(v, prev.unwrap_or(HDR));
            invalidate(v);
            return Ok(true);
        }
        Op::Zero { bytes, .. } => {
            if index != first {
                push_zero_run(&mut seq, index - first);
            }
            seq.push(val_byte(count, 1));
            if index != last {
                push_zero_run(&mut seq, last - index);
            }
            bytes
        }
        Op::Val { value, .. } => {
            if index != first {
                seq.push(val_byte(value, index - first));
            }
            seq.push(val_byte(count, 1));
            if index != last {
                seq.push(val_byte(value, last - index));
            }
            1
        }
    };
    // Step 3: put the sequence in place of the opcode.
    if seq.len() > oldlen && v.len() + seq.len() - oldlen > max_bytes {
        return promote(v, index, count);
    }
    let stop = (p + oldlen).min(v.len());
    v.splice(p..stop, seq);
    // Step 4: merge adjacent equal VALs near the change.
    merge_after(v, prev.unwrap_or(HDR));
    invalidate(v);
    Ok(true)
}

/// Redis's merge pass: up to 5 opcodes from `p`, joining two adjacent VALs of one
/// value whose lengths fit one opcode.
fn merge_after(v: &mut Vec<u8>, mut p: usize) {
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        match op_at(v, p) {
            Op::Zero { bytes, .. } => {
                p += bytes;
                continue;
            }
            Op::Val { value, len } => {
                if p + 1 < v.len() {
                    if let Op::Val {
                        value: v2,
                        len: len2,
                    } = op_at(v, p + 1)
                    {
                        if v2 == value && len + len2 <= VAL_MAX_LEN {
                            v[p + 1] = val_byte(value, len + len2);
                            v.remove(p);
                            continue;
                        }
                    }
                }
            }
        }
        p += 1;
    }
}

/// Converts a sparse value to dense then sets the register (always a change).
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, HllError> {
    to_dense(v)?;
    dense_set(&mut v[HDR..], index, count);
    invalidate(v);
    Ok(true)
}

/// Converts a sparse value to dense in place (header kept); no-op when dense.
pub(crate) fn to_dense(v: &mut Vec<u8>) -> Result<(), HllError> {
    if v.get(4) == Some(&DENSE) {
        return Ok(());
    }
    let mut regs = vec![0u8; REGISTERS];
    sparse_into_max(v, &mut regs)?;
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    for (i, &r) in regs.iter().enumerate() {
        if r != 0 {
            dense_put(&mut dense[HDR..], i, r);
        }
    }
    *v = dense;
    Ok(())
}

/// Raises `max[i]` to each register of a sparse value (Redis's `hllMerge`, sparse
/// side: a VAL run past the end stops the walk; the walk must end on 16384).
fn sparse_into_max(v: &[u8], max: &mut [u8]) -> Result<(), HllError> {
    let (mut p, mut i) = (HDR, 0usize);
    while p < v.len() {
        match op_at(v, p) {
            Op::Zero { len, bytes } => {
                i += len;
                p += bytes;
            }
            Op::Val { value, len } => {
                if i + len > REGISTERS {
                    break;
                }
                for m in &mut max[i..i + len] {
                    *m = (*m).max(value);
                }
                i += len;
                p += 1;
            }
        }
    }
    if i == REGISTERS {
        Ok(())
    } else {
        Err(HllError::Corrupt)
    }
}

/// Adds one element (PFADD). The value must have passed [`check`].
pub(crate) fn add(v: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> Result<bool, HllError> {
    let (index, count) = pat_len(ele);
    if v[4] == DENSE {
        let changed = dense_set(&mut v[HDR..], index, count);
        if changed {
            invalidate(v);
        }
        Ok(changed)
    } else {
        sparse_set(v, index, count, max_bytes)
    }
}

/// Raises `max` (16384 raw registers) to the registers of `v` (checked).
pub(crate) fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), HllError> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        Ok(())
    } else {
        sparse_into_max(v, max)
    }
}

/// Writes raw registers into an HLL value (PFMERGE's destination), as Redis does:
/// register by register, so a sparse destination may become dense.
pub(crate) fn set_registers(
    v: &mut Vec<u8>,
    max: &[u8],
    dense: bool,
    max_bytes: usize,
) -> Result<(), HllError> {
    if dense {
        to_dense(v)?;
    }
    for (i, &m) in max.iter().enumerate().take(REGISTERS) {
        if m == 0 {
            continue;
        }
        if v[4] == DENSE {
            dense_set(&mut v[HDR..], i, m);
        } else {
            sparse_set(v, i, m, max_bytes)?;
        }
    }
    invalidate(v);
    Ok(())
}

/// All 16384 registers of a checked value (`PFDEBUG GETREG`).
pub(crate) fn registers(v: &[u8]) -> Result<Vec<u8>, HllError> {
    let mut regs = vec![0u8; REGISTERS];
    merge_into(&mut regs, v)?;
    Ok(regs)
}

/// Ertl's sigma.
#[expect(clippy::float_cmp, reason = "the exact end case, as Redis tests it")]
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev.to_bits() == z.to_bits() {
            return z;
        }
    }
}

/// Ertl's tau.
#[expect(clippy::float_cmp, reason = "the exact end cases, as Redis tests them")]
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if prev.to_bits() == z.to_bits() {
            return z / 3.0;
        }
    }
}

/// The estimate from a histogram of register values (Redis 7's `hllCount`).
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "counts up to 16384 are exact in f64; the estimate is rounded as llroundl"
)]
fn estimate(h: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - h[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    let alpha_inf = 0.721_347_520_444_481_7_f64;
    (alpha_inf * m * m / z).round() as u64
}

/// The cardinality of raw registers (PFCOUNT of several keys).
pub(crate) fn count_raw(regs: &[u8]) -> u64 {
    let mut h = [0u64; 64];
    for &r in regs {
        h[usize::from(r & 63)] += 1;
    }
    estimate(&h)
}

/// The cardinality of a checked value: the cached one when valid, else computed and
/// cached in the header. Returns it and whether the value changed.
pub(crate) fn count(v: &mut [u8]) -> Result<(u64, bool), HllError> {
    if v[15] & 0x80 == 0 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&v[8..16]);
        return Ok((u64::from_le_bytes(b), false));
    }
    let mut h = [0u64; 64];
    if v[4] == DENSE {
        for i in 0..REGISTERS {
            h[usize::from(dense_get(&v[HDR..], i))] += 1;
        }
    } else {
        let (mut p, mut idx) = (HDR, 0usize);
        while p < v.len() {
            match op_at(v, p) {
                Op::Zero { len, bytes } => {
                    idx += len;
                    h[0] += len as u64;
                    p += bytes;
                }
                Op::Val { value, len } => {
                    idx += len;
                    h[usize::from(value)] += len as u64;
                    p += 1;
                }
            }
        }
        if idx != REGISTERS {
            return Err(HllError::Corrupt);
        }
    }
    let card = estimate(&h);
    v[8..16].copy_from_slice(&card.to_le_bytes());
    Ok((card, true))
}

/// A sparse value's opcodes as `PFDEBUG DECODE` prints them (`z:len Z:len v:val,len`).
pub(crate) fn decode_sparse(v: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut p = HDR;
    while p < v.len() {
        match op_at(v, p) {
            Op::Zero { len, bytes: 1 } => {
                parts.push(format!("z:{len}"));
                p += 1;
            }
            Op::Zero { len, bytes } => {
                parts.push(format!("Z:{len}"));
                p += bytes;
            }
            Op::Val { value, len } => {
                parts.push(format!("v:{value},{len}"));
                p += 1;
            }
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hll_of(n: usize, prefix: &str) -> Vec<u8> {
        let mut v = new_sparse();
        for i in 0..n {
            add(&mut v, format!("{prefix}{i}").as_bytes(), SPARSE_MAX_BYTES).expect("add");
        }
        v
    }

    /// `PFADD x e0 … e299` then `PFCOUNT x` and `GET x` on redis-server 7.0.15 (the
    /// count, 302, is cached in bytes 8..16).
    const REDIS_BLOB: &[&str] = &[
        "48594c4c010000002e01000000000000368414880b801980405480404984048402a40e880f803380404a84404580259c",
        "01900188128838844094804065840e88404c8040578817881180404280008040608c18800c80410f8812802d801e8026",
        "8001880a842a8040638440768c40468440cd842390405480098019843f84168021843e8009804094804062881a904073",
        "804062840d80406b8418840c80408384405d841480406f80405a8407840d8040f080405c800080068427844081803c84",
        "4047840780404e8040478803802f841084039404844043840c842684406e804057841a80404084409d84198019802a84",
        "40e78c198c0884405f844087801d80208010800f800b8840529c0c801080404b8c4052881b804070883e80406e804057",
        "804063802b8c40df80148040618c1a840380318c404b80408080404580088440e4801780404480148012804052841788",
        "404a801b801d8040468c108c018401841e8811801f840284407d8440de84178c4049803088008410843d8008801c8407",
        "84198028804060844052844046843a8c404f8814802988008402800a8840578041328040739011842e84407080138408",
        "80008401801894404280028040818c2e8440848c168410800f813c881d801380048430840e8400800680408184118831",
        "80404584409e88406080038013900d8040b88440bb88268c0e800e84118003801780404e84399022844049800484406a",
        "80404c882c8037800a80388c0784405380238c308440998017840d80058003801d843580409e880b983f882e88404480",
        "40b080198408841f880380405b841b80398004804044800580404e800d88128440d380388800841d88405f802a800290",
        "407e800784407b801d841d80148832801e8440458418840f8440458033843a88138028842e8c40778440768017883e84",
        "19842880068016800e9022840a800a80405e840d8019901e8013801380406c8c178828804046844044",
    ];

    fn unhex(parts: &[&str]) -> Vec<u8> {
        let s: String = parts.concat();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn redis_blob_reads_and_is_rebuilt_byte_for_byte() {
        let blob = unhex(REDIS_BLOB);
        assert_eq!(blob.len(), 713);
        assert_eq!(check(&blob), Ok(false));
        // The cached count, then the count recomputed from the registers.
        let mut cached = blob.clone();
        assert_eq!(count(&mut cached), Ok((302, false)));
        let mut fresh = blob.clone();
        invalidate(&mut fresh);
        assert_eq!(count(&mut fresh), Ok((302, true)));
        assert_eq!(fresh, blob);
        // The same elements added here give Redis's bytes.
        let mut ours = hll_of(300, "e");
        assert_eq!(count(&mut ours), Ok((302, true)));
        assert_eq!(ours, blob);
    }

    #[test]
    fn murmur_known_values() {
        // MurmurHash64A reference values (Austin Appleby's algorithm, seed 0).
        assert_eq!(murmur64a(b"", 0), 0);
        // Same input, different seed, different hash; deterministic.
        assert_ne!(murmur64a(b"a", 0xadc8_3b19), murmur64a(b"a", 0));
        assert_eq!(murmur64a(b"abcdefghi", 7), murmur64a(b"abcdefghi", 7));
    }

    #[test]
    fn empty_value_is_redis_bytes() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        let mut v2 = v.clone();
        assert_eq!(count(&mut v2), Ok((0, false)));
    }

    #[test]
    #[expect(clippy::cast_precision_loss, reason = "counts below 2^53")]
    fn counts_within_error_and_dense_equals_sparse() {
        for n in [1usize, 2, 3, 10, 100, 1000, 5000, 20_000, 100_000] {
            let mut v = hll_of(n, "e");
            let (c, _) = count(&mut v).expect("count");
            let err = (c as f64 - n as f64).abs() / n as f64;
            assert!(
                err < 0.03 || (n < 100 && c.abs_diff(n as u64) <= 1),
                "{n} -> {c}"
            );
            let mut d = v.clone();
            to_dense(&mut d).expect("dense");
            invalidate(&mut d);
            assert_eq!(count(&mut d).expect("count").0, c, "{n}");
            if n >= 20_000 {
                assert_eq!(encoding(&v), "dense");
            } else if n <= 100 {
                assert_eq!(encoding(&v), "sparse");
            }
        }
    }

    #[test]
    fn small_counts_are_exact() {
        let mut v = hll_of(5, "");
        assert_eq!(count(&mut v).expect("count").0, 5);
        // The cache is now valid: byte 15's top bit is clear.
        assert_eq!(v[15] & 0x80, 0);
        assert!(!add(&mut v, b"0", SPARSE_MAX_BYTES).expect("add"));
        assert!(add(&mut v, b"new element", SPARSE_MAX_BYTES).expect("add"));
        assert_eq!(v[15], 0x80);
    }

    #[test]
    fn sparse_split_and_merge_follow_redis() {
        let mut v = new_sparse();
        assert_eq!(sparse_set(&mut v, 5, 3, 3000), Ok(true));
        assert_eq!(decode_sparse(&v), "z:5 v:3,1 Z:16378");
        assert_eq!(sparse_set(&mut v, 6, 3, 3000), Ok(true));
        assert_eq!(decode_sparse(&v), "z:5 v:3,2 Z:16377");
        assert_eq!(sparse_set(&mut v, 6, 2, 3000), Ok(false));
        assert_eq!(sparse_set(&mut v, 6, 7, 3000), Ok(true));
        assert_eq!(decode_sparse(&v), "z:5 v:3,1 v:7,1 Z:16377");
        assert_eq!(sparse_set(&mut v, 4, 3, 3000), Ok(true));
        assert_eq!(decode_sparse(&v), "z:4 v:3,2 v:7,1 Z:16377");
        // Register above 32: dense.
        assert_eq!(sparse_set(&mut v, 100, 40, 3000), Ok(true));
        assert_eq!(encoding(&v), "dense");
        let regs = registers(&v).expect("regs");
        assert_eq!(
            (regs[4], regs[5], regs[6], regs[100], regs[7]),
            (3, 3, 7, 40, 0)
        );
    }

    #[test]
    fn corrupt_values_are_detected() {
        let mut v = hll_of(3, "x");
        v.extend_from_slice(b"hello");
        assert_eq!(count(&mut v), Err(HllError::Corrupt));
        let mut w = hll_of(3, "x");
        w[..4].copy_from_slice(b"0123");
        assert_eq!(check(&w), Err(HllError::NotHll));
        let mut w = hll_of(3, "x");
        w[4] = b'x';
        assert_eq!(check(&w), Err(HllError::NotHll));
        let mut w = hll_of(3, "x");
        w[4] = 0;
        assert_eq!(check(&w), Err(HllError::NotHll));
        assert_eq!(check(b"HYLL"), Err(HllError::NotHll));
    }

    #[test]
    fn merge_is_union() {
        let a = hll_of(1000, "a");
        let b = hll_of(1000, "b");
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, &a).expect("a");
        merge_into(&mut max, &b).expect("b");
        let c = count_raw(&max);
        assert!((1940..=2060).contains(&c), "{c}");
        let mut dst = new_sparse();
        set_registers(&mut dst, &max, false, SPARSE_MAX_BYTES).expect("set");
        assert_eq!(count(&mut dst).expect("count").0, c);
    }
}
