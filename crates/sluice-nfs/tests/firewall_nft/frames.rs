//! Frame builders for the nftables differential test: TCP segments with
//! options, IPv4 and IPv6 fragments of a datagram, broken checksums, and
//! the per-frame marks (IPv4 identification, IPv6 flow label) the Linux
//! side recognises forwarded frames by.

use sluice_packet::checksum;

/// `f` (an IPv4 frame) with its header checksum recomputed.
pub fn fix_ip_checksum(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

/// `f` (an IPv4 frame) with identification `id`, its checksum updated.
pub fn set_ip_id(f: &mut [u8], id: u16) {
    let old = u16::from_be_bytes([f[18], f[19]]);
    f[18..20].copy_from_slice(&id.to_be_bytes());
    let c = u16::from_be_bytes([f[24], f[25]]);
    // Incremental, so a deliberately wrong checksum stays wrong.
    f[24..26].copy_from_slice(&checksum::update_u16(c, old, id).to_be_bytes());
}

/// `f` (an IPv6 frame) with flow label `label` (20 bits).
pub fn set_flow_label(f: &mut [u8], label: u32) {
    f[15] = (f[15] & 0xf0) | ((label >> 16) & 0x0f) as u8;
    f[16] = (label >> 8) as u8;
    f[17] = label as u8;
}

/// A TCP segment (IPv4, no options in `base`) with TCP options `opts`
/// (padded to 4 bytes) inserted, lengths and checksums fixed.
pub fn with_tcp_options(base: &[u8], opts: &[u8]) -> Vec<u8> {
    let mut o = opts.to_vec();
    while o.len() % 4 != 0 {
        o.push(1);
    }
    let mut f = [&base[..54], &o[..], &base[54..]].concat();
    f[46] = (((20 + o.len()) / 4) << 4) as u8;
    let total = u16::from_be_bytes([f[16], f[17]]) + o.len() as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    fix_ip_checksum(&mut f);
    fix_l4_checksum(&mut f);
    f
}

/// Recomputes the TCP or UDP checksum of an IPv4 frame without options.
pub fn fix_l4_checksum(f: &mut [u8]) {
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let proto = f[23];
    let at = 34 + if proto == 6 { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&[0, 0]);
    let pseudo = checksum::add(
        checksum::sum(&f[26..34]),
        u64::from(proto) + (total as u64 - 20),
    );
    let c = checksum::checksum_with(pseudo, &f[34..14 + total]);
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// The IPv4 fragments of datagram frame `f` (no IP options) carrying
/// `sizes` bytes of its IP payload each, in order (each a multiple of 8
/// but the last; the last takes the rest), with identification `id`.
pub fn fragments_v4(f: &[u8], sizes: &[usize], id: u16) -> Vec<Vec<u8>> {
    let data = &f[34..];
    let mut out = Vec::new();
    let mut off = 0;
    for (k, &n) in sizes.iter().enumerate() {
        let last = k + 1 == sizes.len();
        let n = if last { data.len() - off } else { n };
        let mut g = [&f[..34], &data[off..off + n]].concat();
        g[16..18].copy_from_slice(&((20 + n) as u16).to_be_bytes());
        g[18..20].copy_from_slice(&id.to_be_bytes());
        let fo = (off / 8) as u16 | if last { 0 } else { 0x2000 };
        g[20..22].copy_from_slice(&fo.to_be_bytes());
        fix_ip_checksum(&mut g);
        out.push(g);
        off += n;
    }
    out
}

/// An IPv4 fragment of `f`'s IP payload bytes `range` (offset a multiple
/// of 8), MF as given, identification `id`.
pub fn fragment_v4(f: &[u8], range: std::ops::Range<usize>, more: bool, id: u16) -> Vec<u8> {
    let mut g = [&f[..34], &f[34 + range.start..34 + range.end]].concat();
    g[16..18].copy_from_slice(&((20 + range.len()) as u16).to_be_bytes());
    g[18..20].copy_from_slice(&id.to_be_bytes());
    let fo = (range.start / 8) as u16 | if more { 0x2000 } else { 0 };
    g[20..22].copy_from_slice(&fo.to_be_bytes());
    fix_ip_checksum(&mut g);
    g
}

/// An IPv6 fragment (fragment header right after the fixed header) of
/// IPv6 frame `f`'s payload bytes `range`, M as given, identification
/// `id`.
pub fn fragment_v6(f: &[u8], range: std::ops::Range<usize>, more: bool, id: u32) -> Vec<u8> {
    let nh = f[20];
    let payload = &f[54..];
    let mut fh = vec![nh, 0];
    let fo = range.start as u16 | u16::from(more);
    fh.extend_from_slice(&fo.to_be_bytes());
    fh.extend_from_slice(&id.to_be_bytes());
    let mut g = [&f[..54], &fh[..], &payload[range.clone()]].concat();
    g[18..20].copy_from_slice(&((8 + range.len()) as u16).to_be_bytes());
    g[20] = 44;
    g
}
