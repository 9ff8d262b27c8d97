//! The characters a YAML stream may hold (YAML 1.2 §5.1, `c-printable`):
//! tab, line feed, carriage return, and everything from space up except
//! DEL, the C1 controls other than NEL, surrogates and U+FFFE/U+FFFF.
//! The parser underneath reads a NUL as the end of the stream ("found
//! unexpected end of stream" in the middle of a quoted name) and lets the
//! other control characters through into names, paths and rules, so the
//! text is checked first and the first such character is reported as what
//! it is, at its line and column.

use crate::error::SpecError;
use crate::location::{Location, SourceName};

fn printable(c: char) -> bool {
    matches!(c,
        '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}'
        | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

/// How to write `c` in a double-quoted YAML string (YAML 1.2 §5.7).
fn escape(c: char) -> String {
    match c {
        '\0' => "\\0".into(),
        '\u{7}' => "\\a".into(),
        '\u{8}' => "\\b".into(),
        '\u{b}' => "\\v".into(),
        '\u{c}' => "\\f".into(),
        '\u{1b}' => "\\e".into(),
        c if (c as u32) <= 0xff => format!("\\x{:02X}", c as u32),
        c => format!("\\u{:04X}", c as u32),
    }
}

fn describe(c: char) -> String {
    match c {
        '\0' => "NUL character (U+0000)".into(),
        '\u{fffe}' | '\u{ffff}' => format!("noncharacter U+{:04X}", c as u32),
        c => format!("control character U+{:04X}", c as u32),
    }
}

/// Checks that `text` holds only characters YAML allows; otherwise an error
/// at the first other one (1-based line and column in characters, as the
/// parser counts them).
pub(crate) fn check(text: &str, source: &SourceName) -> Result<(), SpecError> {
    let Some((at, c)) = text.char_indices().find(|&(_, c)| !printable(c)) else {
        return Ok(());
    };
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    Err(SpecError::new(
        source.as_str(),
        Location::new(line, column),
        "",
        format!(
            "{} is not allowed in YAML; a double-quoted string can hold it as the escape \"{}\"",
            describe(c),
            escape(c)
        ),
    ))
}
