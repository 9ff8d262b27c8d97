//! ICMP errors built in place from the offending packet (RFC 792, RFC 1812
//! §4.3.2, RFC 4443), and the token bucket that limits them like Linux's
//! `icmp_msgs_per_sec` / `icmp_msgs_burst`.
//!
//! The packet's own buffer becomes the error: the quoted original slides
//! back by the new IP + ICMP headers (one `memmove`), the headers are
//! written in front, and the frame goes back out of the port it came in
//! on, to the MAC it came from. No allocation, no neighbour lookup.

use std::net::Ipv6Addr;

use sluice_packet::checksum::{checksum, checksum_with, pseudo_header_v6};

/// ICMP type: destination unreachable.
pub const V4_UNREACH: u8 = 3;
/// ICMP type: time exceeded.
pub const V4_TIME_EXCEEDED: u8 = 11;
/// ICMPv6 type: destination unreachable.
pub const V6_UNREACH: u8 = 1;
/// ICMPv6 type: time exceeded.
pub const V6_TIME_EXCEEDED: u8 = 3;
/// Hop limit / TTL of the errors we originate (Linux `ip_default_ttl`).
const ORIGIN_TTL: u8 = 64;
/// RFC 4443 §2.4(c): an ICMPv6 error must not exceed the minimum MTU.
const V6_MIN_MTU: usize = 1280;

/// Linux-style global token bucket: `rate` messages per second with bursts
/// of up to `burst`. Rate 0 means unlimited.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    cost_ns: u64,
    cap_ns: u64,
    credit_ns: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate_pps: u32, burst: u32) -> TokenBucket {
        let cost_ns = if rate_pps == 0 {
            0
        } else {
            1_000_000_000 / rate_pps as u64
        };
        let cap_ns = cost_ns.saturating_mul(burst.max(1) as u64);
        TokenBucket {
            cost_ns,
            cap_ns,
            credit_ns: cap_ns,
            last_ns: 0,
        }
    }

    /// Takes a token at time `now_ns` if one is available.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        if self.cost_ns == 0 {
            return true;
        }
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.credit_ns = self.credit_ns.saturating_add(elapsed).min(self.cap_ns);
        if self.credit_ns >= self.cost_ns {
            self.credit_ns -= self.cost_ns;
            true
        } else {
            false
        }
    }

    /// Refills the bucket.
    pub fn reset(&mut self) {
        self.credit_ns = self.cap_ns;
    }
}

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// Whether an ICMP error may be sent about the IPv4 packet `ip` (RFC 1812
/// §4.3.2.7): not about an ICMP error, a non-first fragment, or a packet
/// whose source is not a unicast host.
pub fn may_send_v4(ip: &[u8]) -> bool {
    if ip.len() < 20 {
        return false;
    }
    let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let first = src >> 24;
    if src == 0 || first == 127 || first >= 224 {
        return false;
    }
    if be16(ip, 6) & 0x1fff != 0 {
        return false;
    }
    if ip[9] == 1 {
        let ihl = (ip[0] & 0x0f) as usize * 4;
        // Only a type inside the datagram counts (the router forwards
        // packets with a missing ICMP header; link padding is not one).
        let total = be16(ip, 2) as usize;
        if let Some(&t) = ip.get(ihl).filter(|_| ihl < total) {
            // Errors: unreachable, source quench, redirect, time exceeded,
            // parameter problem.
            if matches!(t, 3 | 4 | 5 | 11 | 12) {
                return false;
            }
        }
    }
    true
}

/// Whether an ICMPv6 error may be sent about the IPv6 packet at `l3`
/// (RFC 4443 §2.4(e)): not about an ICMPv6 error, and not to an
/// unspecified or multicast source. `icmp_type` is the ICMPv6 type of the
/// packet if it is an unfragmented ICMPv6 packet.
pub fn may_send_v6(ip: &[u8], icmp_type: Option<u8>) -> bool {
    if ip.len() < 40 {
        return false;
    }
    let src = u128::from_be_bytes(ip[8..24].try_into().unwrap_or([0; 16]));
    if src == 0 || (src >> 120) == 0xff {
        return false;
    }
    !matches!(icmp_type, Some(t) if t < 128)
}

