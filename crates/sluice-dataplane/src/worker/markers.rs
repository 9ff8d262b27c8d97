//! Flow end markers: an ending flow's marker travels its route after the
//! flow's packets, so every NF sees `flow_end` once, in order.

use sluice_nf::runtime::run_flow_end;

use super::Worker;
use crate::flow_table::FlowState;
use crate::nf_rt::Exec;
use crate::plan::Hop;

impl<'a> Worker<'a> {
    /// Starts flow `id`'s end marker (the flow just ended) on the current
    /// route of its chain.
    pub(super) fn start_marker(&mut self, id: u32, now: u64) {
        // A flow kept on a held route (a rollout) ends on it.
        let route = self.flows.entry(id).and_then(|e| {
            let chain = self.plan.chain(e.chain)?;
            Some(self.held.route(e.chain, id).unwrap_or(chain.route))
        });
        match (route, self.flows.entry_mut(id)) {
            (Some(r), Some(e)) => {
                e.marker_route = r;
                // At no NF until `advance_marker` hands it to one.
                e.marker_nf = u16::MAX;
            }
            _ => {
                // Its chain is gone: no NF of it waits for the end.
                self.release_flow(id);
                return;
            }
        }
        self.advance_marker(id, 0, now);
    }

    /// Moves flow `id`'s end marker to hop `hop` of its route and onwards:
    /// inline NFs get `flow_end` at once, a process NF gets an event in its
    /// ring (ordered after the flow's packets), and at the output port the
    /// flow's slot is released.
    pub(super) fn advance_marker(&mut self, id: u32, mut hop: usize, now: u64) {
        loop {
            let Some(e) = self.flows.entry(id) else {
                return;
            };
            if e.state != FlowState::Closing {
                return;
            }
            let next = self
                .plan
                .route(e.marker_route)
                .and_then(|r| r.path.get(hop))
                .copied();
            let i = match next {
                Some(Hop::Nf(i)) => i,
                Some(Hop::Set(base)) => match self.member_of_flow(base, id) {
                    Some(i) => i,
                    // Never placed in the set: no replica saw the flow.
                    None => {
                        hop += 1;
                        continue;
                    }
                },
                Some(Hop::Port(_)) | None => {
                    self.release_flow(id);
                    return;
                }
            };
            let Some(nf) = self.nf_mut(i) else {
                // Removed from the plan meanwhile: nothing to tell it.
                hop += 1;
                continue;
            };
            match &mut nf.exec {
                Exec::Inline(_) => {
                    self.with_inline_io(i, now, |f, svc| run_flow_end(f, id, svc));
                    hop += 1;
                }
                Exec::Process(p) if p.phase.accepts() => {
                    let sent = matches!(p.link.send_event(id), Ok(true));
                    if !sent {
                        p.pending_events.push_back(id);
                    }
                    if p.link.wake() {
                        nf.wakeups += 1;
                    }
                    self.room_floor.spend(usize::from(sent));
                    if let Some(e) = self.flows.entry_mut(id) {
                        e.marker_hop = hop as u16;
                        e.marker_nf = i;
                    }
                    return;
                }
                Exec::Process(_) => hop += 1,
            }
        }
    }

    /// An NF returned flow `id`'s end marker: continue after it, if the
    /// marker really was at that NF.
    pub(super) fn marker_passed(&mut self, id: u32, from: u16, now: u64) {
        let Some(e) = self.flows.entry(id) else {
            self.drops.invalid_events += 1;
            return;
        };
        let hop = e.marker_hop as usize;
        if e.state != FlowState::Closing || e.marker_nf != from {
            self.drops.invalid_events += 1;
            return;
        }
        self.advance_marker(id, hop + 1, now);
    }
}
