//! Resolving YAML scalars to values with the YAML 1.2 core schema.

use saphyr_parser::{ScalarStyle, Tag};

use crate::config_node::ConfigValue;

/// Resolves a scalar to a value: quoted scalars are strings, plain ones
/// follow the core schema, core-schema tags force a type.
pub(crate) fn resolve(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
) -> Result<ConfigValue, String> {
    let bad = |msg: String| Err(msg);
    if let Some(tag) = tag {
        if tag.handle == "!" && tag.suffix.is_empty() {
            return Ok(ConfigValue::String(text.to_string()));
        }
        if !tag.is_yaml_core_schema() {
            return bad(format!("unsupported YAML tag {tag}"));
        }
        return match tag.suffix.as_str() {
            "str" => Ok(ConfigValue::String(text.to_string())),
            "null" if is_null(text) => Ok(ConfigValue::Null),
            "bool" => match parse_bool(text) {
                Some(b) => Ok(ConfigValue::Bool(b)),
                None => bad(format!("{text:?} is not a boolean (true or false)")),
            },
            "int" => match parse_int(text) {
                IntScan::Value(i) => Ok(ConfigValue::Int(i)),
                IntScan::TooLarge => bad(too_large(text)),
                IntScan::NotInt => bad(format!("{text:?} is not an integer")),
            },
            "float" => match (parse_float(text), parse_int(text)) {
                (Some(f), _) => finite(f, text),
                (None, IntScan::Value(i)) => Ok(ConfigValue::Float(i as f64)),
                _ => bad(format!("{text:?} is not a number")),
            },
            "null" => bad(format!("{text:?} is not null")),
            _ => bad(format!("unsupported YAML tag {tag}")),
        };
    }
    if style != ScalarStyle::Plain {
        return Ok(ConfigValue::String(text.to_string()));
    }
    if is_null(text) {
        return Ok(ConfigValue::Null);
    }
    if let Some(b) = parse_bool(text) {
        return Ok(ConfigValue::Bool(b));
    }
    match parse_int(text) {
        IntScan::Value(i) => return Ok(ConfigValue::Int(i)),
        IntScan::TooLarge => return bad(too_large(text)),
        IntScan::NotInt => {}
    }
    if let Some(f) = parse_float(text) {
        return finite(f, text);
    }
    Ok(ConfigValue::String(text.to_string()))
}

/// A float a spec may hold: a finite one. JSON has no NaN or infinity,
/// and a spec travels as JSON (the API, the daemon's saved state): a
/// `.nan` would come back as `null` after a restart, another spec than
/// the one that ran (found by `fuzz/` api_request). `1e999` overflows to
/// infinity and is refused too.
fn finite(f: f64, text: &str) -> Result<ConfigValue, String> {
    if f.is_finite() {
        Ok(ConfigValue::Float(f))
    } else {
        Err(format!(
            "{text} is not a finite number (specs are JSON too, which has no NaN or \
             infinity); quote it if it is text"
        ))
    }
}

/// The integers a spec may hold: those JSON writers and readers carry
/// exactly, from `i64::MIN` to `u64::MAX`. A larger one would be written
/// as a float and come back as another value after a restart (found by
/// `fuzz/` api_request), so it is refused where it stands.
const INT_RANGE: std::ops::RangeInclusive<i128> = (i64::MIN as i128)..=(u64::MAX as i128);

fn too_large(text: &str) -> String {
    format!(
        "integer {text} is too large (specs are JSON too, whose integers are 64-bit: \
         {} to {}); quote it if it is text",
        i64::MIN,
        u64::MAX
    )
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Result of trying to read a core-schema integer.
enum IntScan {
    Value(i128),
    TooLarge,
    NotInt,
}

fn parse_int(text: &str) -> IntScan {
    let radix_digits = |digits: &str, radix: u32| {
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            IntScan::NotInt
        } else {
            match i128::from_str_radix(digits, radix) {
                Ok(v) => IntScan::Value(v),
                Err(_) => IntScan::TooLarge,
            }
        }
    };
    if let Some(hex) = text.strip_prefix("0x") {
        return match radix_digits(hex, 16) {
            IntScan::Value(v) => within_range(v),
            other => other,
        };
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return match radix_digits(oct, 8) {
            IntScan::Value(v) => within_range(v),
            other => other,
        };
    }
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    match radix_digits(digits, 10) {
        IntScan::Value(v) if negative => within_range(-v),
        IntScan::Value(v) => within_range(v),
        other => other,
    }
}

