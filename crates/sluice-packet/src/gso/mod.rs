//! Offloads: the virtio-net header that AF_PACKET (`PACKET_VNET_HDR`) and
//! tap (`IFF_VNET_HDR`) put before a frame, the offload state a packet
//! carries through sluice ([`Offload`]), completion of partial checksums
//! ([`complete_checksum`]) and software segmentation of TCP super-packets
//! ([`segment`]).
//!
//! A Linux stack with TSO/GSO hands out **super-packets**: one Ethernet/IP/
//! TCP header followed by up to 64 KiB of payload, with `gso_size` saying
//! how much payload each wire segment carries. Its checksum is usually
//! *partial* (`CHECKSUM_PARTIAL`): the TCP/UDP checksum field holds only
//! the folded pseudo-header sum and whoever transmits it (a NIC, or
//! software when no NIC can) adds the sum of the bytes from `csum_start`
//! on and stores the result at `csum_start + csum_offset`.
//!
//! Everything here is pure and works on byte slices; every malformed input
//! is a [`GsoError`] whose [`GsoError::name`] is a drop-reason label.

mod segment;
#[cfg(test)]
mod tests;

pub use segment::{segment, Segments};

use crate::checksum;

/// Bytes of the (legacy, non-mergeable) virtio-net header.
pub const VNET_HDR_LEN: usize = 10;

/// `gso_type`: not a super-packet.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: UDP fragmentation offload (IPv4 fragments; not supported).
pub const GSO_UDP: u8 = 3;
/// `gso_type`: TCP over IPv6.
pub const GSO_TCPV6: u8 = 4;
/// `gso_type`: UDP segmentation (`UDP_SEGMENT`; not supported).
pub const GSO_UDP_L4: u8 = 5;
/// `gso_type` flag: the stack uses ECN (CWR only on the first segment).
pub const GSO_ECN: u8 = 0x80;

/// `flags`: the checksum is partial (see the module docs).
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksums were verified (by the sender's stack or a NIC).
pub const F_DATA_VALID: u8 = 2;

/// Most segments one super-packet may be cut into (a 64 KiB super-packet
/// at TCP's minimum IPv4 MSS of 536 bytes needs 123). A larger count means
/// a bogus `gso_size` and would turn one buffer into thousands.
pub const MAX_SEGMENTS: usize = 128;

/// Why an offloaded packet was refused. Each is a counted drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsoError {
    /// A virtio-net header with flags or a `gso_type` sluice does not know.
    BadVnetHeader,
    /// A super-packet with `gso_size` 0.
    GsoSizeZero,
    /// A `gso_type` sluice cannot segment (UDP fragmentation/segmentation).
    Unsupported,
    /// The headers do not match the `gso_type` (not TCP, wrong IP
    /// version, a fragment, truncated).
    BadHeaders,
    /// More than [`MAX_SEGMENTS`] segments.
    TooManySegments,
    /// `csum_start`/`csum_offset` point outside the packet.
    BadChecksumOffset,
    /// The output buffer is too small for a segment.
    NoRoom,
}

impl GsoError {
    /// Every variant (for counter tables).
    pub const ALL: [GsoError; 7] = [
        GsoError::BadVnetHeader,
        GsoError::GsoSizeZero,
        GsoError::Unsupported,
        GsoError::BadHeaders,
        GsoError::TooManySegments,
        GsoError::BadChecksumOffset,
        GsoError::NoRoom,
    ];

    /// Position in [`GsoError::ALL`] (for counter arrays).
    pub const fn index(self) -> usize {
        match self {
            GsoError::BadVnetHeader => 0,
            GsoError::GsoSizeZero => 1,
            GsoError::Unsupported => 2,
            GsoError::BadHeaders => 3,
            GsoError::TooManySegments => 4,
            GsoError::BadChecksumOffset => 5,
            GsoError::NoRoom => 6,
        }
    }

    /// Stable snake_case name for drop-reason metrics.
    pub const fn name(self) -> &'static str {
        match self {
            GsoError::BadVnetHeader => "gso_bad_vnet_header",
            GsoError::GsoSizeZero => "gso_size_zero",
            GsoError::Unsupported => "gso_unsupported",
            GsoError::BadHeaders => "gso_bad_headers",
            GsoError::TooManySegments => "gso_too_many_segments",
            GsoError::BadChecksumOffset => "gso_bad_checksum_offset",
            GsoError::NoRoom => "gso_no_room",
        }
    }
}

impl std::fmt::Display for GsoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::error::Error for GsoError {}

