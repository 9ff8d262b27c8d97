//! The scheduler of NF processes that share a core: which of them take
//! turns, in which order, for how long, and what happens to one that keeps
//! the core too long.
//!
//! Every worker owns one [`Scheduler`]. After each change of its NFs it
//! calls [`Scheduler::apply`] with its process NFs; the scheduler groups
//! them by core and trust domain ([`TurnGroup`]: an NF maps only its own
//! domain's control blocks, so it can hand a turn only within it), orders
//! each group along the chains (the first chain's
//! hops in order, then the next chain's; UNiS, seed 001: a workflow-aware
//! order, so one round of the core moves a batch through the whole chain)
//! and publishes each NF's [`Budget`] in its control block: its turns and,
//! for NFs that poll on their own, how they poll (`crate::polling`). NFs
//! read their budget at every pass of their loop, so a new policy, or a
//! new sibling on their core, takes effect without restarting them. The turn protocol itself is `sluice_mem::turn`.
//!
//! [`Scheduler::police`] is the watchdog (`watchdog`): a holder that keeps
//! the turn for more than [`HOG_SLICES`] slices while another NF of its
//! core has packets loses it to the next NF with work; one found at fault
//! (a spin loop in `process`, a blocked or stopped process) also leaves
//! the turns.

use sluice_mem::turn::mode;
use sluice_mem::{Arena, CoreTurn};

use crate::wakeup::IdlePoll;

mod class;
mod publish;
mod watchdog;
mod weights;

use class::Classes;
use publish::Budgets;
pub use watchdog::{judge, Revocation, JUDGE_NS};
use watchdog::{Suspect, Watch};
pub use weights::Enforced;
use weights::Weights;

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
    /// `settings.wakeup.busy_poll_us`: how long an NF polling on its own
    /// polls idle before it sleeps (`None`: by how many share its core).
    pub busy_poll_us: Option<u64>,
    /// `settings.scheduler.yield_every`: full batches after which an NF
    /// polling on its own yields (0: never; `None`: after each where NFs
    /// share a core).
    pub yield_every: Option<u32>,
    /// `settings.scheduler.kernel_class`.
    pub kernel_class: sluice_sys::SchedClass,
}

impl SchedPolicy {
    /// The policy of `settings.scheduler` and `settings.wakeup`.
    pub fn from_settings(
        s: &sluice_spec::SchedulerSettings,
        busy_poll_us: Option<u64>,
    ) -> SchedPolicy {
        SchedPolicy {
            busy_poll_us,
            mode: match s.policy {
                sluice_spec::SchedulerPolicy::Hybrid => SchedMode::Hybrid,
                sluice_spec::SchedulerPolicy::Turns => SchedMode::Turns,
                sluice_spec::SchedulerPolicy::Auto => SchedMode::Auto,
            },
            slice_ns: s.slice_us.saturating_mul(1_000),
            yield_every: s.yield_every,
            kernel_class: match s.kernel_class {
                sluice_spec::KernelClass::Normal => sluice_sys::SchedClass::Normal,
                sluice_spec::KernelClass::RoundRobin => sluice_sys::SchedClass::RoundRobin,
            },
        }
    }
}

impl Default for SchedPolicy {
    /// `settings.scheduler`'s defaults: turns from four NFs per core.
    fn default() -> Self {
        SchedPolicy::from_settings(&sluice_spec::SchedulerSettings::default(), None)
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
    /// Its CPU weight (`cpu_weight`), if set.
    pub weight: Option<u32>,
    /// Whether its wake-up policy has it poll idle before it sleeps, or
    /// sleep as soon as its ring is empty.
    pub idle: IdlePoll,
    /// Its trust domain: NFs take turns only with NFs of their own.
    pub domain: u8,
}

/// NFs that take turns together: one core's NFs of one trust domain.
/// Each domain has its own turn word per core (`Arena::domain_turn`), so
/// no NF hands a turn to another domain's, or reads its rings; two
/// domains on one core share it as the kernel schedules them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TurnGroup {
    /// The CPU.
    pub core: u32,
    /// The trust domain.
    pub domain: u8,
}

impl TurnGroup {
    /// The group's turn word.
    pub fn turn(self, arena: &Arena) -> &CoreTurn {
        arena.domain_turn(usize::from(self.domain), self.core)
    }
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
    /// Its trust domain (whose turn word of `core` it takes).
    pub domain: u8,
    /// The next slot in its turn group's run order (itself when alone).
    pub next: u32,
}

impl Assignment {
    /// The NFs it takes turns with.
    pub fn group(&self) -> TurnGroup {
        TurnGroup {
            core: self.core,
            domain: self.domain,
        }
    }
}

