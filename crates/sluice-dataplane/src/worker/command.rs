//! Commands from the control thread, and how a change is applied.
//!
//! A change reaches every worker in two steps, so that an apply is all or
//! nothing across workers:
//!
//! 1. **Prepare**: the worker takes the change's new ports and NF
//!    instances, and starts its new process NFs. They run but get no
//!    packets. When all run it says so; if one cannot start it says why,
//!    and the control thread aborts the change everywhere (the new
//!    instances are killed and their slots freed; nothing else moved).
//! 2. **Commit**: between two passes the worker swaps in the new plan.
//!    When the change removes or replaces something packets may still be
//!    inside (an NF, an output port, a route whose path changed), it
//!    first stops ingress and lets the NFs drain, so no packet meets a
//!    missing NF and no flow is reordered by taking a shorter path past
//!    its own earlier packets; the drain is bounded (then it proceeds and
//!    counts what removed NFs still held as `nf_removed`). Packets on a
//!    retired route finish on it: routes stay in the plan after their
//!    chain moves on.
//!
//! How what a change removes is taken out of service is in `retire.rs`.

use std::rc::Rc;
use std::sync::atomic::Ordering;

use super::mailbox::{
    Change, Command, Committed, NewExec, NewNf, Reconfigure, Reply, QUIESCE_TIMEOUT_NS,
};
use super::Worker;
use crate::inline_nf::{panic_message, Fault, InlineNf};
use crate::nf_rt::{Exec, NfRt, Phase, ProcessNf};
use crate::ports::PortRt;
use crate::report_merge::ShardResult;

/// A prepared change waiting for its commit.
struct Staged<'a> {
    change: Box<Change>,
    nfs: Vec<NfRt<'a>>,
    reply: Option<Reply<Result<(), String>>>,
}

/// The worker's command state.
#[derive(Default)]
pub struct State<'a> {
    staged: Option<Staged<'a>>,
    /// A commit waiting for the drain: its reply, and since when.
    draining: Option<(Reply<Committed>, u64)>,
    /// Process NFs removed or replaced, asked to stop, not yet exited.
    pub(crate) retiring: Vec<NfRt<'a>>,
    /// A stop waiting for the drain.
    stopping: Option<(Reply<ShardResult>, u64)>,
    /// A commit waiting for process NFs to take their new configs.
    pub(crate) awaiting: Option<super::reconfig::Awaiting>,
    /// A checkpoint or restore in progress.
    pub(crate) state_job: Option<super::state_io::StateJob>,
    /// A pause waiting for the drain.
    pub(crate) pausing: Option<super::pause::Pausing>,
}

impl<'a> State<'a> {
    /// Whether a step is in progress (the loop must keep calling).
    pub fn busy(&self) -> bool {
        self.draining.is_some()
            || self.stopping.is_some()
            || self.awaiting.is_some()
            || self.state_job.is_some()
            || self.pausing.is_some()
            || self.staged.as_ref().is_some_and(|s| s.reply.is_some())
            || !self.retiring.is_empty()
    }

    /// Whether a commit or a stop keeps ingress off for its own drain.
    pub(crate) fn busy_draining(&self) -> bool {
        self.draining.is_some() || self.stopping.is_some()
    }

    /// Packets retiring NFs still hold.
    pub fn retiring_in_flight(&self) -> u32 {
        self.retiring
            .iter()
            .filter_map(|n| n.process_ref())
            .map(|p| p.link.in_flight())
            .sum()
    }

    /// The staged instance in `slot`, if any.
    pub(crate) fn staged_by_slot(&mut self, slot: u32) -> Option<&mut NfRt<'a>> {
        self.staged
            .as_mut()?
            .nfs
            .iter_mut()
            .find(|n| n.slot == slot)
    }

    /// The staged instances, if a change is prepared.
    pub(crate) fn staged_mut(&mut self) -> Option<&mut Vec<NfRt<'a>>> {
        self.staged.as_mut().map(|s| &mut s.nfs)
    }

    /// The retiring instance in `slot`, if any.
    pub(crate) fn retiring_by_slot(&mut self, slot: u32) -> Option<&mut NfRt<'a>> {
        self.retiring.iter_mut().find(|n| n.slot == slot)
    }
}

