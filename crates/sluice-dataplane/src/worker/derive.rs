//! What a plan means for this worker, worked out once per change rather
//! than per packet: each chain's first queues, each NF's next queues,
//! which NFs are processes or tick, which ports are read, the doorbells,
//! wake gates and replica tables, and the scheduler's view of its NFs.
//!
//! Two ways, one result:
//!
//! - [`Worker::derive`] works everything out from the whole plan, after
//!   any change.
//! - [`Worker::derive_addition`], after a change that only added
//!   ([`Added`]), works out what the added objects mean and adds that to
//!   what was there. An addition cannot change what the rest means: a
//!   chain's queues depend on its route's NFs and whether they run as
//!   processes, and neither changes for an NF or route that was there
//!   before. Re-deriving everything cost a commit ~180 µs at 1,000 NFs
//!   (`sluice bench instantiate`), most of it a small vector allocated per
//!   chain and per NF. Debug builds derive both ways and compare.

use std::collections::{HashMap, HashSet};

use super::*;

/// What a change adds when adding is all it does: the worker works out
/// only what these mean ([`Worker::derive_addition`]); its ports, few, are
/// listed again whole.
#[derive(Debug, Default)]
pub(crate) struct Added {
    pub nfs: Vec<u16>,
    pub chains: Vec<u16>,
}

