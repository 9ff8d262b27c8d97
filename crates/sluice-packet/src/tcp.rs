//! TCP segments (RFC 9293), flags and options.

use core::fmt;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, BitXor, Not, Sub};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::error::ParseError;
use crate::field;
use crate::ip::IpProtocol;

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;

/// The eight TCP control flags (byte 13 of the header), bitflags-style.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct TcpFlags(u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    const NAMES: [(TcpFlags, &'static str); 8] = [
        (Self::FIN, "FIN"),
        (Self::SYN, "SYN"),
        (Self::RST, "RST"),
        (Self::PSH, "PSH"),
        (Self::ACK, "ACK"),
        (Self::URG, "URG"),
        (Self::ECE, "ECE"),
        (Self::CWR, "CWR"),
    ];

    /// No flags.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// All eight flags.
    pub const fn all() -> TcpFlags {
        TcpFlags(0xff)
    }

    /// Flags from the raw header byte (every bit is a defined flag).
    pub const fn from_bits(bits: u8) -> TcpFlags {
        TcpFlags(bits)
    }

    /// The raw header byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True if every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any flag in `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the flags in `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags in `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Sets or clears the flags in `other`.
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl BitAndAssign for TcpFlags {
    fn bitand_assign(&mut self, rhs: TcpFlags) {
        self.0 &= rhs.0;
    }
}

impl BitXor for TcpFlags {
    type Output = TcpFlags;
    fn bitxor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 ^ rhs.0)
    }
}

impl Sub for TcpFlags {
    type Output = TcpFlags;
    fn sub(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !rhs.0)
    }
}

impl Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0)
    }
}

impl fmt::Display for TcpFlags {
    /// `SYN|ACK` style, lowest bit first; `-` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// One TCP option, as yielded by [`TcpOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0); iteration stops after it.
    EndOfList,
    /// No-operation padding (kind 1).
    Nop,
    /// Maximum segment size (kind 2).
    Mss(u16),
    /// Window scale shift (kind 3).
    WindowScale(u8),
    /// SACK permitted (kind 4).
    SackPermitted,
    /// SACK blocks (kind 5), raw: pairs of big-endian u32 edges.
    Sack(&'a [u8]),
    /// Timestamps (kind 8).
    Timestamps {
        /// Timestamp value.
        tsval: u32,
        /// Timestamp echo reply.
        tsecr: u32,
    },
    /// Any other option, or a known kind with an unexpected length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
}

/// Iterator over the options of a TCP header.
///
/// Yields `Err(ParseError::TcpBadOption)` once and stops if an option's
/// length byte is missing, below 2, or runs past the header.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterates over raw option bytes.
    pub fn new(data: &'a [u8]) -> Self {
        TcpOptions { data }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            0 => {
                self.data = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.data = rest;
                return Some(Ok(TcpOption::Nop));
            }
            _ => {}
        }
        let len = match rest.first() {
            Some(&l) if l >= 2 && usize::from(l) <= self.data.len() => usize::from(l),
            _ => {
                self.data = &[];
                return Some(Err(ParseError::TcpBadOption));
            }
        };
        let body = field::slice(self.data, 2, len);
        self.data = field::slice(self.data, len, self.data.len());
        Some(Ok(match (kind, body.len()) {
            (2, 2) => TcpOption::Mss(field::u16_at(body, 0)),
            (3, 1) => TcpOption::WindowScale(field::u8_at(body, 0)),
            (4, 0) => TcpOption::SackPermitted,
            (5, n) if n % 8 == 0 => TcpOption::Sack(body),
            (8, 8) => TcpOption::Timestamps {
                tsval: field::u32_at(body, 0),
                tsecr: field::u32_at(body, 4),
            },
            _ => TcpOption::Unknown { kind, data: body },
        }))
    }
}

