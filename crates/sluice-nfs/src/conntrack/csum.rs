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
//! are verified at fixed offsets with [`frame_ok`], every frame of the
//! fast path, so it is lean: the data is summed as little-endian 64-bit
//! words with an end-around carry (one `add` + `adc` per 8 bytes, no byte
//! swap: the ones' complement sum is byte-order independent, RFC 1071
//! §2(B), and 2^64 - 1 is a multiple of 2^16 - 1), the pseudo header's
//! addresses are the IP header's own words, summed once for both checks,
//! and the two sums are folded side by side and compared once. ≈ 40
//! instructions for a 20-byte IPv4 header and a 20-byte TCP header where
//! three calls of the general `sluice_packet::checksum::sum` and their
//! folds took 135 (callgrind; bench: firewall/process_100k). Everything
//! else goes through `sluice_packet::verify_checksums` after the parse.

/// Untagged Ethernet header length.
const ETH: usize = 14;

/// Whether a frame `RawTuple::read_frame` accepted (its shape and lengths
/// are checked) has good checksums. Answers `false`, never panics, for
/// anything else.
#[inline(always)]
pub(super) fn frame_ok(f: &[u8]) -> bool {
    let Some(eth) = f.first_chunk::<ETH>() else {
        return false;
    };
    match u16::from_be_bytes([eth[12], eth[13]]) {
        0x0800 => v4_ok(f),
        0x86dd => v6_ok(f),
        _ => false,
    }
}

/// Ones' complement addition of two partial sums (end-around carry).
#[inline(always)]
fn add(a: u64, b: u64) -> u64 {
    let (s, c) = a.overflowing_add(b);
    s + u64::from(c)
}

/// 8 bytes as a little-endian word (`b` has at least 8).
#[inline(always)]
fn le64(b: &[u8]) -> u64 {
    b.first_chunk::<8>().map_or(0, |w| u64::from_le_bytes(*w))
}

/// Folds a partial sum to 16 bits (0 only for a zero sum).
#[inline(always)]
fn fold(s: u64) -> u16 {
    let (a, c) = (s as u32).overflowing_add((s >> 32) as u32);
    let a = a + u32::from(c);
    let (b, c) = (a as u16).overflowing_add((a >> 16) as u16);
    b + u16::from(c)
}

/// 4 bytes as a little-endian word (`b` has at least 4).
#[inline(always)]
fn le32(b: &[u8]) -> u64 {
    b.first_chunk::<4>()
        .map_or(0, |w| u64::from(u32::from_le_bytes(*w)))
}

/// Partial sum of `b` in little-endian lanes (any length; the general
/// sum byte-swapped): for what the fast path never sees.
#[inline(never)]
fn sum_le(b: &[u8]) -> u64 {
    sluice_packet::checksum::sum(b).swap_bytes() >> 48
}

/// Partial sum of the TCP segment or UDP datagram `seg`, in
/// little-endian lanes: its fixed header (20 or 8 bytes) with fixed loads,
/// then what follows (options, data) word by word, the last 0–7 bytes as
/// the segment's last 8 shifted down, so each lands in the lane it holds
/// in the data (the rest starts at an even offset, and so at a multiple
/// of 8 from it) with zeros above (RFC 1071's padding of an odd final
/// byte). A plain ACK is 3 loads and adds, where the loop of the general
/// sum took ≈ 30 instructions around them.
#[inline(always)]
fn seg_sum(seg: &[u8], tcp: bool) -> u64 {
    let head = if tcp { 20 } else { 8 };
    if seg.len() < head {
        return sum_le(seg);
    }
    let mut acc = le64(seg);
    if tcp {
        acc = add(add(acc, le64(&seg[8..])), le32(&seg[16..]));
    }
    let mut i = head;
    while let Some(w) = seg.get(i..).and_then(|r| r.first_chunk::<8>()) {
        acc = add(acc, u64::from_le_bytes(*w));
        i += 8;
    }
    let rest = seg.len() - i;
    if rest != 0 {
        let last = seg.len().checked_sub(8).map_or(0, |at| le64(&seg[at..]));
        acc = add(acc, last >> (64 - 8 * rest));
    }
    acc
}

