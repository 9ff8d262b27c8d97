//! Reading typed values out of located nodes, with errors that say what was
//! expected and what the valid choices are.

use ipnet::IpNet;

use crate::config_node::{ConfigEntry, ConfigNode, ConfigValue};
use crate::error::SpecError;
use crate::limits::Limit;
use crate::net::{self, PortRange};

/// Result type of this module.
pub(crate) type Res<T> = Result<T, SpecError>;

/// The entries of a mapping node, looked up by key.
pub(crate) struct Fields<'a> {
    node: &'a ConfigNode,
    entries: &'a [ConfigEntry],
}

impl<'a> Fields<'a> {
    /// The entries of `node`, which must be a mapping; `what` names it in
    /// the error (e.g. `a port`).
    pub(crate) fn of(node: &'a ConfigNode, what: &str) -> Res<Fields<'a>> {
        match node.value() {
            ConfigValue::Map(entries) => Ok(Fields { node, entries }),
            _ => Err(node.error(format!(
                "expected {what} (a mapping of keys to values), found {}",
                node.describe()
            ))),
        }
    }

    /// The mapping node itself.
    pub(crate) fn node(&self) -> &'a ConfigNode {
        self.node
    }

    /// Rejects every key not in `allowed`, at the key, listing valid keys.
    pub(crate) fn deny_unknown(&self, what: &str, allowed: &[&str]) -> Res<()> {
        for e in self.entries {
            if !allowed.contains(&e.key.as_str()) {
                let mut msg = format!(
                    "unknown key \"{}\" in {what} (valid keys: {})",
                    e.key,
                    allowed.join(", ")
                );
                if let Some(s) = suggest(&e.key, allowed.iter().copied()) {
                    msg.push_str(&format!("; did you mean \"{s}\"?"));
                }
                return Err(crate::SpecError::new(
                    e.value.source().as_str(),
                    e.key_location,
                    e.value.path(),
                    msg,
                ));
            }
        }
        Ok(())
    }

    /// The entries not in `known`.
    pub(crate) fn others(&self, known: &[&str]) -> Vec<ConfigEntry> {
        self.entries
            .iter()
            .filter(|e| !known.contains(&e.key.as_str()))
            .cloned()
            .collect()
    }

    /// The value of `key`, treating an explicit null as absent.
    pub(crate) fn opt(&self, key: &str) -> Option<&'a ConfigNode> {
        self.entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| &e.value)
            .filter(|v| !v.is_null())
    }

    /// The value of `key`, which must be present (and not null).
    pub(crate) fn req(&self, key: &str, hint: &str) -> Res<&'a ConfigNode> {
        self.opt(key).ok_or_else(|| {
            let mut msg = format!("missing required key \"{key}\"");
            if !hint.is_empty() {
                msg.push_str(&format!(" ({hint})"));
            }
            self.node.error(msg)
        })
    }
}

/// The closest of `choices` to `word` if it is plausibly a typo.
pub(crate) fn suggest<'c>(word: &str, choices: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let max = (word.chars().count() / 3).max(1);
    choices
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= max)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A type error at `node`.
pub(crate) fn type_error(node: &ConfigNode, expected: &str) -> SpecError {
    node.error(format!("expected {expected}, found {}", node.describe()))
}

/// A string value.
pub(crate) fn string(node: &ConfigNode) -> Res<&str> {
    node.as_str().ok_or_else(|| type_error(node, "a string"))
}

/// A boolean value.
pub(crate) fn boolean(node: &ConfigNode) -> Res<bool> {
    node.as_bool()
        .ok_or_else(|| type_error(node, "a boolean (true or false)"))
}

/// An integer within `limit`.
pub(crate) fn integer(node: &ConfigNode, limit: Limit) -> Res<u64> {
    let ConfigValue::Int(i) = node.value() else {
        return Err(type_error(node, "an integer"));
    };
    let v = u64::try_from(*i).map_err(|_| node.error(format!("{}, got {i}", limit.describe())))?;
    limit.check(v).map_err(|m| node.error(m))?;
    Ok(v)
}

/// An integer within `limit`, converted to a narrower type that `limit`
/// guarantees it fits.
pub(crate) fn int_as<T: TryFrom<u64>>(node: &ConfigNode, limit: Limit) -> Res<T> {
    let v = integer(node, limit)?;
    T::try_from(v).map_err(|_| node.error(format!("{}, got {v}", limit.describe())))
}

/// One of `choices` by name; `what` names the thing in the error.
pub(crate) fn choice<T: Copy>(node: &ConfigNode, what: &str, choices: &[(&str, T)]) -> Res<T> {
    let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
    let valid = names.join(", ");
    let Some(s) = node.as_str() else {
        return Err(node.error(format!(
            "expected {what} ({valid}), found {}",
            node.describe()
        )));
    };
    if let Some((_, v)) = choices.iter().find(|(n, _)| *n == s) {
        return Ok(*v);
    }
    let mut msg = format!("unknown {what} \"{s}\" (valid: {valid})");
    if let Some(sug) = suggest(s, names.iter().copied()) {
        msg.push_str(&format!("; did you mean \"{sug}\"?"));
    }
    Err(node.error(msg))
}

/// A CIDR prefix written as a string.
pub(crate) fn prefix(node: &ConfigNode) -> Res<IpNet> {
    let s = node
        .as_str()
        .ok_or_else(|| type_error(node, "a CIDR prefix such as 10.0.0.0/8"))?;
    net::parse_prefix(s).map_err(|m| node.error(m))
}

/// A port range: an integer port, or a string `a-b` or `a`.
pub(crate) fn port_range(node: &ConfigNode) -> Res<PortRange> {
    match node.value() {
        ConfigValue::Int(_) => Ok(PortRange::single(int_as(node, crate::limits::PORT)?)),
        ConfigValue::String(s) => s.parse().map_err(|m: String| node.error(m)),
        _ => Err(type_error(
            node,
            "a port (0-65535) or a port range such as \"1024-65535\"",
        )),
    }
}

/// An IP version: 4 or 6 (integer or string).
pub(crate) fn ip_version(node: &ConfigNode) -> Res<u8> {
    match (node.as_i64(), node.as_str()) {
        (Some(4), _) | (_, Some("4")) => Ok(4),
        (Some(6), _) | (_, Some("6")) => Ok(6),
        _ => Err(node.error(format!(
            "expected IP version 4 or 6, found {}",
            node.describe()
        ))),
    }
}

/// An optional integer field within `limit`.
pub(crate) fn opt_int<T: TryFrom<u64>>(
    f: &Fields<'_>,
    key: &str,
    limit: crate::limits::Limit,
) -> Res<Option<T>> {
    f.opt(key).map(|n| int_as(n, limit)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let kinds = ["generator", "sink", "pcap_in"];
        assert_eq!(
            suggest("generater", kinds.iter().copied()),
            Some("generator")
        );
        assert_eq!(suggest("pcapin", kinds.iter().copied()), Some("pcap_in"));
        assert_eq!(suggest("xyz", kinds.iter().copied()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
