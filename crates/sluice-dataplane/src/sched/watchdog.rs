//! The scheduler's watchdog: what happens to an NF that keeps its core's
//! turn too long while another NF of the core has packets.
//!
//! First, always, the turn goes to the next NF with packets, so the core's
//! chain moves on. Then the holder is judged, because keeping the turn has
//! three causes and only two are the NF's fault. A suspect that shows a
//! sign of life within [`JUDGE_NS`] (its loop finished a batch, slept or
//! took a turn) was only held off its CPU by the host (an overcommitted
//! machine, a noisy neighbour): [`Revocation::HeldOff`], and it stays in
//! the turns, since punishing it would starve an innocent NF on a busy
//! host. One that shows none is blamed only if it is inside its own code
//! (`process`, `tick`, `flow_end`: `NfStats::inside`), and then judged by
//! the kernel's view of its process over that time
//! (`sluice_sys::sched_times`):
//!
//! * it ran for a quarter of it or more: a spin loop ([`Revocation::Hog`]);
//! * it is asleep or stopped: it blocked while holding the turn
//!   ([`Revocation::Blocked`]);
//! * it is runnable but hardly ran: still held off; it is watched again.
//!
//! One in the platform's loop is watched again too: asleep there, it waits
//! for a wake-up another NF has begun and not finished, because the host
//! took that NF's CPU between the two (found by
//! `a_busy_host_neither_blames_nor_starves_nfs_taking_turns`).
//!
//! A hog or a blocked NF leaves the circle and schedules itself from then
//! on, so the turn is not handed back to an NF that will not take it; the
//! worker lowers a hog's priority too, so it cannot keep half the core.
//! `/proc` is read only for suspects.

use std::sync::atomic::Ordering;

use sluice_mem::turn::mode;
use sluice_mem::Arena;
use sluice_sys::SchedTimes;

use super::{Scheduler, TurnGroup, HOG_MIN_NS, HOG_SLICES};

/// How long a suspect is watched before it is judged: several scheduler
/// ticks, because the kernel updates the run time of a process running on
/// another CPU only at its ticks (4 ms at 250 Hz).
pub const JUDGE_NS: u64 = 20_000_000;

/// Why the watchdog took a turn back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The holder ran for a quarter of the time it was judged or more,
    /// without a sign of life.
    Hog,
    /// The holder neither ran nor waited for a CPU.
    Blocked,
    /// The holder lived on: the host had kept it off its CPU.
    HeldOff,
    /// A slot that does not take turns held it (it left the circle, or an
    /// NF wrote the turn word).
    Stranger,
}

impl Revocation {
    /// Whether the holder is at fault and leaves the turns.
    pub fn demotes(self) -> bool {
        matches!(self, Revocation::Hog | Revocation::Blocked)
    }
}

/// Watchdog state of one turn group (a core's NFs of one trust domain).
#[derive(Debug, Clone, Copy)]
pub(super) struct Watch {
    pub(super) group: TurnGroup,
    /// The turn word's change count when the watchdog last saw it move.
    pub(super) changes: u64,
    /// Since when the holder has kept the turn (while others waited).
    pub(super) since_ns: u64,
}

impl Watch {
    pub(super) fn new(group: TurnGroup, changes: u64, now: u64) -> Watch {
        Watch {
            group,
            changes,
            since_ns: now,
        }
    }
}

/// A holder that lost its turn at the limit, waiting for its verdict.
#[derive(Debug, Clone, Copy)]
pub(super) struct Suspect {
    slot: u32,
    at_ns: u64,
    times: Option<SchedTimes>,
    life: u64,
}

impl Suspect {
    pub(super) fn slot(&self) -> u32 {
        self.slot
    }
}

/// The verdict on a suspect that showed no sign of life, from two looks
/// `window_ns` apart and whether it is `inside` its own code; `None` while
/// it is not to blame yet.
pub fn judge(
    first: SchedTimes,
    last: SchedTimes,
    window_ns: u64,
    inside: bool,
) -> Option<Revocation> {
    let ran = last.on_cpu_ns.saturating_sub(first.on_cpu_ns);
    if !inside {
        None
    } else if ran.saturating_mul(4) >= window_ns {
        Some(Revocation::Hog)
    } else if last.runnable {
        None
    } else {
        Some(Revocation::Blocked)
    }
}

