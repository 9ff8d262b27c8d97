//! Turning a rejected packet, in place, into its answer: a TCP RST
//! (RFC 9293 §3.10.7.1, as Linux `nf_send_reset`) or an ICMP / ICMPv6
//! destination unreachable quoting it (RFC 792, RFC 1812 §4.3.2.3,
//! RFC 4443 §3.1), sent back out of the port it came in on.
//!
//! No answer is ever sent to an ICMP error or a RST, to a link-layer or IP
//! broadcast/multicast, from an unspecified/multicast source, or for a
//! packet whose checksum is wrong (Linux verifies it too): such packets
//! are dropped silently (RFC 1122 §3.2.2, RFC 4443 §2.4 e).

use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_nf::Packet;
use sluice_packet::checksum;
use sluice_packet::{verify_checksums, Headers, IpProtocol};

use super::rules::IcmpReject;

/// The answer to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// TCP RST (TCP packets only).
    TcpReset,
    /// ICMP/ICMPv6 destination unreachable with this code.
    Unreachable(IcmpReject),
}

/// TTL / hop limit of answers (Linux's default `ip_default_ttl`).
const TTL: u8 = 64;
/// An ICMPv4 error is at most 576 bytes of IP (RFC 1812 §4.3.2.3).
const ICMP4_MAX: usize = 576;
/// An ICMPv6 error fits the minimum IPv6 MTU (RFC 4443 §2.4 c).
const ICMP6_MAX: usize = 1280;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

fn u16_at(d: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([d[i], d[i + 1]])
}

fn u32_at(d: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]])
}

fn a4(d: &[u8], i: usize) -> [u8; 4] {
    [d[i], d[i + 1], d[i + 2], d[i + 3]]
}

fn a16(d: &[u8], i: usize) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&d[i..i + 16]);
    a
}

/// Whether `frame` may be answered with `reply` at all.
pub fn may_answer(frame: &[u8], h: &Headers, reply: Reply) -> bool {
    let l3 = usize::from(h.l3_offset);
    let l4 = usize::from(h.l4_offset);
    if h.fragment || !h.has_l4_header() && reply == Reply::TcpReset {
        return false;
    }
    if frame.first().is_none_or(|b| b & 1 != 0) {
        return false; // link-layer broadcast or multicast
    }
    let Some(l4b) = frame.get(l4..) else {
        return false;
    };
    let never = match (h.l4_protocol, h.ip_version) {
        // No answer to a RST (RFC 9293 §3.10.7.1).
        (IpProtocol::TCP, _) => l4b.get(13).is_none_or(|f| f & TCP_RST != 0),
        // No ICMP error about an ICMP error (RFC 1122 §3.2.2, RFC 4443 §2.4 e.1).
        (IpProtocol::ICMP, 4) => matches!(l4b.first(), Some(3 | 4 | 5 | 11 | 12) | None),
        (IpProtocol::ICMPV6, 6) => l4b.first().is_none_or(|t| *t < 128),
        _ => false,
    };
    if never {
        return false;
    }
    if reply == Reply::TcpReset && h.l4_protocol != IpProtocol::TCP {
        return false;
    }
    let addrs_ok = match h.ip_version {
        4 if frame.len() >= l3 + 20 => {
            let src = Ipv4Addr::from(a4(frame, l3 + 12));
            let dst = Ipv4Addr::from(a4(frame, l3 + 16));
            !(src.is_unspecified()
                || src.is_multicast()
                || src.is_broadcast()
                || dst.is_multicast()
                || dst.is_broadcast())
        }
        6 if frame.len() >= l3 + 40 => {
            let src = Ipv6Addr::from(a16(frame, l3 + 8));
            let dst = Ipv6Addr::from(a16(frame, l3 + 24));
            !(src.is_unspecified() || src.is_multicast() || dst.is_multicast())
        }
        _ => false,
    };
    addrs_ok && verify_checksums(frame, h).is_ok()
}

/// Rewrites `p` (parsed as `h`) into `reply`, in place. Returns false,
/// leaving the packet to be dropped, when it may not or cannot be answered.
pub fn rewrite(p: &mut Packet<'_>, h: &Headers, reply: Reply) -> bool {
    if !may_answer(p.data(), h, reply) {
        return false;
    }
    match reply {
        Reply::TcpReset => tcp_reset(p, h),
        Reply::Unreachable(code) if h.ip_version == 4 => icmp4(p, h, code),
        Reply::Unreachable(code) => icmp6(p, h, code),
    }
}

fn swap_macs(d: &mut [u8]) {
    for i in 0..6 {
        d.swap(i, i + 6);
    }
}

fn ipv4_header(b: &mut [u8], total: u16, df: bool, proto: u8, src: [u8; 4], dst: [u8; 4]) {
    b[..20].fill(0);
    b[0] = 0x45;
    b[2..4].copy_from_slice(&total.to_be_bytes());
    b[6] = if df { 0x40 } else { 0 };
    b[8] = TTL;
    b[9] = proto;
    b[12..16].copy_from_slice(&src);
    b[16..20].copy_from_slice(&dst);
    let c = checksum::checksum(&b[..20]);
    b[10..12].copy_from_slice(&c.to_be_bytes());
}