impl Worker<'_> {
    /// Recomputes the routing facts after the plan or the NFs changed.
    pub(crate) fn derive(&mut self) {
        self.room_floor.forget();
        self.derived = self.tables();
        let nfs = &self.nfs;
        self.bells.rebuild(
            self.derived
                .process_ids
                .iter()
                .filter_map(|&i| Some((nfs[i as usize].as_ref()?.slot, i))),
        );
        self.gates.resize(self.nfs.len(), WakeGate::default());
        for i in 0..self.gates.len() {
            self.set_gate_policy(i as u16);
        }
        self.derive_rest();
    }

    /// Adds what the objects of an addition mean to the routing facts.
    pub(crate) fn derive_addition(&mut self, added: &Added) {
        self.room_floor.forget();
        let plan = Rc::clone(&self.plan);
        let order = self.added_run_order(&added.chains);
        let new_members: HashMap<u16, Member> = (added.nfs.iter())
            .filter_map(|&i| Some((i, self.member(i, order.get(&i).copied())?)))
            .collect();
        let d = &mut self.derived;
        d.chain_queue.resize_with(plan.chains.len(), Vec::new);
        d.nf_next_queues.resize_with(self.nfs.len(), Vec::new);
        for &c in &added.chains {
            let Some(route) = plan.chain(c).and_then(|c| plan.route(c.route)) else {
                continue;
            };
            // A new chain has no held route (only a rollout makes one).
            d.chain_queue[c as usize] = first_queues(&plan, &self.nfs, &route.path);
            add_next_queues(&plan, &self.nfs, &route.path, &mut d.nf_next_queues);
        }
        for &i in &added.nfs {
            let Some(nf) = self.nfs.get(i as usize).and_then(Option::as_ref) else {
                continue;
            };
            match nf.exec {
                Exec::Process(_) => {
                    self.bells.add(nf.slot, i);
                    if let (Err(at), Some(&m)) =
                        (d.process_ids.binary_search(&i), new_members.get(&i))
                    {
                        // The members are listed as the process NFs are.
                        d.process_ids.insert(at, i);
                        d.members.insert(at, m);
                    }
                }
                Exec::Inline(_) if nf.tick.is_some() => {
                    if let Err(at) = d.ticking.binary_search(&i) {
                        d.ticking.insert(at, i);
                    }
                }
                Exec::Inline(_) => {}
            }
        }
        // An NF that was on no chain takes its place on the first added
        // one it is on.
        for (&i, &o) in &order {
            if let Ok(k) = d.process_ids.binary_search(&i) {
                let m = &mut d.members[k];
                if m.order.0 == u32::MAX {
                    m.order = o;
                }
            }
        }
        // Ports are few (at most `max_ports`): their lists are made again.
        (d.input_ports, d.nic_fds) = port_lists(&self.ports);
        d.sleep_on_nics = sleeps_on_nics(d);
        self.gates.resize(self.nfs.len(), WakeGate::default());
        for &i in &added.nfs {
            self.set_gate_policy(i);
        }
        #[cfg(debug_assertions)]
        self.assert_derived_alike(added);
        self.derive_rest();
    }

    /// What both ways share: tables sized by the plan, the replica sets'
    /// state and the scheduler.
    fn derive_rest(&mut self) {
        self.route_latency
            .resize_with(self.plan.routes.len(), Histogram::new);
        // Allocates only for a set that is new to this plan.
        self.pins.install(&self.plan.sets, self.flows.capacity());
        self.exclusive
            .install(&self.plan.sets, self.flows.capacity());
        self.sched.apply(self.arena, &self.derived.members);
    }

    /// NF `i`'s wake-up rule, from the plan.
    fn set_gate_policy(&mut self, i: u16) {
        let (Some(nf), Some(gate)) = (self.plan.nf(i), self.gates.get_mut(i as usize)) else {
            return;
        };
        // Beside its worker an NF is one stage of the core's pipeline: the
        // worker hands it the core when it yields, so no wake-up rule
        // applies (`settings.workers`).
        gate.set_policy(if self.cfg.nfs_share_core {
            WakePolicy::IMMEDIATE
        } else {
            nf.wakeup
        });
    }

    /// The routing facts of the whole plan.
    fn tables(&self) -> Derived {
        let plan = &self.plan;
        let mut d = Derived {
            chain_queue: plan
                .chains
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let route = c.as_ref().and_then(|c| plan.route(c.route));
                    let mut q =
                        route.map_or_else(Vec::new, |r| first_queues(plan, &self.nfs, &r.path));
                    // Kept flows enter on the held route (a rollout).
                    let held = self.held.route_of_chain(i as u16);
                    let kept = held
                        .and_then(|r| plan.route(r))
                        .map(|r| first_queues(plan, &self.nfs, &r.path));
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
            add_next_queues(plan, &self.nfs, &r.path, &mut d.nf_next_queues);
        }
        for (i, nf) in self.nfs.iter().enumerate() {
            let Some(nf) = nf else { continue };
            match nf.exec {
                Exec::Process(_) => d.process_ids.push(i as u16),
                Exec::Inline(_) if nf.tick.is_some() => d.ticking.push(i as u16),
                Exec::Inline(_) => {}
            }
        }
        (d.input_ports, d.nic_fds) = port_lists(&self.ports);
        d.sleep_on_nics = sleeps_on_nics(&d);
        d.members = self.members_of(&d.process_ids);
        d
    }

    /// Derives the whole plan again and asserts it gives what the
    /// addition gave (the order of an NF's next queues aside: only which
    /// ones matters, and routes added into freed ids come in another
    /// order).
    #[cfg(debug_assertions)]
    fn assert_derived_alike(&self, added: &Added) {
        let sorted = |d: &Derived| {
            let mut next = d.nf_next_queues.clone();
            next.iter_mut().for_each(|v| v.sort_unstable());
            next
        };
        let whole = self.tables();
        let mine = &self.derived;
        assert_eq!(
            whole.chain_queue, mine.chain_queue,
            "chain queues after {added:?}"
        );
        assert_eq!(sorted(&whole), sorted(mine), "next queues after {added:?}");
        assert_eq!(
            whole.process_ids, mine.process_ids,
            "process NFs after {added:?}"
        );
        assert_eq!(whole.ticking, mine.ticking, "ticking NFs after {added:?}");
        assert_eq!(whole.input_ports, mine.input_ports);
        assert_eq!(whole.nic_fds, mine.nic_fds);
        assert_eq!(whole.sleep_on_nics, mine.sleep_on_nics);
        assert_eq!(
            whole.members, mine.members,
            "scheduler members after {added:?}"
        );
        let mut bells = bells::Bells::default();
        let nfs = &self.nfs;
        bells.rebuild(
            whole
                .process_ids
                .iter()
                .filter_map(|&i| Some((nfs[i as usize].as_ref()?.slot, i))),
        );
        assert!(bells.same_nfs(&self.bells), "doorbells after {added:?}");
    }

    /// NF `i` as the scheduler sees it: its slot, core and place in the
    /// run order (`None`: on no route, last), if it runs as a process.
    fn member(&self, i: u16, order: Option<(u32, u32)>) -> Option<Member> {
        let nf = self.nfs.get(i as usize)?.as_ref()?;
        let p = nf.process_ref()?;
        let planned = self.plan.nf(i);
        Some(Member {
            slot: nf.slot,
            cpu: p.spawn.cpu,
            order: order.unwrap_or((u32::MAX, u32::from(i))),
            beside_worker: self.cfg.nfs_share_core,
            weight: planned.and_then(|n| n.cpu_weight),
            idle: planned.map_or(IdlePoll::Always, |n| n.wakeup.idle),
            domain: planned.map_or(0, |n| n.domain),
        })
    }

    /// The process NFs `ids` as the scheduler sees them, each at its
    /// first place along the chains (chains in their order, hops in route
    /// order).
    fn members_of(&self, ids: &[u16]) -> Vec<Member> {
        let plan = &self.plan;
        let mut order: Vec<Option<(u32, u32)>> = vec![None; self.nfs.len()];
        for (c, &id) in plan.chain_order.iter().enumerate() {
            let Some(path) = plan.chain_path(id) else {
                continue;
            };
            for (h, hop) in path.iter().enumerate() {
                for &i in plan.hop_nfs(hop) {
                    if let Some(o) = order.get_mut(i as usize) {
                        o.get_or_insert((c as u32, h as u32));
                    }
                }
            }
        }
        ids.iter()
            .filter_map(|&i| self.member(i, order[i as usize]))
            .collect()
    }

    /// The places in the run order of the NFs on `chains` (added ones,
    /// so after every chain there was: the plan's chain order lists them
    /// last, and it is searched from its end).
    fn added_run_order(&self, chains: &[u16]) -> HashMap<u16, (u32, u32)> {
        let plan = &self.plan;
        let want: HashSet<u16> = chains.iter().copied().collect();
        let mut placed = Vec::with_capacity(want.len());
        let n = plan.chain_order.len();
        for (back, &id) in plan.chain_order.iter().rev().enumerate() {
            if placed.len() == want.len() {
                break;
            }
            if want.contains(&id) {
                placed.push((n - 1 - back, id));
            }
        }
        placed.sort_unstable();
        let mut order = HashMap::new();
        for (c, id) in placed {
            for (h, hop) in plan.chain_path(id).unwrap_or_default().iter().enumerate() {
                for &i in plan.hop_nfs(hop) {
                    order.entry(i).or_insert((c as u32, h as u32));
                }
            }
        }
        order
    }
}