/// Turns the IPv4 packet at `l3` (frame length `len`, buffer `buf` with
/// room) into ICMP `typ`/`code` from `src` back to its sender: quotes the
/// original header and 8 bytes of payload (RFC 792). Swaps the MACs (new
/// source `src_mac`). Returns the new frame length.
pub fn write_v4(
    buf: &mut [u8],
    l3: usize,
    len: usize,
    typ: u8,
    code: u8,
    src: u32,
    src_mac: [u8; 6],
) -> Option<usize> {
    let ip = buf.get(l3..len)?;
    let ihl = (ip.first()? & 0x0f) as usize * 4;
    let total = (be16(ip, 2) as usize).min(ip.len());
    let quoted = total.min(ihl + 8);
    let tos = (ip[1] & 0x1e) | 0xc0; // IPTOS_PREC_INTERNETCONTROL, as Linux
    let dst: [u8; 4] = ip[12..16].try_into().ok()?;
    let end = l3 + 28 + quoted;
    if end > buf.len() {
        return None;
    }
    buf.copy_within(l3..l3 + quoted, l3 + 28);
    let old_src: [u8; 6] = buf[6..12].try_into().ok()?;
    buf[0..6].copy_from_slice(&old_src);
    buf[6..12].copy_from_slice(&src_mac);
    let h = &mut buf[l3..end];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&((28 + quoted) as u16).to_be_bytes());
    h[4..8].copy_from_slice(&[0, 0, 0, 0]);
    h[8] = ORIGIN_TTL;
    h[9] = 1;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&src.to_be_bytes());
    h[16..20].copy_from_slice(&dst);
    let c = checksum(&h[..20]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h[20] = typ;
    h[21] = code;
    h[22..28].copy_from_slice(&[0; 6]);
    let c = checksum(&h[20..]);
    h[22..24].copy_from_slice(&c.to_be_bytes());
    Some(end)
}

/// Turns the IPv6 packet at `l3` into ICMPv6 `typ`/`code` from `src` back
/// to its sender, quoting as much of it as fits in 1280 bytes (RFC 4443
/// §3). Swaps the MACs (new source `src_mac`). Returns the new length.
pub fn write_v6(
    buf: &mut [u8],
    l3: usize,
    len: usize,
    typ: u8,
    code: u8,
    src: u128,
    src_mac: [u8; 6],
) -> Option<usize> {
    let ip = buf.get(l3..len)?;
    if ip.len() < 40 {
        return None;
    }
    let total = (40 + be16(ip, 4) as usize).min(ip.len());
    let quoted = total.min(V6_MIN_MTU - 48);
    let dst: [u8; 16] = ip[8..24].try_into().ok()?;
    let end = l3 + 48 + quoted;
    if end > buf.len() {
        return None;
    }
    buf.copy_within(l3..l3 + quoted, l3 + 48);
    let old_src: [u8; 6] = buf[6..12].try_into().ok()?;
    buf[0..6].copy_from_slice(&old_src);
    buf[6..12].copy_from_slice(&src_mac);
    let plen = 8 + quoted;
    let h = &mut buf[l3..end];
    h[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    h[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
    h[6] = 58;
    h[7] = ORIGIN_TTL;
    h[8..24].copy_from_slice(&src.to_be_bytes());
    h[24..40].copy_from_slice(&dst);
    h[40] = typ;
    h[41] = code;
    h[42..48].copy_from_slice(&[0; 6]);
    let pseudo = pseudo_header_v6(&Ipv6Addr::from(src), &Ipv6Addr::from(dst), 58, plen as u32);
    let c = checksum_with(pseudo, &h[40..]);
    h[42..44].copy_from_slice(&c.to_be_bytes());
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_bursts_then_paces() {
        let mut b = TokenBucket::new(1000, 3);
        let t = 10_000_000_000;
        assert!(b.allow(t) && b.allow(t) && b.allow(t));
        assert!(!b.allow(t));
        assert!(!b.allow(t + 999_999));
        assert!(b.allow(t + 1_000_000));
        assert!(!b.allow(t + 1_000_000));
        // Never more than the burst after a long pause.
        let later = t + 60_000_000_000;
        assert!(b.allow(later) && b.allow(later) && b.allow(later));
        assert!(!b.allow(later));
        let mut free = TokenBucket::new(0, 0);
        assert!((0..10_000).all(|_| free.allow(0)));
    }

    #[test]
    fn no_errors_about_errors_fragments_or_bad_sources() {
        let mut ip = [0u8; 28];
        ip[0] = 0x45;
        ip[3] = 28; // total length
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        assert!(may_send_v4(&ip));
        ip[9] = 1;
        ip[20] = 8; // echo request: fine
        assert!(may_send_v4(&ip));
        ip[20] = 11; // time exceeded: never
        assert!(!may_send_v4(&ip));
        ip[3] = 20; // ... unless that byte is link padding, not ICMP
        assert!(may_send_v4(&ip));
        ip[3] = 28;
        ip[20] = 8;
        ip[7] = 1; // non-first fragment
        assert!(!may_send_v4(&ip));
        ip[7] = 0;
        ip[12] = 224;
        assert!(!may_send_v4(&ip));
        let mut ip6 = [0u8; 40];
        ip6[8] = 0x20;
        assert!(may_send_v6(&ip6, None));
        assert!(may_send_v6(&ip6, Some(128)));
        assert!(!may_send_v6(&ip6, Some(1)));
        ip6[8] = 0xff;
        assert!(!may_send_v6(&ip6, None));
    }
}
