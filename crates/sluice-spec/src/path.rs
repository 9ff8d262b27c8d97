//! Field paths such as `nfs[1].config.rules[3].src`: building and parsing.

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Whether `key` can be written bare (`a.key`) rather than quoted (`a["k y"]`).
fn is_simple_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The path of mapping entry `key` under `base`.
pub(crate) fn join_key(base: &str, key: &str) -> String {
    if is_simple_key(key) {
        if base.is_empty() {
            key.to_string()
        } else {
            format!("{base}.{key}")
        }
    } else {
        let mut out = String::with_capacity(base.len() + key.len() + 4);
        out.push_str(base);
        out.push_str("[\"");
        for c in key.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push_str("\"]");
        out
    }
}

/// The path of element `index` of the sequence at `base`.
pub(crate) fn join_index(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

/// The path `base` with segments appended.
pub(crate) fn join_segs(base: &str, segs: &[Seg]) -> String {
    let mut out = base.to_string();
    for seg in segs {
        out = match seg {
            Seg::Key(k) => join_key(&out, k),
            Seg::Index(i) => join_index(&out, *i),
        };
    }
    out
}

/// Splits a path into segments. Lenient: anything that does not parse as an
/// index or quoted key is taken as part of a bare key.
pub(crate) fn parse(path: &str) -> Vec<Seg> {
    let chars: Vec<char> = path.chars().collect();
    let mut segs = Vec::new();
    let mut i = 0;
    let mut key = String::new();
    let flush = |key: &mut String, segs: &mut Vec<Seg>| {
        if !key.is_empty() {
            segs.push(Seg::Key(std::mem::take(key)));
        }
    };
    while i < chars.len() {
        match chars[i] {
            '.' => {
                flush(&mut key, &mut segs);
                i += 1;
            }
            '[' => {
                if let Some((seg, next)) = parse_bracket(&chars, i) {
                    flush(&mut key, &mut segs);
                    segs.push(seg);
                    i = next;
                } else {
                    key.push('[');
                    i += 1;
                }
            }
            c => {
                key.push(c);
                i += 1;
            }
        }
    }
    flush(&mut key, &mut segs);
    segs
}

/// Parses `[12]` or `["key"]` starting at `chars[start] == '['`; returns the
/// segment and the index just past the closing bracket.
fn parse_bracket(chars: &[char], start: usize) -> Option<(Seg, usize)> {
    let mut i = start + 1;
    if chars.get(i) == Some(&'"') {
        i += 1;
        let mut key = String::new();
        loop {
            match chars.get(i)? {
                '\\' => {
                    match chars.get(i + 1)? {
                        'n' => key.push('\n'),
                        c => key.push(*c),
                    }
                    i += 2;
                }
                '"' => break,
                c => {
                    key.push(*c);
                    i += 1;
                }
            }
        }
        if chars.get(i + 1) != Some(&']') {
            return None;
        }
        Some((Seg::Key(key), i + 2))
    } else {
        let digits_start = i;
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        if i == digits_start || chars.get(i) != Some(&']') {
            return None;
        }
        let digits: String = chars[digits_start..i].iter().collect();
        let index = digits.parse().ok()?;
        Some((Seg::Index(index), i + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_parses_round_trip() {
        let p = join_key("", "nfs");
        let p = join_index(&p, 1);
        let p = join_key(&p, "config");
        let p = join_key(&p, "odd key.\"x\"");
        let p = join_index(&p, 3);
        assert_eq!(p, "nfs[1].config[\"odd key.\\\"x\\\"\"][3]");
        assert_eq!(
            parse(&p),
            vec![
                Seg::Key("nfs".into()),
                Seg::Index(1),
                Seg::Key("config".into()),
                Seg::Key("odd key.\"x\"".into()),
                Seg::Index(3),
            ]
        );
        assert_eq!(join_segs("", &parse(&p)), p);
    }

    #[test]
    fn lenient_parse() {
        assert_eq!(
            parse("a[x].b"),
            vec![Seg::Key("a[x]".into()), Seg::Key("b".into())]
        );
        assert_eq!(parse(""), vec![]);
    }
}
