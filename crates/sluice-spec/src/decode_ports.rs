//! Decoding `ports[i]` entries.

use std::path::Path;

use ipnet::IpNet;

use crate::config_node::{ConfigNode, ConfigValue};
use crate::fields::opt_int;
use crate::fields::{self, Fields, Res};
use crate::limits;
use crate::net;
use crate::ports::{
    GeneratorSpec, IpVersionChoice, NicSpec, PcapInSpec, PcapOutSpec, PortKind, PortSpec, Protocol,
    SinkSpec, SizeSpec,
};

const GENERATOR_KEYS: [&str; 13] = [
    "name",
    "kind",
    "flows",
    "protocol",
    "ip_version",
    "size",
    "rate_pps",
    "count",
    "packets_per_flow",
    "src_prefix",
    "dst_prefix",
    "src_ports",
    "dst_ports",
];
const SINK_KEYS: [&str; 3] = ["name", "kind", "check_order"];
const PCAP_IN_KEYS: [&str; 5] = ["name", "kind", "path", "pace", "loops"];
const PCAP_OUT_KEYS: [&str; 4] = ["name", "kind", "path", "snaplen"];
const NIC_KEYS: [&str; 3] = ["name", "kind", "interface"];

/// Decodes one port; relative paths resolve against `base_dir`.
pub(crate) fn port(node: &ConfigNode, base_dir: &Path) -> Res<PortSpec> {
    let f = Fields::of(node, "a port")?;
    let kinds: Vec<(&str, &str)> = PortKind::NAMES.iter().map(|k| (*k, *k)).collect();
    let kind_node = f.req("kind", &format!("one of: {}", PortKind::NAMES.join(", ")))?;
    let kind_name = fields::choice(kind_node, "port kind", &kinds)?;
    let what = format!("a {kind_name} port");
    match kind_name {
        "generator" => f.deny_unknown(&what, &GENERATOR_KEYS)?,
        "sink" => f.deny_unknown(&what, &SINK_KEYS)?,
        "pcap_in" => f.deny_unknown(&what, &PCAP_IN_KEYS)?,
        "pcap_out" => f.deny_unknown(&what, &PCAP_OUT_KEYS)?,
        _ => {}
    }
    let name = fields::string(f.req("name", "every port needs a unique name")?)?;
    let kind = match kind_name {
        "generator" => PortKind::Generator(generator(&f)?),
        "sink" => PortKind::Sink(SinkSpec {
            check_order: match f.opt("check_order") {
                Some(n) => fields::boolean(n)?,
                None => true,
            },
        }),
        "pcap_in" => PortKind::PcapIn(pcap_in(&f, base_dir)?),
        "pcap_out" => PortKind::PcapOut(pcap_out(&f, base_dir)?),
        "af_xdp" => PortKind::AfXdp(nic(&f)?),
        "af_packet" => PortKind::AfPacket(nic(&f)?),
        "tap" => PortKind::Tap(nic(&f)?),
        _ => PortKind::Dpdk(nic(&f)?),
    };
    Ok(PortSpec {
        name: name.to_string(),
        kind,
        location: node.location(),
    })
}

fn generator(f: &Fields<'_>) -> Res<GeneratorSpec> {
    let d = GeneratorSpec::default();
    let ip_version = match f.opt("ip_version") {
        Some(n) => ip_version_choice(n)?,
        None => d.ip_version,
    };
    let prefix = |key: &str, default: IpNet| -> Res<IpNet> {
        let Some(n) = f.opt(key) else {
            return Ok(default);
        };
        let p = fields::prefix(n)?;
        match prefix_family_error(key, &p, ip_version) {
            Some(msg) => Err(n.error(msg)),
            None => Ok(p),
        }
    };
    let range = |key: &str, default| {
        f.opt(key)
            .map(fields::port_range)
            .transpose()
            .map(|r| r.unwrap_or(default))
    };
    Ok(GeneratorSpec {
        flows: opt_int(f, "flows", limits::FLOWS)?.unwrap_or(d.flows),
        protocol: match f.opt("protocol") {
            Some(n) => fields::choice(n, "protocol", &Protocol::ALL)?,
            None => d.protocol,
        },
        ip_version,
        size: match f.opt("size") {
            Some(n) => size(n)?,
            None => d.size,
        },
        rate_pps: opt_int(f, "rate_pps", limits::RATE_PPS)?,
        count: opt_int(f, "count", limits::COUNT)?.filter(|c| *c != 0),
        packets_per_flow: opt_int(f, "packets_per_flow", limits::PACKETS_PER_FLOW)?
            .unwrap_or(d.packets_per_flow),
        src_prefix: prefix("src_prefix", GeneratorSpec::default_src_prefix(ip_version))?,
        dst_prefix: prefix("dst_prefix", GeneratorSpec::default_dst_prefix(ip_version))?,
        src_ports: range("src_ports", d.src_ports)?,
        dst_ports: range("dst_ports", d.dst_ports)?,
    })
}

