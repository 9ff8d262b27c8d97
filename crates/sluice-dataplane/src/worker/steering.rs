//! Steering: after `ingress` has grouped packets by destination,
//! delivering the groups to inline NFs (run here), process NFs (ring +
//! wake-up), ports and drop counters, and draining what process NFs
//! return.

use std::rc::Rc;

use sluice_mem::HandleBatch;
use sluice_nf::DropReason;

use super::tap::TapPoint;
use super::Worker;
use crate::nf_rt::Exec;
use crate::route::{after_nf, uniform_next, Dest};

impl<'a> Worker<'a> {
    /// Room in process NF `i`'s receive ring for packets of trust domain
    /// `from` (a full batch if it is not accepting: packets sent there are
    /// dropped as `nf_down`, not held). Packets that cross into its
    /// domain need that domain's buffers too: no more than the worker can
    /// get, so they wait upstream, as for ring space, rather than being
    /// dropped at the boundary (`domain_pool_exhausted`). Exact up to
    /// `want` (callers take the least over several NFs, starting from a
    /// batch): beyond it the ring's index is not re-read.
    pub(super) fn room(&mut self, i: u16, from: usize, want: usize) -> usize {
        let batch = self.cfg.batch;
        let crossing = self.pool.domains() > 1;
        let (ring, domain) = match self.nf_mut(i).and_then(|n| n.process()) {
            Some(p) if p.phase.accepts() => (p.link.room_up_to(want).unwrap_or(0), p.link.domain()),
            _ => return batch,
        };
        if !crossing || domain == from || ring == 0 {
            return ring;
        }
        ring.min(self.cache.available_in(domain, ring.min(batch)))
    }

    /// NF `i`'s room up to `want` if its ring limits what it is sent: a
    /// process NF that takes packets now (for any other, `None`;
    /// [`Self::room`] gives it a batch). Ignores trust domains.
    pub(super) fn ring_room(&mut self, i: u16, want: usize) -> Option<usize> {
        let p = self.nf_mut(i)?.process()?;
        (p.phase.accepts()).then(|| p.link.room_up_to(want).unwrap_or(0))
    }

    /// The trust domain of the packets process NF `i` hands back (its
    /// own; the platform's for anything else).
    pub(super) fn domain_of_nf(&mut self, i: u16) -> usize {
        self.nf_mut(i)
            .and_then(|n| n.process())
            .map_or(0, |p| p.link.domain())
    }

    pub(super) fn group(&mut self, dest: Dest, mut h: sluice_mem::PktHandle) {
        let dest = match dest {
            Dest::Set(base) => match self.pick_member(base, &mut h) {
                Dest::Drop(DropReason::NF_POOL_EXHAUSTED) => {
                    match self.wait_for_instance(base, h) {
                        Some(back) => h = back,
                        None => return,
                    }
                    Dest::Drop(DropReason::NF_POOL_EXHAUSTED)
                }
                d => d,
            },
            d => d,
        };
        if let Some((_, g)) = self.groups.iter_mut().find(|(d, _)| *d == dest) {
            if let Err(h) = g.push(h) {
                // Group full (cannot happen with batches ≤ MAX_BATCH).
                self.cache.free(h);
                self.drops.add(DropReason::RING_FULL, 1);
            }
            return;
        }
        let mut g = self.take_batch();
        let _ = g.push(h);
        self.groups.push((dest, g));
    }

    pub(super) fn flush_groups(&mut self) {
        // Reverse so the LIFO work stack delivers groups in creation order.
        while let Some(g) = self.groups.pop() {
            self.work.push(g);
        }
    }

    pub(super) fn dispatch(&mut self, now: u64) {
        while let Some((dest, mut b)) = self.work.pop() {
            match dest {
                Dest::Nf(i) => self.deliver_nf(i, &mut b, now),
                Dest::Set(_) => {
                    // A whole batch for one set (`uniform_next`): each
                    // packet to its flow's replica.
                    b.drain(|h| self.group(dest, h));
                    self.flush_groups();
                }
                Dest::Port(p) if self.ports.get(p as usize).is_some_and(Option::is_some) => {
                    if !self.taps.is_empty() {
                        self.tap(TapPoint::PortTx(p), &mut b);
                    }
                    // Each packet's time inside, by its route (one compare,
                    // a count of leading zeros and an add).
                    let arena = self.arena;
                    for h in b.iter_mut() {
                        let pkt = arena.pkt(h);
                        let (route, ts) = (pkt.chain(), pkt.timestamp_ns());
                        if let Some(hist) = self.route_latency.get_mut(route as usize) {
                            hist.record(now.saturating_sub(ts));
                        }
                    }
                    let port = self.ports[p as usize]
                        .as_mut()
                        .expect("checked by the guard");
                    let lost = port.tx(arena, &mut b, &mut self.cache, now);
                    self.drops.add(DropReason::PORT_TX_ERROR, lost);
                }
                Dest::Port(_) => {
                    // Removed by an apply while the packet was inside.
                    self.drops.add(DropReason::PORT_TX_ERROR, b.len() as u64);
                    b.drain(|h| self.cache.free(h));
                }
                Dest::Drop(r) => {
                    self.drops.add(r, b.len() as u64);
                    self.count_wasted(&mut b, 0);
                    b.drain(|h| self.cache.free(h));
                }
                Dest::DropLocal(nf, idx) => {
                    let n = b.len() as u64;
                    match self
                        .nf_mut(nf)
                        .and_then(|nf| nf.local_drops.get_mut(idx as usize))
                    {
                        Some(c) => *c += n,
                        None => self.drops.add(DropReason::INVALID_VERDICT, n),
                    }
                    b.drain(|h| self.cache.free(h));
                }
            }
            self.put_batch(b);
        }
    }

