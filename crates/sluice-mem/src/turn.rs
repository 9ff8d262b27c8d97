//! Turns: how NF processes that share a core take it one after another, in
//! the order of their chain, instead of each deciding alone when to run.
//!
//! Many process NFs on one core, each polling and yielding on its own, run
//! in whatever order the kernel picks; a packet then advances about one hop
//! per round of the whole core, and a 60-NF chain takes milliseconds
//! (UNiS, seed 001: a workflow-aware order for poll-mode NFs sharing a
//! core). With turns, exactly one NF of a core holds the turn and runs; the
//! others sleep on their wake words. The holder works until its input is
//! empty or its slice is spent, then *passes* the turn to the next NF of the
//! run order that has packets (the next hop downstream, so one round moves
//! a batch through the whole chain), or *releases* it when no NF of the
//! core has work. The platform, after putting packets in an NF's ring,
//! *claims* the turn for that NF if nobody holds it.
//!
//! The protocol, stated once:
//!
//! * **claim** (a producer, after publishing packets for `slot`): full
//!   fence, then if nobody holds the turn, compare-and-swap it from nobody to
//!   `slot` and wake `slot`.
//! * **release** (the holder, finding no work): compare-and-swap itself to
//!   nobody, full fence, then look at the core's rings again and claim for
//!   any NF that has packets.
//!
//! This is a Dekker pair on (ring, holder): either the producer's load sees
//! nobody holding, or the releaser's second look sees the packets, so
//! packets never wait in a ring of a core where nobody holds the turn (the
//! compare-and-swap picks one winner when both act). **pass** (the holder
//! hands the turn to `to`) is a compare-and-swap from itself to `to`, then a
//! wake of `to`; the sleeper checks the holder after `prepare_sleep`, so the
//! wake word's own Dekker pair makes that wake-up impossible to lose.
//!
//! **Pressure.** Turns serialise a core's NFs, so each hand-over costs one
//! wake-up; on a core the NFs own that is microseconds, but on a host that
//! overcommits the core (other tasks, other runs) a woken NF can wait
//! milliseconds for the CPU, and a chain that passes the turn after every
//! batch then moves a batch per wake-up latency and overflows its rings.
//! So an NF whose receive ring is [`under_pressure`] does not wait for the
//! turn: it runs a batch *out of turn* and yields, as under hybrid polling,
//! and a producer that finds the turn held wakes it anyway (the wake word's
//! Dekker pair again, with the ring's producer index: loom's
//! `a_ring_under_pressure_always_wakes_its_nf`). Turns order the
//! work while the core keeps up; they never make an NF drop what hybrid
//! polling would have carried.
//!
//! Each trust domain has its own turn word per core
//! (`Arena::domain_turn`): NFs take turns only with NFs of their domain,
//! whose control blocks and rings are the only ones their process maps.
//!
//! The holder word is only a hint the platform must not trust for memory
//! safety (an NF can write anything into it); the worst a liar can do is
//! take turns out of order, which the platform's watchdog revokes.

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// The turn word of one core. Zeroed memory means nobody holds the turn.
#[derive(Debug, Default)]
#[repr(C)]
pub struct CoreTurn {
    /// 0: nobody; otherwise the holder's slot + 1.
    holder: AtomicU32,
    /// Incremented at every pass, release and claim, so the platform can
    /// tell a holder that keeps the turn too long (its watchdog).
    changes: AtomicU64,
    /// When the turn last changed hands (CLOCK_MONOTONIC ns), so the NF
    /// that takes it can tell how long the hand-over took: microseconds on
    /// a core the NFs own, milliseconds when the host gives the core to
    /// other tasks (the scheduler then stops taking turns there).
    since_ns: AtomicU64,
}

// Each core's turn word has one cache line of the arena.
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<CoreTurn>() <= 64);

/// The clock of [`CoreTurn::since_ns`] (none under loom, which models the
/// protocol, not time).
fn now_ns() -> u64 {
    #[cfg(not(loom))]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
    #[cfg(loom)]
    0
}

fn word(slot: u32) -> u32 {
    slot.wrapping_add(1)
}

impl CoreTurn {
    /// The slot holding the turn, if any.
    pub fn holder(&self) -> Option<u32> {
        match self.holder.load(Ordering::SeqCst) {
            0 => None,
            w => Some(w - 1),
        }
    }

    /// Whether `slot` holds the turn. Sequentially consistent, because a
    /// sleeper calls it after `WakeWord::prepare_sleep` (the wake word's
    /// Dekker pair with a passer).
    pub fn holds(&self, slot: u32) -> bool {
        self.holder.load(Ordering::SeqCst) == word(slot)
    }

    /// How many times the turn has changed hands.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    /// When the turn last changed hands (CLOCK_MONOTONIC ns; stored just
    /// after the change, so a taker may rarely read the one before).
    pub fn since_ns(&self) -> u64 {
        self.since_ns.load(Ordering::Relaxed)
    }

    fn swap(&self, from: u32, to: u32) -> bool {
        let won = self
            .holder
            .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if won {
            self.changes.fetch_add(1, Ordering::Relaxed);
            self.since_ns.store(now_ns(), Ordering::Relaxed);
        }
        won
    }

    /// After publishing work for `slot`: takes the turn for it if nobody
    /// holds it. `true`: the caller must now wake `slot`.
    pub fn claim(&self, slot: u32) -> bool {
        fence(Ordering::SeqCst);
        self.holder.load(Ordering::SeqCst) == 0 && self.swap(0, word(slot))
    }

