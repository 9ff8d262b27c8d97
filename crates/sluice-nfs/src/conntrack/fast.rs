//! The established fast path's view of a packet: addresses, ports and
//! protocol read straight out of the frame at the offsets the header
//! parse found, compared with a cached entry's canonical key in place of
//! building a [`FlowKey`], canonicalising and comparing it.
//!
//! Only packets that cannot open, close or reset a connection qualify: TCP
//! segments of the ACK class (ACK set; SYN, FIN and RST clear; PSH, URG,
//! ECE, CWR allowed) and UDP datagrams, not fragments. Everything else, and
//! any packet whose tuple differs from the cached entry's, takes the full
//! path.

use sluice_packet::{FlowKey, Headers, IpProtocol};

use super::tcp_window::Seg;
use super::L4;

#[path = "fast_v4.rs"]
mod v4;
pub(crate) use v4::V4Tuple;

const FIN_SYN_RST: u8 = 0x07;
const ACK: u8 = 0x10;
/// Untagged Ethernet header length.
const ETH: usize = 14;

/// Source and destination address as they appear in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Addrs<'a> {
    /// Source in the low 32 bits, destination in the high 32, each as the
    /// header's 4 bytes in native order ([`v4_pair`]).
    V4(u64),
    /// Source then destination, borrowed from the frame (not copied: the
    /// tuple stays small enough for registers).
    V6(&'a [u8; 32]),
}

/// Two IPv4 addresses (4 bytes each, as on the wire) packed into one word,
/// so a tuple compares in one instruction and its reverse is a rotation.
#[inline(always)]
fn v4_pair(a: [u8; 4], b: [u8; 4]) -> u64 {
    u64::from(u32::from_ne_bytes(a)) | u64::from(u32::from_ne_bytes(b)) << 32
}

/// The last 4 bytes of an IPv4-mapped address.
#[inline(always)]
fn v4_of(mapped: &[u8; 16]) -> [u8; 4] {
    [mapped[12], mapped[13], mapped[14], mapped[15]]
}

/// A fast-path candidate's tuple and transport class, in its own
/// direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RawTuple<'a> {
    addrs: Addrs<'a>,
    /// Source port in the low 16 bits, destination port in the high 16.
    ports: u32,
    proto: u8,
    /// Transport class: UDP, or a TCP ACK-class segment (ACK set; SYN,
    /// FIN, RST clear) with what window tracking reads of it.
    pub(super) l4: L4,
}

