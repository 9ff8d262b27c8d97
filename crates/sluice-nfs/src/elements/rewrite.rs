//! `rewrite`: sets header fields to fixed values with RFC 1624
//! incremental checksum updates (Click's `StoreEtherAddress` /
//! `IPRewriter` without state).
//!
//! Address fields apply to packets of their family only (an IPv4 `src_ip`
//! leaves IPv6 packets alone). Ports apply to TCP and UDP. Every change
//! updates the IPv4 header checksum and the transport checksum (the
//! pseudo-header covers the addresses); an IPv4 UDP checksum of 0 (none)
//! stays 0. An IPv4 first fragment (offset 0) holding the transport
//! header gets its ports and transport checksum updated too — that checksum
//! covers the reassembled datagram, pseudo-header included, as Linux's
//! stateless NAT (`act_nat`) updates it; later fragments (and IPv6
//! fragments) get their IP fields only.
//!
//! | config key | type | meaning |
//! |---|---|---|
//! | `src_mac`, `dst_mac` | MAC | Ethernet addresses |
//! | `src_ip`, `dst_ip` | IPv4 address | IPv4 addresses |
//! | `src_ip6`, `dst_ip6` | IPv6 address | IPv6 addresses |
//! | `src_port`, `dst_port` | u16 | TCP/UDP ports |
//! | `dscp` | 0-63 | DSCP (IPv4 TOS / IPv6 traffic class, ECN kept) |
//!
//! At least one key is required. Counters: `rewritten`. Drop reasons:
//! `malformed:<why>`.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::{checksum, Headers, IpProtocol, MacAddr};
use sluice_spec::SpecError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    src_mac: Option<String>,
    dst_mac: Option<String>,
    src_ip: Option<Ipv4Addr>,
    dst_ip: Option<Ipv4Addr>,
    src_ip6: Option<Ipv6Addr>,
    dst_ip6: Option<Ipv6Addr>,
    src_port: Option<u16>,
    dst_port: Option<u16>,
    dscp: Option<u8>,
}

/// Field values to write.
#[derive(Debug, Clone, Default)]
pub struct Rewrite {
    /// Ethernet source.
    pub src_mac: Option<MacAddr>,
    /// Ethernet destination.
    pub dst_mac: Option<MacAddr>,
    /// IPv4 source.
    pub src_ip: Option<Ipv4Addr>,
    /// IPv4 destination.
    pub dst_ip: Option<Ipv4Addr>,
    /// IPv6 source.
    pub src_ip6: Option<Ipv6Addr>,
    /// IPv6 destination.
    pub dst_ip6: Option<Ipv6Addr>,
    /// Transport source port.
    pub src_port: Option<u16>,
    /// Transport destination port.
    pub dst_port: Option<u16>,
    /// DSCP.
    pub dscp: Option<u8>,
}

/// Where the transport checksum is and whether it includes a pseudo-header.
struct L4Sum {
    at: usize,
    pseudo: bool,
    udp: bool,
}

/// Offset of the transport header if this packet carries one: any
/// non-fragment, and an IPv4 first fragment (offset 0) long enough to hold
/// the ports and the checksum. Its checksum covers the whole datagram with
/// the pseudo-header, so an address change must be folded into it, as
/// Linux's `act_nat` does (it skips only non-zero offsets); otherwise the
/// reassembled datagram fails its checksum. Later fragments carry no
/// transport header. (IPv6 first fragments are not handled: `Headers` does
/// not say where the fragment header is.)
fn transport_at(d: &[u8], h: &Headers) -> Option<usize> {
    let l4 = usize::from(h.l4_offset);
    if h.has_l4_header() {
        return Some(l4);
    }
    if h.ip_version != 4 || !h.fragment {
        return None;
    }
    let l3 = usize::from(h.l3_offset);
    if u16::from_be_bytes([d[l3 + 6], d[l3 + 7]]) & 0x1fff != 0 {
        return None;
    }
    let need = match h.l4_protocol {
        IpProtocol::TCP => 18,
        IpProtocol::UDP => 8,
        IpProtocol::ICMP => 4,
        _ => return None,
    };
    (usize::from(h.payload_len) >= need).then_some(l4)
}

fn l4_sum(d: &[u8], h: &Headers) -> Option<L4Sum> {
    let l4 = transport_at(d, h)?;
    match (h.l4_protocol, h.ip_version) {
        (IpProtocol::TCP, _) => Some(L4Sum {
            at: l4 + 16,
            pseudo: true,
            udp: false,
        }),
        // An IPv4 UDP checksum of 0 means none: nothing to update.
        (IpProtocol::UDP, 4) if d[l4 + 6] == 0 && d[l4 + 7] == 0 => None,
        (IpProtocol::UDP, _) => Some(L4Sum {
            at: l4 + 6,
            pseudo: true,
            udp: true,
        }),
        (IpProtocol::ICMP, 4) => Some(L4Sum {
            at: l4 + 2,
            pseudo: false,
            udp: false,
        }),
        (IpProtocol::ICMPV6, 6) => Some(L4Sum {
            at: l4 + 2,
            pseudo: true,
            udp: false,
        }),
        _ => None,
    }
}

