//! ARP for Ethernet/IPv4 (RFC 826).

use std::net::Ipv4Addr;

use crate::error::ParseError;
use crate::ethernet::{EtherType, MacAddr};
use crate::field;

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ArpOp(pub u16);

impl ArpOp {
    /// Request (1).
    pub const REQUEST: ArpOp = ArpOp(1);
    /// Reply (2).
    pub const REPLY: ArpOp = ArpOp(2);
}

/// A view of an Ethernet/IPv4 ARP packet.
///
/// `new_checked` rejects other hardware/protocol types, so the address
/// accessors always have the 6/4-byte layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps `buffer`, checking the length (28 bytes) and that hardware type
    /// is Ethernet (1), protocol type IPv4 (0x0800), lengths 6 and 4.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(ParseError::ArpTruncated);
        }
        if field::u16_at(b, 0) != 1
            || field::u16_at(b, 2) != EtherType::IPV4.0
            || field::u8_at(b, 4) != 6
            || field::u8_at(b, 5) != 4
        {
            return Err(ParseError::ArpUnsupported);
        }
        Ok(ArpPacket { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 0)
    }

    /// Protocol type (0x0800 = IPv4).
    pub fn protocol_type(&self) -> EtherType {
        EtherType(field::u16_at(self.buffer.as_ref(), 2))
    }

    /// Hardware address length (6).
    pub fn hardware_len(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), 4)
    }

    /// Protocol address length (4).
    pub fn protocol_len(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), 5)
    }

    /// Operation.
    pub fn operation(&self) -> ArpOp {
        ArpOp(field::u16_at(self.buffer.as_ref(), 6))
    }

    /// Sender hardware address.
    pub fn sender_hw_addr(&self) -> MacAddr {
        MacAddr(field::array_at(self.buffer.as_ref(), 8))
    }

    /// Sender protocol address.
    pub fn sender_proto_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array_at::<4>(self.buffer.as_ref(), 14))
    }

    /// Target hardware address.
    pub fn target_hw_addr(&self) -> MacAddr {
        MacAddr(field::array_at(self.buffer.as_ref(), 18))
    }

    /// Target protocol address.
    pub fn target_proto_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array_at::<4>(self.buffer.as_ref(), 24))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes the fixed Ethernet/IPv4 header fields (htype 1, ptype 0x0800,
    /// hlen 6, plen 4) into a buffer of at least 28 bytes and wraps it.
    pub fn new_ethernet_ipv4(mut buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_mut();
        if b.len() < PACKET_LEN {
            return Err(ParseError::ArpTruncated);
        }
        field::set_u16(b, 0, 1);
        field::set_u16(b, 2, EtherType::IPV4.0);
        field::set_u8(b, 4, 6);
        field::set_u8(b, 5, 4);
        Ok(ArpPacket { buffer })
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, op: ArpOp) {
        field::set_u16(self.buffer.as_mut(), 6, op.0);
    }

    /// Sets the sender hardware address.
    pub fn set_sender_hw_addr(&mut self, a: MacAddr) {
        field::set_bytes(self.buffer.as_mut(), 8, &a.0);
    }

    /// Sets the sender protocol address.
    pub fn set_sender_proto_addr(&mut self, a: Ipv4Addr) {
        field::set_bytes(self.buffer.as_mut(), 14, &a.octets());
    }

    /// Sets the target hardware address.
    pub fn set_target_hw_addr(&mut self, a: MacAddr) {
        field::set_bytes(self.buffer.as_mut(), 18, &a.0);
    }

    /// Sets the target protocol address.
    pub fn set_target_proto_addr(&mut self, a: Ipv4Addr) {
        field::set_bytes(self.buffer.as_mut(), 24, &a.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ARP request "who-has 192.168.1.1 tell 192.168.1.100" (Ethernet payload).
    const REQ: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // htype ptype hlen plen op
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 192, 168, 1, 100, // sender
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 192, 168, 1, 1, // target
    ];

    #[test]
    fn parse_request() {
        let a = ArpPacket::new_checked(&REQ[..]).unwrap();
        assert_eq!(a.hardware_type(), 1);
        assert_eq!(a.protocol_type(), EtherType::IPV4);
        assert_eq!((a.hardware_len(), a.protocol_len()), (6, 4));
        assert_eq!(a.operation(), ArpOp::REQUEST);
        assert_eq!(a.sender_hw_addr().to_string(), "02:00:00:00:00:01");
        assert_eq!(a.sender_proto_addr(), Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(a.target_hw_addr(), MacAddr::ZERO);
        assert_eq!(a.target_proto_addr(), Ipv4Addr::new(192, 168, 1, 1));
    }

    #[test]
    fn errors() {
        assert_eq!(
            ArpPacket::new_checked(&REQ[..27]),
            Err(ParseError::ArpTruncated)
        );
        let mut b = REQ;
        b[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&b[..]),
            Err(ParseError::ArpUnsupported)
        );
    }

    #[test]
    fn build_reply() {
        let mut b = [0u8; 28];
        let mut a = ArpPacket::new_ethernet_ipv4(&mut b[..]).unwrap();
        a.set_operation(ArpOp::REPLY);
        a.set_sender_hw_addr(MacAddr::new(2, 0, 0, 0, 0, 2));
        a.set_sender_proto_addr(Ipv4Addr::new(192, 168, 1, 1));
        a.set_target_hw_addr(MacAddr::new(2, 0, 0, 0, 0, 1));
        a.set_target_proto_addr(Ipv4Addr::new(192, 168, 1, 100));
        let a = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(a.operation(), ArpOp::REPLY);
        assert_eq!(a.target_proto_addr(), Ipv4Addr::new(192, 168, 1, 100));
        assert_eq!(&b[..8], &[0, 1, 8, 0, 6, 4, 0, 2]);
    }
}
