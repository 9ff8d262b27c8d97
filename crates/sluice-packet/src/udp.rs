//! UDP datagrams (RFC 768; RFC 8200 §8.1 for IPv6).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
///
/// `new_checked` guarantees `8 <= length <= buffer length`; the payload and
/// the checksum cover `length` bytes, so trailing bytes are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpDatagram<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    /// Wraps `buffer` after validating it: [`ParseError::UdpTruncated`] if
    /// shorter than 8 bytes, [`ParseError::UdpBadLength`] if the length
    /// field is below 8 or beyond the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::UdpTruncated);
        }
        let len = usize::from(field::u16_at(b, 4));
        if len < HEADER_LEN || len > b.len() {
            return Err(ParseError::UdpBadLength);
        }
        Ok(UdpDatagram { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        field::u16_at(self.b(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// Length field (header + payload).
    pub fn len(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// True if the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }

    /// Checksum as stored (0 = not computed, IPv4 only).
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 6)
    }

    /// Payload (bytes 8..length).
    pub fn payload(&self) -> &[u8] {
        field::slice(self.b(), HEADER_LEN, usize::from(self.len()))
    }

    /// The datagram as covered by the length field.
    pub fn datagram(&self) -> &[u8] {
        field::slice(self.b(), 0, usize::from(self.len()))
    }

    /// Arithmetic checksum check with a pseudo-header partial sum (treats a
    /// zero checksum like any other value).
    pub fn verify_checksum_with(&self, pseudo: u64) -> bool {
        checksum::verify_with(pseudo, self.datagram())
    }

    /// Verifies over IPv4: a zero checksum means "none" and is accepted.
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        self.checksum() == 0
            || self.verify_checksum_with(checksum::pseudo_header_v4(
                src,
                dst,
                IpProtocol::UDP.0,
                self.len(),
            ))
    }

    /// Verifies over IPv6: a zero checksum is invalid.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.checksum() != 0
            && self.verify_checksum_with(checksum::pseudo_header_v6(
                src,
                dst,
                IpProtocol::UDP.0,
                u32::from(self.len()),
            ))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpDatagram<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, p: u16) {
        field::set_u16(self.bm(), 0, p);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, p: u16) {
        field::set_u16(self.bm(), 2, p);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        field::set_u16(self.bm(), 4, len);
    }

    /// Stores a checksum value.
    pub fn set_checksum(&mut self, c: u16) {
        field::set_u16(self.bm(), 6, c);
    }

    /// Mutable payload (bytes 8..length).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        field::slice_mut(self.bm(), HEADER_LEN, end)
    }

    /// Computes and stores the checksum given a pseudo-header partial sum;
    /// a computed 0 is sent as `0xFFFF` (RFC 768).
    pub fn fill_checksum_with(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum_with(pseudo, self.datagram());
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Computes and stores the checksum with an IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let p = checksum::pseudo_header_v4(src, dst, IpProtocol::UDP.0, self.len());
        self.fill_checksum_with(p);
    }

    /// Computes and stores the checksum with an IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let p = checksum::pseudo_header_v6(src, dst, IpProtocol::UDP.0, u32::from(self.len()));
        self.fill_checksum_with(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.0.1:1234 -> 10.0.0.2:53, payload de ad be ef, plus 2 trailing
    // bytes outside the length.  Checksum 0x492f computed independently.
    const DGRAM: [u8; 14] = [
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x49, 0x2f, 0xde, 0xad, 0xbe, 0xef, 0x11, 0x22,
    ];
    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn getters() {
        let u = UdpDatagram::new_checked(&DGRAM[..]).unwrap();
        assert_eq!(u.src_port(), 1234);
        assert_eq!(u.dst_port(), 53);
        assert_eq!(u.len(), 12);
        assert!(!u.is_empty());
        assert_eq!(u.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(u.checksum(), 0x492f);
        assert!(u.verify_checksum_v4(&SRC, &DST));
        assert!(!u.verify_checksum_v4(&DST, &Ipv4Addr::new(1, 1, 1, 1)));
    }

    #[test]
    fn validation() {
        assert_eq!(
            UdpDatagram::new_checked(&DGRAM[..7]),
            Err(ParseError::UdpTruncated)
        );
        assert_eq!(
            UdpDatagram::new_checked(&DGRAM[..11]),
            Err(ParseError::UdpBadLength)
        );
        let mut b = DGRAM;
        b[5] = 7;
        assert_eq!(
            UdpDatagram::new_checked(&b[..]),
            Err(ParseError::UdpBadLength)
        );
        b[5] = 8;
        assert!(UdpDatagram::new_checked(&b[..]).unwrap().is_empty());
    }

    #[test]
    fn zero_checksum_semantics() {
        let mut b = DGRAM;
        b[6] = 0;
        b[7] = 0;
        let u = UdpDatagram::new_checked(&b[..]).unwrap();
        assert!(u.verify_checksum_v4(&SRC, &DST));
        let s6 = Ipv6Addr::LOCALHOST;
        assert!(!u.verify_checksum_v6(&s6, &s6));
    }

    #[test]
    fn fill_v4_v6_and_ffff() {
        let mut b = DGRAM;
        let mut u = UdpDatagram::new_checked(&mut b[..]).unwrap();
        u.set_checksum(0);
        u.fill_checksum_v4(&SRC, &DST);
        assert_eq!(u.checksum(), 0x492f);
        let s6: Ipv6Addr = "fe80::1".parse().unwrap();
        let d6: Ipv6Addr = "ff02::1".parse().unwrap();
        u.fill_checksum_v6(&s6, &d6);
        assert!(u.verify_checksum_v6(&s6, &d6));

        // Find a payload whose checksum computes to 0 and check 0xFFFF is
        // sent instead (and verifies).
        let mut found = false;
        for x in 0..=0xffffu16 {
            let [hi, lo] = x.to_be_bytes();
            let mut u = UdpDatagram::new_checked(&mut b[..]).unwrap();
            u.payload_mut()[..2].copy_from_slice(&[hi, lo]);
            u.set_checksum(0);
            let p = checksum::pseudo_header_v4(&SRC, &DST, 17, u.len());
            if checksum::checksum_with(p, u.datagram()) == 0 {
                u.fill_checksum_v4(&SRC, &DST);
                assert_eq!(u.checksum(), 0xffff);
                assert!(u.verify_checksum_v4(&SRC, &DST));
                found = true;
                break;
            }
        }
        assert!(found);
    }

    #[test]
    fn setters_clamp() {
        let mut b = DGRAM;
        let mut u = UdpDatagram::new_checked(&mut b[..]).unwrap();
        u.set_src_port(1);
        u.set_dst_port(2);
        u.set_len(0xffff);
        let _ = (u.payload(), u.datagram(), u.verify_checksum_v4(&SRC, &DST));
        u.payload_mut();
        u.set_len(8);
        assert_eq!((u.src_port(), u.dst_port()), (1, 2));
        assert!(u.payload().is_empty());
    }
}
