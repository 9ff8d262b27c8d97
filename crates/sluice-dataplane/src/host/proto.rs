//! The typed protocol between a platform worker's [`super::ForkHost`] and
//! its NF template process.
//!
//! ```text
//! platform → template   (the arena's memfd first, as SCM_RIGHTS)
//!   Hello { arena layout, calibration, worker }     once, first
//!   Spawn(SpawnRequest)                             start an NF in a slot (a standby's, or a fork)
//!   Release { slot }                                the slot's NF is gone for good: drop its standby
//!   Spare(SpawnRequest)                             keep a process ready ahead for the worker's next
//!                                                   NF, likely like this request (`super::spare`)
//!   OutputTaken { pid }                             the platform holds pid's output pipe: close it
//!   Quit                                            kill every NF, reap, exit
//! template → platform
//!   Ready { pid }                                   after Hello
//!   Spawned { slot, generation, pid, shell, standby, spare, output }
//!                                                   shell: forked from a built NF;
//!                                                   standby: a parked, confined instance took over;
//!                                                   spare: the slot's spare took the start;
//!                                                   output: the template's descriptor of the NF's
//!                                                   output pipe, for the platform to take (Hello's
//!                                                   output_to_platform)
//!   SpawnFailed { slot, generation, error }         fork failed; nothing left behind
//!   Exited { slot, generation, pid, status }        reaped
//!   Log { slot, generation, line }                  a line the NF wrote to stdout/stderr (when
//!                                                   the template reads its output)
//! ```
//!
//! Both ends use a [`super::channel::Channel`]: queued, never blocking.

use serde::{Deserialize, Serialize};
use sluice_mem::ArenaConfig;
use sluice_sys::ExitStatus;

use crate::polling::LoopConfig;
use crate::recipe::NfRecipe;

/// The arena layout, so the template maps the received memfd alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArenaLayout {
    /// Packet buffers.
    pub buffers: u32,
    /// Slots per ring.
    pub ring_size: u32,
    /// NF slots.
    pub nf_slots: u32,
    /// Worker wake words.
    pub workers: u32,
    /// Backed by huge pages.
    pub hugepages: bool,
    /// 64 KiB buffers after the ordinary ones.
    pub large_buffers: u32,
    /// Buffers of the named trust domains.
    pub domain_buffers: [u32; sluice_mem::arena::MAX_DOMAINS - 1],
    /// Mapped length in bytes.
    pub len: usize,
}

impl ArenaLayout {
    /// The layout of `arena`.
    pub fn of(arena: &sluice_mem::Arena) -> ArenaLayout {
        let c = arena.config();
        ArenaLayout {
            buffers: c.buffers,
            ring_size: c.ring_size,
            nf_slots: c.nf_slots,
            workers: c.workers,
            hugepages: matches!(arena.backing(), sluice_mem::Backing::HugePages),
            large_buffers: c.large_buffers,
            domain_buffers: c.domain_buffers,
            len: arena.size(),
        }
    }

    /// The arena config it was made from.
    pub fn config(&self) -> ArenaConfig {
        ArenaConfig {
            buffers: self.buffers,
            ring_size: self.ring_size,
            nf_slots: self.nf_slots,
            workers: self.workers,
            hugepages: self.hugepages,
            large_buffers: self.large_buffers,
            domain_buffers: self.domain_buffers,
        }
    }
}

/// The first message to a template.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// The platform's pid (the template dies with it).
    pub platform_pid: i32,
    /// How to map the arena.
    pub arena: ArenaLayout,
    /// The platform's cycle-counter calibration
    /// ([`sluice_sys::cycles_calibration`]).
    pub cycles_q32: u64,
    /// The worker this template serves (its NFs wake that worker).
    pub worker: u32,
    /// The platform takes each NF's output pipe (`pidfd_getfd`, see
    /// `super::output`); otherwise the template reads them and sends their
    /// lines.
    pub output_to_platform: bool,
}

/// Start an NF instance in an arena slot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpawnRequest {
    /// Arena slot (control block and rings).
    pub slot: u32,
    /// Start number of this slot, echoed in every event about it.
    pub generation: u32,
    /// CPU to pin the NF to.
    pub cpu: u32,
    /// How the NF loop shares its core.
    pub loop_cfg: LoopConfig,
    /// How to build the NF.
    pub recipe: NfRecipe,
    /// The instance's name: the NF's, or a replica's (`NAME.k`, while
    /// the recipe keeps the NF's). Its process is named `nf:` + this.
    pub name: String,
    /// Instances of this NF that ran before in this slot's history.
    pub restarts: u32,
    /// What the process may do.
    pub sandbox: super::SandboxPlan,
    /// Fork it from a shell (the NF built once in the template,
    /// `super::shells`) rather than build it in the new process.
    pub shell: bool,
    /// Its trust domain: the process keeps only that domain's packet
    /// buffers mapped (`sluice_mem::Arena::keep_domain`).
    pub domain: u8,
    /// Keep a standby for the slot: an instance forked, built and
    /// confined ahead, parked until the next start of the same request
    /// takes it over (`super::standby`). Only with `shell`.
    pub standby: bool,
}

