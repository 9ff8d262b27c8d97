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
//!
//! Checkpoint (state version 1): the counters of every flow with traffic,
//! keyed by flow id, and the largest ended flow. Flow ids are the
//! daemon's, so a restore carries them within one daemon.

use sluice_nf::{
    Batch, BuildContext, Context, NetworkFunction, NfType, StateError, StateReader, StateWriter,
};
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

    fn state_version(&self) -> Option<u16> {
        Some(1)
    }

    fn checkpoint(&self, out: &mut StateWriter) {
        out.u64(self.largest_ended);
        out.len(self.active as usize);
        for (id, f) in self.flows.iter().enumerate().filter(|(_, f)| f.packets > 0) {
            out.u32(id as u32);
            out.u64(f.packets);
            out.u64(f.bytes);
        }
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), StateError> {
        let mut r = StateReader::new(state);
        let largest_ended = r.u64()?;
        let n = r.len(20)?;
        let mut flows = Vec::with_capacity(n);
        for _ in 0..n {
            let at = r.position();
            let (id, packets, bytes) = (r.u32()?, r.u64()?, r.u64()?);
            if id as usize >= self.flows.len() {
                return Err(r.invalid_at(
                    at,
                    format!(
                        "flow id {id} beyond this monitor's {} flows",
                        self.flows.len()
                    ),
                ));
            }
            if packets == 0 || flows.last().is_some_and(|&(last, _, _)| last >= id) {
                return Err(r.invalid_at(at, "flows must have packets and rising ids"));
            }
            flows.push((id, packets, bytes));
        }
        r.finish()?;
        self.reset();
        for (id, packets, bytes) in flows {
            self.flows[id as usize] = FlowCounters { packets, bytes };
        }
        self.active = n as u64;
        self.largest_ended = largest_ended;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_monitor_counts_on_from_the_checkpoint() {
        let mut m = Monitor::new(64);
        m.flows[5] = FlowCounters {
            packets: 2,
            bytes: 160,
        };
        m.flows[9] = FlowCounters {
            packets: 1,
            bytes: 40,
        };
        m.active = 2;
        m.largest_ended = 7;
        let mut w = StateWriter::new();
        m.checkpoint(&mut w);
        let state = w.into_bytes();

        let mut fresh = Monitor::new(64);
        fresh.restore(&state).unwrap();
        assert_eq!(fresh.flow(5), Some((2, 160)));
        assert_eq!(fresh.flow(9), Some((1, 40)));
        assert_eq!((fresh.active, fresh.largest_ended), (2, 7));
        let mut again = StateWriter::new();
        fresh.checkpoint(&mut again);
        assert_eq!(
            again.into_bytes(),
            state,
            "a restored state checkpoints the same"
        );
    }

    #[test]
    fn a_bad_state_leaves_the_monitor_untouched() {
        let mut m = Monitor::new(8);
        m.flows[3] = FlowCounters {
            packets: 4,
            bytes: 400,
        };
        m.active = 1;
        let mut w = StateWriter::new();
        w.u64(0);
        w.len(1);
        w.u32(8); // beyond 8 flows
        w.u64(1);
        w.u64(1);
        assert!(matches!(
            m.restore(&w.into_bytes()),
            Err(StateError::Invalid { .. })
        ));
        let mut full = Monitor::new(8);
        full.flows[5] = FlowCounters {
            packets: 2,
            bytes: 9,
        };
        full.active = 1;
        let mut good = StateWriter::new();
        full.checkpoint(&mut good);
        sluice_nf::state_check::check_restore(&mut m, &good.into_bytes());
        assert_eq!(m.flow(3), Some((4, 400)), "untouched");
        assert_eq!(m.active, 1);
    }
}