impl<'a> Worker<'a> {
    /// Handles posted commands and advances steps in progress; true once
    /// the worker has stopped.
    pub(super) fn handle_commands(&mut self, now: u64) -> bool {
        // A command may bring new rings, chains or NFs (`room_floor`).
        self.room_floor.forget();
        for c in self.mail.take() {
            match c {
                Command::Prepare(change, reply) => self.prepare(change, reply, now),
                Command::Commit(reply) => {
                    let quiesce = self.cmd.staged.as_ref().is_some_and(|s| s.change.quiesce);
                    if quiesce {
                        self.ingress_off = true;
                        self.cmd.draining = Some((reply, now));
                    } else {
                        let r = self.install(now);
                        self.reconfigure(r, Committed::default(), reply, now);
                    }
                }
                Command::Abort(reply) => {
                    self.abort();
                    let _ = reply.send(());
                }
                Command::Report(reply) => {
                    // The NFs' CPU time is read by the asker
                    // (`ShardResult::read_cpu`).
                    let _ = reply.send(self.shard_result());
                }
                Command::Instances(reply) => {
                    let _ = reply.send(self.instances());
                }
                Command::Tap(t) => self.add_tap(t),
                Command::Untap(id) => self.remove_tap(id),
                Command::Checkpoint(ids, reply) => self.start_checkpoint(ids, reply, now),
                Command::Restore(parts, reply) => self.start_restore(parts, reply, now),
                Command::Pause(ports, pause, reply) => self.pause_ports(ports, pause, reply, now),
                Command::Stop(reply) => {
                    self.ingress_off = true;
                    self.stopped_ns = now;
                    self.cmd.stopping = Some((reply, now));
                }
            }
        }
        self.check_prepared(now);
        if let Some((_, since)) = &self.cmd.draining {
            let timed_out = now.saturating_sub(*since) > QUIESCE_TIMEOUT_NS;
            if self.in_flight() == 0 || timed_out {
                let (reply, since) = self.cmd.draining.take().expect("checked above");
                let r = self.install(now);
                if self.cmd.stopping.is_none() && self.cmd.pausing.is_none() {
                    self.ingress_off = false;
                }
                let committed = Committed {
                    quiesce_us: now.saturating_sub(since) / 1000,
                    quiesce_timed_out: timed_out,
                    reconfigure_failed: Vec::new(),
                };
                self.reconfigure(r, committed, reply, now);
            }
        }
        if self.cmd.awaiting.is_some() {
            self.advance_reconfigs(now);
        }
        if self.cmd.state_job.is_some() {
            self.advance_state_job(now);
        }
        if self.cmd.pausing.is_some() {
            self.advance_pause(now);
        }
        self.reap_retiring();
        if let Some((_, since)) = &self.cmd.stopping {
            if self.in_flight() == 0 || now.saturating_sub(*since) > self.cfg.drain_timeout_ns {
                let (reply, _) = self.cmd.stopping.take().expect("checked above");
                self.abort();
                self.finish();
                let _ = reply.send(self.shard_result());
                return true;
            }
        }
        false
    }

    fn prepare(&mut self, change: Box<Change>, reply: Reply<Result<(), String>>, now: u64) {
        self.abort();
        let mut nfs = Vec::with_capacity(change.add_nfs.len());
        let mut change = change;
        let mut failure = None;
        for n in std::mem::take(&mut change.add_nfs) {
            let rt = self.instantiate(n, now);
            nfs.push(rt);
        }
        // The change's restart policy: it takes effect at the commit, and
        // these instances serve from then on.
        let standby = change.restart.standby;
        for nf in &mut nfs {
            if let Err(e) = super::supervise::spawn(&mut self.host, nf, now, standby) {
                failure.get_or_insert(e);
            }
        }
        self.cmd.staged = Some(Staged {
            change,
            nfs,
            reply: Some(reply),
        });
        if let Some(e) = failure {
            if let Some(r) = self.cmd.staged.as_mut().and_then(|s| s.reply.take()) {
                let _ = r.send(Err(e));
            }
        }
    }

