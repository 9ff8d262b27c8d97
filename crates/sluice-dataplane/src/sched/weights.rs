//! CPU weights (`nfs[].cpu_weight`): how a worker's scheduler makes NF
//! processes that share a core share it in proportion to their weights.
//!
//! Two means, because neither is enough alone:
//!
//! * **the kernel's cpu controller** (`sluice_sys::CpuGroups`): every
//!   process NF in a group of its own with its weight. This holds whenever
//!   NFs run at once: hybrid polling, and NFs under pressure running out
//!   of turn. A yield inside a group does not give the group's time away,
//!   so a cheap NF that yields after every batch still gets its share
//!   (seed 000 §4: without, the expensive NF took ~80 %). But the kernel
//!   divides time in slices of milliseconds (UNiS, seed 001: CFS cannot
//!   go below 100 µs);
//! * **the length of turns**: under turns an NF's slice is the policy's
//!   slice × weight / 100, so at the platform's own microsecond scale a
//!   heavier NF keeps the turn longer while others wait.
//!
//! Weights are off until some NF has one: groups change how the kernel
//! picks among NFs that yield (a chain under hybrid polling relies on a
//! yield handing the core to the next hop), so a spec without weights
//! runs as before. Where the platform may not create groups (not root, a
//! container without a delegated cpu controller), weights fall back to
//! turns alone, and the report says so (`scheduler.weights`).

use std::collections::HashMap;

use sluice_sys::{CpuGroups, Pid, DEFAULT_WEIGHT};

use super::Member;

/// How weights are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforced {
    /// No NF has a weight.
    #[default]
    Off,
    /// By the length of turns only (no cpu controller available).
    Slices,
    /// By the kernel's cpu controller and the length of turns.
    Cgroup(sluice_sys::CgroupFlavor),
}

impl Enforced {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Enforced::Off => "off",
            Enforced::Slices => "slices",
            Enforced::Cgroup(f) => f.name(),
        }
    }
}

/// One worker's weights.
#[derive(Debug, Default)]
pub struct Weights {
    /// The groups, once weights are in use and the kernel lets us.
    groups: Option<CpuGroups>,
    /// Opening the groups failed (not retried: the host will not change).
    unavailable: bool,
    /// Weight by slot of every process NF while weights are in use.
    /// Maps, not lists: every change looks up each NF here, and lists
    /// made that quadratic in the NFs (a millisecond per change at
    /// 1,000).
    wanted: HashMap<u32, u32>,
    /// (pid, weight) by slot, as placed in the groups.
    placed: HashMap<u32, (i32, u32)>,
    /// Groups of NFs that left, to remove once their process is gone.
    leaving: Vec<u32>,
}

/// An NF's weight, on `cpu.weight`'s scale (100 when unset).
pub fn weight_of(m: &Member) -> u32 {
    m.weight.unwrap_or(DEFAULT_WEIGHT)
}

impl Weights {
    /// Follows the members of the last apply: opens the groups when the
    /// first weight appears, places and reweighs NFs, and frees the groups
    /// of NFs that left (all of them once no NF has a weight).
    pub fn apply(&mut self, members: &[Member], pid_of: impl Fn(u32) -> i32) {
        let in_use = members.iter().any(|m| m.weight.is_some());
        self.wanted = if in_use {
            members.iter().map(|m| (m.slot, weight_of(m))).collect()
        } else {
            HashMap::new()
        };
        if in_use && self.groups.is_none() && !self.unavailable {
            match CpuGroups::open() {
                Ok(g) => self.groups = Some(g),
                Err(e) => {
                    self.unavailable = true;
                    tracing::warn!(
                        "CPU weights are enforced by the length of turns only: the kernel's cpu \
                         controller is not available to this process ({e})"
                    );
                }
            }
        }
        let wanted = &self.wanted;
        let mut left = Vec::new();
        self.placed.retain(|&slot, &mut (pid, _)| {
            let stays = wanted.contains_key(&slot);
            if !stays {
                left.push((slot, pid));
            }
            stays
        });
        if let Some(g) = &mut self.groups {
            for (slot, pid) in left {
                // An NF that stays alive (weights turned off) goes back to
                // the platform's own group first.
                if let Some(pid) = Pid::from_raw(pid) {
                    let _ = g.release(pid);
                }
                self.leaving.push(slot);
            }
            self.leaving.retain(|&slot| !g.remove(slot));
        }
        for m in members {
            self.spawned(m.slot, pid_of(m.slot));
        }
    }

    /// NF `slot` runs as process `pid` (a start or a restart): it joins its
    /// group if weights are in use.
    pub fn spawned(&mut self, slot: u32, pid: i32) {
        let Some(&weight) = self.wanted.get(&slot) else {
            return;
        };
        let (Some(g), Some(p)) = (&mut self.groups, Pid::from_raw(pid)) else {
            return;
        };
        let result = match self.placed.get(&slot) {
            Some(&(was, w)) if was == pid && w == weight => return,
            Some(&(was, _)) if was == pid => g.set_weight(slot, weight),
            _ => g.place(slot, p, weight),
        };
        match result {
            Ok(()) => {
                self.placed.insert(slot, (pid, weight));
            }
            // The process may already be gone (it is then restarted and
            // placed again); anything else is the host refusing.
            Err(e) => tracing::debug!("cannot weigh NF slot {slot} (pid {pid}): {e}"),
        }
    }

    /// How weights are enforced now.
    pub fn enforced(&self) -> Enforced {
        match (&self.groups, self.wanted.is_empty()) {
            (_, true) => Enforced::Off,
            (Some(g), false) => Enforced::Cgroup(g.flavor()),
            (None, false) => Enforced::Slices,
        }
    }

    /// The weight published for `slot` (100 while weights are off).
    pub fn weight(&self, slot: u32) -> u32 {
        self.wanted.get(&slot).copied().unwrap_or(DEFAULT_WEIGHT)
    }
}
