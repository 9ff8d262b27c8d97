//! `fallback: wait`: the packets of a new flow that finds every instance
//! of its `per_flow` or `per_class` pool busy wait in the worker, in
//! arrival order, until an instance is free (a flow ends, or the daemon's
//! pool sizer adds one), instead of being dropped. The worker never blocks
//! for it: each pass offers every waiting packet, oldest first, to the
//! pool; a flow that gets an instance sends all its waiting packets in
//! that pass, and the others keep their place, so neither a flow's packets
//! nor the flows' order change.
//!
//! While packets wait, a new flow waits behind them (it may not take an
//! instance a flow that came first is waiting for), pinned flows pass as
//! usual. A packet that would make a pool's queue longer than [`WAIT_MAX`]
//! or that has waited [`WAIT_NS`] is dropped as `nf_pool_exhausted`, and so
//! is one whose flow ended while it waited (its flow id may already name
//! another flow, whose instance it must not reach). The
//! waiting packets count as in flight, so a change or a stop drains them
//! like packets inside an NF; what still waits at the stop is counted as
//! `shutdown`, and a pool the plan removed drops its queue as `nf_removed`.

use std::collections::VecDeque;

use sluice_mem::PktHandle;
use sluice_nf::DropReason;
use sluice_spec::Fallback;

use super::{Worker, MS};
use crate::route::Dest;

/// Most packets waiting for one pool.
pub const WAIT_MAX: usize = 4096;

/// Longest a packet waits for an instance.
pub const WAIT_NS: u64 = 100 * MS;

/// Every pool's waiting packets, by the set's base NF id.
#[derive(Default)]
pub(crate) struct Waiting {
    queues: Vec<(u16, VecDeque<(PktHandle, u64)>)>,
    len: usize,
}

impl Waiting {
    /// Packets waiting, in every pool.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Queues `h` for the pool based at `base`; gives it back when the
    /// pool's queue is full.
    fn push(&mut self, base: u16, h: PktHandle, now: u64) -> Result<usize, PktHandle> {
        let k = match self.queues.iter().position(|(b, _)| *b == base) {
            Some(k) => k,
            None => {
                self.queues.push((base, VecDeque::new()));
                self.queues.len() - 1
            }
        };
        let q = &mut self.queues[k].1;
        if q.len() >= WAIT_MAX {
            return Err(h);
        }
        q.push_back((h, now));
        self.len += 1;
        Ok(q.len())
    }
}

impl<'a> Worker<'a> {
    /// `h` found no instance in the pool based at `base`: it waits if the
    /// pool's fallback is `wait` (true), else the caller drops it.
    pub(super) fn wait_for_instance(&mut self, base: u16, h: PktHandle) -> Option<PktHandle> {
        if !self
            .plan
            .set(base)
            .is_some_and(|s| s.fallback == Fallback::Wait)
        {
            return Some(h);
        }
        match self.waiting.push(base, h, sluice_sys::monotonic_ns()) {
            Ok(n) => {
                self.exclusive.set_waiting(base, n as u32);
                None
            }
            Err(h) => {
                self.cache.free(h);
                self.drops.add(DropReason::NF_POOL_EXHAUSTED, 1);
                None
            }
        }
    }

    /// Hands waiting packets to the instances that are free, oldest first,
    /// and drops those that waited too long; then delivers them.
    pub(super) fn serve_waiting(&mut self, now: u64) {
        let mut queues = std::mem::take(&mut self.waiting.queues);
        for (base, q) in &mut queues {
            let base = *base;
            let before = q.len();
            while q
                .front()
                .is_some_and(|(_, since)| now.saturating_sub(*since) > WAIT_NS)
            {
                let (h, _) = q.pop_front().expect("checked");
                self.cache.free(h);
                self.drops.add(DropReason::NF_POOL_EXHAUSTED, 1);
            }
            // Every waiting packet gets its turn, oldest first: one whose
            // flow has an instance (given earlier in this pass, or a class
            // that has one) goes; the others keep their order. A flow's
            // packets thus all leave in the pass that gives it an
            // instance, before any of its later packets can arrive.
            self.exclusive.set_waiting(base, 0);
            // In place: each packet is taken from the front once, and one
            // that stays goes to the back, so the order holds.
            for _ in 0..q.len() {
                let (mut h, since) = q.pop_front().expect("counted");
                // A flow that ended while its packets waited (it idled
                // out) may have lent its id to another: its packets must
                // not join that flow's instance.
                let (id, hash) = {
                    let p = self.arena.pkt(&mut h);
                    (p.flow_id(), p.flow_hash())
                };
                let same_flow = self.flows.entry(id).is_some_and(|e| {
                    e.hash == hash && e.state != crate::flow_table::FlowState::Free
                });
                if !same_flow && id < self.flows.capacity() {
                    self.cache.free(h);
                    self.drops.add(DropReason::NF_POOL_EXHAUSTED, 1);
                    continue;
                }
                match self.pick_member(base, &mut h) {
                    Dest::Drop(DropReason::NF_POOL_EXHAUSTED) => q.push_back((h, since)),
                    dest => self.group(dest, h),
                }
            }
            self.exclusive.set_waiting(base, q.len() as u32);
            self.waiting.len -= before - q.len();
        }
        queues.retain(|(_, q)| !q.is_empty());
        self.waiting.queues = queues;
        self.flush_groups();
        self.dispatch(now);
    }

    /// Drops what waits for pools the plan no longer has (`nf_removed`),
    /// or for every pool (`reason`, at the stop).
    pub(super) fn drop_waiting(&mut self, all: Option<DropReason>) {
        let mut queues = std::mem::take(&mut self.waiting.queues);
        queues.retain_mut(|(base, q)| {
            let gone = self
                .plan
                .set(*base)
                .is_none_or(|s| s.fallback != Fallback::Wait);
            let reason = match (all, gone) {
                (Some(r), _) => r,
                (None, true) => DropReason::NF_REMOVED,
                (None, false) => {
                    self.exclusive.set_waiting(*base, q.len() as u32);
                    return true;
                }
            };
            self.drops.add(reason, q.len() as u64);
            self.waiting.len -= q.len();
            for (h, _) in q.drain(..) {
                self.cache.free(h);
            }
            false
        });
        self.waiting.queues = queues;
    }
}
