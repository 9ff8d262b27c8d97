//! IPv4 packets (RFC 791).

use std::net::Ipv4Addr;

use crate::checksum;
use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A view of an IPv4 packet.
///
/// `new_checked` guarantees: version 4, IHL >= 5, the header fits in the
/// buffer, and `header_len <= total_len <= buffer length`.  The payload is
/// bounded by `total_len`, so trailing link-layer padding is excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps `buffer` (starting at the IPv4 header) after validating it.
    ///
    /// Errors: [`ParseError::Ipv4Truncated`] if the buffer is shorter than
    /// 20 bytes, the header or `total_len`; [`ParseError::Ipv4BadVersion`];
    /// [`ParseError::Ipv4BadHeaderLength`] if IHL < 5;
    /// [`ParseError::Ipv4BadTotalLength`] if `total_len < IHL * 4`.
    /// The checksum is not verified (see [`Ipv4Packet::verify_checksum`]).
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        check(b)?;
        Ok(Ipv4Packet { buffer })
    }

    /// Like [`Ipv4Packet::new_checked`] but accepts a `total_len` larger
    /// than the buffer, for IP headers quoted (truncated) inside ICMP error
    /// messages.  The payload is then clamped to the buffer.
    pub fn new_embedded(buffer: T) -> Result<Self, ParseError> {
        match check(buffer.as_ref()) {
            Ok(()) => Ok(Ipv4Packet { buffer }),
            Err(ParseError::Ipv4Truncated) if buffer.as_ref().len() >= HEADER_LEN => {
                let b = buffer.as_ref();
                if usize::from(field::u8_at(b, 0) & 0x0f) * 4 <= b.len() {
                    Ok(Ipv4Packet { buffer })
                } else {
                    Err(ParseError::Ipv4Truncated)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version field (4).
    pub fn version(&self) -> u8 {
        field::u8_at(self.b(), 0) >> 4
    }

    /// Internet header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        field::u8_at(self.b(), 0) & 0x0f
    }

    /// Header length in bytes (`ihl * 4`).
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        field::u8_at(self.b(), 1) >> 2
    }

    /// Explicit congestion notification (2 bits).
    pub fn ecn(&self) -> u8 {
        field::u8_at(self.b(), 1) & 0x03
    }

    /// Total length (header + payload) in bytes.
    pub fn total_len(&self) -> u16 {
        field::u16_at(self.b(), 2)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        field::u16_at(self.b(), 4)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        field::u8_at(self.b(), 6) & 0x40 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        field::u8_at(self.b(), 6) & 0x20 != 0
    }

    /// Fragment offset in bytes (the field is in 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (field::u16_at(self.b(), 6) & 0x1fff) << 3
    }

    /// True if this packet is a fragment (MF set or non-zero offset).
    pub fn is_fragment(&self) -> bool {
        field::u16_at(self.b(), 6) & 0x3fff != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        field::u8_at(self.b(), 8)
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(field::u8_at(self.b(), 9))
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 10)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array_at::<4>(self.b(), 12))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(field::array_at::<4>(self.b(), 16))
    }

    /// The whole header including options.
    pub fn header(&self) -> &[u8] {
        field::slice(self.b(), 0, self.header_len())
    }

    /// Option bytes (between byte 20 and the header length).
    pub fn options(&self) -> &[u8] {
        field::slice(self.b(), HEADER_LEN, self.header_len())
    }

    /// Payload, from the header length to the total length.
    pub fn payload(&self) -> &[u8] {
        field::slice(self.b(), self.header_len(), usize::from(self.total_len()))
    }

    /// True if the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify_with(0, self.header())
    }

    /// Partial sum of the pseudo-header for the payload (protocol and
    /// payload length taken from this header).
    pub fn pseudo_header_sum(&self) -> u64 {
        checksum::pseudo_header_v4(
            &self.src_addr(),
            &self.dst_addr(),
            self.protocol().0,
            self.payload().len() as u16,
        )
    }
}

