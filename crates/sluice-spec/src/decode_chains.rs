//! Decoding `chains[i]` entries and their `match` selectors.

use crate::config_node::{ConfigNode, ConfigValue};
use crate::fields::{self, Fields, Res};
use crate::limits;
use crate::model::{ChainSpec, MatchSpec};
use crate::net::{self, PROTO_NAMES};

const CHAIN_KEYS: [&str; 8] = [
    "name",
    "from",
    "match",
    "nfs",
    "to",
    "bidirectional",
    "wakeup",
    "tenant",
];

/// Suffix of the chain `bidirectional: true` adds for the reverse direction.
pub(crate) const REVERSE_SUFFIX: &str = "-rev";
const MATCH_KEYS: [&str; 6] = ["proto", "src", "dst", "src_port", "dst_port", "ip_version"];

/// Decodes one chain, plus its reverse chain when `bidirectional: true`.
pub(crate) fn chain_entry(node: &ConfigNode) -> Res<Vec<ChainSpec>> {
    let c = chain(node)?;
    let f = Fields::of(node, "a chain")?;
    let Some(b) = f.opt("bidirectional") else {
        return Ok(vec![c]);
    };
    if !fields::boolean(b)? {
        return Ok(vec![c]);
    }
    let max = limits::NAME_MAX - REVERSE_SUFFIX.len();
    if c.name.len() > max {
        return Err(node.error_at_path(
            "name",
            format!(
                "a bidirectional chain's name has at most {max} characters (its reverse chain is named `<name>{REVERSE_SUFFIX}`)"
            ),
        ));
    }
    let reverse = reversed(&c);
    Ok(vec![c, reverse])
}

/// The chain for the other direction of a bump in the wire: from `to` back
/// to `from` through the same NFs in reverse order, with the selector's
/// sources and destinations swapped (replies match what requests did).
pub(crate) fn reversed(c: &ChainSpec) -> ChainSpec {
    ChainSpec {
        name: format!("{}{REVERSE_SUFFIX}", c.name),
        from: c.to.clone(),
        matcher: c.matcher.as_ref().map(|m| MatchSpec {
            src: m.dst,
            dst: m.src,
            src_port: m.dst_port,
            dst_port: m.src_port,
            ..m.clone()
        }),
        nfs: c.nfs.iter().rev().cloned().collect(),
        to: c.from.clone(),
        wakeup: c.wakeup,
        tenant: c.tenant.clone(),
        location: c.location,
    }
}

/// Decodes one chain.
fn chain(node: &ConfigNode) -> Res<ChainSpec> {
    let f = Fields::of(node, "a chain")?;
    f.deny_unknown("a chain", &CHAIN_KEYS)?;
    let name = fields::string(f.req("name", "every chain needs a unique name")?)?;
    let from = fields::string(f.req("from", "the input port")?)?;
    let matcher = f.opt("match").map(matcher).transpose()?;
    let nfs = match f.opt("nfs") {
        None => Vec::new(),
        Some(n) => n
            .as_seq()
            .ok_or_else(|| fields::type_error(n, "a sequence of NF names, e.g. [acl, mon]"))?
            .iter()
            .map(|item| fields::string(item).map(str::to_string))
            .collect::<Res<Vec<_>>>()?,
    };
    let to = fields::string(f.req("to", "an output port or another chain")?)?;
    Ok(ChainSpec {
        name: name.to_string(),
        from: from.to_string(),
        matcher,
        nfs,
        to: to.to_string(),
        wakeup: f
            .opt("wakeup")
            .map(crate::wakeup::decode_rule)
            .transpose()?,
        tenant: f
            .opt("tenant")
            .map(|n| fields::string(n).map(str::to_string))
            .transpose()?,
        location: node.location(),
    })
}

fn matcher(node: &ConfigNode) -> Res<MatchSpec> {
    let f = Fields::of(node, "a traffic selector")?;
    f.deny_unknown("a match", &MATCH_KEYS)?;
    Ok(MatchSpec {
        proto: f.opt("proto").map(proto).transpose()?,
        src: f.opt("src").map(fields::prefix).transpose()?,
        dst: f.opt("dst").map(fields::prefix).transpose()?,
        src_port: f.opt("src_port").map(fields::port_range).transpose()?,
        dst_port: f.opt("dst_port").map(fields::port_range).transpose()?,
        ip_version: f.opt("ip_version").map(fields::ip_version).transpose()?,
    })
}

fn proto(node: &ConfigNode) -> Res<u8> {
    let names: Vec<&str> = PROTO_NAMES.iter().map(|(n, _)| *n).collect();
    match node.value() {
        ConfigValue::Int(_) => fields::int_as(node, limits::PROTO),
        ConfigValue::String(s) => net::proto_number(s).ok_or_else(|| {
            node.error(format!(
                "unknown protocol \"{s}\" (valid: {} or a number 0..=255)",
                names.join(", ")
            ))
        }),
        _ => Err(fields::type_error(
            node,
            &format!("a protocol ({} or a number 0..=255)", names.join(", ")),
        )),
    }
}