    pub(super) fn deliver_nf(&mut self, i: u16, b: &mut HandleBatch, now: u64) {
        if !self.taps.is_empty() {
            self.tap(TapPoint::NfIn(i), b);
        }
        let Some(nf) = self.nfs.get_mut(i as usize).and_then(Option::as_mut) else {
            // Removed by an apply while the packet was inside.
            self.drops.add(DropReason::NF_REMOVED, b.len() as u64);
            b.drain(|h| self.cache.free(h));
            return;
        };
        let control = nf.control;
        match &mut nf.exec {
            Exec::Inline(_) => self.deliver_inline(i, control, b, now),
            Exec::Process(p) => {
                let mut corrupt = false;
                if p.phase.accepts() {
                    if self.pool.domains() > 1 {
                        // Its trust domain's buffers only: others' cross
                        // by copy (`sluice_mem::crossing`); not for an NF
                        // that is down, whose packets are dropped anyway.
                        let c =
                            sluice_mem::cross_into(self.arena, &mut self.cache, b, p.link.domain());
                        nf.domain_copies += u64::from(c.copied);
                        self.drops
                            .add(DropReason::DOMAIN_POOL_EXHAUSTED, u64::from(c.no_buffer));
                        self.drops
                            .add(DropReason::TOO_LARGE_FOR_DOMAIN, u64::from(c.too_large));
                    }
                    // Spares first: they arrive ahead of the batch in ring
                    // order, so an NF that creates packets per packet (tee)
                    // has its stash full when the batch comes (one load
                    // when the NF wants no spares).
                    match p.link.refill_spares_for(&mut self.cache, b.len()) {
                        Ok(n) => self.room_floor.spend(n),
                        Err(_) => corrupt = true,
                    }
                    // Looked for only where it can change the decision:
                    // the NF sleeps and its threshold would hold packets.
                    let gate = &self.gates[i as usize];
                    let short = gate.wants_short_flows()
                        && p.link.sleeps()
                        && short_flow_in(self.arena, &self.flows, b, gate.policy());
                    let sent = p.link.send(self.pool, b);
                    self.room_floor.spend(*sent.as_ref().unwrap_or(&0));
                    match sent {
                        Ok(n) if n > 0 => {
                            let gate = &mut self.gates[i as usize];
                            // An NF taking turns is woken when it gets
                            // one (`NfLink::wake`), never held back.
                            let woke = if !gate.policy().batches() || p.link.turn().is_some() {
                                p.link.wake()
                            } else if !p.link.sleeps() {
                                // Running: it finds the packets itself.
                                gate.release();
                                false
                            } else if gate.on_queued(p.link.queued(), short, now) {
                                p.link.wake()
                            } else {
                                if !self.holding.contains(&i) {
                                    self.holding.push(i);
                                }
                                false
                            };
                            nf.wakeups += u64::from(woke);
                            self.yield_due |= woke && self.cfg.nfs_share_core;
                        }
                        Ok(_) => {}
                        Err(_) => corrupt = true,
                    }
                    let left = b.len() as u64;
                    self.drops.add(DropReason::RING_FULL, left);
                } else {
                    self.drops.add(DropReason::NF_DOWN, b.len() as u64);
                }
                if !b.is_empty() {
                    self.count_wasted(b, 1);
                }
                b.drain(|h| self.cache.free(h));
                if corrupt {
                    self.condemn(i, "its receive ring indices are corrupt");
                }
            }
        }
    }

    /// Groups the packets NF `from` has processed by their next destination.
    pub(super) fn regroup_after(&mut self, from: u16, b: &mut HandleBatch) {
        let arena = self.arena;
        if b.is_empty() {
            return;
        }
        if !self.taps.is_empty() {
            self.tap(TapPoint::NfOut(from), b);
        }
        // A cheap, non-atomic count: the closure below needs the plan while
        // it borrows the worker mutably.
        let held = Rc::clone(&self.plan);
        // Dereferenced once here, not per packet.
        let plan: &crate::plan::Plan = &held;
        if let Some(dest) = uniform_next(plan, b, arena) {
            let mut g = self.take_batch();
            std::mem::swap(&mut *g, b);
            self.work.push((dest, g));
            return;
        }
        b.drain(|mut h| {
            let mut pkt = arena.pkt(&mut h);
            let dest = if pkt.meta_is_sane() {
                after_nf(plan, &mut pkt, from)
            } else {
                Dest::Drop(DropReason::INVALID_METADATA)
            };
            self.group(dest, h);
        });
        self.flush_groups();
    }

