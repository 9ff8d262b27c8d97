//! The platform worker: polls input ports and NF transmit rings, steers
//! packets hop by hop, runs inline NFs, supervises process NFs, ages
//! flows, and takes commands from the control thread between passes.
//!
//! One pass of the loop:
//!
//! 1. **Commands.** If the control thread posted one (one relaxed load
//!    when none did): prepare a change (start its new process NFs, which
//!    get no packets yet), commit it (swap in the new plan between two
//!    passes; see [`command`]), abort it, report, or stop.
//! 2. **Ingress.** Each input port is asked for at most as many packets as
//!    the first queue of its chains can take (lossless backpressure: a
//!    generator slows down instead of overrunning a ring). Each packet gets
//!    its flow (5-tuple lookup, symmetric, so replies share the entry) and
//!    its chain, then goes to hop 0 of the chain's route.
//! 3. **NF output.** Each process NF's transmit ring is drained, again only
//!    as far as its next queue has room. Every returned handle is checked
//!    against the ownership table and every metadata field and verdict is
//!    validated before it steers anything.
//! 4. **Steering.** Packets are grouped by destination (NF, port or drop
//!    reason) preserving order, and each group is delivered as a batch:
//!    inline NFs run right here (a panic in one fails that NF only),
//!    process NFs get a ring enqueue and a wake-up only if asleep, ports
//!    transmit, drops are counted.
//! 5. **Maintenance** (every millisecond): host events (NF spawned, NF
//!    exited → reclaim its buffers and restart per policy), fresh
//!    instances of crashed inline NFs, flow ageing (ending flows send an
//!    end marker down their route).
//!
//! With no work the worker spins briefly, yields, then sleeps on its wake
//! word; NF processes and the control thread wake it. A sleeping process
//! NF is woken when packets reach it, at once or, with adaptive wake-up
//! batching (`settings.wakeup`, [`crate::wakeup`]), once enough wait or the
//! first has waited long enough.
//!
//! This module holds the loop itself and core sharing; `command` applies
//! changes, `steering` moves packets, `classify` finds a frame's flow
//! (`no_chain` remembers flows no chain takes), `inline` calls inline NFs
//! and `inline_crash` handles their panics, `supervise` runs process NFs'
//! lives, `maintain` is the millisecond maintenance, `markers` carries
//! flow ends down routes, `derive` works out what a new plan means for
//! this worker and `finish` drains and stops.

use std::rc::Rc;
use std::sync::Arc;

use sluice_mem::{Arena, BufferPool, HandleBatch, PoolCache, MAX_BATCH};
use sluice_spec::RestartPolicy;

use crate::drops::Drops;
use crate::flow_table::FlowTable;
use crate::host::NfHost;
use crate::latency::Histogram;
use crate::logbook::LogBook;
use crate::nf_rt::{Exec, NfRt};
use crate::plan::{Hop, Plan};
use crate::ports::PortRt;
use crate::replicas::Pins;
use crate::route::Dest;
use crate::sched::{Member, SchedPolicy, Scheduler};
use crate::stall::StallMeter;
use crate::wakeup::{IdlePoll, WakeGate, WakePolicy};

mod bells;
mod classify;
pub mod command;
mod derive;
mod entry;
mod failure;
mod finish;
mod ingress;
mod inline;
mod inline_crash;
pub mod mailbox;
mod maintain;
mod markers;
mod no_chain;
mod pause;
mod police;
mod reconfig;
mod replica;
mod report;
mod retire;
mod room_floor;
mod state_io;
mod steering;
mod supervise;
pub mod tap;
mod waiting;

pub use mailbox::{
    Change, Command, Instance, Mailbox, NewExec, NewNf, Reconfigure, Retired as RetiredTotals,
};

const MS: u64 = 1_000_000;

/// Longest a busy worker keeps its core while NFs sharing it hold its
/// packets. Measured on the 3-NF process chain with two workers (medians
/// of 3, `docs/benchmarks.md`): at 3 Mpps offered, p99.9 is 190 µs with
/// 10 µs, 259 µs with 50 µs, 6.7 ms with 200 µs and 5 ms without a bound;
/// the maximum rate is 7.7, 9.5, 9.4 and 10.8 Mpps (each turn costs a few
/// context switches).
const NF_TURN_AFTER_NS: u64 = 50_000;

