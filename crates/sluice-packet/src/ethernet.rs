//! Ethernet II frames, MAC addresses and EtherTypes.

use core::fmt;
use core::str::FromStr;

use crate::error::ParseError;
use crate::field;

/// A 48-bit IEEE 802 MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// The all-zero address.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Builds an address from its six octets.
    pub const fn new(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8) -> MacAddr {
        MacAddr([a, b, c, d, e, f])
    }

    /// The six octets.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// True for `ff:ff:ff:ff:ff:ff`.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True if the group bit (I/G, LSB of the first octet) is set; includes
    /// broadcast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// True if the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True if the locally-administered bit (U/L) is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MacAddr({self})")
    }
}

/// Error returned when a string is not a MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacParseError;

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid MAC address (expected six hex octets like aa:bb:cc:dd:ee:ff)")
    }
}

impl std::error::Error for MacParseError {}

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Parses `aa:bb:cc:dd:ee:ff` or `aa-bb-cc-dd-ee-ff` (case-insensitive,
    /// one consistent separator, exactly two hex digits per octet).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(MacParseError);
        }
        let sep = b[2];
        if sep != b':' && sep != b'-' {
            return Err(MacParseError);
        }
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let p = i * 3;
            if i > 0 && b[p - 1] != sep {
                return Err(MacParseError);
            }
            let hi = hex_val(b[p]).ok_or(MacParseError)?;
            let lo = hex_val(b[p + 1]).ok_or(MacParseError)?;
            *o = (hi << 4) | lo;
        }
        Ok(MacAddr(out))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(o: [u8; 6]) -> Self {
        MacAddr(o)
    }
}

/// An EtherType value (the 16-bit protocol field of an Ethernet II frame).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4, 0x0800.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// IPv6, 0x86DD.
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// ARP, 0x0806.
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q VLAN tag (C-tag), 0x8100.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IEEE 802.1ad QinQ service tag (S-tag), 0x88A8.
    pub const QINQ: EtherType = EtherType(0x88a8);

    /// True for the TPIDs that introduce a VLAN tag (0x8100, 0x88A8).
    pub const fn is_vlan_tag(self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::IPV4 => f.write_str("ipv4"),
            Self::IPV6 => f.write_str("ipv6"),
            Self::ARP => f.write_str("arp"),
            Self::VLAN => f.write_str("vlan"),
            Self::QINQ => f.write_str("qinq"),
            EtherType(v) => write!(f, "0x{v:04x}"),
        }
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType(0x{:04x})", self.0)
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

impl From<EtherType> for u16 {
    fn from(v: EtherType) -> Self {
        v.0
    }
}

/// Ethernet II header length in bytes.
pub const HEADER_LEN: usize = 14;

/// A view of an Ethernet II frame: 6-byte destination, 6-byte source,
/// EtherType, payload (everything after the 14-byte header, including any
/// VLAN tags and trailing padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buffer`, checking that it holds at least the 14-byte header.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::EthernetTruncated);
        }
        Ok(EthernetFrame { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr(field::array_at(self.buffer.as_ref(), 0))
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> MacAddr {
        MacAddr(field::array_at(self.buffer.as_ref(), 6))
    }

    /// EtherType field.
    pub fn ethertype(&self) -> EtherType {
        EtherType(field::u16_at(self.buffer.as_ref(), 12))
    }

    /// Header length (always 14).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        field::slice(b, HEADER_LEN, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        field::set_bytes(self.buffer.as_mut(), 0, &a.0);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, a: MacAddr) {
        field::set_bytes(self.buffer.as_mut(), 6, &a.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        field::set_u16(self.buffer.as_mut(), 12, t.0);
    }

    /// Mutable bytes after the 14-byte header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        field::slice_mut(b, HEADER_LEN, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 18] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // dst
        0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, // src
        0x08, 0x06, // ARP
        1, 2, 3, 4,
    ];

    #[test]
    fn getters() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(
            f.dst_addr(),
            MacAddr::new(0x00, 0x11, 0x22, 0x33, 0x44, 0x55)
        );
        assert_eq!(f.src_addr().to_string(), "02:aa:bb:cc:dd:ee");
        assert!(f.src_addr().is_local());
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert_eq!(f.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]),
            Err(ParseError::EthernetTruncated)
        );
        let f = EthernetFrame::new_checked(&FRAME[..14]).unwrap();
        assert!(f.payload().is_empty());
    }

    #[test]
    fn setters() {
        let mut buf = FRAME;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(MacAddr::BROADCAST);
        f.set_src_addr(MacAddr::new(1, 2, 3, 4, 5, 6));
        f.set_ethertype(EtherType::IPV6);
        f.payload_mut()[0] = 9;
        assert_eq!(&buf[..6], &[0xff; 6]);
        assert_eq!(&buf[6..12], &[1, 2, 3, 4, 5, 6]);
        assert_eq!(&buf[12..15], &[0x86, 0xdd, 9]);
    }

    #[test]
    fn mac_parse_and_display() {
        let m: MacAddr = "AA:bb:0c:dd:ee:FF".parse().unwrap();
        assert_eq!(m.0, [0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0xff]);
        assert_eq!(m.to_string(), "aa:bb:0c:dd:ee:ff");
        assert_eq!("aa-bb-0c-dd-ee-ff".parse::<MacAddr>(), Ok(m));
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:fg",
            "aa:bb-cc:dd:ee:ff",
            "aa:bb:cc:dd:ee:ff:",
            "aabb.ccdd.eeff.",
            "+a:bb:cc:dd:ee:ff",
            "aa:bb:cc:dd:ee:é",
        ] {
            assert_eq!(bad.parse::<MacAddr>(), Err(MacParseError), "{bad:?}");
        }
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(m.is_unicast() || m.is_multicast());
    }

    #[test]
    fn ethertype_display() {
        assert_eq!(EtherType::IPV4.to_string(), "ipv4");
        assert_eq!(EtherType(0x88cc).to_string(), "0x88cc");
        assert!(EtherType::QINQ.is_vlan_tag());
        assert!(!EtherType::IPV4.is_vlan_tag());
    }
}
