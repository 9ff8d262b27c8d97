//! What the control thread and a worker exchange: commands with their
//! reply channels, the change an apply brings, and the mailbox the worker
//! checks once per pass.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sluice_nf::NetworkFunction;
use sluice_spec::{Isolation, RestartPolicy};

use super::MS;
use crate::host::SpawnRequest;
use crate::plan::Plan;
use crate::ports::{PortRt, PortStats};
use crate::report_merge::ShardResult;

/// How long a commit waits for NFs to drain before it proceeds anyway.
pub const QUIESCE_TIMEOUT_NS: u64 = 200 * MS;

/// A reply channel.
pub type Reply<T> = SyncSender<T>;

/// A new NF instance for a worker, built by the control thread.
pub struct NewNf {
    /// Its NF id (a replaced NF keeps its id).
    pub id: u16,
    /// Its arena slot on this worker.
    pub slot: u32,
    /// Name.
    pub name: String,
    /// Type name.
    pub type_name: &'static str,
    /// Inline or process.
    pub isolation: Isolation,
    /// Names of its drop reasons.
    pub drop_names: Vec<String>,
    /// Spares it keeps for allocation (process NFs).
    pub alloc_reserve: u32,
    /// How it runs.
    pub exec: NewExec,
}

/// How a new instance runs.
pub enum NewExec {
    /// Built already; runs in the worker.
    Inline(Box<dyn NetworkFunction>),
    /// Started by the worker's host.
    Process(Box<SpawnRequest>),
}

/// A running NF's new config, taken live (`NetworkFunction::reconfigure`).
pub enum Reconfigure {
    /// An inline NF: the fresh instance it takes its config from.
    Inline(u16, Box<dyn NetworkFunction>),
    /// A process NF: the recipe (sent to it on its ring, and used for its
    /// restarts from now on).
    Process(u16, Box<crate::recipe::NfRecipe>),
}

/// One apply, as one worker sees it.
pub struct Change {
    /// The plan to run from the commit on.
    pub plan: Arc<Plan>,
    /// New instances (added NFs, and replacements under the same id).
    pub add_nfs: Vec<NewNf>,
    /// NFs removed without replacement.
    pub remove_nfs: Vec<u16>,
    /// NFs that take a new config live.
    pub reconfigure: Vec<Reconfigure>,
    /// New ports (added, or replacing the port of the same id).
    pub add_ports: Vec<(u16, PortRt)>,
    /// Ports removed without replacement.
    pub remove_ports: Vec<u16>,
    /// Drain before the swap (something packets may be inside goes away).
    pub quiesce: bool,
    /// When the change only adds ([`crate::diff::Diff::only_adds`]): the
    /// chains it adds. The worker then works out only what the added
    /// objects mean (`worker/derive.rs`).
    pub added_chains: Option<Vec<u16>>,
    /// What the worker's next NF will most likely be, when this change
    /// started process NFs from shells (the last one's request, in the
    /// slot the next will take): its host keeps a spare for it from the
    /// commit on (`NfHost::keep_spare`).
    pub spare: Option<SpawnRequest>,
    /// Restart policy from now on.
    pub restart: RestartPolicy,
    /// The scheduling policy from now on.
    pub sched: crate::sched::SchedPolicy,
    /// Backpressure at chains' entries from now on.
    pub entry: crate::backpressure::EntryPolicy,
}

/// What a commit did.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    /// How long ingress was off for the drain, µs (0 without a drain).
    pub quiesce_us: u64,
    /// The drain timed out (removed NFs' leftovers were counted).
    pub quiesce_timed_out: bool,
    /// NFs that could not take their new config live, and why (they were
    /// replaced by a fresh instance, or keep the old config).
    pub reconfigure_failed: Vec<String>,
}

/// A command.
pub enum Command {
    /// Take a change and start its new process NFs.
    Prepare(Box<Change>, Reply<Result<(), String>>),
    /// Install the prepared change.
    Commit(Reply<Committed>),
    /// Drop the prepared change.
    Abort(Reply<()>),
    /// Everything counted so far.
    Report(Reply<ShardResult>),
    /// Drain, stop every NF, and return the final report.
    Stop(Reply<ShardResult>),
    /// The NF instances this worker runs.
    Instances(Reply<Vec<Instance>>),
    /// Start copying packets (`sluice tcpdump`).
    Tap(super::tap::TapSpec),
    /// Stop a capture.
    Untap(u64),
    /// Export the state of these NFs (`sluice checkpoint`).
    Checkpoint(Vec<u16>, Reply<Result<Vec<StatePart>, String>>),
    /// Restore these states (NF id, state) into this worker's NFs.
    Restore(Vec<(u16, Vec<u8>)>, Reply<Result<(), RestoreError>>),
    /// Stop (`true`) or resume reading these ports (`sluice migrate`).
    Pause(Vec<u16>, bool, Reply<Paused>),
}

