//! The long-lived data plane: start it with platform settings, then
//! [`Runtime::apply`] specs any number of times, read
//! [`Runtime::report`] at any time, and [`Runtime::stop`] it.
//!
//! The runtime owns the arena, the buffer pool and one worker thread per
//! core share (each with its own NF host, ports, flow table and NF
//! instances). `apply` compiles the whole desired spec (an invalid spec
//! changes nothing), diffs it against the running plan, opens new ports
//! and starts new NF instances on every worker (all or nothing: if one
//! cannot start, every new instance is stopped and nothing else moved),
//! then commits the new plan on every worker between two passes (see
//! [`crate::worker::command`]). `sluice run` is this with one apply and a
//! stop; `sluice daemon` keeps it and applies what its API receives.

mod apply;
mod pause;
mod settings;
mod slots;
mod state;
mod workers;

pub use pause::{offer_port, port_can_move, withdraw_port, PortsPaused};
pub use state::StateFailure;

pub use settings::PlatformSettings;

use std::sync::atomic::AtomicU64;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::time::Duration;

use sluice_mem::{Arena, ArenaConfig, Backing, BufferPool};
use sluice_nf::NfType;
use sluice_ports::Shard;
use sluice_spec::{Isolation, Spec, SpecError, ValidSpec};

use crate::backpressure::EntryPolicy;
use crate::compile::{compile, compile_addition, compile_checked, Target};
use crate::diff::Diff;
use crate::host::SpawnRequest;
use crate::logbook::{LogBook, LogLine};
use crate::plan::Plan;
use crate::polling::LoopConfig;
use crate::ports::PortRt;
use crate::report::{RunReport, SlotReport};
use crate::report_merge::{CpuRead, ShardResult};
use crate::sched::SchedPolicy;
use crate::worker::mailbox::{Committed, Reply};
use crate::worker::tap::{Captured, TapFilter, TapPoint, TapSpec};
use crate::worker::{Change, Command, Instance, NewExec, NewNf, Reconfigure};
use slots::Slots;
use workers::WorkerHandle;

