//! Compiled firewall rules and first-match evaluation.

use sluice_packet::FlowKey;
use sluice_spec::{IpNet, PortRange};

/// What a non-TCP reject sends (ICMP/ICMPv6 destination unreachable code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpReject {
    /// ICMP code 3 / ICMPv6 code 4 (`port_unreachable`).
    PortUnreachable,
    /// ICMP code 13 / ICMPv6 code 1 (`admin_prohibited`).
    AdminProhibited,
}

/// How a reject answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectWith {
    /// TCP RST for TCP, the NF's default ICMP unreachable otherwise.
    Auto,
    /// TCP RST (the rule must be `proto: tcp`).
    TcpReset,
    /// ICMP/ICMPv6 destination unreachable, for every protocol.
    Icmp(IcmpReject),
}

/// A rule's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Accept (and track) the connection.
    Accept,
    /// Drop silently.
    Drop,
    /// Drop and answer with a TCP RST or ICMP unreachable.
    Reject(RejectWith),
}

/// An address prefix, precompiled against the flow key's 16-byte
/// addresses (IPv4 stored IPv4-mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    v4: bool,
    addr: u128,
    mask: u128,
}

impl Prefix {
    /// Compiles `net` (host bits ignored).
    pub fn new(net: IpNet) -> Prefix {
        match net {
            IpNet::V4(n) => {
                let bits = u32::from(n.prefix_len());
                let m32 = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                let mask = (u128::MAX << 32) | u128::from(m32);
                let addr = 0xffff_0000_0000 | u128::from(u32::from(n.addr()));
                Prefix {
                    v4: true,
                    addr: addr & mask,
                    mask,
                }
            }
            IpNet::V6(n) => {
                let bits = u32::from(n.prefix_len());
                let mask = if bits == 0 {
                    0
                } else {
                    u128::MAX << (128 - bits)
                };
                Prefix {
                    v4: false,
                    addr: u128::from(n.addr()) & mask,
                    mask,
                }
            }
        }
    }

    #[inline]
    fn matches(&self, v4: bool, a: &[u8; 16]) -> bool {
        self.v4 == v4 && u128::from_be_bytes(*a) & self.mask == self.addr
    }
}

/// A compiled rule: every field given must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Action.
    pub action: Action,
    /// Source prefix.
    pub src: Option<Prefix>,
    /// Destination prefix.
    pub dst: Option<Prefix>,
    /// IP protocol.
    pub proto: Option<u8>,
    /// Source port range (TCP, UDP, SCTP only).
    pub src_port: Option<PortRange>,
    /// Destination port range (TCP, UDP, SCTP only).
    pub dst_port: Option<PortRange>,
    /// ICMP/ICMPv6 type.
    pub icmp_type: Option<u8>,
    /// Ingress port index.
    pub in_port: Option<u16>,
    /// Conntrack zone.
    pub zone: Option<u16>,
}

/// What rules look at.
#[derive(Debug, Clone, Copy)]
pub struct MatchInput<'a> {
    /// The packet's 5-tuple in its own direction.
    pub key: &'a FlowKey,
    /// ICMP/ICMPv6 type, for ICMP packets.
    pub icmp_type: Option<u8>,
    /// Ingress port index.
    pub port_in: u16,
    /// Zone of the ingress port.
    pub zone: u16,
}

impl Rule {
    /// Whether the rule matches.
    #[inline]
    pub fn matches(&self, m: &MatchInput<'_>) -> bool {
        let k = m.key;
        let v4 = k.ip_version == 4;
        // Ports only exist for protocols with ports: a flow key holds the
        // echo id (ICMP) or 0 there.
        let ports = k.protocol().has_ports();
        self.proto.is_none_or(|p| p == k.proto)
            && self.in_port.is_none_or(|p| p == m.port_in)
            && self.zone.is_none_or(|z| z == m.zone)
            && self.src.as_ref().is_none_or(|n| n.matches(v4, &k.src))
            && self.dst.as_ref().is_none_or(|n| n.matches(v4, &k.dst))
            && self
                .src_port
                .is_none_or(|r| ports && r.contains(k.src_port))
            && self
                .dst_port
                .is_none_or(|r| ports && r.contains(k.dst_port))
            && self.icmp_type.is_none_or(|t| m.icmp_type == Some(t))
    }
}

/// The first rule matching `m`: its index and action.
#[inline]
pub fn first_match(rules: &[Rule], m: &MatchInput<'_>) -> Option<(usize, Action)> {
    rules
        .iter()
        .position(|r| r.matches(m))
        .map(|i| (i, rules[i].action))
}
