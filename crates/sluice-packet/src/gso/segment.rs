//! Software GSO for TCP: cuts a super-packet into wire segments the way
//! Linux's `tcp_gso_segment`/`skb_segment` do. Every segment gets a copy of
//! the link, network and TCP headers and its share of the payload; then
//! the IPv4 total length, identification (the super-packet's id plus the
//! segment number) and header checksum, or the IPv6 payload length, the TCP
//! sequence number (plus `k × gso_size`), the flags (FIN and PSH only on
//! the last segment, CWR only on the first) and a complete TCP checksum.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{GsoError, Offload, GSO_ECN, GSO_TCPV4, GSO_TCPV6, MAX_SEGMENTS};
use crate::checksum;
use crate::ip::IpProtocol;
use crate::parse::parse;

const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;

/// How one super-packet is cut: computed once by [`segment`], then each
/// segment is written with [`Segments::write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segments {
    l3: usize,
    l4: usize,
    hdr: usize,
    payload: usize,
    mss: usize,
    count: usize,
    ipv4: bool,
}

/// Plans the segmentation of `frame`, a TCP super-packet described by `o`.
/// A frame whose payload fits one segment gives one segment (its
/// checksums are completed all the same).
pub fn segment(frame: &[u8], o: &Offload) -> Result<Segments, GsoError> {
    o.check(frame.len())?;
    let want_v4 = match o.gso_type & !GSO_ECN {
        GSO_TCPV4 => true,
        GSO_TCPV6 => false,
        _ => return Err(GsoError::Unsupported),
    };
    let h = parse(frame).map_err(|_| GsoError::BadHeaders)?;
    if h.l4_protocol != IpProtocol::TCP || h.fragment || (h.ip_version == 4) != want_v4 {
        return Err(GsoError::BadHeaders);
    }
    let mss = usize::from(o.gso_size);
    let payload = usize::from(h.payload_len);
    let count = payload.div_ceil(mss).max(1);
    if count > MAX_SEGMENTS {
        return Err(GsoError::TooManySegments);
    }
    Ok(Segments {
        l3: usize::from(h.l3_offset),
        l4: usize::from(h.l4_offset),
        hdr: usize::from(h.payload_offset),
        payload,
        mss,
        count,
        ipv4: want_v4,
    })
}

impl Segments {
    /// Number of segments.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes of headers (link, network, TCP) every segment starts with.
    pub fn header_len(&self) -> usize {
        self.hdr
    }

    /// Payload bytes of segment `k`.
    fn chunk(&self, k: usize) -> std::ops::Range<usize> {
        let start = (k * self.mss).min(self.payload);
        start..(start + self.mss).min(self.payload)
    }

    /// Length of segment `k` (0 past the last).
    pub fn len_of(&self, k: usize) -> usize {
        if k >= self.count {
            return 0;
        }
        self.hdr + self.chunk(k).len()
    }

    /// Writes segment `k` of `frame` (the frame [`segment`] planned) into
    /// `out`; returns its length.
    pub fn write(&self, frame: &[u8], k: usize, out: &mut [u8]) -> Result<usize, GsoError> {
        if k >= self.count {
            return Err(GsoError::TooManySegments);
        }
        let chunk = self.chunk(k);
        let len = self.hdr + chunk.len();
        let body = frame
            .get(self.hdr + chunk.start..self.hdr + chunk.end)
            .ok_or(GsoError::BadHeaders)?;
        let head = frame.get(..self.hdr).ok_or(GsoError::BadHeaders)?;
        let out = out.get_mut(..len).ok_or(GsoError::NoRoom)?;
        out[..self.hdr].copy_from_slice(head);
        out[self.hdr..].copy_from_slice(body);
        let l3 = self.l3;
        let l4 = self.l4;
        let tcp_len = len - l4;
        if self.ipv4 {
            let ihl = usize::from(out[l3] & 0x0f) * 4;
            let total = (len - l3) as u16;
            out[l3 + 2..l3 + 4].copy_from_slice(&total.to_be_bytes());
            let id = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]).wrapping_add(k as u16);
            out[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
            out[l3 + 10..l3 + 12].fill(0);
            let c = checksum::checksum(&out[l3..l3 + ihl]);
            out[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            let pl = (len - l3 - 40) as u16;
            out[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
        }
        let seq = u32::from_be_bytes([out[l4 + 4], out[l4 + 5], out[l4 + 6], out[l4 + 7]])
            .wrapping_add((k * self.mss) as u32);
        out[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = out[l4 + 13];
        if k + 1 < self.count {
            flags &= !(FIN | PSH);
        }
        if k > 0 {
            flags &= !CWR;
        }
        out[l4 + 13] = flags;
        out[l4 + 16..l4 + 18].fill(0);
        let pseudo = if self.ipv4 {
            let a = |i: usize| Ipv4Addr::new(out[i], out[i + 1], out[i + 2], out[i + 3]);
            checksum::pseudo_header_v4(&a(l3 + 12), &a(l3 + 16), 6, tcp_len as u16)
        } else {
            let a = |i: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&out[i..i + 16]);
                Ipv6Addr::from(b)
            };
            checksum::pseudo_header_v6(&a(l3 + 8), &a(l3 + 24), 6, tcp_len as u32)
        };
        let c = checksum::checksum_with(pseudo, &out[l4..]);
        out[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
        Ok(len)
    }
}
