//! `pcre:"/…/flags"` on top of the `regex` crate's bytes API.
//!
//! The `regex` crate guarantees linear-time matching, so it has no
//! backtracking-only constructs. Rather than let such a rule fail with a
//! generic syntax error (or, worse, change meaning), the pattern is scanned
//! first and PCRE features the crate does not have are rejected by name.

use regex::bytes::RegexBuilder;

use super::rule::Pcre;

/// Compiled-program size limit per expression: keeps a hostile rule file
/// from taking the NF's memory (the default is 10 MiB per regex).
const SIZE_LIMIT: usize = 2 << 20;

/// Parses the (already unquoted) value of a `pcre` option: `/pattern/flags`.
pub fn parse_pcre(value: &str, negated: bool) -> Result<Pcre, String> {
    let Some(body) = value.strip_prefix('/') else {
        return Err(format!("expected \"/pattern/flags\", got `{value}`"));
    };
    let Some(end) = body.rfind('/') else {
        return Err(format!("missing closing `/` in `{value}`"));
    };
    let (pattern, flags) = (&body[..end], &body[end + 1..]);
    let mut b = RegexBuilder::new(pattern);
    // Unicode off: `.` and classes work on bytes and `\xff` is the byte 0xff,
    // as in PCRE without UTF mode.
    b.unicode(false).size_limit(SIZE_LIMIT);
    let mut relative = false;
    for f in flags.chars() {
        match f {
            'i' => b.case_insensitive(true),
            's' => b.dot_matches_new_line(true),
            'm' => b.multi_line(true),
            'x' => b.ignore_whitespace(true),
            'R' => {
                relative = true;
                &mut b
            }
            other => {
                return Err(format!(
                    "unsupported flag `{other}` (supported: i, s, m, x, R)"
                ))
            }
        };
    }
    check_supported(pattern)?;
    let regex = b.build().map_err(|e| {
        let text = e.to_string();
        // The crate's message spans several lines (pattern, caret, error);
        // keep the last line, which says what is wrong.
        let last = text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        format!("invalid regular expression `{pattern}`: {}", last.trim())
    })?;
    Ok(Pcre {
        source: value.to_string(),
        regex,
        relative,
        negated,
    })
}

/// Rejects PCRE constructs the `regex` crate does not implement.
fn check_supported(p: &str) -> Result<(), String> {
    let b = p.as_bytes();
    let mut i = 0;
    let mut in_class = false;
    let unsupported = |what: &str| {
        Err(format!("{what} is not supported (the regex crate matches in linear time and has no backtracking-only features)"))
    };
    while i < b.len() {
        let c = b[i];
        if c == b'\\' {
            let Some(&n) = b.get(i + 1) else { break };
            if !in_class {
                match n {
                    b'1'..=b'9' => return unsupported(&format!("backreference `\\{}`", n as char)),
                    b'g' | b'k' => return unsupported(&format!("backreference `\\{}`", n as char)),
                    b'K' => return unsupported("`\\K` (match reset)"),
                    b'G' => return unsupported("`\\G` (previous match end)"),
                    b'Z' => {
                        return Err(
                            "`\\Z` is not supported; use `\\z` (or `$` without the m flag)"
                                .to_string(),
                        )
                    }
                    b'Q' => return unsupported("`\\Q…\\E` quoting"),
                    _ => {}
                }
            }
            i += 2;
            continue;
        }
        if in_class {
            if c == b']' {
                in_class = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'[' => {
                in_class = true;
                // A `]` right after `[` or `[^` is a literal.
                i += 1;
                if b.get(i) == Some(&b'^') {
                    i += 1;
                }
                if b.get(i) == Some(&b']') {
                    i += 1;
                }
                continue;
            }
            b'(' if b.get(i + 1) == Some(&b'?') => {
                let rest = &p[i + 2..];
                for (prefix, what) in [
                    ("=", "lookahead `(?=`"),
                    ("!", "negative lookahead `(?!`"),
                    ("<=", "lookbehind `(?<=`"),
                    ("<!", "negative lookbehind `(?<!`"),
                    (">", "atomic group `(?>`"),
                    ("|", "branch reset `(?|`"),
                    ("(", "conditional `(?(`"),
                    ("R", "recursion `(?R)`"),
                    ("&", "subroutine call `(?&`"),
                    ("P=", "named backreference `(?P=`"),
                    ("P>", "subroutine call `(?P>`"),
                    ("C", "callout `(?C`"),
                ] {
                    if rest.starts_with(prefix) {
                        return unsupported(what);
                    }
                }
                if rest.starts_with(|ch: char| ch.is_ascii_digit() || ch == '+' || ch == '-')
                    && rest
                        .trim_start_matches(['+', '-'])
                        .starts_with(|ch: char| ch.is_ascii_digit())
                {
                    return unsupported("subroutine call `(?N)`");
                }
            }
            // `}` only closes a counted repetition; elsewhere it is a literal.
            b'*' | b'+' | b'?' | b'}'
                if b.get(i + 1) == Some(&b'+') && (c != b'}' || p[..i].contains('{')) =>
            {
                return unsupported(&format!("possessive quantifier `{}+`", c as char));
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_matching() {
        let p = parse_pcre("/^get\\s+\\/admin/i", false).unwrap();
        assert!(p.regex.is_match(b"GET /admin"));
        assert!(!p.relative);
        let p = parse_pcre("/a.b/s", false).unwrap();
        assert!(p.regex.is_match(b"a\nb"));
        let p = parse_pcre("/a.b/", false).unwrap();
        assert!(!p.regex.is_match(b"a\nb"));
        let p = parse_pcre("/^b$/m", false).unwrap();
        assert!(p.regex.is_match(b"a\nb\nc"));
        let p = parse_pcre("/ a b # comment\n/x", false).unwrap();
        assert!(p.regex.is_match(b"ab"));
        let p = parse_pcre("/\\xff\\x00./R", true).unwrap();
        assert!(p.regex.is_match(&[0xff, 0, 0x80]));
        assert!(p.relative && p.negated);
        // Classes keep their specials literal.
        assert!(parse_pcre("/[(?=]+/", false).is_ok());
        assert!(parse_pcre("/a{2}b/", false).is_ok());
    }

    #[test]
    fn rejects_unsupported_constructs_by_name() {
        let err = |v: &str| parse_pcre(v, false).unwrap_err();
        assert!(err("/(a)\\1/").starts_with("backreference `\\1` is not supported"));
        assert!(err("/foo(?=bar)/").starts_with("lookahead `(?=` is not supported"));
        assert!(err("/(?<!x)y/").starts_with("negative lookbehind `(?<!` is not supported"));
        assert!(err("/(?>a+)b/").starts_with("atomic group `(?>` is not supported"));
        assert!(err("/a++/").starts_with("possessive quantifier `++` is not supported"));
        assert!(err("/a{2}+/").starts_with("possessive quantifier `}+` is not supported"));
        assert_eq!(
            err("/a/U"),
            "unsupported flag `U` (supported: i, s, m, x, R)"
        );
        assert_eq!(err("foo"), "expected \"/pattern/flags\", got `foo`");
        assert_eq!(err("/foo"), "missing closing `/` in `/foo`");
        assert!(
            err("/a(/").starts_with("invalid regular expression `a(`: "),
            "{}",
            err("/a(/")
        );
    }
}
