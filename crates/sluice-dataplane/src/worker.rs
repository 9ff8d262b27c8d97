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

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_mem::{control::state, Arena, BufferPool, HandleBatch, PoolCache, MAX_BATCH};
use sluice_nf::runtime::{run_batch, run_flow_end, run_stop, run_tick, Services};
use sluice_nf::{DropReason, NetworkFunction};
use sluice_packet::{parse, FlowKey, IpProtocol, ParseError};
use sluice_spec::{RestartMode, RestartPolicy};
use sluice_sys::ExitStatus;

use crate::drops::Drops;
use crate::flow_table::{FlowError, FlowState, FlowTable, FLOWLESS};
use crate::nf_io::InlineIo;
use crate::nf_rt::{Exec, NfRt, Phase};
use crate::plan::{Hop, Plan};
use crate::ports::PortRt;
use crate::route::{after_nf, first_hop, uniform_next, Dest};
use crate::template::{Template, TemplateEvent};
use crate::wakeup::{WakeGate, WakePolicy};

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

    // ---------------------------------------------------------------- NFs

    /// Spawns every process NF and waits until all run. Fails (and the
    /// caller tears everything down) if one cannot start.
    pub fn start_nfs(&mut self, timeout_ns: u64) -> Result<(), String> {
        let now = sluice_sys::monotonic_ns();
        for i in 0..self.nfs.len() {
            if matches!(self.nfs[i].exec, Exec::Process(_)) {
                self.spawn(i, now)?;
            }
        }
        let deadline = now + timeout_ns;
        loop {
            let now = sluice_sys::monotonic_ns();
            self.maintain(now);
            let mut waiting = Vec::new();
            for nf in &mut self.nfs {
                let name = nf.name.clone();
                let failed = nf.last_exit.clone();
                if let Some(p) = nf.process() {
                    match p.phase {
                        Phase::Starting => waiting.push(name),
                        Phase::Running => {}
                        _ => {
                            return Err(format!(
                                "NF {name} failed to start: {}",
                                failed.unwrap_or_else(|| "unknown reason".into())
                            ))
                        }
                    }
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if now > deadline {
                return Err(format!(
                    "NFs did not start within {} ms: {}",
                    timeout_ns / MS,
                    waiting.join(", ")
                ));
            }
            if let Some(t) = &mut self.template {
                for ev in t.wait(1) {
                    self.on_template_event(ev, now);
                }
            }
        }
    }

    fn spawn(&mut self, i: usize, now: u64) -> Result<(), String> {
        let nf = &mut self.nfs[i];
        let control = nf.control;
        let Exec::Process(p) = &mut nf.exec else {
            return Ok(());
        };
        p.generation = p.generation.wrapping_add(1);
        self.gates[i] = WakeGate::default();
        control.reset();
        // Packets may queue before the NF runs: its spare stash must be
        // filled from the start, not once it announces its own target.
        control
            .spare_target
            .store(self.plan.nfs[i].alloc_reserve, Ordering::Relaxed);
        control.generation.store(p.generation, Ordering::Relaxed);
        control.state.store(state::STARTING, Ordering::Release);
        p.phase = Phase::Starting;
        p.pid = 0;
        p.spawn_requested_ns = now;
        let t = self
            .template
            .as_mut()
            .ok_or("process NFs need the template process")?;
        t.spawn(i as u32, p.generation)
            .map_err(|e| format!("cannot reach the NF template: {e}"))
    }

    fn poll_template(&mut self, now: u64) {
        let Some(t) = &mut self.template else { return };
        let events = t.poll();
        let gone = t.is_gone();
        for ev in events {
            self.on_template_event(ev, now);
        }
        if gone {
            // The template died: no NF can be (re)started any more.
            for nf in &mut self.nfs {
                if let Exec::Process(p) = &mut nf.exec {
                    if matches!(p.phase, Phase::Down { .. }) {
                        p.phase = Phase::Failed;
                    }
                }
            }
        }
    }

    fn on_template_event(&mut self, ev: TemplateEvent, now: u64) {
        match ev {
            TemplateEvent::Spawned {
                slot,
                generation,
                pid,
            } => {
                if let Some(p) = self.nfs.get_mut(slot as usize).and_then(|n| n.process()) {
                    if p.generation == generation {
                        p.pid = pid;
                    }
                }
            }
            TemplateEvent::Exited {
                slot,
                generation,
                pid,
                status,
            } => self.on_exit(slot as usize, generation, pid, status, now),
        }
    }

    fn on_exit(&mut self, i: usize, generation: u32, pid: i32, status: ExitStatus, now: u64) {
        match self.nfs.get_mut(i).and_then(|nf| nf.process()) {
            Some(p) if p.generation == generation => {}
            _ => return,
        }
        self.salvage_output(i, now);
        let nf = &mut self.nfs[i];
        let Exec::Process(p) = &mut nf.exec else {
            return;
        };
        let requested = matches!(p.phase, Phase::Stopping);
        let reclaimed = p.link.reclaim(&mut self.cache).packets as u64;
        let stuck_events: Vec<u32> = p.pending_events.drain(..).collect();
        p.pid = 0;
        nf.retire_instance();
        let reason = if requested {
            DropReason::SHUTDOWN
        } else {
            DropReason::NF_CRASHED
        };
        self.drops.add(reason, reclaimed);
        let nf = &mut self.nfs[i];
        if requested && status == ExitStatus::Code(0) {
            if let Some(p) = nf.process() {
                p.phase = Phase::Stopped;
            }
        } else {
            nf.restarts += u32::from(!requested);
            nf.last_exit = Some(status.to_string());
            let policy = &self.cfg.restart;
            let allowed = match policy.policy {
                RestartMode::Always => true,
                RestartMode::OnFailure => status != ExitStatus::Code(0),
                RestartMode::Never => false,
            } && nf.restarts <= policy.max_restarts
                && !requested
                && status != ExitStatus::Code(crate::nf_process::exit_code::BUILD_FAILED);
            let name = nf.name.clone();
            let restarts = nf.restarts;
            if let Some(p) = nf.process() {
                p.phase = if requested {
                    Phase::Stopped
                } else if allowed {
                    Phase::Down {
                        respawn_at_ns: now + policy.backoff_ms * MS,
                    }
                } else {
                    Phase::Failed
                };
            }
            if !requested {
                eprintln!(
                    "sluice: NF {name} (pid {pid}) {status}; reclaimed {reclaimed} buffers; {}",
                    if allowed {
                        format!(
                            "restarting in {} ms (restart {restarts}/{})",
                            policy.backoff_ms, policy.max_restarts
                        )
                    } else {
                        "not restarting (restart policy)".to_string()
                    }
                );
            }
        }
        // End markers held by the dead instance move on past it.
        for id in stuck_events {
            self.marker_passed(id, i as u16, sluice_sys::monotonic_ns());
        }
        let stuck: Vec<u32> = (0..self.flows.capacity())
            .filter(|&id| {
                self.flows.entry(id).is_some_and(|e| {
                    e.state == FlowState::Closing
                        && self.plan.chains[e.chain as usize]
                            .path
                            .get(e.marker_hop as usize)
                            == Some(&Hop::Nf(i as u16))
                })
            })
            .collect();
        for id in stuck {
            self.marker_passed(id, i as u16, now);
        }
    }

    /// Steers what a dead NF had already finished and queued back (its
    /// transmit ring is stable now): those packets were processed, so they
    /// move on instead of being counted as lost.
    fn salvage_output(&mut self, i: usize, now: u64) {
        let pool = self.pool;
        for _ in 0..STOP_CALLS_MAX {
            let mut b = self.take_batch();
            let Some(p) = self.nfs[i].process() else {
                self.put_batch(b);
                return;
            };
            let outcome = p.link.recv(pool, &mut b, MAX_BATCH);
            p.link.take_events(&mut self.events);
            let Ok(o) = outcome else {
                b.drain(|h| self.cache.free(h));
                self.put_batch(b);
                return;
            };
            self.nfs[i].originated += o.originated as u64;
            self.nfs[i].invalid_handles += o.invalid as u64;
            self.drops.invalid_handles += o.invalid as u64;
            self.regroup_after(i as u16, &mut b);
            self.put_batch(b);
            self.dispatch(now);
            let mut events = std::mem::take(&mut self.events);
            for id in events.drain(..) {
                self.marker_passed(id, i as u16, now);
            }
            self.events = events;
            if o.received + o.events + o.invalid == 0 {
                return;
            }
        }
    }

    /// Kills an NF that broke the ring protocol (its exit is then handled
    /// like any crash).
    fn condemn(&mut self, i: usize, why: &str) {
        let nf = &mut self.nfs[i];
        let name = nf.name.clone();
        if let Some(p) = nf.process() {
            if let Some(pid) = sluice_sys::Pid::from_raw(p.pid) {
                eprintln!("sluice: killing NF {name} (pid {}): {why}", p.pid);
                let _ = sluice_sys::kill(pid);
            }
            p.phase = Phase::Down {
                respawn_at_ns: u64::MAX,
            };
        }
    }

    fn maintain(&mut self, now: u64) {
        self.poll_template(now);
        self.tick_inline(now);
        for i in 0..self.nfs.len() {
            let control = self.nfs[i].control;
            let mut respawn = false;
            let mut started = None;
            if let Some(p) = self.nfs[i].process() {
                match p.phase {
                    Phase::Starting if control.state.load(Ordering::Acquire) == state::RUNNING => {
                        p.phase = Phase::Running;
                        started = Some((now - p.spawn_requested_ns) as f64 / 1e3);
                    }
                    Phase::Down { respawn_at_ns } if now >= respawn_at_ns => respawn = true,
                    _ => {}
                }
                while let Some(&ev) = p.pending_events.front() {
                    match p.link.send_event(ev) {
                        Ok(true) => {
                            p.pending_events.pop_front();
                        }
                        _ => break,
                    }
                }
            }
            if let Some(us) = started {
                self.nfs[i].startup_us.push(us);
            }
            if respawn && self.spawn(i, now).is_err() {
                if let Some(p) = self.nfs[i].process() {
                    p.phase = Phase::Failed;
                }
            }
        }
        let budget = (self.flows.capacity() as usize / 256).max(64);
        let mut ended = std::mem::take(&mut self.ended);
        self.flows.expire(now, budget, &mut ended);
        for id in ended.drain(..) {
            self.advance_marker(id, 0, now);
        }
        self.ended = ended;
    }

    // ------------------------------------------------------------ markers

    /// Moves flow `id`'s end marker to hop `hop` of its chain and onwards:
    /// inline NFs get `flow_end` at once, a process NF gets an event in its
    /// ring (ordered after the flow's packets), and at the output port the
    /// flow's slot is released.
    fn advance_marker(&mut self, id: u32, mut hop: usize, now: u64) {
        loop {
            let Some(e) = self.flows.entry(id) else {
                return;
            };
            if e.state != FlowState::Closing {
                return;
            }
            let chain = e.chain as usize;
            match self.plan.chains.get(chain).and_then(|c| c.path.get(hop)) {
                Some(Hop::Nf(i)) => {
                    let i = *i as usize;
                    let nf = &mut self.nfs[i];
                    let control = nf.control;
                    match &mut nf.exec {
                        Exec::Inline(_) => {
                            let _ = control;
                            let _ = self
                                .with_inline_io(i as u16, now, |f, svc| run_flow_end(f, id, svc));
                            hop += 1;
                        }
                        Exec::Process(p) if matches!(p.phase, Phase::Starting | Phase::Running) => {
                            if let Some(e) = self.flows.entry_mut(id) {
                                e.marker_hop = hop as u16;
                            }
                            if !matches!(p.link.send_event(id), Ok(true)) {
                                p.pending_events.push_back(id);
                            }
                            if p.link.wake() {
                                nf.wakeups += 1;
                            }
                            return;
                        }
                        Exec::Process(_) => hop += 1,
                    }
                }
                _ => {
                    self.flows.release(id);
                    return;
                }
            }
        }
    }

    /// An NF returned flow `id`'s end marker: continue after it, if the
    /// marker really was at that NF.
    fn marker_passed(&mut self, id: u32, from: u16, now: u64) {
        let Some(e) = self.flows.entry(id) else {
            self.drops.invalid_events += 1;
            return;
        };
        let hop = e.marker_hop as usize;
        let at = self
            .plan
            .chains
            .get(e.chain as usize)
            .and_then(|c| c.path.get(hop));
        if e.state != FlowState::Closing || at != Some(&Hop::Nf(from)) {
            self.drops.invalid_events += 1;
            return;
        }
        self.advance_marker(id, hop + 1, now);
    }

    // ------------------------------------------------------------ steering

    /// Room in process NF `i`'s receive ring (a full batch if it is not
    /// accepting: packets sent there are dropped as `nf_down`, not held).
    fn room(&mut self, i: u16) -> usize {
        let batch = self.cfg.batch;
        match self.nfs[i as usize].process() {
            Some(p) if matches!(p.phase, Phase::Starting | Phase::Running) => {
                p.link.room().unwrap_or(0)
            }
            _ => batch,
        }
    }

    fn ingress_budget(&mut self, port: u16) -> usize {
        let mut budget = self.cfg.batch;
        for k in 0..self.plan.ingress[port as usize].len() {
            let c = self.plan.ingress[port as usize][k];
            if let Some(q) = self.chain_queue[c as usize] {
                budget = budget.min(self.room(q));
            }
        }
        budget
    }

    fn poll_ingress(&mut self, now: u64) -> usize {
        let mut done = 0;
        for k in 0..self.input_ports.len() {
            let port = self.input_ports[k];
            let budget = self.ingress_budget(port);
            if budget == 0 {
                continue;
            }
            let mut b = self.take_batch();
            let n = self.ports[port as usize].rx(self.arena, &mut self.cache, &mut b, budget, now);
            if n == 0 {
                self.put_batch(b);
                continue;
            }
            done += n;
            self.classify_and_group(port, &mut b, now);
            self.put_batch(b);
            self.flush_groups();
            self.dispatch(now);
            let mut ended = std::mem::take(&mut self.ended);
            for id in ended.drain(..) {
                self.advance_marker(id, 0, now);
            }
            self.ended = ended;
        }
        done
    }

    fn classify_and_group(&mut self, port: u16, b: &mut HandleBatch, now: u64) {
        let arena = self.arena;
        let plan = self.plan;
        b.drain(|mut h| {
            let mut pkt = arena.pkt(&mut h);
            pkt.set_port_in(port);
            let dest = match classify(
                plan,
                &mut self.flows,
                &mut self.ended,
                pkt.data(),
                port,
                now,
            ) {
                Ok((chain, flow_id, hash)) => {
                    pkt.set_flow_id(flow_id);
                    pkt.set_flow_hash(hash);
                    first_hop(plan, &mut pkt, chain)
                }
                Err(reason) => Dest::Drop(reason),
            };
            self.group(dest, h);
        });
    }

    fn group(&mut self, dest: Dest, h: sluice_mem::PktHandle) {
        if let Some((_, g)) = self.groups.iter_mut().find(|(d, _)| *d == dest) {
            if let Err(h) = g.push(h) {
                // Group full (cannot happen with batches ≤ MAX_BATCH).
                self.cache.free(h);
                self.drops.add(DropReason::RING_FULL, 1);
            }
            return;
        }
        let mut g = self.take_batch();
        let _ = g.push(h);
        self.groups.push((dest, g));
    }

    fn flush_groups(&mut self) {
        // Reverse so the LIFO work stack delivers groups in creation order.
        while let Some(g) = self.groups.pop() {
            self.work.push(g);
        }
    }

    fn dispatch(&mut self, now: u64) {
        while let Some((dest, mut b)) = self.work.pop() {
            match dest {
                Dest::Nf(i) => self.deliver_nf(i, &mut b, now),
                Dest::Port(p) => {
                    let lost = self.ports[p as usize].tx(self.arena, &mut b, &mut self.cache, now);
                    self.drops.add(DropReason::PORT_TX_ERROR, lost);
                }
                Dest::Drop(r) => {
                    self.drops.add(r, b.len() as u64);
                    b.drain(|h| self.cache.free(h));
                }
                Dest::DropLocal(nf, idx) => {
                    if let Some(c) = self.nfs[nf as usize].local_drops.get_mut(idx as usize) {
                        *c += b.len() as u64;
                    }
                    b.drain(|h| self.cache.free(h));
                }
            }
            self.put_batch(b);
        }
    }

    fn deliver_nf(&mut self, i: u16, b: &mut HandleBatch, now: u64) {
        let nf = &mut self.nfs[i as usize];
        let control = nf.control;
        match &mut nf.exec {
            Exec::Inline(_) => {
                let _ = control;
                let _ = self.with_inline_io(i, now, |f, svc| run_batch(f, b, svc));
                self.regroup_after(i, b);
            }
            Exec::Process(p) => {
                let mut corrupt = false;
                if matches!(p.phase, Phase::Starting | Phase::Running) {
                    // Spares first: they arrive ahead of the batch in ring
                    // order, so an NF that creates packets per packet (tee)
                    // has its stash full when the batch comes (one load
                    // when the NF wants no spares).
                    if p.link.refill_spares_for(&mut self.cache, b.len()).is_err() {
                        corrupt = true;
                    }
                    match p.link.send(self.pool, b) {
                        Ok(n) if n > 0 => {
                            let gate = &mut self.gates[i as usize];
                            let policy = &self.cfg.wakeup;
                            let woke = if !policy.batches() {
                                p.link.wake()
                            } else if !p.link.sleeps() {
                                // Running: it finds the packets itself.
                                gate.release();
                                false
                            } else if gate.on_queued(p.link.queued(), now, policy) {
                                p.link.wake()
                            } else {
                                if !self.holding.contains(&i) {
                                    self.holding.push(i);
                                }
                                false
                            };
                            nf.wakeups += u64::from(woke);
                            self.yield_due |= woke && self.cfg.nfs_share_core;
                        }
                        Ok(_) => {}
                        Err(_) => corrupt = true,
                    }
                    let left = b.len() as u64;
                    self.drops.add(DropReason::RING_FULL, left);
                } else {
                    self.drops.add(DropReason::NF_DOWN, b.len() as u64);
                }
                b.drain(|h| self.cache.free(h));
                if corrupt {
                    self.condemn(i as usize, "its receive ring indices are corrupt");
                }
            }
        }
    }

    /// Calls inline NF `i` with packet I/O (allocation from the worker's
    /// cache), then queues what it emitted for steering like its batch.
    fn with_inline_io(
        &mut self,
        i: u16,
        now: u64,
        call: impl FnOnce(&mut dyn NetworkFunction, Services<'_>),
    ) -> usize {
        let mut out = self.take_batch();
        let arena = self.arena;
        let nf = &mut self.nfs[i as usize];
        let control = nf.control;
        if let Exec::Inline(f) = &mut nf.exec {
            let mut io = InlineIo {
                cache: &mut self.cache,
                out: &mut out,
                originated: &mut nf.originated,
            };
            let svc = Services {
                control,
                arena,
                now_ns: now,
                io: Some(&mut io),
                raw: None,
            };
            call(f.as_mut(), svc);
        }
        let emitted = out.len();
        self.regroup_after(i, &mut out);
        self.put_batch(out);
        emitted
    }

    /// Runs the timers of inline NFs that are due.
    fn tick_inline(&mut self, now: u64) {
        for i in 0..self.nfs.len() {
            match self.nfs[i].tick {
                Some((every, due)) if now >= due => {
                    self.nfs[i].tick = Some((every, now + every));
                    let _ = self.with_inline_io(i as u16, now, run_tick);
                }
                _ => {}
            }
        }
        self.dispatch(now);
    }

    /// Groups the packets NF `from` has processed by their next destination.
    fn regroup_after(&mut self, from: u16, b: &mut HandleBatch) {
        let arena = self.arena;
        let plan = self.plan;
        if b.is_empty() {
            return;
        }
        if let Some(dest) = uniform_next(plan, b, arena) {
            let mut g = self.take_batch();
            std::mem::swap(&mut *g, b);
            self.work.push((dest, g));
            return;
        }
        b.drain(|mut h| {
            let mut pkt = arena.pkt(&mut h);
            let dest = if pkt.meta_is_sane() {
                after_nf(plan, &mut pkt, from)
            } else {
                Dest::Drop(DropReason::INVALID_METADATA)
            };
            self.group(dest, h);
        });
        self.flush_groups();
    }

    /// Wakes the sleeping NFs whose held packets have waited the wake-up
    /// timeout.
    fn fire_wake_timers(&mut self, now: u64) {
        let mut k = 0;
        while k < self.holding.len() {
            let i = self.holding[k] as usize;
            let policy = self.cfg.wakeup;
            let gate = &mut self.gates[i];
            let nf = &mut self.nfs[i];
            let Some(p) = nf.process() else {
                gate.release();
                self.holding.swap_remove(k);
                continue;
            };
            if !gate.is_holding() || !p.link.control().wake.is_sleeping() {
                // Woken meanwhile (by count, an event or its own nap): it
                // sees its ring itself.
                gate.release();
            } else if gate.on_timer(now, &policy) {
                if p.link.wake() {
                    nf.wakeups += 1;
                    nf.wakeups_by_timeout += 1;
                    self.yield_due |= self.cfg.nfs_share_core;
                }
            } else {
                k += 1;
                continue;
            }
            self.holding.swap_remove(k);
        }
    }

    fn poll_nfs(&mut self, now: u64) -> usize {
        let mut done = 0;
        for i in 0..self.nfs.len() {
            let active = matches!(
                self.nfs[i].process().map(|p| p.phase),
                Some(Phase::Starting | Phase::Running | Phase::Stopping)
            );
            if !active {
                continue;
            }
            let mut budget = self.cfg.batch;
            for k in 0..self.nf_next_queues[i].len() {
                let q = self.nf_next_queues[i][k];
                budget = budget.min(self.room(q));
            }
            if budget == 0 {
                continue;
            }
            let mut b = self.take_batch();
            let pool = self.pool;
            let Some(p) = self.nfs[i].process() else {
                self.put_batch(b);
                continue;
            };
            if p.link.refill_spares(&mut self.cache).is_err() {
                self.put_batch(b);
                self.condemn(i, "its receive ring indices are corrupt");
                continue;
            }
            let outcome = p.link.recv(pool, &mut b, budget);
            p.link.take_events(&mut self.events);
            match outcome {
                Ok(o) => {
                    self.nfs[i].originated += o.originated as u64;
                    // Rejected entries are not packets (the NF still owns
                    // its real buffers), so they are faults, not drops.
                    self.nfs[i].invalid_handles += o.invalid as u64;
                    self.drops.invalid_handles += o.invalid as u64;
                    done += o.received + o.events;
                    self.regroup_after(i as u16, &mut b);
                    self.dispatch(now);
                }
                Err(_) => self.condemn(i, "its transmit ring indices are corrupt"),
            }
            self.put_batch(b);
            let mut events = std::mem::take(&mut self.events);
            for id in events.drain(..) {
                self.marker_passed(id, i as u16, now);
            }
            self.events = events;
        }
        done
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
            if let Err(e) = p.flush() {
                eprintln!("sluice: {e}");
            }
        }
    }
}

/// Finds (or creates) the packet's flow and chain: `(chain, flow id, hash)`.
#[inline]
fn classify(
    plan: &Plan,
    flows: &mut FlowTable,
    ended: &mut Vec<u32>,
    frame: &[u8],
    port: u16,
    now: u64,
) -> Result<(u16, u32, u32), DropReason> {
    let h = match parse(frame) {
        Ok(h) => h,
        Err(e) => return Err(DropReason::malformed(e)),
    };
    let key = match FlowKey::from_headers(frame, &h) {
        Ok(k) => k,
        Err(ParseError::UnsupportedEtherType) => {
            return plan
                .classify_flowless(port)
                .map(|c| (c, FLOWLESS, 0))
                .ok_or(DropReason::NO_CHAIN)
        }
        Err(e) => return Err(DropReason::malformed(e)),
    };
    let hash = key.symmetric_hash();
    let canonical = key.canonical();
    let lookup = |flows: &mut FlowTable| match flows
        .lookup_or_insert(&canonical, hash, now, || plan.classify(port, &key))
    {
        Ok(id) => Ok(id),
        Err(FlowError::NoChain) => Err(DropReason::NO_CHAIN),
        Err(FlowError::Full) => Err(DropReason::FLOW_TABLE_FULL),
    };
    let mut id = lookup(flows)?;
    if key.proto == IpProtocol::TCP.0 && !h.fragment {
        let flags = frame.get(h.l4_offset as usize + 13).copied().unwrap_or(0);
        let (fin, syn, rst, ack) = (
            flags & 0x01 != 0,
            flags & 0x02 != 0,
            flags & 0x04 != 0,
            flags & 0x10 != 0,
        );
        // A new connection on the 5-tuple of one that is closing (a FIN
        // was seen; the entry lingers like TIME_WAIT): end the old flow so
        // NFs see its end and the new connection gets a flow of its own,
        // as Linux conntrack does for a SYN in TIME_WAIT.
        if syn && !ack && flows.entry(id).is_some_and(|e| e.fins != 0) && flows.close(id) {
            ended.push(id);
            id = lookup(flows)?;
        }
        if (fin || rst)
            && flows.note_tcp_flags(id, key == canonical, fin, rst, now)
            && flows.close(id)
        {
            ended.push(id);
        }
    }
    let mut chain = flows.entry(id).map_or(0, |e| e.chain);
    if plan
        .chains
        .get(chain as usize)
        .is_some_and(|c| c.from != port)
    {
        // The other direction of a flow through a bump in the wire: same
        // flow id (so the same per-flow NF state), but the chain that
        // starts at the port this packet came in on.
        chain = plan.classify(port, &key).ok_or(DropReason::NO_CHAIN)?;
    }
    Ok((chain, id, hash))
}