/// Why a generator prefix does not fit the IP version, if it does not.
pub(crate) fn prefix_family_error(key: &str, p: &IpNet, v: IpVersionChoice) -> Option<String> {
    let fam = net::family(p);
    match v {
        IpVersionChoice::V4 if fam != 4 => Some(format!("{key} {p} is IPv6 but ip_version is 4")),
        IpVersionChoice::V6 if fam != 6 => Some(format!("{key} {p} is IPv4 but ip_version is 6")),
        IpVersionChoice::Mixed if fam != 4 => Some(format!(
            "{key} {p} is IPv6, but with ip_version: mixed the prefixes must be IPv4 \
             (IPv6 flows embed them in 64:ff9b::/96)"
        )),
        _ => None,
    }
}

fn ip_version_choice(n: &ConfigNode) -> Res<IpVersionChoice> {
    match (n.as_i64(), n.as_str()) {
        (Some(4), _) | (_, Some("4")) => Ok(IpVersionChoice::V4),
        (Some(6), _) | (_, Some("6")) => Ok(IpVersionChoice::V6),
        (_, Some("mixed")) => Ok(IpVersionChoice::Mixed),
        _ => Err(n.error(format!(
            "expected ip_version 4, 6 or \"mixed\", found {}",
            n.describe()
        ))),
    }
}

fn size(n: &ConfigNode) -> Res<SizeSpec> {
    match n.value() {
        ConfigValue::Int(_) => Ok(SizeSpec::Fixed(fields::int_as(n, limits::FRAME_SIZE)?)),
        ConfigValue::String(s) if s == "imix" => Ok(SizeSpec::Imix),
        ConfigValue::String(s) if s == "datacenter" => Ok(SizeSpec::Datacenter),
        _ => Err(n.error(format!(
            "expected a frame size in bytes ({}..={}), \"imix\" or \"datacenter\", found {}",
            limits::FRAME_SIZE.lo,
            limits::FRAME_SIZE.hi,
            n.describe()
        ))),
    }
}

fn file_path(f: &Fields<'_>, base_dir: &Path) -> Res<std::path::PathBuf> {
    let n = f.req("path", "the file to read or write")?;
    let p = fields::string(n)?;
    if p.is_empty() {
        return Err(n.error("path must not be empty"));
    }
    Ok(base_dir.join(p))
}

fn pcap_in(f: &Fields<'_>, base_dir: &Path) -> Res<PcapInSpec> {
    let pace = match f.opt("pace") {
        None => None,
        Some(n) => match n.value() {
            ConfigValue::Bool(true) => Some(1.0),
            ConfigValue::Bool(false) => None,
            ConfigValue::Int(_) | ConfigValue::Float(_) => {
                let v = n.as_f64().unwrap_or(0.0);
                if !(v.is_finite() && v > 0.0) {
                    return Err(n.error(format!(
                        "pace must be a speed factor above 0 (1 = original timing), got {v}"
                    )));
                }
                Some(v)
            }
            _ => {
                return Err(fields::type_error(
                    n,
                    "true, false or a speed factor above 0 (1 = original timing)",
                ))
            }
        },
    };
    Ok(PcapInSpec {
        path: file_path(f, base_dir)?,
        pace,
        loops: opt_int(f, "loops", limits::LOOPS)?.unwrap_or(1),
    })
}

fn pcap_out(f: &Fields<'_>, base_dir: &Path) -> Res<PcapOutSpec> {
    Ok(PcapOutSpec {
        path: file_path(f, base_dir)?,
        snaplen: opt_int(f, "snaplen", limits::SNAPLEN)?.unwrap_or(65_535),
    })
}

fn nic(f: &Fields<'_>) -> Res<NicSpec> {
    let n = f.req("interface", "the network interface name")?;
    let interface = fields::string(n)?;
    if interface.is_empty() {
        return Err(n.error("interface must not be empty"));
    }
    let node = f.node();
    Ok(NicSpec {
        interface: interface.to_string(),
        options: ConfigNode::new(
            ConfigValue::Map(f.others(&NIC_KEYS)),
            node.location(),
            node.path(),
            node.source().clone(),
        ),
    })
}
