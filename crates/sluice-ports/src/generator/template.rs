//! Per-kind size tables and per-flow frame templates.
//!
//! A flow's template is its complete header stack (Ethernet, IP, TCP/UDP)
//! built once by `sluice_packet::builder::write_frame` for the flow's base
//! size class with an all-zero payload, together with the template's
//! checksums.  A zero payload contributes nothing to the L4 checksum, so a
//! packet's checksum is the template's, updated (RFC 1624) by the words
//! that differ: the stamp, the length fields of other size classes, and
//! TCP sequence number, flags and ack.  The per-class length deltas do not
//! depend on the flow and are precomputed here as partial sums.

use std::net::IpAddr;

use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::checksum;
use sluice_packet::TcpFlags;

use super::config::{ConfigError, GeneratorConfig, SizeSpec, MAX_FRAME_LEN};
use super::flows::FlowTuple;
use super::size::{SizeModel, MAX_CLASSES};
use crate::stamp::Stamp;

/// Bytes copied from a template per packet: the longest header stack
/// (Ethernet 14 + IPv6 40 + TCP 20 = 74) rounded up.
pub(crate) const TEMPLATE_LEN: usize = 80;
/// Ethernet header length (the generator sends untagged frames).
const ETH_LEN: usize = 14;
/// TCP flags of data segments in templates.
pub(crate) const DATA_FLAGS: u8 = TcpFlags::ACK.bits() | TcpFlags::PSH.bits();
/// TCP flags of the first segment of a connection.
pub(crate) const SYN_FLAGS: u8 = TcpFlags::SYN.bits();
/// TCP flags of the last segment of a connection.
pub(crate) const FIN_FLAGS: u8 = TcpFlags::FIN.bits() | TcpFlags::ACK.bits();
/// TCP window advertised by every segment.
const WINDOW: u16 = 65_535;

/// Index of a flow kind: bit 0 = TCP, bit 1 = IPv6.
pub(crate) fn kind_index(tcp: bool, v6: bool) -> usize {
    usize::from(tcp) | usize::from(v6) << 1
}

/// One size class of one flow kind.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClassInfo {
    /// Frame length.
    pub len: u16,
    /// L4 payload length (frame length minus headers).
    pub payload_len: u16,
    /// Whether the payload has room for a [`Stamp`].
    pub stamped: bool,
    /// IPv4 total length or IPv6 payload length.
    pub ip_len: u16,
    /// L4 length (UDP length field / TCP segment length).
    pub l4_len: u16,
    /// Partial sum to add to the complemented IPv4 header checksum when
    /// going from the base class to this one.
    pub ip_delta: u64,
    /// Partial sum to add to the complemented L4 checksum when going from
    /// the base class to this one.
    pub l4_delta: u64,
}

/// Layout and size classes of one flow kind (TCP/UDP × IPv4/IPv6).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct KindInfo {
    pub tcp: bool,
    pub v6: bool,
    /// Offset of the L4 header.
    pub l4_off: usize,
    /// Length of all headers = offset of the payload.
    pub hdr_len: usize,
    /// Offset of the L4 checksum field.
    pub csum_off: usize,
    pub classes: [ClassInfo; MAX_CLASSES],
}

/// Sum of the two 16-bit words of `v`, as a partial sum.
#[inline(always)]
pub(crate) fn words32(v: u32) -> u64 {
    u64::from(v >> 16) + u64::from(v & 0xffff)
}

/// Sum of the four 16-bit words of `v`, as a partial sum.
#[inline(always)]
pub(crate) fn words64(v: u64) -> u64 {
    // Two 32-bit lanes, each the sum of two words (<= 0x1fffe), then the
    // lanes added.
    const M: u64 = 0x0000_ffff_0000_ffff;
    let x = (v & M) + ((v >> 16) & M);
    (x & 0xffff_ffff) + (x >> 32)
}

/// Partial sum for a 16-bit field changing from `old` to `new` (RFC 1624
/// eqn. 3 terms `~m + m'`).
fn delta16(old: u16, new: u16) -> u64 {
    u64::from(!old) + u64::from(new)
}

impl KindInfo {
    pub(crate) fn new(tcp: bool, v6: bool, spec: SizeSpec) -> Result<Self, ConfigError> {
        let l4_off = ETH_LEN + if v6 { 40 } else { 20 };
        let hdr_len = l4_off + if tcp { 20 } else { 8 };
        let csum_off = l4_off + if tcp { 16 } else { 6 };
        let mut k = KindInfo {
            tcp,
            v6,
            l4_off,
            hdr_len,
            csum_off,
            classes: [ClassInfo::default(); MAX_CLASSES],
        };
        let nominal = SizeModel::class_lens(spec);
        let min = match spec {
            SizeSpec::Fixed(n) if usize::from(n) > MAX_FRAME_LEN => {
                return Err(ConfigError::FrameTooLarge(n))
            }
            SizeSpec::Fixed(_) => hdr_len + Stamp::LEN,
            _ => hdr_len,
        };
        for (i, slot) in k.classes.iter_mut().enumerate() {
            // Unused slots repeat class 0 so any index is harmless.
            let nominal = nominal.get(i).copied().unwrap_or(nominal[0]);
            let len = usize::from(nominal).max(min);
            let ip_len = if v6 { len - l4_off } else { len - ETH_LEN };
            *slot = ClassInfo {
                len: len as u16,
                payload_len: (len - hdr_len) as u16,
                stamped: len >= hdr_len + Stamp::LEN,
                ip_len: ip_len as u16,
                l4_len: (len - l4_off) as u16,
                ip_delta: 0,
                l4_delta: 0,
            };
        }
        let base = k.classes[0];
        for c in &mut k.classes {
            c.ip_delta = delta16(base.ip_len, c.ip_len);
            // The pseudo-header length changes; for UDP so does the UDP
            // length field in the header.
            let d = delta16(base.l4_len, c.l4_len);
            c.l4_delta = if tcp { d } else { 2 * d };
        }
        Ok(k)
    }
}