fn within_range(v: i128) -> IntScan {
    if INT_RANGE.contains(&v) {
        IntScan::Value(v)
    } else {
        IntScan::TooLarge
    }
}

fn parse_float(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let negative = text.starts_with('-');
    match unsigned {
        ".inf" | ".Inf" | ".INF" => {
            return Some(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        ".nan" | ".NaN" | ".NAN" if unsigned.len() == text.len() => return Some(f64::NAN),
        _ => {}
    }
    // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    let bytes = unsigned.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < bytes.len() && bytes[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let int_digits = digits(&mut i);
    let mut frac_digits = 0;
    if i < bytes.len() && bytes[i] == b'.' {
        i += 1;
        frac_digits = digits(&mut i);
    }
    if int_digits == 0 && frac_digits == 0 {
        return None;
    }
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        i += 1;
        if i < bytes.len() && (bytes[i] == b'-' || bytes[i] == b'+') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return None;
        }
    }
    if i != bytes.len() {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str) -> ConfigValue {
        resolve(text, ScalarStyle::Plain, None).unwrap()
    }

    #[test]
    fn core_schema() {
        assert_eq!(plain(""), ConfigValue::Null);
        assert_eq!(plain("NULL"), ConfigValue::Null);
        assert_eq!(plain("FALSE"), ConfigValue::Bool(false));
        assert_eq!(plain("no"), ConfigValue::String("no".into()));
        assert_eq!(plain("+12"), ConfigValue::Int(12));
        assert_eq!(plain("-12"), ConfigValue::Int(-12));
        assert_eq!(plain("0o17"), ConfigValue::Int(15));
        assert_eq!(plain("0xff"), ConfigValue::Int(255));
        assert_eq!(plain("0x"), ConfigValue::String("0x".into()));
        assert_eq!(plain("1_000"), ConfigValue::String("1_000".into()));
        assert_eq!(plain("1."), ConfigValue::Float(1.0));
        assert_eq!(plain(".5"), ConfigValue::Float(0.5));
        // Non-finite floats are refused: JSON cannot carry them.
        for text in ["-.INF", ".inf", ".NaN", "1e999"] {
            let e = resolve(text, ScalarStyle::Plain, None).unwrap_err();
            assert!(e.contains("not a finite number"), "{text}: {e}");
        }
        assert_eq!(plain("-.nan"), ConfigValue::String("-.nan".into()));
        assert_eq!(plain("inf"), ConfigValue::String("inf".into()));
        assert_eq!(plain("1e"), ConfigValue::String("1e".into()));
        assert_eq!(
            plain("10.0.0.0/8"),
            ConfigValue::String("10.0.0.0/8".into())
        );
        assert_eq!(
            resolve("12", ScalarStyle::DoubleQuoted, None).unwrap(),
            ConfigValue::String("12".into())
        );
        assert!(resolve(&"9".repeat(50), ScalarStyle::Plain, None)
            .unwrap_err()
            .contains("too large"));
        // The 64-bit range JSON carries, and not one past either end.
        assert_eq!(
            plain("18446744073709551615"),
            ConfigValue::Int(u64::MAX.into())
        );
        assert_eq!(
            plain("0xffffffffffffffff"),
            ConfigValue::Int(u64::MAX.into())
        );
        assert_eq!(
            plain("-9223372036854775808"),
            ConfigValue::Int(i64::MIN.into())
        );
        for text in [
            "18446744073709551616",
            "0x10000000000000000",
            "0o2000000000000000000000",
            "-9223372036854775809",
        ] {
            let e = resolve(text, ScalarStyle::Plain, None).unwrap_err();
            assert!(e.contains("too large"), "{text}: {e}");
            let tagged = Tag {
                handle: "tag:yaml.org,2002:".into(),
                suffix: "int".into(),
            };
            assert!(
                resolve(text, ScalarStyle::Plain, Some(&tagged)).is_err(),
                "{text}"
            );
        }
    }
}
