//! `monitor`: per-flow packet and byte counters.
//!
//! Keeps a counter pair per flow id (a preallocated table sized to the flow
//! table, so the packet path never allocates) and publishes totals:
//!
//! | counter | meaning |
//! |---|---|
//! | `packets` / `bytes` | traffic seen |
//! | `flows_active` | flows with traffic and no flow end yet (gauge) |
//! | `flows_ended` | flow-end events received |
//! | `largest_flow_packets` | packets of the largest flow that has ended |
//!
//! No config keys. Ports: one in, one out. Every packet passes.

use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

const C_PACKETS: usize = 0;
const C_BYTES: usize = 1;
const C_ACTIVE: usize = 2;
const C_ENDED: usize = 3;
const C_LARGEST: usize = 4;

#[derive(Clone, Copy, Default)]
struct FlowCounters {
    packets: u64,
    bytes: u64,
}

/// The monitor NF.
pub struct Monitor {
    flows: Vec<FlowCounters>,
    active: u64,
    largest_ended: u64,
}

impl Monitor {
    /// A monitor for flow ids below `capacity`.
    pub fn new(capacity: u32) -> Self {
        Monitor {
            flows: vec![FlowCounters::default(); capacity as usize],
            active: 0,
            largest_ended: 0,
        }
    }

    /// Packets and bytes counted for flow `id` so far.
    pub fn flow(&self, id: u32) -> Option<(u64, u64)> {
        self.flows.get(id as usize).map(|f| (f.packets, f.bytes))
    }
}

impl NetworkFunction for Monitor {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut packets, mut bytes) = (0u64, 0u64);
        let flows = &mut self.flows;
        let active = &mut self.active;
        batch.for_each(|p| {
            let len = p.data().len() as u64;
            packets += 1;
            bytes += len;
            if let Some(f) = flows.get_mut(p.flow_id() as usize) {
                if f.packets == 0 {
                    *active += 1;
                }
                f.packets += 1;
                f.bytes += len;
            }
        });
        ctx.count(C_PACKETS, packets);
        ctx.count(C_BYTES, bytes);
        ctx.set_gauge(C_ACTIVE, self.active);
    }

    fn flow_end(&mut self, flow_id: u32, ctx: &mut Context<'_>) {
        if let Some(f) = self.flows.get_mut(flow_id as usize) {
            if f.packets > 0 {
                self.active -= 1;
                self.largest_ended = self.largest_ended.max(f.packets);
            }
            *f = FlowCounters::default();
        }
        ctx.count(C_ENDED, 1);
        ctx.set_gauge(C_ACTIVE, self.active);
        ctx.set_gauge(C_LARGEST, self.largest_ended);
    }

    fn reset(&mut self) {
        // Only a flow still counted (`active`) holds counters: after its
        // flow's end a per-flow instance resets in O(1).
        if self.active > 0 {
            self.flows
                .iter_mut()
                .for_each(|f| *f = FlowCounters::default());
        }
        self.active = 0;
        self.largest_ended = 0;
    }

    fn resets(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    if !ctx.config.is_null() && ctx.config.as_map().is_none_or(|m| !m.is_empty()) {
        return Err(ctx.config.error("monitor takes no config keys"));
    }
    Ok(Box::new(Monitor::new(ctx.flow_capacity)))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "monitor",
    summary: "counts packets and bytes per flow",
    drop_reasons: &[],
    counters: &[
        "packets",
        "bytes",
        "flows_active",
        "flows_ended",
        "largest_flow_packets",
    ],
    build,
    // Judges headers only: one verdict per super-packet, as netfilter.
    frames: sluice_nf::FrameNeeds::SuperPackets,
};
