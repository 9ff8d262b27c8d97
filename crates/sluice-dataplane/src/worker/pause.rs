//! Pausing input ports (`sluice migrate`).
//!
//! A paused port is not read: it leaves the worker's input list (and the
//! descriptors it sleeps on), so the frames sent to it wait in the
//! interface's own queue, and the pause costs the packet path nothing.
//! A pause answers once the packets already read have left the process
//! NFs, so a checkpoint taken after it holds the state of every packet
//! that came in before. As a quiesced commit does, it turns ingress off
//! for that drain (bounded by [`QUIESCE_TIMEOUT_NS`]): the worker cannot
//! tell one chain's packets inside an NF from another's.

use super::mailbox::{Paused, Reply, QUIESCE_TIMEOUT_NS};
use super::Worker;

/// A pause waiting for the drain.
pub(crate) struct Pausing {
    ports: Vec<u16>,
    reply: Reply<Paused>,
    since: u64,
}

impl<'a> Worker<'a> {
    /// Stops (`pause`) or resumes reading ports `ids`.
    pub(super) fn pause_ports(
        &mut self,
        ids: Vec<u16>,
        pause: bool,
        reply: Reply<Paused>,
        now: u64,
    ) {
        let mut changed = false;
        for &id in &ids {
            if let Some(Some(p)) = self.ports.get_mut(usize::from(id)) {
                changed |= p.paused != pause;
                p.paused = pause;
            }
        }
        if changed {
            self.derive();
        }
        if !pause {
            let _ = reply.send(Paused {
                fds: self.handover_fds(&ids),
                drained: true,
                ..Paused::default()
            });
            return;
        }
        if let Some(earlier) = self.cmd.pausing.take() {
            // One pause at a time: the earlier one answers as it stands.
            self.answer_pause(earlier, now);
        }
        self.ingress_off = true;
        self.cmd.pausing = Some(Pausing {
            ports: ids,
            reply,
            since: now,
        });
        self.advance_pause(now);
    }

    /// Answers the pause in progress once the NFs hold nothing.
    pub(super) fn advance_pause(&mut self, now: u64) {
        let Some(p) = &self.cmd.pausing else { return };
        if self.in_flight() == 0 || now.saturating_sub(p.since) > QUIESCE_TIMEOUT_NS {
            let p = self.cmd.pausing.take().expect("checked above");
            self.answer_pause(p, now);
        }
    }

    fn answer_pause(&mut self, p: Pausing, now: u64) {
        if !self.cmd.busy_draining() {
            self.ingress_off = false;
        }
        let _ = p.reply.send(Paused {
            fds: self.handover_fds(&p.ports),
            drain_us: now.saturating_sub(p.since) / 1000,
            drained: self.in_flight() == 0,
        });
    }

    /// The descriptors of ports `ids` that can move, by port id.
    fn handover_fds(&self, ids: &[u16]) -> Vec<(u16, Vec<std::os::fd::RawFd>)> {
        ids.iter()
            .filter_map(|&id| {
                let fds = self.ports.get(usize::from(id))?.as_ref()?.handover();
                (!fds.is_empty()).then_some((id, fds))
            })
            .collect()
    }
}
