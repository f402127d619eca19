//! Glob patterns of SCAN's MATCH and CONFIG GET, as Redis's `stringmatchlen`: `*` any run, `?` any
//! byte, `[abc]`, `[^a-z]` classes, `\x` a literal byte. Byte-wise, case-sensitive. Pure.
//!
//! `*` is matched with the usual backtrack to the last star, so the time is O(pattern x text)
//! in the worst case and never exponential (Redis's recursive matcher can be).

/// One non-star element of a pattern at `p`: whether it matches `c`, and its length in `pat`.
fn element(pat: &[u8], p: usize, c: u8) -> (bool, usize) {
    match pat.get(p) {
        Some(b'?') => (true, 1),
        Some(b'\\') => match pat.get(p + 1) {
            Some(&lit) => (lit == c, 2),
            None => (c == b'\\', 1),
        },
        Some(b'[') => {
            let mut i = p + 1;
            let negate = pat.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut hit = false;
            loop {
                match (pat.get(i), pat.get(i + 1), pat.get(i + 2)) {
                    (None, _, _) => break,
                    (Some(b']'), _, _) => {
                        i += 1;
                        break;
                    }
                    (Some(b'\\'), Some(&lit), _) => {
                        hit |= lit == c;
                        i += 2;
                    }
                    (Some(&lo), Some(b'-'), Some(&hi)) if hi != b']' => {
                        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                        hit |= (lo..=hi).contains(&c);
                        i += 3;
                    }
                    (Some(&lit), _, _) => {
                        hit |= lit == c;
                        i += 1;
                    }
                }
            }
            (hit != negate, i - p)
        }
        Some(&lit) => (lit == c, 1),
        None => (false, 0),
    }
}

/// Whether `text` matches `pat`.
pub fn matches(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last star: (pattern after it, text position it stands for).
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pat.get(p) == Some(&b'*') {
            p += 1;
            star = Some((p, t));
            continue;
        }
        match text.get(t) {
            None => {
                return pat
                    .get(p..)
                    .is_some_and(|rest| rest.iter().all(|&b| b == b'*'));
            }
            Some(&c) => {
                let (hit, len) = element(pat, p, c);
                if hit && len > 0 {
                    p += len;
                    t += 1;
                    continue;
                }
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_like_redis() {
        let m = |p: &str, t: &str| matches(p.as_bytes(), t.as_bytes());
        assert!(m("*", ""));
        assert!(m("user:*", "user:42"));
        assert!(!m("user:*", "use"));
        assert!(m("h?llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m(r"a\*b", "a*b"));
        assert!(!m(r"a\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxc"));
        assert!(!m("*a*b*c*", "xxaxxcxxb"));
        assert!(m("k*9", "k19"));
        assert!(!m("a", "ab"));
    }
}
