//! The outer Ethernet + IPv4/IPv6 header every encapsulating NF writes,
//! and the config keys that describe it.

use std::net::IpAddr;

use serde::Deserialize;
use sluice_nf::BuildContext;
use sluice_packet::checksum;
use sluice_packet::MacAddr;
use sluice_spec::SpecError;

/// Outer header config keys shared by `vxlan_encap` and `gre_encap`.
#[derive(Debug, Deserialize)]
pub struct OuterCfg {
    /// Local tunnel endpoint.
    pub local: String,
    /// Remote tunnel endpoint (same family as `local`).
    pub remote: String,
    /// Outer source MAC.
    #[serde(default = "zero_mac")]
    pub src_mac: String,
    /// Outer destination MAC (the next hop towards `remote`).
    #[serde(default = "zero_mac")]
    pub dst_mac: String,
    /// Outer TTL / hop limit.
    #[serde(default = "d_ttl")]
    pub ttl: u8,
    /// Outer DSCP (6 bits).
    #[serde(default)]
    pub dscp: u8,
    /// Largest outer IP packet; longer results are dropped (RFC 7348 §4.3:
    /// VTEPs must not fragment).
    #[serde(default = "d_mtu")]
    pub mtu: u16,
}

fn zero_mac() -> String {
    "00:00:00:00:00:00".into()
}
fn d_ttl() -> u8 {
    64
}
fn d_mtu() -> u16 {
    1500
}

/// The outer header template.
#[derive(Debug, Clone, Copy)]
pub struct Outer {
    /// Local endpoint.
    pub src: IpAddr,
    /// Remote endpoint.
    pub dst: IpAddr,
    /// Outer source MAC.
    pub src_mac: MacAddr,
    /// Outer destination MAC.
    pub dst_mac: MacAddr,
    /// TTL / hop limit.
    pub ttl: u8,
    /// DSCP.
    pub dscp: u8,
    /// Largest outer IP packet.
    pub mtu: u16,
}

impl Outer {
    /// Decodes and checks the keys of `cfg` (errors name the field).
    pub fn from_cfg(ctx: &BuildContext<'_>, cfg: &OuterCfg) -> Result<Outer, SpecError> {
        let at = |f: &str, m: String| ctx.config.error_at_path(f, m);
        let ip = |f: &str, s: &str| {
            s.parse::<IpAddr>()
                .map_err(|_| at(f, format!("invalid IP address `{s}`")))
        };
        let mac = |f: &str, s: &str| {
            s.parse::<MacAddr>().map_err(|_| {
                at(
                    f,
                    format!("invalid MAC address `{s}` (expected aa:bb:cc:dd:ee:ff)"),
                )
            })
        };
        let (src, dst) = (ip("local", &cfg.local)?, ip("remote", &cfg.remote)?);
        if src.is_ipv4() != dst.is_ipv4() {
            return Err(at(
                "remote",
                "`local` and `remote` must be the same IP family".into(),
            ));
        }
        if cfg.dscp > 63 {
            return Err(at(
                "dscp",
                format!("dscp {} is out of range 0-63", cfg.dscp),
            ));
        }
        if cfg.ttl == 0 {
            return Err(at("ttl", "ttl must be 1-255".into()));
        }
        if cfg.mtu < 576 {
            return Err(at(
                "mtu",
                format!("mtu {} is below the 576-byte minimum", cfg.mtu),
            ));
        }
        Ok(Outer {
            src,
            dst,
            src_mac: mac("src_mac", &cfg.src_mac)?,
            dst_mac: mac("dst_mac", &cfg.dst_mac)?,
            ttl: cfg.ttl,
            dscp: cfg.dscp,
            mtu: cfg.mtu,
        })
    }

    /// Outer Ethernet + IP header length.
    pub fn len(&self) -> usize {
        14 + self.ip_len()
    }

    /// Always false (an outer header is never empty); for clippy.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Outer IP header length.
    pub fn ip_len(&self) -> usize {
        if self.src.is_ipv4() {
            20
        } else {
            40
        }
    }

    /// Writes Ethernet and IP headers into `out[..self.len()]` for an IP
    /// payload of `payload_len` bytes of protocol `proto`; `flow_label`
    /// fills the IPv6 flow label (RFC 6438). The IPv4 header checksum is
    /// computed; DF is set and the id is 0 (RFC 6864 atomic datagram).
    pub fn write(&self, out: &mut [u8], proto: u8, payload_len: usize, flow_label: u32) {
        out[0..6].copy_from_slice(&self.dst_mac.0);
        out[6..12].copy_from_slice(&self.src_mac.0);
        let ethertype: u16 = if self.src.is_ipv4() { 0x0800 } else { 0x86dd };
        out[12..14].copy_from_slice(&ethertype.to_be_bytes());
        let ip = &mut out[14..];
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = (20 + payload_len) as u16;
                ip[0] = 0x45;
                ip[1] = self.dscp << 2;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
                ip[8] = self.ttl;
                ip[9] = proto;
                ip[10..12].copy_from_slice(&[0, 0]);
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let c = checksum::checksum(&ip[..20]);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            (s, d) => {
                let v = 6u32 << 28 | u32::from(self.dscp) << 22 | (flow_label & 0xf_ffff);
                ip[0..4].copy_from_slice(&v.to_be_bytes());
                ip[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
                ip[6] = proto;
                ip[7] = self.ttl;
                ip[8..24].copy_from_slice(&v6(s).octets());
                ip[24..40].copy_from_slice(&v6(d).octets());
            }
        }
    }
}

fn v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// A 32-bit hash of the inner frame's flow (symmetric 5-tuple hash), or
/// of its Ethernet header for non-IP frames: the entropy source for the
/// VXLAN UDP source port (RFC 7348 §5) and the IPv6 flow label.
pub fn inner_hash(frame: &[u8]) -> u32 {
    match sluice_packet::flow_key(frame) {
        Ok(k) => k.symmetric_hash(),
        Err(_) => {
            // FNV-1a over the MACs and EtherType.
            let mut h: u32 = 0x811c_9dc5;
            for &b in frame.iter().take(14) {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            h
        }
    }
}
