//! How an NF process that schedules itself (hybrid polling) shares its
//! core: whether it yields after a batch and between idle polls, and how
//! long it polls idle before it sleeps. The rule depends on how many NFs
//! share the core, which changes as NFs come and go, so the scheduler
//! publishes it in each NF's budget (`sluice_mem::turn::poll`) and the NF
//! reads it at every pass; the config the NF was started with holds until
//! then.

use std::sync::atomic::Ordering;

use sluice_mem::turn::poll;
use sluice_mem::Budget;

/// How an NF process shares its core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopConfig {
    /// Packets per batch.
    pub batch: usize,
    /// Yield the CPU after every this-many-th full batch (0: never, the
    /// kernel alone ends the NF's time). By default after every one where
    /// other NFs share this core (they get their turn after one batch,
    /// seed 000 §4), and never alone on a core, where yielding to an
    /// unrelated process would forfeit a whole scheduler slice
    /// (`settings.scheduler.yield_every` sets it).
    pub yield_every: u32,
    /// How long an idle NF keeps polling its ring after its last packet
    /// before it sleeps on its wake word (`settings.wakeup.busy_poll_us`).
    /// It always looks once more after giving way before it sleeps.
    pub busy_poll_ns: u64,
    /// While polling idle, give the core away between polls
    /// (`sched_yield`), so NFs sharing it run; alone, spin instead.
    pub yield_while_polling: bool,
}

/// Busy-poll window of an idle process NF: after its last packet it keeps
/// polling this long before it sleeps. Measured on the 3-NF process chain
/// at half its maximum rate (3.2 Mpps; `docs/benchmarks.md`, "Busy
/// polling"): sleeping at once puts a futex wake-up, and the wake of a
/// halted vCPU, on nearly every hop, and p99 was 74–191 µs; polling 200 µs
/// keeps the NFs' core with the chain and p99 was 37–43 µs in the same
/// series (67 µs: 42–68 µs). On a noisy host the host's stalls dominate
/// (lower p99 in 16 of 24 interleaved pairs); sleeps fall from thousands
/// to tens per run.
pub const BUSY_POLL_NS: u64 = 200_000;

/// Most busy polling one core holds when several NFs share it: each idle
/// poller costs a sibling with packets one yield (≈ 1.5 µs here) per turn,
/// so the window shrinks as more NFs share the core (8 NFs: 100 µs each,
/// 100 NFs: 6 µs; Flurries, seed 004 §6.1, on why pollers must not
/// crowd a shared core). The share is counted in powers of two (each NF
/// gets between half and all of an even share): the window then changes
/// only when the NFs on a core double or halve, not at every NF created,
/// and a change writes the budgets of the NFs whose window changed only
/// (`sched::Scheduler::apply`).
pub const CORE_BUSY_POLL_NS: u64 = 800_000;

impl LoopConfig {
    /// The policy for an NF that shares its core with `sharing - 1` other
    /// NFs, polling idle for `busy_poll_us` (default: [`BUSY_POLL_NS`], less
    /// when more than four share the core, [`CORE_BUSY_POLL_NS`]). Alone,
    /// an NF spins while it polls. Shared, an idle NF that spins would hold
    /// the core for a scheduler slice while a sibling with packets waits
    /// (milliseconds of latency, seed 004 §2.4), so it polls by yielding:
    /// a sibling with packets gets the core at once, and the poller finds
    /// its next packets without being woken.
    pub fn for_sharing(batch: usize, sharing: usize, busy_poll_us: Option<u64>) -> LoopConfig {
        let shared = sharing > 1;
        let share = sharing.max(1).next_power_of_two() as u64;
        let default = BUSY_POLL_NS.min(CORE_BUSY_POLL_NS / share);
        LoopConfig {
            batch,
            yield_every: u32::from(shared),
            busy_poll_ns: busy_poll_us.map_or(default, |us| us.saturating_mul(1000)),
            yield_while_polling: shared,
        }
    }

    /// The policy for an NF on its worker's core (several workers): the
    /// worker and its NFs form a pipeline on one core, so each stage runs
    /// until its input is empty (at most a ring, a few microseconds) and
    /// then gives the core to the next. Yielding after every batch instead
    /// would cost two context switches per batch. By default an idle NF
    /// looks once more after giving way, then sleeps until the worker
    /// wakes it.
    pub fn beside_worker(batch: usize, busy_poll_us: Option<u64>) -> LoopConfig {
        LoopConfig {
            batch,
            yield_every: 0,
            busy_poll_ns: busy_poll_us.map_or(0, |us| us.saturating_mul(1000)),
            yield_while_polling: true,
        }
    }
}

impl LoopConfig {
    /// With `settings.scheduler.yield_every` (`None`: as it is). An NF
    /// that never yields after a batch does not yield while it polls idle
    /// either: it keeps its core until the kernel takes it (pure polling,
    /// the baseline of UNiS and Flurries).
    pub fn yielding_every(self, k: Option<u32>) -> LoopConfig {
        match k {
            None => self,
            Some(k) => LoopConfig {
                yield_every: k,
                yield_while_polling: self.yield_while_polling && k != 0,
                ..self
            },
        }
    }