/// Computes every NF's assignment: members grouped by CPU and trust
/// domain ([`TurnGroup`]), each group in run order, linked in a circle.
/// Pure, so it is tested without an arena.
pub fn assign(policy: &SchedPolicy, members: &[Member]) -> Vec<Assignment> {
    let mut sorted: Vec<Member> = members.to_vec();
    sorted.sort_by_key(|m| (m.cpu, m.domain, m.order, m.slot));
    let mut out = Vec::with_capacity(sorted.len());
    for group in sorted.chunk_by(|a, b| (a.cpu, a.domain) == (b.cpu, b.domain)) {
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
                domain: m.domain,
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

/// One worker's scheduler.
#[derive(Debug, Default)]
pub struct Scheduler {
    policy: SchedPolicy,
    assigned: Vec<Assignment>,
    /// (group, slot) of every NF taking turns, sorted (the watchdog's
    /// membership test).
    members: Vec<(TurnGroup, u32)>,
    watches: Vec<Watch>,
    /// Holders that lost a turn at the limit, awaiting the watchdog's
    /// verdict.
    suspects: Vec<Suspect>,
    revoked: u64,
    held_off: u64,
    /// The members of the last apply.
    last: Vec<Member>,
    /// Slots that lost a turn to the watchdog: they leave the circle and
    /// schedule themselves (hybrid) from then on, so the turn is never
    /// handed back to an NF that does not take it.
    demoted: Vec<u32>,
    weights: Weights,
    classes: Classes,
    /// The budgets as last written.
    budgets: Budgets,
    /// The process in each slot (by slot; 0: none), as `spawned` and
    /// `exited` tell. Kept here, not in the members, so that what the
    /// worker tells of its members changes only when its plan does.
    pids: Vec<i32>,
}

/// What the scheduler reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStats {
    /// NFs taking turns.
    pub taking_turns: usize,
    /// Turn groups (a core's NFs of one trust domain) whose NFs take
    /// turns.
    pub turn_cores: usize,
    /// Turns the watchdog took from a holder at fault (a hog, a blocked
    /// process).
    pub revoked: u64,
    /// Turns it handed on because the host held their holder off its CPU.
    pub held_off: u64,
    /// NFs taken out of the turns for that, scheduling themselves.
    pub demoted: usize,
    /// How CPU weights are enforced.
    pub weights: Enforced,
    /// NF processes in the kernel's real-time class.
    pub realtime: usize,
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
                    domain: m.domain,
                    next: m.slot,
                }),
        );
        self.last = members.to_vec();
        let pids = &self.pids;
        let pid_of = |slot: u32| pids.get(slot as usize).copied().unwrap_or(0);
        self.weights.apply(members, pid_of);
        self.classes
            .apply(self.policy.kernel_class, members, pid_of);
        let weights = &self.weights;
        self.budgets
            .publish(arena, &self.policy, &assigned, members, |slot| {
                weights.weight(slot)
            });
        let mut groups: Vec<TurnGroup> = assigned
            .iter()
            .filter(|a| a.mode == mode::TURNS)
            .map(Assignment::group)
            .collect();
        groups.sort_unstable();
        groups.dedup();
        for &group in &groups {
            // NFs that waited for a turn under the old order: whoever has
            // packets gets the turn if it is free.
            if let Some(s) = assigned
                .iter()
                .filter(|a| a.group() == group && a.mode == mode::TURNS)
                .find(|a| arena.nf_rx_ring(a.slot).occupancy() > 0)
            {
                if group.turn(arena).claim(s.slot) {
                    arena.nf_control(s.slot).wake.wake();
                }
            }
        }
        self.watches = groups
            .iter()
            .map(|&group| {
                Watch::new(
                    group,
                    group.turn(arena).changes(),
                    sluice_sys::monotonic_ns(),
                )
            })
            .collect();
        self.members = assigned
            .iter()
            .filter(|a| a.mode == mode::TURNS)
            .map(|a| (a.group(), a.slot))
            .collect();
        self.members.sort_unstable();
        // A suspect that left the turns is no longer the watchdog's.
        let members = &self.members;
        self.suspects
            .retain(|x| members.iter().any(|&(_, slot)| slot == x.slot()));
        self.assigned = assigned;
    }

    /// Publishes the budgets of the last members again.
    fn reapply(&mut self, arena: &Arena) {
        let members = std::mem::take(&mut self.last);
        self.apply(arena, &members);
    }

    /// NF `slot` now runs as process `pid` (a start or a restart): it
    /// takes its CPU weight.
    pub fn spawned(&mut self, slot: u32, pid: i32) {
        let i = slot as usize;
        if self.pids.len() <= i {
            self.pids.resize(i + 1, 0);
        }
        self.pids[i] = pid;
        self.weights.spawned(slot, pid);
        self.classes.spawned(slot, pid);
    }

    /// Process `pid` in `slot` is gone (a later one may have started).
    pub fn exited(&mut self, slot: u32, pid: i32) {
        if let Some(p) = self.pids.get_mut(slot as usize).filter(|p| **p == pid) {
            *p = 0;
        }
    }

    /// Changes the policy; the next [`apply`](Self::apply) publishes it.
    pub fn set_policy(&mut self, policy: SchedPolicy) {
        self.policy = policy;
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
            held_off: self.held_off,
            demoted: self.demoted.len(),
            weights: self.weights.enforced(),
            realtime: self.classes.realtime(),
        }
    }
}

#[cfg(test)]
mod tests;
