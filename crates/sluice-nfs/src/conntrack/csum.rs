//! Checksum verification for connection tracking (Linux
//! `nf_conntrack_checksum`): the IPv4 header checksum (which Linux's
//! `ip_rcv` checks before netfilter) and the TCP, UDP, ICMP and ICMPv6
//! checksums (`tcp_error`, `udp_error`, `icmp_error`, `icmpv6_error` in
//! PRE_ROUTING). UDP over IPv4 with checksum 0 carries none and passes;
//! over IPv6 a zero UDP checksum is invalid. Other protocols (SCTP's
//! CRC32c, GRE…) are not verified.
//!
//! The fast path's frames (untagged IPv4 without options or IPv6 without
//! extension headers, TCP or UDP, lengths valid: `RawTuple::read_frame`)
//! are verified at fixed offsets with [`frame_ok`]: one pass over the
//! IPv4 header and one over the transport segment, the pseudo header's
//! addresses summed from the IP header in place. Everything else goes
//! through `sluice_packet::verify_checksums` after the parse.

use sluice_packet::checksum::{add, fold, sum};

/// Untagged Ethernet header length.
const ETH: usize = 14;

/// Whether a frame `RawTuple::read_frame` accepted (its shape and lengths
/// are checked) has good checksums. Answers `false`, never panics, for
/// anything else.
#[inline]
pub(super) fn frame_ok(f: &[u8]) -> bool {
    let Some(eth) = f.get(..ETH) else {
        return false;
    };
    match u16::from_be_bytes([eth[12], eth[13]]) {
        0x0800 => v4_ok(f),
        0x86dd => v6_ok(f),
        _ => false,
    }
}

#[inline(always)]
fn v4_ok(f: &[u8]) -> bool {
    let Some(ip) = f.get(ETH..ETH + 20) else {
        return false;
    };
    if fold(sum(ip)) != 0xffff {
        return false;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let proto = ip[9];
    let Some(l4) = f.get(ETH + 20..ETH + total) else {
        return false;
    };
    // Addresses (8 bytes at 12); protocol and length added by `l4_ok`.
    l4_ok(sum(&ip[12..20]), proto, l4, false)
}

#[inline(always)]
fn v6_ok(f: &[u8]) -> bool {
    let Some(ip) = f.get(ETH..ETH + 40) else {
        return false;
    };
    let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
    let proto = ip[6];
    let Some(l4) = f.get(ETH + 40..ETH + 40 + payload) else {
        return false;
    };
    l4_ok(sum(&ip[8..40]), proto, l4, true)
}

/// The transport checksum of `l4` (TCP or UDP, the IP payload) with the
/// pseudo header's address sum `addrs`. UDP is checked over its own
/// length (Linux trims the datagram to it; the parse checked it fits); a
/// UDP checksum of 0 means none over IPv4 and is invalid over IPv6 (RFC
/// 8200 §8.1).
#[inline(always)]
fn l4_ok(addrs: u64, proto: u8, l4: &[u8], v6: bool) -> bool {
    let mut seg = l4;
    if proto == 17 {
        let Some(u) = l4.first_chunk::<8>() else {
            return false;
        };
        if u[6] == 0 && u[7] == 0 {
            return !v6;
        }
        let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
        seg = l4.get(..ulen).unwrap_or(l4);
    }
    let pseudo = add(addrs, u64::from(proto) + seg.len() as u64);
    fold(add(pseudo, sum(seg))) == 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::TcpFlags;
    use sluice_packet::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr};
    use std::net::IpAddr;

    fn frame(src: &str, dst: &str, l4: L4Spec, payload: &[u8]) -> Vec<u8> {
        let spec = FrameSpec {
            src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
            dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
            vlan: None,
            src_ip: src.parse::<IpAddr>().unwrap(),
            dst_ip: dst.parse::<IpAddr>().unwrap(),
            ttl: 64,
            l4,
        };
        let mut buf = vec![0u8; spec.header_len() + payload.len()];
        let n = write_frame(&mut buf, &spec, payload).unwrap();
        buf.truncate(n);
        buf
    }

    /// The fixed-offset verification gives `verify_checksums`' answer for
    /// every single-byte corruption of TCP and UDP frames of both
    /// families, payloads of odd and even length included.
    #[test]
    fn agrees_with_the_parsed_verification() {
        let tcp = L4Spec::Tcp {
            src_port: 1,
            dst_port: 2,
            seq: 7,
            ack: 9,
            flags: TcpFlags::ACK,
            window: 100,
        };
        let udp = L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        };
        let mut n = 0;
        for (s, d) in [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")] {
            for l4 in [tcp, udp] {
                for payload in [&b""[..], b"x", b"hello"] {
                    let f = frame(s, d, l4, payload);
                    assert!(frame_ok(&f));
                    for i in 14..f.len() {
                        let mut g = f.clone();
                        g[i] ^= 0x5a;
                        let Ok(h) = parse(&g) else { continue };
                        if h.fragment || h.l4_protocol != parse(&f).unwrap().l4_protocol {
                            continue;
                        }
                        let want = verify_checksums(&g, &h).is_ok();
                        assert_eq!(frame_ok(&g), want, "{s} {l4:?} {payload:?} byte {i}");
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 300);
    }

    /// A UDP datagram shorter than the IP payload (link padding counted
    /// in the IP length) is checked over the UDP length.
    #[test]
    fn udp_is_checked_over_its_own_length() {
        let udp = L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        };
        for (s, d, len_at) in [("10.0.0.1", "10.0.0.2", 16), ("fd00::1", "fd00::2", 18)] {
            let mut f = frame(s, d, udp, b"abcd");
            f.push(0);
            let l = u16::from_be_bytes([f[len_at], f[len_at + 1]]) + 1;
            f[len_at..len_at + 2].copy_from_slice(&l.to_be_bytes());
            if len_at == 16 {
                f[24..26].copy_from_slice(&[0, 0]);
                let c = sluice_packet::checksum::checksum(&f[14..34]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
            }
            let h = parse(&f).unwrap();
            assert!(verify_checksums(&f, &h).is_ok());
            assert!(frame_ok(&f), "{s}");
        }
    }

    #[test]
    fn udp_zero_checksum_is_none_over_v4_and_invalid_over_v6() {
        let udp = L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        };
        let mut v4 = frame("10.0.0.1", "10.0.0.2", udp, b"abc");
        v4[40..42].copy_from_slice(&[0, 0]);
        assert!(frame_ok(&v4));
        let mut v6 = frame("fd00::1", "fd00::2", udp, b"abc");
        v6[60..62].copy_from_slice(&[0, 0]);
        assert!(!frame_ok(&v6));
    }
}
