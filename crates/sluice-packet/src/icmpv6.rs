//! ICMP for IPv6 (RFC 4443).

use core::fmt;
use std::net::Ipv6Addr;

use crate::checksum;
use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;

/// Length of the ICMPv6 header (type, code, checksum, 4 type-specific bytes).
pub const HEADER_LEN: usize = 8;

/// An ICMPv6 message type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Icmpv6Type(pub u8);

impl Icmpv6Type {
    /// Destination unreachable (1).
    pub const DEST_UNREACHABLE: Icmpv6Type = Icmpv6Type(1);
    /// Packet too big (2).
    pub const PACKET_TOO_BIG: Icmpv6Type = Icmpv6Type(2);
    /// Time exceeded (3).
    pub const TIME_EXCEEDED: Icmpv6Type = Icmpv6Type(3);
    /// Parameter problem (4).
    pub const PARAM_PROBLEM: Icmpv6Type = Icmpv6Type(4);
    /// Echo request (128).
    pub const ECHO_REQUEST: Icmpv6Type = Icmpv6Type(128);
    /// Echo reply (129).
    pub const ECHO_REPLY: Icmpv6Type = Icmpv6Type(129);
    /// NDP router solicitation (133).
    pub const ROUTER_SOLICIT: Icmpv6Type = Icmpv6Type(133);
    /// NDP router advertisement (134).
    pub const ROUTER_ADVERT: Icmpv6Type = Icmpv6Type(134);
    /// NDP neighbor solicitation (135).
    pub const NEIGHBOR_SOLICIT: Icmpv6Type = Icmpv6Type(135);
    /// NDP neighbor advertisement (136).
    pub const NEIGHBOR_ADVERT: Icmpv6Type = Icmpv6Type(136);
    /// NDP redirect (137).
    pub const REDIRECT: Icmpv6Type = Icmpv6Type(137);

    /// True for echo request and echo reply.
    pub const fn is_echo(self) -> bool {
        matches!(self.0, 128 | 129)
    }

    /// True for error messages (types 0..=127), which quote the invoking
    /// packet.
    pub const fn is_error(self) -> bool {
        self.0 < 128
    }
}

impl fmt::Debug for Icmpv6Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Icmpv6Type({})", self.0)
    }
}

