//! Characters YAML does not allow in a stream (NUL and the other control
//! characters, the noncharacters U+FFFE/U+FFFF) are reported as what they
//! are, at their line and column, wherever they stand: in a quoted or plain
//! scalar or a comment. The YAML parser would otherwise call a NUL "the
//! end of the stream" and let the others through into names, paths and
//! rules unnoticed.

use sluice_spec::parse_str;

/// A valid spec with `X` where the character goes (line 2, column 15).
const SPEC: &str = "ports:\n  - { name: \"aXb\", kind: generator }\n  - { name: out, kind: sink }\nchains:\n  - { name: c, from: aXb, to: out }\n";

fn error_for(text: &str) -> String {
    match parse_str(text, "bad.yaml", &[]) {
        Ok(_) => panic!("accepted: {text:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_nul_in_a_quoted_name_is_reported_as_a_nul() {
    let text = SPEC.replacen('X', "\0", 1);
    assert_eq!(
        error_for(&text),
        "bad.yaml:2:15: NUL character (U+0000) is not allowed in YAML; \
         a double-quoted string can hold it as the escape \"\\0\""
    );
}

#[test]
fn every_place_and_every_unprintable_character_is_reported() {
    let places = [
        // (template, line, column of X)
        ("ports:\n  - { name: \"aXb\", kind: sink }\n", 2, 15),
        ("ports:\n  - { name: 'aXb', kind: sink }\n", 2, 15),
        ("ports:\n  - { name: aXb, kind: sink }\n", 2, 14),
        ("# comment X\nports: []\n", 1, 11),
        ("ports:\n  - name: sink\n    kind: sink   # éX\n", 3, 21),
    ];
    let chars = [
        ('\0', "NUL character (U+0000)", "\\0"),
        ('\u{1}', "control character U+0001", "\\x01"),
        ('\u{8}', "control character U+0008", "\\b"),
        ('\u{b}', "control character U+000B", "\\v"),
        ('\u{c}', "control character U+000C", "\\f"),
        ('\u{1b}', "control character U+001B", "\\e"),
        ('\u{7f}', "control character U+007F", "\\x7F"),
        ('\u{80}', "control character U+0080", "\\x80"),
        ('\u{9f}', "control character U+009F", "\\x9F"),
        ('\u{fffe}', "noncharacter U+FFFE", "\\uFFFE"),
        ('\u{ffff}', "noncharacter U+FFFF", "\\uFFFF"),
    ];
    for (tmpl, line, col) in places {
        for (c, what, escape) in chars {
            let text = tmpl.replacen('X', &c.to_string(), 1);
            let e = error_for(&text);
            assert_eq!(
                e,
                format!(
                    "bad.yaml:{line}:{col}: {what} is not allowed in YAML; \
                     a double-quoted string can hold it as the escape \"{escape}\""
                ),
                "{tmpl:?} with U+{:04X}",
                c as u32
            );
        }
    }
}

#[test]
fn printable_characters_and_escapes_still_pass() {
    // Tab, CR LF line ends, NEL, non-ASCII text in comments and values,
    // and unprintable characters written as escapes are all fine.
    let text = "ports:\r\n  # comment:\té ✓ \u{85}\r\n  - { name: gen, kind: generator }\r\n  - { name: out, kind: sink }\r\nnfs:\r\n  - { name: m, type: monitor, config: { note: \"\\0\\x01\\u00ff\" } }\r\nchains:\r\n  - { name: c, from: gen, nfs: [m], to: out }\r\n";
    let spec = parse_str(text, "ok.yaml", &["monitor"]).unwrap_or_else(|e| panic!("{e}"));
    let note = spec.nfs[0].config.get("note").unwrap();
    assert_eq!(note.as_str(), Some("\0\u{1}\u{ff}"));
}
