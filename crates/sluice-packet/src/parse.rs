//! One-pass header walk for the hot path.
//!
//! [`parse`] validates the structure of a frame (lengths, versions, header
//! lengths) from Ethernet down to the transport header and records offsets
//! in a small `Copy` [`Headers`].  It does not verify checksums; call
//! [`verify_checksums`] for that when needed.

use crate::arp::ArpPacket;
use crate::error::ParseError;
use crate::ethernet::{self, EtherType};
use crate::field;
use crate::icmpv4::Icmpv4Packet;
use crate::icmpv6::Icmpv6Packet;
use crate::ip::IpProtocol;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::{self, Ipv6Packet};
use crate::tcp::TcpSegment;
use crate::udp::{self, UdpDatagram};
use crate::vlan;

/// Offsets and key values of a parsed frame.  All offsets are from the
/// start of the frame.
///
/// * Non-IP frames (ARP, unknown EtherTypes): `ip_version == 0`,
///   `l4_offset == payload_offset == l3_offset`, and the payload is the
///   L3 packet (28 bytes for ARP, the rest of the frame, capped at
///   `u16::MAX`, otherwise).
/// * IP fragments (IPv4 MF/offset, or an IPv6 fragment header), first or
///   not: `fragment` is set and the transport header is *not* parsed, so
///   all fragments of a datagram look alike (as with NIC RSS);
///   `l4_offset == payload_offset` points at the fragment data.
/// * Transport protocols other than TCP, UDP, SCTP, ICMP and ICMPv6: the
///   payload starts at `l4_offset`.
/// * The payload is bounded by the IP (and UDP) length fields, so link
///   padding is never included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Headers {
    /// Length of the link-layer header: 14 + 4 per VLAN tag.
    pub l2_len: u16,
    /// Number of VLAN tags (0..=2).
    pub vlan_count: u8,
    /// VLAN ids (12 bits), outermost first; 0 where absent.
    pub vlan_ids: [u16; 2],
    /// EtherType of the L3 packet (after any VLAN tags).
    pub ethertype: EtherType,
    /// Offset of the L3 header (always equal to `l2_len`).
    pub l3_offset: u16,
    /// 4 or 6 for IP packets, 0 otherwise.
    pub ip_version: u8,
    /// Offset of the transport header (after IPv4 options / IPv6 extension
    /// headers).
    pub l4_offset: u16,
    /// Transport protocol (IPv6: after the extension headers); 0 for
    /// non-IP frames.
    pub l4_protocol: IpProtocol,
    /// True if the packet is an IP fragment (first or later).
    pub fragment: bool,
    /// Offset of the transport payload.
    pub payload_offset: u16,
    /// Length of the transport payload.
    pub payload_len: u16,
}

impl Headers {
    /// True for IPv4 packets.
    pub const fn is_ipv4(&self) -> bool {
        self.ip_version == 4
    }

    /// True for IPv6 packets.
    pub const fn is_ipv6(&self) -> bool {
        self.ip_version == 6
    }

    /// Outermost VLAN id, if tagged.
    pub const fn vlan_id(&self) -> Option<u16> {
        if self.vlan_count > 0 {
            Some(self.vlan_ids[0])
        } else {
            None
        }
    }

    /// Length of the L3 header(s): IPv4 header with options, or IPv6 header
    /// plus extension headers (0 for non-IP).
    pub const fn l3_header_len(&self) -> u16 {
        self.l4_offset.saturating_sub(self.l3_offset)
    }

    /// Length of the transport header (0 if not parsed).
    pub const fn l4_header_len(&self) -> u16 {
        self.payload_offset.saturating_sub(self.l4_offset)
    }

    /// True if a TCP, UDP, SCTP, ICMP or ICMPv6 header was parsed and
    /// validated at `l4_offset`.
    pub fn has_l4_header(&self) -> bool {
        self.ip_version != 0 && !self.fragment && self.payload_offset > self.l4_offset
    }
}

#[inline(always)]
fn u16c(x: usize) -> u16 {
    if x > u16::MAX as usize {
        u16::MAX
    } else {
        x as u16
    }
}

/// SCTP common header length.
const SCTP_HEADER_LEN: usize = 12;

