//! GRE headers (RFC 2784, with the key and sequence number extensions of
//! RFC 2890).
//!
//! ```text
//! |C| |K|S| Reserved0       | Ver |         Protocol Type         |
//! |      Checksum (optional)      |       Reserved1 (Optional)    |
//! |                         Key (optional)                        |
//! |                 Sequence Number (Optional)                    |
//! ```

use crate::checksum;
use crate::field;

/// Length of the base header.
pub const BASE_LEN: usize = 4;
/// C: checksum present.
pub const FLAG_C: u16 = 0x8000;
/// R (RFC 1701 routing): must be zero (RFC 2784 §2.1).
pub const FLAG_R: u16 = 0x4000;
/// K: key present (RFC 2890).
pub const FLAG_K: u16 = 0x2000;
/// S: sequence number present (RFC 2890).
pub const FLAG_S: u16 = 0x1000;
/// Strict source route / recursion bits of RFC 1701 that RFC 2784 §2.1
/// requires to be zero (with R).
const MUST_BE_ZERO: u16 = FLAG_R | 0x0800 | 0x0700;
/// Protocol type of Ethernet frames (transparent Ethernet bridging).
pub const PROTO_ETHERNET: u16 = 0x6558;

/// Why a GRE header is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GreError {
    /// Shorter than its flags say.
    Truncated,
    /// Version is not 0.
    BadVersion,
    /// A bit RFC 2784 §2.1 requires to be zero (routing, recursion) is set.
    ReservedBits,
}

/// A view of a GRE header and its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrePacket<T> {
    buffer: T,
}

/// Header length for the given options.
pub const fn header_len(checksum: bool, key: bool, seq: bool) -> usize {
    BASE_LEN + 4 * (checksum as usize + key as usize + seq as usize)
}

impl<T: AsRef<[u8]>> GrePacket<T> {
    /// Wraps `buffer` (starting at the GRE header) after checking the
    /// version, the reserved bits and the length the flags imply.
    pub fn new_checked(buffer: T) -> Result<Self, GreError> {
        let b = buffer.as_ref();
        if b.len() < BASE_LEN {
            return Err(GreError::Truncated);
        }
        let f = field::u16_at(b, 0);
        if f & 0x0007 != 0 {
            return Err(GreError::BadVersion);
        }
        if f & MUST_BE_ZERO != 0 {
            return Err(GreError::ReservedBits);
        }
        let p = GrePacket { buffer };
        if p.buffer.as_ref().len() < p.header_len() {
            return Err(GreError::Truncated);
        }
        Ok(p)
    }

    /// Wraps `buffer` without validation (for writing a fresh header).
    pub fn new_unchecked(buffer: T) -> Self {
        GrePacket { buffer }
    }

