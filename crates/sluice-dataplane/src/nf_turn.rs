//! An NF process's side of turns (`sluice_mem::turn`, `crate::sched`):
//! waiting for the core's turn, keeping it while there is work and the
//! slice lasts, and handing it to the next NF of the run order that has
//! packets.
//!
//! Everything read here from other slots (their run-order links, their ring
//! occupancy) is only a hint: links are checked to name a slot of the NF's
//! own trust domain (the only ones its process maps) and a walk stops
//! after [`MAX_WALK`] steps, so a corrupt budget costs order, never safety.

use std::sync::atomic::Ordering;

use sluice_mem::turn::{mode, under_pressure};
use sluice_mem::{Arena, CoreTurn, NfControl, NfStats};

/// Most slots a search for the next NF with work visits.
const MAX_WALK: u32 = 4096;

/// How long an NF that emitted packets during its turn keeps the turn
/// until the worker has relayed them to the next NF of the run order, so
/// the turn follows the packets and a batch crosses a chain in one round.
/// The worker relays within one pass of its loop (microseconds, more with
/// hundreds of NFs); this bounds the wait when the packets went elsewhere
/// (dropped, another chain, a port).
const FOLLOW_NS: u64 = 50_000;

/// Output ring occupancy (in quarters) at which the holder passes the turn
/// on even with input left, so the hops downstream drain first (UNiS: the
/// output ring passing 75 %).
const OUTPUT_FULL_QUARTERS: u32 = 3;

/// One NF's turn-taking state.
pub(crate) struct Turns<'a> {
    arena: &'a Arena,
    slot: u32,
    control: &'a NfControl,
    /// When the NF got the turn it holds (0: it does not hold one).
    since_ns: u64,
    /// It processed packets during this turn.
    worked: bool,
}

impl<'a> Turns<'a> {
    pub(crate) fn new(arena: &'a Arena, slot: u32) -> Self {
        Turns {
            arena,
            slot,
            control: arena.nf_control(slot),
            since_ns: 0,
            worked: false,
        }
    }

    /// The core's turn word if the scheduler has this NF take turns.
    pub(crate) fn turn(&self) -> Option<&'a CoreTurn> {
        let b = &self.control.budget;
        if b.mode.load(Ordering::Acquire) != mode::TURNS {
            return None;
        }
        let core = b.core.load(Ordering::Relaxed);
        // Its domain's turn word: the NF's process maps no other.
        ((core as usize) < sluice_mem::arena::MAX_CORES)
            .then(|| self.arena.slot_turn(self.slot, core))
    }

    /// Whether this NF holds the turn; counts a newly taken one.
    pub(crate) fn holds(&mut self, turn: &CoreTurn, now: u64) -> bool {
        if !turn.holds(self.slot) {
            self.since_ns = 0;
            return false;
        }
        if self.since_ns == 0 {
            self.since_ns = now.max(1);
            let stats = &self.control.stats;
            NfStats::add(&stats.turns, 1);
            NfStats::add(&stats.turn_wait_ns, now.saturating_sub(turn.since_ns()));
        }
        true
    }

    /// Whether this NF's receive ring is under pressure, so it runs a batch
    /// without the turn (`sluice_mem::turn`, "Pressure").
    pub(crate) fn pressed(&self) -> bool {
        let rx = self.arena.nf_rx_ring(self.slot);
        under_pressure(rx.occupancy(), rx.capacity())
    }

    /// Sleeps until this NF is given the turn, its ring comes under
    /// pressure, it is asked to stop, or `until` (its next timer) passes;
    /// at most `nap_max`.
    pub(crate) fn wait(&self, turn: &CoreTurn, until: u64, nap_max: std::time::Duration) {
        let ctl = self.control;
        ctl.wake.prepare_sleep();
        if turn.holds(self.slot)
            || self.pressed()
            || ctl.stop.load(Ordering::Acquire) != 0
            || self.control.budget.mode.load(Ordering::Acquire) != mode::TURNS
        {
            ctl.wake.cancel_sleep();
            return;
        }
        NfStats::add(&ctl.stats.sleeps, 1);
        let left = until.saturating_sub(sluice_sys::monotonic_ns()).max(1);
        ctl.wake
            .sleep(Some(nap_max.min(std::time::Duration::from_nanos(left))));
    }

    /// Whether the holder should hand the turn on after a batch: its slice
    /// is spent or its output ring is nearly full.
    pub(crate) fn should_pass(&self, now: u64) -> bool {
        let slice = self.control.budget.slice_ns.load(Ordering::Relaxed);
        if slice > 0 && now.saturating_sub(self.since_ns) >= slice {
            return true;
        }
        let tx = self.arena.nf_tx_ring(self.slot);
        tx.occupancy() * 4 >= tx.capacity() * OUTPUT_FULL_QUARTERS
    }

    /// The NF processed a batch during its turn.
    pub(crate) fn worked(&mut self) {
        self.worked = true;
    }

    /// After a turn with work: the next NF of the run order once the
    /// worker has relayed packets to it (waiting at most [`FOLLOW_NS`]).
    fn follow(&self) -> Option<u32> {
        if !self.worked {
            return None;
        }
        let next = self.control.budget.next.load(Ordering::Relaxed);
        // `has_slot`: a link out of this NF's domain is garbage (its
        // process does not map the other domains' slots).
        if next == self.slot || !self.arena.has_slot(next) {
            return None;
        }
        let rx = self.arena.nf_rx_ring(next);
        let until = sluice_sys::monotonic_ns() + FOLLOW_NS;
        loop {
            if rx.occupancy() > 0 {
                return Some(next);
            }
            if sluice_sys::monotonic_ns() >= until {
                return None;
            }
            std::hint::spin_loop();
        }
    }

    /// Ends this NF's turn: passes it to the next NF of the run order with
    /// packets, keeps it if only this NF has any, or releases it (and
    /// claims it back for any NF that got packets meanwhile). Returns
    /// whether this NF still holds the turn.
    pub(crate) fn end(&mut self, turn: &CoreTurn, now: u64) -> bool {
        let next = self.follow().or_else(|| self.next_with_work());
        self.worked = false;
        match next {
            Some(s) if s == self.slot => {
                // Alone with work: a fresh slice.
                self.since_ns = now.max(1);
                return true;
            }
            Some(s) => {
                if turn.pass(self.slot, s) {
                    self.arena.nf_control(s).wake.wake();
                }
            }
            None => {
                if turn.release(self.slot) {
                    if let Some(s) = self.next_with_work() {
                        if turn.claim(s) {
                            if s == self.slot {
                                self.since_ns = now.max(1);
                                return true;
                            }
                            self.arena.nf_control(s).wake.wake();
                        }
                    }
                }
            }
        }
        self.since_ns = 0;
        false
    }

    /// The first slot after this one in the run order (this one last) whose
    /// receive ring holds anything.
    fn next_with_work(&self) -> Option<u32> {
        let mut s = self.slot;
        for _ in 0..MAX_WALK {
            s = self.arena.nf_control(s).budget.next.load(Ordering::Relaxed);
            if !self.arena.has_slot(s) {
                break;
            }
            if self.arena.nf_rx_ring(s).occupancy() > 0 {
                return Some(s);
            }
            if s == self.slot {
                return None;
            }
        }
        // A broken circle: at least look at our own ring.
        (self.arena.nf_rx_ring(self.slot).occupancy() > 0).then_some(self.slot)
    }
}
