//! Writing the scheduler's decisions into the NFs' budgets (their
//! control blocks, `sluice_mem::Budget`), and only what changed.
//!
//! The budgets of a thousand NFs are a thousand cache lines of shared
//! memory, and one more NF changes few of them: writing them all was most
//! of a commit's scheduling at 1,000 NFs (`sluice bench instantiate`).
//! [`Budgets`] remembers what it wrote per slot and writes what differs.
//! Only the scheduler writes a budget (a restart keeps it,
//! `NfControl::reset`); a slot that leaves the members is forgotten, so
//! the next NF in it is written whole.

use std::sync::atomic::Ordering;

use sluice_mem::turn::mode;
use sluice_mem::{Arena, Budget};

use super::{Assignment, Member, SchedPolicy};
use crate::polling::LoopConfig;

/// How an NF polls on its own (hybrid, or a demoted NF) when
/// `sharing` process NFs share its core: the same rule the NF was started
/// with (`LoopConfig`), kept true as NFs come and go on its core. Without
/// it an NF started alone keeps spinning without yielding when siblings
/// join it.
///
/// NFs in weighted groups keep yielding after each batch: the kernel then
/// shares time between the groups by weight, and a yield still lets an NF
/// that has no packets give its group's time to the others (tried without:
/// 2.8 Mpps against 6.1 for two NFs of 0 and 1,000 cycles).
fn polling(policy: &SchedPolicy, sharing: usize, m: &Member) -> (u64, u32) {
    let mut cfg = if m.beside_worker {
        LoopConfig::beside_worker(0, policy.busy_poll_us)
    } else {
        LoopConfig::for_sharing(0, sharing, policy.busy_poll_us).yielding_every(policy.yield_every)
    };
    if !m.idle.polls(sharing) {
        cfg.busy_poll_ns = 0;
    }
    (cfg.busy_poll_ns, cfg.flags())
}

/// What the scheduler last wrote in one NF's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Published {
    core: u32,
    next: u32,
    slice_ns: u64,
    poll: (u64, u32),
    mode: u32,
}

impl Published {
    /// Writes it in `b`; the mode it replaced.
    fn write(&self, b: &Budget) -> u32 {
        b.core.store(self.core, Ordering::Relaxed);
        b.next.store(self.next, Ordering::Relaxed);
        b.slice_ns.store(self.slice_ns, Ordering::Relaxed);
        b.poll_ns.store(self.poll.0, Ordering::Relaxed);
        b.poll_flags.store(self.poll.1, Ordering::Release);
        // Mode last: an NF that sees TURNS sees its core and links.
        b.mode.swap(self.mode, Ordering::AcqRel)
    }
}

/// What the scheduler last wrote in each slot's budget (by slot).
#[derive(Debug, Default)]
pub(super) struct Budgets {
    published: Vec<Option<Published>>,
}

impl Budgets {
    /// Writes the budgets of `assigned` (assignments of `members`) that
    /// differ from what they hold; `weight_of` gives a slot's CPU weight
    /// (its turn's length).
    pub(super) fn publish(
        &mut self,
        arena: &Arena,
        policy: &SchedPolicy,
        assigned: &[Assignment],
        members: &[Member],
        weight_of: impl Fn(u32) -> u32,
    ) {
        // Process NFs per core, and each slot's member: by slot number in
        // a table (slots are the arena's, a few thousand at most), since a
        // map of a thousand members was most of this function's time at
        // each change (`sluice bench instantiate`).
        let mut sharing: std::collections::BTreeMap<u32, usize> = Default::default();
        let top = members
            .iter()
            .map(|m| m.slot as usize + 1)
            .max()
            .unwrap_or(0);
        let mut by_slot: Vec<Option<&Member>> = vec![None; top];
        for m in members {
            *sharing.entry(m.cpu).or_default() += 1;
            by_slot[m.slot as usize] = Some(m);
        }
        for a in assigned {
            if !arena.has_slot(a.slot) || a.core as usize >= sluice_mem::arena::MAX_CORES {
                continue;
            }
            // Every assignment is of a member.
            let Some(m) = by_slot.get(a.slot as usize).copied().flatten() else {
                continue;
            };
            // A heavier NF keeps the turn longer while others wait.
            let weight = u64::from(weight_of(a.slot));
            let slice_ns = match policy.slice_ns {
                0 => 0,
                s => (s.saturating_mul(weight) / 100).max(1_000),
            };
            let n = sharing.get(&a.core).copied().unwrap_or(1);
            let p = Published {
                core: a.core,
                next: a.next,
                slice_ns,
                poll: polling(policy, n, m),
                mode: a.mode,
            };
            let i = a.slot as usize;
            if self.published.len() <= i {
                self.published.resize(i + 1, None);
            }
            if self.published[i] == Some(p) {
                continue;
            }
            self.published[i] = Some(p);
            let was = p.write(&arena.nf_control(a.slot).budget);
            if was == mode::TURNS && a.mode == mode::HYBRID {
                // It may sleep waiting for a turn it will no longer get.
                arena.nf_control(a.slot).wake.wake();
            }
        }
        for (slot, p) in self.published.iter_mut().enumerate() {
            if by_slot.get(slot).is_none_or(Option::is_none) {
                *p = None;
            }
        }
    }
}
