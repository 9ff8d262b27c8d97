//! `per_flow` NFs (Flurries' per-flow instances): an NF with `replicas: N,
//! steer: per_flow` is a pool of N instances, and a flow takes one of them
//! for itself.
//!
//! - A flow's first packet at the set takes an idle member (the lowest
//!   numbered, so a small load stays on few instances) and is pinned to it
//!   by flow id, two bytes per flow as `shortest_queue` pins are.
//! - When the flow's slot is released (its end marker passed every NF, or
//!   it idled out), [`Exclusive::release`] names its member if no flow is
//!   left on it, and the worker resets it (`NetworkFunction::reset`:
//!   called at once inline, an event in ring order for a process). Only
//!   once the reset is delivered does [`Exclusive::idle_again`] put the
//!   member back in the pool, so its next flow's packets queue behind the
//!   reset (a process's ring may be full: the worker retries).
//! - With no member idle the set's `fallback` decides: `drop` refuses the
//!   flow (its packets count as `nf_pool_exhausted`; it is asked again on
//!   each packet, so it gets a member once one is free), `shared` pins it
//!   to the member serving the fewest flows (the member is reset when its
//!   last flow ends).
//!
//! - `per_class` sets (Flurries' per-class NFs) work the same way with a
//!   class in place of a flow: a new flow whose class (`classes.rs`) has a
//!   member already is pinned to it; otherwise its class takes an idle
//!   member, which it keeps until its last flow is released. Under the
//!   `shared` fallback a flow whose class finds no idle member shares the
//!   least loaded one, flow by flow (the class is not recorded there).
//!
//! Cost: a pinned packet reads its pin; a new flow pops the free stack
//! (and, per class, looks its class up in a map of the classes served);
//! a flowless packet, or a new flow sharing a busy pool, reads the least
//! loaded member off a tournament tree (`least.rs`: a scan of 1,024
//! members cost 559 ns per packet, `cargo bench -p sluice-dataplane
//! --bench per_flow_pool`). Nothing allocates on the packet path: tables
//! are made when a plan is installed.

use std::collections::HashMap;

use sluice_spec::{Fallback, Steer};

use crate::classes::ClassKey;
use crate::least::Loads;
use crate::replicas::ReplicaSet;

/// One `per_flow` set's state.
#[derive(Debug)]
struct Pool {
    /// By flow id: member + 1, 0 while the flow has none.
    pins: Box<[u16]>,
    /// By member: flows pinned to it (and the least loaded member).
    load: Loads,
    /// Idle members, the lowest on top.
    free: Vec<u16>,
    /// By member: whether it is in `free` (so a member handed back twice
    /// is pushed once without a scan of `free`).
    in_free: Vec<bool>,
    /// Members the state was made for.
    members: Vec<u16>,
    /// By member: the class it serves (`per_class`; `None` when idle).
    classes: Vec<Option<ClassKey>>,
    /// The same the other way: class → member, for the classes served
    /// (a new flow's lookup; room for every member is reserved, so an
    /// insert never allocates on the packet path).
    by_class: HashMap<ClassKey, u16>,
    /// Packets waiting for an instance (`fallback: wait`): a new flow
    /// waits behind them.
    waiting: u32,
}

impl Pool {
    fn new(set: &ReplicaSet, capacity: u32) -> Pool {
        let mut p = Pool {
            pins: vec![0u16; capacity as usize].into_boxed_slice(),
            load: Loads::default(),
            free: Vec::new(),
            in_free: Vec::new(),
            members: Vec::new(),
            classes: Vec::new(),
            by_class: HashMap::new(),
            waiting: 0,
        };
        p.resize(set);
        p
    }

    /// Follows a change of the set's members: pins to members it lost are
    /// cleared (those flows take a member afresh), loads are recounted.
    fn resize(&mut self, set: &ReplicaSet) {
        let n = set.members.len();
        let mut load = vec![0u32; n];
        for pin in self.pins.iter_mut().filter(|p| **p != 0) {
            match load.get_mut(usize::from(*pin - 1)) {
                Some(l) => *l += 1,
                None => *pin = 0,
            }
        }
        self.free = (0..n as u16)
            .rev()
            .filter(|&m| load[m as usize] == 0)
            .collect();
        self.in_free = load.iter().map(|&l| l == 0).collect();
        self.classes.resize(n, None);
        for (c, l) in self.classes.iter_mut().zip(&load) {
            if *l == 0 {
                *c = None;
            }
        }
        self.by_class.clear();
        self.by_class.reserve(n);
        for (m, c) in self.classes.iter().enumerate() {
            if let Some(k) = c {
                self.by_class.insert(*k, m as u16);
            }
        }
        self.load = Loads::new(load);
        self.members = set.members.clone();
    }
}

