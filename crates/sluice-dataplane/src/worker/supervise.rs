//! Supervising process NFs: starting them through the host, noticing that
//! they run, reclaiming their buffers when they exit and restarting them
//! per the restart policy.
//!
//! **A crash loses only what the NF held.** When an instance dies, what it
//! had finished and queued back is steered on; what still waits in its
//! receive ring, never dequeued, stays there for the next instance (see
//! `NfLink::reclaim_held`); only the packets it had taken in are lost
//! (`nf_crashed`). While it is down, packets keep queueing in its ring
//! (upstream hops and ingress back off when the ring is full, as for any
//! slow NF) for up to `settings.restart.hold_ms`; past that bound what is
//! queued, and whatever comes until an instance runs, is dropped as
//! `nf_down`.

use std::sync::atomic::Ordering;

use sluice_mem::{control::state, MAX_BATCH};
use sluice_nf::DropReason;
use sluice_spec::RestartMode;
use sluice_sys::ExitStatus;

use super::{Worker, MS};
use crate::flow_table::FlowState;
use crate::host::{HostEvent, NfHost};
use crate::nf_loop::{exit_code, STOP_CALLS_MAX};
use crate::nf_rt::{Exec, NfRt, Phase};
use crate::wakeup::WakeGate;

/// Asks the host to start `nf` as a new generation in its slot, keeping a
/// standby for its next start when `standby` (`settings.restart.standby`).
pub(super) fn spawn<'a>(
    host: &mut Option<Box<dyn NfHost + 'a>>,
    nf: &mut NfRt<'_>,
    now: u64,
    standby: bool,
) -> Result<(), String> {
    let control = nf.control;
    let restarts = nf.restarts;
    let Exec::Process(p) = &mut nf.exec else {
        return Ok(());
    };
    p.generation = p.generation.wrapping_add(1);
    control.reset();
    // Packets may queue before the NF runs: its spare stash must be
    // filled from the start, not once it announces its own target.
    control
        .spare_target
        .store(p.alloc_reserve, Ordering::Relaxed);
    control.generation.store(p.generation, Ordering::Relaxed);
    control.state.store(state::STARTING, Ordering::Release);
    p.phase = Phase::Starting;
    p.pid = 0;
    p.spawn_requested_ns = now;
    let mut req = p.spawn.clone();
    req.generation = p.generation;
    req.restarts = restarts;
    req.standby = standby && req.shell;
    let host = host
        .as_mut()
        .ok_or("process NFs need an NF host (the template process)")?;
    host.spawn(req).map_err(|e| {
        p.phase = Phase::Failed;
        e.to_string()
    })
}

/// Notices that a starting instance runs; returns its start-up time, µs,
/// and records the restart's time when it replaces one that died.
///
/// Running also needs the host's word on its pid: the instance may report
/// itself running before the host's `Spawned` event arrives (a start from
/// a shell or a spare takes less time than the message), and what it
/// writes in its own control block is not to be trusted. Until the event
/// comes it stays starting, so a running instance always has its pid. The
/// start-up time is the instance's own clock reading either way.
pub(super) fn advance(nf: &mut NfRt<'_>, now: u64) -> Option<f64> {
    let control = nf.control;
    let p = nf.process()?;
    if p.phase != Phase::Starting
        || p.pid == 0
        || control.state.load(Ordering::Acquire) != state::RUNNING
    {
        return None;
    }
    p.phase = Phase::Running;
    let at = control.running_since_ns.load(Ordering::Relaxed);
    let at = if at >= p.spawn_requested_ns && at <= now {
        at
    } else {
        now
    };
    let startup_us = (at - p.spawn_requested_ns) as f64 / 1e3;
    let down_since = std::mem::take(&mut p.down_since_ns);
    if down_since != 0 && down_since <= at {
        nf.restart_times.record((at - down_since) as f64 / 1e3);
    }
    Some(startup_us)
}

impl<'a> Worker<'a> {
    /// The live process NF in `slot`.
    fn live_by_slot(&self, slot: u32) -> Option<u16> {
        self.bells.nf_in_slot(slot)
    }

    pub(super) fn poll_host(&mut self, now: u64) {
        let Some(host) = &mut self.host else { return };
        let mut events = Vec::new();
        host.poll(&mut events);
        for ev in events {
            self.on_host_event(ev, now);
        }
    }