/// A view of a TCP segment (header + payload).
///
/// The buffer must be exactly the segment (the IP payload), because the
/// checksum and the payload extend to its end.  `new_checked` guarantees a
/// data offset of at least 5 words that fits in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    /// Wraps `buffer` after validating it: [`ParseError::TcpTruncated`] if
    /// shorter than 20 bytes, [`ParseError::TcpBadDataOffset`] if the data
    /// offset is below 5 or beyond the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(ParseError::TcpTruncated);
        }
        let hlen = usize::from(field::u8_at(b, 12) >> 4) * 4;
        if hlen < HEADER_LEN || hlen > b.len() {
            return Err(ParseError::TcpBadDataOffset);
        }
        Ok(TcpSegment { buffer })
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

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        field::u32_at(self.b(), 4)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        field::u32_at(self.b(), 8)
    }

    /// Data offset in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        field::u8_at(self.b(), 12) >> 4
    }

    /// Header length in bytes (`data_offset * 4`).
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }

    /// Control flags.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(field::u8_at(self.b(), 13))
    }

    /// Receive window.
    pub fn window(&self) -> u16 {
        field::u16_at(self.b(), 14)
    }

    /// Checksum as stored.
    pub fn checksum(&self) -> u16 {
        field::u16_at(self.b(), 16)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        field::u16_at(self.b(), 18)
    }

    /// Option bytes.
    pub fn options(&self) -> &[u8] {
        field::slice(self.b(), HEADER_LEN, self.header_len())
    }

    /// Iterator over the parsed options.
    pub fn option_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The MSS option value, if present and well-formed.
    pub fn mss(&self) -> Option<u16> {
        self.option_iter().find_map(|o| match o {
            Ok(TcpOption::Mss(m)) => Some(m),
            _ => None,
        })
    }

    /// Payload (after the options, to the end of the buffer).
    pub fn payload(&self) -> &[u8] {
        let b = self.b();
        field::slice(b, self.header_len(), b.len())
    }

    /// Verifies the checksum given a pseudo-header partial sum (see
    /// [`checksum::pseudo_header`]).
    pub fn verify_checksum_with(&self, pseudo: u64) -> bool {
        checksum::verify_with(pseudo, self.b())
    }

    /// Verifies the checksum with an IPv4 pseudo-header.
    pub fn verify_checksum_v4(&self, src: &Ipv4Addr, dst: &Ipv4Addr) -> bool {
        let len = self.b().len() as u16;
        self.verify_checksum_with(checksum::pseudo_header_v4(src, dst, IpProtocol::TCP.0, len))
    }

    /// Verifies the checksum with an IPv6 pseudo-header.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let len = self.b().len() as u32;
        self.verify_checksum_with(checksum::pseudo_header_v6(src, dst, IpProtocol::TCP.0, len))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpSegment<T> {
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

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        field::set_u32(self.bm(), 4, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack(&mut self, v: u32) {
        field::set_u32(self.bm(), 8, v);
    }

    /// Sets the header length in bytes (multiple of 4, 20..=60); keeps the
    /// reserved bits.
    pub fn set_header_len(&mut self, len: usize) {
        let v = field::u8_at(self.b(), 12);
        field::set_u8(self.bm(), 12, (((len / 4) as u8) << 4) | (v & 0x0f));
    }

    /// Sets the control flags.
    pub fn set_flags(&mut self, f: TcpFlags) {
        field::set_u8(self.bm(), 13, f.0);
    }

    /// Sets the window.
    pub fn set_window(&mut self, w: u16) {
        field::set_u16(self.bm(), 14, w);
    }

    /// Stores a checksum value.
    pub fn set_checksum(&mut self, c: u16) {
        field::set_u16(self.bm(), 16, c);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent(&mut self, u: u16) {
        field::set_u16(self.bm(), 18, u);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        field::slice_mut(self.bm(), HEADER_LEN, end)
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let b = self.bm();
        let len = b.len();
        field::slice_mut(b, start, len)
    }

    /// Computes and stores the checksum given a pseudo-header partial sum.
    pub fn fill_checksum_with(&mut self, pseudo: u64) {
        self.set_checksum(0);
        let c = checksum::checksum_with(pseudo, self.b());
        self.set_checksum(c);
    }

    /// Computes and stores the checksum with an IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: &Ipv4Addr, dst: &Ipv4Addr) {
        let len = self.b().len() as u16;
        self.fill_checksum_with(checksum::pseudo_header_v4(src, dst, IpProtocol::TCP.0, len));
    }

    /// Computes and stores the checksum with an IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let len = self.b().len() as u32;
        self.fill_checksum_with(checksum::pseudo_header_v6(src, dst, IpProtocol::TCP.0, len));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SYN 10.0.0.1:40000 -> 10.0.0.2:80, seq 1, options MSS 1460, SACK-perm,
    // TS, NOP, WS 7 (40-byte header, no payload).
    const SYN: [u8; 40] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa,
        0xf0, 0x00, 0x00, 0x00, 0x00, // fixed header, checksum zero
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, // TS 7 / 0
        0x01, // NOP
        0x03, 0x03, 0x07, // WS 7
    ];

    #[test]
    fn getters_and_options() {
        let s = TcpSegment::new_checked(&SYN[..]).unwrap();
        assert_eq!(s.src_port(), 40000);
        assert_eq!(s.dst_port(), 80);
        assert_eq!(s.seq(), 1);
        assert_eq!(s.ack(), 0);
        assert_eq!(s.data_offset(), 10);
        assert_eq!(s.header_len(), 40);
        assert_eq!(s.flags(), TcpFlags::SYN);
        assert_eq!(s.window(), 64240);
        assert_eq!(s.urgent(), 0);
        assert_eq!(s.options().len(), 20);
        assert!(s.payload().is_empty());
        assert_eq!(s.mss(), Some(1460));
        let opts: Vec<_> = s.option_iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            opts,
            vec![
                TcpOption::Mss(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamps { tsval: 7, tsecr: 0 },
                TcpOption::Nop,
                TcpOption::WindowScale(7),
            ]
        );
    }

    #[test]
    fn checksum_v4_and_v6() {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let mut b = SYN;
        let mut s = TcpSegment::new_checked(&mut b[..]).unwrap();
        assert!(!s.verify_checksum_v4(&src, &dst));
        s.fill_checksum_v4(&src, &dst);
        assert!(s.verify_checksum_v4(&src, &dst));
        assert!(!s.verify_checksum_v4(&dst, &Ipv4Addr::new(10, 0, 0, 3)));
        // Independently computed (Python, RFC 1071 over pseudo-header +
        // segment): 0x9c74.
        assert_eq!(s.checksum(), 0x9c74);

        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "2001:db8::2".parse().unwrap();
        s.fill_checksum_v6(&s6, &d6);
        assert!(s.verify_checksum_v6(&s6, &d6));
        assert!(!s.verify_checksum_v4(&src, &dst));
    }

    #[test]
    fn validation() {
        assert_eq!(
            TcpSegment::new_checked(&SYN[..19]),
            Err(ParseError::TcpTruncated)
        );
        assert_eq!(
            TcpSegment::new_checked(&SYN[..39]),
            Err(ParseError::TcpBadDataOffset)
        );
        let mut b = SYN;
        b[12] = 0x40;
        assert_eq!(
            TcpSegment::new_checked(&b[..]),
            Err(ParseError::TcpBadDataOffset)
        );
        b[12] = 0x50;
        let s = TcpSegment::new_checked(&b[..]).unwrap();
        assert_eq!(s.payload().len(), 20);
        assert!(s.options().is_empty());
        assert_eq!(s.mss(), None);
    }

    #[test]
    fn setters() {
        let mut b = [0u8; 24];
        b[12] = 0x50;
        let mut s = TcpSegment::new_checked(&mut b[..]).unwrap();
        s.set_src_port(1);
        s.set_dst_port(2);
        s.set_seq(0xdeadbeef);
        s.set_ack(0x01020304);
        s.set_flags(TcpFlags::SYN | TcpFlags::ACK);
        s.set_window(512);
        s.set_urgent(9);
        s.payload_mut().copy_from_slice(b"abcd");
        s.set_header_len(24);
        s.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        assert_eq!(s.payload(), b"");
        assert_eq!(s.options(), &[1, 1, 1, 0]);
        s.set_header_len(60); // beyond the buffer: accessors clamp
        let _ = (s.options(), s.payload(), s.mss());
        s.set_header_len(20);
        assert_eq!(s.flags().to_string(), "SYN|ACK");
        assert_eq!(s.seq(), 0xdeadbeef);
        assert_eq!(s.ack(), 0x01020304);
        assert_eq!(
            (s.src_port(), s.dst_port(), s.window(), s.urgent()),
            (1, 2, 512, 9)
        );
    }

    #[test]
    fn flags_ops() {
        let mut f = TcpFlags::empty();
        assert_eq!(f.to_string(), "-");
        f.insert(TcpFlags::SYN);
        f |= TcpFlags::ACK;
        assert!(f.contains(TcpFlags::SYN | TcpFlags::ACK));
        assert!(f.intersects(TcpFlags::ACK | TcpFlags::FIN));
        assert!(!f.contains(TcpFlags::FIN));
        f.set(TcpFlags::SYN, false);
        assert_eq!(f, TcpFlags::ACK);
        assert_eq!(
            TcpFlags::all().to_string(),
            "FIN|SYN|RST|PSH|ACK|URG|ECE|CWR"
        );
        assert_eq!((TcpFlags::all() - TcpFlags::ACK).bits(), 0xef);
        assert_eq!((!TcpFlags::FIN).bits(), 0xfe);
        assert_eq!((TcpFlags::FIN ^ TcpFlags::all()).bits(), 0xfe);
        assert_eq!(format!("{:?}", TcpFlags::RST), "TcpFlags(RST)");
        let mut g = TcpFlags::all();
        g &= TcpFlags::PSH;
        assert_eq!(g, TcpFlags::from_bits(0x08));
    }

    #[test]
    fn malformed_options() {
        let bad = [2u8, 1, 0];
        let v: Vec<_> = TcpOptions::new(&bad).collect();
        assert_eq!(v, vec![Err(ParseError::TcpBadOption)]);
        let bad = [1u8, 2, 10, 0];
        let v: Vec<_> = TcpOptions::new(&bad).collect();
        assert_eq!(v, vec![Ok(TcpOption::Nop), Err(ParseError::TcpBadOption)]);
        let v: Vec<_> = TcpOptions::new(&[2]).collect();
        assert_eq!(v, vec![Err(ParseError::TcpBadOption)]);
        let v: Vec<_> = TcpOptions::new(&[0, 2, 4, 5, 0xb4]).collect();
        assert_eq!(v, vec![Ok(TcpOption::EndOfList)]);
        let v: Vec<_> = TcpOptions::new(&[2, 3, 9, 30, 3, 7]).collect();
        assert_eq!(
            v,
            vec![
                Ok(TcpOption::Unknown {
                    kind: 2,
                    data: &[9][..]
                }),
                Ok(TcpOption::Unknown {
                    kind: 30,
                    data: &[7][..]
                })
            ]
        );
        let v: Vec<_> = TcpOptions::new(&[5, 10, 0, 0, 0, 1, 0, 0, 0, 2]).collect();
        assert_eq!(v, vec![Ok(TcpOption::Sack(&[0, 0, 0, 1, 0, 0, 0, 2][..]))]);
    }
}
