//! ARP (RFC 826) and Neighbor Discovery (RFC 4861) on the wire: the
//! options the router reads, the checksum, and the ARP request and
//! Neighbor Solicitation it writes for an unresolved next hop. No state:
//! what the router does with them is in `arp_nd.rs` and `forward.rs`.

use std::net::Ipv6Addr;

use sluice_packet::checksum::{checksum_with, pseudo_header_v6};

pub(super) const ND_NS: u8 = 135;
pub(super) const ND_NA: u8 = 136;

pub(super) fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

pub(super) fn u128_at(b: &[u8], i: usize) -> u128 {
    u128::from_be_bytes(b[i..i + 16].try_into().unwrap_or([0; 16]))
}

/// The solicited-node multicast address of `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: u128) -> u128 {
    (0xff02u128 << 112) | (1u128 << 32) | (0xffu128 << 24) | (a & 0xff_ffff)
}

/// ND options that break RFC 4861 §4.6 (the message must be discarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadOptions;

/// The link-layer address option of type `want` in ND options `opts`
/// (1: source, 2: target); `Err` if an option is malformed (RFC 4861
/// §4.6: zero length, or running past the end).
pub fn nd_lla(opts: &[u8], want: u8) -> Result<Option<[u8; 6]>, BadOptions> {
    let mut i = 0;
    let mut found = None;
    while i < opts.len() {
        if opts.len() - i < 2 {
            return Err(BadOptions);
        }
        let l = opts[i + 1] as usize * 8;
        if l == 0 || i + l > opts.len() {
            return Err(BadOptions);
        }
        if opts[i] == want {
            found = opts[i + 2..i + 8].try_into().ok();
        }
        i += l;
    }
    Ok(found)
}

pub(super) fn nd_checksum(src: u128, dst: u128, icmp: &[u8]) -> u16 {
    let pseudo = pseudo_header_v6(
        &Ipv6Addr::from(src),
        &Ipv6Addr::from(dst),
        58,
        icmp.len() as u32,
    );
    checksum_with(pseudo, icmp)
}

/// Writes an ARP request from `mac`/`sip` for `tip` at the start of `buf`
/// (broadcast, untagged, 42 bytes). Returns the length.
pub fn write_arp_request(buf: &mut [u8], mac: [u8; 6], sip: u32, tip: u32) -> Option<usize> {
    let f = buf.get_mut(..42)?;
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&sip.to_be_bytes());
    f[32..38].copy_from_slice(&[0; 6]);
    f[38..42].copy_from_slice(&tip.to_be_bytes());
    Some(42)
}

/// An IPv6 Neighbor Solicitation or Advertisement with one link-layer
/// address option: all the router writes (RFC 4861 §4.3, §4.4).
pub(super) struct NdMessage {
    /// [`ND_NS`] or [`ND_NA`].
    pub kind: u8,
    /// The NA's R, S and O bits (0 for an NS).
    pub flags: u8,
    pub src: u128,
    pub dst: u128,
    pub target: u128,
    /// 1: source link-layer address, 2: target link-layer address.
    pub option: u8,
    pub mac: [u8; 6],
}

/// An ND message's length from its IPv6 header: 40 + 32 bytes.
pub(super) const ND_LEN: usize = 72;

impl NdMessage {
    /// Writes the IPv6 header and the message, checksum included, into
    /// `ip` (at least [`ND_LEN`] bytes).
    pub(super) fn write(&self, ip: &mut [u8]) -> Option<()> {
        let f = ip.get_mut(..ND_LEN)?;
        f[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
        f[4..6].copy_from_slice(&32u16.to_be_bytes());
        f[6] = 58;
        f[7] = 255;
        f[8..24].copy_from_slice(&self.src.to_be_bytes());
        f[24..40].copy_from_slice(&self.dst.to_be_bytes());
        let icmp = &mut f[40..ND_LEN];
        icmp[0] = self.kind;
        icmp[1..8].copy_from_slice(&[0; 7]);
        icmp[4] = self.flags;
        icmp[8..24].copy_from_slice(&self.target.to_be_bytes());
        icmp[24] = self.option;
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&self.mac);
        let c = nd_checksum(self.src, self.dst, icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        Some(())
    }
}

/// Writes a Neighbor Solicitation from `mac`/`src` for `target` at the
/// start of `buf` (to the solicited-node group, with a source link-layer
/// address option, 86 bytes). Returns the length.
pub fn write_ns(buf: &mut [u8], mac: [u8; 6], src: u128, target: u128) -> Option<usize> {
    let f = buf.get_mut(..14 + ND_LEN)?;
    let dst = solicited_node(target);
    let d = dst.to_be_bytes();
    f[0..6].copy_from_slice(&[0x33, 0x33, d[12], d[13], d[14], d[15]]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    let ns = NdMessage {
        kind: ND_NS,
        flags: 0,
        src,
        dst,
        target,
        option: 1,
        mac,
    };
    ns.write(&mut f[14..])?;
    Some(14 + ND_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_solicited_node() {
        let opts = [1, 1, 1, 2, 3, 4, 5, 6, 2, 1, 9, 9, 9, 9, 9, 9];
        assert_eq!(nd_lla(&opts, 1), Ok(Some([1, 2, 3, 4, 5, 6])));
        assert_eq!(nd_lla(&opts, 2), Ok(Some([9; 6])));
        assert_eq!(nd_lla(&opts, 3), Ok(None));
        assert_eq!(nd_lla(&[1, 0, 0, 0, 0, 0, 0, 0], 1), Err(BadOptions));
        assert_eq!(nd_lla(&[1, 2, 0, 0, 0, 0, 0, 0], 1), Err(BadOptions));
        assert_eq!(nd_lla(&[1], 1), Err(BadOptions));
        let a: u128 = "2001:db8::12:3456".parse::<Ipv6Addr>().unwrap().into();
        assert_eq!(
            Ipv6Addr::from(solicited_node(a)).to_string(),
            "ff02::1:ff12:3456"
        );
    }
}
