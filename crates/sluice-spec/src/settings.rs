//! The `settings:` section: platform-wide knobs, all optional.

use std::fmt;

use crate::domains::DomainSpec;
use crate::wakeup::WakeRule;

/// Platform-wide settings (`settings:`). Every field is optional in the
/// file; [`Settings::default`] gives the documented defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Packet buffers in the arena (`buffers`, 1024..=4194304, default 16384).
    pub buffers: u32,
    /// Slots per descriptor ring (`ring_size`, power of two, 64..=65536,
    /// default 1024).
    pub ring_size: u32,
    /// Maximum packets per batch (`batch`, 1..=256, default 32; at most
    /// `ring_size`).
    pub batch: u16,
    /// Ask for 2 MiB huge pages (`hugepages`, default false); the runtime
    /// falls back to normal pages with a message.
    pub hugepages: bool,
    /// Platform worker threads (`workers`, 1..=64, default 1).
    pub workers: u16,
    /// Restart policy for process NFs (`restart`).
    pub restart: RestartPolicy,
    /// Flow table sizing (`flow_table`).
    pub flow_table: FlowTableSettings,
    /// When sleeping process NFs are woken (`wakeup`).
    pub wakeup: WakeupSettings,
    /// How process NFs sharing a core are scheduled (`scheduler`).
    pub scheduler: SchedulerSettings,
    /// What happens to packets of a chain that cannot keep up
    /// (`backpressure`).
    pub backpressure: BackpressureSettings,
    /// Start process NFs from shells (`shells`, default true): each NF
    /// template builds an NF once per recipe and forks every instance and
    /// restart from the built one.
    pub shells: bool,
    /// Trust domains (`domains`, at most 15, default none): packet memory
    /// of their own for the NFs that name them in `nfs[].domain`. Fixed
    /// when the platform starts.
    pub domains: Vec<DomainSpec>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            buffers: 16_384,
            ring_size: 1024,
            batch: 32,
            hugepages: false,
            workers: 1,
            restart: RestartPolicy::default(),
            flow_table: FlowTableSettings::default(),
            wakeup: WakeupSettings::default(),
            scheduler: SchedulerSettings::default(),
            backpressure: BackpressureSettings::default(),
            shells: true,
            domains: Vec::new(),
        }
    }
}

/// What happens to packets of a chain whose NFs cannot keep up
/// (`settings.backpressure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackpressureSettings {
    /// `mode`, default `hold`.
    pub mode: BackpressureMode,
    /// Ring occupancy in percent at which a chain is congested
    /// (`watermark_pct`, 1..=100, default 75).
    pub watermark_pct: u32,
    /// Under `red`: occupancy in percent where early drops start
    /// (`red_min_pct`, 0..=99, below `watermark_pct`, default 25).
    pub red_min_pct: u32,
}

impl Default for BackpressureSettings {
    fn default() -> Self {
        BackpressureSettings {
            mode: BackpressureMode::Hold,
            watermark_pct: 75,
            red_min_pct: 25,
        }
    }
}

/// `settings.backpressure.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackpressureMode {
    /// Ports are read only as fast as their chains' first NFs take
    /// packets: nothing is lost inside; a generator slows down, a NIC or
    /// the kernel drops what the port cannot hold (`hold`).
    #[default]
    Hold,
    /// Ports are read at full speed; a packet whose chain is congested is
    /// dropped at the chain's entry, before any work is spent on it
    /// (`drop`).
    Drop,
    /// As `drop`, with early random drops as the chain fills (`red`).
    Red,
}

spec_names!(BackpressureMode {
    Hold = "hold",
    Drop = "drop",
    Red = "red",
});

/// What to do when a process NF exits (`settings.restart`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    /// When to restart (`policy`, default `always`).
    pub policy: RestartMode,
    /// Restarts allowed per NF before giving up (`max_restarts`,
    /// 0..=1000000, default 10).
    pub max_restarts: u32,
    /// Delay before a restart in milliseconds (`backoff_ms`, default 10).
    pub backoff_ms: u64,
    /// How long packets for a crashed NF wait in its ring for the next
    /// instance, in milliseconds (`hold_ms`, 0..=3600000, default 1000):
    /// past it they are dropped as `nf_down`.
    pub hold_ms: u64,
    /// Keep a standby per process NF (`standby`, default false): an
    /// instance forked, built and confined ahead and parked, which the
    /// next restart takes over instead of forking. Needs `shells`.
    pub standby: bool,
    /// What a panic in an inline NF's code does (`inline_panic`, default
    /// `contain`).
    pub inline_panic: InlinePanic,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            policy: RestartMode::Always,
            max_restarts: 10,
            backoff_ms: 10,
            hold_ms: 1000,
            standby: false,
            inline_panic: InlinePanic::Contain,
        }
    }
}

