//! `policer`: three-colour metering and policing (RFC 2697 srTCM, RFC 2698
//! trTCM), per flow, per DSCP class or globally; and `shaper`, a token
//! bucket shaper with a bounded FIFO queue (see [`shaper`]).
//!
//! Every packet is metered by its frame length (Ethernet header included,
//! FCS excluded, as `tc police` counts on egress) against the bucket pair
//! of its key, coloured green/yellow/red, and then passed, re-marked (new
//! DSCP; IPv4 header checksum patched incrementally, IPv6 traffic class
//! rewritten) or dropped according to `actions`. In colour-aware mode the
//! packet's DSCP gives its pre-colour (RFC 2697 §3, RFC 2698 §3): a
//! packet can only keep or worsen its colour.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `meter` | `srtcm`/`trtcm` | `srtcm` | RFC 2697 or RFC 2698 |
//! | `cir` | rate | required | committed information rate |
//! | `cbs` | size | required | committed burst size |
//! | `ebs` | size | 0 | excess burst size (srtcm) |
//! | `pir`, `pbs` | rate, size | required for trtcm | peak rate and burst |
//! | `key` | `global`/`flow`/`dscp` | `global` | what gets its own buckets |
//! | `classes[]` | `{dscp: [..], cir, cbs, …}` | — | `key: dscp` classes, each with its own rates |
//! | `unclassified` | `pass`/`drop` | `pass` | packets in no class (`key: dscp`, non-IP) |
//! | `color_aware` | `{yellow: [dscp], red: [dscp]}` | absent (colour-blind) | pre-colours by DSCP, others green |
//! | `actions.green/yellow/red` | `pass`/`drop`/`{mark: dscp}` | `pass`/`pass`/`drop` | per colour |
//!
//! Rates are bytes per second as numbers or tc strings (`10mbit`); sizes
//! bytes or tc strings (`15kb`). Drop reasons: `green`, `yellow`, `red`
//! (the colour of the dropped packet), `unclassified`.
//!
//! ```yaml
//! - name: police
//!   type: policer
//!   config:
//!     meter: trtcm
//!     cir: 10mbit
//!     cbs: 16kb
//!     pir: 20mbit
//!     pbs: 32kb
//!     key: flow
//!     actions: { green: pass, yellow: { mark: 10 }, red: drop }
//! ```

pub mod config;
pub mod dscp;
pub mod meter;
pub mod rate;
pub mod shaper;

use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_spec::SpecError;

use config::{Action, Compiled, Key};
use meter::{Buckets, Color};

const C_GREEN: usize = 0;
const C_YELLOW: usize = 1;
const C_RED: usize = 2;
const C_GREEN_BYTES: usize = 3;
const C_YELLOW_BYTES: usize = 4;
const C_RED_BYTES: usize = 5;
const C_MARKED: usize = 6;
const C_UNCLASSIFIED: usize = 7;

const DROP_BY_COLOR: [DropReason; 3] = [
    DropReason::nf_local(0),
    DropReason::nf_local(1),
    DropReason::nf_local(2),
];
const UNCLASSIFIED: DropReason = DropReason::nf_local(3);

/// The policer NF.
pub struct Policer {
    cfg: Compiled,
    /// global: 1; dscp: one per class; flow: one per flow id plus one for
    /// frames without a flow (non-IP), last.
    buckets: Vec<Buckets>,
}

impl Policer {
    /// Builds a policer from a decoded config, with `flow_capacity` flows.
    pub fn new(cfg: Compiled, flow_capacity: u32) -> Policer {
        let n = match cfg.key {
            Key::Global => 1,
            Key::Dscp => cfg.meters.len(),
            Key::Flow => flow_capacity as usize + 1,
        };
        Policer {
            cfg,
            buckets: vec![Buckets::default(); n],
        }
    }
}

impl NetworkFunction for Policer {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let mut pkts = [0u64; 3];
        let mut bytes = [0u64; 3];
        let (mut marked, mut unclassified) = (0u64, 0u64);
        let cfg = &self.cfg;
        let buckets = &mut self.buckets;
        let last = buckets.len() - 1;
        batch.for_each(|p| {
            let h = match p.headers() {
                Ok(h) => h,
                Err(e) => {
                    p.drop_malformed(e);
                    return;
                }
            };
            let l3 = usize::from(h.l3_offset);
            let dscp = dscp::read(p.data(), l3, h.ip_version);
            let (m, b) = match cfg.key {
                Key::Global => (0, 0),
                Key::Flow => (0, (p.flow_id() as usize).min(last)),
                Key::Dscp => match dscp.map(|d| cfg.class_of_dscp[usize::from(d)]) {
                    Some(c) if c != u8::MAX => (usize::from(c), usize::from(c)),
                    _ => {
                        unclassified += 1;
                        if cfg.drop_unclassified {
                            p.drop_with(UNCLASSIFIED);
                        }
                        return;
                    }
                },
            };
            let pre = cfg
                .pre_color
                .as_ref()
                .map(|t| dscp.map_or(Color::Green, |d| t[usize::from(d)]));
            let len = p.data().len() as u64;
            let color = cfg.meters[m].color(&mut buckets[b], now, len, pre);
            let ci = color as usize;
            pkts[ci] += 1;
            bytes[ci] += len;
            match cfg.actions[ci] {
                Action::Pass => {}
                Action::Drop => p.drop_with(DROP_BY_COLOR[ci]),
                Action::Mark(d) => {
                    if dscp::write(p.data_mut(), l3, h.ip_version, d) {
                        marked += 1;
                    }
                }
            }
        });
        for (i, c) in [C_GREEN, C_YELLOW, C_RED].into_iter().enumerate() {
            ctx.count(c, pkts[i]);
        }
        for (i, c) in [C_GREEN_BYTES, C_YELLOW_BYTES, C_RED_BYTES]
            .into_iter()
            .enumerate()
        {
            ctx.count(c, bytes[i]);
        }
        ctx.count(C_MARKED, marked);
        ctx.count(C_UNCLASSIFIED, unclassified);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        if self.cfg.key == Key::Flow {
            let last = self.buckets.len() - 1;
            if (flow_id as usize) < last {
                self.buckets[flow_id as usize] = Buckets::default();
            }
        }
    }

    fn reset(&mut self) {
        self.buckets.fill(Buckets::default());
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Policer::new(
        config::compile(ctx)?,
        ctx.flow_capacity,
    )))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "policer",
    summary: "colours packets with srTCM (RFC 2697) or trTCM (RFC 2698) per flow, DSCP class or globally, and passes, re-marks or drops each colour",
    drop_reasons: &["green", "yellow", "red", "unclassified"],
    counters: &[
        "green",
        "yellow",
        "red",
        "green_bytes",
        "yellow_bytes",
        "red_bytes",
        "marked",
        "unclassified",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};

/// Colour names by `Color as usize`, for reports and tests.
pub const COLOR_NAMES: [&str; 3] = ["green", "yellow", "red"];
