//! VXLAN headers (RFC 7348): the 8 bytes after the outer UDP header.
//!
//! ```text
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//! Only the I flag has a meaning; reserved bits are sent as zero and
//! ignored on receipt (RFC 7348 §5).

use crate::field;

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// IANA UDP port for VXLAN.
pub const UDP_PORT: u16 = 4789;
/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const MAX_VNI: u32 = 0x00ff_ffff;

/// Why a VXLAN header is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VxlanError {
    /// Fewer than 8 bytes.
    Truncated,
    /// The I flag is clear (RFC 7348 §5: the VNI is not valid).
    NoVni,
}

/// A view of a VXLAN header and the inner frame after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanPacket<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    /// Wraps `buffer` (starting at the VXLAN header) after checking its
    /// length and the I flag.
    pub fn new_checked(buffer: T) -> Result<Self, VxlanError> {
        let b = buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(VxlanError::Truncated);
        }
        if b[0] & FLAG_I == 0 {
            return Err(VxlanError::NoVni);
        }
        Ok(VxlanPacket { buffer })
    }

    /// Wraps `buffer` without validation (for writing a fresh header).
    pub fn new_unchecked(buffer: T) -> Self {
        VxlanPacket { buffer }
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        field::u8_at(self.buffer.as_ref(), 0)
    }

    /// The 24-bit VNI.
    pub fn vni(&self) -> u32 {
        field::u32_at(self.buffer.as_ref(), 4) >> 8
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        field::slice(b, HEADER_LEN, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanPacket<T> {
    /// Writes a header with the I flag, `vni` (low 24 bits) and zero
    /// reserved fields.
    pub fn write_header(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        field::set_u32(b, 0, u32::from(FLAG_I) << 24);
        field::set_u32(b, 4, (vni & MAX_VNI) << 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_validation() {
        let mut b = [0xffu8; 12];
        VxlanPacket::new_unchecked(&mut b[..]).write_header(0x12_3456);
        assert_eq!(&b[..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let v = VxlanPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            (v.flags(), v.vni(), v.payload()),
            (0x08, 0x12_3456, &[0xff; 4][..])
        );
        // Reserved bits are ignored on receipt.
        b[0] = 0xff;
        b[7] = 0xff;
        assert_eq!(VxlanPacket::new_checked(&b[..]).unwrap().vni(), 0x12_3456);
        b[0] = 0x00;
        assert_eq!(VxlanPacket::new_checked(&b[..]), Err(VxlanError::NoVni));
        assert_eq!(
            VxlanPacket::new_checked(&b[..7]),
            Err(VxlanError::Truncated)
        );
    }
}
