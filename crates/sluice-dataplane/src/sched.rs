//! The scheduler of NF processes that share a core: which of them take
//! turns, in which order, for how long, and what happens to one that keeps
//! the core too long.
//!
//! Every worker owns one [`Scheduler`]. After each change of its NFs it
//! calls [`Scheduler::apply`] with its process NFs; the scheduler groups
//! them by core, orders each group along the chains (the first chain's
//! hops in order, then the next chain's; UNiS, seed 001: a workflow-aware
//! order, so one round of the core moves a batch through the whole chain)
//! and publishes each NF's [`Budget`] in its control block. NFs read their
//! budget at every pass of their loop, so a new policy takes effect without
//! restarting them. The turn protocol itself is `sluice_mem::turn`.
//!
//! [`Scheduler::police`] is the watchdog: a holder that keeps the turn for
//! more than [`HOG_SLICES`] slices while another NF of its core has
//! packets (a spin loop in `process`, a stopped or dead process) loses it
//! to the next NF with work, and the revocation is counted. The kernel then
//! shares the core between the hog and the NF holding the turn, so the
//! hog's siblings keep running.

use sluice_mem::turn::mode;
use sluice_mem::Arena;
use std::sync::atomic::Ordering;

/// How the NF processes of one core are scheduled
/// (`settings.scheduler.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedMode {
    /// Turns on a core that runs no worker where one chain has
    /// [`AUTO_TURNS_FROM`] or more process NFs, the NFs' own hybrid
    /// polling elsewhere.
    Auto,
    /// Every NF polls, yields and sleeps by itself.
    Hybrid,
    /// NFs sharing a core take turns in chain order (also alone on a core).
    Turns,
}

/// The scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedPolicy {
    /// Which NFs take turns.
    pub mode: SchedMode,
    /// Longest turn while another NF of the core has packets, in ns.
    pub slice_ns: u64,
}

impl SchedPolicy {
    /// The policy of `settings.scheduler`.
    pub fn from_settings(s: &sluice_spec::SchedulerSettings) -> SchedPolicy {
        SchedPolicy {
            mode: match s.policy {
                sluice_spec::SchedulerPolicy::Hybrid => SchedMode::Hybrid,
                sluice_spec::SchedulerPolicy::Turns => SchedMode::Turns,
                sluice_spec::SchedulerPolicy::Auto => SchedMode::Auto,
            },
            slice_ns: s.slice_us.saturating_mul(1_000),
        }
    }
}

impl Default for SchedPolicy {
    /// `settings.scheduler`'s defaults: turns from four NFs per core.
    fn default() -> Self {
        SchedPolicy::from_settings(&sluice_spec::SchedulerSettings::default())
    }
}

/// Under [`SchedMode::Auto`], the NFs of a core take turns once one chain
/// has this many of them there. Turns pay off where packets go from NF to
/// NF on the core (8-NF chain: 1.8× the rate); NFs of separate chains gain
/// nothing from the order and pay a hand-over per turn (10 one-NF chains:
/// 0.73× the rate), and with two or three NFs any order is short.
pub const AUTO_TURNS_FROM: usize = 4;

/// A holder loses the turn after this many slices while others wait...
pub const HOG_SLICES: u64 = 50;

/// ...and never sooner than this: the host alone holds a vCPU for up to a
/// millisecond or two here (`sluice bench jitter`), which is no fault of
/// the NF it interrupted.
pub const HOG_MIN_NS: u64 = 5_000_000;

/// A process NF as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Its arena slot.
    pub slot: u32,
    /// The CPU it is pinned to.
    pub cpu: u32,
    /// Its place in the run order: (chain, hop), smaller first.
    pub order: (u32, u32),
    /// Whether a worker runs on the same CPU (the NF then shares the core
    /// with the worker, which turns do not schedule).
    pub beside_worker: bool,
}

