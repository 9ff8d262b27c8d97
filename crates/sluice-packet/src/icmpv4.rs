//! ICMP for IPv4 (RFC 792).

use core::fmt;

use crate::checksum;
use crate::error::ParseError;
use crate::field;

/// Length of the ICMP header (type, code, checksum, rest of header).
pub const HEADER_LEN: usize = 8;

/// An ICMPv4 message type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Icmpv4Type(pub u8);

impl Icmpv4Type {
    /// Echo reply (0).
    pub const ECHO_REPLY: Icmpv4Type = Icmpv4Type(0);
    /// Destination unreachable (3).
    pub const DEST_UNREACHABLE: Icmpv4Type = Icmpv4Type(3);
    /// Source quench (4, deprecated).
    pub const SOURCE_QUENCH: Icmpv4Type = Icmpv4Type(4);
    /// Redirect (5).
    pub const REDIRECT: Icmpv4Type = Icmpv4Type(5);
    /// Echo request (8).
    pub const ECHO_REQUEST: Icmpv4Type = Icmpv4Type(8);
    /// Time exceeded (11).
    pub const TIME_EXCEEDED: Icmpv4Type = Icmpv4Type(11);
    /// Parameter problem (12).
    pub const PARAM_PROBLEM: Icmpv4Type = Icmpv4Type(12);
    /// Timestamp request (13).
    pub const TIMESTAMP: Icmpv4Type = Icmpv4Type(13);
    /// Timestamp reply (14).
    pub const TIMESTAMP_REPLY: Icmpv4Type = Icmpv4Type(14);

    /// True for echo request and echo reply.
    pub const fn is_echo(self) -> bool {
        matches!(self.0, 0 | 8)
    }

    /// True for error messages that quote the invoking datagram
    /// (destination unreachable, source quench, redirect, time exceeded,
    /// parameter problem).
    pub const fn is_error(self) -> bool {
        matches!(self.0, 3 | 4 | 5 | 11 | 12)
    }
}

impl fmt::Debug for Icmpv4Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Icmpv4Type({})", self.0)
    }
}

/// Code of destination-unreachable "fragmentation needed and DF set", which
/// carries the next-hop MTU.
pub const CODE_FRAG_NEEDED: u8 = 4;

/// A view of an ICMPv4 message.
///
/// The buffer must be exactly the message (the IP payload): the checksum
/// covers all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Icmpv4Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps `buffer`, checking it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Icmpv4Truncated);
        }
        Ok(Icmpv4Packet { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv4Type {
        Icmpv4Type(field::u8_at(self.b(), 0))
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        field::u8_at(self.b(), 1)
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// The four type-specific "rest of header" bytes.
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

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191), if this
    /// is one.
    pub fn next_hop_mtu(&self) -> Option<u16> {
        (self.msg_type() == Icmpv4Type::DEST_UNREACHABLE && self.code() == CODE_FRAG_NEEDED)
            .then(|| field::u16_at(self.b(), 6))
    }

    /// Bytes after the 8-byte header.
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        field::slice(b, HEADER_LEN, b.len())
    }

    /// For error messages, the quoted invoking datagram (IP header + at
    /// least 8 bytes of its payload, usually truncated: wrap it with
    /// [`crate::ipv4::Ipv4Packet::new_embedded`]).  `None` for other types.
    pub fn invoking_packet(&self) -> Option<&[u8]> {
        self.msg_type().is_error().then(|| self.payload())
    }

    /// True if the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify_with(0, self.b())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the message type.
    pub fn set_msg_type(&mut self, t: Icmpv4Type) {
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

    /// Sets the four rest-of-header bytes.
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

    /// Computes and stores the checksum over the whole message.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.b());
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::Ipv4Packet;
    use std::net::Ipv4Addr;

    // Echo request id 0x1234 seq 1, payload "abcd"; checksum 0x2104
    // computed independently (Python).
    const ECHO: [u8; 12] = [8, 0, 0, 0, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd'];

    #[test]
    fn echo() {
        let mut b = ECHO;
        let mut p = Icmpv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv4Type::ECHO_REQUEST);
        assert!(p.msg_type().is_echo());
        assert_eq!(p.code(), 0);
        assert_eq!(p.echo_ident(), 0x1234);
        assert_eq!(p.echo_seq(), 1);
        assert_eq!(p.payload(), b"abcd");
        assert_eq!(p.invoking_packet(), None);
        assert_eq!(p.next_hop_mtu(), None);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0x2104);
        p.set_msg_type(Icmpv4Type::ECHO_REPLY);
        p.set_echo_ident(7);
        p.set_echo_seq(9);
        p.payload_mut()[0] = b'z';
        assert_eq!(p.rest_of_header(), [0, 7, 0, 9]);
        p.set_rest_of_header([1, 2, 3, 4]);
        p.set_code(3);
        assert_eq!(
            (p.echo_ident(), p.echo_seq(), p.code()),
            (0x0102, 0x0304, 3)
        );
        assert_eq!(
            Icmpv4Packet::new_checked(&ECHO[..7]),
            Err(ParseError::Icmpv4Truncated)
        );
    }

    #[test]
    fn frag_needed_with_embedded_datagram() {
        let mut m = vec![3, 4, 0, 0, 0, 0, 0x05, 0xdc];
        // Quoted IPv4 header (total_len 1500, truncated) + 8 bytes of UDP.
        let mut ip = [
            0x45, 0, 0x05, 0xdc, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        Ipv4Packet::new_embedded(&mut ip[..])
            .unwrap()
            .fill_checksum();
        m.extend_from_slice(&ip);
        m.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35, 0x05, 0xc8, 0, 0]);
        let mut p = Icmpv4Packet::new_checked(&mut m[..]).unwrap();
        p.fill_checksum();
        assert!(p.msg_type().is_error());
        assert_eq!(p.next_hop_mtu(), Some(1500));
        let inner = p.invoking_packet().unwrap();
        assert_eq!(
            Ipv4Packet::new_checked(inner),
            Err(ParseError::Ipv4Truncated)
        );
        let ip = Ipv4Packet::new_embedded(inner).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ip.payload(), &[0x04, 0xd2, 0x00, 0x35, 0x05, 0xc8, 0, 0]);
    }
}
