//! `bridge`: an IEEE 802.1Q learning bridge over a set of sluice ports.
//!
//! Each frame is classified into a VLAN at its ingress port (an access
//! port puts untagged and priority-tagged frames in its VLAN; a trunk port
//! accepts frames tagged with its allowed VLANs, and untagged frames into
//! its `native` VLAN if it has one), its source MAC is learned per
//! (VLAN, MAC) — a known station seen on another port is a station move —
//! and its destination is looked up: a fresh entry sends the frame to that
//! one port (`ToPort`), a miss, broadcast or multicast floods it to every
//! other port of the VLAN, and a destination learned on the ingress port
//! itself is dropped as `same_port`. Tags are pushed, rewritten or popped
//! per egress port. Entries age out after `ageing_time_s` without traffic
//! from the station (Linux `ageing_time`, default 300 s): lookups ignore
//! stale entries and a sweep of a few table slots per batch removes them.
//! Frames to 802.1D reserved addresses (01:80:C2:00:00:0X: STP, LACP…) are
//! not forwarded (`link_local`), and frames with a multicast or zero source
//! MAC are dropped (`bad_src_mac`), as Linux does.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `ports[]` | port name, or `{name, vlan}` / `{name, trunk: [vids], native?}` | required, 2–64 | bridge ports; a bare name is an access port of VLAN 1 |
//! | `max_entries` | integer | 4096 | MAC table size (pre-allocated) |
//! | `ageing_time_s` | integer | 300 | idle time after which a station is forgotten |
//! | `default_ingress` | a bridge port's name | none | frames from ports outside the bridge (input-only kinds: `generator`, `pcap_in`) are taken as arriving on this port; without it they are dropped as `not_member` |
//!
//! Verdicts: `ToPort(p)` for every forwarded or flooded frame (copies of a
//! flooded frame are emitted with `ctx.emit`). Drop reasons: `same_port`,
//! `vlan_not_allowed`, `untagged`, `bad_src_mac`, `link_local`,
//! `not_member` (ingress port not in the bridge), `no_egress` (no other
//! port in the VLAN), `no_headroom` (a tag could not be pushed);
//! malformed frames (shorter than their headers) as
//! `malformed:ethernet_truncated`.
//!
//! ```yaml
//! - name: br0
//!   type: bridge
//!   config:
//!     ports:
//!       - { name: p0, vlan: 10 }
//!       - { name: p1, vlan: 20 }
//!       - { name: uplink, trunk: [10, 20] }
//! ```

pub mod config;
pub mod core;
pub mod table;
pub mod vlan;

use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, PortId, Verdict,
};
use sluice_packet::ParseError;
use sluice_spec::SpecError;

use self::core::{BrDrop, Bridge, Decision, Ingress};

const SAME_PORT: DropReason = DropReason::nf_local(0);
const VLAN_NOT_ALLOWED: DropReason = DropReason::nf_local(1);
const UNTAGGED: DropReason = DropReason::nf_local(2);
const BAD_SRC_MAC: DropReason = DropReason::nf_local(3);
const LINK_LOCAL: DropReason = DropReason::nf_local(4);
const NOT_MEMBER: DropReason = DropReason::nf_local(5);
const NO_EGRESS: DropReason = DropReason::nf_local(6);
const NO_HEADROOM: DropReason = DropReason::nf_local(7);

const C_FORWARDED: usize = 0;
const C_FLOODED: usize = 1;
const C_LEARNED: usize = 2;
const C_MOVED: usize = 3;
const C_AGED: usize = 4;
const C_ENTRIES: usize = 5;
const C_TABLE_FULL: usize = 6;
const C_FLOOD_COPIES: usize = 7;
const C_COPY_FAILED: usize = 8;

fn reason(d: BrDrop) -> DropReason {
    match d {
        BrDrop::SamePort => SAME_PORT,
        BrDrop::VlanNotAllowed => VLAN_NOT_ALLOWED,
        BrDrop::Untagged => UNTAGGED,
        BrDrop::BadSrcMac => BAD_SRC_MAC,
        BrDrop::LinkLocal => LINK_LOCAL,
        BrDrop::NotMember => NOT_MEMBER,
        BrDrop::NoEgress => NO_EGRESS,
        BrDrop::Truncated => DropReason::malformed(ParseError::EthernetTruncated),
    }
}

/// The bridge NF.
pub struct BridgeNf {
    /// The forwarding core.
    pub core: Bridge,
    ids: Vec<PortId>,
    /// Platform port id → bridge port index (`u8::MAX`: not a member).
    index_of: Vec<u8>,
    default_ingress: Option<usize>,
}

