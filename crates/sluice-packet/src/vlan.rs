//! IEEE 802.1Q VLAN tags, including stacked 802.1ad (QinQ) tags.
//!
//! In an Ethernet frame the tag's TPID (0x8100 or 0x88A8) occupies the
//! EtherType field; the [`VlanTag`] view starts right after it, at the TCI:
//!
//! ```text
//! | TCI: PCP(3) DEI(1) VID(12) | inner EtherType (16) | payload ...
//! ```

use crate::error::ParseError;
use crate::ethernet::EtherType;
use crate::field;

/// Length of a VLAN tag after the TPID (TCI + inner EtherType), in bytes.
pub const HEADER_LEN: usize = 4;

/// Maximum number of stacked tags [`walk`] accepts (outer S-tag + C-tag).
pub const MAX_TAGS: usize = 2;

/// A 16-bit Tag Control Information value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tci(pub u16);

impl Tci {
    /// Builds a TCI from its parts; out-of-range bits are masked off.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> Tci {
        Tci((((pcp & 0x7) as u16) << 13) | ((dei as u16) << 12) | (vid & 0x0fff))
    }

    /// Priority code point (3 bits).
    pub const fn pcp(self) -> u8 {
        (self.0 >> 13) as u8
    }

    /// Drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.0 & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub const fn vid(self) -> u16 {
        self.0 & 0x0fff
    }
}

/// A view of one VLAN tag (TCI, inner EtherType, payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps `buffer` (starting at the TCI), checking it holds 4 bytes.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::VlanTruncated);
        }
        Ok(VlanTag { buffer })
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The raw TCI.
    pub fn tci(&self) -> Tci {
        Tci(field::u16_at(self.buffer.as_ref(), 0))
    }

    /// Priority code point.
    pub fn pcp(&self) -> u8 {
        self.tci().pcp()
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci().dei()
    }

    /// VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci().vid()
    }

    /// EtherType of what follows the tag (another TPID if stacked).
    pub fn ethertype(&self) -> EtherType {
        EtherType(field::u16_at(self.buffer.as_ref(), 2))
    }

    /// Bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        field::slice(b, HEADER_LEN, b.len())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: Tci) {
        field::set_u16(self.buffer.as_mut(), 0, tci.0);
    }

    /// Sets the VLAN identifier, keeping PCP and DEI.
    pub fn set_vid(&mut self, vid: u16) {
        let t = self.tci();
        self.set_tci(Tci::new(t.pcp(), t.dei(), vid));
    }

    /// Sets the priority code point, keeping DEI and VID.
    pub fn set_pcp(&mut self, pcp: u8) {
        let t = self.tci();
        self.set_tci(Tci::new(pcp, t.dei(), t.vid()));
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, t: EtherType) {
        field::set_u16(self.buffer.as_mut(), 2, t.0);
    }

    /// Mutable bytes after the tag.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let len = b.len();
        field::slice_mut(b, HEADER_LEN, len)
    }
}

/// The result of walking the VLAN tags at the start of an Ethernet payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanStack {
    tcis: [Tci; MAX_TAGS],
    count: u8,
    ethertype: EtherType,
}

impl VlanStack {
    /// Number of tags found (0..=2).
    pub const fn count(&self) -> usize {
        self.count as usize
    }

    /// TCI of tag `i` (0 = outermost), if present.
    pub fn tci(&self, i: usize) -> Option<Tci> {
        if i < self.count() {
            self.tcis.get(i).copied()
        } else {
            None
        }
    }

    /// VLAN id of tag `i` (0 = outermost), if present.
    pub fn vid(&self, i: usize) -> Option<u16> {
        self.tci(i).map(Tci::vid)
    }

    /// EtherType after the innermost tag (the L3 protocol).
    pub const fn ethertype(&self) -> EtherType {
        self.ethertype
    }

    /// Total bytes of tags (4 per tag), i.e. the offset of the L3 header
    /// relative to the Ethernet payload.
    pub const fn len(&self) -> usize {
        self.count as usize * HEADER_LEN
    }