/// What a pause did on one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paused {
    /// The paused ports' descriptors another daemon may take over, by
    /// port id (ports that cannot move are absent).
    pub fds: Vec<(u16, Vec<std::os::fd::RawFd>)>,
    /// How long the packets already read took to leave the NFs, µs.
    pub drain_us: u64,
    /// They all left (false: the drain timed out; NFs still hold some).
    pub drained: bool,
}

/// Why a restore did not happen on this worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreError {
    /// An instance refused its part (the state is not one it takes); it
    /// is untouched.
    Refused(String),
    /// An instance could not be reached, or did not answer in time.
    Failed(String),
}

/// One NF instance's exported state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePart {
    /// The NF's id in the plan.
    pub nf: u16,
    /// The instance's name.
    pub instance: String,
    /// Its state, as its type wrote it.
    pub state: Vec<u8>,
}

/// One NF instance, as `sluice ps` lists it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Instance {
    /// NF name.
    pub nf: String,
    /// NF type.
    #[serde(rename = "type")]
    pub nf_type: String,
    /// `inline` or `process`.
    pub isolation: String,
    /// The worker it belongs to.
    pub worker: u32,
    /// Its arena slot.
    pub slot: u32,
    /// Its process (0 for inline NFs, and while none runs).
    pub pid: i32,
    /// The CPU it is pinned to (process NFs).
    pub cpu: Option<u32>,
    /// `running`, `starting`, `down`, `stopping`, `stopped`, `failed`;
    /// inline NFs are always `running`.
    pub state: String,
    /// Restarts after crashes.
    pub restarts: u32,
    /// Packets processed.
    pub packets: u64,
    /// CPU time in its batch handler, ns.
    pub cpu_ns: u64,
    /// Entries waiting in its receive ring (process NFs).
    pub queued: u32,
}

/// The control thread's way in: a queue, a flag the worker checks each
/// pass (one relaxed load), and its wake word's worker index.
///
/// A worker that has failed ([`Mailbox::fail`]) reads no more mail: each
/// command posted after it, or waiting when it failed, is dropped at once,
/// which closes its reply channel, so whoever waits for the answer learns
/// that none will come instead of waiting out its timeout.
pub struct Mailbox {
    tx: Mutex<std::sync::mpsc::Sender<Command>>,
    /// Why the worker stopped serving (set once, under `tx`'s lock, so a
    /// post either lands before it, and is dropped by `fail`'s drain, or
    /// sees it and is dropped by `post`).
    failure: std::sync::OnceLock<String>,
    rx: Mutex<Receiver<Command>>,
    flag: AtomicBool,
    /// Slots of instances that have exited after removal, for the control
    /// thread to reuse.
    freed: Mutex<Vec<u32>>,
    /// Every input port of this worker is exhausted.
    pub inputs_done: AtomicBool,
    /// Flows this worker keeps on a rollout's held routes
    /// ([`crate::held::Held::count`]; relaxed: a figure to poll).
    pub held_flows: AtomicU32,
}

impl Default for Mailbox {
    fn default() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        Mailbox {
            tx: Mutex::new(tx),
            rx: Mutex::new(rx),
            failure: std::sync::OnceLock::new(),
            flag: AtomicBool::new(false),
            freed: Mutex::new(Vec::new()),
            inputs_done: AtomicBool::new(false),
            held_flows: AtomicU32::new(0),
        }
    }
}

impl Mailbox {
    /// Posts a command (the caller then wakes the worker).
    pub fn post(&self, c: Command) {
        if let Ok(tx) = self.tx.lock() {
            if self.failure.get().is_none() {
                let _ = tx.send(c);
            }
        }
        self.flag.store(true, Ordering::Release);
    }

    /// Records that the worker stopped serving, and why, then drops every
    /// command waiting (their askers' reply channels close). The first
    /// reason stays.
    pub(crate) fn fail(&self, why: String) {
        {
            let _tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
            let _ = self.failure.set(why);
        }
        drop(self.take());
    }

    /// Why the worker stopped serving, if it has.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Whether a command waits.
    #[inline]
    pub fn has_mail(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    pub(crate) fn take(&self) -> Vec<Command> {
        self.flag.store(false, Ordering::Relaxed);
        let Ok(rx) = self.rx.lock() else {
            return Vec::new();
        };
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    /// Slots freed since the last call.
    pub fn take_freed(&self) -> Vec<u32> {
        self.freed
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    }

    /// Slots freed and not yet taken.
    pub fn freed_count(&self) -> usize {
        self.freed.lock().map_or(0, |f| f.len())
    }

    pub(crate) fn free_slot(&self, slot: u32) {
        if let Ok(mut f) = self.freed.lock() {
            f.push(slot);
        }
    }
}

/// What removed NFs and ports counted; the run's accounting spans them.
#[derive(Debug, Clone, Default)]
pub struct Retired {
    /// Drops under removed NFs' own reasons, by `<nf>:<reason>`.
    pub nf_drops: BTreeMap<String, u64>,
    /// Packets removed NFs created.
    pub originated: u64,
    /// Counters of removed ports.
    pub ports: PortStats,
    /// Ring entries removed NFs returned that they did not own.
    pub invalid_handles: u64,
}
