//! Flow keys (5-tuples) with a direction-independent hash.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;
use crate::parse::Headers;

/// A transport 5-tuple plus IP version.
///
/// IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`).  Ports are 0
/// for protocols without ports and for IP fragments; for ICMP/ICMPv6 echo
/// request/reply both ports hold the echo identifier so that concurrent
/// pings are distinct flows (and a reply maps to its request's flow).
// `FromZeros`: tables of keys can start as zeroed memory
// (`sluice_sys::ZeroedTable`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, zerocopy::FromZeros,
)]
pub struct FlowKey {
    /// Source address (IPv4-mapped for IPv4).
    pub src: [u8; 16],
    /// Destination address (IPv4-mapped for IPv4).
    pub dst: [u8; 16],
    /// Source port (or echo id).
    pub src_port: u16,
    /// Destination port (or echo id).
    pub dst_port: u16,
    /// IP protocol number.
    pub proto: u8,
    /// IP version, 4 or 6.
    pub ip_version: u8,
}

#[inline(always)]
fn mapped(v4: [u8; 4]) -> [u8; 16] {
    (0xffff_0000_0000_u128 | u128::from(u32::from_be_bytes(v4))).to_be_bytes()
}

fn to_bytes(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => mapped(a.octets()),
        IpAddr::V6(a) => a.octets(),
    }
}

/// Folded 64x64->128-bit multiply: xor of the product's halves.  One `mul`
/// instruction; the basis of wyhash/foldhash-style mixing.
#[inline(always)]
const fn fmul(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

// Arbitrary odd constants (digits of pi), used as per-word keys.
const K: [u64; 6] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6c,
];

impl FlowKey {
    /// Builds a key from addresses and ports.  If both addresses are IPv4
    /// the key is IPv4 (`ip_version` 4); otherwise it is IPv6 and any IPv4
    /// address is stored IPv4-mapped.
    pub fn new(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, proto: IpProtocol) -> Self {
        let ip_version = if src.is_ipv4() && dst.is_ipv4() { 4 } else { 6 };
        FlowKey {
            src: to_bytes(src),
            dst: to_bytes(dst),
            src_port,
            dst_port,
            proto: proto.0,
            ip_version,
        }
    }

    /// Builds the key of a frame already parsed into `h` (avoids parsing
    /// twice).  Errors with [`ParseError::UnsupportedEtherType`] for non-IP
    /// frames.  Never panics, even if `h` does not describe `frame`.
    #[inline]
    pub fn from_headers(frame: &[u8], h: &Headers) -> Result<FlowKey, ParseError> {
        let l3 = usize::from(h.l3_offset);
        let (src, dst) = match h.ip_version {
            4 => (
                mapped(field::array_at(frame, l3 + 12)),
                mapped(field::array_at(frame, l3 + 16)),
            ),
            6 => (
                field::array_at(frame, l3 + 8),
                field::array_at(frame, l3 + 24),
            ),
            _ => return Err(ParseError::UnsupportedEtherType),
        };
        let l4 = usize::from(h.l4_offset);
        let (src_port, dst_port) = if h.fragment {
            (0, 0)
        } else {
            match (h.l4_protocol, h.ip_version) {
                (IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP, _) => {
                    (field::u16_at(frame, l4), field::u16_at(frame, l4 + 2))
                }
                (IpProtocol::ICMP, 4) | (IpProtocol::ICMPV6, 6) => {
                    let t = field::u8_at(frame, l4);
                    let echo = if h.ip_version == 4 {
                        t == 0 || t == 8
                    } else {
                        t == 128 || t == 129
                    };
                    if echo {
                        let id = field::u16_at(frame, l4 + 4);
                        (id, id)
                    } else {
                        (0, 0)
                    }
                }
                _ => (0, 0),
            }
        };
        Ok(FlowKey {
            src,
            dst,
            src_port,
            dst_port,
            proto: h.l4_protocol.0,
            ip_version: h.ip_version,
        })
    }

