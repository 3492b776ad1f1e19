//! Redis glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`,
//! `[^a-z]`, and `\x` to match `x` literally. Matching is iterative with one
//! backtracking point, so no pattern costs more than O(pattern × subject).

/// True if `s` matches `pat`.
pub(crate) fn matches(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut i) = (0usize, 0usize);
    // Where to resume after the last `*`: (pattern index after it, subject index).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' if i < s.len() => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' if i < s.len() => {
                    let (hit, next) = class(pat, p, s[i], nocase);
                    if hit {
                        p = next;
                        i += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pat.len() && i < s.len() && eq(pat[p + 1], s[i]) => {
                    p += 2;
                    i += 1;
                    continue;
                }
                b'\\' if p + 1 < pat.len() => {}
                c if i < s.len() && c != b'?' && c != b'[' && eq(c, s[i]) => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        // Mismatch: let the last `*` swallow one more byte.
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches byte `c` against the class starting at `pat[p] == b'['`. Returns (hit,
/// index after the class). An unterminated class runs to the end of the pattern, as
/// in Redis.
fn class(pat: &[u8], p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let mut j = p + 1;
    let negate = pat.get(j) == Some(&b'^');
    if negate {
        j += 1;
    }
    let mut hit = false;
    while j < pat.len() && pat[j] != b']' {
        if pat[j] == b'\\' && j + 1 < pat.len() {
            hit |= fold(pat[j + 1]) == c;
            j += 2;
        } else if j + 2 < pat.len() && pat[j + 1] == b'-' && pat[j + 2] != b']' {
            let (mut lo, mut hi) = (fold(pat[j]), fold(pat[j + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            hit |= (lo..=hi).contains(&c);
            j += 3;
        } else {
            hit |= fold(pat[j]) == c;
            j += 1;
        }
    }
    let next = (j + 1).min(pat.len().max(j));
    (hit != negate, next.min(pat.len()))
}

/// The literal prefix every match of `pat` starts with (lets KEYS/SCAN seek instead
/// of scanning from the start).
pub(crate) fn literal_prefix(pat: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < pat.len() {
        match pat[i] {
            b'\\' if i + 1 < pat.len() => {
                out.push(pat[i + 1]);
                i += 2;
            }
            b'*' | b'?' | b'[' | b'\\' => break,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn redis_examples() {
        assert!(m("h?llo", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hello"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("user:*", "user:42"));
        assert!(!m("user:*", "usr:42"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(m("[z-a]", "m"));
        assert!(matches(b"HeLLo", b"hello", true));
        assert!(!m("", "a"));
        assert!(m("", ""));
    }

    #[test]
    fn pathological_is_fast() {
        let s = "a".repeat(10_000);
        let p = "*a".repeat(50) + "b";
        let t = std::time::Instant::now();
        assert!(!m(&p, &s));
        assert!(t.elapsed().as_secs() < 2);
    }

    #[test]
    fn prefix() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b*"), b"a*b");
        assert_eq!(literal_prefix(b"*x"), b"");
        assert_eq!(literal_prefix(b"abc"), b"abc");
    }
}
