//! `checksum_fix`: recomputes the IPv4 header checksum and the TCP, UDP,
//! ICMP and ICMPv6 checksums from scratch (after an NF or a test tool
//! wrote headers without fixing them).
//!
//! Transport checksums cover the segment as bounded by the IP length
//! (link padding excluded) with the RFC 793/768/8200 pseudo-header. UDP
//! over IPv4 with checksum 0 ("none", RFC 768) keeps 0 unless
//! `udp_zero: compute`. IP fragments get only the IPv4 header checksum
//! (their transport checksum covers the whole datagram). SCTP (CRC32c) is
//! left alone. Non-IP frames pass unchanged.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `udp_zero` | `keep`/`compute` | `keep` | IPv4 UDP datagrams without a checksum |
//!
//! Counters: `fixed` (packets with a checksum that changed), `checked`.
//! Drop reasons: `malformed:<why>`.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::{checksum, Headers, IpProtocol};
use sluice_spec::SpecError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum UdpZero {
    Keep,
    Compute,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default = "d_keep")]
    udp_zero: UdpZero,
}

fn d_keep() -> UdpZero {
    UdpZero::Keep
}

/// The checksum fixing NF.
pub struct ChecksumFix {
    compute_udp_zero: bool,
}

/// Stores `v` where `old` was (the field is zero while summing).
fn set(d: &mut [u8], at: usize, old: [u8; 2], v: u16) -> bool {
    d[at..at + 2].copy_from_slice(&v.to_be_bytes());
    old != v.to_be_bytes()
}

/// Zeroes a checksum field, returning its old bytes.
fn take(d: &mut [u8], at: usize) -> [u8; 2] {
    let old = [d[at], d[at + 1]];
    d[at..at + 2].fill(0);
    old
}

/// Recomputes every checksum of the frame parsed into `h`; true if any
/// changed. Needs a frame `parse` accepted.
pub fn fix(d: &mut [u8], h: &Headers, compute_udp_zero: bool) -> bool {
    let l3 = usize::from(h.l3_offset);
    let l4 = usize::from(h.l4_offset);
    let end = usize::from(h.payload_offset) + usize::from(h.payload_len);
    let mut changed = false;
    let pseudo = match h.ip_version {
        4 => {
            let old = take(d, l3 + 10);
            let c = checksum::checksum(&d[l3..l4]);
            changed |= set(d, l3 + 10, old, c);
            let (s, t) = (
                <[u8; 4]>::try_from(&d[l3 + 12..l3 + 16]),
                <[u8; 4]>::try_from(&d[l3 + 16..l3 + 20]),
            );
            let (Ok(s), Ok(t)) = (s, t) else {
                return changed;
            };
            checksum::pseudo_header_v4(&s.into(), &t.into(), h.l4_protocol.0, (end - l4) as u16)
        }
        6 => {
            let (s, t) = (
                <[u8; 16]>::try_from(&d[l3 + 8..l3 + 24]),
                <[u8; 16]>::try_from(&d[l3 + 24..l3 + 40]),
            );
            let (Ok(s), Ok(t)) = (s, t) else {
                return changed;
            };
            checksum::pseudo_header_v6(&s.into(), &t.into(), h.l4_protocol.0, (end - l4) as u32)
        }
        _ => return false,
    };
    if !h.has_l4_header() {
        return changed;
    }
    let (at, pseudo, udp) = match (h.l4_protocol, h.ip_version) {
        (IpProtocol::TCP, _) => (16, pseudo, false),
        (IpProtocol::UDP, v) => {
            if v == 4 && !compute_udp_zero && d[l4 + 6] == 0 && d[l4 + 7] == 0 {
                return changed;
            }
            (6, pseudo, true)
        }
        (IpProtocol::ICMP, 4) => (2, 0, false),
        (IpProtocol::ICMPV6, 6) => (2, pseudo, false),
        _ => return changed,
    };
    let old = take(d, l4 + at);
    let mut c = checksum::checksum_with(pseudo, &d[l4..end]);
    if udp && c == 0 {
        c = 0xffff;
    }
    changed | set(d, l4 + at, old, c)
}

impl NetworkFunction for ChecksumFix {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut fixed, mut checked) = (0u64, 0u64);
        batch.for_each(|p| {
            let h = match p.headers() {
                Ok(h) => h,
                Err(e) => {
                    p.drop_malformed(e);
                    return;
                }
            };
            if h.ip_version == 0 {
                return;
            }
            checked += 1;
            // The transport checksum sums the whole segment: the cost grows
            // with the packet length (not benchmarked).
            if fix(p.data_mut(), &h, self.compute_udp_zero) {
                fixed += 1;
            }
        });
        ctx.count(0, fixed);
        ctx.count(1, checked);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    Ok(Box::new(ChecksumFix {
        compute_udp_zero: cfg.udp_zero == UdpZero::Compute,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "checksum_fix",
    summary: "recomputes IPv4 header and TCP/UDP/ICMP checksums",
    drop_reasons: &[],
    counters: &["fixed", "checked"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
