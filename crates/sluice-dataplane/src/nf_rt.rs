//! The worker's view of one NF instance: how it runs (inline object or
//! process behind a ring pair), its lifecycle, and its counters.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use sluice_mem::{NfControl, NfLink};
use sluice_spec::Isolation;

use crate::host::SpawnRequest;
use crate::inline_nf::InlineNf;

/// Lifecycle of a process NF as the platform sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Spawn requested; packets may already queue in its ring.
    Starting,
    /// Processing.
    Running,
    /// Dead; restart scheduled at this time (ns). Packets keep queueing in
    /// its ring (what the dead instance had not dequeued stays there too)
    /// and the next instance takes them, until `hold_until_ns`: then what
    /// is queued is dropped as `nf_down`, and so is what comes later, until
    /// an instance runs again (`hold_until_ns` is then 0).
    Down {
        /// When to respawn.
        respawn_at_ns: u64,
        /// Until when packets wait for the next instance (0: no longer).
        hold_until_ns: u64,
    },
    /// Asked to stop (shutdown, or removed by an apply).
    Stopping,
    /// Exited after a stop request.
    Stopped,
    /// Dead for good (restart policy exhausted or forbids it).
    Failed,
}

impl Phase {
    /// Whether packets sent to it now are queued for it (not dropped).
    pub fn accepts(&self) -> bool {
        match self {
            Phase::Starting | Phase::Running => true,
            Phase::Down { hold_until_ns, .. } => *hold_until_ns != 0,
            _ => false,
        }
    }

    /// Whether an instance is alive and may hand packets back.
    pub fn alive(&self) -> bool {
        matches!(self, Phase::Starting | Phase::Running | Phase::Stopping)
    }
}

/// A process NF.
pub struct ProcessNf<'a> {
    /// The platform end of its rings.
    pub link: NfLink<'a>,
    /// Lifecycle.
    pub phase: Phase,
    /// Incremented at every spawn.
    pub generation: u32,
    /// Current pid (0 if none).
    pub pid: i32,
    /// When the current spawn was requested (ns).
    pub spawn_requested_ns: u64,
    /// When the worker saw the last instance die unasked (ns); 0 once a
    /// new one runs. A restart's time is counted from here.
    pub down_since_ns: u64,
    /// Flow-end events waiting for ring space.
    pub pending_events: VecDeque<u32>,
    /// What to ask the host for at every (re)start (generation and
    /// restarts are filled in then).
    pub spawn: SpawnRequest,
    /// Spare buffers each instance keeps for allocation.
    pub alloc_reserve: u32,
    /// Asked to stop so that a fresh instance is forked for its pool's
    /// next flow (`reset: refork`); its exit starts that instance.
    pub recycle: bool,
}

/// How an NF executes.
// One per NF in a table that changes only on apply; the size difference
// is irrelevant.
#[allow(clippy::large_enum_variant)]
pub enum Exec<'a> {
    /// In the worker thread.
    Inline(InlineNf),
    /// In its own process.
    Process(ProcessNf<'a>),
}

/// Totals of instances that have exited (a restart starts from zero).
#[derive(Debug, Clone, Copy, Default)]
pub struct Retired {
    /// Packets processed.
    pub packets: u64,
    /// Time in the batch handler.
    pub busy_ns: u64,
    /// Sleeps.
    pub sleeps: u64,
    /// Yields.
    pub yields: u64,
    /// Turns taken.
    pub turns: u64,
    /// Batches run out of turn.
    pub out_of_turn: u64,
    /// Hand-over time of its turns, ns.
    pub turn_wait_ns: u64,
    /// Stalls (loop held off the CPU, see `NfStats::stalls`).
    pub stalls: u64,
    /// Nanoseconds stalled.
    pub stalled_ns: u64,
}

/// One NF instance in the worker.
pub struct NfRt<'a> {
    /// The NF's id in the plan.
    pub id: u16,
    /// Its arena slot (control block; rings for process NFs).
    pub slot: u32,
    /// Instance name.
    pub name: String,
    /// Type name.
    pub type_name: &'static str,
    /// Inline or process.
    pub isolation: Isolation,
    /// Its control block (statistics, wake word).
    pub control: &'a NfControl,
    /// Execution.
    pub exec: Exec<'a>,
    /// Drops by the NF's own reasons.
    pub local_drops: Vec<u64>,
    /// Names of those reasons.
    pub drop_names: Vec<String>,
    /// Restarts after crashes.
    pub restarts: u32,
    /// Instances discarded and forked afresh for their pool's next flow
    /// (`reset: refork`).
    pub reforks: u64,
    /// How the last instance ended.
    pub last_exit: Option<String>,
    /// Instances its sandbox killed (a system call outside its list).
    pub sandbox_kills: u32,
    /// Instances killed at their memory limit.
    pub oom_kills: u32,
    /// Spawn-to-running time of the first [`STARTUP_SAMPLES`] starts, µs
    /// (later ones are in `restart_times`: an NF that crashes forever must
    /// not grow the platform's memory).
    pub startup_us: Vec<f64>,
    /// Processes started for it: its first and each restart's (process
    /// NFs).
    pub starts: u32,
    /// Starts forked from a shell (its NF built once in the template).
    pub shell_starts: u32,
    /// Starts a standby took over (`settings.restart.standby`).
    pub standby_starts: u32,
    /// Starts a spare took: a process forked ahead for its slot.
    pub spare_starts: u32,
    /// Restarts that came back: from the exit seen to the new instance
    /// running. Kept as count, sum and maximum, not every sample: an NF
    /// that crashes forever must not grow the platform's memory.
    pub restart_times: RestartTimes,
    /// Futex wake-ups issued to this NF.
    pub wakeups: u64,
    /// Packets copied into its trust domain on their way to it (they
    /// came from a port or an NF of another domain).
    pub domain_copies: u64,
    /// Of those, wake-ups by the adaptive batching timeout.
    pub wakeups_by_timeout: u64,
    /// Turns of its core the scheduler took back from it (it kept one too
    /// long, running or blocked).
    pub turns_revoked: u64,
    /// Turns the scheduler handed on while the host held it off its CPU.
    pub turns_held_off: u64,
    /// Ring entries it returned that were not buffers it owned.
    pub invalid_handles: u64,
    /// CPU time of its processes (process NFs only).
    pub cpu: crate::cpu_clock::CpuClock,
    /// Totals of exited instances.
    pub retired: Retired,
    /// Packets the NF created (allocated and emitted).
    pub originated: u64,
    /// Inline NFs with a timer: (interval, next due time) in ns.
    pub tick: Option<(u64, u64)>,
}

