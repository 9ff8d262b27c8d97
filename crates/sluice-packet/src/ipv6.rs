//! IPv6 packets (RFC 8200) and extension-header walking.

use std::net::Ipv6Addr;

use crate::checksum;
use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Maximum number of extension headers [`walk_extensions`] follows before
/// giving up with [`ParseError::Ipv6ExtensionChain`].
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet.
///
/// `new_checked` guarantees version 6 and `40 + payload_len <= buffer
/// length`; the payload is bounded by `payload_len` (trailing link padding
/// is excluded).  Jumbograms (payload length 0 + jumbo option) are not
/// supported: a zero payload length means an empty payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps `buffer` (starting at the IPv6 header) after validating it.
    ///
    /// Errors: [`ParseError::Ipv6Truncated`] if the buffer is shorter than
    /// 40 bytes or than `40 + payload_len`; [`ParseError::Ipv6BadVersion`].
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Ipv6Truncated);
        }
        if field::u8_at(b, 0) >> 4 != 6 {
            return Err(ParseError::Ipv6BadVersion);
        }
        if HEADER_LEN + usize::from(field::u16_at(b, 4)) > b.len() {
            return Err(ParseError::Ipv6Truncated);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// Like [`Ipv6Packet::new_checked`] but accepts a `payload_len` larger
    /// than the buffer, for IPv6 headers quoted (truncated) inside ICMPv6
    /// error messages.  The payload is then clamped to the buffer.
    pub fn new_embedded(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::Ipv6Truncated);
        }
        if field::u8_at(b, 0) >> 4 != 6 {
            return Err(ParseError::Ipv6BadVersion);
        }
        Ok(Ipv6Packet { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version field (6).
    pub fn version(&self) -> u8 {
        field::u8_at(self.b(), 0) >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    pub fn traffic_class(&self) -> u8 {
        (field::u16_at(self.b(), 0) >> 4) as u8
    }

    /// DSCP part of the traffic class.
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN part of the traffic class.
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        field::u32_at(self.b(), 0) & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header).
    pub fn payload_len(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// Next header (first extension header or upper-layer protocol).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(field::u8_at(self.b(), 6))
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        field::u8_at(self.b(), 7)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(field::array_at::<16>(self.b(), 8))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(field::array_at::<16>(self.b(), 24))
    }

    /// Payload (extension headers + upper layer), bounded by `payload_len`.
    pub fn payload(&self) -> &[u8] {
        field::slice(
            self.b(),
            HEADER_LEN,
            HEADER_LEN + usize::from(self.payload_len()),
        )
    }

    /// Walks the extension headers to the upper-layer protocol.
    pub fn upper_layer(&self) -> Result<UpperLayer, ParseError> {
        walk_extensions(self.next_header(), self.payload())
    }

    /// Upper-layer bytes (after all extension headers), if the chain is
    /// well-formed.
    pub fn upper_layer_payload(&self) -> Result<&[u8], ParseError> {
        let ul = self.upper_layer()?;
        let p = self.payload();
        Ok(field::slice(p, ul.offset, p.len()))
    }

    /// Partial sum of the pseudo-header for an upper-layer message of
    /// `length` bytes with protocol `next_header`.
    pub fn pseudo_header_sum(&self, next_header: IpProtocol, length: u32) -> u64 {
        checksum::pseudo_header_v6(&self.src_addr(), &self.dst_addr(), next_header.0, length)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the version nibble.
    pub fn set_version(&mut self, v: u8) {
        let b0 = field::u8_at(self.b(), 0);
        field::set_u8(self.bm(), 0, (v << 4) | (b0 & 0x0f));
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = field::u16_at(self.b(), 0);
        field::set_u16(self.bm(), 0, (w & 0xf00f) | (u16::from(tc) << 4));
    }

    /// Sets the flow label (low 20 bits used).
    pub fn set_flow_label(&mut self, fl: u32) {
        let w = field::u32_at(self.b(), 0);
        field::set_u32(self.bm(), 0, (w & 0xfff0_0000) | (fl & 0x000f_ffff));
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        field::set_u16(self.bm(), 4, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        field::set_u8(self.bm(), 6, nh.0);
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        field::set_u8(self.bm(), 7, h);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        field::set_bytes(self.bm(), 8, &a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        field::set_bytes(self.bm(), 24, &a.octets());
    }

    /// Mutable payload, bounded by `payload_len`.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        field::slice_mut(self.bm(), HEADER_LEN, end)
    }
}

/// Fragment header contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentInfo {
    /// Fragment offset in bytes.
    pub offset: u16,
    /// More-fragments flag.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// Where the upper layer starts, found by [`walk_extensions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UpperLayer {
    /// Upper-layer protocol (the last next-header value).  For a non-first
    /// fragment this is the fragment header's next header and the bytes at
    /// `offset` are fragment data, not a header.
    pub protocol: IpProtocol,
    /// Offset of the upper layer relative to the start of the IPv6 payload
    /// (i.e. the total length of the extension headers).
    pub offset: usize,
    /// Number of extension headers walked.
    pub ext_headers: u8,
    /// The fragment header, if one was present.
    pub fragment: Option<FragmentInfo>,
}

impl UpperLayer {
    /// True if a fragment header with offset > 0 was found: the upper-layer
    /// header is not in this packet.
    pub fn is_non_first_fragment(&self) -> bool {
        matches!(self.fragment, Some(f) if f.offset != 0)
    }
}

/// True for the extension headers [`walk_extensions`] follows: hop-by-hop
/// (0), routing (43), fragment (44), destination options (60) and
/// authentication header (51).
pub const fn is_extension_header(nh: IpProtocol) -> bool {
    matches!(nh.0, 0 | 43 | 44 | 51 | 60)
}

/// Walks the IPv6 extension-header chain starting with `next_header` over
/// `payload` (the bytes after the fixed header).
///
/// Follows at most [`MAX_EXT_HEADERS`] headers.  Stops at the first
/// non-extension next header (the upper layer, including ESP and "no next
/// header"), or right after a fragment header with a non-zero offset.
/// Errors with [`ParseError::Ipv6ExtensionChain`] if a header is truncated,
/// there are too many, or hop-by-hop options are not first.
#[inline]
pub fn walk_extensions(next_header: IpProtocol, payload: &[u8]) -> Result<UpperLayer, ParseError> {
    let mut nh = next_header.0;
    let mut off = 0usize;
    let mut count = 0u8;
    let mut fragment = None;
    loop {
        let hdr_len = match nh {
            0 | 43 | 51 | 60 => {
                if nh == 0 && count != 0 {
                    return Err(ParseError::Ipv6ExtensionChain);
                }
                let len = usize::from(field::u8_at(payload, off + 1));
                if nh == 51 {
                    (len + 2) * 4
                } else {
                    (len + 1) * 8
                }
            }
            44 => 8,
            _ => break,
        };
        if usize::from(count) >= MAX_EXT_HEADERS || off + hdr_len > payload.len() {
            return Err(ParseError::Ipv6ExtensionChain);
        }
        let next = field::u8_at(payload, off);
        if nh == 44 {
            let fo = field::u16_at(payload, off + 2);
            let f = FragmentInfo {
                offset: fo & 0xfff8,
                more: fo & 1 != 0,
                ident: field::u32_at(payload, off + 4),
            };
            fragment = Some(f);
            if f.offset != 0 {
                nh = next;
                off += hdr_len;
                count += 1;
                break;
            }
        }
        nh = next;
        off += hdr_len;
        count += 1;
    }
    Ok(UpperLayer {
        protocol: IpProtocol(nh),
        offset: off,
        ext_headers: count,
        fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(payload_len: u16, nh: u8) -> Vec<u8> {
        let mut b = vec![
            0x6b, 0x81, 0x23, 0x45, // version 6, tc 0xb8, flow 0x12345
            0, 0, nh, 64,
        ];
        b[4..6].copy_from_slice(&payload_len.to_be_bytes());
        b.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        b.extend_from_slice(&"2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
        b
    }

    #[test]
    fn fixed_header() {
        let mut b = header(4, 17);
        b.extend_from_slice(&[1, 2, 3, 4, 0xee]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 4);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr().to_string(), "2001:db8::1");
        assert_eq!(p.dst_addr().to_string(), "2001:db8::2");
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        let ul = p.upper_layer().unwrap();
        assert_eq!(ul.protocol, IpProtocol::UDP);
        assert_eq!(ul.offset, 0);
        assert_eq!(ul.ext_headers, 0);
    }

    #[test]
    fn validation() {
        let b = header(0, 59);
        assert!(Ipv6Packet::new_checked(&b[..]).is_ok());
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]),
            Err(ParseError::Ipv6Truncated)
        );
        let b = header(1, 59);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]),
            Err(ParseError::Ipv6Truncated)
        );
        let mut b = header(0, 59);
        b[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]),
            Err(ParseError::Ipv6BadVersion)
        );
    }

    #[test]
    fn setters() {
        let mut b = header(0, 59);
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        p.set_traffic_class(0x01);
        p.set_flow_label(0xfffff);
        p.set_hop_limit(1);
        p.set_next_header(IpProtocol::TCP);
        p.set_src_addr(Ipv6Addr::LOCALHOST);
        p.set_dst_addr(Ipv6Addr::UNSPECIFIED);
        p.set_payload_len(100); // inconsistent on purpose: must not panic
        let _ = p.payload();
        p.payload_mut();
        p.set_payload_len(0);
        p.set_version(6);
        assert_eq!(p.traffic_class(), 1);
        assert_eq!(p.flow_label(), 0xfffff);
        assert_eq!(p.version(), 6);
        assert_eq!(p.hop_limit(), 1);
        assert_eq!(p.next_header(), IpProtocol::TCP);
        assert_eq!(p.src_addr(), Ipv6Addr::LOCALHOST);
        assert_eq!(&b[..4], &[0x60, 0x1f, 0xff, 0xff]);
    }

    #[test]
    fn extension_chain() {
        // HBH (8 bytes) -> routing (16 bytes) -> fragment (first) -> dst opts
        // (8 bytes) -> TCP.
        let mut e = Vec::new();
        e.extend_from_slice(&[43, 0, 1, 4, 0, 0, 0, 0]); // HBH, PadN
        e.extend_from_slice(&[44, 1, 4, 0, 0, 0, 0, 0]); // routing hdr type 4
        e.extend_from_slice(&[0; 8]);
        e.extend_from_slice(&[60, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]); // frag, M=1
        e.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]); // dst opts
        let ul = walk_extensions(IpProtocol::HOPOPT, &e).unwrap();
        assert_eq!(ul.protocol, IpProtocol::TCP);
        assert_eq!(ul.offset, 40);
        assert_eq!(ul.ext_headers, 4);
        assert_eq!(
            ul.fragment,
            Some(FragmentInfo {
                offset: 0,
                more: true,
                ident: 0xdeadbeef
            })
        );
        assert!(!ul.is_non_first_fragment());

        // Truncated at every length.
        for cut in 0..e.len() {
            let r = walk_extensions(IpProtocol::HOPOPT, &e[..cut]);
            assert_eq!(r, Err(ParseError::Ipv6ExtensionChain), "cut {cut}");
        }
    }

    #[test]
    fn non_first_fragment_stops() {
        let e = [17, 0, 0x05, 0x38, 0, 0, 0, 1, 0xaa, 0xbb];
        let ul = walk_extensions(IpProtocol::IPV6_FRAG, &e).unwrap();
        assert_eq!(ul.protocol, IpProtocol::UDP);
        assert_eq!(ul.offset, 8);
        assert!(ul.is_non_first_fragment());
        assert_eq!(ul.fragment.unwrap().offset, 0x0538);
        assert!(!ul.fragment.unwrap().more);
    }

    #[test]
    fn chain_limits() {
        // Hop-by-hop not first.
        let e = [0, 0, 0, 0, 0, 0, 0, 0, 59, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            walk_extensions(IpProtocol::IPV6_OPTS, &e),
            Err(ParseError::Ipv6ExtensionChain)
        );
        // 8 destination-options headers are fine, 9 are not.
        let mut e = Vec::new();
        for _ in 0..8 {
            e.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        let mut ok = e.clone();
        let n = ok.len();
        ok[n - 8] = 17;
        let ul = walk_extensions(IpProtocol::IPV6_OPTS, &ok).unwrap();
        assert_eq!(ul.ext_headers, 8);
        assert_eq!(ul.protocol, IpProtocol::UDP);
        e.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(
            walk_extensions(IpProtocol::IPV6_OPTS, &e),
            Err(ParseError::Ipv6ExtensionChain)
        );
        // AH length is in 4-byte units (+2).
        let ah = [
            6, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let ul = walk_extensions(IpProtocol::AH, &ah).unwrap();
        assert_eq!((ul.protocol, ul.offset), (IpProtocol::TCP, 24));
        // ESP is opaque: upper layer.
        let ul = walk_extensions(IpProtocol::ESP, &[1, 2, 3]).unwrap();
        assert_eq!((ul.protocol, ul.offset), (IpProtocol::ESP, 0));
    }

    #[test]
    fn packet_upper_layer_payload() {
        let mut b = header(12, 60);
        b.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0, 9, 9, 9, 9]);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer_payload().unwrap(), &[9, 9, 9, 9]);
    }
}
