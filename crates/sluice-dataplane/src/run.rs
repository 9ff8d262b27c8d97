//! Starting, running and stopping a spec, all or nothing: if any part
//! fails to start, everything already started is torn down and the error
//! says what failed.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use sluice_mem::{Arena, ArenaConfig, Backing, BufferPool, NfLink};
use sluice_nf::NfType;
use sluice_ports::Shard;
use sluice_spec::{Isolation, Spec, SpecError};

use crate::flow_table::FlowTable;
use crate::nf_rt::{Exec, NfRt, Phase, ProcessNf, Retired};
use crate::plan::{has_process_nfs, Plan};
use crate::ports::PortRt;
use crate::report::RunReport;
use crate::template::{Template, TemplateInputs};
use crate::worker::{Worker, WorkerConfig};

/// How long a flow lingers after FIN/RST before its slot is recycled.
pub const TCP_CLOSE_TIMEOUT_NS: u64 = 1_000_000_000;

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Stop after this long (also bounds generators).
    pub duration: Option<Duration>,
    /// Print live rates every second.
    pub live: bool,
    /// Set to stop the run (SIGINT/SIGTERM handlers set it).
    pub stop: Arc<AtomicBool>,
    /// How long NF processes may take to start.
    pub start_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: None,
            live: false,
            stop: Arc::new(AtomicBool::new(false)),
            start_timeout: Duration::from_secs(10),
        }
    }
}

