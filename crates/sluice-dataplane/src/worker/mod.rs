//! The platform worker: polls input ports and NF transmit rings, steers
//! packets hop by hop, runs inline NFs, supervises process NFs, ages flows.
//!
//! One pass of the loop:
//!
//! 1. **Ingress.** Each input port is asked for at most as many packets as
//!    the first queue of its chains can take (lossless backpressure: a
//!    generator slows down instead of overrunning a ring). Each packet gets
//!    its flow (5-tuple lookup, symmetric, so replies share the entry) and
//!    its chain, then goes to hop 0.
//! 2. **NF output.** Each process NF's transmit ring is drained, again only
//!    as far as its next queue has room. Every returned handle is checked
//!    against the ownership table and every metadata field and verdict is
//!    validated before it steers anything.
//! 3. **Steering.** Packets are grouped by destination (NF, port or drop
//!    reason) preserving order, and each group is delivered as a batch:
//!    inline NFs run right here, process NFs get a ring enqueue and a
//!    wake-up only if asleep, ports transmit, drops are counted.
//! 4. **Maintenance** (every millisecond): template messages (NF spawned,
//!    NF exited → reclaim its buffers and restart per policy), flow ageing
//!    (ending flows send an end marker down their chain).
//!
//! With no work the worker spins briefly, yields, then sleeps on its wake
//! word; NF processes wake it when they return packets. A sleeping process
//! NF is woken when packets reach it, at once or, with adaptive wake-up
//! batching (`settings.wakeup`, [`crate::wakeup`]), once enough wait or the
//! first has waited long enough.
//!
//! This module holds the loop itself and core sharing; `steering` moves
//! packets, `classify` finds a frame's flow, `supervise` runs process
//! NFs' lives and `markers` carries flow ends down chains.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_mem::{Arena, BufferPool, HandleBatch, PoolCache, MAX_BATCH};
use sluice_nf::runtime::run_stop;
use sluice_nf::DropReason;
use sluice_spec::RestartPolicy;

use crate::drops::Drops;
use crate::flow_table::FlowTable;
use crate::nf_rt::{Exec, NfRt, Phase};
use crate::plan::{Hop, Plan};
use crate::ports::PortRt;
use crate::route::Dest;
use crate::stall::StallMeter;
use crate::template::Template;
use crate::wakeup::{WakeGate, WakePolicy};

mod classify;
mod markers;
mod steering;
mod supervise;

const MS: u64 = 1_000_000;

/// Longest a busy worker keeps its core while NFs sharing it hold its
/// packets. Measured on the 3-NF process chain with two workers (medians
/// of 3, `docs/benchmarks.md`): at 3 Mpps offered, p99.9 is 190 µs with
/// 10 µs, 259 µs with 50 µs, 6.7 ms with 200 µs and 5 ms without a bound;
/// the maximum rate is 7.7, 9.5, 9.4 and 10.8 Mpps (each turn costs a few
/// context switches).
const NF_TURN_AFTER_NS: u64 = 50_000;

/// Most `stop` calls for one NF at shutdown (each may emit a batch).
pub(crate) const STOP_CALLS_MAX: usize = 4096;

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
    /// Print live rates to stderr every second.
    pub live: bool,
    /// How long to wait for in-flight packets at shutdown.
    pub drain_timeout_ns: u64,
    /// When sleeping process NFs are woken.
    pub wakeup: WakePolicy,
}

