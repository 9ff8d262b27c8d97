//! `gre_decap`: strips outer Ethernet/IP/GRE headers (RFC 2784/2890).
//!
//! A packet is GRE when it is IPv4 or IPv6 with protocol 47 and not a
//! fragment. The header must have version 0 and no RFC 1701 routing or
//! recursion bits (RFC 2784 §2.1); a present checksum must verify; the
//! key must equal `key` (a tunnel without `key` accepts only packets
//! without a key, as Linux does); sequence numbers are skipped.
//! Protocol 0x6558 yields the inner Ethernet frame; 0x0800 / 0x86DD yield
//! the IP packet behind a new Ethernet header (`inner_src_mac` /
//! `inner_dst_mac`, default: the outer frame's addresses).
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `key` | u32 | none | expected GRE key |
//! | `inner_src_mac`, `inner_dst_mac` | MAC | outer ones | Ethernet header for IP payloads |
//! | `non_gre` | `drop`/`pass` | `drop` | what to do with packets that are not GRE |
//!
//! Drop reasons: `not_gre`, `bad_header` (version, reserved bits or
//! length), `bad_checksum`, `key_mismatch`, `unsupported_protocol`,
//! `inner_truncated`, plus `malformed:<why>`. Counters: `decapsulated`,
//! `not_gre`, `invalid`.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, Packet};
use sluice_packet::gre::{self, GrePacket};
use sluice_packet::{IpProtocol, MacAddr};
use sluice_spec::SpecError;

const NOT_GRE: DropReason = DropReason::nf_local(0);
const BAD_HEADER: DropReason = DropReason::nf_local(1);
const BAD_CHECKSUM: DropReason = DropReason::nf_local(2);
const KEY_MISMATCH: DropReason = DropReason::nf_local(3);
const UNSUPPORTED: DropReason = DropReason::nf_local(4);
const INNER_TRUNCATED: DropReason = DropReason::nf_local(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum NonGre {
    Drop,
    Pass,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    key: Option<u32>,
    inner_src_mac: Option<String>,
    inner_dst_mac: Option<String>,
    #[serde(default = "d_drop")]
    non_gre: NonGre,
}

fn d_drop() -> NonGre {
    NonGre::Drop
}

/// The GRE decapsulating NF.
pub struct GreDecap {
    key: Option<u32>,
    inner_src_mac: Option<MacAddr>,
    inner_dst_mac: Option<MacAddr>,
    pass_non_gre: bool,
}

impl GreDecap {
    /// Decapsulates one packet; returns 0 (done), 1 (not GRE), 2 (invalid).
    fn one(&self, p: &mut Packet<'_>) -> usize {
        let h = match p.headers() {
            Ok(h) => h,
            Err(e) => {
                p.drop_malformed(e);
                return 2;
            }
        };
        if h.ip_version == 0 || h.fragment || h.l4_protocol != IpProtocol::GRE {
            if !self.pass_non_gre {
                p.drop_with(NOT_GRE);
            }
            return 1;
        }
        let data = p.data();
        let start = usize::from(h.l4_offset);
        let end = usize::from(h.payload_offset) + usize::from(h.payload_len);
        let Some(bytes) = data.get(start..end) else {
            p.drop_with(BAD_HEADER);
            return 2;
        };
        let g = match GrePacket::new_checked(bytes) {
            Ok(g) => g,
            Err(_) => {
                p.drop_with(BAD_HEADER);
                return 2;
            }
        };
        if !g.verify_checksum() {
            p.drop_with(BAD_CHECKSUM);
            return 2;
        }
        if g.key() != self.key {
            p.drop_with(KEY_MISMATCH);
            return 2;
        }
        let (hl, proto, inner_len) = (g.header_len(), g.protocol(), g.payload().len());
        let inner_start = start + hl;
        match proto {
            gre::PROTO_ETHERNET => {
                if inner_len < 14 {
                    p.drop_with(INNER_TRUNCATED);
                    return 2;
                }
                let raw = p.raw();
                let _ = raw.pull_front(inner_start);
                raw.set_len(inner_len);
            }
            0x0800 | 0x86dd => {
                if inner_len < 20 {
                    p.drop_with(INNER_TRUNCATED);
                    return 2;
                }
                let mut eth = [0u8; 14];
                eth[..12].copy_from_slice(&data[..12]);
                if let Some(m) = self.inner_dst_mac {
                    eth[..6].copy_from_slice(&m.0);
                }
                if let Some(m) = self.inner_src_mac {
                    eth[6..12].copy_from_slice(&m.0);
                }
                eth[12..].copy_from_slice(&proto.to_be_bytes());
                // inner_start ≥ 14 + 20 + 4, so the new header fits in
                // front of the inner packet inside the old headers.
                let raw = p.raw();
                let _ = raw.pull_front(inner_start - 14);
                raw.set_len(inner_len + 14);
                p.data_mut()[..14].copy_from_slice(&eth);
            }
            _ => {
                p.drop_with(UNSUPPORTED);
                return 2;
            }
        }
        0
    }
}

impl NetworkFunction for GreDecap {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut c = [0u64; 3];
        batch.for_each(|p| c[self.one(p)] += 1);
        for (i, v) in c.into_iter().enumerate() {
            ctx.count(i, v);
        }
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
    Ok(Box::new(GreDecap {
        key: cfg.key,
        inner_src_mac: mac("inner_src_mac", &cfg.inner_src_mac)?,
        inner_dst_mac: mac("inner_dst_mac", &cfg.inner_dst_mac)?,
        pass_non_gre: cfg.non_gre == NonGre::Pass,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "gre_decap",
    summary: "strips GRE (RFC 2784/2890) outer headers",
    drop_reasons: &[
        "not_gre",
        "bad_header",
        "bad_checksum",
        "key_mismatch",
        "unsupported_protocol",
        "inner_truncated",
    ],
    counters: &["decapsulated", "not_gre", "invalid"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