    /// The key of the reverse direction (addresses and ports swapped).
    #[inline]
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }

    /// True if `(src, src_port) <= (dst, dst_port)`, i.e. the key is
    /// already canonical.
    #[inline]
    pub fn is_canonical(&self) -> bool {
        (u128::from_be_bytes(self.src), self.src_port)
            <= (u128::from_be_bytes(self.dst), self.dst_port)
    }

    /// The direction-independent form: the endpoint `(addr, port)` that
    /// compares lower becomes the source.  `k.canonical() ==
    /// k.reversed().canonical()` for every key.
    #[inline]
    pub fn canonical(&self) -> FlowKey {
        if self.is_canonical() {
            *self
        } else {
            self.reversed()
        }
    }

    /// Direction-independent 32-bit hash: equal for a key and its reverse.
    ///
    /// Hashes the canonical key with a fixed seed; see
    /// [`FlowKey::symmetric_hash_with_seed`] for the construction.
    #[inline]
    pub fn symmetric_hash(&self) -> u32 {
        self.symmetric_hash_with_seed(0)
    }

    /// Direction-independent 32-bit hash with a caller-chosen seed (use a
    /// random seed where flows are attacker-controlled).
    ///
    /// Construction: the endpoints are put in canonical order (as
    /// [`FlowKey::canonical`] does) and the key is read as five 64-bit words
    /// (two per address, one for ports/protocol/version); each pair of words is
    /// combined with a folded 64x64->128-bit multiply after xor-ing in
    /// distinct odd constants (as in wyhash/foldhash), the three results are
    /// combined with one more folded multiply, and the upper and lower
    /// halves are xored down to 32 bits.  That is four independent `mul`s
    /// with a critical path of two, giving good avalanche (every input bit
    /// affects every output bit) at a few nanoseconds.  It is not a
    /// cryptographic or DoS-resistant hash unless the seed is secret.
    #[inline]
    pub fn symmetric_hash_with_seed(&self, seed: u64) -> u32 {
        // Canonical order without materialising the canonical key.
        let (mut a, mut pa) = (u128::from_be_bytes(self.src), self.src_port);
        let (mut b, mut pb) = (u128::from_be_bytes(self.dst), self.dst_port);
        if (a, pa) > (b, pb) {
            core::mem::swap(&mut a, &mut b);
            core::mem::swap(&mut pa, &mut pb);
        }
        let meta = (u64::from(pa) << 48)
            | (u64::from(pb) << 32)
            | (u64::from(self.proto) << 8)
            | u64::from(self.ip_version);
        let h0 = fmul(a as u64 ^ K[0] ^ seed, (a >> 64) as u64 ^ K[1]);
        let h1 = fmul(b as u64 ^ K[2], (b >> 64) as u64 ^ K[3] ^ seed);
        let h2 = fmul(meta ^ K[4], seed ^ K[5]);
        let h = fmul(h0 ^ h2, h1 ^ K[4]);
        (h ^ (h >> 32)) as u32
    }

    /// Source address.
    pub fn src_ip(&self) -> IpAddr {
        self.ip(&self.src)
    }

    /// Destination address.
    pub fn dst_ip(&self) -> IpAddr {
        self.ip(&self.dst)
    }

    /// The protocol as an [`IpProtocol`].
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.proto)
    }

    fn ip(&self, a: &[u8; 16]) -> IpAddr {
        if self.ip_version == 4 {
            IpAddr::V4(Ipv4Addr::from(field::array_at::<4>(a, 12)))
        } else {
            IpAddr::V6(Ipv6Addr::from(*a))
        }
    }
}

impl fmt::Display for FlowKey {
    /// `udp 10.0.0.1:1234 -> 10.0.0.2:80`, `tcp [2001:db8::1]:1 ->
    /// [2001:db8::2]:2`, `icmp 10.0.0.1 -> 10.0.0.2 id 7`, `gre 10.0.0.1 ->
    /// 10.0.0.2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.protocol();
        let (s, d) = (self.src_ip(), self.dst_ip());
        if p.has_ports() {
            let (s, d) = (
                std::net::SocketAddr::new(s, self.src_port),
                std::net::SocketAddr::new(d, self.dst_port),
            );
            write!(f, "{p} {s} -> {d}")
        } else if matches!(p, IpProtocol::ICMP | IpProtocol::ICMPV6) && self.src_port != 0 {
            write!(f, "{p} {s} -> {d} id {}", self.src_port)
        } else {
            write!(f, "{p} {s} -> {d}")
        }
    }
}

/// Parses `frame` and returns its flow key.
///
/// Same validation as [`crate::parse::parse`]; errors with
/// [`ParseError::UnsupportedEtherType`] for non-IP frames.
#[inline]
pub fn flow_key(frame: &[u8]) -> Result<FlowKey, ParseError> {
    // Plain TCP/UDP frames: read the fields from the slices the fast parse
    // already bounds-checked.
    if let Some((h, ip, seg)) = crate::parse::parse_fast(frame) {
        let (src, dst) = if h.ip_version == 4 {
            (
                mapped(field::array_at(ip, 12)),
                mapped(field::array_at(ip, 16)),
            )
        } else {
            (field::array_at(ip, 8), field::array_at(ip, 24))
        };
        return Ok(FlowKey {
            src,
            dst,
            src_port: field::u16_at(seg, 0),
            dst_port: field::u16_at(seg, 2),
            proto: h.l4_protocol.0,
            ip_version: h.ip_version,
        });
    }
    flow_key_full(frame)
}