/// What the scheduler publishes for one NF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// The NF's slot.
    pub slot: u32,
    /// `sluice_mem::turn::mode`.
    pub mode: u32,
    /// The core whose turn it takes.
    pub core: u32,
    /// The next slot in the core's run order (itself when alone).
    pub next: u32,
}

/// Computes every NF's assignment: members grouped by CPU, each group in
/// run order, linked in a circle. Pure, so it is tested without an arena.
pub fn assign(policy: &SchedPolicy, members: &[Member]) -> Vec<Assignment> {
    let mut sorted: Vec<Member> = members.to_vec();
    sorted.sort_by_key(|m| (m.cpu, m.order, m.slot));
    let mut out = Vec::with_capacity(sorted.len());
    for group in sorted.chunk_by(|a, b| a.cpu == b.cpu) {
        let turns = match policy.mode {
            SchedMode::Hybrid => false,
            SchedMode::Turns => !group[0].beside_worker,
            SchedMode::Auto => !group[0].beside_worker && longest_chain(group) >= AUTO_TURNS_FROM,
        };
        for (k, m) in group.iter().enumerate() {
            out.push(Assignment {
                slot: m.slot,
                mode: if turns { mode::TURNS } else { mode::HYBRID },
                core: m.cpu,
                next: group[(k + 1) % group.len()].slot,
            });
        }
    }
    out
}

/// The most NFs of one chain in `group` (sorted by CPU and order, so a
/// chain's NFs are adjacent).
fn longest_chain(group: &[Member]) -> usize {
    group
        .chunk_by(|a, b| a.order.0 == b.order.0)
        .map(<[Member]>::len)
        .max()
        .unwrap_or(0)
}

/// Watchdog state of one core that takes turns.
#[derive(Debug, Clone, Copy)]
struct Watch {
    core: u32,
    changes: u64,
    since_ns: u64,
}

/// One worker's scheduler.
#[derive(Debug, Default)]
pub struct Scheduler {
    policy: SchedPolicy,
    assigned: Vec<Assignment>,
    /// (core, slot) of every NF taking turns, sorted (the watchdog's
    /// membership test).
    members: Vec<(u32, u32)>,
    watches: Vec<Watch>,
    revoked: u64,
    /// The members of the last apply.
    last: Vec<Member>,
    /// Slots that lost a turn to the watchdog: they leave the circle and
    /// schedule themselves (hybrid) from then on, so the turn is never
    /// handed back to an NF that does not take it.
    demoted: Vec<u32>,
}

/// What the scheduler reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStats {
    /// NFs taking turns.
    pub taking_turns: usize,
    /// Cores whose NFs take turns.
    pub turn_cores: usize,
    /// Turns the watchdog took from a holder that kept one too long.
    pub revoked: u64,
    /// NFs taken out of the turns for that, scheduling themselves.
    pub demoted: usize,
}

