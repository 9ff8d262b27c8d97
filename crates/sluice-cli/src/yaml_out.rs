//! `-o yaml`: JSON values written as block YAML. Strings are written as
//! JSON strings, which are valid YAML double-quoted scalars, so nothing
//! can be misread (`no`, `1e3`, `:`); keys that are not plain words are
//! quoted the same way.

use serde_json::Value;

/// `v` as a YAML document.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        && !k.starts_with(['-', '.']);
    if plain {
        k.to_string()
    } else {
        Value::String(k.to_string()).to_string()
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        other => other.to_string(),
    }
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

fn map(out: &mut String, m: &serde_json::Map<String, Value>, indent: usize) {
    let pad = " ".repeat(indent);
    for (k, v) in m {
        if is_block(v) {
            out.push_str(&format!("{pad}{}:\n", key(k)));
            match v {
                Value::Object(m) => map(out, m, indent + 2),
                Value::Array(a) => seq(out, a, indent + 2),
                _ => {}
            }
        } else {
            out.push_str(&format!("{pad}{}: {}\n", key(k), scalar(v)));
        }
    }
}

fn seq(out: &mut String, a: &[Value], indent: usize) {
    let pad = " ".repeat(indent);
    for v in a {
        match v {
            Value::Object(m) if !m.is_empty() => {
                // The first entry on the dash's line, the rest below it.
                let mut inner = String::new();
                map(&mut inner, m, indent + 2);
                let body = &inner[indent + 2..];
                out.push_str(&format!("{pad}- {body}"));
            }
            Value::Array(a) if !a.is_empty() => {
                out.push_str(&format!("{pad}-\n"));
                seq(out, a, indent + 2);
            }
            other => out.push_str(&format!("{pad}- {}\n", scalar(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What our own YAML reader makes of it must be the same value.
    fn reads_back(v: &Value) {
        let text = to_yaml(v);
        let node =
            sluice_spec::ConfigNode::from_yaml_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(node.to_json(), *v, "{text}");
    }

    #[test]
    fn every_shape_reads_back_as_the_same_value() {
        reads_back(&json!({
            "name": "acl", "n": 3, "ratio": 0.5, "on": true, "none": null,
            "tricky": ["no", "1e3", "a: b", "- x", "", "# c", "\"q\"", "tab\there"],
            "nested": {"rules": [{"action": "drop", "dst_port": 53}, {"src": "10.0.0.0/8"}],
                       "empty_map": {}, "empty_list": []},
            "weird key": 1, "-dash": 2,
            "lists": [[1, 2], [], [{"a": [1]}]]
        }));
        reads_back(&json!([1, "two", {"three": 3}]));
    }
}