fn ipv6_header(b: &mut [u8], payload: u16, nh: u8, src: [u8; 16], dst: [u8; 16]) {
    b[..8].fill(0);
    b[0] = 0x60;
    b[4..6].copy_from_slice(&payload.to_be_bytes());
    b[6] = nh;
    b[7] = TTL;
    b[8..24].copy_from_slice(&src);
    b[24..40].copy_from_slice(&dst);
}

/// RST per RFC 9293 §3.10.7.1: if the offending segment has ACK, the RST
/// takes its sequence number from that ACK; otherwise it has sequence 0
/// and acknowledges everything the segment occupied (SYN and FIN count 1).
fn tcp_reset(p: &mut Packet<'_>, h: &Headers) -> bool {
    let l2 = usize::from(h.l3_offset);
    let l4 = usize::from(h.l4_offset);
    let v4 = h.ip_version == 4;
    let ip_len = if v4 { 20 } else { 40 };
    let new_len = l2 + ip_len + 20;
    let d = p.data_mut();
    if d.len() < l4 + 20 || new_len > d.len() {
        return false;
    }
    let (sport, dport) = (u16_at(d, l4), u16_at(d, l4 + 2));
    let (seq, ack, flags) = (u32_at(d, l4 + 4), u32_at(d, l4 + 8), d[l4 + 13]);
    let seg_len = u32::from(h.payload_len)
        + u32::from(flags & TCP_SYN != 0)
        + u32::from(flags & TCP_FIN != 0);
    let (rseq, rack, rflags) = if flags & TCP_ACK != 0 {
        (ack, 0, TCP_RST)
    } else {
        (0, seq.wrapping_add(seg_len), TCP_RST | TCP_ACK)
    };
    swap_macs(d);
    let t = l2 + ip_len;
    let pseudo = if v4 {
        let (src, dst) = (a4(d, l2 + 12), a4(d, l2 + 16));
        ipv4_header(&mut d[l2..], 40, true, 6, dst, src);
        checksum::pseudo_header_v4(&dst.into(), &src.into(), 6, 20)
    } else {
        let (src, dst) = (a16(d, l2 + 8), a16(d, l2 + 24));
        ipv6_header(&mut d[l2..], 20, 6, dst, src);
        checksum::pseudo_header_v6(&dst.into(), &src.into(), 6, 20)
    };
    let th = &mut d[t..t + 20];
    th.fill(0);
    th[0..2].copy_from_slice(&dport.to_be_bytes());
    th[2..4].copy_from_slice(&sport.to_be_bytes());
    th[4..8].copy_from_slice(&rseq.to_be_bytes());
    th[8..12].copy_from_slice(&rack.to_be_bytes());
    th[12] = 5 << 4;
    th[13] = rflags;
    let c = checksum::checksum_with(pseudo, th);
    th[16..18].copy_from_slice(&c.to_be_bytes());
    p.raw().set_len(new_len) == new_len
}

/// Moves the link-layer header `push` bytes to the front (into the
/// headroom), leaving a `push`-byte gap before the original IP header.
fn open_gap(p: &mut Packet<'_>, l2: usize, push: usize) -> bool {
    if p.raw().push_front(push).is_none() {
        return false;
    }
    p.data_mut().copy_within(push..push + l2, 0);
    true
}

fn icmp4(p: &mut Packet<'_>, h: &Headers, code: IcmpReject) -> bool {
    let l2 = usize::from(h.l3_offset);
    let d = p.data();
    let ip_total = usize::from(u16_at(d, l2 + 2)).min(d.len() - l2);
    let quote = ip_total.min(ICMP4_MAX - 28);
    if !open_gap(p, l2, 28) {
        return false;
    }
    let d = p.data_mut();
    let orig = l2 + 28;
    let (src, dst) = (a4(d, orig + 12), a4(d, orig + 16));
    swap_macs(d);
    ipv4_header(&mut d[l2..], (28 + quote) as u16, false, 1, dst, src);
    let icmp = &mut d[l2 + 20..orig + quote];
    icmp[..8].fill(0);
    icmp[0] = 3;
    icmp[1] = match code {
        IcmpReject::PortUnreachable => 3,
        IcmpReject::AdminProhibited => 13,
    };
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let len = orig + quote;
    p.raw().set_len(len) == len
}

fn icmp6(p: &mut Packet<'_>, h: &Headers, code: IcmpReject) -> bool {
    let l2 = usize::from(h.l3_offset);
    let d = p.data();
    let ip_total = (40 + usize::from(u16_at(d, l2 + 4))).min(d.len() - l2);
    let quote = ip_total.min(ICMP6_MAX - 48);
    if !open_gap(p, l2, 48) {
        return false;
    }
    let d = p.data_mut();
    let orig = l2 + 48;
    let (src, dst) = (a16(d, orig + 8), a16(d, orig + 24));
    swap_macs(d);
    let plen = (8 + quote) as u16;
    ipv6_header(&mut d[l2..], plen, 58, dst, src);
    let icmp = &mut d[l2 + 40..orig + quote];
    icmp[..8].fill(0);
    icmp[0] = 1;
    icmp[1] = match code {
        IcmpReject::PortUnreachable => 4,
        IcmpReject::AdminProhibited => 1,
    };
    let pseudo = checksum::pseudo_header_v6(&dst.into(), &src.into(), 58, u32::from(plen));
    let c = checksum::checksum_with(pseudo, icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let len = orig + quote;
    p.raw().set_len(len) == len
}
