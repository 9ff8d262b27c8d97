//! Supervising process NFs: spawning them through the template, noticing
//! that they run, reclaiming their buffers when they exit and restarting
//! them per the restart policy; plus the worker's millisecond maintenance.

use std::sync::atomic::Ordering;

use sluice_mem::{control::state, MAX_BATCH};
use sluice_nf::DropReason;
use sluice_spec::RestartMode;
use sluice_sys::ExitStatus;

use super::{Worker, MS, STOP_CALLS_MAX};
use crate::flow_table::FlowState;
use crate::nf_rt::{Exec, Phase};
use crate::plan::Hop;
use crate::template::TemplateEvent;
use crate::wakeup::WakeGate;

impl<'a> Worker<'a> {
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

    pub(super) fn spawn(&mut self, i: usize, now: u64) -> Result<(), String> {
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

    pub(super) fn poll_template(&mut self, now: u64) {
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

    pub(super) fn on_template_event(&mut self, ev: TemplateEvent, now: u64) {
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

    pub(super) fn on_exit(
        &mut self,
        i: usize,
        generation: u32,
        pid: i32,
        status: ExitStatus,
        now: u64,
    ) {
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
    pub(super) fn salvage_output(&mut self, i: usize, now: u64) {
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
    pub(super) fn condemn(&mut self, i: usize, why: &str) {
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

    pub(super) fn maintain(&mut self, now: u64) {
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
}