/// Every `per_flow` set's state on one worker, by base NF id.
#[derive(Debug, Default)]
pub struct Exclusive {
    pools: Vec<Option<Pool>>,
}

impl Exclusive {
    /// State for every `per_flow` set of `sets`, keeping the pins of sets
    /// that stay, for `capacity` flow ids.
    pub fn install(&mut self, sets: &[Option<ReplicaSet>], capacity: u32) {
        let mut pools = Vec::with_capacity(sets.len());
        for (base, set) in sets.iter().enumerate() {
            let keep = self.pools.get_mut(base).and_then(Option::take);
            pools.push(match set {
                Some(s) if s.steer.exclusive() => Some(match keep {
                    Some(mut p) if p.pins.len() == capacity as usize => {
                        if p.members != s.members {
                            p.resize(s);
                        }
                        p
                    }
                    _ => Pool::new(s, capacity),
                }),
                _ => None,
            });
        }
        self.pools = pools;
    }

    /// The member of `set` (based at NF `base`) that flow `flow` has,
    /// taking an idle one first (`per_class`: its class's member first;
    /// `class` is asked only for a flow without a member); `None`: none is
    /// idle and the fallback is `drop`. A flowless packet (`flow` beyond
    /// the table) goes to the member serving the fewest flows, unpinned.
    #[inline]
    pub fn pick(
        &mut self,
        base: u16,
        set: &ReplicaSet,
        flow: u32,
        class: impl FnOnce() -> ClassKey,
    ) -> Option<u16> {
        let Some(p) = self.pools.get_mut(base as usize).and_then(Option::as_mut) else {
            return set.members.first().copied();
        };
        let Some(pin) = p.pins.get_mut(flow as usize) else {
            return p.load.least().map(|m| set.members[m]);
        };
        if *pin != 0 {
            return set.members.get(usize::from(*pin - 1)).copied();
        }
        if p.waiting > 0 {
            // A flow that came first waits for the next free instance.
            return None;
        }
        let key = (set.steer == Steer::PerClass).then(class);
        let own = key
            .and_then(|k| p.by_class.get(&k))
            .map(|&m| usize::from(m));
        let popped = || {
            let m = usize::from(p.free.pop()?);
            p.in_free[m] = false;
            Some(m)
        };
        let m = match own.or_else(popped) {
            Some(m) => m,
            None => match set.fallback {
                Fallback::Drop | Fallback::Wait => return None,
                Fallback::Shared => p.load.least()?,
            },
        };
        if own.is_none() && p.load.get(m) == 0 {
            p.classes[m] = key;
            if let Some(k) = key {
                p.by_class.insert(k, m as u16);
            }
        }
        *pin = m as u16 + 1;
        p.load.add(m);
        Some(set.members[m])
    }

    /// Tells the set based at `base` how many packets wait for an
    /// instance (`fallback: wait`, `worker/waiting.rs`).
    pub fn set_waiting(&mut self, base: u16, n: u32) {
        if let Some(p) = self.pools.get_mut(base as usize).and_then(Option::as_mut) {
            p.waiting = n;
        }
    }

    /// The member flow `flow` has in the set based at `base`, if any.
    pub fn pinned(&self, base: u16, set: &ReplicaSet, flow: u32) -> Option<u16> {
        let p = self.pools.get(base as usize)?.as_ref()?;
        let pin = *p.pins.get(flow as usize)?;
        (pin != 0).then(|| set.members.get(usize::from(pin - 1)).copied())?
    }

    /// Flow `flow`'s slot was released: its members lose it, and those
    /// left with no flow are pushed on `idle` (base NF id, member number,
    /// NF id) for the worker to reset and then hand to
    /// [`Self::idle_again`].
    pub fn release(&mut self, flow: u32, idle: &mut Vec<Idle>) {
        for (base, p) in self.pools.iter_mut().enumerate() {
            let Some(p) = p else { continue };
            let Some(pin) = p.pins.get_mut(flow as usize) else {
                continue;
            };
            if *pin == 0 {
                continue;
            }
            let m = usize::from(*pin - 1);
            *pin = 0;
            // A pin names a member with a load (install recounts them).
            if p.load.get(m) > 0 && p.load.sub(m) == 0 {
                if let Some(k) = p.classes[m].take() {
                    p.by_class.remove(&k);
                }
                idle.push(Idle {
                    base: base as u16,
                    member: m as u16,
                    nf: p.members[m],
                });
            }
        }
    }

    /// Member `idle` was reset: it may take a flow again (last in, first
    /// out: a warm instance first). A member the set has lost meanwhile,
    /// or one a flow took again (`shared`), stays out.
    pub fn idle_again(&mut self, idle: Idle) {
        let Some(p) = self
            .pools
            .get_mut(idle.base as usize)
            .and_then(Option::as_mut)
        else {
            return;
        };
        let m = usize::from(idle.member);
        if p.members.get(m) == Some(&idle.nf) && p.load.get(m) == 0 && !p.in_free[m] {
            p.in_free[m] = true;
            p.free.push(idle.member);
        }
    }