/// Worker tuning.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Which worker this is (its wake word; 0 when there is one).
    pub index: u32,
    /// Its process NFs run on its own core (several workers): with nothing
    /// to do it yields at once, as spinning only delays the NF it waits for.
    pub nfs_share_core: bool,
    /// Packets per batch.
    pub batch: usize,
    /// Restart policy for process NFs.
    pub restart: RestartPolicy,
    /// How long to wait for in-flight packets at shutdown.
    pub drain_timeout_ns: u64,
    /// How process NFs sharing a core are scheduled.
    pub sched: SchedPolicy,
    /// What happens at a chain's entry when it is congested.
    pub entry: crate::backpressure::EntryPolicy,
    /// The NF types, to build a fresh instance of an inline NF whose code
    /// panicked (`inline_crash.rs`).
    pub registry: &'static [sluice_nf::NfType],
}

/// Routing facts derived from the plan and which NFs run as processes,
/// recomputed whenever either changes.
#[derive(Default)]
pub(crate) struct Derived {
    /// Per chain id: the first process NFs on its route (the queue ingress
    /// feeds: one NF, or every replica of a set).
    pub chain_queue: Vec<Vec<u16>>,
    /// Per NF id: process NFs that directly follow it on some route.
    pub nf_next_queues: Vec<Vec<u16>>,
    /// Ids of live process NFs (the ones polled each pass).
    pub process_ids: Vec<u16>,
    /// Ids of live inline NFs with a timer.
    pub ticking: Vec<u16>,
    /// Ids of input ports.
    pub input_ports: Vec<u16>,
    /// Receive descriptors of NIC input ports, and whether an idle worker
    /// may sleep on them (only when no process NF could wake it instead).
    pub nic_fds: Vec<std::os::fd::RawFd>,
    pub sleep_on_nics: bool,
    /// The process NFs as the scheduler sees them (as `process_ids`
    /// lists them).
    pub members: Vec<Member>,
}

/// The worker.
pub struct Worker<'a> {
    pub(crate) arena: &'a Arena,
    pub(crate) pool: &'a BufferPool,
    pub(crate) cache: PoolCache<'a>,
    /// The plan it runs: the runtime's own (an `Arc` it shares, so a
    /// change costs no copy of a plan of thousands of NFs), behind an `Rc`
    /// the packet path clones per batch without an atomic (hence the
    /// second allocation clippy warns of: one per change, not per batch).
    #[allow(clippy::redundant_allocation)]
    pub(crate) plan: Rc<Arc<Plan>>,
    /// Live NF instances by NF id.
    pub(crate) nfs: Vec<Option<NfRt<'a>>>,
    /// Live ports by port id.
    pub(crate) ports: Vec<Option<PortRt>>,
    pub(crate) flows: FlowTable,
    /// `shortest_queue` replica choices by flow id.
    pins: Pins,
    /// `per_flow` sets' members by flow.
    pub(crate) exclusive: crate::exclusive::Exclusive,
    /// `per_flow` members their last flow left, until their reset is
    /// delivered.
    idle_members: Vec<crate::exclusive::Idle>,
    /// Pool members being forked afresh (`reset: refork`): back in their
    /// pool once the new instance has been asked for.
    recycling: Vec<crate::exclusive::Idle>,
    /// Packets waiting for a pool instance (`fallback: wait`).
    waiting: waiting::Waiting,
    /// Flows kept on a rollout's held routes.
    pub(crate) held: crate::held::Held,
    pub(crate) drops: Drops,
    pub(crate) host: Option<Box<dyn NfHost + 'a>>,
    pub(crate) cfg: WorkerConfig,
    pub(crate) derived: Derived,
    /// What removed NFs and ports counted (the accounting spans them).
    pub(crate) gone: RetiredTotals,
    /// Changes, reports and stop requests from the control thread.
    pub(crate) mail: Arc<Mailbox>,
    /// What NFs wrote and what happened to them, by NF name.
    pub(crate) logbook: Arc<LogBook>,
    pub(crate) cmd: command::State<'a>,
    // Boxed on purpose: a HandleBatch is 1 KiB, and groups move between
    // the spare list and the work stack by pointer, not by memcpy.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<HandleBatch>>,
    work: Vec<(Dest, Box<HandleBatch>)>,
    groups: Vec<(Dest, Box<HandleBatch>)>,
    events: Vec<u32>,
    ended: Vec<u32>,
    /// Scratch for [`steering`]'s classification passes (one batch).
    keyed: Vec<classify::Keyed>,
    idle: u32,
    /// Per route id: ingress-to-egress latency of its packets.
    pub(crate) route_latency: Vec<Histogram>,
    /// The process NFs a pass looks at (`bells`).
    pub(crate) bells: bells::Bells,
    /// Per NF id: its adaptive wake-up state.
    gates: Vec<WakeGate>,
    /// NFs whose gate holds packets back (their timers run in the loop).
    holding: Vec<u16>,
    /// Schedules this worker's process NFs on their cores.
    pub(crate) sched: Scheduler,
    /// An NF on this worker's core was woken: it runs only once the
    /// worker gives up the core, so the worker yields at the end of the pass.
    yield_due: bool,
    /// When this worker last gave its core to the NFs sharing it.
    last_yield_ns: u64,
    /// Gaps between the loop's passes (see [`crate::stall`]).
    stall_meter: StallMeter,
    /// Passes that came more than [`crate::stall::STALL_NS`] after the
    /// previous one without a sleep in between, and their total time.
    pub(crate) stalls: u64,
    pub(crate) stalled_ns: u64,
    /// Running total of time inline NFs spent on packets (work, not stalls).
    pub(crate) inline_busy_ns: u64,
    pub(crate) started_ns: u64,
    pub(crate) stopped_ns: u64,
    /// Ingress is off: the worker is stopping, or draining before a change.
    ingress_off: bool,
    /// The input port polled first on the next pass: it moves on by one
    /// each pass, so ports whose chains share a congested ring take turns
    /// at its free space (`ingress::poll_ingress`).
    ingress_first: usize,
    /// A lower bound on the room of each input port's first NFs' rings.
    room_floor: room_floor::RoomFloor,
    /// The process NF whose CPU time was read last (`police::sample_cpu`).
    cpu_cursor: usize,
    /// Backpressure at chains' entries (`entry`).
    entry: entry::EntryState,
    /// Id of the last config message sent to a process NF.
    next_msg: u32,
    /// Flows no chain takes under the current plan (`no_chain.rs`).
    no_chain: no_chain::NoChain,
    /// Inline NFs whose code panicked, waiting for a fresh instance.
    inline_down: Vec<inline_crash::InlineDown>,
    /// Live captures (`sluice tcpdump`).
    pub(crate) taps: Vec<tap::TapSpec>,
    /// Wall clock minus monotonic clock, ns (capture timestamps).
    realtime_offset_ns: u64,
}

