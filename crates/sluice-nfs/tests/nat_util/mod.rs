//! Helpers of the `nat` tests: frames by hand-readable fields, an
//! independent checksum checker, and ICMP error construction.
#![allow(dead_code)]

use std::net::Ipv4Addr;

use sluice_packet::{write_frame, FrameSpec, L4Spec, TcpFlags};

use crate::common::{MAC_A, MAC_B};

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;

pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// A frame with the given IPv4 addresses and transport.
pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, l4: L4Spec, payload: &[u8]) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MAC_A,
        dst_mac: MAC_B,
        vlan: None,
        src_ip: src.into(),
        dst_ip: dst.into(),
        ttl: 64,
        l4,
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    buf
}

pub fn udp4(src: &str, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    v4(
        ip(src),
        ip(dst),
        L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
        b"hello nat",
    )
}

pub fn tcp4(src: &str, sport: u16, dst: &str, dport: u16, flags: TcpFlags) -> Vec<u8> {
    let l4 = L4Spec::Tcp {
        src_port: sport,
        dst_port: dport,
        seq: 100,
        ack: 7,
        flags,
        window: 1000,
    };
    v4(ip(src), ip(dst), l4, b"")
}

pub fn ping4(src: &str, dst: &str, id: u16, reply: bool) -> Vec<u8> {
    v4(
        ip(src),
        ip(dst),
        L4Spec::IcmpEcho { id, seq: 9, reply },
        b"abcdefgh",
    )
}

/// The IPv4 (source, destination) of a frame.
pub fn addrs(f: &[u8]) -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(f[26], f[27], f[28], f[29]),
        Ipv4Addr::new(f[30], f[31], f[32], f[33]),
    )
}

/// (source port, destination port) of a TCP/UDP frame, (id, id) for ICMP.
pub fn ports(f: &[u8]) -> (u16, u16) {
    let l4 = 14 + usize::from(f[14] & 0x0f) * 4;
    if f[23] == ICMP {
        let id = u16::from_be_bytes([f[l4 + 4], f[l4 + 5]]);
        (id, id)
    } else {
        (
            u16::from_be_bytes([f[l4], f[l4 + 1]]),
            u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]),
        )
    }
}

/// `addr:port` of each side, as strings, for readable assertions.
pub fn tuple(f: &[u8]) -> (String, String) {
    let (s, d) = addrs(f);
    let (sp, dp) = ports(f);
    (format!("{s}:{sp}"), format!("{d}:{dp}"))
}

fn sum(d: &[u8]) -> u32 {
    d.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Checks, by full recomputation (independent of `sluice_packet`), the IPv4
/// header checksum and the transport checksum of the IPv4 packet at `l3`
/// whose length is `len`; for ICMP errors also the quoted IP header and,
/// when the quote holds the whole quoted datagram, its transport checksum.
/// Panics with `what` on a mismatch.
pub fn check_ipv4(p: &[u8], what: &str, quoted: bool) {
    let ihl = usize::from(p[0] & 0x0f) * 4;
    assert_eq!(fold(sum(&p[..ihl])), 0xffff, "{what}: IPv4 header checksum");
    let total = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let whole = total <= p.len();
    let seg = &p[ihl..total.min(p.len())];
    let proto = p[9];
    if quoted && !whole {
        return; // a truncated quote: its transport checksum cannot be checked
    }
    match proto {
        6 | 17 => {
            if proto == 17 && seg[6..8] == [0, 0] {
                return;
            }
            let pseudo = sum(&p[12..20]) + u32::from(proto) + seg.len() as u32;
            assert_eq!(fold(pseudo + sum(seg)), 0xffff, "{what}: L4 checksum");
        }
        1 => {
            assert_eq!(fold(sum(seg)), 0xffff, "{what}: ICMP checksum");
            if matches!(seg[0], 3 | 4 | 5 | 11 | 12) && !quoted {
                check_ipv4(&seg[8..], &format!("{what} (quoted)"), true);
            }
        }
        _ => {}
    }
}

/// [`check_ipv4`] on an untagged Ethernet frame.
pub fn check_frame(f: &[u8], what: &str) {
    assert_eq!(&f[12..14], &[8, 0], "{what}: IPv4");
    check_ipv4(&f[14..], what, false);
}

/// An ICMP error (`icmp_type`/`code`) from `src` to `dst` quoting the IP
/// packet of `quoted` (an Ethernet frame) truncated to `quote_len` bytes of
/// IP packet; every checksum computed from scratch.
pub fn icmp_error(
    src: &str,
    dst: &str,
    icmp_type: u8,
    code: u8,
    quoted: &[u8],
    quote_len: usize,
) -> Vec<u8> {
    let q = &quoted[14..];
    let q = &q[..quote_len.min(q.len())];
    let mut icmp = vec![icmp_type, code, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(q);
    let c = !fold(sum(&icmp));
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut ipv4 = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, ICMP, 0, 0];
    let total = (20 + icmp.len()) as u16;
    ipv4[2..4].copy_from_slice(&total.to_be_bytes());
    ipv4.extend_from_slice(&ip(src).octets());
    ipv4.extend_from_slice(&ip(dst).octets());
    let c = !fold(sum(&ipv4));
    ipv4[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = Vec::new();
    f.extend_from_slice(&MAC_B.0);
    f.extend_from_slice(&MAC_A.0);
    f.extend_from_slice(&[8, 0]);
    f.extend_from_slice(&ipv4);
    f.extend_from_slice(&icmp);
    f
}