impl BridgeNf {
    /// Builds the NF from a decoded config.
    pub fn new(cfg: config::Compiled) -> BridgeNf {
        let max_id = cfg.ids.iter().map(|p| usize::from(p.0)).max().unwrap_or(0);
        let mut index_of = vec![u8::MAX; max_id + 1];
        for (i, id) in cfg.ids.iter().enumerate() {
            index_of[usize::from(id.0)] = i as u8;
        }
        BridgeNf {
            core: Bridge::new(&cfg.vlans, cfg.max_entries, cfg.ageing_ns),
            ids: cfg.ids,
            index_of,
            default_ingress: cfg.default_ingress,
        }
    }
}

/// The TCI a frame of `ing` leaves port `out` with, or `None` untagged.
#[inline]
fn egress_tci(core: &Bridge, out: usize, ing: &Ingress) -> Option<u16> {
    core.egress_tagged(out, ing.vlan)
        .then_some(u16::from(ing.pcp) << 13 | ing.vlan)
}

impl NetworkFunction for BridgeNf {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        self.core.sweep(now);
        let (mut copies, mut copy_failed) = (0u64, 0u64);
        batch.for_each(|p| {
            let port = match self.index_of.get(usize::from(p.port_in())) {
                Some(&i) if i != u8::MAX => usize::from(i),
                _ => match self.default_ingress {
                    Some(i) => i,
                    None => {
                        p.drop_with(NOT_MEMBER);
                        return;
                    }
                },
            };
            let (d, ing) = self.core.decide(p.data(), port, now);
            let out = match d {
                Decision::Drop(r) => {
                    p.drop_with(reason(r));
                    return;
                }
                Decision::Forward(o) => o,
                Decision::Flood(mask) => {
                    // The original goes to the lowest port of the mask; every
                    // other port gets a copy, made before the original is
                    // retagged. A copy that cannot be made (no spare buffer,
                    // or this call's emit budget is spent) is counted, not
                    // retried: flooding is best effort, as in any switch.
                    let first = mask.trailing_zeros() as usize;
                    let mut rest = mask & !(1u64 << first);
                    while rest != 0 {
                        let o = rest.trailing_zeros() as usize;
                        rest &= rest - 1;
                        let Some(mut c) = ctx.alloc_copy(p) else {
                            copy_failed += 1;
                            continue;
                        };
                        let tci = egress_tci(&self.core, o, &ing);
                        if !vlan::retag(ctx.view(&mut c).raw(), ing.tagged, tci) {
                            ctx.discard(c);
                            copy_failed += 1;
                            continue;
                        }
                        match ctx.emit(c, Verdict::ToPort(self.ids[o])) {
                            Ok(()) => copies += 1,
                            Err(c) => {
                                ctx.discard(c);
                                copy_failed += 1;
                            }
                        }
                    }
                    first
                }
            };
            let tci = egress_tci(&self.core, out, &ing);
            if vlan::retag(p.raw(), ing.tagged, tci) {
                p.set_verdict(Verdict::ToPort(self.ids[out]));
            } else {
                p.drop_with(NO_HEADROOM);
            }
        });
        self.publish(ctx, copies, copy_failed);
    }

    fn alloc_reserve(&self) -> u32 {
        // One full batch of flood copies.
        sluice_nf::MAX_BATCH as u32
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(1_000_000_000)
    }

    fn tick(&mut self, ctx: &mut Context<'_>) {
        // Idle ageing: the per-batch sweep only runs when frames arrive.
        // Once a second, up to 64 k slots (the whole default table; ≈ 1 ns
        // per slot).
        self.core.sweep_n(ctx.now_ns(), 65_536);
        self.publish(ctx, 0, 0);
    }

    fn reset(&mut self) {
        self.core.flush();
    }
}

impl BridgeNf {
    fn publish(&mut self, ctx: &mut Context<'_>, copies: u64, copy_failed: u64) {
        let s = self.core.take_stats();
        ctx.count(C_FORWARDED, s.forwarded);
        ctx.count(C_FLOODED, s.flooded);
        ctx.count(C_LEARNED, s.learned);
        ctx.count(C_MOVED, s.moved);
        ctx.count(C_AGED, s.aged);
        ctx.count(C_TABLE_FULL, s.table_full);
        ctx.count(C_FLOOD_COPIES, copies);
        ctx.count(C_COPY_FAILED, copy_failed);
        ctx.set_gauge(C_ENTRIES, self.core.entries() as u64);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(BridgeNf::new(config::compile(ctx)?)))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "bridge",
    summary: "802.1Q learning bridge over sluice ports: per-VLAN MAC learning with ageing, flooding, tag push/pop",
    drop_reasons: &[
        "same_port",
        "vlan_not_allowed",
        "untagged",
        "bad_src_mac",
        "link_local",
        "not_member",
        "no_egress",
        "no_headroom",
    ],
    counters: &[
        "forwarded",
        "flooded",
        "learned",
        "moved",
        "aged",
        "entries",
        "table_full",
        "flood_copies",
        "copy_failed",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
