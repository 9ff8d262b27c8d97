//! Flow end markers: an ending flow's marker travels its chain after the
//! flow's packets, so every NF sees `flow_end` once, in order.

use sluice_nf::runtime::run_flow_end;

use super::Worker;
use crate::flow_table::FlowState;
use crate::nf_rt::{Exec, Phase};
use crate::plan::Hop;

impl<'a> Worker<'a> {
    /// Moves flow `id`'s end marker to hop `hop` of its chain and onwards:
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
            let chain = e.chain as usize;
            match self.plan.chains.get(chain).and_then(|c| c.path.get(hop)) {
                Some(Hop::Nf(i)) => {
                    let i = *i as usize;
                    let nf = &mut self.nfs[i];
                    let control = nf.control;
                    match &mut nf.exec {
                        Exec::Inline(_) => {
                            let _ = control;
                            let _ = self
                                .with_inline_io(i as u16, now, |f, svc| run_flow_end(f, id, svc));
                            hop += 1;
                        }
                        Exec::Process(p) if matches!(p.phase, Phase::Starting | Phase::Running) => {
                            if let Some(e) = self.flows.entry_mut(id) {
                                e.marker_hop = hop as u16;
                            }
                            if !matches!(p.link.send_event(id), Ok(true)) {
                                p.pending_events.push_back(id);
                            }
                            if p.link.wake() {
                                nf.wakeups += 1;
                            }
                            return;
                        }
                        Exec::Process(_) => hop += 1,
                    }
                }
                _ => {
                    self.flows.release(id);
                    return;
                }
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
        let at = self
            .plan
            .chains
            .get(e.chain as usize)
            .and_then(|c| c.path.get(hop));
        if e.state != FlowState::Closing || at != Some(&Hop::Nf(from)) {
            self.drops.invalid_events += 1;
            return;
        }
        self.advance_marker(id, hop + 1, now);
    }
}