fn check(b: &[u8]) -> Result<(), ParseError> {
    let v_ihl = match b.first() {
        Some(v) if b.len() >= HEADER_LEN => *v,
        _ => return Err(ParseError::Ipv4Truncated),
    };
    if v_ihl >> 4 != 4 {
        return Err(ParseError::Ipv4BadVersion);
    }
    let hlen = usize::from(v_ihl & 0x0f) * 4;
    if hlen < HEADER_LEN {
        return Err(ParseError::Ipv4BadHeaderLength);
    }
    if hlen > b.len() {
        return Err(ParseError::Ipv4Truncated);
    }
    let total = usize::from(field::u16_at(b, 2));
    if total < hlen {
        return Err(ParseError::Ipv4BadTotalLength);
    }
    if total > b.len() {
        return Err(ParseError::Ipv4Truncated);
    }
    Ok(())
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets version (high nibble of byte 0).
    pub fn set_version(&mut self, v: u8) {
        let b0 = field::u8_at(self.b(), 0);
        field::set_u8(self.bm(), 0, (v << 4) | (b0 & 0x0f));
    }

    /// Sets the header length in bytes (must be a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: usize) {
        let b0 = field::u8_at(self.b(), 0);
        field::set_u8(self.bm(), 0, (b0 & 0xf0) | ((len / 4) as u8 & 0x0f));
    }

    /// Sets the DSCP (6 bits).
    pub fn set_dscp(&mut self, dscp: u8) {
        let b1 = field::u8_at(self.b(), 1);
        field::set_u8(self.bm(), 1, (dscp << 2) | (b1 & 0x03));
    }

    /// Sets the ECN bits.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b1 = field::u8_at(self.b(), 1);
        field::set_u8(self.bm(), 1, (b1 & 0xfc) | (ecn & 0x03));
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        field::set_u16(self.bm(), 2, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, id: u16) {
        field::set_u16(self.bm(), 4, id);
    }

    fn set_flag(&mut self, mask: u8, on: bool) {
        let v = field::u8_at(self.b(), 6);
        field::set_u8(self.bm(), 6, if on { v | mask } else { v & !mask });
    }

    /// Sets the don't-fragment flag.
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(0x40, on);
    }

    /// Sets the more-fragments flag.
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(0x20, on);
    }

    /// Sets the fragment offset in bytes (rounded down to 8-byte units).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = field::u16_at(self.b(), 6);
        field::set_u16(self.bm(), 6, (v & 0xe000) | (bytes >> 3));
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        field::set_u8(self.bm(), 8, ttl);
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        field::set_u8(self.bm(), 9, p.0);
    }

    /// Stores a checksum value.
    pub fn set_checksum(&mut self, c: u16) {
        field::set_u16(self.bm(), 10, c);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        field::set_bytes(self.bm(), 12, &a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        field::set_bytes(self.bm(), 16, &a.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// Decrements the TTL (saturating at 0), updating the checksum
    /// incrementally (RFC 1624).  Returns the new TTL.
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.b();
        let old_word = field::u16_at(b, 8);
        let ttl = field::u8_at(b, 8).saturating_sub(1);
        let new_word = (u16::from(ttl) << 8) | (old_word & 0x00ff);
        let c = checksum::update_u16(self.checksum(), old_word, new_word);
        self.set_ttl(ttl);
        self.set_checksum(c);
        ttl
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        field::slice_mut(self.bm(), HEADER_LEN, end)
    }

    /// Mutable payload (bounded by the total length).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        field::slice_mut(self.bm(), start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4/UDP 10.0.0.1 -> 10.0.0.2, id 0x1c46, DF, ttl 64, 4-byte payload,
    // followed by 2 bytes of link padding.  Header checksum 0x0a85
    // (computed independently in Python).
    const PKT: [u8; 34] = [
        0x45, 0x00, 0x00, 0x20, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x0a, 0x85, 10, 0, 0, 1, 10, 0,
        0, 2, // header
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, // udp
        0xaa, 0xbb, // padding
    ];

    #[test]
    fn getters() {
        let p = Ipv4Packet::new_checked(&PKT[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.ihl(), 5);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 32);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 0, 2));
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 12);
        assert_eq!(&p.payload()[8..], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(p.checksum(), 0x0a85);
        assert!(p.verify_checksum());
    }

    #[test]
    fn validation() {
        assert_eq!(
            Ipv4Packet::new_checked(&PKT[..19]),
            Err(ParseError::Ipv4Truncated)
        );
        let mut b = PKT;
        b[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4BadVersion)
        );
        b[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4BadHeaderLength)
        );
        b[0] = 0x4f; // 60-byte header > 34-byte buffer
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4Truncated)
        );
        let mut b = PKT;
        b[3] = 19;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4BadTotalLength)
        );
        b[3] = 35;
        assert_eq!(
            Ipv4Packet::new_checked(&b[..]),
            Err(ParseError::Ipv4Truncated)
        );
        b[3] = 34;
        assert!(Ipv4Packet::new_checked(&b[..]).is_ok());
        b[3] = 20;
        assert!(Ipv4Packet::new_checked(&b[..])
            .unwrap()
            .payload()
            .is_empty());
    }

    #[test]
    fn options_and_fragments() {
        let mut b = [0u8; 28];
        b[..20].copy_from_slice(&PKT[..20]);
        b[0] = 0x46;
        b[3] = 28;
        b[6] = 0x20; // MF
        b[7] = 0x02; // offset 16 bytes
        b[20..24].copy_from_slice(&[0x01, 0x01, 0x01, 0x00]); // NOP NOP NOP EOL
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload().len(), 4);
        assert!(p.more_frags());
        assert!(!p.dont_frag());
        assert_eq!(p.frag_offset(), 16);
        assert!(p.is_fragment());
        p.fill_checksum();
        assert!(p.verify_checksum());
        p.set_frag_offset(0);
        p.set_more_frags(false);
        assert!(!p.is_fragment());
        assert!(!p.verify_checksum());
    }

    #[test]
    fn setters_and_fill() {
        let mut b = PKT;
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_dscp(46);
        p.set_ecn(1);
        p.set_ttl(1);
        p.set_ident(7);
        p.set_dont_frag(false);
        p.set_src_addr(Ipv4Addr::new(192, 168, 0, 1));
        p.set_dst_addr(Ipv4Addr::new(8, 8, 8, 8));
        p.set_protocol(IpProtocol::TCP);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!((p.dscp(), p.ecn()), (46, 1));
        assert_eq!(p.ttl(), 1);
        assert_eq!(p.protocol(), IpProtocol::TCP);
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
        assert_eq!(p.decrement_ttl(), 0);
        assert!(p.verify_checksum());
        p.payload_mut()[0] = 0xff;
        // Inconsistent lengths written through setters never panic.
        p.set_header_len(60);
        p.set_total_len(0xffff);
        let _ = (p.options(), p.payload(), p.header(), p.verify_checksum());
        p.options_mut();
        p.payload_mut();
        p.set_version(6);
        assert_eq!(p.version(), 6);
    }

    #[test]
    fn decrement_ttl_matches_full_recompute() {
        for ttl in 1..=255u8 {
            let mut b = PKT;
            b[8] = ttl;
            let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
            p.fill_checksum();
            p.decrement_ttl();
            let inc = p.checksum();
            p.fill_checksum();
            assert_eq!(inc, p.checksum(), "ttl {ttl}");
        }
    }
}