    fn flags(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 0)
    }

    /// Whether the checksum is present.
    pub fn has_checksum(&self) -> bool {
        self.flags() & FLAG_C != 0
    }

    /// Whether the key is present.
    pub fn has_key(&self) -> bool {
        self.flags() & FLAG_K != 0
    }

    /// Whether the sequence number is present.
    pub fn has_seq(&self) -> bool {
        self.flags() & FLAG_S != 0
    }

    /// Header length as the flags say.
    pub fn header_len(&self) -> usize {
        header_len(self.has_checksum(), self.has_key(), self.has_seq())
    }

    /// Protocol type of the payload (an EtherType).
    pub fn protocol(&self) -> u16 {
        field::u16_at(self.buffer.as_ref(), 2)
    }

    /// The checksum, if present.
    pub fn checksum(&self) -> Option<u16> {
        self.has_checksum()
            .then(|| field::u16_at(self.buffer.as_ref(), 4))
    }

    /// The key, if present.
    pub fn key(&self) -> Option<u32> {
        let off = BASE_LEN + 4 * usize::from(self.has_checksum());
        self.has_key()
            .then(|| field::u32_at(self.buffer.as_ref(), off))
    }

    /// The sequence number, if present.
    pub fn seq(&self) -> Option<u32> {
        let off = BASE_LEN + 4 * (usize::from(self.has_checksum()) + usize::from(self.has_key()));
        self.has_seq()
            .then(|| field::u32_at(self.buffer.as_ref(), off))
    }

    /// Whether the checksum (over header and payload, RFC 2784 §2.5) is
    /// right; true when there is none.
    pub fn verify_checksum(&self) -> bool {
        !self.has_checksum() || checksum::checksum(self.buffer.as_ref()) == 0
    }

    /// The payload after the header.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        field::slice(b, self.header_len(), b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GrePacket<T> {
    /// Writes a header for `protocol` with an optional key, and a checksum
    /// field (zero: fill it with [`fill_checksum`](Self::fill_checksum)
    /// once the payload is in place) when `checksum` is set. The buffer
    /// must hold at least [`header_len`] bytes.
    pub fn write_header(&mut self, protocol: u16, checksum: bool, key: Option<u32>) {
        let mut flags = 0;
        if checksum {
            flags |= FLAG_C;
        }
        if key.is_some() {
            flags |= FLAG_K;
        }
        let b = self.buffer.as_mut();
        field::set_u16(b, 0, flags);
        field::set_u16(b, 2, protocol);
        let mut off = BASE_LEN;
        if checksum {
            field::set_u32(b, off, 0);
            off += 4;
        }
        if let Some(k) = key {
            field::set_u32(b, off, k);
        }
    }

    /// Computes the checksum over the whole buffer (header and payload).
    pub fn fill_checksum(&mut self) {
        if self.has_checksum() {
            field::set_u16(self.buffer.as_mut(), 4, 0);
            let c = checksum::checksum(self.buffer.as_ref());
            field::set_u16(self.buffer.as_mut(), 4, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_with_and_without_options() {
        let mut b = [0u8; 20];
        b[12..].copy_from_slice(b"payload!");
        GrePacket::new_unchecked(&mut b[..]).write_header(0x0800, true, Some(0xdead_beef));
        let mut g = GrePacket::new_unchecked(&mut b[..]);
        g.fill_checksum();
        let g = GrePacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            (g.header_len(), g.protocol(), g.key(), g.seq()),
            (12, 0x0800, Some(0xdead_beef), None)
        );
        assert!(g.verify_checksum());
        assert_eq!(g.payload(), b"payload!");
        assert_eq!(&b[..4], &[0xa0, 0, 0x08, 0]);

        b[19] ^= 1;
        assert!(!GrePacket::new_checked(&b[..]).unwrap().verify_checksum());

        let plain = [0u8, 0, 0x65, 0x58];
        let g = GrePacket::new_checked(&plain[..]).unwrap();
        assert_eq!(
            (g.header_len(), g.protocol(), g.key(), g.checksum()),
            (4, 0x6558, None, None)
        );
    }

    #[test]
    fn rejects_versions_reserved_bits_and_short_headers() {
        assert_eq!(
            GrePacket::new_checked(&[0u8, 1, 8, 0][..]),
            Err(GreError::BadVersion)
        );
        assert_eq!(
            GrePacket::new_checked(&[0x40u8, 0, 8, 0][..]),
            Err(GreError::ReservedBits)
        );
        assert_eq!(
            GrePacket::new_checked(&[0x20u8, 0, 8, 0, 1][..]),
            Err(GreError::Truncated)
        );
        assert_eq!(
            GrePacket::new_checked(&[0u8, 0, 8][..]),
            Err(GreError::Truncated)
        );
        // Sequence numbers (RFC 2890) are accepted and skipped.
        let g = GrePacket::new_checked(&[0x10u8, 0, 8, 0, 0, 0, 0, 7, 0xaa][..]).unwrap();
        assert_eq!((g.seq(), g.payload()), (Some(7), &[0xaa][..]));
    }
}