impl<'a> Worker<'a> {
    /// A worker with no ports and no NFs yet (changes bring them).
    pub fn new(
        arena: &'a Arena,
        pool: &'a BufferPool,
        flows: FlowTable,
        host: Option<Box<dyn NfHost + 'a>>,
        mail: Arc<Mailbox>,
        logbook: Arc<LogBook>,
        cfg: WorkerConfig,
    ) -> Self {
        let refill = (cfg.batch * 2).max(64);
        let sched = Scheduler::new(cfg.sched);
        Worker {
            arena,
            pool,
            cache: PoolCache::new(pool, refill),
            plan: Rc::new(Arc::new(Plan::default())),
            nfs: Vec::new(),
            ports: Vec::new(),
            flows,
            pins: Pins::default(),
            exclusive: Default::default(),
            idle_members: Vec::new(),
            recycling: Vec::new(),
            waiting: Default::default(),
            held: Default::default(),
            drops: Drops::default(),
            host,
            cfg,
            derived: Derived::default(),
            gone: RetiredTotals::default(),
            mail,
            logbook,
            cmd: command::State::default(),
            spare: (0..64).map(|_| Box::new(HandleBatch::new())).collect(),
            work: Vec::with_capacity(64),
            groups: Vec::with_capacity(16),
            events: Vec::with_capacity(MAX_BATCH),
            ended: Vec::with_capacity(1024),
            keyed: Vec::with_capacity(sluice_mem::MAX_BATCH),
            idle: 0,
            route_latency: Vec::new(),
            bells: Default::default(),
            gates: Vec::new(),
            holding: Vec::new(),
            sched,
            yield_due: false,
            last_yield_ns: 0,
            stall_meter: StallMeter::default(),
            stalls: 0,
            stalled_ns: 0,
            inline_busy_ns: 0,
            started_ns: sluice_sys::monotonic_ns(),
            stopped_ns: 0,
            ingress_off: false,
            ingress_first: 0,
            room_floor: room_floor::RoomFloor::default(),
            cpu_cursor: 0,
            entry: Default::default(),
            next_msg: 0,
            no_chain: Default::default(),
            inline_down: Vec::new(),
            taps: Vec::new(),
            realtime_offset_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
                .saturating_sub(sluice_sys::monotonic_ns()),
        }
    }

    pub(crate) fn take_batch(&mut self) -> Box<HandleBatch> {
        self.spare.pop().unwrap_or_default()
    }

    pub(crate) fn put_batch(&mut self, b: Box<HandleBatch>) {
        debug_assert!(b.is_empty());
        self.spare.push(b);
    }