/// The worker.
pub struct Worker<'a> {
    pub(crate) arena: &'a Arena,
    pub(crate) pool: &'a BufferPool,
    pub(crate) cache: PoolCache<'a>,
    pub(crate) plan: &'a Plan,
    pub(crate) nfs: Vec<NfRt<'a>>,
    pub(crate) ports: Vec<PortRt>,
    pub(crate) flows: FlowTable,
    pub(crate) drops: Drops,
    pub(crate) template: Option<Template>,
    cfg: WorkerConfig,
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
    /// Per chain: the first process NF on its path (the queue ingress feeds).
    chain_queue: Vec<Option<u16>>,
    /// Per NF: process NFs that directly follow it on some chain.
    nf_next_queues: Vec<Vec<u16>>,
    input_ports: Vec<u16>,
    /// Receive descriptors of NIC input ports, and whether an idle worker
    /// may sleep on them (only when no process NF could wake it instead).
    nic_fds: Vec<std::os::fd::RawFd>,
    sleep_on_nics: bool,
    idle: u32,
    /// Per NF: its adaptive wake-up state.
    gates: Vec<WakeGate>,
    /// NFs whose gate holds packets back (their timers run in the loop).
    holding: Vec<u16>,
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
    last_live: (u64, u64, u64),
}

impl<'a> Worker<'a> {
    /// Assembles a worker; NFs are built but process NFs not yet spawned.
    #[allow(clippy::too_many_arguments)] // each is a distinct, owned part of the worker
    pub fn new(
        arena: &'a Arena,
        pool: &'a BufferPool,
        plan: &'a Plan,
        nfs: Vec<NfRt<'a>>,
        ports: Vec<PortRt>,
        flows: FlowTable,
        template: Option<Template>,
        cfg: WorkerConfig,
    ) -> Self {
        let is_process = |i: u16| matches!(nfs[i as usize].exec, Exec::Process(_));
        let first_queue = |path: &[Hop]| -> Option<u16> {
            path.iter().find_map(|h| match h {
                Hop::Nf(i) if is_process(*i) => Some(*i),
                _ => None,
            })
        };
        let chain_queue = plan.chains.iter().map(|c| first_queue(&c.path)).collect();
        let mut nf_next_queues = vec![Vec::new(); plan.nfs.len()];
        for c in &plan.chains {
            for (pos, h) in c.path.iter().enumerate() {
                if let Hop::Nf(i) = h {
                    if let Some(q) = first_queue(&c.path[pos + 1..]) {
                        let v: &mut Vec<u16> = &mut nf_next_queues[*i as usize];
                        if !v.contains(&q) {
                            v.push(q);
                        }
                    }
                }
            }
        }
        let input_ports: Vec<u16> = (0..ports.len() as u16)
            .filter(|&p| ports[p as usize].is_input())
            .collect();
        let nic_fds: Vec<_> = ports.iter().filter_map(|p| p.rx_fd()).collect();
        let sleep_on_nics = !nic_fds.is_empty()
            && nic_fds.len() == input_ports.len()
            && nfs.iter().all(|n| matches!(n.exec, Exec::Inline(_)));
        let refill = (cfg.batch * 2).max(64);
        Worker {
            arena,
            pool,
            cache: PoolCache::new(pool, refill),
            plan,
            nfs,
            ports,
            flows,
            drops: Drops::default(),
            template,
            cfg,
            spare: (0..64).map(|_| Box::new(HandleBatch::new())).collect(),
            work: Vec::with_capacity(64),
            groups: Vec::with_capacity(16),
            events: Vec::with_capacity(MAX_BATCH),
            ended: Vec::with_capacity(1024),
            keyed: Vec::with_capacity(sluice_mem::MAX_BATCH),
            chain_queue,
            nf_next_queues,
            input_ports,
            nic_fds,
            sleep_on_nics,
            idle: 0,
            gates: vec![WakeGate::default(); plan.nfs.len()],
            holding: Vec::new(),
            yield_due: false,
            last_yield_ns: 0,
            stall_meter: StallMeter::default(),
            stalls: 0,
            stalled_ns: 0,
            inline_busy_ns: 0,
            started_ns: 0,
            stopped_ns: 0,
            last_live: (0, 0, 0),
        }
    }

    fn take_batch(&mut self) -> Box<HandleBatch> {
        self.spare.pop().unwrap_or_default()
    }

    fn put_batch(&mut self, b: Box<HandleBatch>) {
        debug_assert!(b.is_empty());
        self.spare.push(b);
    }

    // ---------------------------------------------------------- main loop

