//! Decoding and checking the `nat` config into a ready [`Nat`].

use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};

use serde::Deserialize;
use sluice_nf::BuildContext;
use sluice_spec::{IpNet, PortRange, SpecError};

use super::endpoint::Endpoint;
use super::pool::{Pool, MAX_ADDRS};
use super::table::{Behaviour, Tables, Timeouts};
use super::translate::{Inside, Nat};

/// Largest session capacity accepted (≈ 200 MiB of tables).
pub const MAX_CAPACITY: u64 = 4 << 20;
/// Default session capacity.
pub const DEFAULT_CAPACITY: u64 = 65_536;

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Num(i64),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsCfg {
    udp: Option<u64>,
    tcp_established: Option<u64>,
    tcp_transitory: Option<u64>,
    icmp: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ForwardCfg {
    proto: Option<String>,
    external: String,
    internal: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HairpinOutput {
    Ingress,
    Next,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    inside: Vec<String>,
    #[serde(default)]
    inside_ports: Vec<String>,
    pool: Vec<String>,
    ports: Option<Scalar>,
    #[serde(default = "eim")]
    mapping: Behaviour,
    #[serde(default = "eim")]
    filtering: Behaviour,
    capacity: Option<u64>,
    #[serde(default)]
    timeouts: TimeoutsCfg,
    #[serde(default)]
    forward: Vec<ForwardCfg>,
    #[serde(default = "yes")]
    hairpin: bool,
    #[serde(default = "ingress")]
    hairpin_output: HairpinOutput,
}

fn eim() -> Behaviour {
    Behaviour::EndpointIndependent
}
fn yes() -> bool {
    true
}
fn ingress() -> HairpinOutput {
    HairpinOutput::Ingress
}

/// A built NAT and the NF-level options around it.
pub(crate) struct Built {
    pub nat: Nat,
    pub hairpin_output: HairpinOutput,
}

fn v4_net(s: &str) -> Option<(u32, u32, u8)> {
    let net = s
        .parse::<IpNet>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(IpNet::from))?;
    match net {
        IpNet::V4(n) => {
            let mask = u32::from(n.netmask());
            Some((u32::from(n.network()), mask, n.prefix_len()))
        }
        IpNet::V6(_) => None,
    }
}

fn proto_list(p: &Option<String>) -> Option<Vec<u8>> {
    match p.as_deref() {
        None => Some(vec![6, 17]),
        Some("tcp") => Some(vec![6]),
        Some("udp") => Some(vec![17]),
        _ => None,
    }
}

/// Builds a NAT from the NF's config (errors name the offending key).
pub(crate) fn build(ctx: &BuildContext<'_>) -> Result<Built, SpecError> {
    let c = ctx.config;
    let cfg: Config = c.deserialize()?;
    let at = |path: &str, msg: String| c.error_at_path(path, msg);

    // Inside.
    let mut nets = Vec::new();
    for (i, s) in cfg.inside.iter().enumerate() {
        let (n, m, _) = v4_net(s).ok_or_else(|| {
            at(
                &format!("inside[{i}]"),
                format!("invalid IPv4 prefix `{s}` (expected e.g. 10.0.0.0/8)"),
            )
        })?;
        nets.push((n, m));
    }
    // Inside ports are matched against the port a packet came in on, so
    // input-only ports (a generator, a pcap_in) qualify; only when
    // hairpinned packets go back out of their ingress port must it transmit.
    let hairpin_to_ingress = cfg.hairpin && cfg.hairpin_output == HairpinOutput::Ingress;
    let mut ports = [0u64; 4];
    for (i, name) in cfg.inside_ports.iter().enumerate() {
        let p = ctx.resolver.input_port(name).ok_or_else(|| {
            at(
                &format!("inside_ports[{i}]"),
                format!("no port named `{name}` that packets come in through"),
            )
        })?;
        if hairpin_to_ingress && ctx.resolver.port(name).is_none() {
            return Err(at(
                &format!("inside_ports[{i}]"),
                format!("port `{name}` cannot transmit, but hairpinned packets leave through the port they came in on; set `hairpin_output: next` or `hairpin: false`"),
            ));
        }
        let w = ports.get_mut(usize::from(p.0) / 64).ok_or_else(|| {
            at(
                &format!("inside_ports[{i}]"),
                format!("port `{name}` has index {} (at most 255 supported)", p.0),
            )
        })?;
        *w |= 1 << (p.0 % 64);
    }
    if nets.is_empty() && cfg.inside_ports.is_empty() {
        return Err(at(
            "inside",
            "give the inside as `inside: [prefixes]` and/or `inside_ports: [port names]`".into(),
        ));
    }

    // Pool.
    if cfg.pool.is_empty() {
        return Err(at(
            "pool",
            "the pool needs at least one IPv4 address or prefix".into(),
        ));
    }
    let mut addrs = Vec::new();
    let mut pool_nets = Vec::new();
    for (i, s) in cfg.pool.iter().enumerate() {
        let (n, m, len) = v4_net(s).ok_or_else(|| {
            at(
                &format!("pool[{i}]"),
                format!("invalid IPv4 prefix `{s}` (expected e.g. 192.0.2.0/28)"),
            )
        })?;
        let count = 1u64 << (32 - u32::from(len));
        if addrs.len() as u64 + count > MAX_ADDRS as u64 {
            return Err(at(
                &format!("pool[{i}]"),
                format!("the pool may hold at most {MAX_ADDRS} addresses"),
            ));
        }
        addrs.extend((0..count).map(|k| n | k as u32));
        pool_nets.push((n, m));
    }
    addrs.sort_unstable();
    let before = addrs.len();
    addrs.dedup();
    if addrs.len() != before {
        return Err(at("pool", "pool prefixes overlap".into()));
    }
    if let Some(a) = addrs
        .iter()
        .find(|&&a| nets.iter().any(|&(n, m)| a & m == n))
    {
        return Err(at(
            "pool",
            format!("pool address {} is inside", Ipv4Addr::from(*a)),
        ));
    }
    let range = match &cfg.ports {
        None => PortRange {
            lo: 1024,
            hi: 65535,
        },
        Some(Scalar::Num(n)) => u16::try_from(*n)
            .ok()
            .filter(|&p| p > 0)
            .map(PortRange::single)
            .ok_or_else(|| at("ports", format!("port {n} is out of range 1-65535")))?,
        Some(Scalar::Text(s)) => s
            .parse::<PortRange>()
            .ok()
            .filter(|r| r.lo > 0)
            .ok_or_else(|| {
                at(
                    "ports",
                    format!("invalid port range `{s}` (expected e.g. 1024-65535, not including 0)"),
                )
            })?,
    };

    // Capacity and timeouts.
    let capacity = cfg.capacity.unwrap_or(DEFAULT_CAPACITY);
    if capacity == 0 || capacity > MAX_CAPACITY {
        return Err(at(
            "capacity",
            format!("capacity {capacity} is out of range 1-{MAX_CAPACITY}"),
        ));
    }
    let d = Timeouts::default();
    let secs =
        |v: Option<u64>, def: u64, min: u64, key: &str, why: &str| -> Result<u64, SpecError> {
            match v {
                None => Ok(def),
                Some(s) if s < min || s > 86_400 * 7 => Err(at(
                    &format!("timeouts.{key}"),
                    format!("{s} s is out of range {min}-604800 s ({why})"),
                )),
                Some(s) => Ok(s * 1_000_000_000),
            }
        };
    let t = &cfg.timeouts;
    let timeouts = Timeouts {
        udp: secs(
            t.udp,
            d.udp,
            120,
            "udp",
            "RFC 4787 REQ-5: at least 2 minutes",
        )?,
        tcp_established: secs(
            t.tcp_established,
            d.tcp_established,
            7440,
            "tcp_established",
            "RFC 5382 REQ-5: at least 2 hours 4 minutes",
        )?,
        tcp_transitory: secs(
            t.tcp_transitory,
            d.tcp_transitory,
            1,
            "tcp_transitory",
            "seconds",
        )?,
        icmp: secs(
            t.icmp,
            d.icmp,
            60,
            "icmp",
            "RFC 5508 REQ-1: at least 60 seconds",
        )?,
    };

    let mut pool = Pool::new(addrs, pool_nets, range);
    let statics: usize = cfg
        .forward
        .iter()
        .map(|r| proto_list(&r.proto).map_or(0, |p| p.len()))
        .sum();
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(capacity);
        h.finish()
    };
    let mut tables = Tables::new(
        capacity as usize,
        statics,
        cfg.mapping,
        cfg.filtering,
        timeouts,
        seed,
    );

    // Port forwarding.
    let mut forward_addrs = Vec::new();
    for (i, r) in cfg.forward.iter().enumerate() {
        let protos = proto_list(&r.proto).ok_or_else(|| {
            at(
                &format!("forward[{i}].proto"),
                "proto must be tcp or udp (absent: both)".into(),
            )
        })?;
        let ep = |field: &str, s: &str| -> Result<Endpoint, SpecError> {
            s.parse::<SocketAddrV4>()
                .map(|a| Endpoint::new(u32::from(*a.ip()), a.port()))
                .map_err(|_| {
                    at(
                        &format!("forward[{i}].{field}"),
                        format!("invalid IPv4 address:port `{s}` (expected e.g. 192.0.2.1:8080)"),
                    )
                })
        };
        let (ext, int) = (ep("external", &r.external)?, ep("internal", &r.internal)?);
        if !nets.is_empty() && !nets.iter().any(|&(n, m)| int.addr & m == n) {
            return Err(at(
                &format!("forward[{i}].internal"),
                format!("{} is not inside", Ipv4Addr::from(int.addr)),
            ));
        }
        if nets.iter().any(|&(n, m)| ext.addr & m == n) {
            return Err(at(
                &format!("forward[{i}].external"),
                format!("{} is inside", Ipv4Addr::from(ext.addr)),
            ));
        }
        for p in protos {
            if !tables.add_static(p, int, ext, &mut pool) {
                return Err(at(
                    &format!("forward[{i}]"),
                    format!("{ext} or {int} is already used by an earlier forward rule"),
                ));
            }
        }
        if !pool.contains(ext.addr) && !forward_addrs.contains(&ext.addr) {
            forward_addrs.push(ext.addr);
        }
    }

    let inside = Inside {
        nets,
        ports,
        by_port: !cfg.inside_ports.is_empty(),
    };
    Ok(Built {
        nat: Nat::new(
            inside,
            pool,
            tables,
            forward_addrs,
            cfg.hairpin,
            ctx.flow_capacity,
        ),
        hairpin_output: cfg.hairpin_output,
    })
}