impl SpawnRequest {
    /// What a standby must have been made from to serve this request:
    /// the request without what only the start itself decides (its
    /// generation, restart count and CPU, handed over at the take-over).
    pub fn standby_key(&self) -> Vec<u8> {
        let generic = SpawnRequest {
            generation: 0,
            restarts: 0,
            cpu: 0,
            ..self.clone()
        };
        postcard::to_allocvec(&generic).unwrap_or_default()
    }

    /// What a spare made from this request serves: [`Self::standby_key`]
    /// without the NF's name (its build did not read it), the standby
    /// policy (it shapes restarts, not the instance) and the loop's
    /// settings (the start hands those over).
    pub fn spare_key(&self) -> Vec<u8> {
        let generic = SpawnRequest {
            generation: 0,
            restarts: 0,
            cpu: 0,
            name: String::new(),
            standby: false,
            loop_cfg: LoopConfig::for_sharing(1, 1, None),
            // The recipe as shells key it (`NfRecipe::key`), below.
            recipe: NfRecipe {
                name: String::new(),
                type_name: String::new(),
                config: sluice_spec::ConfigNode::null(),
                answers: Vec::new(),
                replicas: 0,
                flow_capacity: 0,
            },
            ..self.clone()
        };
        let mut key = postcard::to_allocvec(&generic).unwrap_or_default();
        key.extend_from_slice(&self.recipe.key(true));
        key
    }

    /// A forwarder-like request for slot `slot`, for tests.
    #[cfg(test)]
    pub(crate) fn test_request(slot: u32) -> SpawnRequest {
        SpawnRequest {
            slot,
            generation: 0,
            cpu: 0,
            loop_cfg: LoopConfig::for_sharing(1, 1, None),
            recipe: NfRecipe {
                name: "a".into(),
                type_name: "quiet".into(),
                config: sluice_spec::ConfigNode::default(),
                answers: Vec::new(),
                replicas: 1,
                flow_capacity: 1024,
            },
            name: "a".into(),
            restarts: 0,
            sandbox: super::SandboxPlan::default(),
            shell: true,
            domain: 0,
            standby: false,
        }
    }
}

/// Platform → template.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)] // one message at a time, never stored in bulk
pub enum ToTemplate {
    /// First message.
    Hello(Hello),
    /// Start an NF.
    Spawn(SpawnRequest),
    /// The NF in this slot will not be started again: kill its standby.
    Release {
        /// The slot.
        slot: u32,
    },
    /// Keep a spare for the worker's next NF, most likely like this
    /// request (its slot, recipe and sandbox; any name), replacing one
    /// kept for another.
    Spare(SpawnRequest),
    /// The platform took the output pipe of process `pid` (or gave up on
    /// it): the template closes its descriptor.
    OutputTaken {
        /// The NF process.
        pid: i32,
    },
    /// Kill every NF, reap them, report their exits and exit.
    Quit,
}

/// How an NF process ended, as the template saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireStatus {
    /// Exit code.
    Code(i32),
    /// Terminating signal.
    Signal(i32),
    /// Killed at its memory limit.
    OutOfMemory,
}

impl From<&ExitStatus> for WireStatus {
    fn from(s: &ExitStatus) -> Self {
        match *s {
            ExitStatus::Code(c) => WireStatus::Code(c),
            ExitStatus::Signal(n) => WireStatus::Signal(n),
            ExitStatus::OutOfMemory => WireStatus::OutOfMemory,
        }
    }
}

impl From<WireStatus> for ExitStatus {
    fn from(s: WireStatus) -> Self {
        match s {
            WireStatus::Code(c) => ExitStatus::Code(c),
            WireStatus::Signal(n) => ExitStatus::Signal(n),
            WireStatus::OutOfMemory => ExitStatus::OutOfMemory,
        }
    }
}

/// Template → platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromTemplate {
    /// Hello received, arena mapped.
    Ready {
        /// The template's pid.
        pid: i32,
    },
    /// An NF process was forked.
    Spawned {
        /// Its slot.
        slot: u32,
        /// Its generation.
        generation: u32,
        /// Its pid.
        pid: i32,
        /// It was forked from a shell: its NF is built already.
        shell: bool,
        /// A standby took over: forked, built and confined ahead.
        standby: bool,
        /// The slot's spare took the start: forked ahead.
        spare: bool,
        /// The template's descriptor of its output pipe's read end, for
        /// the platform to take; it stays open until `OutputTaken`.
        output: Option<i32>,
    },
    /// The fork failed; nothing was created.
    SpawnFailed {
        /// The slot.
        slot: u32,
        /// The generation asked for.
        generation: u32,
        /// Why.
        error: String,
    },
    /// An NF process was reaped.
    Exited {
        /// Its slot.
        slot: u32,
        /// Its generation.
        generation: u32,
        /// Its pid.
        pid: i32,
        /// How it ended.
        status: WireStatus,
    },
    /// A line the NF wrote on its stdout or stderr.
    Log {
        /// Its slot.
        slot: u32,
        /// Its generation.
        generation: u32,
        /// The line, without its newline (cut at 4 KiB).
        line: String,
    },
}