/// Whether NF `i` runs as a process here.
fn is_process(nfs: &[Option<NfRt<'_>>], i: u16) -> bool {
    nfs.get(i as usize)
        .and_then(Option::as_ref)
        .is_some_and(|n| matches!(n.exec, Exec::Process(_)))
}

/// The process NFs of the first hop of `path` that has any: one NF, or
/// the members of a replica set.
fn first_queues(plan: &Plan, nfs: &[Option<NfRt<'_>>], path: &[Hop]) -> Vec<u16> {
    path.iter()
        .map(|h| -> Vec<u16> {
            let members = plan.hop_nfs(h).iter().copied();
            members.filter(|&i| is_process(nfs, i)).collect()
        })
        .find(|q| !q.is_empty())
        .unwrap_or_default()
}

/// Adds to `next` (by NF id) the queues that follow each NF of `path`.
fn add_next_queues(plan: &Plan, nfs: &[Option<NfRt<'_>>], path: &[Hop], next: &mut [Vec<u16>]) {
    for (pos, h) in path.iter().enumerate() {
        let after = first_queues(plan, nfs, &path[pos + 1..]);
        for &i in plan.hop_nfs(h) {
            if let Some(v) = next.get_mut(i as usize) {
                for &q in &after {
                    if !v.contains(&q) {
                        v.push(q);
                    }
                }
            }
        }
    }
}

/// The input ports read (a paused one is not read, nor slept on: its
/// frames wait), and the receive descriptors of the NIC ports among them.
fn port_lists(ports: &[Option<PortRt>]) -> (Vec<u16>, Vec<std::os::fd::RawFd>) {
    let input = (ports.iter().enumerate())
        .filter(|(_, p)| p.as_ref().is_some_and(|p| p.is_input() && !p.paused))
        .map(|(i, _)| i as u16)
        .collect();
    let fds = (ports.iter().flatten())
        .filter(|p| !p.paused)
        .filter_map(PortRt::rx_fd)
        .collect();
    (input, fds)
}

/// Whether an idle worker may sleep on its NICs: only when every input is
/// one and no process NF could wake it instead.
fn sleeps_on_nics(d: &Derived) -> bool {
    !d.nic_fds.is_empty() && d.nic_fds.len() == d.input_ports.len() && d.process_ids.is_empty()
}
