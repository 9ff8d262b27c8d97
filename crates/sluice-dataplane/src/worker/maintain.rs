//! The worker's millisecond maintenance, between two passes: the NF
//! host's events, inline NFs' timers and fresh instances, the process
//! NFs that started, died or hold packets past their bound, queued
//! flow-end events, policing and turns, pools to reset, and the flow
//! table's ageing.

use super::supervise::advance;
use super::Worker;
use crate::nf_rt::Phase;

impl Worker<'_> {
    pub(super) fn maintain(&mut self, now: u64) {
        // NFs restarted here may come back holding what they held.
        self.room_floor.forget();
        if self.inputs_done(now) {
            self.mail
                .inputs_done
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.poll_host(now);
        if !self.inline_down.is_empty() {
            self.rebuild_crashed_inline(now);
        }
        self.tick_inline(now);
        self.bells.sweep(super::bells::SWEEP_WORDS_PER_TICK);
        for k in 0..self.derived.process_ids.len() {
            let i = self.derived.process_ids[k];
            let Some(nf) = self.nfs[i as usize].as_mut() else {
                continue;
            };
            if let Some(us) = advance(nf, now) {
                nf.record_startup(us);
                let pid = nf.process_ref().map_or(0, |p| p.pid);
                let line = format!("running (pid {pid}, started in {us:.0} µs)");
                self.logbook
                    .push(&nf.name, self.cfg.index, "platform", line);
                // It may have sent before it was seen running.
                let slot = nf.slot;
                self.bells.mark(slot);
            }
            let Some(nf) = self.nfs[i as usize].as_mut() else {
                continue;
            };
            let mut respawn = false;
            let mut expired = false;
            if let Some(p) = nf.process() {
                if let Phase::Down {
                    respawn_at_ns,
                    hold_until_ns,
                } = p.phase
                {
                    respawn = now >= respawn_at_ns;
                    expired = hold_until_ns != 0 && now >= hold_until_ns;
                    if expired {
                        p.phase = Phase::Down {
                            respawn_at_ns,
                            hold_until_ns: 0,
                        };
                    }
                }
                while let Some(&ev) = p.pending_events.front() {
                    match p.link.send_event(ev) {
                        Ok(true) => {
                            p.pending_events.pop_front();
                            self.room_floor.spend(1);
                        }
                        _ => break,
                    }
                }
            }
            if expired {
                self.drop_queue(i);
            }
            if respawn {
                self.respawn(i, now);
            }
        }
        self.advance_staged(now);
        self.police(now);
        if !self.idle_members.is_empty() {
            self.reset_idle_members();
        }
        let budget = (self.flows.capacity() as usize / 256).max(64);
        let mut ended = std::mem::take(&mut self.ended);
        self.flows.expire(now, budget, &mut ended);
        for id in ended.drain(..) {
            self.start_marker(id, now);
        }
        self.ended = ended;
    }
}