impl Scheduler {
    /// A scheduler with `policy`.
    pub fn new(policy: SchedPolicy) -> Scheduler {
        Scheduler {
            policy,
            ..Scheduler::default()
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> SchedPolicy {
        self.policy
    }

    /// Publishes the budgets of `members` (this worker's process NFs).
    pub fn apply(&mut self, arena: &Arena, members: &[Member]) {
        self.demoted
            .retain(|d| members.iter().any(|m| m.slot == *d));
        // Demoted NFs leave the circle and schedule themselves.
        let circle: Vec<Member> = members
            .iter()
            .filter(|m| !self.demoted.contains(&m.slot))
            .copied()
            .collect();
        let mut assigned = assign(&self.policy, &circle);
        assigned.extend(
            members
                .iter()
                .filter(|m| self.demoted.contains(&m.slot))
                .map(|m| Assignment {
                    slot: m.slot,
                    mode: mode::HYBRID,
                    core: m.cpu,
                    next: m.slot,
                }),
        );
        self.last = members.to_vec();
        let slots = arena.config().nf_slots;
        for a in &assigned {
            if a.slot >= slots || a.core as usize >= sluice_mem::arena::MAX_CORES {
                continue;
            }
            let b = &arena.nf_control(a.slot).budget;
            b.core.store(a.core, Ordering::Relaxed);
            b.next.store(a.next, Ordering::Relaxed);
            b.slice_ns.store(self.policy.slice_ns, Ordering::Relaxed);
            // Mode last: an NF that sees TURNS sees its core and links.
            let was = b.mode.swap(a.mode, Ordering::AcqRel);
            if was == mode::TURNS && a.mode == mode::HYBRID {
                // It may sleep waiting for a turn it will no longer get.
                arena.nf_control(a.slot).wake.wake();
            }
        }
        let mut cores: Vec<u32> = assigned
            .iter()
            .filter(|a| a.mode == mode::TURNS)
            .map(|a| a.core)
            .collect();
        cores.dedup();
        for &core in &cores {
            // NFs that waited for a turn under the old order: whoever has
            // packets gets the turn if it is free.
            if let Some(s) = assigned
                .iter()
                .filter(|a| a.core == core)
                .find(|a| arena.nf_rx_ring(a.slot).occupancy() > 0)
            {
                if arena.core_turn(core).claim(s.slot) {
                    arena.nf_control(s.slot).wake.wake();
                }
            }
        }
        self.watches = cores
            .iter()
            .map(|&core| Watch {
                core,
                changes: arena.core_turn(core).changes(),
                since_ns: sluice_sys::monotonic_ns(),
            })
            .collect();
        self.members = assigned
            .iter()
            .filter(|a| a.mode == mode::TURNS)
            .map(|a| (a.core, a.slot))
            .collect();
        self.members.sort_unstable();
        self.assigned = assigned;
    }

    /// Changes the policy; the next [`apply`](Self::apply) publishes it.
    pub fn set_policy(&mut self, policy: SchedPolicy) {
        self.policy = policy;
    }

    /// The watchdog (called about every millisecond): revokes turns held
    /// too long while other NFs of the core wait, and turns held by a slot
    /// that is no longer a member; pushes the slots it took a turn from
    /// onto `revoked`.
    pub fn police(&mut self, arena: &Arena, now: u64, revoked: &mut Vec<u32>) {
        let limit = self
            .policy
            .slice_ns
            .saturating_mul(HOG_SLICES)
            .max(HOG_MIN_NS);
        for w in &mut self.watches {
            let turn = arena.core_turn(w.core);
            let changes = turn.changes();
            let Some(holder) = turn.holder() else {
                (w.changes, w.since_ns) = (changes, now);
                continue;
            };
            let member = self.members.binary_search(&(w.core, holder)).is_ok();
            if member {
                if changes != w.changes {
                    (w.changes, w.since_ns) = (changes, now);
                    continue;
                }
                if now.saturating_sub(w.since_ns) <= limit {
                    continue;
                }
            }
            // Held too long (or by a stranger): is anyone waiting? Only
            // then is it worth a look at every ring of the core.
            let waiting = self
                .assigned
                .iter()
                .filter(|a| a.core == w.core && a.slot != holder)
                .find(|a| arena.nf_rx_ring(a.slot).occupancy() > 0)
                .map(|a| a.slot);
            if member && waiting.is_none() {
                // Nobody waits: the clock runs only while someone does.
                w.since_ns = now;
                continue;
            }
            if turn.revoke(holder, waiting) {
                self.revoked += 1;
                revoked.push(holder);
                if let Some(to) = waiting {
                    arena.nf_control(to).wake.wake();
                }
            }
            (w.changes, w.since_ns) = (turn.changes(), now);
        }
        let hogs: Vec<u32> = revoked
            .iter()
            .copied()
            .filter(|s| self.last.iter().any(|m| m.slot == *s))
            .collect();
        if !hogs.is_empty() {
            self.demoted.extend(hogs);
            let members = std::mem::take(&mut self.last);
            self.apply(arena, &members);
        }
    }

    /// What the scheduler has done.
    pub fn stats(&self) -> SchedStats {
        SchedStats {
            taking_turns: self
                .assigned
                .iter()
                .filter(|a| a.mode == mode::TURNS)
                .count(),
            turn_cores: self.watches.len(),
            revoked: self.revoked,
            demoted: self.demoted.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(slot: u32, cpu: u32, order: (u32, u32)) -> Member {
        Member {
            slot,
            cpu,
            order,
            beside_worker: false,
        }
    }

    fn auto() -> SchedPolicy {
        SchedPolicy {
            mode: SchedMode::Auto,
            slice_ns: 20_000,
        }
    }

    fn turns() -> SchedPolicy {
        SchedPolicy {
            mode: SchedMode::Turns,
            ..auto()
        }
    }

    #[test]
    fn each_core_runs_its_nfs_in_chain_order_in_a_circle() {
        // Slots deliberately out of chain order.
        let m = [
            member(7, 1, (0, 2)),
            member(3, 1, (0, 0)),
            member(9, 1, (1, 0)),
            member(5, 1, (0, 1)),
        ];
        let a = assign(&turns(), &m);
        let next: Vec<(u32, u32)> = a.iter().map(|a| (a.slot, a.next)).collect();
        assert_eq!(next, [(3, 5), (5, 7), (7, 9), (9, 3)]);
        assert!(a.iter().all(|a| a.mode == mode::TURNS && a.core == 1));
    }

    #[test]
    fn auto_lets_a_few_nfs_poll_and_never_schedules_a_workers_core() {
        let few = [member(0, 1, (0, 0)), member(1, 1, (0, 1))];
        let a = assign(&auto(), &few);
        assert!(a.iter().all(|a| a.mode == mode::HYBRID));
        let forced = turns();
        assert!(assign(&forced, &few).iter().all(|a| a.mode == mode::TURNS));
        let beside: Vec<Member> = (0..8)
            .map(|i| Member {
                beside_worker: true,
                ..member(i, 0, (0, i))
            })
            .collect();
        assert!(assign(&forced, &beside)
            .iter()
            .all(|a| a.mode == mode::HYBRID));
    }

    #[test]
    fn cores_are_separate_circles() {
        let m: Vec<Member> = (0..8).map(|i| member(i, 1 + i % 2, (0, i))).collect();
        let a = assign(&auto(), &m);
        for x in &a {
            let next = a.iter().find(|y| y.slot == x.next).unwrap();
            assert_eq!(next.core, x.core, "a link never leaves its core");
        }
        let on1: Vec<u32> = a.iter().filter(|x| x.core == 1).map(|x| x.slot).collect();
        assert_eq!(on1, [0, 2, 4, 6]);
    }

    fn arena(slots: u32) -> Arena {
        Arena::create(sluice_mem::ArenaConfig {
            buffers: 1024,
            ring_size: 64,
            nf_slots: slots,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
        })
        .unwrap()
    }

    /// Puts one entry in `slot`'s receive ring (the scheduler only looks
    /// at occupancy).
    fn give_work(a: &Arena, slot: u32) {
        assert_eq!(a.nf_rx_ring(slot).producer().enqueue(&[1]).unwrap(), 1);
    }

    #[test]
    fn the_budgets_reach_the_control_blocks_and_a_new_policy_replaces_them() {
        let a = arena(4);
        let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, 3 - i))).collect();
        let mut s = Scheduler::new(auto());
        s.apply(&a, &m);
        let b = |slot: u32| &a.nf_control(slot).budget;
        assert_eq!(b(3).mode.load(Ordering::Relaxed), mode::TURNS);
        assert_eq!(
            b(3).next.load(Ordering::Relaxed),
            2,
            "chain order, not slots"
        );
        assert_eq!(b(0).next.load(Ordering::Relaxed), 3, "a circle");
        assert_eq!(b(0).slice_ns.load(Ordering::Relaxed), 20_000);
        assert_eq!(s.stats().taking_turns, 4);
        s.set_policy(SchedPolicy {
            mode: SchedMode::Hybrid,
            slice_ns: 20_000,
        });
        s.apply(&a, &m);
        assert!((0..4).all(|i| b(i).mode.load(Ordering::Relaxed) == mode::HYBRID));
        assert_eq!(s.stats(), SchedStats::default());
    }

    #[test]
    fn applying_hands_a_free_turn_to_an_nf_with_packets() {
        let a = arena(4);
        let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, i))).collect();
        give_work(&a, 2);
        Scheduler::new(auto()).apply(&a, &m);
        assert_eq!(a.core_turn(1).holder(), Some(2));
    }

    #[test]
    fn the_watchdog_takes_the_turn_from_a_hog_only_while_others_wait() {
        let a = arena(4);
        let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, i))).collect();
        let mut s = Scheduler::new(turns());
        s.apply(&a, &m);
        let turn = a.core_turn(1);
        assert!(turn.claim(0));
        let t0 = sluice_sys::monotonic_ns();
        let mut out = Vec::new();
        // Nobody waits: a holder may keep the turn as long as it likes.
        s.police(&a, t0 + 1, &mut out);
        s.police(&a, t0 + 10 * HOG_MIN_NS, &mut out);
        assert!(out.is_empty() && turn.holds(0));
        // Slot 3 waits, but not yet for long.
        give_work(&a, 3);
        let t1 = t0 + 11 * HOG_MIN_NS;
        s.police(&a, t1, &mut out);
        assert!(turn.holds(0), "{out:?}");
        s.police(&a, t1 + 2 * HOG_MIN_NS, &mut out);
        assert_eq!(out, [0]);
        assert_eq!(turn.holder(), Some(3), "the waiting NF gets the turn");
        assert_eq!(s.stats().revoked, 1);
        // The hog leaves the circle: the turn never comes back to it.
        assert_eq!(s.stats().demoted, 1);
        let b = |slot: u32| &a.nf_control(slot).budget;
        assert_eq!(b(0).mode.load(Ordering::Relaxed), mode::HYBRID);
        assert_eq!(b(3).next.load(Ordering::Relaxed), 1, "3 → 1, skipping 0");
        // It stays out when the worker applies its NFs again.
        s.apply(&a, &m);
        assert_eq!(b(0).mode.load(Ordering::Relaxed), mode::HYBRID);
        assert_eq!(s.stats().taking_turns, 3);
    }

    #[test]
    fn a_turn_held_by_a_slot_that_left_is_taken_back_at_once() {
        let a = arena(4);
        let m: Vec<Member> = (0..3).map(|i| member(i, 1, (0, i))).collect();
        let mut s = Scheduler::new(turns());
        s.apply(&a, &m);
        assert!(a.core_turn(1).claim(3), "slot 3 is no member");
        let mut out = Vec::new();
        s.police(&a, sluice_sys::monotonic_ns() + 1, &mut out);
        assert_eq!(out, [3]);
        assert_eq!(a.core_turn(1).holder(), None);
    }

    #[test]
    fn auto_takes_turns_for_a_chain_not_for_nfs_of_separate_chains() {
        let separate: Vec<Member> = (0..10).map(|i| member(i, 1, (i, 0))).collect();
        assert!(assign(&auto(), &separate)
            .iter()
            .all(|a| a.mode == mode::HYBRID));
        let mut mixed = separate;
        mixed.extend((10..14).map(|i| member(i, 1, (20, i))));
        assert!(assign(&auto(), &mixed)
            .iter()
            .all(|a| a.mode == mode::TURNS));
    }

    #[test]
    fn hybrid_turns_nobody() {
        let m: Vec<Member> = (0..10).map(|i| member(i, 1, (0, i))).collect();
        let p = SchedPolicy {
            mode: SchedMode::Hybrid,
            ..auto()
        };
        assert!(assign(&p, &m).iter().all(|a| a.mode == mode::HYBRID));
    }
}
