//! Per-NF control blocks in the arena: lifecycle, wake word and statistics.
//!
//! The NF process writes its state and statistics here; the platform reads
//! them for reporting only and never lets a value from here steer memory
//! accesses (principle 5: the platform never trusts an NF).

use crate::sync::{AtomicU32, AtomicU64, CachePadded, Ordering};
use crate::turn::Budget;
use crate::wake::WakeWord;

/// Number of NF-specific counters an NF may publish.
pub const NF_COUNTERS: usize = 16;

/// Number of extended counters (indexed by the NF, e.g. one per rule).
pub const EXT_COUNTERS: usize = 1024;

/// Lifecycle states an NF reports in [`NfControl::state`].
pub mod state {
    /// Slot unused.
    pub const EMPTY: u32 = 0;
    /// Process created, NF being constructed.
    pub const STARTING: u32 = 1;
    /// Processing packets.
    pub const RUNNING: u32 = 2;
    /// Left its loop after a stop request.
    pub const STOPPED: u32 = 3;
    /// Construction failed (bad config at runtime).
    pub const FAILED: u32 = 4;
}

/// Statistics an NF instance publishes. Written by one writer (the NF's
/// thread or process) with relaxed stores; read by the platform.
#[derive(Debug, Default)]
#[repr(C)]
pub struct NfStats {
    /// Packets the NF processed.
    pub packets: AtomicU64,
    /// Batches the NF processed.
    pub batches: AtomicU64,
    /// Nanoseconds spent inside the NF's batch handler (CPU charged to it).
    pub busy_ns: AtomicU64,
    /// Times the NF went to sleep for lack of work.
    pub sleeps: AtomicU64,
    /// Times the NF yielded the CPU: after a full batch, or waiting for
    /// room in its output ring.
    pub yields: AtomicU64,
    /// Flow-end/reset events delivered.
    pub events: AtomicU64,
    /// Times the NF's loop was off the CPU for more than a stall threshold
    /// between two polls without having gone to sleep: the kernel, the
    /// hypervisor, another task or an NF sharing its core held the core.
    pub stalls: AtomicU64,
    /// Nanoseconds of those stalls.
    pub stalled_ns: AtomicU64,
    /// Turns of its core the NF has taken (`crate::turn`).
    pub turns: AtomicU64,
    /// Batches it processed without its core's turn because its receive
    /// ring was under pressure (`crate::turn::under_pressure`).
    pub out_of_turn: AtomicU64,
    /// Time from its core's turn being handed to it until it ran with it,
    /// summed over its turns (`CoreTurn::since_ns`).
    pub turn_wait_ns: AtomicU64,
    /// Not a counter: 1 while the NF's own code runs (`process`, `tick`,
    /// `flow_end`), 0 while its loop is in the platform's code. Lets the
    /// scheduler's watchdog blame an NF only for what its code does. A
    /// hint: an NF can write anything here.
    pub inside: AtomicU64,
}

impl NfStats {
    /// Adds to a counter (single writer, so load+store, no locked RMW).
    #[inline]
    pub fn add(counter: &AtomicU64, v: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(v),
            Ordering::Relaxed,
        );
    }
}

/// Control block of one NF slot.
#[derive(Debug, Default)]
#[repr(C)]
pub struct NfControl {
    /// The NF sleeps on this word when its receive ring is empty.
    pub wake: CachePadded<WakeWord>,
    /// Lifecycle state (see [`state`]).
    pub state: AtomicU32,
    /// Set to 1 by the platform to ask the NF to drain and exit.
    pub stop: AtomicU32,
    /// OS process id of a process NF.
    pub pid: AtomicU32,
    /// Incremented by the platform at every (re)start.
    pub generation: AtomicU32,
    /// When the NF reported RUNNING (CLOCK_MONOTONIC ns, the same clock in
    /// every process), so start-up time is measured, not rounded to the
    /// platform's polling.
    pub running_since_ns: AtomicU64,
    /// Statistics.
    pub stats: CachePadded<NfStats>,
    /// NF-specific counters (names declared by the NF type).
    pub counters: [AtomicU64; NF_COUNTERS],
    /// Spare buffers the NF wants in its allocation stash (written by the
    /// NF at start; the platform tops the stash up to this).
    pub spare_target: AtomicU32,
    /// Spares the NF has taken out of its stash (minus those it put back);
    /// with the platform's own count of spares sent this gives the stash
    /// size. Untrusted: a lie only makes the platform send more spares,
    /// which the NF's buffer quota bounds.
    pub spares_consumed: AtomicU64,
    /// Extended counters in use: one past the highest index the NF has
    /// written (`Context::count_ext`, and an element graph's counters),
    /// so a report reads that many, not all [`EXT_COUNTERS`] (8 KiB per NF,
    /// which at 1,000 NFs was most of what a report cost its worker).
    /// Untrusted: readers clamp it, and a lie only hides or pads the NF's
    /// own extended counters in its own report.
    pub ext_used: AtomicU32,
    /// How the NF is scheduled (written by the platform's scheduler).
    pub budget: CachePadded<Budget>,
    /// Extended counters, indexed by the NF (e.g. hits per rule).
    pub ext: ExtCounters,
}