/// Why something did not start or apply.
#[derive(Debug)]
pub enum RunError {
    /// The spec is invalid (file, line, field): nothing changed.
    Spec(SpecError),
    /// A resource could not be set up: nothing changed.
    Setup(String),
    /// The data plane has failed (a worker stopped: see
    /// [`Runtime::failure`]): nothing changed, and nothing will until it
    /// is started again.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spec(e) => write!(f, "{e}"),
            RunError::Setup(m) => f.write_str(m),
            RunError::Failed(why) => write!(f, "the data plane has failed: {why}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<SpecError> for RunError {
    fn from(e: SpecError) -> Self {
        RunError::Spec(e)
    }
}

/// What an apply did.
#[derive(Debug, Clone, Default, serde::Serialize, utoipa::ToSchema)]
pub struct Applied {
    /// What changed.
    pub diff: Diff,
    /// Longest drain of ingress on any worker, µs (0 when none was needed).
    pub quiesce_us: u64,
    /// A drain timed out (see `nf_removed` drops).
    pub quiesce_timed_out: bool,
    /// NFs that did not take their new config live, and why.
    pub reconfigure_failed: Vec<String>,
    /// Time from the call to the commit on every worker, µs.
    pub took_us: u64,
    /// Of it: compiling and diffing the spec, µs.
    pub compile_us: u64,
    /// Opening ports, building NFs and starting new process NFs on every
    /// worker, µs.
    pub prepare_us: u64,
    /// Installing the change on every worker (with a drain, and live
    /// config changes answered), µs.
    pub commit_us: u64,
}

/// The running data plane.
pub struct Runtime {
    settings: PlatformSettings,
    registry: &'static [NfType],
    arena: Arc<Arena>,
    pool: Arc<BufferPool>,
    workers: Vec<WorkerHandle>,
    plan: Arc<Plan>,
    /// Per NF id: its slot on each worker.
    nf_slots: Vec<Option<Vec<u32>>>,
    /// Per worker, per trust domain: its free slots.
    slots: Vec<Vec<Slots>>,
    /// Per worker: the slot its template was last asked to keep a spare
    /// for (`host::spare`); the next process NF there takes it if free.
    spares: Vec<Option<u32>>,
    placement: sluice_sys::Placement,
    source: String,
    logbook: Arc<LogBook>,
    next_tap: u64,
    /// The list lengths of the spec `plan` was compiled from (`None`
    /// after the plan of nothing): an addition to a spec of these lengths
    /// is compiled alone ([`crate::compile::compile_addition`]).
    compiled_from: Option<sluice_spec::Grown>,
}

/// A running capture (see [`Runtime::tap`]).
pub struct Capture {
    /// Pass to [`Runtime::untap`].
    pub id: u64,
    /// The copies.
    pub packets: std::sync::mpsc::Receiver<Captured>,
    /// Copies still to make (`u64::MAX`: no limit).
    pub remaining: Arc<AtomicU64>,
    /// Copies dropped because the reader was too slow.
    pub lost: Arc<AtomicU64>,
}

impl Runtime {
    /// Maps the arena and starts the workers (no ports, no NFs yet).
    pub fn start(
        settings: PlatformSettings,
        registry: &'static [NfType],
    ) -> Result<Runtime, RunError> {
        settings.check().map_err(RunError::Setup)?;
        // Before anything else: NF templates get this calibration.
        sluice_sys::calibrate_cycles();
        let workers = u32::from(settings.workers.max(1));
        let arena = Arena::create(ArenaConfig {
            buffers: settings.buffers,
            ring_size: settings.ring_size,
            nf_slots: settings.max_nfs.max(1) * workers,
            workers,
            hugepages: settings.hugepages,
            large_buffers: settings.large_buffers,
            domain_buffers: settings.domain_buffers(),
        })
        .map_err(|e| RunError::Setup(e.to_string()))?;
        if let Backing::NormalPagesFallback(why) = arena.backing() {
            tracing::warn!("{why}");
        }
        let arena = Arc::new(arena);
        let pool = Arc::new(BufferPool::for_arena(&arena));
        let placement = sluice_sys::Placement::current();
        let mut rt = Runtime {
            // Every domain has `max_nfs` slots per worker, in its own
            // region of the arena (`Arena::domain_slots`).
            slots: (0..workers)
                .map(|w| {
                    (0..arena.domains().len())
                        .map(|d| {
                            let first = arena.domain_slots(d).start;
                            Slots::new(first + w * settings.max_nfs, settings.max_nfs)
                        })
                        .collect()
                })
                .collect(),
            settings,
            registry,
            arena,
            pool,
            workers: Vec::new(),
            plan: Arc::new(Plan::default()),
            nf_slots: Vec::new(),
            spares: vec![None; workers as usize],
            placement,
            source: String::new(),
            logbook: Arc::new(LogBook::default()),
            next_tap: 0,
            compiled_from: None,
        };
        for w in 0..workers {
            match rt.start_worker(w) {
                Ok(h) => rt.workers.push(h),
                Err(e) => {
                    rt.stop_workers();
                    return Err(RunError::Setup(e));
                }
            }
        }
        Ok(rt)
    }

    /// The platform settings it runs with.
    pub fn settings(&self) -> &PlatformSettings {
        &self.settings
    }

    /// The running plan.
    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// The shared arena.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    fn collect(&self, stop: bool, cpu: CpuRead<'_>) -> Vec<ShardResult> {
        let mut rxs = Vec::new();
        for w in 0..self.workers.len() {
            let (tx, rx) = sync_channel(1);
            self.post(
                w,
                if stop {
                    Command::Stop(tx)
                } else {
                    Command::Report(tx)
                },
            );
            rxs.push(rx);
        }
        let wait = if stop {
            Duration::from_secs(60)
        } else {
            Duration::from_secs(5)
        };
        rxs.into_iter()
            .filter_map(|rx| rx.recv_timeout(wait).ok())
            .map(|mut part: ShardResult| {
                part.finish(cpu);
                part
            })
            .collect()
    }

    /// Everything counted so far, with the same keys as the final report.
    /// While the platform runs, `unaccounted` is the packets inside it at
    /// that moment and `leaked_buffers` is 0 (only a stopped platform can
    /// have leaked).
    pub fn report(&self) -> RunReport {
        self.report_reading(CpuRead::All)
    }

    /// [`Runtime::report`], reading from the kernel the CPU time of only
    /// the NFs `cpu` names (the others' as the worker last read it).
    pub fn report_reading(&self, cpu: CpuRead<'_>) -> RunReport {
        let parts = self.collect(false, cpu);
        let mut r = self.merge(parts);
        r.leaked_buffers = 0;
        r.nf_slots = self.slot_report();
        r
    }

    /// Where the arena's NF slots are (see [`slots::report`]).
    fn slot_report(&self) -> SlotReport {
        let freed_not_taken = self.workers.iter().map(|h| h.mail.freed_count()).sum();
        let in_use = self
            .nf_slots
            .iter()
            .flatten()
            .flatten()
            .filter(|&&s| s != u32::MAX)
            .count();
        let all: Vec<&Slots> = self.slots.iter().flatten().collect();
        slots::report(&all, freed_not_taken, in_use)
    }