/// The offload state of one packet: the fields of a virtio-net header that
/// matter after receive (`hdr_len` is recomputed when needed). All zero is
/// a plain frame with complete checksums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Offload {
    /// [`GSO_NONE`], [`GSO_TCPV4`] or [`GSO_TCPV6`], maybe with [`GSO_ECN`].
    pub gso_type: u8,
    /// [`F_NEEDS_CSUM`] and/or [`F_DATA_VALID`].
    pub flags: u8,
    /// Payload bytes per segment (super-packets only).
    pub gso_size: u16,
    /// Where the partially summed range starts, from the frame's start.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
}

impl Offload {
    /// A plain frame.
    pub const NONE: Offload = Offload {
        gso_type: 0,
        flags: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// Whether this is a super-packet.
    #[inline]
    pub const fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }

    /// Whether the checksum is partial.
    #[inline]
    pub const fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }

    /// Whether anything must be done before the frame can go to a port
    /// that takes no offloads: a super-packet or a partial checksum.
    #[inline]
    pub const fn is_offloaded(&self) -> bool {
        self.is_gso() || self.needs_csum()
    }

    /// Decodes and checks the virtio-net header received before a frame of
    /// `frame_len` bytes (little-endian, as legacy virtio headers are on
    /// the little-endian hosts sluice runs on).
    pub fn from_vnet(hdr: &[u8; VNET_HDR_LEN], frame_len: usize) -> Result<Offload, GsoError> {
        let le = |i: usize| u16::from_le_bytes([hdr[i], hdr[i + 1]]);
        let o = Offload {
            flags: hdr[0],
            gso_type: hdr[1],
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        };
        if o.flags & !(F_NEEDS_CSUM | F_DATA_VALID) != 0 {
            return Err(GsoError::BadVnetHeader);
        }
        match o.gso_type & !GSO_ECN {
            GSO_NONE | GSO_TCPV4 | GSO_TCPV6 => {}
            GSO_UDP | GSO_UDP_L4 => return Err(GsoError::Unsupported),
            _ => return Err(GsoError::BadVnetHeader),
        }
        o.check(frame_len)?;
        // Keep only what matters: a plain frame's size and offsets are noise.
        Ok(Offload {
            gso_size: if o.is_gso() { o.gso_size } else { 0 },
            csum_start: if o.needs_csum() { o.csum_start } else { 0 },
            csum_offset: if o.needs_csum() { o.csum_offset } else { 0 },
            ..o
        })
    }

    /// Checks the fields against a frame of `frame_len` bytes (they may
    /// come from an NF, which can write any metadata).
    pub fn check(&self, frame_len: usize) -> Result<(), GsoError> {
        if self.is_gso() {
            if !matches!(self.gso_type & !GSO_ECN, GSO_TCPV4 | GSO_TCPV6) {
                return Err(GsoError::Unsupported);
            }
            if self.gso_size == 0 {
                return Err(GsoError::GsoSizeZero);
            }
        }
        if self.needs_csum() {
            let field = usize::from(self.csum_start) + usize::from(self.csum_offset);
            if field + 2 > frame_len {
                return Err(GsoError::BadChecksumOffset);
            }
        }
        Ok(())
    }

    /// The virtio-net header to send before the frame (`hdr_len` 0: the
    /// kernel derives it from the checksum offsets).
    pub fn vnet(&self) -> [u8; VNET_HDR_LEN] {
        let mut h = [0u8; VNET_HDR_LEN];
        h[0] = self.flags & F_NEEDS_CSUM;
        h[1] = if self.is_gso() { self.gso_type } else { 0 };
        h[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        h[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        h[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        h
    }

    /// The same state for the frame with `n` bytes inserted before
    /// `csum_start` (a VLAN tag put back after the MAC addresses).
    pub fn shifted(self, n: u16) -> Offload {
        if self.needs_csum() {
            Offload {
                csum_start: self.csum_start.saturating_add(n),
                ..self
            }
        } else {
            self
        }
    }
}

/// Completes a partial checksum in place: sums `frame[csum_start..]` (whose
/// checksum field holds the pseudo-header sum) and stores the result, as
/// Linux's `skb_checksum_help` does (0 is sent as 0xFFFF, which UDP needs
/// and TCP accepts). A frame whose checksum is not partial is left alone.
pub fn complete_checksum(frame: &mut [u8], o: &Offload) -> Result<(), GsoError> {
    if !o.needs_csum() {
        return Ok(());
    }
    o.check(frame.len())?;
    let start = usize::from(o.csum_start);
    let at = start + usize::from(o.csum_offset);
    // The range starts at csum_start, so its sum is aligned to it.
    let c = checksum::finish(checksum::sum(&frame[start..]));
    let c = if c == 0 { 0xffff } else { c };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}