/// Replaces `d[at..at+new.len()]` (an even offset within each checksummed
/// area) and folds the change into the checksums at `sums` (offset, is
/// UDP: a result of 0 is sent as 0xffff).
fn patch(d: &mut [u8], at: usize, new: &[u8], sums: &[(Option<usize>, bool)]) {
    let mut old = [0u8; 16];
    let n = new.len();
    old[..n].copy_from_slice(&d[at..at + n]);
    d[at..at + n].copy_from_slice(new);
    for &(s, udp) in sums {
        let Some(s) = s else { continue };
        let c = u16::from_be_bytes([d[s], d[s + 1]]);
        let mut c = checksum::update_bytes(c, &old[..n], new);
        if udp && c == 0 {
            c = 0xffff;
        }
        d[s..s + 2].copy_from_slice(&c.to_be_bytes());
    }
}

impl Rewrite {
    /// Applies the rewrite to `d` parsed into `h`; true if any field applied.
    pub fn apply(&self, d: &mut [u8], h: &Headers) -> bool {
        let mut any = false;
        if let Some(m) = self.dst_mac {
            d[0..6].copy_from_slice(&m.0);
            any = true;
        }
        if let Some(m) = self.src_mac {
            d[6..12].copy_from_slice(&m.0);
            any = true;
        }
        let l3 = usize::from(h.l3_offset);
        let sum = l4_sum(d, h);
        let (l4_at, udp) = sum.as_ref().map_or((None, false), |s| (Some(s.at), s.udp));
        let pseudo_at = sum.as_ref().filter(|s| s.pseudo).map(|s| s.at);
        match h.ip_version {
            4 => {
                let ip_sum = Some(l3 + 10);
                for (addr, off) in [(self.src_ip, 12), (self.dst_ip, 16)] {
                    if let Some(a) = addr {
                        // Header sum, and the transport sum (pseudo-header).
                        patch(
                            d,
                            l3 + off,
                            &a.octets(),
                            &[(ip_sum, false), (pseudo_at, udp)],
                        );
                        any = true;
                    }
                }
                if let Some(dscp) = self.dscp {
                    let new = [d[l3], (dscp << 2) | (d[l3 + 1] & 3)];
                    patch(d, l3, &new, &[(ip_sum, false)]);
                    any = true;
                }
            }
            6 => {
                for (addr, off) in [(self.src_ip6, 8), (self.dst_ip6, 24)] {
                    if let Some(a) = addr {
                        patch(d, l3 + off, &a.octets(), &[(pseudo_at, udp)]);
                        any = true;
                    }
                }
                if let Some(dscp) = self.dscp {
                    // Traffic class spans bits 4-11 of the first word.
                    let w = u16::from_be_bytes([d[l3], d[l3 + 1]]);
                    let w = (w & 0xf03f) | (u16::from(dscp) << 6);
                    d[l3..l3 + 2].copy_from_slice(&w.to_be_bytes());
                    any = true;
                }
            }
            _ => {}
        }
        let l4 = transport_at(d, h);
        if let (Some(l4), IpProtocol::TCP | IpProtocol::UDP) = (l4, h.l4_protocol) {
            for (port, off) in [(self.src_port, 0), (self.dst_port, 2)] {
                if let Some(p) = port {
                    patch(d, l4 + off, &p.to_be_bytes(), &[(l4_at, udp)]);
                    any = true;
                }
            }
        }
        any
    }
}

/// The rewriting NF.
pub struct RewriteNf(Rewrite);

impl NetworkFunction for RewriteNf {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut n = 0u64;
        batch.for_each(|p| match p.headers() {
            Ok(h) => {
                if self.0.apply(p.data_mut(), &h) {
                    n += 1;
                }
            }
            Err(e) => p.drop_malformed(e),
        });
        ctx.count(0, n);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    let mac = |f: &str, v: &Option<String>| -> Result<Option<MacAddr>, SpecError> {
        v.as_ref()
            .map(|s| {
                s.parse::<MacAddr>().map_err(|_| {
                    ctx.config
                        .error_at_path(f, format!("invalid MAC address `{s}`"))
                })
            })
            .transpose()
    };
    if cfg.dscp.is_some_and(|d| d > 63) {
        return Err(ctx.config.error_at_path("dscp", "dscp must be 0-63"));
    }
    let r = Rewrite {
        src_mac: mac("src_mac", &cfg.src_mac)?,
        dst_mac: mac("dst_mac", &cfg.dst_mac)?,
        src_ip: cfg.src_ip,
        dst_ip: cfg.dst_ip,
        src_ip6: cfg.src_ip6,
        dst_ip6: cfg.dst_ip6,
        src_port: cfg.src_port,
        dst_port: cfg.dst_port,
        dscp: cfg.dscp,
    };
    let none = r.src_mac.is_none()
        && r.dst_mac.is_none()
        && r.src_ip.is_none()
        && r.dst_ip.is_none()
        && r.src_ip6.is_none()
        && r.dst_ip6.is_none()
        && r.src_port.is_none()
        && r.dst_port.is_none()
        && r.dscp.is_none();
    if none {
        return Err(ctx.config.error("rewrite needs at least one field to set"));
    }
    Ok(Box::new(RewriteNf(r)))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "rewrite",
    summary: "sets MAC, IP, port and DSCP fields with incremental checksum updates",
    drop_reasons: &[],
    counters: &["rewritten"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