    /// Answers a prepare once every new process NF runs or one failed.
    fn check_prepared(&mut self, now: u64) {
        if self.cmd.staged.as_ref().is_none_or(|s| s.reply.is_none()) {
            return;
        }
        // A failed spawn is reported by the host: poll it too.
        self.poll_host(now);
        self.advance_staged(now);
        let Some(s) = &mut self.cmd.staged else {
            return;
        };
        let mut failed = None;
        let mut waiting = false;
        for nf in &s.nfs {
            let Some(p) = nf.process_ref() else { continue };
            match p.phase {
                Phase::Running => {}
                Phase::Starting => waiting = true,
                _ => {
                    failed = Some(format!(
                        "NF {} failed to start: {}",
                        nf.name,
                        nf.last_exit
                            .clone()
                            .unwrap_or_else(|| "unknown reason".into())
                    ))
                }
            }
        }
        if failed.is_some() || !waiting {
            if let Some(r) = s.reply.take() {
                let _ = r.send(failed.map_or(Ok(()), Err));
            }
        }
    }

    fn instantiate(&mut self, n: NewNf, now: u64) -> NfRt<'a> {
        let control = self.arena.nf_control(n.slot);
        control.reset();
        let mut born_crashed = None;
        let mut tick_every = None;
        let exec = match n.exec {
            NewExec::Inline(f) => {
                let mut f = InlineNf::new(f);
                match f.call(|code| code.tick_interval_ns()) {
                    Ok(every) => tick_every = every,
                    // It would panic the same way at every rebuild: it
                    // stays down, and says why.
                    Err(Fault::Panicked(p)) => {
                        born_crashed = Some(format!("panicked: {}", panic_message(p.as_ref())));
                    }
                    Err(Fault::Down) => {}
                }
                Exec::Inline(f)
            }
            NewExec::Process(spawn) => Exec::Process(ProcessNf {
                link: sluice_mem::NfLink::new(self.arena, n.slot)
                    .in_domain(usize::from(spawn.domain)),
                phase: Phase::Stopped,
                generation: 0,
                pid: 0,
                spawn_requested_ns: 0,
                down_since_ns: 0,
                pending_events: Default::default(),
                spawn: *spawn,
                alloc_reserve: n.alloc_reserve,
                recycle: false,
            }),
        };
        let tick = tick_every.map(|every| (every.max(1), now + every));
        if let Some(why) = &born_crashed {
            tracing::warn!("NF {}: its code {why}; it stays down", n.name);
            self.logbook.push(
                &n.name,
                self.cfg.index,
                "platform",
                format!("its code {why}; it stays down"),
            );
        }
        NfRt {
            id: n.id,
            slot: n.slot,
            name: n.name,
            type_name: n.type_name,
            isolation: n.isolation,
            control,
            exec,
            local_drops: vec![0; n.drop_names.len()],
            drop_names: n.drop_names,
            restarts: 0,
            reforks: 0,
            last_exit: born_crashed,
            sandbox_kills: 0,
            oom_kills: 0,
            startup_us: Vec::new(),
            starts: 0,
            shell_starts: 0,
            standby_starts: 0,
            spare_starts: 0,
            restart_times: Default::default(),
            wakeups: 0,
            domain_copies: 0,
            wakeups_by_timeout: 0,
            turns_revoked: 0,
            turns_held_off: 0,
            invalid_handles: 0,
            cpu: Default::default(),
            retired: Default::default(),
            originated: 0,
            tick,
        }
    }

    /// Drops a prepared change: its new instances are killed and their
    /// slots freed once they are gone.
    fn abort(&mut self) {
        let Some(s) = self.cmd.staged.take() else {
            return;
        };
        if let Some(r) = s.reply {
            let _ = r.send(Err("aborted".into()));
        }
        for mut nf in s.nfs {
            if nf.process_ref().is_some() {
                self.retire(&mut nf);
                self.cmd.retiring.push(nf);
            } else {
                // Never served: nothing to stop or count.
                self.mail.free_slot(nf.slot);
            }
        }
        for (_, mut p) in s.change.add_ports {
            let _ = p.flush();
        }
    }

    /// Swaps in the prepared change (between two passes).
    /// Swaps in the prepared change; returns the NFs that take a new
    /// config live (the caller sends those).
    fn install(&mut self, now: u64) -> Vec<Reconfigure> {
        let Some(s) = self.cmd.staged.take() else {
            return Vec::new();
        };
        let Staged { change, nfs, .. } = s;
        let mut change = *change;
        let reconfigure = std::mem::take(&mut change.reconfigure);
        self.cfg.restart = change.restart;
        self.cfg.entry = change.entry;
        if let (Some(like), Some(h)) = (change.spare.take(), &mut self.host) {
            h.keep_spare(like);
        }
        // A change that only adds, to this worker too (no instance or port
        // replaced under its id, the same scheduling policy): only what
        // the added objects mean is worked out.
        let mut added = change
            .added_chains
            .take()
            .filter(|_| {
                change.remove_nfs.is_empty()
                    && change.remove_ports.is_empty()
                    && reconfigure.is_empty()
                    && change.sched == self.sched.policy()
            })
            .map(|chains| super::derive::Added {
                nfs: nfs.iter().map(|n| n.id).collect(),
                chains,
            });
        // Published to the NFs by the `derive` that ends the change.
        self.sched.set_policy(change.sched);
        let plan = Rc::new(change.plan);
        let table = plan.nfs.len().max(self.nfs.len());
        self.nfs.resize_with(table, || None);
        for id in change.remove_nfs {
            if let Some(old) = self.nfs.get_mut(id as usize).and_then(Option::take) {
                self.remove_nf(old, now);
            }
        }
        for nf in nfs {
            let id = nf.id as usize;
            if let Some(old) = self.nfs[id].replace(nf) {
                self.remove_nf(old, now);
                added = None;
            }
            self.gates.resize(self.nfs.len(), Default::default());
            self.gates[id] = Default::default();
        }
        let ports = plan.ports.len().max(self.ports.len());
        self.ports.resize_with(ports, || None);
        for id in change.remove_ports {
            if let Some(p) = self.ports.get_mut(id as usize).and_then(Option::take) {
                self.remove_port(p);
            }
        }
        for (id, p) in change.add_ports {
            if let Some(old) = self.ports[id as usize].replace(p) {
                self.remove_port(old);
                added = None;
            }
        }
        let before: Vec<Option<u16>> = self
            .plan
            .chains
            .iter()
            .map(|c| c.as_ref().map(|c| c.route))
            .collect();
        self.plan = plan;
        // A chain it adds may take flows no chain took before.
        self.no_chain.forget();
        self.hold_flows(&before);
        // Where super-packets are cut depends on every port and chain.
        let offloads: Vec<bool> = self
            .ports
            .iter()
            .map(|p| p.as_ref().is_some_and(PortRt::offloads))
            .collect();
        for (p, rx_tx) in self
            .ports
            .iter_mut()
            .zip(crate::offload::plan_ports(&self.plan, &offloads))
        {
            if let Some(p) = p {
                p.set_offload_plan(rx_tx);
            }
        }
        self.holding.retain(|&i| {
            self.nfs
                .get(i as usize)
                .is_some_and(|n| n.as_ref().is_some_and(|n| n.process_ref().is_some()))
        });
        match added {
            Some(a) => self.derive_addition(&a),
            None => self.derive(),
        }
        // After `derive` (which rebuilds the pools' state): what waits for
        // a pool that is gone is dropped, the rest waits on.
        self.drop_waiting(None);
        self.mail.inputs_done.store(false, Ordering::Relaxed);
        reconfigure
    }
}
