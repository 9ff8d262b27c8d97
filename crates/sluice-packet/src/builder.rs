//! Emitting complete, checksum-correct frames.
//!
//! Used by the traffic generator and by network functions that craft
//! packets.  [`write_frame`] writes Ethernet (+ one 802.1Q tag), IPv4 or
//! IPv6, and a UDP, TCP or ICMP/ICMPv6 echo header followed by a payload,
//! and fills every length and checksum.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ethernet::{self, EtherType, MacAddr};
use crate::field;
use crate::ip::IpProtocol;
use crate::tcp::TcpFlags;
use crate::{icmpv4, icmpv6, ipv4, ipv6, tcp, udp, vlan};

/// Transport part of a [`FrameSpec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Spec {
    /// UDP header.
    Udp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
    },
    /// TCP header without options (data offset 5, urgent pointer 0).
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Control flags.
        flags: TcpFlags,
        /// Receive window.
        window: u16,
    },
    /// ICMP echo (IPv4) or ICMPv6 echo (IPv6), request or reply.
    IcmpEcho {
        /// Echo identifier.
        id: u16,
        /// Echo sequence number.
        seq: u16,
        /// Reply instead of request.
        reply: bool,
    },
}

impl L4Spec {
    /// Transport header length in bytes.
    pub const fn header_len(&self) -> usize {
        match self {
            L4Spec::Udp { .. } => udp::HEADER_LEN,
            L4Spec::Tcp { .. } => tcp::HEADER_LEN,
            L4Spec::IcmpEcho { .. } => icmpv4::HEADER_LEN,
        }
    }
}

/// Description of a frame for [`write_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameSpec {
    /// Source MAC address.
    pub src_mac: MacAddr,
    /// Destination MAC address.
    pub dst_mac: MacAddr,
    /// 802.1Q VLAN id (0..=4095, PCP/DEI 0); `None` for untagged.
    pub vlan: Option<u16>,
    /// Source address; must be the same family as `dst_ip`.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// Transport header.
    pub l4: L4Spec,
}

impl FrameSpec {
    /// Length of all headers written before the payload (family taken from
    /// `src_ip`).
    pub fn header_len(&self) -> usize {
        let vlan = if self.vlan.is_some() {
            vlan::HEADER_LEN
        } else {
            0
        };
        let ip = match self.src_ip {
            IpAddr::V4(_) => ipv4::HEADER_LEN,
            IpAddr::V6(_) => ipv6::HEADER_LEN,
        };
        ethernet::HEADER_LEN + vlan + ip + self.l4.header_len()
    }
}

/// Why [`write_frame`] could not build a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuildError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes available in the buffer.
        available: usize,
    },
    /// `src_ip` and `dst_ip` are of different address families.
    AddressFamilyMismatch,
    /// The payload does not fit the IP length field (65535 bytes total for
    /// IPv4, 65535 bytes of payload for IPv6).
    PayloadTooLarge,
    /// The VLAN id is above 4095.
    InvalidVlanId(u16),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::BufferTooSmall { needed, available } => {
                write!(f, "buffer too small: need {needed} bytes, have {available}")
            }
            BuildError::AddressFamilyMismatch => {
                f.write_str("source and destination addresses are of different families")
            }
            BuildError::PayloadTooLarge => f.write_str("payload too large for the IP length field"),
            BuildError::InvalidVlanId(v) => write!(f, "invalid VLAN id {v} (max 4095)"),
        }
    }
}

impl std::error::Error for BuildError {}

