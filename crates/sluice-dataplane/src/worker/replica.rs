//! Steering among an NF's replicas (see [`crate::replicas`]): which
//! member a packet's flow goes to, and where its end marker goes.

use sluice_mem::PktHandle;
use sluice_nf::DropReason;
use sluice_spec::Steer;

use sluice_mem::link::RESET_EVENT;

use std::sync::atomic::Ordering;

use sluice_spec::ResetMode;

use super::Worker;
use crate::inline_nf::Fault;
use crate::nf_rt::{Exec, Phase};
use crate::route::Dest;

/// What a member that takes no packets now (starting, down, restarting)
/// counts as queued: new flows go elsewhere while any member serves.
const DOWN: usize = usize::MAX / 2;

impl<'a> Worker<'a> {
    /// The member of the set named by NF `base` that packet `h`'s flow
    /// belongs to. The flow id and hash are the packet's metadata, which
    /// an NF may have written: a forged value only picks another replica
    /// of the same NF (as a `ToNf` verdict could), and every index is
    /// bounded by the set.
    #[inline]
    pub(super) fn pick_member(&mut self, base: u16, h: &mut PktHandle) -> Dest {
        let Some(set) = self.plan.set(base) else {
            // Removed by an apply while the packet was inside.
            return Dest::Drop(DropReason::NF_REMOVED);
        };
        let pkt = self.arena.pkt(h);
        match set.steer {
            Steer::Hash => Dest::Nf(set.by_hash(pkt.flow_hash())),
            Steer::ShortestQueue => {
                let nfs = &self.nfs;
                let queued = |m: u16| match nfs.get(m as usize).and_then(Option::as_ref) {
                    Some(nf) => match nf.process_ref() {
                        Some(p) if p.phase.accepts() => p.link.in_flight() as usize,
                        Some(_) => DOWN,
                        // Inline: runs to completion, nothing waits.
                        None => 0,
                    },
                    None => DOWN,
                };
                Dest::Nf(self.pins.pick(base, set, pkt.flow_id(), queued))
            }
            Steer::PerFlow | Steer::PerClass => {
                let flow = pkt.flow_id();
                let class = || match &set.class {
                    Some(by) => crate::classes::class_of(pkt.data(), by),
                    None => crate::classes::ClassKey::NONE,
                };
                match self.exclusive.pick(base, set, flow, class) {
                    Some(m) => Dest::Nf(m),
                    None => Dest::Drop(DropReason::NF_POOL_EXHAUSTED),
                }
            }
        }
    }

    /// The member of the set named by NF `base` that flow `id` went to,
    /// from the flow table's own hash (not packet metadata); `None` if
    /// the flow was never placed there (`shortest_queue` before its first
    /// packet reached the set).
    pub(super) fn member_of_flow(&self, base: u16, id: u32) -> Option<u16> {
        let set = self.plan.set(base)?;
        match set.steer {
            Steer::Hash => Some(set.by_hash(self.flows.entry(id)?.hash)),
            Steer::ShortestQueue => self.pins.pinned(base, set, id),
            Steer::PerFlow | Steer::PerClass => self.exclusive.pinned(base, set, id),
        }
    }

    /// Frees flow `id`'s slot, and its replica choices and held route
    /// with it.
    pub(super) fn release_flow(&mut self, id: u32) {
        self.flows.release(id);
        self.pins.release(id);
        if self.held.release(id) {
            self.publish_held();
        }
        let before = self.idle_members.len();
        self.exclusive.release(id, &mut self.idle_members);
        if self.idle_members.len() > before {
            self.reset_idle_members();
        }
    }

    /// Resets the `per_flow` and `per_class` members their last flow left
    /// (`crate::exclusive`) and returns them to their pool. With the
    /// type's hook: inline at once; a process by an event queued behind
    /// that flow's packets, so ahead of its next flow's (a member whose
    /// ring is full keeps waiting, out of the pool, for the next call,
    /// from `maintain` at the latest). With `reset: refork`: the process
    /// is asked to stop, and its exit forks a fresh one
    /// (`Worker::recycled`), which then rejoins the pool.
    pub(super) fn reset_idle_members(&mut self) {
        let waiting = std::mem::take(&mut self.idle_members);
        let mut crashed = Vec::new();
        for idle in waiting {
            let refork = self
                .plan
                .set(idle.base)
                .is_some_and(|s| s.reset == ResetMode::Refork);
            let Some(nf) = self.nf_mut(idle.nf) else {
                // Removed: nothing to return.
                continue;
            };
            let control = nf.control;
            let done = match &mut nf.exec {
                Exec::Process(p)
                    if refork && matches!(p.phase, Phase::Starting | Phase::Running) =>
                {
                    control.stop.store(1, Ordering::Release);
                    p.phase = Phase::Stopping;
                    p.recycle = true;
                    p.link.wake();
                    self.recycling.push(idle);
                    continue;
                }
                Exec::Inline(f) => {
                    // A crashed member is rebuilt fresh: nothing to reset.
                    if let Err(Fault::Panicked(p)) = f.call(|code| code.reset()) {
                        crashed.push((idle.nf, p));
                    }
                    true
                }
                // A process that is down restarts fresh: nothing to reset.
                Exec::Process(p) if p.phase.accepts() => {
                    let sent = matches!(p.link.send_event(RESET_EVENT), Ok(true));
                    self.room_floor.spend(usize::from(sent));
                    sent
                }
                Exec::Process(_) => true,
            };
            if done {
                self.exclusive.idle_again(idle);
            } else {
                self.idle_members.push(idle);
            }
        }
        if !crashed.is_empty() {
            let now = sluice_sys::monotonic_ns();
            for (i, p) in crashed {
                self.inline_crashed(i, p, &mut sluice_mem::HandleBatch::new(), now);
            }
        }
    }

    /// NF `i`, a pool member asked to stop for a fresh instance, has
    /// exited: the fresh one is forked and takes the pool's next flow
    /// (its packets queue in its ring while it starts).
    pub(super) fn recycled(&mut self, i: u16, now: u64) {
        if let Some(nf) = self.nf_mut(i) {
            nf.reforks += 1;
        }
        self.respawn(i, now);
        let started = self
            .nfs
            .get(i as usize)
            .and_then(Option::as_ref)
            .and_then(|n| n.process_ref())
            .is_some_and(|p| p.phase == Phase::Starting);
        let mut k = 0;
        while k < self.recycling.len() {
            if self.recycling[k].nf == i {
                let idle = self.recycling.swap_remove(k);
                if started {
                    self.exclusive.idle_again(idle);
                }
            } else {
                k += 1;
            }
        }
    }

    /// Keeps the live flows of chains whose route moved off a held one
    /// on it (`crate::held`), after a plan install; `before` is the old
    /// plan's route by chain.
    pub(super) fn hold_flows(&mut self, before: &[Option<u16>]) {
        let of_chain: Vec<Option<u16>> = self
            .plan
            .chains
            .iter()
            .map(|c| c.as_ref().map(|c| c.route))
            .collect();
        let plan = &self.plan;
        let held = |r: u16| plan.route(r).is_some_and(|r| r.held);
        let now = crate::held::Routes {
            of_chain: &of_chain,
            held: &held,
        };
        self.held
            .install(before, &now, self.flows.active(), self.flows.capacity());
        self.publish_held();
    }

    fn publish_held(&self) {
        self.mail
            .held_flows
            .store(self.held.count(), std::sync::atomic::Ordering::Relaxed);
    }
}
