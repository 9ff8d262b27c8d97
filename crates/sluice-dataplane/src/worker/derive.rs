//! What a plan means for this worker, worked out once per change rather
//! than per packet: each chain's first queues, each NF's next queues,
//! which NFs are processes or tick, which ports are read, the doorbells,
//! wake gates and replica tables, and the scheduler's view of its NFs.

use super::*;

impl Worker<'_> {
    /// Recomputes the routing facts after the plan or the NFs changed.
    pub(crate) fn derive(&mut self) {
        let nfs = &self.nfs;
        let is_process = |i: u16| {
            nfs.get(i as usize)
                .and_then(Option::as_ref)
                .is_some_and(|n| matches!(n.exec, Exec::Process(_)))
        };
        let plan = &self.plan;
        // The process NFs of the first hop that has any: one NF, or the
        // members of a replica set.
        let first_queues = |path: &[Hop]| -> Vec<u16> {
            path.iter()
                .map(|h| -> Vec<u16> {
                    let nfs = plan.hop_nfs(h).iter().copied();
                    nfs.filter(|&i| is_process(i)).collect()
                })
                .find(|q| !q.is_empty())
                .unwrap_or_default()
        };
        let mut d = Derived {
            chain_queue: plan
                .chains
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut q = c
                        .as_ref()
                        .and_then(|c| plan.route(c.route))
                        .map_or_else(Vec::new, |r| first_queues(&r.path));
                    // Kept flows enter on the held route (a rollout).
                    let held = self.held.route_of_chain(i as u16);
                    let kept = held
                        .and_then(|r| plan.route(r))
                        .map(|r| first_queues(&r.path));
                    for i in kept.into_iter().flatten() {
                        if !q.contains(&i) {
                            q.push(i);
                        }
                    }
                    q
                })
                .collect(),
            nf_next_queues: vec![Vec::new(); self.nfs.len()],
            ..Derived::default()
        };
        // Every route, retired ones too: packets on them still need room.
        for r in plan.routes.iter().flatten() {
            for (pos, h) in r.path.iter().enumerate() {
                let next = first_queues(&r.path[pos + 1..]);
                for &i in plan.hop_nfs(h) {
                    if let Some(v) = d.nf_next_queues.get_mut(i as usize) {
                        for &q in &next {
                            if !v.contains(&q) {
                                v.push(q);
                            }
                        }
                    }
                }
            }
        }
        for (i, nf) in self.nfs.iter().enumerate() {
            let Some(nf) = nf else { continue };
            match nf.exec {
                Exec::Process(_) => d.process_ids.push(i as u16),
                Exec::Inline(_) if nf.tick.is_some() => d.ticking.push(i as u16),
                Exec::Inline(_) => {}
            }
        }
        for (i, p) in self.ports.iter().enumerate() {
            // A paused port is not read, nor slept on: its frames wait.
            if p.as_ref().is_some_and(|p| p.is_input() && !p.paused) {
                d.input_ports.push(i as u16);
            }
        }
        let nfs = &self.nfs;
        self.bells.rebuild(
            d.process_ids
                .iter()
                .filter_map(|&i| Some((nfs[i as usize].as_ref()?.slot, i))),
        );
        d.nic_fds = self
            .ports
            .iter()
            .flatten()
            .filter(|p| !p.paused)
            .filter_map(|p| p.rx_fd())
            .collect();
        d.sleep_on_nics = !d.nic_fds.is_empty()
            && d.nic_fds.len() == d.input_ports.len()
            && d.process_ids.is_empty();
        self.gates.resize(self.nfs.len(), WakeGate::default());
        for (i, gate) in self.gates.iter_mut().enumerate() {
            if let Some(nf) = self.plan.nf(i as u16) {
                // Beside its worker an NF is one stage of the core's
                // pipeline: the worker hands it the core when it yields,
                // so no wake-up rule applies (`settings.workers`).
                gate.set_policy(if self.cfg.nfs_share_core {
                    WakePolicy::IMMEDIATE
                } else {
                    nf.wakeup
                });
            }
        }
        self.route_latency
            .resize_with(self.plan.routes.len(), Histogram::new);
        // Allocates only for a set that is new to this plan.
        self.pins.install(&self.plan.sets, self.flows.capacity());
        self.exclusive
            .install(&self.plan.sets, self.flows.capacity());
        self.derived = d;
        let members = self.sched_members();
        self.sched.apply(self.arena, &members);
    }

    /// This worker's process NFs as the scheduler sees them: their slot,
    /// core, and place along the chains (chains in their order, hops in
    /// route order; NFs on no route last).
    pub(crate) fn sched_members(&self) -> Vec<Member> {
        let mut order: Vec<Option<(u32, u32)>> = vec![None; self.nfs.len()];
        for (c, (_, chain)) in self.plan.chains_in_order().enumerate() {
            let Some(route) = self.plan.route(chain.route) else {
                continue;
            };
            for (h, hop) in route.path.iter().enumerate() {
                for &i in self.plan.hop_nfs(hop) {
                    if let Some(o) = order.get_mut(i as usize) {
                        o.get_or_insert((c as u32, h as u32));
                    }
                }
            }
        }
        self.derived
            .process_ids
            .iter()
            .filter_map(|&i| {
                let nf = self.nfs[i as usize].as_ref()?;
                let p = nf.process_ref()?;
                Some(Member {
                    slot: nf.slot,
                    cpu: p.spawn.cpu,
                    order: order[i as usize].unwrap_or((u32::MAX, u32::from(i))),
                    beside_worker: self.cfg.nfs_share_core,
                    weight: self.plan.nf(i).and_then(|n| n.cpu_weight),
                    idle: self.plan.nf(i).map_or(IdlePoll::Always, |n| n.wakeup.idle),
                    pid: p.pid,
                    domain: self.plan.nf(i).map_or(0, |n| n.domain),
                })
            })
            .collect()
    }
}