    /// Flows NF `nf` serves, if it is a member of the `per_flow` set based
    /// at `set` (its plan's `set`; for reports: a scan of that set's
    /// members only, as a report asks this of every NF).
    pub fn flows_of(&self, set: Option<u16>, nf: u16) -> Option<u32> {
        let p = self.pools.get(usize::from(set?))?.as_ref()?;
        let m = p.members.iter().position(|&x| x == nf)?;
        Some(p.load.get(m))
    }

    /// Idle members of the set based at `base` (for reports and tests).
    pub fn idle(&self, base: u16) -> usize {
        self.pools
            .get(base as usize)
            .and_then(Option::as_ref)
            .map_or(0, |p| p.free.len())
    }
}

/// A member its last flow left, to reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idle {
    /// The set's base NF id.
    pub base: u16,
    /// Its member number.
    pub member: u16,
    /// Its NF id.
    pub nf: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> ClassKey {
        ClassKey::NONE
    }

    fn set(n: u16, fallback: Fallback) -> Vec<Option<ReplicaSet>> {
        let mut s = ReplicaSet::new((0..n).map(|i| 10 + i).collect(), Steer::PerFlow);
        s.fallback = fallback;
        vec![
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            Some(s),
        ]
    }

    fn pool(n: u16, fallback: Fallback) -> (Exclusive, ReplicaSet) {
        let sets = set(n, fallback);
        let mut e = Exclusive::default();
        e.install(&sets, 64);
        (e, sets[10].clone().unwrap())
    }

    #[test]
    fn each_flow_takes_a_member_of_its_own_and_keeps_it() {
        let (mut e, s) = pool(3, Fallback::Drop);
        assert_eq!(e.pick(10, &s, 1, none), Some(10));
        assert_eq!(e.pick(10, &s, 2, none), Some(11));
        assert_eq!(e.pick(10, &s, 1, none), Some(10), "pinned");
        assert_eq!(e.pick(10, &s, 3, none), Some(12));
        assert_eq!(e.idle(10), 0);
        assert_eq!(e.pinned(10, &s, 2), Some(11));
        assert_eq!(e.pinned(10, &s, 9), None);
    }

    #[test]
    fn with_the_pool_busy_drop_refuses_and_a_freed_member_is_taken_after_its_reset() {
        let (mut e, s) = pool(2, Fallback::Drop);
        e.pick(10, &s, 1, none);
        e.pick(10, &s, 2, none);
        assert_eq!(e.pick(10, &s, 3, none), None, "refused while busy");
        let mut idle = Vec::new();
        e.release(2, &mut idle);
        assert_eq!(idle.iter().map(|i| i.nf).collect::<Vec<_>>(), [11]);
        assert_eq!(e.pick(10, &s, 3, none), None, "not before its reset");
        e.idle_again(idle[0]);
        e.idle_again(idle[0]);
        assert_eq!(e.idle(10), 1, "once");
        assert_eq!(e.pick(10, &s, 3, none), Some(11));
        e.release(7, &mut idle);
        assert_eq!(idle.len(), 1, "a flow that had none frees nothing");
    }

    #[test]
    fn shared_fallback_doubles_up_on_the_least_loaded_member_and_resets_it_once_empty() {
        let (mut e, s) = pool(2, Fallback::Shared);
        e.pick(10, &s, 1, none);
        e.pick(10, &s, 2, none);
        assert_eq!(e.pick(10, &s, 3, none), Some(10));
        let mut idle = Vec::new();
        e.release(1, &mut idle);
        assert!(idle.is_empty(), "flow 3 still on it");
        e.release(3, &mut idle);
        assert_eq!(idle.iter().map(|i| i.nf).collect::<Vec<_>>(), [10]);
    }

    #[test]
    fn a_shrunk_pool_repins_the_flows_of_lost_members() {
        let (mut e, s) = pool(3, Fallback::Drop);
        e.pick(10, &s, 1, none);
        e.pick(10, &s, 2, none);
        e.pick(10, &s, 3, none);
        let small = set(2, Fallback::Drop);
        e.install(&small, 64);
        let s2 = small[10].clone().unwrap();
        assert_eq!(e.pinned(10, &s2, 3), None, "its member is gone");
        assert_eq!(e.pick(10, &s2, 3, none), None, "both left serve flows");
        assert_eq!(e.pinned(10, &s2, 1), Some(10), "kept");
        let grown = set(4, Fallback::Drop);
        e.install(&grown, 64);
        let s4 = grown[10].clone().unwrap();
        assert_eq!(e.idle(10), 2);
        assert_eq!(e.pick(10, &s4, 3, none), Some(12));
    }

    #[test]
    fn flowless_packets_go_unpinned_to_the_least_loaded_member() {
        let (mut e, s) = pool(2, Fallback::Drop);
        e.pick(10, &s, 1, none);
        assert_eq!(e.pick(10, &s, u32::MAX, none), Some(11));
        assert_eq!(e.idle(10), 1, "nothing taken");
    }

    #[test]
    fn a_class_keeps_one_member_for_all_its_flows_until_its_last_ends() {
        let mut sets = set(2, Fallback::Drop);
        let s = sets[10].as_mut().unwrap();
        s.steer = Steer::PerClass;
        let s = s.clone();
        let mut e = Exclusive::default();
        e.install(&sets, 64);
        let (a, b, c) = (ClassKey::test(1), ClassKey::test(2), ClassKey::test(3));
        assert_eq!(e.pick(10, &s, 1, || a), Some(10));
        assert_eq!(e.pick(10, &s, 2, || a), Some(10), "same class, same member");
        assert_eq!(e.pick(10, &s, 3, || b), Some(11));
        assert_eq!(e.pick(10, &s, 4, || c), None, "a third class: none idle");
        assert_eq!(e.pick(10, &s, 5, || b), Some(11));
        let mut idle = Vec::new();
        e.release(1, &mut idle);
        assert!(idle.is_empty(), "flow 2 still holds class a");
        e.release(2, &mut idle);
        assert_eq!(idle.iter().map(|i| i.nf).collect::<Vec<_>>(), [10]);
        assert_eq!(e.pick(10, &s, 6, || a), None, "a's member awaits its reset");
        e.idle_again(idle[0]);
        assert_eq!(e.pick(10, &s, 6, || c), Some(10), "then any class takes it");
        assert_eq!(e.pick(10, &s, 7, || c), Some(10));
        assert_eq!(e.pick(10, &s, 8, || a), None);
    }

    /// The largest pool the spec allows: every member is taken once, by
    /// flow or by class, and a class keeps its member across its flows.
    #[test]
    fn a_pool_of_the_most_members_gives_each_flow_and_class_its_own() {
        let n = sluice_spec::MAX_REPLICAS as u16;
        let mut sets = set(n, Fallback::Drop);
        let s = sets[10].clone().unwrap();
        let mut e = Exclusive::default();
        e.install(&sets, 4096);
        let got: std::collections::HashSet<u16> = (0..u32::from(n))
            .map(|f| e.pick(10, &s, f, none).unwrap())
            .collect();
        assert_eq!(got.len(), usize::from(n));
        assert_eq!(e.pick(10, &s, u32::from(n), none), None, "all busy");

        let c = sets[10].as_mut().unwrap();
        c.steer = Steer::PerClass;
        let c = c.clone();
        let mut e = Exclusive::default();
        e.install(&sets, 4096);
        let class = |f: u32| ClassKey::test(u128::from(f % u32::from(n)));
        let mut member = vec![0u16; usize::from(n)];
        for f in 0..2 * u32::from(n) {
            let m = e.pick(10, &c, f, || class(f)).unwrap();
            if f < u32::from(n) {
                member[f as usize] = m;
            } else {
                assert_eq!(
                    m,
                    member[(f - u32::from(n)) as usize],
                    "flow {f}: its class's member"
                );
            }
        }
        let mut idle = Vec::new();
        e.release(700, &mut idle);
        e.release(700 + u32::from(n), &mut idle);
        assert_eq!(idle.len(), 1);
        e.idle_again(idle[0]);
        let fresh = ClassKey::test(1 << 100);
        assert_eq!(e.pick(10, &c, 3000, || fresh), Some(member[700]));
        assert_eq!(
            e.pick(10, &c, 3001, || class(700)),
            None,
            "its old class is gone"
        );
    }

    #[test]
    fn while_packets_wait_a_new_flow_waits_behind_them_and_pinned_flows_pass() {
        let (mut e, s) = pool(2, Fallback::Wait);
        assert_eq!(e.pick(10, &s, 1, none), Some(10));
        assert_eq!(e.pick(10, &s, 2, none), Some(11));
        assert_eq!(e.pick(10, &s, 3, none), None, "busy: flow 3 waits");
        e.set_waiting(10, 1);
        let mut idle = Vec::new();
        e.release(1, &mut idle);
        e.idle_again(idle[0]);
        assert_eq!(e.pick(10, &s, 4, none), None, "flow 3 came first");
        assert_eq!(e.pick(10, &s, 2, none), Some(11), "a pinned flow passes");
        e.set_waiting(10, 0);
        assert_eq!(e.pick(10, &s, 3, none), Some(10), "served in order");
    }
}