/// Parses a frame from the Ethernet header to the transport header.
///
/// Validates: Ethernet length; at most two VLAN tags (0x8100/0x88A8, in any
/// order); ARP length and type; the IPv4 header (version, IHL, total
/// length) or IPv6 header (version, payload length, extension chain of at
/// most 8 headers); and, for non-fragments, the TCP (data offset), UDP
/// (length), SCTP, ICMP and ICMPv6 header lengths.  Checksums are not
/// verified.
#[inline]
pub fn parse(frame: &[u8]) -> Result<Headers, ParseError> {
    match parse_fast(frame) {
        Some((h, _, _)) => Ok(h),
        None => parse_full(frame),
    }
}

#[inline(always)]
fn be16(b: &[u8], off: usize) -> usize {
    usize::from(field::u16_at(b, off))
}

/// The common case, straight-line: at most one 802.1Q tag, IPv4 that is not
/// a fragment or IPv6 without extension headers, carrying TCP or UDP.
/// Returns `None` for anything else, including every error, which
/// [`parse_full`] then handles; for frames it accepts it returns exactly
/// what [`parse_full`] would (checked by a property test).
///
/// Also returns the IP header (at least 20 or 40 bytes) and the transport
/// segment (at least 8 bytes) so that callers can read fields without
/// further bounds checks.
#[inline(always)]
pub(crate) fn parse_fast(f: &[u8]) -> Option<(Headers, &[u8], &[u8])> {
    let eth = f.first_chunk::<{ ethernet::HEADER_LEN }>()?;
    let mut et = u16::from_be_bytes([eth[12], eth[13]]);
    let mut l3 = ethernet::HEADER_LEN;
    let mut vid = 0u16;
    let mut vlan_count = 0u8;
    if et == EtherType::VLAN.0 {
        let tag = f.get(l3..)?.first_chunk::<4>()?;
        vid = u16::from_be_bytes([tag[0], tag[1]]) & 0x0fff;
        et = u16::from_be_bytes([tag[2], tag[3]]);
        l3 += vlan::HEADER_LEN;
        vlan_count = 1;
    }
    let ip = f.get(l3..)?;
    let (ip_version, proto, ip_hdr, ip_len) = if et == EtherType::IPV4.0 {
        let h = ip.first_chunk::<20>()?;
        if h[0] >> 4 != 4 || (h[6] & 0x3f) | h[7] != 0 {
            return None;
        }
        let hl = usize::from(h[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if hl < 20 || total < hl || total > ip.len() {
            return None;
        }
        (4u8, h[9], hl, total)
    } else if et == EtherType::IPV6.0 {
        let h = ip.first_chunk::<40>()?;
        let total = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
        if h[0] >> 4 != 6 || total > ip.len() {
            return None;
        }
        (6u8, h[6], 40, total)
    } else {
        return None;
    };
    let seg = ip.get(ip_hdr..ip_len)?;
    let (l4_hdr, payload_len) = if proto == IpProtocol::UDP.0 {
        if seg.len() < udp::HEADER_LEN {
            return None;
        }
        let ulen = be16(seg, 4);
        if ulen < udp::HEADER_LEN || ulen > seg.len() {
            return None;
        }
        (udp::HEADER_LEN, ulen - udp::HEADER_LEN)
    } else if proto == IpProtocol::TCP.0 {
        let t = seg.first_chunk::<20>()?;
        let hl = usize::from(t[12] >> 4) * 4;
        if hl < 20 || hl > seg.len() {
            return None;
        }
        (hl, seg.len() - hl)
    } else {
        return None;
    };
    let l4 = l3 + ip_hdr;
    let h = Headers {
        l2_len: l3 as u16,
        vlan_count,
        vlan_ids: [vid, 0],
        ethertype: EtherType(et),
        l3_offset: l3 as u16,
        ip_version,
        l4_offset: l4 as u16,
        l4_protocol: IpProtocol(proto),
        fragment: false,
        payload_offset: (l4 + l4_hdr) as u16,
        payload_len: payload_len as u16,
    };
    Some((h, ip, seg))
}

/// The link and network layers of [`parse_full`] / [`parse_l3`]: the
/// headers up to `l4_offset` (`ip_version` 0 for non-IP frames, which are
/// complete), the transport header's offset and the datagram's upper-layer
/// bytes.
#[inline(always)]
fn parse_network(frame: &[u8]) -> Result<(Headers, usize, &[u8]), ParseError> {
    if frame.len() < ethernet::HEADER_LEN {
        return Err(ParseError::EthernetTruncated);
    }
    let mut et = field::u16_at(frame, 12);
    let mut off = ethernet::HEADER_LEN;
    let (mut vlan_count, mut vlan_ids) = (0u8, [0u16; 2]);
    while et == EtherType::VLAN.0 || et == EtherType::QINQ.0 {
        let idx = usize::from(vlan_count);
        if idx >= vlan::MAX_TAGS {
            return Err(ParseError::TooManyVlanTags);
        }
        let tag: [u8; 4] = match frame.get(off..off + vlan::HEADER_LEN) {
            Some(&[a, b, c, d]) => [a, b, c, d],
            _ => return Err(ParseError::VlanTruncated),
        };
        if let Some(slot) = vlan_ids.get_mut(idx) {
            *slot = u16::from_be_bytes([tag[0], tag[1]]) & 0x0fff;
        }
        vlan_count += 1;
        et = u16::from_be_bytes([tag[2], tag[3]]);
        off += vlan::HEADER_LEN;
    }
    let l3 = field::slice(frame, off, frame.len());
    // The link layer's fields, and the transport's as for a frame that
    // ends at its network header; the branches below set what they know.
    // One struct written whole rather than `Default` then field by field:
    // the piecewise writes were read back as wider words when the
    // result was copied out, which the CPU cannot forward from its store
    // buffer (≈ 12 cycles per non-IP frame; `benches/parse.rs`,
    // `other_ethertype`: 10.5 → 5.7 ns on an AMD EPYC).
    let mut h = Headers {
        l2_len: off as u16,
        vlan_count,
        vlan_ids,
        ethertype: EtherType(et),
        l3_offset: off as u16,
        ip_version: 0,
        l4_offset: off as u16,
        l4_protocol: IpProtocol(0),
        fragment: false,
        payload_offset: off as u16,
        payload_len: 0,
    };

    let (l4_rel, l3_payload) = match EtherType(et) {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(l3)?;
            h.ip_version = 4;
            h.l4_protocol = ip.protocol();
            h.fragment = ip.is_fragment();
            let hl = ip.header_len();
            (hl, field::slice(l3, hl, usize::from(ip.total_len())))
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked(l3)?;
            h.ip_version = 6;
            let pl = field::slice(l3, ipv6::HEADER_LEN, l3.len());
            let pl = field::slice(pl, 0, usize::from(ip.payload_len()));
            let ul = ipv6::walk_extensions(ip.next_header(), pl)?;
            h.l4_protocol = ul.protocol;
            h.fragment = ul.fragment.is_some();
            (
                ipv6::HEADER_LEN + ul.offset,
                field::slice(pl, ul.offset, pl.len()),
            )
        }
        EtherType::ARP => {
            ArpPacket::new_checked(l3)?;
            h.payload_len = crate::arp::PACKET_LEN as u16;
            return Ok((h, 0, &[]));
        }
        _ => {
            h.payload_len = u16c(l3.len());
            return Ok((h, 0, &[]));
        }
    };

    let l4_off = off + l4_rel;
    h.l4_offset = u16c(l4_off);
    Ok((h, l4_off, l3_payload))
}

/// Parses a frame down to the network layer only: Ethernet, up to two
/// VLAN tags, ARP, the IPv4 header (version, IHL, total length) or the
/// IPv6 header and its extension-header chain, with the same checks and
/// errors as [`parse`], but no transport-header checks. For IP packets
/// the transport header and data are left as a fragment's are:
/// `payload_offset == l4_offset` and `payload_len` runs to the end of the
/// datagram. For routers, which forward a datagram whatever it carries
/// (as Linux does), so a truncated TCP or UDP header is not their
/// business.
pub fn parse_l3(frame: &[u8]) -> Result<Headers, ParseError> {
    let (mut h, l4_off, l3_payload) = parse_network(frame)?;
    if h.ip_version != 0 {
        h.payload_offset = u16c(l4_off);
        h.payload_len = u16c(l3_payload.len());
    }
    Ok(h)
}

/// The general path: handles every frame and reports precise errors.
#[inline(never)]
pub(crate) fn parse_full(frame: &[u8]) -> Result<Headers, ParseError> {
    let (mut h, l4_off, l3_payload) = parse_network(frame)?;
    if h.ip_version == 0 {
        return Ok(h);
    }
    let (hdr_len, payload_len) = if h.fragment {
        (0, l3_payload.len())
    } else {
        match h.l4_protocol {
            IpProtocol::TCP => {
                let t = TcpSegment::new_checked(l3_payload)?;
                let hl = t.header_len();
                (hl, l3_payload.len().saturating_sub(hl))
            }
            IpProtocol::UDP => {
                let u = UdpDatagram::new_checked(l3_payload)?;
                (
                    udp::HEADER_LEN,
                    usize::from(u.len()).saturating_sub(udp::HEADER_LEN),
                )
            }
            IpProtocol::ICMP if h.ip_version == 4 => {
                Icmpv4Packet::new_checked(l3_payload)?;
                (
                    crate::icmpv4::HEADER_LEN,
                    l3_payload.len().saturating_sub(crate::icmpv4::HEADER_LEN),
                )
            }
            IpProtocol::ICMPV6 if h.ip_version == 6 => {
                Icmpv6Packet::new_checked(l3_payload)?;
                (
                    crate::icmpv6::HEADER_LEN,
                    l3_payload.len().saturating_sub(crate::icmpv6::HEADER_LEN),
                )
            }
            IpProtocol::SCTP => {
                if l3_payload.len() < SCTP_HEADER_LEN {
                    return Err(ParseError::SctpTruncated);
                }
                (
                    SCTP_HEADER_LEN,
                    l3_payload.len().saturating_sub(SCTP_HEADER_LEN),
                )
            }
            _ => (0, l3_payload.len()),
        }
    };
    h.payload_offset = u16c(l4_off + hdr_len);
    h.payload_len = u16c(payload_len);
    Ok(h)
}

/// Verifies the checksums of a frame parsed by [`parse`]: the IPv4 header
/// checksum and, unless the packet is a fragment, the TCP, UDP (a zero
/// checksum is accepted over IPv4 only), ICMPv4 and ICMPv6 checksums.
///
/// Never panics, even if `h` does not describe `frame`; it then returns a
/// truncation error.
pub fn verify_checksums(frame: &[u8], h: &Headers) -> Result<(), ParseError> {
    let l3 = field::slice(frame, usize::from(h.l3_offset), frame.len());
    let l4_rel = usize::from(h.l4_offset.saturating_sub(h.l3_offset));
    match h.ip_version {
        4 => {
            let ip = Ipv4Packet::new_checked(l3)?;
            if !ip.verify_checksum() {
                return Err(ParseError::Ipv4BadChecksum);
            }
            if h.fragment {
                return Ok(());
            }
            let l4 = field::slice(l3, l4_rel, usize::from(ip.total_len()));
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            match h.l4_protocol {
                IpProtocol::TCP => {
                    let t = TcpSegment::new_checked(l4)?;
                    if !t.verify_checksum_v4(&src, &dst) {
                        return Err(ParseError::TcpBadChecksum);
                    }
                }
                IpProtocol::UDP => {
                    let u = UdpDatagram::new_checked(l4)?;
                    if !u.verify_checksum_v4(&src, &dst) {
                        return Err(ParseError::UdpBadChecksum);
                    }
                }
                IpProtocol::ICMP => {
                    let i = Icmpv4Packet::new_checked(l4)?;
                    if !i.verify_checksum() {
                        return Err(ParseError::Icmpv4BadChecksum);
                    }
                }
                _ => {}
            }
            Ok(())
        }
        6 => {
            let ip = Ipv6Packet::new_checked(l3)?;
            if h.fragment {
                return Ok(());
            }
            let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
            let l4 = field::slice(l3, l4_rel, end);
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            match h.l4_protocol {
                IpProtocol::TCP => {
                    let t = TcpSegment::new_checked(l4)?;
                    if !t.verify_checksum_v6(&src, &dst) {
                        return Err(ParseError::TcpBadChecksum);
                    }
                }
                IpProtocol::UDP => {
                    let u = UdpDatagram::new_checked(l4)?;
                    if !u.verify_checksum_v6(&src, &dst) {
                        return Err(ParseError::UdpBadChecksum);
                    }
                }
                IpProtocol::ICMPV6 => {
                    let i = Icmpv6Packet::new_checked(l4)?;
                    if !i.verify_checksum(&src, &dst) {
                        return Err(ParseError::Icmpv6BadChecksum);
                    }
                }
                _ => {}
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frameish() -> impl Strategy<Value = Vec<u8>> {
        let et = prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x8100), any::<u16>()];
        let proto = prop_oneof![Just(6u8), Just(17), Just(1), Just(58), Just(0), any::<u8>()];
        (
            et,
            any::<bool>(),
            proto,
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 0..120),
            any::<u16>(),
        )
            .prop_map(|(et, tagged, proto, vihl, rest, len)| {
                let mut f = vec![0u8; 12];
                if tagged {
                    f.extend_from_slice(&[0x81, 0x00, 0x20, 0x05]);
                }
                f.extend_from_slice(&et.to_be_bytes());
                let l3 = f.len();
                f.extend_from_slice(&rest);
                // Make the IP header plausible most of the time.
                let n = f.len();
                if n > l3 + 20 {
                    f[l3] = if vihl & 1 == 0 {
                        0x45
                    } else {
                        0x60 | (vihl >> 4)
                    };
                    let v4 = f[l3] >> 4 == 4;
                    let lenfield = if vihl & 2 == 0 {
                        (n - l3).saturating_sub(if v4 { 0 } else { 40 }) as u16
                    } else {
                        len
                    };
                    let lo = if v4 { 2 } else { 4 };
                    f[l3 + lo..l3 + lo + 2].copy_from_slice(&lenfield.to_be_bytes());
                    f[l3 + if v4 { 9 } else { 6 }] = proto;
                    if v4 && vihl & 4 == 0 {
                        f[l3 + 6] = 0;
                        f[l3 + 7] = 0;
                    }
                }
                f
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        /// The fast path agrees with the general path wherever it answers,
        /// and answers for the plain TCP/UDP frames it is meant for.
        #[test]
        fn fast_path_matches_full_path(f in frameish()) {
            let full = parse_full(&f);
            if let Some((h, _, _)) = parse_fast(&f) {
                prop_assert_eq!(Ok(h), full);
            } else if let Ok(h) = full {
                prop_assert!(
                    h.vlan_count > 1 || h.fragment || h.ip_version == 0
                        || !matches!(h.l4_protocol, IpProtocol::TCP | IpProtocol::UDP)
                        || (h.ip_version == 6 && h.l3_header_len() != 40)
                        || (h.vlan_count == 1 && h.ethertype != EtherType::IPV4 && h.ethertype != EtherType::IPV6)
                        || f.get(12..14) == Some(&[0x88, 0xa8][..]),
                    "fast path declined a plain frame: {:?}", h
                );
            }
            prop_assert_eq!(parse(&f), full);
        }

        /// `parse_l3` is `parse` without the transport checks: the same
        /// link and network fields and errors, and an IP datagram's whole
        /// upper layer as its payload.
        #[test]
        fn l3_parse_is_parse_without_the_transport_checks(f in frameish()) {
            let l3 = parse_l3(&f);
            match parse(&f) {
                Ok(h) => {
                    let g = l3.expect("parse_l3 accepts what parse accepts");
                    let ip = h.ip_version != 0;
                    let same = Headers {
                        payload_offset: if ip { h.l4_offset } else { h.payload_offset },
                        payload_len: g.payload_len,
                        ..h
                    };
                    prop_assert_eq!(g, same);
                    if ip {
                        let end = usize::from(h.l4_offset) + usize::from(g.payload_len);
                        prop_assert!(end <= f.len());
                        prop_assert!(
                            usize::from(h.payload_offset) + usize::from(h.payload_len) <= end
                        );
                    }
                }
                Err(e) => {
                    if let Err(e3) = l3 {
                        prop_assert_eq!(e3, e);
                    }
                }
            }
        }
    }
}
