//! `gre_encap`: wraps packets in outer Ethernet/IP/GRE headers (RFC 2784,
//! optional key of RFC 2890) towards one remote endpoint.
//!
//! `mode: eth` carries the whole Ethernet frame (protocol type 0x6558,
//! transparent Ethernet bridging, as Linux `gretap`); `mode: ip` carries
//! the IP packet only (protocol 0x0800 or 0x86DD, as Linux `gre`): the
//! inner Ethernet/VLAN header and any link padding are removed first, and
//! non-IP frames are dropped. Outer IPv4: DF set, id 0, header checksum
//! computed; IP protocol 47 over IPv4 or IPv6.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `mode` | `eth`/`ip` | `eth` | what is carried |
//! | `key` | u32 | none | GRE key (K bit) |
//! | `checksum` | bool | `false` | add the GRE checksum (C bit) |
//! | `local`, `remote` | IP | required | outer source / destination (same family) |
//! | `src_mac`, `dst_mac` | MAC | `00:00:00:00:00:00` | outer Ethernet addresses |
//! | `ttl`, `dscp`, `mtu` | | `64`, `0`, `1500` | as for `vxlan_encap` |
//!
//! Drop reasons: `mtu_exceeded`, `no_headroom`, `non_ip` (mode `ip`).
//! Counters: `encapsulated`, `mtu_exceeded`, `no_headroom`, `non_ip`.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, Packet};
use sluice_packet::gre::{self, GrePacket};
use sluice_spec::SpecError;

use super::outer::{inner_hash, Outer, OuterCfg};

const MTU_EXCEEDED: DropReason = DropReason::nf_local(0);
const NO_HEADROOM: DropReason = DropReason::nf_local(1);
const NON_IP: DropReason = DropReason::nf_local(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Eth,
    Ip,
}

#[derive(Debug, Deserialize)]
struct Config {
    #[serde(default = "d_mode")]
    mode: Mode,
    key: Option<u32>,
    #[serde(default)]
    checksum: bool,
    #[serde(flatten)]
    outer: OuterCfg,
}

fn d_mode() -> Mode {
    Mode::Eth
}

/// The GRE encapsulating NF.
pub struct GreEncap {
    outer: Outer,
    ip_mode: bool,
    key: Option<u32>,
    checksum: bool,
}

impl GreEncap {
    fn gre_len(&self) -> usize {
        gre::header_len(self.checksum, self.key.is_some(), false)
    }

    /// Encapsulates one packet; returns the counter index of the outcome.
    fn one(&self, p: &mut Packet<'_>) -> usize {
        let hash = inner_hash(p.data());
        let protocol = if self.ip_mode {
            let h = match p.headers() {
                Ok(h) if h.ip_version != 0 => h,
                _ => {
                    p.drop_with(NON_IP);
                    return 3;
                }
            };
            let ip_len = usize::from(h.payload_offset) + usize::from(h.payload_len)
                - usize::from(h.l3_offset);
            if ip_len + self.outer.ip_len() + self.gre_len() > usize::from(self.outer.mtu) {
                p.drop_with(MTU_EXCEEDED);
                return 1;
            }
            let raw = p.raw();
            let _ = raw.pull_front(usize::from(h.l3_offset));
            raw.set_len(ip_len);
            if h.ip_version == 4 {
                0x0800
            } else {
                0x86dd
            }
        } else {
            if p.data().len() + self.outer.ip_len() + self.gre_len() > usize::from(self.outer.mtu) {
                p.drop_with(MTU_EXCEEDED);
                return 1;
            }
            gre::PROTO_ETHERNET
        };
        let over = self.outer.len() + self.gre_len();
        if p.raw().push_front(over).is_none() {
            p.drop_with(NO_HEADROOM);
            return 2;
        }
        let pkt = p.data_mut();
        let o = self.outer.len();
        let payload = pkt.len() - o;
        self.outer.write(pkt, 47, payload, hash);
        let mut g = GrePacket::new_unchecked(&mut pkt[o..]);
        g.write_header(protocol, self.checksum, self.key);
        // Sums the whole inner packet when enabled (not benchmarked).
        g.fill_checksum();
        0
    }
}

impl NetworkFunction for GreEncap {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut c = [0u64; 4];
        batch.for_each(|p| c[self.one(p)] += 1);
        for (i, v) in c.into_iter().enumerate() {
            ctx.count(i, v);
        }
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    super::deny_unknown(ctx, &[super::OUTER_KEYS, &["mode", "key", "checksum"]])?;
    let cfg: Config = ctx.config.deserialize()?;
    Ok(Box::new(GreEncap {
        outer: Outer::from_cfg(ctx, &cfg.outer)?,
        ip_mode: cfg.mode == Mode::Ip,
        key: cfg.key,
        checksum: cfg.checksum,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "gre_encap",
    summary: "encapsulates Ethernet frames or IP packets in GRE (RFC 2784/2890)",
    drop_reasons: &["mtu_exceeded", "no_headroom", "non_ip"],
    counters: &["encapsulated", "mtu_exceeded", "no_headroom", "non_ip"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
