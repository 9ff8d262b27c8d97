//! What connection tracking needs to know about one packet, read once from
//! the frame: its 5-tuple, its zone and its transport class (TCP flags,
//! ICMP echo / error / other), and for ICMP errors the 5-tuple of the
//! datagram they quote (RFC 792, RFC 4443 §2.4).

use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::ipv6::{self, walk_extensions};
use sluice_packet::{FlowKey, Headers, IpProtocol, ParseError};

use super::tcp_window::Seg;

/// The transport class of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// TCP with its flag byte and what window tracking needs.
    Tcp {
        /// TCP flags (FIN 0x01 … CWR 0x80).
        flags: u8,
        /// Sequence numbers, window, options.
        seg: Seg,
    },
    /// UDP (and UDP-Lite, SCTP: tracked by ports like UDP would be).
    Udp,
    /// ICMP/ICMPv6 echo request (`request`) or reply.
    IcmpEcho {
        /// True for a request.
        request: bool,
    },
    /// ICMP/ICMPv6 error quoting a datagram; `inner` is the quoted
    /// datagram's 5-tuple as it was sent (`None` if the quote is unusable).
    IcmpError {
        /// 5-tuple of the quoted datagram.
        inner: Option<FlowKey>,
    },
    /// Any other ICMP/ICMPv6 message (neighbour discovery, timestamps…):
    /// not tracked, like Linux's untracked ICMPv6 ND.
    IcmpOther,
    /// Any other IP protocol (GRE, ESP…): tracked by addresses.
    Other,
}

/// One packet as connection tracking sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtPacket {
    /// The packet's 5-tuple, in its own direction.
    pub key: FlowKey,
    /// Connection-tracking zone (tenants with equal 5-tuples stay apart).
    pub zone: u16,
    /// Transport class.
    pub l4: L4,
    /// ICMP/ICMPv6 type, for rule matching.
    pub icmp_type: Option<u8>,
}

impl CtPacket {
    /// Reads a parsed IP frame (`h.ip_version` 4 or 6, not a fragment).
    pub fn parse(frame: &[u8], h: &Headers, zone: u16) -> Result<CtPacket, ParseError> {
        let key = FlowKey::from_headers(frame, h)?;
        let l4off = usize::from(h.l4_offset);
        let byte = |i: usize| frame.get(l4off + i).copied().unwrap_or(0);
        let end = (usize::from(h.payload_offset) + usize::from(h.payload_len)).min(frame.len());
        let quoted = || frame.get(usize::from(h.payload_offset)..end).unwrap_or(&[]);
        let (l4, icmp_type) = match (h.l4_protocol, h.ip_version) {
            (IpProtocol::TCP, _) => {
                let t = frame.get(l4off..end).unwrap_or(&[]);
                let seg = Seg::read(t, usize::from(h.payload_len)).unwrap_or_default();
                (
                    L4::Tcp {
                        flags: byte(13),
                        seg,
                    },
                    None,
                )
            }
            (IpProtocol::UDP | IpProtocol::SCTP, _) => (L4::Udp, None),
            (IpProtocol::ICMP, 4) => {
                let t = byte(0);
                let l4 = match t {
                    8 => L4::IcmpEcho { request: true },
                    0 => L4::IcmpEcho { request: false },
                    3 | 4 | 5 | 11 | 12 => L4::IcmpError {
                        inner: inner_v4(quoted()),
                    },
                    _ => L4::IcmpOther,
                };
                (l4, Some(t))
            }
            (IpProtocol::ICMPV6, 6) => {
                let t = byte(0);
                let l4 = match t {
                    128 => L4::IcmpEcho { request: true },
                    129 => L4::IcmpEcho { request: false },
                    1..=4 => L4::IcmpError {
                        inner: inner_v6(quoted()),
                    },
                    _ => L4::IcmpOther,
                };
                (l4, Some(t))
            }
            _ => (L4::Other, None),
        };
        Ok(CtPacket {
            key,
            zone,
            l4,
            icmp_type,
        })
    }
}

/// Ports (or echo id) of a quoted transport header, which RFC 792 and
/// RFC 4443 guarantee at least 8 bytes of.
fn inner_ports(proto: IpProtocol, v6: bool, l4: &[u8]) -> Option<(u16, u16)> {
    let u16_at = |i: usize| Some(u16::from_be_bytes([*l4.get(i)?, *l4.get(i + 1)?]));
    match proto {
        IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP => Some((u16_at(0)?, u16_at(2)?)),
        IpProtocol::ICMP if !v6 => match l4.first()? {
            0 | 8 => u16_at(4).map(|id| (id, id)),
            _ => Some((0, 0)),
        },
        IpProtocol::ICMPV6 if v6 => match l4.first()? {
            128 | 129 => u16_at(4).map(|id| (id, id)),
            _ => Some((0, 0)),
        },
        _ => Some((0, 0)),
    }
}

fn inner_v4(q: &[u8]) -> Option<FlowKey> {
    let ip = Ipv4Packet::new_embedded(q).ok()?;
    let proto = ip.protocol();
    let (sp, dp) = if ip.frag_offset() != 0 {
        (0, 0)
    } else {
        inner_ports(proto, false, q.get(ip.header_len()..)?)?
    };
    Some(FlowKey::new(
        ip.src_addr().into(),
        ip.dst_addr().into(),
        sp,
        dp,
        proto,
    ))
}

fn inner_v6(q: &[u8]) -> Option<FlowKey> {
    let hdr = q.get(..ipv6::HEADER_LEN)?;
    if hdr[0] >> 4 != 6 {
        return None;
    }
    let addr = |o: usize| -> Option<std::net::Ipv6Addr> {
        let b: [u8; 16] = hdr.get(o..o + 16)?.try_into().ok()?;
        Some(b.into())
    };
    let rest = q.get(ipv6::HEADER_LEN..)?;
    let ul = walk_extensions(IpProtocol(hdr[6]), rest).ok()?;
    let (sp, dp) = if ul.is_non_first_fragment() {
        (0, 0)
    } else {
        inner_ports(ul.protocol, true, rest.get(ul.offset..)?)?
    };
    Some(FlowKey::new(
        addr(8)?.into(),
        addr(24)?.into(),
        sp,
        dp,
        ul.protocol,
    ))
}
