//! NF hosting: where process NFs run, behind one small interface.
//!
//! A worker asks its [`NfHost`] to start an NF instance in an arena slot
//! ([`SpawnRequest`]: the slot, a generation number, the CPU, the loop's
//! core-sharing policy and the NF's [`crate::recipe::NfRecipe`]), learns
//! what happened from [`HostEvent`]s it polls without blocking, and kills
//! an instance that broke the ring protocol. Reclaiming an instance's
//! buffers is the worker's job (the ownership table is the platform's);
//! the host's job is to say when an instance is gone for sure, so nothing
//! of it can touch the arena any more.
//!
//! The first host is [`ForkHost`]: an NF template process, exec'd from the
//! platform's own binary, that forks each NF (LightVM's split toolstack,
//! seed 000 §2). A micro-VM host would implement the same trait; the
//! worker does not know which it has.

mod channel;
mod child;
mod fork;
mod launch;
mod output;
pub mod proto;
mod sandbox;
mod shells;
mod spare;
mod standby;
mod template;

pub use fork::ForkHost;
pub use launch::HostConfig;
pub use proto::SpawnRequest;
pub use sandbox::{SandboxPlan, SandboxReport};
pub use template::{template_main_if_invoked, TEMPLATE_ARG};

use sluice_sys::ExitStatus;

/// Something that happened to a hosted instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEvent {
    /// The instance's process exists (it reports RUNNING itself, in its
    /// control block, once its NF is built).
    Spawned {
        /// Arena slot.
        slot: u32,
        /// Generation it was started as.
        generation: u32,
        /// Its pid.
        pid: i32,
        /// Forked from a shell (its NF was built in the template).
        shell: bool,
        /// A standby took over: forked, built and confined before the
        /// start (`settings.restart.standby`).
        standby: bool,
        /// A spare took it: a process forked ahead for the slot.
        spare: bool,
    },
    /// The instance is gone for good: it touches the arena no more.
    Exited {
        /// Arena slot.
        slot: u32,
        /// Generation it was started as.
        generation: u32,
        /// Its pid (0 if it never started).
        pid: i32,
        /// How it ended.
        status: ExitStatus,
        /// It died because its host died (not by its own fault).
        host_lost: bool,
    },
    /// A line the instance wrote on its stdout or stderr.
    Log {
        /// Arena slot.
        slot: u32,
        /// Generation.
        generation: u32,
        /// The line.
        line: String,
    },
    /// The host died and was started again (its instances were reported
    /// `Exited { host_lost: true }` first).
    HostRestarted {
        /// What happened, for the log.
        why: String,
    },
    /// The host died and could not be started again: no instance can
    /// run on this worker any more.
    HostFailed {
        /// Why.
        why: String,
    },
}

/// A failure to hand a request to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError(pub String);

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostError {}

/// Where a worker's process NFs run.
pub trait NfHost: Send {
    /// Starts an instance. Returns at once; its start (or failure) arrives
    /// as a [`HostEvent`].
    fn spawn(&mut self, req: SpawnRequest) -> Result<(), HostError>;
    /// Kills an instance (it broke the ring protocol); its exit arrives as
    /// an event.
    fn kill(&mut self, slot: u32, generation: u32);
    /// The NF in `slot` will not be started again (it was removed, or
    /// its restart policy gave up): drop whatever is kept for it.
    fn release(&mut self, slot: u32);
    /// The next NF started here will most likely be like `like` (its
    /// slot, recipe and sandbox, with another name): keep something ready
    /// for it, so that start does not wait for all of its set-up (a host
    /// with nothing to keep ignores it).
    fn keep_spare(&mut self, like: SpawnRequest);
    /// Appends what happened since the last call, without blocking.
    fn poll(&mut self, events: &mut Vec<HostEvent>);
    /// Sleeps until something may have happened or `timeout_ms` passed.
    fn wait(&mut self, timeout_ms: i32);
    /// Kills every instance, waits until all are gone and stops the host;
    /// appends their exits.
    fn shutdown(&mut self, events: &mut Vec<HostEvent>);
    /// Times the host died and was started again.
    fn restarts(&self) -> u32;
}