enum Family {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// Writes Ethernet (+VLAN) + IPv4/IPv6 + L4 headers followed by `payload`
/// into `buf`, fills every length and checksum, returns the frame length.
///
/// IPv4 headers have no options, DSCP/ECN 0, identification 0 and DF set.
/// IPv6 headers have traffic class and flow label 0.  The frame is not
/// padded to the Ethernet minimum (the NIC does that); bytes of `buf` past
/// the returned length are left untouched.
pub fn write_frame(buf: &mut [u8], spec: &FrameSpec, payload: &[u8]) -> Result<usize, BuildError> {
    let fam = match (spec.src_ip, spec.dst_ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Family::V4(s, d),
        (IpAddr::V6(s), IpAddr::V6(d)) => Family::V6(s, d),
        _ => return Err(BuildError::AddressFamilyMismatch),
    };
    if let Some(v) = spec.vlan {
        if v > 0x0fff {
            return Err(BuildError::InvalidVlanId(v));
        }
    }
    let l4_len = spec.l4.header_len() + payload.len();
    let ip_hdr = match fam {
        Family::V4(..) => ipv4::HEADER_LEN,
        Family::V6(..) => ipv6::HEADER_LEN,
    };
    let ip_len_field = match fam {
        Family::V4(..) => ip_hdr + l4_len,
        Family::V6(..) => l4_len,
    };
    let ip_len_field = u16::try_from(ip_len_field).map_err(|_| BuildError::PayloadTooLarge)?;
    let needed = spec.header_len() + payload.len();
    let frame = match buf.get_mut(..needed) {
        Some(f) => f,
        None => {
            return Err(BuildError::BufferTooSmall {
                needed,
                available: buf.len(),
            })
        }
    };

    // Ethernet (+ VLAN).
    field::set_bytes(frame, 0, &spec.dst_mac.0);
    field::set_bytes(frame, 6, &spec.src_mac.0);
    let l3_type = match fam {
        Family::V4(..) => EtherType::IPV4,
        Family::V6(..) => EtherType::IPV6,
    };
    let mut off = 12;
    if let Some(v) = spec.vlan {
        field::set_u16(frame, off, EtherType::VLAN.0);
        field::set_u16(frame, off + 2, v);
        off += vlan::HEADER_LEN;
    }
    field::set_u16(frame, off, l3_type.0);
    let l3 = off + 2;
    let l4 = l3 + ip_hdr;

    // Transport header + payload (checksum field zero for now).
    let proto = match (spec.l4, &fam) {
        (L4Spec::Udp { src_port, dst_port }, _) => {
            field::set_u16(frame, l4, src_port);
            field::set_u16(frame, l4 + 2, dst_port);
            field::set_u16(frame, l4 + 4, l4_len as u16);
            field::set_u16(frame, l4 + 6, 0);
            IpProtocol::UDP
        }
        (
            L4Spec::Tcp {
                src_port,
                dst_port,
                seq,
                ack,
                flags,
                window,
            },
            _,
        ) => {
            field::set_u16(frame, l4, src_port);
            field::set_u16(frame, l4 + 2, dst_port);
            field::set_u32(frame, l4 + 4, seq);
            field::set_u32(frame, l4 + 8, ack);
            field::set_u8(frame, l4 + 12, ((tcp::HEADER_LEN / 4) as u8) << 4);
            field::set_u8(frame, l4 + 13, flags.bits());
            field::set_u16(frame, l4 + 14, window);
            field::set_u32(frame, l4 + 16, 0); // checksum + urgent
            IpProtocol::TCP
        }
        (L4Spec::IcmpEcho { id, seq, reply }, fam) => {
            let (t, p) = match fam {
                Family::V4(..) => (
                    if reply {
                        icmpv4::Icmpv4Type::ECHO_REPLY.0
                    } else {
                        icmpv4::Icmpv4Type::ECHO_REQUEST.0
                    },
                    IpProtocol::ICMP,
                ),
                Family::V6(..) => (
                    if reply {
                        icmpv6::Icmpv6Type::ECHO_REPLY.0
                    } else {
                        icmpv6::Icmpv6Type::ECHO_REQUEST.0
                    },
                    IpProtocol::ICMPV6,
                ),
            };
            field::set_u8(frame, l4, t);
            field::set_u8(frame, l4 + 1, 0);
            field::set_u16(frame, l4 + 2, 0);
            field::set_u16(frame, l4 + 4, id);
            field::set_u16(frame, l4 + 6, seq);
            p
        }
    };
    field::set_bytes(frame, l4 + spec.l4.header_len(), payload);

    // IP header.
    let pseudo = match fam {
        Family::V4(s, d) => {
            field::set_u8(frame, l3, 0x45);
            field::set_u8(frame, l3 + 1, 0);
            field::set_u16(frame, l3 + 2, ip_len_field);
            field::set_u16(frame, l3 + 4, 0);
            field::set_u16(frame, l3 + 6, 0x4000);
            field::set_u8(frame, l3 + 8, spec.ttl);
            field::set_u8(frame, l3 + 9, proto.0);
            field::set_u16(frame, l3 + 10, 0);
            field::set_bytes(frame, l3 + 12, &s.octets());
            field::set_bytes(frame, l3 + 16, &d.octets());
            let c = checksum::checksum(field::slice(frame, l3, l4));
            field::set_u16(frame, l3 + 10, c);
            if proto == IpProtocol::ICMP {
                0
            } else {
                checksum::pseudo_header_v4(&s, &d, proto.0, l4_len as u16)
            }
        }
        Family::V6(s, d) => {
            field::set_u32(frame, l3, 0x6000_0000);
            field::set_u16(frame, l3 + 4, ip_len_field);
            field::set_u8(frame, l3 + 6, proto.0);
            field::set_u8(frame, l3 + 7, spec.ttl);
            field::set_bytes(frame, l3 + 8, &s.octets());
            field::set_bytes(frame, l3 + 24, &d.octets());
            checksum::pseudo_header_v6(&s, &d, proto.0, l4_len as u32)
        }
    };

    // Transport checksum.
    let c_off = match proto {
        IpProtocol::TCP => 16,
        IpProtocol::UDP => 6,
        _ => 2,
    };
    let mut c = checksum::checksum_with(pseudo, field::slice(frame, l4, needed));
    if proto == IpProtocol::UDP && c == 0 {
        c = 0xffff;
    }
    field::set_u16(frame, l4 + c_off, c);
    Ok(needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse, verify_checksums};

    fn spec(src: &str, dst: &str, l4: L4Spec) -> FrameSpec {
        FrameSpec {
            src_mac: MacAddr::new(0x02, 0, 0, 0, 0, 1),
            dst_mac: MacAddr::new(0x02, 0, 0, 0, 0, 2),
            vlan: None,
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            ttl: 64,
            l4,
        }
    }

    const UDP: L4Spec = L4Spec::Udp {
        src_port: 1234,
        dst_port: 80,
    };

    #[test]
    fn errors() {
        let mut buf = [0u8; 64];
        let s = spec("10.0.0.1", "::1", UDP);
        assert_eq!(
            write_frame(&mut buf, &s, &[]),
            Err(BuildError::AddressFamilyMismatch)
        );
        let mut s = spec("10.0.0.1", "10.0.0.2", UDP);
        s.vlan = Some(4096);
        assert_eq!(
            write_frame(&mut buf, &s, &[]),
            Err(BuildError::InvalidVlanId(4096))
        );
        s.vlan = Some(4095);
        assert_eq!(s.header_len(), 46);
        assert_eq!(
            write_frame(&mut buf[..45], &s, &[]),
            Err(BuildError::BufferTooSmall {
                needed: 46,
                available: 45
            })
        );
        assert_eq!(write_frame(&mut buf, &s, &[]), Ok(46));
        let big = vec![0u8; 65536 - 28];
        let mut out = vec![0u8; 70000];
        assert_eq!(
            write_frame(&mut out, &spec("10.0.0.1", "10.0.0.2", UDP), &big),
            Err(BuildError::PayloadTooLarge)
        );
        assert!(write_frame(&mut out, &spec("10.0.0.1", "10.0.0.2", UDP), &big[1..]).is_ok());
        let big6 = vec![0u8; 65536 - 8];
        assert_eq!(
            write_frame(&mut out, &spec("::1", "::2", UDP), &big6),
            Err(BuildError::PayloadTooLarge)
        );
        assert!(write_frame(&mut out, &spec("::1", "::2", UDP), &big6[1..]).is_ok());
        assert_eq!(
            BuildError::BufferTooSmall {
                needed: 2,
                available: 1
            }
            .to_string(),
            "buffer too small: need 2 bytes, have 1"
        );
    }

    #[test]
    fn all_kinds_parse_and_verify() {
        let l4s = [
            UDP,
            L4Spec::Tcp {
                src_port: 40000,
                dst_port: 443,
                seq: 1,
                ack: 2,
                flags: TcpFlags::SYN | TcpFlags::ACK,
                window: 1000,
            },
            L4Spec::IcmpEcho {
                id: 77,
                seq: 3,
                reply: false,
            },
        ];
        for l4 in l4s {
            for (s, d) in [("10.0.0.1", "10.0.0.2"), ("2001:db8::1", "2001:db8::2")] {
                for vlan in [None, Some(100)] {
                    let mut sp = spec(s, d, l4);
                    sp.vlan = vlan;
                    let mut buf = [0u8; 256];
                    let n = write_frame(&mut buf, &sp, b"hello").unwrap();
                    assert_eq!(n, sp.header_len() + 5);
                    let h = parse(&buf[..n]).unwrap();
                    assert_eq!(usize::from(h.payload_offset), sp.header_len());
                    assert_eq!(h.payload_len, 5);
                    assert_eq!(h.vlan_id(), vlan);
                    verify_checksums(&buf[..n], &h).unwrap();
                }
            }
        }
    }
}