    pub(super) fn on_host_event(&mut self, ev: HostEvent, now: u64) {
        match ev {
            HostEvent::Spawned {
                slot,
                generation,
                pid,
                shell,
                standby,
                spare,
            } => {
                let nf = match self.live_by_slot(slot) {
                    Some(i) => self.nfs[i as usize].as_mut(),
                    None => self.cmd.staged_by_slot(slot),
                };
                let Some(nf) = nf else { return };
                let Some(p) = nf.process().filter(|p| p.generation == generation) else {
                    return;
                };
                p.pid = pid;
                self.sched.spawned(slot, pid);
                nf.starts += 1;
                // A spare's start is counted apart, whether its NF came
                // from a shell or was built there: the starts partition
                // into forks, forks of a shell, standbys' and spares'.
                nf.shell_starts += u32::from(shell && !spare);
                nf.standby_starts += u32::from(standby);
                nf.spare_starts += u32::from(spare);
            }
            HostEvent::Exited {
                slot,
                generation,
                pid,
                status,
                host_lost,
            } => {
                self.sched.exited(slot, pid);
                self.on_exit(slot, generation, pid, status, host_lost, now)
            }
            HostEvent::Log { slot, line, .. } => {
                let name = match self.live_by_slot(slot) {
                    Some(i) => self.nfs[i as usize].as_ref().map(|n| n.name.clone()),
                    None => match self.cmd.staged_by_slot(slot) {
                        Some(n) => Some(n.name.clone()),
                        None => self.cmd.retiring_by_slot(slot).map(|n| n.name.clone()),
                    },
                };
                let name = name.unwrap_or_else(|| "template".into());
                tracing::info!(target: "sluice::nf", nf = %name, "{line}");
                self.logbook.push(&name, self.cfg.index, "nf", line);
            }
            HostEvent::HostRestarted { why } => {
                tracing::error!("{why}; its NFs are restarted per the restart policy");
            }
            HostEvent::HostFailed { why } => {
                tracing::error!("{why}; process NFs of worker {} cannot run", self.cfg.index);
            }
        }
    }

    fn on_exit(
        &mut self,
        slot: u32,
        generation: u32,
        pid: i32,
        status: ExitStatus,
        host_lost: bool,
        now: u64,
    ) {
        let why = if host_lost {
            format!("{status} with its template")
        } else {
            status.to_string()
        };
        // An instance that was being retired, or that never served.
        let retiring = self.cmd.retiring.iter().any(|n| n.slot == slot);
        let nf = if retiring {
            self.cmd.retiring_by_slot(slot)
        } else {
            self.cmd.staged_by_slot(slot)
        };
        if let Some(nf) = nf {
            let name = nf.name.clone();
            if let Some(p) = nf.process() {
                if p.generation == generation {
                    let requested = p.phase == Phase::Stopping;
                    p.phase = if requested {
                        Phase::Stopped
                    } else {
                        Phase::Failed
                    };
                    p.pid = 0;
                    if !requested {
                        nf.last_exit = Some(why.clone());
                        tracing::warn!("NF {name} (pid {pid}) {why} before it served");
                    }
                }
            }
            return;
        }
        let Some(i) = self.live_by_slot(slot) else {
            return;
        };
        match self.nfs[i as usize].as_mut().and_then(|n| n.process()) {
            Some(p) if p.generation == generation => {}
            _ => return,
        }
        self.salvage_output(i, now);
        let nf = self.nfs[i as usize].as_mut().expect("live above");
        let Exec::Process(p) = &mut nf.exec else {
            return;
        };
        let requested = matches!(p.phase, Phase::Stopping);
        p.pid = 0;
        if requested {
            let lost = p.link.reclaim(&mut self.cache).packets as u64;
            p.pending_events.clear();
            let recycle = std::mem::take(&mut p.recycle);
            nf.retire_instance();
            self.drops.add(DropReason::SHUTDOWN, lost);
            if let Some(p) = nf.process() {
                p.phase = Phase::Stopped;
            }
            if status != ExitStatus::Code(0) {
                nf.last_exit = Some(why);
            }
            if recycle {
                self.recycled(i, now);
            }
            return;
        }
        let (reclaimed, queued_events) = p.link.reclaim_held(&mut self.cache);
        let lost = reclaimed.packets as u64;
        let stuck_events: Vec<u32> = p.pending_events.drain(..).collect();
        nf.retire_instance();
        self.drops.add(DropReason::NF_CRASHED, lost);
        nf.restarts += 1;
        nf.last_exit = Some(why.clone());
        match status {
            ExitStatus::Signal(sluice_sys::sandbox::KILL_SIGNAL) => nf.sandbox_kills += 1,
            ExitStatus::OutOfMemory => nf.oom_kills += 1,
            _ => {}
        }
        let policy = &self.cfg.restart;
        let allowed = match policy.policy {
            RestartMode::Always => true,
            RestartMode::OnFailure => status != ExitStatus::Code(0),
            RestartMode::Never => false,
        } && nf.restarts <= policy.max_restarts
            && status != ExitStatus::Code(exit_code::BUILD_FAILED)
            && status != ExitStatus::Code(exit_code::SANDBOX_FAILED)
            && status != ExitStatus::Code(exit_code::SPAWN_FAILED);
        let (name, restarts) = (nf.name.clone(), nf.restarts);
        let backoff_ns = policy.backoff_ms.saturating_mul(MS);
        let hold_ns = policy.hold_ms.saturating_mul(MS);
        if let Some(p) = nf.process() {
            if allowed {
                p.down_since_ns = now;
            }
            p.phase = if allowed {
                Phase::Down {
                    respawn_at_ns: now.saturating_add(backoff_ns),
                    hold_until_ns: now.saturating_add(hold_ns).max(1),
                }
            } else {
                Phase::Failed
            };
        }
        let what = format!(
            "NF {name} (pid {pid}) {why}; reclaimed {lost} buffers; {}",
            if allowed {
                format!(
                    "restarting in {} ms (restart {restarts}/{})",
                    policy.backoff_ms, policy.max_restarts
                )
            } else {
                "not restarting (restart policy)".to_string()
            }
        );
        tracing::warn!("{what}");
        self.logbook.push(&name, self.cfg.index, "platform", what);
        if !allowed {
            self.drop_queue(i);
            if let Some(h) = &mut self.host {
                h.release(slot);
            }
        }
        // End markers the dead instance had taken in move on past it;
        // those still queued wait for the next instance like packets.
        for id in stuck_events {
            self.marker_passed(id, i, now);
        }
        let stuck: Vec<u32> = self
            .flows
            .closing_ids()
            .filter(|&id| !(allowed && queued_events.contains(&id)))
            .filter(|&id| {
                self.flows
                    .entry(id)
                    .is_some_and(|e| e.state == FlowState::Closing && e.marker_nf == i)
            })
            .collect();
        for id in stuck {
            self.marker_passed(id, i, now);
        }
        // Without a backoff the successor starts now, not at the next
        // maintenance tick up to a millisecond later.
        if allowed && backoff_ns == 0 {
            self.respawn(i, now);
        }
    }

