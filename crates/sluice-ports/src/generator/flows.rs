//! Deterministic assignment of distinct 5-tuples to flow slots.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::config::{ConfigError, GeneratorConfig, IpVersionChoice, Protocol};
use crate::rng::SplitMix64;

/// Well-known NAT64 prefix (RFC 6052) used for the IPv6 flows of a mixed
/// generator configured with IPv4 prefixes.
const NAT64: u128 = 0x0064_ff9b_0000_0000_0000_0000_0000_0000;

/// Attempts to draw a fresh tuple for one flow before giving up.
const MAX_ATTEMPTS: u32 = 64;

/// The addressing of one flow slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlowTuple {
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port_idx: u32,
    pub dst_port: u16,
    pub tcp: bool,
}

/// Kind of flow `i`: (tcp, ipv6).  Mixed choices alternate per flow; when
/// both are mixed the four combinations cycle (UDP/v4, TCP/v4, UDP/v6,
/// TCP/v6).
pub(crate) fn flow_kind(cfg: &GeneratorConfig, i: u32) -> (bool, bool) {
    let tcp = match cfg.protocol {
        Protocol::Udp => false,
        Protocol::Tcp => true,
        Protocol::Mixed => i % 2 == 1,
    };
    let v6 = match cfg.ip_version {
        IpVersionChoice::V4 => false,
        IpVersionChoice::V6 => true,
        IpVersionChoice::Mixed if cfg.protocol == Protocol::Mixed => (i / 2) % 2 == 1,
        IpVersionChoice::Mixed => i % 2 == 1,
    };
    (tcp, v6)
}

/// Number of ports in an inclusive range (validated `lo <= hi`).
pub(crate) fn port_span(r: (u16, u16)) -> u32 {
    u32::from(r.1) - u32::from(r.0) + 1
}

/// Checks that the prefixes can serve the requested IP versions.
pub(crate) fn check_families(cfg: &GeneratorConfig) -> Result<(), ConfigError> {
    for (which, p) in [
        ("src_prefix", cfg.src_prefix),
        ("dst_prefix", cfg.dst_prefix),
    ] {
        let ok = matches!(
            (cfg.ip_version, p),
            (IpVersionChoice::V4 | IpVersionChoice::Mixed, IpNet::V4(_))
                | (IpVersionChoice::V6, IpNet::V6(_))
        );
        if !ok {
            let need = match cfg.ip_version {
                IpVersionChoice::V4 => "an IPv4 prefix",
                IpVersionChoice::V6 => "an IPv6 prefix",
                IpVersionChoice::Mixed => {
                    "an IPv4 prefix (mixed IPv6 flows embed it in 64:ff9b::/96)"
                }
            };
            return Err(ConfigError::PrefixFamily { which, need });
        }
    }
    Ok(())
}

/// A random host of `net`, avoiding the network and broadcast addresses
/// of IPv4 prefixes shorter than /31.
fn host(net: &IpNet, rng: &mut SplitMix64) -> IpAddr {
    match net {
        IpNet::V4(n) => {
            let bits = 32 - u32::from(n.prefix_len());
            let base = n.network().to_bits();
            let off = if bits == 0 {
                0
            } else if bits == 1 {
                rng.below(2) as u32
            } else {
                1 + rng.below((1u64 << bits) - 2) as u32
            };
            IpAddr::V4(Ipv4Addr::from_bits(base | off))
        }
        IpNet::V6(n) => {
            let bits = 128 - u32::from(n.prefix_len());
            let base = n.network().to_bits();
            let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX >> (128 - bits)
            };
            IpAddr::V6(Ipv6Addr::from_bits(base | (r & mask)))
        }
    }
}

/// The address for a flow of the given version drawn from `net`.
fn addr_for(net: &IpNet, v6: bool, rng: &mut SplitMix64) -> IpAddr {
    match (host(net, rng), v6) {
        (IpAddr::V4(a), true) => IpAddr::V6(Ipv6Addr::from_bits(NAT64 | u128::from(a.to_bits()))),
        (a, _) => a,
    }
}

/// Draws `cfg.flows` distinct tuples.  Source ports are structured
/// (`(base + i) mod span`, so concurrent flows differ by source port as
/// long as `flows <= span`) and the rest is random; a tuple already taken
/// is redrawn.
pub(crate) fn assign(cfg: &GeneratorConfig) -> Result<Vec<FlowTuple>, ConfigError> {
    let mut rng = SplitMix64::new(cfg.seed ^ 0x7475_706c_6573);
    let sspan = port_span(cfg.src_ports);
    let dspan = port_span(cfg.dst_ports);
    let base = rng.below(u64::from(sspan)) as u32;
    let n = cfg.flows as usize;
    let mut seen = HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    for i in 0..cfg.flows {
        let (tcp, v6) = flow_kind(cfg, i);
        let src_port_idx = ((u64::from(base) + u64::from(i)) % u64::from(sspan)) as u32;
        let mut found = None;
        for _ in 0..MAX_ATTEMPTS {
            let t = FlowTuple {
                src_ip: addr_for(&cfg.src_prefix, v6, &mut rng),
                dst_ip: addr_for(&cfg.dst_prefix, v6, &mut rng),
                src_port_idx,
                dst_port: cfg.dst_ports.0 + rng.below(u64::from(dspan)) as u16,
                tcp,
            };
            if seen.insert((t.src_ip, t.dst_ip, t.src_port_idx, t.dst_port, t.tcp)) {
                found = Some(t);
                break;
            }
        }
        out.push(found.ok_or(ConfigError::TooManyFlows { flows: cfg.flows })?);
    }
    Ok(out)
}