    /// Its [`Budget::poll_flags`] (with [`poll::PUBLISHED`]).
    pub fn flags(&self) -> u32 {
        let mut flags = poll::PUBLISHED;
        if self.yield_while_polling {
            flags |= poll::YIELD_WHILE_POLLING;
        }
        // Spec limit 1024: fits the bits above the flags.
        flags | (self.yield_every.min(0xffff) << poll::YIELD_EVERY_SHIFT)
    }

    /// The polling in force: what the scheduler published in `budget`,
    /// else `self` (what the NF was started with). Two loads per pass.
    #[inline]
    pub fn in_force(&self, budget: &Budget) -> LoopConfig {
        let flags = budget.poll_flags.load(Ordering::Acquire);
        if flags & poll::PUBLISHED == 0 {
            return *self;
        }
        LoopConfig {
            batch: self.batch,
            yield_every: flags >> poll::YIELD_EVERY_SHIFT,
            busy_poll_ns: budget.poll_ns.load(Ordering::Relaxed),
            yield_while_polling: flags & poll::YIELD_WHILE_POLLING != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_nf_alone_spins_and_nfs_sharing_a_core_yield_while_polling() {
        let alone = LoopConfig::for_sharing(32, 1, None);
        assert_eq!(alone.busy_poll_ns, BUSY_POLL_NS);
        assert!(!alone.yield_while_polling);
        assert_eq!(alone.yield_every, 0);
        let three = LoopConfig::for_sharing(32, 3, None);
        assert_eq!(three.busy_poll_ns, BUSY_POLL_NS);
        assert!(three.yield_while_polling);
        assert_eq!(three.yield_every, 1);
    }

    #[test]
    fn yield_every_sets_the_batches_between_yields_and_zero_is_pure_polling() {
        let three = LoopConfig::for_sharing(32, 3, None);
        assert_eq!(three.yielding_every(None), three);
        let k8 = three.yielding_every(Some(8));
        assert_eq!((k8.yield_every, k8.yield_while_polling), (8, true));
        let pure = three.yielding_every(Some(0));
        assert_eq!((pure.yield_every, pure.yield_while_polling), (0, false));
        // Alone, an NF asked to yield does; it still spins while idle.
        let alone = LoopConfig::for_sharing(32, 1, None).yielding_every(Some(4));
        assert_eq!((alone.yield_every, alone.yield_while_polling), (4, false));
        // Every value survives the budget's encoding.
        for cfg in [three, k8, pure, alone, three.yielding_every(Some(1024))] {
            let b = Budget::default();
            b.poll_ns.store(cfg.busy_poll_ns, Ordering::Relaxed);
            b.poll_flags.store(cfg.flags(), Ordering::Release);
            assert_eq!(
                LoopConfig { batch: 7, ..cfg }.in_force(&b),
                LoopConfig { batch: 7, ..cfg }
            );
        }
    }

    #[test]
    fn a_crowded_core_shares_its_busy_polling() {
        assert_eq!(
            LoopConfig::for_sharing(32, 4, None).busy_poll_ns,
            BUSY_POLL_NS
        );
        assert_eq!(LoopConfig::for_sharing(32, 8, None).busy_poll_ns, 100_000);
        assert_eq!(LoopConfig::for_sharing(32, 100, None).busy_poll_ns, 6_250);
    }

    #[test]
    fn the_share_changes_only_when_the_nfs_double() {
        let window = |n| LoopConfig::for_sharing(32, n, None).busy_poll_ns;
        assert!((65..=128).all(|n| window(n) == 6_250));
        assert_eq!(window(129), 3_125);
        assert!((1..=1024).all(|n| window(n) * n as u64 <= CORE_BUSY_POLL_NS));
    }

    #[test]
    fn the_setting_overrides_the_default() {
        assert_eq!(LoopConfig::for_sharing(32, 3, Some(0)).busy_poll_ns, 0);
        assert_eq!(
            LoopConfig::for_sharing(32, 100, Some(50)).busy_poll_ns,
            50_000
        );
        let beside = LoopConfig::beside_worker(32, None);
        assert_eq!(beside.busy_poll_ns, 0);
        assert!(beside.yield_while_polling);
        assert_eq!(LoopConfig::beside_worker(32, Some(20)).busy_poll_ns, 20_000);
    }

    #[test]
    fn a_published_budget_replaces_the_polling_the_nf_started_with() {
        let started = LoopConfig::for_sharing(32, 1, None);
        let b = Budget::default();
        assert_eq!(started.in_force(&b), started, "nothing published yet");
        b.poll_ns.store(6_250, Ordering::Relaxed);
        b.poll_flags.store(
            poll::PUBLISHED | poll::YIELD_WHILE_POLLING | (1 << poll::YIELD_EVERY_SHIFT),
            Ordering::Release,
        );
        assert_eq!(
            started.in_force(&b),
            LoopConfig::for_sharing(32, 100, None),
            "as if started among 100"
        );
    }
}