impl<'a> RawTuple<'a> {
    /// Reads a fast-path candidate from a frame parsed as `h`; `None` for
    /// anything that must take the full path (not TCP ACK-class or UDP, a
    /// fragment, a frame too short for the fields read).
    #[inline(always)]
    pub(super) fn read(frame: &'a [u8], h: &Headers) -> Option<RawTuple<'a>> {
        if h.fragment {
            return None;
        }
        let l3 = usize::from(h.l3_offset);
        let l4off = usize::from(h.l4_offset);
        let l4 = match h.l4_protocol {
            IpProtocol::TCP => {
                let flags = *frame.get(l4off + 13)?;
                if flags & FIN_SYN_RST != 0 || flags & ACK == 0 {
                    return None;
                }
                let t = frame.get(l4off..usize::from(h.payload_offset))?;
                let seg = Seg::read(t, usize::from(h.payload_len))?;
                L4::Tcp { flags, seg }
            }
            IpProtocol::UDP => L4::Udp,
            _ => return None,
        };
        let p: &[u8; 4] = frame.get(l4off..)?.first_chunk()?;
        let ports = u32::from(u16::from_be_bytes([p[0], p[1]]))
            | u32::from(u16::from_be_bytes([p[2], p[3]])) << 16;
        let addrs = match h.ip_version {
            4 => {
                let a: &[u8; 8] = frame.get(l3 + 12..)?.first_chunk()?;
                Addrs::V4(v4_pair([a[0], a[1], a[2], a[3]], [a[4], a[5], a[6], a[7]]))
            }
            6 => Addrs::V6(frame.get(l3 + 8..)?.first_chunk()?),
            _ => return None,
        };
        Some(RawTuple {
            addrs,
            ports,
            proto: h.l4_protocol.0,
            l4,
        })
    }

    /// Reads a fast-path candidate straight from the bytes of a frame of
    /// the common shape, without [`sluice_packet::parse`]: untagged
    /// Ethernet, then IPv4 with a 20-byte header (IHL 5) that is not a
    /// fragment or IPv6 whose next header is TCP or UDP (no extension
    /// headers), then a TCP ACK-class segment or a UDP datagram, every
    /// length field as `parse` requires it (IP total / payload length
    /// within the frame, TCP data offset or UDP length within the IP
    /// payload). `parse` accepts every frame this accepts and finds its
    /// IP header at 14 and its transport header at 34 (IPv4) or 54
    /// (IPv6), which is where this reads, so the answer is the one
    /// [`RawTuple::read`] gives after `parse`. `None` for anything else
    /// (VLAN tags, IP options, extension headers, fragments, other
    /// protocols, SYN/FIN/RST, bad lengths, short frames): the caller
    /// parses and takes the general path, which decides those exactly as
    /// before.
    #[inline(always)]
    pub(super) fn read_frame(f: &'a [u8]) -> Option<RawTuple<'a>> {
        // The shortest frame either family can take (IPv4's, below), so
        // the Ethernet header needs no check of its own.
        let eth: &[u8; ETH + 28] = f.first_chunk()?;
        // One copy of the rest per family, so every offset is a constant.
        match u16::from_be_bytes([eth[12], eth[13]]) {
            0x0800 => Self::read_v4(f),
            0x86dd => Self::read_v6(f),
            _ => None,
        }
    }

    /// [`RawTuple::read_frame`] for an IPv4 frame.
    #[inline(always)]
    fn read_v4(f: &'a [u8]) -> Option<RawTuple<'a>> {
        // Ethernet + IPv4 header + 8 bytes of transport: the shortest
        // frame that can qualify.
        let h: &[u8; ETH + 28] = f.first_chunk()?;
        let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
        // Version 4, IHL 5; MF clear and offset 0 (DF may be set). `total`
        // at least 20 follows from the transport header fitting in it.
        if h[14] != 0x45 || (h[20] & 0x3f) | h[21] != 0 || total > f.len() - ETH {
            return None;
        }
        let (ports, l4) = transport::<{ ETH + 20 }, 20>(f, total, h[23])?;
        let pair = v4_pair([h[26], h[27], h[28], h[29]], [h[30], h[31], h[32], h[33]]);
        Some(RawTuple {
            addrs: Addrs::V4(pair),
            ports,
            proto: h[23],
            l4,
        })
    }

    /// [`RawTuple::read_frame`] for an IPv6 frame.
    #[inline(always)]
    fn read_v6(f: &'a [u8]) -> Option<RawTuple<'a>> {
        let h: &[u8; ETH + 40] = f.first_chunk()?;
        let payload = usize::from(u16::from_be_bytes([h[18], h[19]]));
        if h[14] >> 4 != 6 || 40 + payload > f.len() - ETH {
            return None;
        }
        let (ports, l4) = transport::<{ ETH + 40 }, 0>(f, payload, h[20])?;
        Some(RawTuple {
            addrs: Addrs::V6(h[22..].first_chunk()?),
            ports,
            proto: h[20],
            l4,
        })
    }

    /// Whether this tuple is `key` (a canonical key) in its own direction
    /// (`Some(true)`: the packet's source is the key's source), reversed
    /// (`Some(false)`), or another connection (`None`). The same answers
    /// as comparing the packet's [`FlowKey`] with `key` and
    /// `key.reversed()`.
    #[inline(always)]
    pub(super) fn direction(&self, key: &FlowKey) -> Option<bool> {
        if key.proto != self.proto {
            return None;
        }
        let kp = u32::from(key.src_port) | u32::from(key.dst_port) << 16;
        let (same, swapped) = match self.addrs {
            Addrs::V4(a) => {
                if key.ip_version != 4 {
                    return None;
                }
                // A version-4 key holds IPv4-mapped addresses.
                let k = v4_pair(v4_of(&key.src), v4_of(&key.dst));
                // The common answer first: the packet in the key's
                // direction.
                if a == k && self.ports == kp {
                    return Some(true);
                }
                (false, a == k.rotate_left(32))
            }
            Addrs::V6(a) => {
                if key.ip_version != 6 {
                    return None;
                }
                let (s, d) = a.split_at(16);
                (s == key.src && d == key.dst, s == key.dst && d == key.src)
            }
        };
        if same && self.ports == kp {
            Some(true)
        } else if swapped && self.ports == kp.rotate_left(16) {
            Some(false)
        } else {
            None
        }
    }
}

/// The transport part of [`RawTuple::read_frame`]: the ports and class of
/// a UDP datagram or TCP ACK-class segment at offset `AT` behind an IP
/// header of `IP` bytes counted in `len` (the IP payload is `len - IP`
/// bytes), if its header lies within that payload as `parse` requires
/// (UDP: `8 <= length <= payload`; TCP: `20 <= data offset <= payload`);
/// a header within the payload also makes `len >= IP`, so the caller need
/// not check that.
#[inline(always)]
fn transport<const AT: usize, const IP: usize>(
    f: &[u8],
    len: usize,
    proto: u8,
) -> Option<(u32, L4)> {
    let class = match proto {
        17 => {
            let u: &[u8; 8] = f.get(AT..)?.first_chunk()?;
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if ulen < 8 || ulen + IP > len {
                return None;
            }
            L4::Udp
        }
        6 => {
            let t: &[u8; 20] = f.get(AT..)?.first_chunk()?;
            let thl = usize::from(t[12] >> 4) * 4;
            if thl < 20 || thl + IP > len || t[13] & (FIN_SYN_RST | ACK) != ACK {
                return None;
            }
            let seg = Seg::read(f.get(AT..AT + thl)?, len - IP - thl)?;
            L4::Tcp {
                flags: seg.flags,
                seg,
            }
        }
        _ => return None,
    };
    let p: &[u8; 4] = f.get(AT..)?.first_chunk()?;
    // Source port in the low half, destination in the high: the
    // big-endian word with its halves swapped.
    let ports = u32::from_be_bytes(*p).rotate_left(16);
    Some((ports, class))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_packet::{parse, write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
    use std::net::IpAddr;

    fn tcp(src: &str, sp: u16, dst: &str, dp: u16, flags: TcpFlags) -> Vec<u8> {
        let spec = FrameSpec {
            src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
            dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
            vlan: None,
            src_ip: src.parse::<IpAddr>().unwrap(),
            dst_ip: dst.parse::<IpAddr>().unwrap(),
            ttl: 64,
            l4: L4Spec::Tcp {
                src_port: sp,
                dst_port: dp,
                seq: 1,
                ack: 1,
                flags,
                window: 100,
            },
        };
        let mut buf = vec![0u8; spec.header_len()];
        let n = write_frame(&mut buf, &spec, b"").unwrap();
        buf.truncate(n);
        buf
    }

    fn read(f: &[u8]) -> Option<RawTuple<'_>> {
        RawTuple::read(f, &parse(f).unwrap())
    }

    fn udp(src: &str, sp: u16, dst: &str, dp: u16) -> Vec<u8> {
        let spec = FrameSpec {
            src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
            dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
            vlan: None,
            src_ip: src.parse::<IpAddr>().unwrap(),
            dst_ip: dst.parse::<IpAddr>().unwrap(),
            ttl: 64,
            l4: L4Spec::Udp {
                src_port: sp,
                dst_port: dp,
            },
        };
        let mut buf = vec![0u8; spec.header_len() + 5];
        let n = write_frame(&mut buf, &spec, b"hello").unwrap();
        buf.truncate(n);
        buf
    }

    /// Frames of both families and transports with random header bytes,
    /// truncations and padding.
    pub(super) fn mutated() -> impl Strategy<Value = Vec<u8>> {
        (
            0..4usize,
            prop::collection::vec((0..80usize, any::<u8>()), 0..4),
            prop::option::of(0..90usize),
            0..12usize,
        )
            .prop_map(|(base, muts, cut, pad)| {
                let mut f = match base {
                    0 => tcp("10.0.0.1", 1000, "10.0.0.2", 80, TcpFlags::ACK),
                    1 => udp("10.0.0.1", 1000, "10.0.0.2", 53),
                    2 => tcp("fd00::1", 1000, "fd00::2", 80, TcpFlags::ACK),
                    _ => udp("fd00::1", 1000, "fd00::2", 53),
                };
                for (at, b) in muts {
                    if let Some(x) = f.get_mut(at) {
                        *x = b;
                    }
                }
                if let Some(n) = cut {
                    f.truncate(n);
                }
                f.resize(f.len() + pad, 0);
                f
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// `read_frame` takes a frame only if `parse` accepts it with the
        /// IP header at 14 and the transport header right after a 20-byte
        /// IPv4 or 40-byte IPv6 header, and then reads what `read` reads
        /// after `parse`; and it takes every such frame `read` takes.
        #[test]
        fn read_frame_is_read_after_parse_for_the_common_shape(f in mutated()) {
            let raw = RawTuple::read_frame(&f);
            let parsed = parse(&f).ok();
            let common = parsed.filter(|h| {
                h.l3_offset == 14
                    && h.vlan_count == 0
                    && h.l4_offset == if h.ip_version == 4 { 34 } else { 54 }
            });
            if let Some(r) = raw {
                let h = common.expect("read_frame took a frame parse rejects or reads elsewhere");
                prop_assert_eq!(RawTuple::read(&f, &h), Some(r));
            }
            if let Some(h) = common {
                prop_assert_eq!(raw, RawTuple::read(&f, &h));
            }
        }
    }

    #[test]
    fn read_frame_takes_plain_frames_of_both_families() {
        for f in [
            tcp(
                "10.0.0.1",
                1000,
                "10.0.0.2",
                80,
                TcpFlags::ACK | TcpFlags::PSH,
            ),
            udp("10.0.0.1", 1000, "10.0.0.2", 53),
            tcp("fd00::1", 1000, "fd00::2", 80, TcpFlags::ACK),
            udp("fd00::1", 1000, "fd00::2", 53),
        ] {
            let r = RawTuple::read_frame(&f);
            assert!(r.is_some());
            assert_eq!(r, read(&f));
        }
    }

    /// `direction` answers exactly what comparing flow keys answers, for
    /// both directions, both address families and near misses.
    #[test]
    fn direction_agrees_with_flow_keys() {
        let cases = [
            ("10.0.0.1", 4000, "10.0.0.2", 80),
            ("10.0.0.2", 80, "10.0.0.1", 4000),
            ("10.0.0.1", 80, "10.0.0.1", 80),
            ("2001:db8::1", 4000, "2001:db8::2", 80),
            ("2001:db8::2", 80, "2001:db8::1", 4000),
        ];
        let keys = [
            ("10.0.0.1", 4000, "10.0.0.2", 80),
            ("10.0.0.1", 4000, "10.0.0.2", 81),
            ("10.0.0.1", 4000, "10.0.0.3", 80),
            ("10.0.0.1", 80, "10.0.0.1", 80),
            ("::ffff:10.0.0.1", 4000, "::ffff:10.0.0.2", 80),
            ("2001:db8::1", 4000, "2001:db8::2", 80),
            ("2001:db8::1", 80, "2001:db8::2", 4000),
        ];
        for (s, sp, d, dp) in cases {
            let f = tcp(s, sp, d, dp, TcpFlags::ACK);
            let raw = read(&f).unwrap();
            let pk = sluice_packet::flow_key(&f).unwrap();
            for (ks, ksp, kd, kdp) in keys {
                let mut key = FlowKey::new(
                    ks.parse::<IpAddr>().unwrap(),
                    kd.parse::<IpAddr>().unwrap(),
                    ksp,
                    kdp,
                    IpProtocol::TCP,
                )
                .canonical();
                if ks.starts_with("::ffff:") {
                    key.ip_version = 6;
                }
                let want = if pk == key {
                    Some(true)
                } else if pk.reversed() == key {
                    Some(false)
                } else {
                    None
                };
                assert_eq!(raw.direction(&key), want, "{s}:{sp} -> {d}:{dp} vs {key:?}");
                let udp = FlowKey { proto: 17, ..key };
                assert_eq!(raw.direction(&udp), None);
            }
        }
    }

    /// Packing an IPv4 tuple and unpacking it gives it back; IPv6 tuples
    /// are not packed.
    #[test]
    fn v4_tuples_pack_and_unpack_unchanged() {
        for f in [
            tcp(
                "10.0.0.1",
                1000,
                "10.0.0.2",
                80,
                TcpFlags::ACK | TcpFlags::URG,
            ),
            udp("10.0.0.1", 1000, "10.0.0.2", 53),
            tcp("fd00::1", 1000, "fd00::2", 80, TcpFlags::ACK),
            udp("fd00::1", 1000, "fd00::2", 53),
        ] {
            let r = RawTuple::read_frame(&f).unwrap();
            match r.addrs {
                Addrs::V4(_) => assert_eq!(r.to_v4().unwrap().unpack(), r),
                Addrs::V6(_) => assert_eq!(r.to_v4(), None),
            }
        }
    }

    #[test]
    fn only_ack_class_tcp_qualifies() {
        let f = |flags| {
            read(&tcp("10.0.0.1", 1, "10.0.0.2", 2, flags)).map(|r| match r.l4 {
                L4::Tcp { flags, .. } => flags,
                _ => 0,
            })
        };
        assert_eq!(
            f(TcpFlags::ACK | TcpFlags::PSH | TcpFlags::URG | TcpFlags::ECE | TcpFlags::CWR),
            Some(0xf8)
        );
        assert_eq!(f(TcpFlags::SYN), None);
        assert_eq!(f(TcpFlags::SYN | TcpFlags::ACK), None);
        assert_eq!(f(TcpFlags::FIN | TcpFlags::ACK), None);
        assert_eq!(f(TcpFlags::RST | TcpFlags::ACK), None);
        assert_eq!(f(TcpFlags::PSH), None);
    }

    /// Normalising an ACK-class segment's flags to a bare ACK changes no
    /// transition, in any state or direction.
    #[test]
    fn ack_class_segments_share_the_bare_ack_transitions() {
        use super::super::tcp::{transition, TcpState};
        for flags in 0..=255u8 {
            if flags & FIN_SYN_RST != 0 || flags & ACK == 0 {
                continue;
            }
            for s in TcpState::ALL {
                for reply in [false, true] {
                    assert_eq!(
                        transition(s, reply, flags),
                        transition(s, reply, ACK),
                        "{s:?} reply={reply} flags={flags:#x}"
                    );
                }
            }
        }
    }
}