/// What a panic in an inline NF's code does (`settings.restart.inline_panic`).
/// An inline NF runs on a worker's thread, so it cannot be killed and
/// restarted like a process; it is replaced by a fresh instance instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum InlinePanic {
    /// The NF fails, not its worker (`contain`): the batch it held is
    /// dropped as `nf_crashed`, packets for it as `nf_down` until a fresh
    /// instance replaces it, per this restart policy.
    #[default]
    Contain,
    /// The platform stops with the panic's message (`stop`), as for a
    /// panic in its own code: for those who would rather a bug end the run
    /// than serve on without the NF's state.
    Stop,
}

spec_names!(InlinePanic {
    Contain = "contain",
    Stop = "stop",
});

/// When a process NF is restarted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RestartMode {
    /// Restart whenever it exits (`always`).
    #[default]
    Always,
    /// Restart only after a crash or non-zero exit (`on-failure`).
    OnFailure,
    /// Never restart (`never`).
    Never,
}

spec_names!(RestartMode {
    Always = "always",
    OnFailure = "on-failure",
    Never = "never",
});

impl fmt::Display for RestartMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Flow table sizing (`settings.flow_table`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowTableSettings {
    /// Entries (`capacity`, power of two, 1024..=16777216, default 65536).
    pub capacity: u32,
    /// Idle time after which a flow is forgotten, in milliseconds
    /// (`idle_timeout_ms`, at least 1, default 30000).
    pub idle_timeout_ms: u64,
    /// How long a TCP flow lingers after its FIN before it ends, so the
    /// closing handshake's last packets still belong to it, in
    /// milliseconds (`close_timeout_ms`, 0..=120000, default 1000;
    /// conntrack's TIME_WAIT). 0: a flow ends at its first FIN, and a
    /// later packet of its 5-tuple starts a new flow. A `per_flow` NF's
    /// instance is recycled when its flow ends: a shorter linger recycles
    /// it sooner.
    pub close_timeout_ms: u64,
}

impl Default for FlowTableSettings {
    fn default() -> Self {
        FlowTableSettings {
            capacity: 65_536,
            idle_timeout_ms: 30_000,
            close_timeout_ms: 1_000,
        }
    }
}

/// When sleeping process NFs are woken (`settings.wakeup`): the default
/// wake-up rule of every process NF ([`WakeRule`]; chains and NFs may
/// have their own) and how long an idle NF polls before it sleeps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WakeupSettings {
    /// The default rule (`policy` and its parameters).
    pub rule: WakeRule,
    /// How long an idle process NF keeps polling its ring after its last
    /// packet before it sleeps, in microseconds (`busy_poll_us`,
    /// 0..=1000000), under the policies that poll (`auto`, `hybrid`).
    /// `None`: the platform's default for the NF's placement.
    pub busy_poll_us: Option<u64>,
}

/// How process NFs sharing a core are scheduled (`settings.scheduler`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// Which NFs take turns (`policy`, default `auto`).
    pub policy: SchedulerPolicy,
    /// Longest turn an NF keeps while another NF of its core has packets,
    /// in microseconds (`slice_us`, 1..=100000, default 20).
    pub slice_us: u64,
    /// NFs that schedule themselves yield the core after this many full
    /// batches (`yield_every`, 0..=1024; 0: never, the kernel alone ends
    /// their time). `None`: after every batch where NFs share a core,
    /// never alone. UNiS's cooperative baseline is 8 (seed 001 §4.1.4).
    pub yield_every: Option<u32>,
    /// The kernel class NF processes run in (`kernel_class`).
    pub kernel_class: KernelClass,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            policy: SchedulerPolicy::Auto,
            slice_us: 20,
            yield_every: None,
            kernel_class: KernelClass::Normal,
        }
    }
}

/// `settings.scheduler.policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SchedulerPolicy {
    /// Every NF polls, yields and sleeps by itself (`hybrid`).
    Hybrid,
    /// NFs on a core without a worker take turns in chain order (`turns`).
    Turns,
    /// Turns on such a core where one chain has four or more process NFs
    /// (`auto`).
    #[default]
    Auto,
}

spec_names!(SchedulerPolicy {
    Hybrid = "hybrid",
    Turns = "turns",
    Auto = "auto",
});

/// `settings.scheduler.kernel_class`: the kernel scheduling class of
/// process NFs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelClass {
    /// The kernel's fair time sharing (`normal`, `SCHED_OTHER`).
    #[default]
    Normal,
    /// Real-time round robin (`round_robin`, `SCHED_RR` priority 1).
    RoundRobin,
}

spec_names!(KernelClass {
    Normal = "normal",
    RoundRobin = "round_robin",
});