    fn inputs_done(&self, now: u64) -> bool {
        !self.input_ports.is_empty()
            && self
                .input_ports
                .iter()
                .all(|&p| self.ports[p as usize].input_done(now))
    }

    fn in_flight(&mut self) -> u32 {
        self.nfs
            .iter_mut()
            .filter_map(|n| n.process())
            .filter(|p| matches!(p.phase, Phase::Starting | Phase::Running | Phase::Stopping))
            .map(|p| p.link.in_flight())
            .sum()
    }

    /// Runs until `stop` is set, `deadline_ns` passes or every input port
    /// is exhausted; then drains in-flight packets.
    pub fn run(&mut self, stop: &AtomicBool, deadline_ns: Option<u64>) {
        let start = sluice_sys::monotonic_ns();
        self.started_ns = start;
        let mut next_maint = start;
        let mut next_live = start + 1_000 * MS;
        let mut drain_until: Option<u64> = None;
        loop {
            let now = sluice_sys::monotonic_ns();
            if let Some(gap) = self.stall_meter.poll(now, self.inline_busy_ns) {
                self.stalls += 1;
                self.stalled_ns += gap;
            }
            let mut done = 0;
            if drain_until.is_none() {
                if stop.load(Ordering::Relaxed)
                    || deadline_ns.is_some_and(|d| now >= d)
                    || self.inputs_done(now)
                {
                    drain_until = Some(now + self.cfg.drain_timeout_ns);
                    self.stopped_ns = now;
                } else {
                    done += self.poll_ingress(now);
                }
            }
            done += self.poll_nfs(now);
            if !self.holding.is_empty() {
                self.fire_wake_timers(now);
            }
            if now >= next_maint {
                self.maintain(now);
                next_maint = now + MS;
            }
            if let Some(until) = drain_until {
                if self.in_flight() == 0 || now >= until {
                    break;
                }
            }
            if self.cfg.live && now >= next_live {
                self.print_live(now);
                next_live += 1_000 * MS;
            }
            if done == 0 {
                self.idle(now, next_maint);
            } else {
                self.idle = 0;
                if self.cfg.nfs_share_core {
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
        let mut pending = false;
        for nf in &mut self.nfs {
            if let Some(p) = nf.process() {
                if p.link.pending().unwrap_or(0) > 0 {
                    pending = true;
                    break;
                }
            }
        }
        if pending {
            wake.cancel_sleep();
            return;
        }
        if self.sleep_on_nics {
            // Only NICs can bring work: sleep until a frame arrives.
            wake.cancel_sleep();
            let ns = next_timer.saturating_sub(now).clamp(20_000, MS);
            sluice_nic::wait_readable(&self.nic_fds, std::time::Duration::from_nanos(ns));
            self.stall_meter.slept();
            return;
        }
        // A rate-limited input may become due before the next timer.
        let limit = if self.input_ports.is_empty() {
            MS
        } else {
            100_000
        };
        let ns = next_timer.saturating_sub(now).clamp(20_000, limit);
        wake.sleep(Some(std::time::Duration::from_nanos(ns)));
        self.stall_meter.slept();
    }

    /// A busy worker gives its core to the NFs sharing it once it has woken
    /// one (the NF runs only when the worker yields) or has kept the core
    /// for `NF_TURN_AFTER_NS` while they hold its packets: otherwise they
    /// wait for the scheduler to preempt it, milliseconds later.
    fn share_core(&mut self, now: u64) {
        let due = std::mem::take(&mut self.yield_due)
            || (now.saturating_sub(self.last_yield_ns) >= NF_TURN_AFTER_NS
                && self.nfs_hold_packets());
        if due {
            sluice_sys::yield_now();
            self.last_yield_ns = now;
        }
    }

    /// Whether a process NF holds packets (queued to it or in processing).
    fn nfs_hold_packets(&mut self) -> bool {
        self.nfs
            .iter_mut()
            .filter_map(|n| n.process())
            .any(|p| p.link.in_flight() > 0)
    }

    fn print_live(&mut self, now: u64) {
        let rx: u64 = self.ports.iter().map(|p| p.stats.rx_packets).sum();
        let tx: u64 = self.ports.iter().map(|p| p.stats.tx_packets).sum();
        let drops = self.drops.total()
            + self
                .nfs
                .iter()
                .map(|n| n.local_drops.iter().sum::<u64>())
                .sum::<u64>();
        let (t0, rx0, tx0) = self.last_live;
        let dt = if t0 == 0 {
            1.0
        } else {
            (now - t0) as f64 / 1e9
        };
        let mut line = format!(
            "[{:>5.1}s] in {:>7.3} Mpps  out {:>7.3} Mpps  drops {:>9}  flows {:>7} |",
            (now - self.started_ns) as f64 / 1e9,
            (rx - rx0) as f64 / dt / 1e6,
            (tx - tx0) as f64 / dt / 1e6,
            drops,
            self.flows.live(),
        );
        for nf in &self.nfs {
            line.push_str(&format!(" {} {}", nf.name, nf.packets()));
        }
        let _ = writeln!(std::io::stderr(), "{line}");
        self.last_live = (now, rx, tx);
    }

    /// Ends every remaining flow so each NF gets its `flow_end` (and can
    /// flush per-flow state) before it stops; waits up to a second for the
    /// end markers to pass through process NFs.
    fn end_all_flows(&mut self) {
        let now = sluice_sys::monotonic_ns();
        for id in self.flows.active_ids() {
            if self.flows.close(id) {
                self.advance_marker(id, 0, now);
            }
        }
        let deadline = now + 1_000 * MS;
        while self.flows.live() > 0 && sluice_sys::monotonic_ns() < deadline {
            let now = sluice_sys::monotonic_ns();
            if self.poll_nfs(now) == 0 {
                self.maintain(now);
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
    }

    /// Stops every process NF (after the drain), returns all buffers and
    /// flushes output ports.
    pub fn finish(&mut self) {
        self.end_all_flows();
        let now = sluice_sys::monotonic_ns();
        for nf in &mut self.nfs {
            let control = nf.control;
            if let Some(p) = nf.process() {
                if matches!(p.phase, Phase::Starting | Phase::Running) {
                    control.stop.store(1, Ordering::Release);
                    p.phase = Phase::Stopping;
                    p.link.wake();
                }
            }
        }
        let deadline = now + 3_000 * MS;
        while sluice_sys::monotonic_ns() < deadline {
            let now = sluice_sys::monotonic_ns();
            self.poll_nfs(now);
            self.poll_template(now);
            let stopping = self
                .nfs
                .iter_mut()
                .filter_map(|n| n.process())
                .any(|p| p.phase == Phase::Stopping);
            if !stopping {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        // Inline NFs release what they hold last, so nothing they emit meets
        // a process NF that is still draining.
        let now = sluice_sys::monotonic_ns();
        for i in 0..self.nfs.len() {
            if matches!(self.nfs[i].exec, Exec::Inline(_)) {
                // `stop` runs again while it fills its output (one call may
                // emit at most a batch).
                for _ in 0..STOP_CALLS_MAX {
                    let emitted = self.with_inline_io(i as u16, now, run_stop);
                    self.dispatch(now);
                    if emitted < MAX_BATCH {
                        break;
                    }
                }
            }
        }
        if let Some(t) = self.template.take() {
            let now = sluice_sys::monotonic_ns();
            for ev in t.shutdown() {
                self.on_template_event(ev, now);
            }
        }
        for nf in &mut self.nfs {
            if let Exec::Process(p) = &mut nf.exec {
                let n = p.link.reclaim(&mut self.cache).packets as u64;
                self.drops.add(DropReason::SHUTDOWN, n);
            }
        }
        for p in &mut self.ports {
            p.release_held(&mut self.cache);
            if let Err(e) = p.flush() {
                eprintln!("sluice: {e}");
            }
        }
    }
}