/// Why a run did not start.
#[derive(Debug)]
pub enum RunError {
    /// The spec is invalid (file, line, field).
    Spec(SpecError),
    /// A resource could not be set up.
    Setup(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Spec(e) => write!(f, "{e}"),
            RunError::Setup(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for RunError {}

impl From<SpecError> for RunError {
    fn from(e: SpecError) -> Self {
        RunError::Spec(e)
    }
}

/// Runs `spec` to completion: on the calling thread, or with
/// `settings.workers = N > 1` on N pinned worker threads that each run
/// their own share of the flows (see [`crate::shard`]).
///
/// Process NFs require the calling process to be single-threaded when
/// `run` starts (the NF template is forked first); the `sluice` binary is.
pub fn run(
    spec: &Spec,
    registry: &'static [NfType],
    opts: RunOptions,
) -> Result<RunReport, RunError> {
    let plan = Plan::build(spec, registry)?;
    // Before the template forks, so NF processes inherit the calibration.
    sluice_sys::calibrate_cycles();
    let settings = &spec.settings;
    let workers = u32::from(settings.workers.max(1));
    let arena = Arena::create(ArenaConfig {
        buffers: settings.buffers,
        ring_size: settings.ring_size,
        nf_slots: plan.nfs.len().max(1) as u32 * workers,
        workers,
        hugepages: settings.hugepages,
        large_buffers: crate::offload::large_buffers(&plan),
    })
    .map_err(|e| RunError::Setup(e.to_string()))?;
    if let Backing::NormalPagesFallback(why) = arena.backing() {
        eprintln!("sluice: {why}");
    }
    // Fork the templates (one per worker) before anything starts a thread.
    let mut templates = start_templates(spec, &plan, &arena, workers)?;
    if workers > 1 {
        return crate::shard::run_sharded(spec, &plan, &arena, templates, &opts);
    }
    let template = templates.pop().flatten();
    // After the fork, so the template (and NFs it forks) are not pinned to
    // the worker's core; each NF pins itself.
    let placement = sluice_sys::Placement::current();
    if let Err(e) = sluice_sys::pin_to_cpu(placement.worker_cpu()) {
        eprintln!(
            "sluice: cannot pin the worker to CPU {}: {e}",
            placement.worker_cpu()
        );
    }
    let teardown = |t: Option<Template>| {
        if let Some(t) = t {
            t.shutdown();
        }
    };
    let duration_ns = opts.duration.map(|d| d.as_nanos() as u64);
    let parts = open_ports(&plan, duration_ns, Shard::WHOLE)
        .and_then(|ports| Ok((ports, build_nfs(spec, &plan, &arena, 0)?)));
    let (ports, nfs) = match parts {
        Ok(p) => p,
        Err(e) => {
            teardown(template);
            return Err(e);
        }
    };
    let pool = BufferPool::for_arena(&arena);
    let mut worker = Worker::new(
        &arena,
        &pool,
        &plan,
        nfs,
        ports,
        flow_table(spec),
        template,
        worker_config(spec, &opts),
    );
    if let Err(e) = worker.start_nfs(opts.start_timeout.as_nanos() as u64) {
        worker.finish();
        return Err(RunError::Setup(e));
    }
    let deadline = duration_ns.map(|d| sluice_sys::monotonic_ns() + d);
    worker.run(&opts.stop, deadline);
    worker.finish();
    let report = RunReport::from_worker(spec.source.as_str(), &worker);
    drop(worker);
    Ok(report)
}

/// Forks one NF template per worker if the plan has process NFs (all or
/// none: on failure those already started are stopped).
fn start_templates(
    spec: &Spec,
    plan: &Plan,
    arena: &Arena,
    workers: u32,
) -> Result<Vec<Option<Template>>, RunError> {
    if !has_process_nfs(plan) {
        return Ok((0..workers).map(|_| None).collect());
    }
    let mut templates = Vec::new();
    for worker in 0..workers {
        let started = Template::start(TemplateInputs {
            arena,
            plan,
            spec,
            batch: spec.settings.batch as usize,
            worker,
            workers,
        });
        match started {
            Ok(t) => templates.push(Some(t)),
            Err(e) => {
                for t in templates.into_iter().flatten() {
                    t.shutdown();
                }
                return Err(RunError::Setup(format!(
                    "cannot start the NF template process: {e}"
                )));
            }
        }
    }
    Ok(templates)
}

/// Opens every port of the plan (generators send shard `shard` of their
/// flows).
pub(crate) fn open_ports(
    plan: &Plan,
    duration_ns: Option<u64>,
    shard: Shard,
) -> Result<Vec<PortRt>, RunError> {
    let mut ports = plan
        .ports
        .iter()
        .map(|p| {
            PortRt::open(
                &p.name,
                &p.kind,
                duration_ns,
                plan.flow_capacity as usize,
                shard,
            )
            .map_err(|e| RunError::Setup(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let offloads: Vec<bool> = ports.iter().map(|p| p.offloads()).collect();
    for (p, rx_tx) in ports
        .iter_mut()
        .zip(crate::offload::plan_ports(plan, &offloads))
    {
        p.set_offload_plan(rx_tx);
    }
    Ok(ports)
}

/// Builds the runtime state of every NF, using NF control slots
/// `slot_base..slot_base + nfs`: inline NFs are constructed here, process
/// NFs get their ring link (they are spawned later).
pub(crate) fn build_nfs<'a>(
    spec: &Spec,
    plan: &Plan,
    arena: &'a Arena,
    slot_base: u32,
) -> Result<Vec<NfRt<'a>>, RunError> {
    let mut nfs = Vec::new();
    for (i, n) in plan.nfs.iter().enumerate() {
        let slot = slot_base + i as u32;
        let control = arena.nf_control(slot);
        control.reset();
        let exec = match n.isolation {
            Isolation::Inline => Exec::Inline(plan.build_nf(spec, i, 0)?),
            Isolation::Process => Exec::Process(ProcessNf {
                link: NfLink::new(arena, slot),
                phase: Phase::Stopped,
                generation: 0,
                pid: 0,
                spawn_requested_ns: 0,
                pending_events: Default::default(),
            }),
        };
        let tick = match &exec {
            Exec::Inline(f) => f
                .tick_interval_ns()
                .map(|every| (every.max(1), sluice_sys::monotonic_ns() + every)),
            Exec::Process(_) => None,
        };
        nfs.push(NfRt {
            name: n.name.clone(),
            type_name: n.nf_type.name,
            isolation: n.isolation,
            control,
            exec,
            local_drops: vec![0; n.drop_reasons.len()],
            restarts: 0,
            last_exit: None,
            startup_us: Vec::new(),
            wakeups: 0,
            wakeups_by_timeout: 0,
            invalid_handles: 0,
            retired: Retired::default(),
            originated: 0,
            tick,
        });
    }
    Ok(nfs)
}

/// The flow table a worker starts with.
pub(crate) fn flow_table(spec: &Spec) -> FlowTable {
    let settings = &spec.settings;
    FlowTable::new(
        settings.flow_table.capacity,
        settings.flow_table.idle_timeout_ms * 1_000_000,
        TCP_CLOSE_TIMEOUT_NS,
    )
}

/// Worker tuning from the spec and the run options.
pub(crate) fn worker_config(spec: &Spec, opts: &RunOptions) -> WorkerConfig {
    WorkerConfig {
        index: 0,
        nfs_share_core: false,
        batch: spec.settings.batch as usize,
        restart: spec.settings.restart.clone(),
        live: opts.live,
        drain_timeout_ns: 2_000_000_000,
        wakeup: crate::wakeup::WakePolicy::from_settings(&spec.settings.wakeup),
    }
}
