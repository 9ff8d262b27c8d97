//! Ingress: each pass reads every input port once (the first in turn),
//! as many packets as its chains' first NFs can take, classifies them and
//! groups them by their first destination (`steering` delivers the
//! groups).

use sluice_mem::HandleBatch;
use sluice_nf::DropReason;

use super::classify::{classify_keyed, key_frame, Keyed};
use super::tap::TapPoint;
use super::Worker;
use crate::route::{first_hop, first_hop_on, Dest};

/// Live flows above which ingress prefetches the flow table for a whole
/// batch: slots and entries (72 B per flow) at twice this development
/// VM's 1 MiB L2. Measured with `sluice bench nfs --flows N` (3 runs each,
/// medians, 2026-11-26): 20 k flows 5.39 → 4.99 Mpps (no gain), 50 k
/// 3.66 → 4.39, 100 k 3.16 → 4.59.
const PREFETCH_ABOVE_FLOWS: u32 = 32_768;

/// How far past a batch the rings are asked for room when the floor is
/// looked at (`room_floor`): the floor then lasts that many batches'
/// worth of sends, while a ring that already shows this much needs no
/// read of its index.
const FLOOR_WANT: usize = 8;

impl<'a> Worker<'a> {
    pub(super) fn ingress_budget(&mut self, port: u16) -> usize {
        let batch = self.cfg.batch;
        if !self.cfg.entry.holds() {
            // Read at full speed: congested chains drop at their entry.
            return batch;
        }
        // Across trust domains the room also depends on the worker's
        // buffers of the NF's domain, which the floor does not follow.
        let crossing = self.pool.domains() > 1;
        if crossing {
            return self.entry_room(port, batch, crossing).min(batch);
        }
        if self.room_floor.bound(port).is_some_and(|b| b >= batch) {
            return batch;
        }
        let want = self.room_floor.want(port, batch, FLOOR_WANT * batch);
        let floor = self.entry_room(port, want, crossing);
        self.room_floor.found(port, floor);
        floor.min(batch)
    }

    /// The least room among the rings of port `port`'s first NFs, each
    /// asked for up to `want` (`usize::MAX` if no ring limits it: inline
    /// NFs, and NFs that take nothing now).
    fn entry_room(&mut self, port: u16, want: usize, crossing: bool) -> usize {
        let mut least = usize::MAX;
        let chains = self.plan.chains_from(port);
        for k in 0..chains {
            let c = self.plan.ingress[port as usize].chains()[k] as usize;
            // A replica set's members each need the room (a batch's flows
            // may all belong to one).
            let queues = self.derived.chain_queue.get(c).map_or(0, Vec::len);
            for j in 0..queues {
                let q = self.derived.chain_queue[c][j];
                // Ports receive into the platform's domain (0).
                let room = if crossing {
                    Some(self.room(q, 0, want))
                } else {
                    self.ring_room(q, want)
                };
                if let Some(r) = room {
                    least = least.min(r);
                }
            }
        }
        least
    }

    /// Reads every input port once, the first one in turn. In a fixed
    /// order, ports whose chains share a ring that is full (a saturated
    /// NF) were not served alike: the first took the free space on every
    /// pass, under `hold` by its budget and under `drop` by reaching the
    /// ring first, and the last got next to nothing (0.013 against 20.95
    /// Mpps). Moving the first port on each pass gives each port the free
    /// space one pass in N (`tests/fair_ingress.rs`).
    pub(super) fn poll_ingress(&mut self, now: u64) -> usize {
        let mut done = 0;
        self.entry.next_pass();
        let ports = self.derived.input_ports.len();
        let first = if ports > 1 {
            self.ingress_first = (self.ingress_first + 1) % ports;
            self.ingress_first
        } else {
            0
        };
        for k in 0..ports {
            let port = self.derived.input_ports[(first + k) % ports];
            let budget = self.ingress_budget(port);
            if budget == 0 {
                continue;
            }
            let mut b = self.take_batch();
            let Some(p) = self.ports[port as usize].as_mut() else {
                self.put_batch(b);
                continue;
            };
            let n = p.rx(self.arena, &mut self.cache, &mut b, budget, now);
            if n == 0 {
                self.put_batch(b);
                continue;
            }
            if !self.taps.is_empty() {
                self.tap(TapPoint::PortRx(port), &mut b);
            }
            done += n;
            self.classify_and_group(port, &mut b, now);
            self.put_batch(b);
            self.flush_groups();
            self.dispatch(now);
            let mut ended = std::mem::take(&mut self.ended);
            for id in ended.drain(..) {
                self.start_marker(id, now);
            }
            self.ended = ended;
        }
        done
    }

    /// Classifies a received batch and groups it by destination.
    ///
    /// With many live flows a lookup misses the cache twice (index slot,
    /// entry), so the batch goes in three passes: key every packet and
    /// prefetch its slot, prefetch the entries those slots name, then look
    /// up in packet order, the misses of a batch overlapping (realistic
    /// chain at 100 k flows: 3.16 → 4.59 Mpps). With few flows the table
    /// is in cache and the extra passes only cost (3 × inline forwarders:
    /// ≈ 10 ns per packet), so the batch is classified in one pass.
    pub(super) fn classify_and_group(&mut self, port: u16, b: &mut HandleBatch, now: u64) {
        let arena = self.arena;
        if self.flows.live() < PREFETCH_ABOVE_FLOWS {
            b.drain(|mut h| {
                let mut pkt = arena.pkt(&mut h);
                let k = key_frame(pkt.data());
                let dest = self.first_dest(port, &mut pkt, &k, now);
                self.group(dest, h);
            });
            return;
        }
        let mut keyed = std::mem::take(&mut self.keyed);
        keyed.clear();
        for h in b.iter_mut() {
            let k = key_frame(arena.pkt(h).data());
            if let Keyed::Flow { hash, .. } = k {
                self.flows.prefetch_slot(hash);
            }
            keyed.push(k);
        }
        for k in &keyed {
            if let Keyed::Flow { hash, .. } = *k {
                self.flows.prefetch_entry(hash);
            }
        }
        let mut keys = keyed.iter();
        b.drain(|mut h| {
            let mut pkt = arena.pkt(&mut h);
            // One key per handle (the first pass walked this batch).
            let k = match keys.next() {
                Some(k) => *k,
                None => key_frame(pkt.data()),
            };
            let dest = self.first_dest(port, &mut pkt, &k, now);
            self.group(dest, h);
        });
        self.keyed = keyed;
    }

    /// Looks up a keyed packet's flow and chain, marks the packet with
    /// them and returns where it goes first.
    #[inline]
    fn first_dest(
        &mut self,
        port: u16,
        pkt: &mut sluice_mem::Pkt<'_>,
        k: &Keyed,
        now: u64,
    ) -> Dest {
        pkt.set_port_in(port);
        match classify_keyed(
            &self.plan,
            &mut self.flows,
            &mut self.no_chain,
            &mut self.ended,
            k,
            port,
            now,
        ) {
            Ok((chain, flow_id, hash)) => {
                pkt.set_flow_id(flow_id);
                pkt.set_flow_hash(hash);
                if self.entry_refuses(chain) {
                    return Dest::Drop(DropReason::BACKPRESSURE);
                }
                match self.held.route(chain, flow_id) {
                    // Kept on the route it was on when a rollout began.
                    Some(route) => first_hop_on(&self.plan, pkt, route),
                    None => first_hop(&self.plan, pkt, chain),
                }
            }
            Err(reason) => Dest::Drop(reason),
        }
    }
}