#[inline(never)]
fn flow_key_full(frame: &[u8]) -> Result<FlowKey, ParseError> {
    let h = crate::parse::parse_full(frame)?;
    FlowKey::from_headers(frame, &h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str, d: &str, sp: u16, dp: u16, p: IpProtocol) -> FlowKey {
        FlowKey::new(s.parse().unwrap(), d.parse().unwrap(), sp, dp, p)
    }

    #[test]
    fn display() {
        assert_eq!(
            key("10.0.0.1", "10.0.0.2", 1234, 80, IpProtocol::UDP).to_string(),
            "udp 10.0.0.1:1234 -> 10.0.0.2:80"
        );
        assert_eq!(
            key("2001:db8::1", "2001:db8::2", 1, 2, IpProtocol::TCP).to_string(),
            "tcp [2001:db8::1]:1 -> [2001:db8::2]:2"
        );
        assert_eq!(
            key("10.0.0.1", "10.0.0.2", 7, 7, IpProtocol::ICMP).to_string(),
            "icmp 10.0.0.1 -> 10.0.0.2 id 7"
        );
        assert_eq!(
            key("10.0.0.1", "10.0.0.2", 0, 0, IpProtocol::GRE).to_string(),
            "gre 10.0.0.1 -> 10.0.0.2"
        );
    }

    #[test]
    fn v4_mapped_and_accessors() {
        let k = key("10.0.0.1", "10.0.0.2", 1, 2, IpProtocol::UDP);
        assert_eq!(k.ip_version, 4);
        assert_eq!(
            &k.src,
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
        assert_eq!(k.src_ip(), "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(k.dst_ip(), "10.0.0.2".parse::<IpAddr>().unwrap());
        let m = key("10.0.0.1", "::1", 1, 2, IpProtocol::UDP);
        assert_eq!(m.ip_version, 6);
        assert_eq!(m.src_ip(), "::ffff:10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn canonical_and_symmetric() {
        let k = key("10.0.0.9", "10.0.0.2", 1234, 80, IpProtocol::TCP);
        let r = k.reversed();
        assert_eq!(r.src_port, 80);
        assert_eq!(r.reversed(), k);
        assert_eq!(k.canonical(), r.canonical());
        assert!(k.canonical().is_canonical());
        assert_eq!(k.canonical().src_port, 80);
        assert_eq!(k.symmetric_hash(), r.symmetric_hash());
        assert_ne!(k.symmetric_hash(), k.symmetric_hash_with_seed(1));
        // Same address, different ports: ordered by port.
        let s = key("10.0.0.1", "10.0.0.1", 9, 3, IpProtocol::UDP);
        assert_eq!(s.canonical().src_port, 3);
        assert_eq!(s.symmetric_hash(), s.reversed().symmetric_hash());
    }

    #[test]
    fn hash_distribution_and_avalanche() {
        // Sequential source ports over 64 buckets: each bucket should be
        // within 25% of the mean.
        let mut buckets = [0u32; 64];
        for p in 0..65536u32 {
            let k = key("10.0.0.1", "10.0.0.2", p as u16, 80, IpProtocol::UDP);
            buckets[(k.symmetric_hash() & 63) as usize] += 1;
        }
        for b in buckets {
            assert!((768..=1280).contains(&b), "bucket {b}");
        }
        // Flipping any single input bit flips ~half of the output bits.
        let base = key("192.168.1.10", "172.16.5.4", 40000, 443, IpProtocol::TCP);
        let mut total = 0u32;
        let mut n = 0u32;
        for byte in 0..16 {
            for bit in 0..8 {
                let mut k = base;
                k.dst[byte] ^= 1 << bit;
                let d = (k.symmetric_hash() ^ base.symmetric_hash()).count_ones();
                assert!(d > 0);
                total += d;
                n += 1;
            }
        }
        for bit in 0..16 {
            let mut k = base;
            k.src_port ^= 1 << bit;
            total += (k.symmetric_hash() ^ base.symmetric_hash()).count_ones();
            n += 1;
        }
        let avg = f64::from(total) / f64::from(n);
        assert!((13.0..=19.0).contains(&avg), "avg flipped bits {avg}");
    }
}