/// Start-up times kept per NF (see [`NfRt::startup_us`]).
pub const STARTUP_SAMPLES: usize = 256;

impl<'a> NfRt<'a> {
    /// Notes a start's spawn-to-running time, µs (the first
    /// [`STARTUP_SAMPLES`] are kept).
    pub fn record_startup(&mut self, us: f64) {
        if self.startup_us.len() < STARTUP_SAMPLES {
            self.startup_us.push(us);
        }
    }

    /// Packets processed by all instances so far.
    pub fn packets(&self) -> u64 {
        self.retired.packets + self.control.stats.packets.load(Ordering::Relaxed)
    }

    /// CPU time charged (time in the batch handler).
    pub fn busy_ns(&self) -> u64 {
        self.retired.busy_ns + self.control.stats.busy_ns.load(Ordering::Relaxed)
    }

    /// Folds the exited instance's statistics into `retired` (and zeroes
    /// them so they are not counted twice). Its NF-specific counters stay
    /// in the control block until the next instance starts, so the report
    /// shows the last instance's counters.
    pub fn retire_instance(&mut self) {
        let s = &self.control.stats;
        for (total, c) in [
            (&mut self.retired.packets, &s.packets),
            (&mut self.retired.busy_ns, &s.busy_ns),
            (&mut self.retired.sleeps, &s.sleeps),
            (&mut self.retired.yields, &s.yields),
            (&mut self.retired.turns, &s.turns),
            (&mut self.retired.out_of_turn, &s.out_of_turn),
            (&mut self.retired.turn_wait_ns, &s.turn_wait_ns),
            (&mut self.retired.stalls, &s.stalls),
            (&mut self.retired.stalled_ns, &s.stalled_ns),
        ] {
            *total += c.swap(0, Ordering::Relaxed);
        }
    }

    /// The process state, for process NFs.
    pub fn process(&mut self) -> Option<&mut ProcessNf<'a>> {
        match &mut self.exec {
            Exec::Process(p) => Some(p),
            Exec::Inline(_) => None,
        }
    }

    /// The process state, for process NFs (shared view).
    pub fn process_ref(&self) -> Option<&ProcessNf<'a>> {
        match &self.exec {
            Exec::Process(p) => Some(p),
            Exec::Inline(_) => None,
        }
    }
}

/// How long restarts took: from the worker seeing an instance die to its
/// successor running (backoff included).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct RestartTimes {
    /// Restarts that came back.
    pub count: u32,
    /// Their total time, µs.
    pub total_us: f64,
    /// The longest, µs.
    pub max_us: f64,
    /// Those that took more than 1 ms (the isolation issue's bound for
    /// each restart).
    #[serde(default)]
    pub over_1ms: u32,
}

impl RestartTimes {
    /// Adds one restart of `us` microseconds.
    pub fn record(&mut self, us: f64) {
        self.count += 1;
        self.total_us += us;
        self.max_us = self.max_us.max(us);
        self.over_1ms += u32::from(us > 1_000.0);
    }

    /// Adds `other`'s restarts (another worker's instances of one NF).
    pub fn merge(&mut self, other: &RestartTimes) {
        self.count += other.count;
        self.total_us += other.total_us;
        self.max_us = self.max_us.max(other.max_us);
        self.over_1ms += other.over_1ms;
    }
}

#[cfg(test)]
mod tests {
    use super::RestartTimes;

    #[test]
    fn restart_times_count_those_over_the_bound_and_merge() {
        let mut a = RestartTimes::default();
        for us in [250.0, 1_000.0, 1_000.5, 4_000.0] {
            a.record(us);
        }
        assert_eq!((a.count, a.over_1ms, a.max_us), (4, 2, 4_000.0));
        let mut b = RestartTimes::default();
        b.record(1_500.0);
        a.merge(&b);
        assert_eq!((a.count, a.over_1ms), (5, 3));
        assert_eq!(a.total_us, 7_750.5);
    }
}