/// Signs of life of an NF's loop: counters it moves at every batch, sleep,
/// yield and turn (an NF waiting for room in its output ring yields). An
/// NF stuck inside its handler moves none.
fn life(arena: &Arena, slot: u32) -> u64 {
    let s = &arena.nf_control(slot).stats;
    [&s.batches, &s.sleeps, &s.yields, &s.turns, &s.out_of_turn]
        .iter()
        .fold(0u64, |a, c| a.wrapping_add(c.load(Ordering::Relaxed)))
}

impl Scheduler {
    /// The watchdog (called about every millisecond): takes back turns
    /// held too long while other NFs of the core wait, and turns held by a
    /// slot that takes none, then judges the holders. `times` looks at a
    /// slot's process (the worker knows its processes). Pushes each
    /// verdict onto `revoked`.
    pub fn police(
        &mut self,
        arena: &Arena,
        now: u64,
        times: &mut dyn FnMut(u32) -> Option<SchedTimes>,
        revoked: &mut Vec<(u32, Revocation)>,
    ) {
        let limit = (self.policy.slice_ns.saturating_mul(HOG_SLICES)).max(HOG_MIN_NS);
        for k in 0..self.watches.len() {
            let w = self.watches[k];
            let turn = w.group.turn(arena);
            let changes = turn.changes();
            let Some(holder) = turn.holder() else {
                self.watches[k] = Watch::new(w.group, changes, now);
                continue;
            };
            let member = self.members.binary_search(&(w.group, holder)).is_ok();
            if member && changes != w.changes {
                self.watches[k] = Watch::new(w.group, changes, now);
                continue;
            }
            if member && now.saturating_sub(w.since_ns) <= limit {
                continue;
            }
            let to = self.waiting(arena, w.group, holder);
            if member && to.is_none() {
                // Nobody waits: the clock runs only while someone does.
                self.watches[k] = Watch::new(w.group, changes, now);
                continue;
            }
            if turn.revoke(holder, to) {
                if let Some(to) = to {
                    arena.nf_control(to).wake.wake();
                }
                if !member {
                    revoked.push((holder, Revocation::Stranger));
                } else if !self.suspects.iter().any(|s| s.slot == holder) {
                    self.suspects.push(Suspect {
                        slot: holder,
                        at_ns: now,
                        times: times(holder),
                        life: life(arena, holder),
                    });
                }
            }
            self.watches[k] = Watch::new(w.group, turn.changes(), now);
        }
        self.judge_suspects(arena, now, times, revoked);
    }

    /// Gives the verdict on suspects watched for [`JUDGE_NS`].
    fn judge_suspects(
        &mut self,
        arena: &Arena,
        now: u64,
        times: &mut dyn FnMut(u32) -> Option<SchedTimes>,
        revoked: &mut Vec<(u32, Revocation)>,
    ) {
        let mut demote = Vec::new();
        let mut k = 0;
        while k < self.suspects.len() {
            let s = self.suspects[k];
            let window = now.saturating_sub(s.at_ns);
            if window < JUDGE_NS {
                k += 1;
                continue;
            }
            let last = times(s.slot);
            let verdict = if life(arena, s.slot) != s.life {
                Some(Revocation::HeldOff)
            } else {
                match (s.times, last) {
                    (Some(first), Some(last)) => {
                        let inside = arena
                            .nf_control(s.slot)
                            .stats
                            .inside
                            .load(Ordering::Relaxed);
                        judge(first, last, window, inside != 0)
                    }
                    // Gone, or the kernel does not say: nothing to judge.
                    _ => {
                        self.suspects.swap_remove(k);
                        continue;
                    }
                }
            };
            let Some(verdict) = verdict else {
                // Not to blame yet: watch it again.
                self.suspects[k].at_ns = now;
                self.suspects[k].times = last;
                k += 1;
                continue;
            };
            self.suspects.swap_remove(k);
            match verdict {
                Revocation::HeldOff => self.held_off += 1,
                _ => {
                    self.revoked += 1;
                    demote.push(s.slot);
                }
            }
            revoked.push((s.slot, verdict));
        }
        demote.retain(|s| self.last.iter().any(|m| m.slot == *s));
        if !demote.is_empty() {
            self.demoted.extend(demote);
            self.reapply(arena);
        }
    }

    /// The first NF of `group` taking turns, other than `holder`, that
    /// has packets.
    fn waiting(&self, arena: &Arena, group: TurnGroup, holder: u32) -> Option<u32> {
        self.assigned
            .iter()
            .filter(|a| a.group() == group && a.mode == mode::TURNS && a.slot != holder)
            .find(|a| arena.nf_rx_ring(a.slot).occupancy() > 0)
            .map(|a| a.slot)
    }
}