/// [`EXT_COUNTERS`] counters (a newtype because arrays this long have no
/// `Default`).
#[derive(Debug)]
#[repr(C)]
pub struct ExtCounters(pub [AtomicU64; EXT_COUNTERS]);

impl Default for ExtCounters {
    fn default() -> Self {
        ExtCounters(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl NfControl {
    /// Records that extended counter `index` is in use (see `ext_used`):
    /// a load on the counting path, a write only when the mark moves.
    #[inline]
    pub fn mark_ext_used(&self, index: usize) {
        let used = index.saturating_add(1).min(EXT_COUNTERS) as u32;
        if self.ext_used.load(Ordering::Relaxed) < used {
            self.ext_used.fetch_max(used, Ordering::Relaxed);
        }
    }

    /// The extended counters in use, as far as `ext_used` says (clamped to
    /// the array: the NF may have written anything there).
    pub fn ext_in_use(&self) -> &[AtomicU64] {
        let used = (self.ext_used.load(Ordering::Relaxed) as usize).min(EXT_COUNTERS);
        &self.ext.0[..used]
    }

    /// Clears state and statistics for a fresh instance.
    pub fn reset(&self) {
        self.wake.cancel_sleep();
        self.state.store(state::EMPTY, Ordering::Relaxed);
        self.stop.store(0, Ordering::Relaxed);
        self.pid.store(0, Ordering::Relaxed);
        self.running_since_ns.store(0, Ordering::Relaxed);
        for c in [
            &self.stats.packets,
            &self.stats.batches,
            &self.stats.busy_ns,
            &self.stats.sleeps,
            &self.stats.yields,
            &self.stats.events,
            &self.stats.stalls,
            &self.stats.stalled_ns,
            &self.stats.turns,
            &self.stats.out_of_turn,
            &self.stats.turn_wait_ns,
            &self.stats.inside,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for c in self.counters.iter().chain(self.ext.0.iter()) {
            c.store(0, Ordering::Relaxed);
        }
        self.spare_target.store(0, Ordering::Relaxed);
        self.spares_consumed.store(0, Ordering::Relaxed);
        self.ext_used.store(0, Ordering::Relaxed);
        // The budget belongs to the scheduler, which keeps it across
        // restarts (a restarted NF takes turns at once).
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extended_counters_in_use_end_past_the_highest_one_marked() {
        let c = Box::<NfControl>::default();
        assert!(c.ext_in_use().is_empty());
        c.mark_ext_used(4);
        c.mark_ext_used(1);
        assert_eq!(c.ext_in_use().len(), 5, "the mark only moves up");
        c.mark_ext_used(EXT_COUNTERS - 1);
        assert_eq!(c.ext_in_use().len(), EXT_COUNTERS);
        c.reset();
        assert!(c.ext_in_use().is_empty(), "a fresh instance uses none");
    }

    #[test]
    fn a_mark_beyond_the_array_is_clamped() {
        let c = Box::<NfControl>::default();
        // What a hostile NF may write into its control block.
        c.ext_used.store(u32::MAX, Ordering::Relaxed);
        assert_eq!(c.ext_in_use().len(), EXT_COUNTERS);
        c.ext_used.store(0, Ordering::Relaxed);
        c.mark_ext_used(usize::MAX);
        assert_eq!(c.ext_in_use().len(), EXT_COUNTERS);
    }
}