/// A view of an ICMPv6 message.
///
/// The buffer must be exactly the message (the upper-layer bytes of the
/// IPv6 packet): the checksum covers all of it plus the pseudo-header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv6Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps `buffer`, checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Icmpv6Truncated);
        }
        Ok(Icmpv6Packet { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv6Type {
        Icmpv6Type(field::u8_at(self.b(), 0))
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        field::u8_at(self.b(), 1)
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// The four type-specific bytes after the checksum.
    pub fn rest_of_header(&self) -> [u8; 4] {
        field::array_at(self.b(), 4)
    }

    /// Echo identifier (meaningful for echo request/reply).
    pub fn echo_ident(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// Echo sequence number (meaningful for echo request/reply).
    pub fn echo_seq(&self) -> u16 {
        field::u16_at(self.b(), 6)
    }

    /// MTU of a packet-too-big message, if this is one.
    pub fn mtu(&self) -> Option<u32> {
        (self.msg_type() == Icmpv6Type::PACKET_TOO_BIG).then(|| field::u32_at(self.b(), 4))
    }

    /// Pointer of a parameter-problem message, if this is one.
    pub fn pointer(&self) -> Option<u32> {
        (self.msg_type() == Icmpv6Type::PARAM_PROBLEM).then(|| field::u32_at(self.b(), 4))
    }

    /// Bytes after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        field::slice(b, HEADER_LEN, b.len())
    }

    /// For error messages, the quoted invoking packet (usually truncated:
    /// wrap it with [`crate::ipv6::Ipv6Packet::new_embedded`]).  `None` for
    /// informational messages.
    pub fn invoking_packet(&self) -> Option<&[u8]> {
        self.msg_type().is_error().then(|| self.payload())
    }

    /// Verifies the checksum given a pseudo-header partial sum.
    pub fn verify_checksum_with(&self, pseudo: u64) -> bool {
        checksum::verify_with(pseudo, self.b())
    }

    /// Verifies the checksum with the IPv6 pseudo-header.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let len = self.b().len() as u32;
        self.verify_checksum_with(checksum::pseudo_header_v6(
            src,
            dst,
            IpProtocol::ICMPV6.0,
            len,
        ))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the message type.
    pub fn set_msg_type(&mut self, t: Icmpv6Type) {
        field::set_u8(self.bm(), 0, t.0);
    }

    /// Sets the code.
    pub fn set_code(&mut self, c: u8) {
        field::set_u8(self.bm(), 1, c);
    }

    /// Stores a checksum value.
    pub fn set_checksum(&mut self, c: u16) {
        field::set_u16(self.bm(), 2, c);
    }

    /// Sets the four type-specific bytes.
    pub fn set_rest_of_header(&mut self, r: [u8; 4]) {
        field::set_bytes(self.bm(), 4, &r);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, id: u16) {
        field::set_u16(self.bm(), 4, id);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq(&mut self, seq: u16) {
        field::set_u16(self.bm(), 6, seq);
    }

    /// Mutable bytes after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.bm();
        let len = b.len();
        field::slice_mut(b, HEADER_LEN, len)
    }

    /// Computes and stores the checksum given a pseudo-header partial sum.
    pub fn fill_checksum_with(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum_with(pseudo, self.b());
        self.set_checksum(c);
    }

    /// Computes and stores the checksum with the IPv6 pseudo-header.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = self.b().len() as u32;
        self.fill_checksum_with(checksum::pseudo_header_v6(
            src,
            dst,
            IpProtocol::ICMPV6.0,
            len,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::Ipv6Packet;

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fe80::1".parse().unwrap(), "fe80::2".parse().unwrap())
    }

    #[test]
    fn echo_request() {
        let (s, d) = addrs();
        // Echo request id 0x0102 seq 3 payload "hi"; checksum 0x1948
        // computed independently (Python, RFC 4443 pseudo-header).
        let mut b = [128, 0, 0x19, 0x48, 0x01, 0x02, 0x00, 0x03, b'h', b'i'];
        let mut p = Icmpv6Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv6Type::ECHO_REQUEST);
        assert!(p.msg_type().is_echo());
        assert!(!p.msg_type().is_error());
        assert_eq!((p.echo_ident(), p.echo_seq()), (0x0102, 3));
        assert_eq!(p.payload(), b"hi");
        assert_eq!(p.invoking_packet(), None);
        assert_eq!(p.mtu(), None);
        assert_eq!(p.pointer(), None);
        assert!(p.verify_checksum(&s, &d));
        assert!(!p.verify_checksum(&d, &d));
        p.set_checksum(0);
        p.fill_checksum(&s, &d);
        assert_eq!(p.checksum(), 0x1948);
        p.set_msg_type(Icmpv6Type::ECHO_REPLY);
        p.set_code(0);
        p.set_echo_ident(9);
        p.set_echo_seq(10);
        p.payload_mut()[1] = b'o';
        assert_eq!(p.rest_of_header(), [0, 9, 0, 10]);
        p.set_rest_of_header([0, 0, 5, 0xdc]);
        assert_eq!(p.echo_seq(), 1500);
        assert_eq!(
            Icmpv6Packet::new_checked(&b[..7]),
            Err(ParseError::Icmpv6Truncated)
        );
    }

    #[test]
    fn packet_too_big() {
        let (s, d) = addrs();
        let mut m = vec![2, 0, 0, 0, 0, 0, 0x05, 0x00];
        let mut ip = vec![0x60, 0, 0, 0, 0x05, 0x00, 17, 64];
        ip.extend_from_slice(&d.octets());
        ip.extend_from_slice(&s.octets());
        ip.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x05, 0x00, 0, 0]);
        m.extend_from_slice(&ip);
        let mut p = Icmpv6Packet::new_checked(&mut m[..]).unwrap();
        p.fill_checksum(&s, &d);
        assert!(p.verify_checksum(&s, &d));
        assert_eq!(p.mtu(), Some(1280));
        let inner = p.invoking_packet().unwrap();
        assert_eq!(
            Ipv6Packet::new_checked(inner),
            Err(ParseError::Ipv6Truncated)
        );
        let ip = Ipv6Packet::new_embedded(inner).unwrap();
        assert_eq!(ip.src_addr(), d);
        assert_eq!(ip.upper_layer().unwrap().protocol, IpProtocol::UDP);
        assert_eq!(ip.payload().len(), 8);
        m[0] = 4;
        let p = Icmpv6Packet::new_checked(&m[..]).unwrap();
        assert_eq!(p.pointer(), Some(1280));
    }
}