    /// The holder `from` hands the turn to `to`; `false` if `from` no
    /// longer held it (the platform revoked it). The caller then wakes `to`.
    pub fn pass(&self, from: u32, to: u32) -> bool {
        self.swap(word(from), word(to))
    }

    /// The holder `from` gives the turn up; `false` if it no longer held
    /// it. After this the caller must look for work again and
    /// [`claim`](Self::claim) for any NF that has some.
    pub fn release(&self, from: u32) -> bool {
        let done = self.swap(word(from), 0);
        fence(Ordering::SeqCst);
        done
    }

    /// The platform takes the turn from `from` (it kept it too long, or
    /// stopped) and gives it to `to`, or to nobody. `false` if the turn
    /// moved meanwhile.
    pub fn revoke(&self, from: u32, to: Option<u32>) -> bool {
        let done = self.swap(word(from), to.map_or(0, word));
        fence(Ordering::SeqCst);
        done
    }
}

/// Receive ring occupancy, in quarters of its capacity, at which an NF runs
/// without its core's turn (see the module documentation, "Pressure").
/// Three quarters leaves a quarter of the ring to absorb the wake-up and
/// the batch that lowers it; a core that keeps up never gets there (the
/// holder passes its turn on before its output ring is three quarters full).
pub const PRESSURE_QUARTERS: u32 = 3;

/// Whether a receive ring holding `occupancy` of `capacity` entries is
/// under pressure: its NF runs out of turn.
pub fn under_pressure(occupancy: u32, capacity: u32) -> bool {
    u64::from(occupancy) * 4 >= u64::from(capacity) * u64::from(PRESSURE_QUARTERS)
}

/// How an NF process is scheduled: written by the platform's scheduler at
/// any time, read by the NF at every pass of its loop, so a policy change
/// takes effect without restarting the NF. Zeroed memory is the NF's own
/// hybrid polling (today's behaviour before a scheduler says otherwise).
#[derive(Debug, Default)]
#[repr(C)]
pub struct Budget {
    /// [`mode::HYBRID`] or [`mode::TURNS`].
    pub mode: AtomicU32,
    /// Under turns: the core whose turn word the NF uses.
    pub core: AtomicU32,
    /// Under turns: the slot after this one in the core's run order
    /// (circular; this slot itself when it runs alone).
    pub next: AtomicU32,
    /// Under turns: the longest the NF keeps the turn while others wait
    /// (0: until its input is empty).
    pub slice_ns: AtomicU64,
    /// Polling on its own (hybrid): how long an idle NF keeps polling
    /// before it sleeps, ns; valid once [`poll::PUBLISHED`] is set.
    pub poll_ns: AtomicU64,
    /// Polling on its own: [`poll`] flags. 0 (not published): the NF
    /// keeps the polling it was started with.
    pub poll_flags: AtomicU32,
}

/// Flags of [`Budget::poll_flags`].
pub mod poll {
    /// The scheduler has published the polling fields.
    pub const PUBLISHED: u32 = 1;
    /// Give the core away between idle polls.
    pub const YIELD_WHILE_POLLING: u32 = 4;
    /// The bits from here up: yield the CPU after this many full batches
    /// (0: never).
    pub const YIELD_EVERY_SHIFT: u32 = 16;
}

/// Scheduling modes of [`Budget::mode`].
pub mod mode {
    /// The NF polls, yields and sleeps by itself (`LoopConfig`).
    pub const HYBRID: u32 = 0;
    /// The NF runs only while it holds its core's turn.
    pub const TURNS: u32 = 1;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn zeroed_memory_means_nobody_holds_the_turn() {
        let t = CoreTurn::default();
        assert_eq!(t.holder(), None);
        assert!(!t.holds(0));
        assert_eq!(Budget::default().mode.load(Ordering::Relaxed), mode::HYBRID);
    }

    #[test]
    fn only_the_holder_passes_or_releases_and_claims_need_a_free_turn() {
        let t = CoreTurn::default();
        assert!(t.claim(3));
        assert!(!t.claim(4), "a held turn is not claimed");
        assert!(!t.pass(4, 5), "only the holder passes");
        assert!(t.pass(3, 4));
        assert!(t.holds(4) && !t.holds(3));
        assert!(!t.release(3), "a former holder cannot release");
        assert!(t.release(4));
        assert_eq!(t.holder(), None);
        assert_eq!(t.changes(), 3);
    }

    #[test]
    fn the_platform_revokes_a_turn_only_from_its_holder() {
        let t = CoreTurn::default();
        assert!(t.claim(0), "slot 0 is distinct from nobody");
        assert!(t.holds(0));
        assert!(!t.revoke(1, Some(2)));
        assert!(t.revoke(0, Some(2)));
        assert!(t.holds(2));
        assert!(t.revoke(2, None));
        assert_eq!(t.holder(), None);
    }

    #[test]
    fn pressure_starts_at_three_quarters_of_the_ring() {
        assert!(!under_pressure(0, 1024));
        assert!(!under_pressure(767, 1024));
        assert!(under_pressure(768, 1024));
        assert!(under_pressure(1024, 1024));
        assert!(under_pressure(u32::MAX, u32::MAX), "no overflow");
    }

    #[test]
    fn slot_numbers_at_the_top_of_the_range_are_not_nobody() {
        let t = CoreTurn::default();
        assert!(t.claim(u32::MAX - 1));
        assert_eq!(t.holder(), Some(u32::MAX - 1));
    }
}