    /// Gives worker `w`'s `slot` back to its domain.
    fn free_slot(&mut self, w: usize, slot: u32) {
        let d = self.arena.slot_domain(slot).unwrap_or(usize::MAX);
        if let Some(s) = self.slots.get_mut(w).and_then(|s| s.get_mut(d)) {
            s.free(slot);
        }
    }

    fn merge(&self, parts: Vec<ShardResult>) -> RunReport {
        let buffers =
            crate::report::BufferReport::of(&self.pool, |d| self.plan.domain_name(d).to_string());
        let mut r = RunReport::merge_shards(parts, buffers, &self.arena)
            .unwrap_or_else(|| RunReport::empty(&self.arena));
        r.spec = self.source.clone();
        // A failed worker answers nothing: its part is missing from the
        // figures, and the report says so.
        r.failed_workers = self.failures();
        r
    }

    /// Every NF instance on every worker (`sluice ps`).
    pub fn instances(&self) -> Vec<Instance> {
        let mut rxs = Vec::new();
        for w in 0..self.workers.len() {
            let (tx, rx) = sync_channel(1);
            self.post(w, Command::Instances(tx));
            rxs.push(rx);
        }
        rxs.into_iter()
            .filter_map(|rx| rx.recv_timeout(Duration::from_secs(5)).ok())
            .flatten()
            .collect()
    }

    /// Starts copying the packets that pass `target` (a port: both what it
    /// receives and what it sends; an NF: its input, or with `output` its
    /// output) to the returned receiver, at most `count` of them, `snaplen`
    /// bytes each, those `filter` accepts. Copies the reader is too slow
    /// for are dropped and counted in the returned counter, never packets.
    pub fn tap(
        &mut self,
        target: &str,
        output: bool,
        snaplen: u32,
        count: Option<u64>,
        filter: Option<TapFilter>,
    ) -> Result<Capture, RunError> {
        let plan = &self.plan;
        let points: Vec<TapPoint> =
            if let Some((id, _)) = plan.ports_in_order().find(|(_, p)| p.name == target) {
                vec![TapPoint::PortRx(id), TapPoint::PortTx(id)]
            } else if let Some((id, _)) = plan.nfs_in_order().find(|(_, n)| n.name == target) {
                vec![if output {
                    TapPoint::NfOut(id)
                } else {
                    TapPoint::NfIn(id)
                }]
            } else {
                return Err(RunError::Setup(format!("no port or NF named {target}")));
            };
        self.next_tap += 1;
        let id = self.next_tap;
        let (tx, rx) = sync_channel(8192);
        let remaining = Arc::new(AtomicU64::new(count.unwrap_or(u64::MAX)));
        let lost = Arc::new(AtomicU64::new(0));
        for w in 0..self.workers.len() {
            for &point in &points {
                self.post(
                    w,
                    Command::Tap(TapSpec {
                        id,
                        point,
                        snaplen: snaplen.max(1),
                        filter: filter.clone(),
                        remaining: remaining.clone(),
                        lost: lost.clone(),
                        tx: tx.clone(),
                    }),
                );
            }
        }
        Ok(Capture {
            id,
            packets: rx,
            remaining,
            lost,
        })
    }

    /// Stops capture `id`.
    pub fn untap(&self, id: u64) {
        for w in 0..self.workers.len() {
            self.post(w, Command::Untap(id));
        }
    }

    /// NF `nf`'s log lines after sequence number `after` (0: all kept).
    pub fn logs(&self, nf: &str, after: u64) -> Vec<LogLine> {
        self.logbook.since(nf, after)
    }

    /// Whether every worker's input ports are exhausted.
    pub fn inputs_done(&self) -> bool {
        self.workers.iter().all(|w| {
            w.mail
                .inputs_done
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// Flows the workers keep on a rollout's held routes (see
    /// [`crate::held`]): the draining version retires when this is 0.
    /// Current as of each worker's last install or flow release.
    pub fn held_flows(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| u64::from(w.mail.held_flows.load(std::sync::atomic::Ordering::Relaxed)))
            .sum()
    }

    /// Drains, stops every NF and worker, audits the buffers and returns
    /// the final report.
    pub fn stop(mut self) -> RunReport {
        let parts = self.collect(true, CpuRead::All);
        self.stop_workers();
        self.merge(parts)
    }
}