/// A flow slot: its template and transport state.
#[derive(Debug, Clone)]
pub(crate) struct Flow {
    /// Header stack for the base class (TCP: seq 0, flags ACK|PSH).
    pub hdr: [u8; TEMPLATE_LEN],
    /// L4 checksum stored in `hdr`.
    pub l4_csum: u16,
    /// IPv4 header checksum stored in `hdr` (unused for IPv6).
    pub ip_csum: u16,
    /// Index into the generator's kind table.
    pub kind: u8,
    /// Flow id written in stamps.
    pub stamp_flow: u32,
    /// Partial sum of the constant stamp words (magic and flow id).
    pub stamp_sum: u64,
    /// Next per-flow stamp sequence number.
    pub seq: u64,
    /// Index of the current source port within the source port range.
    pub src_port_idx: u32,
    /// Next TCP sequence number.
    pub tcp_seq: u32,
    /// Packets sent in the current TCP connection.
    pub conn_pkt: u32,
    /// TCP connections opened so far by this slot.
    pub conns: u32,
    /// Partial sum turning a data segment into the SYN (flags, ack = 0).
    pub syn_delta: u64,
}

/// Builds the template of a flow.
pub(crate) fn build_flow(
    cfg: &GeneratorConfig,
    kind: &KindInfo,
    kind_idx: usize,
    t: &FlowTuple,
    index: u32,
    ack: u32,
    scratch: &mut [u8; MAX_FRAME_LEN],
) -> Flow {
    let src_port = cfg.src_ports.0 + t.src_port_idx as u16;
    let l4 = if kind.tcp {
        L4Spec::Tcp {
            src_port,
            dst_port: t.dst_port,
            seq: 0,
            ack,
            flags: TcpFlags::from_bits(DATA_FLAGS),
            window: WINDOW,
        }
    } else {
        L4Spec::Udp {
            src_port,
            dst_port: t.dst_port,
        }
    };
    let spec = FrameSpec {
        src_mac: cfg.src_mac,
        dst_mac: cfg.dst_mac,
        vlan: None,
        src_ip: t.src_ip,
        dst_ip: t.dst_ip,
        ttl: 64,
        l4,
    };
    debug_assert!(matches!(
        (t.src_ip, kind.v6),
        (IpAddr::V4(_), false) | (IpAddr::V6(_), true)
    ));
    static ZEROS: [u8; MAX_FRAME_LEN] = [0; MAX_FRAME_LEN];
    let base = kind.classes[0];
    let n = write_frame(scratch, &spec, &ZEROS[..usize::from(base.payload_len)])
        .expect("template fits: lengths validated by KindInfo::new");
    assert_eq!(
        n,
        usize::from(base.len),
        "builder layout differs from KindInfo"
    );
    let mut hdr = [0u8; TEMPLATE_LEN];
    hdr.copy_from_slice(&scratch[..TEMPLATE_LEN]);
    hdr[kind.hdr_len..].fill(0);
    let l4_csum = u16::from_be_bytes([hdr[kind.csum_off], hdr[kind.csum_off + 1]]);
    let ip_csum = u16::from_be_bytes([hdr[24], hdr[25]]);
    let w_data = (5u16 << 12) | u16::from(DATA_FLAGS);
    let w_syn = (5u16 << 12) | u16::from(SYN_FLAGS);
    // ~ack words + new ack words (0) + flags word change.
    let syn_delta = checksum::add(
        delta16(w_data, w_syn),
        u64::from(!(ack >> 16) as u16) + u64::from(!(ack as u16)),
    );
    Flow {
        hdr,
        l4_csum,
        ip_csum,
        kind: kind_idx as u8,
        stamp_flow: cfg.flow_id_base.wrapping_add(index),
        stamp_sum: words32(Stamp::MAGIC) + words32(cfg.flow_id_base.wrapping_add(index)),
        seq: 0,
        src_port_idx: t.src_port_idx,
        tcp_seq: 0,
        conn_pkt: 0,
        conns: 0,
        syn_delta,
    }
}

/// Partial sum turning a data segment into a FIN|ACK (flags word only).
pub(crate) fn fin_delta() -> u64 {
    delta16(
        (5u16 << 12) | u16::from(DATA_FLAGS),
        (5u16 << 12) | u16::from(FIN_FLAGS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_state_stays_small() {
        // The module docs promise about 140 bytes per flow.
        assert!(
            std::mem::size_of::<Flow>() <= 144,
            "{}",
            std::mem::size_of::<Flow>()
        );
    }
}