    /// Wakes the sleeping NFs whose held packets have waited the wake-up
    /// timeout.
    pub(super) fn fire_wake_timers(&mut self, now: u64) {
        let mut k = 0;
        while k < self.holding.len() {
            let i = self.holding[k] as usize;
            let gate = &mut self.gates[i];
            let Some(nf) = self.nfs.get_mut(i).and_then(Option::as_mut) else {
                gate.release();
                self.holding.swap_remove(k);
                continue;
            };
            let Some(p) = nf.process() else {
                gate.release();
                self.holding.swap_remove(k);
                continue;
            };
            if !gate.is_holding() || !p.link.control().wake.is_sleeping() {
                // Woken meanwhile (by count, an event or its own nap): it
                // sees its ring itself.
                gate.release();
            } else if gate.on_timer(now) {
                if p.link.wake() {
                    nf.wakeups += 1;
                    nf.wakeups_by_timeout += 1;
                    self.yield_due |= self.cfg.nfs_share_core;
                }
            } else {
                k += 1;
                continue;
            }
            self.holding.swap_remove(k);
        }
    }

    /// Takes what the process NFs handed back, visiting only those whose
    /// doorbell rang or that the last pass left with work (`bells`).
    pub(super) fn poll_nfs(&mut self, now: u64) -> usize {
        let mut done = 0;
        for k in 0..self.bells.len() {
            let mut bits = self.bells.take(self.arena, k);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let Some(i) = self.bells.nf(k, bit) else {
                    continue;
                };
                let (n, again) = self.poll_nf(i, now);
                done += n;
                if again {
                    self.bells.keep(k, bit);
                }
            }
        }
        done
    }

    /// Takes one process NF's output; returns the entries taken and
    /// whether it must be looked at again next pass (entries left behind,
    /// or no room downstream to take them).
    fn poll_nf(&mut self, i: u16, now: u64) -> (usize, bool) {
        let active = self
            .nf_mut(i)
            .and_then(|n| n.process())
            .is_some_and(|p| p.phase.alive());
        if !active {
            return (0, false);
        }
        let mut budget = self.cfg.batch;
        let from = self.domain_of_nf(i);
        for q in 0..self.derived.nf_next_queues[i as usize].len() {
            let q = self.derived.nf_next_queues[i as usize][q];
            budget = budget.min(self.room(q, from, budget));
        }
        if budget == 0 {
            return (0, true);
        }
        let mut b = self.take_batch();
        let pool = self.pool;
        let Some(p) = self
            .nfs
            .get_mut(i as usize)
            .and_then(Option::as_mut)
            .and_then(|n| n.process())
        else {
            self.put_batch(b);
            return (0, false);
        };
        match p.link.refill_spares(&mut self.cache) {
            Ok(n) => self.room_floor.spend(n),
            Err(_) => {
                self.put_batch(b);
                self.condemn(i, "its receive ring indices are corrupt");
                return (0, false);
            }
        }
        let outcome = p.link.recv(pool, &mut b, budget);
        p.link.take_events(&mut self.events);
        // Read after the receive: entries the NF adds from now on ring
        // its bell again.
        let left = p.link.pending().unwrap_or(0) > 0;
        let mut done = 0;
        match outcome {
            Ok(o) => {
                if let Some(nf) = self.nf_mut(i) {
                    nf.originated += o.originated as u64;
                    // Rejected entries are not packets (the NF still
                    // owns its real buffers), so they are faults, not
                    // drops.
                    nf.invalid_handles += o.invalid as u64;
                }
                self.drops.invalid_handles += o.invalid as u64;
                done = o.received + o.events;
                self.regroup_after(i, &mut b);
                self.dispatch(now);
                self.take_answers(i);
            }
            Err(_) => self.condemn(i, "its transmit ring indices are corrupt"),
        }
        self.put_batch(b);
        let mut events = std::mem::take(&mut self.events);
        for id in events.drain(..) {
            self.marker_passed(id, i, now);
        }
        self.events = events;
        (done, left)
    }
}

/// Whether a packet of `b` belongs to a flow that has carried fewer packets
/// than `policy`'s short-flow limit (both directions count). Flowless
/// packets (ARP, ...) belong to none.
fn short_flow_in(
    arena: &sluice_mem::Arena,
    flows: &crate::flow_table::FlowTable,
    b: &mut HandleBatch,
    policy: &crate::wakeup::WakePolicy,
) -> bool {
    let limit = u64::from(policy.short_flow_packets);
    b.iter_mut().any(|h| {
        let id = arena.pkt(h).flow_id();
        flows.entry(id).is_some_and(|e| e.packets < limit)
    })
}