    /// True if no tag was present.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Walks up to [`MAX_TAGS`] stacked VLAN tags.
///
/// `ethertype` is the Ethernet header's EtherType and `payload` the bytes
/// after the Ethernet header.  Any tag type (0x8100 or 0x88A8) may appear at
/// any depth.
pub fn walk(ethertype: EtherType, payload: &[u8]) -> Result<VlanStack, ParseError> {
    let mut st = VlanStack {
        ethertype,
        ..VlanStack::default()
    };
    let mut off = 0usize;
    while st.ethertype.is_vlan_tag() {
        let idx = st.count as usize;
        if idx >= MAX_TAGS {
            return Err(ParseError::TooManyVlanTags);
        }
        let tag = match payload.get(off..off + HEADER_LEN) {
            Some(&[a, b, c, d]) => [a, b, c, d],
            _ => return Err(ParseError::VlanTruncated),
        };
        if let Some(slot) = st.tcis.get_mut(idx) {
            *slot = Tci(u16::from_be_bytes([tag[0], tag[1]]));
        }
        st.ethertype = EtherType(u16::from_be_bytes([tag[2], tag[3]]));
        st.count += 1;
        off += HEADER_LEN;
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tci_fields() {
        let t = Tci(0xb07b); // pcp 5, dei 1, vid 123
        assert_eq!(t.pcp(), 5);
        assert!(t.dei());
        assert_eq!(t.vid(), 123);
        assert_eq!(Tci::new(5, true, 123), t);
        assert_eq!(Tci::new(0xff, false, 0xffff), Tci(0xefff));
    }

    #[test]
    fn tag_view() {
        let mut b = [0x60, 0x64, 0x08, 0x00, 0x45];
        let t = VlanTag::new_checked(&b[..]).unwrap();
        assert_eq!(t.pcp(), 3);
        assert!(!t.dei());
        assert_eq!(t.vid(), 100);
        assert_eq!(t.ethertype(), EtherType::IPV4);
        assert_eq!(t.payload(), &[0x45]);
        let mut t = VlanTag::new_checked(&mut b[..]).unwrap();
        t.set_vid(4095);
        t.set_pcp(7);
        t.set_ethertype(EtherType::IPV6);
        assert_eq!(&b[..4], &[0xef, 0xff, 0x86, 0xdd]); // pcp 7, dei 0, vid 4095
        assert_eq!(
            VlanTag::new_checked(&b[..3]),
            Err(ParseError::VlanTruncated)
        );
    }

    #[test]
    fn walk_untagged_single_double() {
        let st = walk(EtherType::IPV4, &[]).unwrap();
        assert!(st.is_empty());
        assert_eq!(st.ethertype(), EtherType::IPV4);
        assert_eq!(st.vid(0), None);

        let st = walk(EtherType::VLAN, &[0x00, 0x0a, 0x86, 0xdd]).unwrap();
        assert_eq!(st.count(), 1);
        assert_eq!(st.vid(0), Some(10));
        assert_eq!(st.vid(1), None);
        assert_eq!(st.ethertype(), EtherType::IPV6);
        assert_eq!(st.len(), 4);

        let st = walk(
            EtherType::QINQ,
            &[0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x08, 0x00],
        )
        .unwrap();
        assert_eq!(st.count(), 2);
        assert_eq!(st.vid(0), Some(100));
        assert_eq!(st.vid(1), Some(200));
        assert_eq!(st.ethertype(), EtherType::IPV4);
        assert_eq!(st.len(), 8);
    }

    #[test]
    fn walk_errors() {
        assert_eq!(
            walk(EtherType::VLAN, &[0x00, 0x0a, 0x86]),
            Err(ParseError::VlanTruncated)
        );
        assert_eq!(
            walk(
                EtherType::QINQ,
                &[0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3, 0x08, 0x00]
            ),
            Err(ParseError::TooManyVlanTags)
        );
    }
}