    /// NF `id`, if it is live.
    #[inline]
    pub(crate) fn nf_mut(&mut self, id: u16) -> Option<&mut NfRt<'a>> {
        self.nfs.get_mut(id as usize)?.as_mut()
    }

    // ---------------------------------------------------------- main loop

    /// Whether every input port is exhausted (a foreground run then stops).
    pub(crate) fn inputs_done(&self, now: u64) -> bool {
        !self.derived.input_ports.is_empty()
            && self.derived.input_ports.iter().all(|&p| {
                self.ports[p as usize]
                    .as_ref()
                    .is_none_or(|p| p.input_done(now))
            })
    }

    /// Packets process NFs hold (queued to them, inside, queued back).
    pub(crate) fn in_flight(&self) -> u32 {
        self.derived
            .process_ids
            .iter()
            .filter_map(|&i| self.nfs[i as usize].as_ref()?.process_ref())
            .filter(|p| p.phase.alive() || matches!(p.phase, crate::nf_rt::Phase::Down { .. }))
            .map(|p| p.link.in_flight())
            .sum::<u32>()
            + self.cmd.retiring_in_flight()
            + self.waiting.len() as u32
    }

    /// Serves until a stop command has been carried out.
    pub fn serve(&mut self) {
        let mut next_maint = sluice_sys::monotonic_ns();
        loop {
            let now = sluice_sys::monotonic_ns();
            if let Some(gap) = self.stall_meter.poll(now, self.inline_busy_ns) {
                self.stalls += 1;
                self.stalled_ns += gap;
            }
            if (self.mail.has_mail() || self.cmd.busy()) && self.handle_commands(now) {
                return;
            }
            let mut done = 0;
            if !self.ingress_off {
                done += self.poll_ingress(now);
            }
            done += self.poll_nfs(now);
            if self.waiting.len() > 0 {
                self.serve_waiting(now);
            }
            if !self.holding.is_empty() {
                self.fire_wake_timers(now);
            }
            if now >= next_maint {
                self.maintain(now);
                next_maint = now + MS;
            }
            if done == 0 {
                self.idle(now, next_maint);
            } else {
                self.idle = 0;
                // A change in progress may wait on NFs placed on this
                // core before `nfs_share_core` knows of them.
                if self.cfg.nfs_share_core || self.cmd.busy() {
                    self.share_core(now);
                }
            }
        }
    }

    fn idle(&mut self, now: u64, next_timer: u64) {
        self.idle += 1;
        if self.cfg.nfs_share_core && self.idle < 128 {
            sluice_sys::yield_now();
            self.last_yield_ns = now;
            return;
        }
        // A pending change waits for NFs to start or to take a config,
        // and they may share this core: give it to them at once rather
        // than spin until the kernel preempts us (milliseconds later).
        if self.cmd.busy() {
            sluice_sys::yield_now();
            self.last_yield_ns = now;
            return;
        }
        // Held packets need their wake-up timer, which runs in this loop.
        if self.idle < 64 || !self.holding.is_empty() {
            std::hint::spin_loop();
            return;
        }
        if self.idle < 128 {
            sluice_sys::yield_now();
            return;
        }
        let wake = self.arena.worker_wake(self.cfg.index);
        wake.prepare_sleep();
        if self.mail.has_mail() || self.nf_output_pending() {
            wake.cancel_sleep();
            return;
        }
        if self.derived.sleep_on_nics {
            // Only NICs (or the control thread, which also writes to the
            // wake word but cannot interrupt a ppoll: hence the 1 ms bound)
            // can bring work: sleep until a frame arrives.
            wake.cancel_sleep();
            let ns = next_timer.saturating_sub(now).clamp(20_000, MS);
            sluice_nic::wait_readable(&self.derived.nic_fds, std::time::Duration::from_nanos(ns));
            self.stall_meter.slept();
            return;
        }
        // A rate-limited input may become due before the next timer.
        let limit = if self.derived.input_ports.is_empty() {
            MS
        } else {
            100_000
        };
        let ns = next_timer.saturating_sub(now).clamp(20_000, limit);
        wake.sleep(Some(std::time::Duration::from_nanos(ns)));
        self.stall_meter.slept();
    }

    /// Whether a process NF has handed packets back that wait for a poll
    /// (its doorbell rang, or the last pass left it work).
    fn nf_output_pending(&mut self) -> bool {
        self.bells.any(self.arena)
    }

    /// A busy worker gives its core to the NFs sharing it once it has woken
    /// one (the NF runs only when the worker yields) or has kept the core
    /// for `NF_TURN_AFTER_NS` while they hold its packets: otherwise they
    /// wait for the scheduler to preempt it, milliseconds later.
    fn share_core(&mut self, now: u64) {
        let due = std::mem::take(&mut self.yield_due)
            || (now.saturating_sub(self.last_yield_ns) >= NF_TURN_AFTER_NS
                && (self.cmd.busy() || self.in_flight() > 0));
        if due {
            sluice_sys::yield_now();
            self.last_yield_ns = now;
        }
    }
}
