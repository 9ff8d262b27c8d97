//! Frame builders and helpers shared by the firewall tests.
#![allow(dead_code)]

use serde_json::Value;
use sluice_nf::BuildContext;
use sluice_nfs::firewall::Firewall;
use sluice_packet::checksum;
use sluice_packet::{L4Spec, TcpFlags};
use sluice_spec::ConfigNode;

use crate::common::*;

pub const SYN: u8 = 0x02;
pub const ACK: u8 = 0x10;
pub const FIN: u8 = 0x01;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;

/// A firewall built from a JSON config (must be valid), as a concrete type
/// so tests can look at its conntrack table.
pub fn firewall(config: Value) -> Firewall {
    let node = ConfigNode::from_json(config);
    let ctx = BuildContext {
        name: "fw".into(),
        config: &node,
        resolver: &TestResolver,
        flow_capacity: FLOW_CAPACITY,
    };
    Firewall::from_build_context(&ctx).unwrap_or_else(|e| panic!("config rejected: {e}"))
}

/// A TCP segment with flags, seq, ack and payload.
#[allow(clippy::too_many_arguments)] // reads like the segment it builds
pub fn tcp_seg(
    src: &str,
    sport: u16,
    dst: &str,
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    frame(
        src,
        dst,
        L4Spec::Tcp {
            src_port: sport,
            dst_port: dport,
            seq,
            ack,
            flags: TcpFlags::from_bits(flags),
            window: 8192,
        },
        payload,
    )
}

/// An ICMP (v4) or ICMPv6 error from `src` to `dst` quoting `quoted` (an IP
/// packet, usually the IP part of a frame), with type and code.
pub fn icmp_error(src: &str, dst: &str, ty: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
    let mut f = frame(
        src,
        dst,
        L4Spec::IcmpEcho {
            id: 0,
            seq: 0,
            reply: false,
        },
        quoted,
    );
    let v6 = src.contains(':');
    let l4 = if v6 { 14 + 40 } else { 14 + 20 };
    let old = u16::from_be_bytes([f[l4], f[l4 + 1]]);
    f[l4] = ty;
    f[l4 + 1] = code;
    let new = u16::from_be_bytes([ty, code]);
    let c = u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]);
    let c = checksum::update_u16(c, old, new);
    f[l4 + 2..l4 + 4].copy_from_slice(&c.to_be_bytes());
    f
}

/// The IP packet of an untagged Ethernet frame.
pub fn ip_of(frame: &[u8]) -> &[u8] {
    &frame[14..]
}

/// TCP flags of an untagged IPv4/IPv6 frame without options.
pub fn tcp_flags(f: &[u8]) -> u8 {
    let l4 = if f[12..14] == [0x86, 0xdd] { 54 } else { 34 };
    f[l4 + 13]
}