    /// Starts a down NF's next instance (its wake gate starts afresh).
    pub(super) fn respawn(&mut self, i: u16, now: u64) {
        let gate = &mut self.gates[i as usize];
        *gate = WakeGate::new(*gate.policy());
        let Some(nf) = self.nfs[i as usize].as_mut() else {
            return;
        };
        if let Err(e) = spawn(&mut self.host, nf, now, self.cfg.restart.standby) {
            tracing::error!("cannot restart NF {}: {e}", nf.name);
            self.drop_queue(i);
        }
    }

    /// Drops what waits for a down NF (it will not run again, or not soon
    /// enough) as `nf_down`.
    pub(super) fn drop_queue(&mut self, i: u16) {
        let Some(p) = self.nfs[i as usize].as_mut().and_then(|n| n.process()) else {
            return;
        };
        let lost = p.link.reclaim(&mut self.cache).packets as u64;
        self.drops.add(DropReason::NF_DOWN, lost);
    }

    /// Steers what a dead NF had already finished and queued back (its
    /// transmit ring is stable now): those packets were processed, so they
    /// move on instead of being counted as lost.
    pub(super) fn salvage_output(&mut self, i: u16, now: u64) {
        let pool = self.pool;
        for _ in 0..STOP_CALLS_MAX {
            let mut b = self.take_batch();
            let Some(p) = self
                .nfs
                .get_mut(i as usize)
                .and_then(Option::as_mut)
                .and_then(|n| n.process())
            else {
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
            if let Some(nf) = self.nf_mut(i) {
                nf.originated += o.originated as u64;
                nf.invalid_handles += o.invalid as u64;
            }
            self.drops.invalid_handles += o.invalid as u64;
            self.regroup_after(i, &mut b);
            self.put_batch(b);
            self.dispatch(now);
            self.take_answers(i);
            let mut events = std::mem::take(&mut self.events);
            for id in events.drain(..) {
                self.marker_passed(id, i, now);
            }
            self.events = events;
            if o.received + o.events + o.invalid == 0 {
                return;
            }
        }
    }

    /// Kills an NF that broke the ring protocol (its exit is then handled
    /// like any crash).
    pub(super) fn condemn(&mut self, i: u16, why: &str) {
        let Some(nf) = self.nf_mut(i) else { return };
        let (name, slot) = (nf.name.clone(), nf.slot);
        let Some(p) = nf.process() else { return };
        let (generation, pid) = (p.generation, p.pid);
        if !p.phase.alive() {
            return;
        }
        tracing::warn!("killing NF {name} (pid {pid}): {why}");
        p.phase = Phase::Down {
            respawn_at_ns: u64::MAX,
            hold_until_ns: u64::MAX,
        };
        if let Some(h) = &mut self.host {
            h.kill(slot, generation);
        }
    }

    /// Notices the staged (not yet installed) NFs that now run. Called on
    /// every pass while a prepare waits for them, so a change does not
    /// wait for the next maintenance tick.
    pub(super) fn advance_staged(&mut self, now: u64) {
        let mut started = Vec::new();
        if let Some(staged) = self.cmd.staged_mut() {
            for nf in staged {
                if let Some(us) = advance(nf, now) {
                    nf.record_startup(us);
                    let pid = nf.process_ref().map_or(0, |p| p.pid);
                    started.push((nf.name.clone(), pid, us));
                }
            }
        }
        for (name, pid, us) in started {
            let line = format!("running (pid {pid}, started in {us:.0} µs)");
            self.logbook.push(&name, self.cfg.index, "platform", line);
        }
    }
}