/// [`frame_ok`] for a frame known to be IPv4.
#[inline(always)]
pub(super) fn v4_ok(f: &[u8]) -> bool {
    // Ethernet + the 20-byte IPv4 header.
    let Some(h) = f.first_chunk::<{ ETH + 20 }>() else {
        return false;
    };
    let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
    match f.get(ETH + 20..ETH + total) {
        Some(l4) => v4_sums_ok(h, l4, h[23]),
        None => false,
    }
}

/// The IPv4 header checksum of `h` (Ethernet and a 20-byte IPv4 header)
/// and the transport checksum of its payload `l4` (`proto`, the header's:
/// TCP or UDP), for a caller that has already read the header's length
/// and protocol (a constant there, which leaves one way through).
#[inline(always)]
pub(super) fn v4_sums_ok(h: &[u8; ETH + 20], l4: &[u8], proto: u8) -> bool {
    let addrs = le64(&h[ETH + 12..]);
    let ip = add(
        add(
            le64(&h[ETH..]),
            u64::from(u32::from_le_bytes([h[22], h[23], h[24], h[25]])),
        ),
        addrs,
    );
    match l4_sum(addrs, proto, l4, false) {
        Some(t) => fold(ip) & fold(t) == 0xffff,
        None => fold(ip) == 0xffff,
    }
}

#[inline(always)]
fn v6_ok(f: &[u8]) -> bool {
    let Some(h) = f.first_chunk::<{ ETH + 40 }>() else {
        return false;
    };
    let payload = usize::from(u16::from_be_bytes([h[18], h[19]]));
    let Some(l4) = f.get(ETH + 40..ETH + 40 + payload) else {
        return false;
    };
    let a = &h[ETH + 8..];
    let addrs = add(
        add(le64(a), le64(&a[8..])),
        add(le64(&a[16..]), le64(&a[24..])),
    );
    match l4_sum(addrs, h[20], l4, true) {
        Some(t) => fold(t) == 0xffff,
        None => true,
    }
}

/// The transport checksum's partial sum (folding to 0xffff when good) of
/// `l4` (TCP or UDP, the IP payload) with the pseudo header's address sum
/// `addrs`, in little-endian lanes; `None` for a UDP datagram over IPv4
/// without a checksum (0: none, it passes). UDP is checked over its own
/// length (Linux trims the datagram to it; the parse checked it fits); a
/// UDP checksum of 0 is invalid over IPv6 (RFC 8200 §8.1): a sum of 0,
/// which folds to 0.
#[inline(always)]
fn l4_sum(addrs: u64, proto: u8, l4: &[u8], v6: bool) -> Option<u64> {
    let mut seg = l4;
    if proto == 17 {
        let Some(u) = l4.first_chunk::<8>() else {
            return Some(0);
        };
        if u[6] == 0 && u[7] == 0 {
            return if v6 { Some(0) } else { None };
        }
        let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
        seg = l4.get(..ulen).unwrap_or(l4);
    }
    // Protocol and length, big-endian words of the pseudo header, in
    // little-endian lanes: byte-swapped.
    let len = u16::try_from(seg.len()).unwrap_or(u16::MAX);
    let pseudo = (u64::from(proto) << 8) + u64::from(len.swap_bytes());
    Some(add(add(addrs, pseudo), seg_sum(seg, proto == 6)))
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

    /// The word-wise sum folds to the general sum (byte-swapped: it adds
    /// little-endian lanes) for every length from 0 to 300 bytes, with
    /// either fixed header, random bytes, all zeros and all ones (the
    /// end-around carries).
    #[test]
    fn word_sum_is_the_general_sum() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..300 {
            for fill in 0..12 {
                let d: Vec<u8> = (0..len)
                    .map(|_| match fill {
                        0 => 0,
                        1 => 0xff,
                        _ => {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x as u8
                        }
                    })
                    .collect();
                let general = sluice_packet::checksum::sum(&d) as u16;
                for tcp in [false, true] {
                    assert_eq!(fold(seg_sum(&d, tcp)).swap_bytes(), general, "{d:?}");
                }
            }
        }
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
