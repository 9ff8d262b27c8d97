//! [`ForkHost`]: NF processes forked by a template process.
//!
//! The template is this program exec'd again with [`super::TEMPLATE_ARG`]
//! (the embedding binary calls [`super::template_main_if_invoked`] first
//! thing in `main`). It gets the arena's memfd over its control socket and
//! maps it, so it holds nothing of the platform but the packet memory: an
//! NF forked from it starts with a small, clean address space, and the
//! template can be started again at any time, from a platform that already
//! runs threads (a fork without exec could not).
//!
//! If the template dies, every NF it forked dies too (they have
//! `PR_SET_PDEATHSIG`). The host notices at once (its socket closes),
//! makes sure each of those NFs is gone (SIGKILL, then waits until the
//! process no longer runs), reports them `Exited { host_lost }` so the
//! worker reclaims their buffers and restarts them per the restart policy,
//! and starts a new template.
//!
//! The host also reads what its NFs write (`super::output`): the template
//! hands it each NF's output pipe as the NF is forked, when this process
//! may take descriptors from the template (`pidfd_getfd`; checked at each
//! template start, else the template reads them and sends their lines).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use sluice_sys::ExitStatus;

use super::launch::{launch, HostConfig, Running};
use super::output::Outputs;
use super::proto::{ArenaLayout, FromTemplate, Hello, SpawnRequest, ToTemplate};
use super::{HostError, HostEvent, NfHost};

/// How long to wait for NFs of a dead template to be gone.
const GONE_TIMEOUT_MS: u64 = 5_000;

/// An instance this host started and has not yet reported gone.
#[derive(Debug, Clone, Copy)]
struct Instance {
    generation: u32,
    /// 0 until the template reports it forked.
    pid: i32,
    /// Kill it as soon as its pid is known.
    doomed: bool,
}

/// NF processes forked from a template process (see the module docs).
pub struct ForkHost {
    cfg: HostConfig,
    hello: Hello,
    arena_fds: Vec<OwnedFd>,
    tpl: Option<Running>,
    live: HashMap<u32, Instance>,
    restarts: u32,
    inbox: Vec<FromTemplate>,
    /// The NFs' output pipes (`None` if no epoll could be made: the
    /// template then reads them).
    outputs: Option<Outputs>,
    /// A pipe could not be taken once: said once.
    output_warned: bool,
    /// What the template was last asked to keep a spare like (slot and
    /// [`SpawnRequest::spare_key`]; a new template has none).
    spare_asked: Option<(u32, Vec<u8>)>,
}

impl ForkHost {
    /// Starts the template for `cfg.worker` over `arena`. Call it from a
    /// thread that lives as long as the host: the template's parent-death
    /// signal follows the thread that started it.
    pub fn start(cfg: HostConfig, arena: &sluice_mem::Arena) -> io::Result<ForkHost> {
        let hello = Hello {
            platform_pid: sluice_sys::getpid().as_raw_nonzero().get(),
            arena: ArenaLayout::of(arena),
            cycles_q32: sluice_sys::cycles_calibration(),
            worker: cfg.worker,
            output_to_platform: false,
        };
        let mut host = ForkHost {
            arena_fds: arena
                .fds()
                .into_iter()
                .map(|fd| fd.try_clone_to_owned())
                .collect::<io::Result<_>>()?,
            cfg,
            hello,
            tpl: None,
            live: HashMap::new(),
            restarts: 0,
            inbox: Vec::new(),
            outputs: Outputs::new()
                .inspect_err(|e| {
                    tracing::warn!("the NF template reads NF output itself (no epoll: {e})")
                })
                .ok(),
            output_warned: false,
            spare_asked: None,
        };
        host.tpl = Some(launch(
            &host.cfg,
            &host.hello,
            &host.arena_fds,
            host.outputs.is_some(),
        )?);
        Ok(host)
    }

    /// The template's socket closed: it died (or broke the protocol).
    /// Everything it forked dies with it; make sure of that, report each,
    /// and start a new template.
    fn lost(&mut self, events: &mut Vec<HostEvent>) {
        let Some(mut t) = self.tpl.take() else { return };
        let _ = t.child.kill();
        let status = t
            .child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        self.bury_all(true, events);
        let why = format!(
            "the NF template of worker {} died ({status})",
            self.cfg.worker
        );
        match launch(
            &self.cfg,
            &self.hello,
            &self.arena_fds,
            self.outputs.is_some(),
        ) {
            Ok(r) => {
                self.tpl = Some(r);
                self.spare_asked = None;
                self.restarts += 1;
                events.push(HostEvent::HostRestarted {
                    why: format!("{why}; started a new one"),
                });
            }
            Err(e) => events.push(HostEvent::HostFailed {
                why: format!("{why}; cannot start a new one: {e}"),
            }),
        }
    }

    /// Kills every live instance, waits until each is gone, and reports
    /// them exited.
    fn bury_all(&mut self, host_lost: bool, events: &mut Vec<HostEvent>) {
        let pids: Vec<sluice_sys::Pid> = self
            .live
            .values()
            .filter_map(|i| sluice_sys::Pid::from_raw(i.pid))
            .collect();
        for &p in &pids {
            let _ = sluice_sys::kill(p);
        }
        let deadline = sluice_sys::monotonic_ns() + GONE_TIMEOUT_MS * 1_000_000;
        while pids.iter().any(|&p| !sluice_sys::process_gone(p))
            && sluice_sys::monotonic_ns() < deadline
        {
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        // What they wrote comes before their exits.
        if let Some(o) = &mut self.outputs {
            o.end_all(events);
        }
        let mut slots: Vec<(u32, Instance)> = self.live.drain().collect();
        slots.sort_by_key(|(s, _)| *s);
        for (slot, i) in slots {
            events.push(HostEvent::Exited {
                slot,
                generation: i.generation,
                pid: i.pid,
                status: ExitStatus::Signal(9),
                host_lost,
            });
        }
    }

    fn take_messages(&mut self, events: &mut Vec<HostEvent>) {
        let Some(t) = &mut self.tpl else { return };
        t.chan.flush();
        t.chan.recv(&mut self.inbox);
        for m in self.inbox.drain(..) {
            match m {
                FromTemplate::Ready { .. } => {}
                FromTemplate::Spawned {
                    slot,
                    generation,
                    pid,
                    shell,
                    standby,
                    spare,
                    output,
                } => {
                    if let Some(fd) = output {
                        let taken = match (&mut self.outputs, &t.pidfd) {
                            (Some(o), Some(pidfd)) => sluice_sys::take_fd(pidfd.as_fd(), fd)
                                .and_then(|f| o.watch(pid, slot, generation, f)),
                            _ => Err(io::Error::other("not taking NF output")),
                        };
                        if let Err(e) = taken {
                            if !std::mem::replace(&mut self.output_warned, true) {
                                tracing::warn!("cannot take the output of NF process {pid}: {e}");
                            }
                        }
                        // Taken or not, the template's copy is no use.
                        let _ = t.chan.send(&ToTemplate::OutputTaken { pid });
                    }
                    if let Some(i) = self.live.get_mut(&slot) {
                        if i.generation == generation {
                            i.pid = pid;
                            if i.doomed {
                                if let Some(p) = sluice_sys::Pid::from_raw(pid) {
                                    let _ = sluice_sys::kill(p);
                                }
                            }
                        }
                    }
                    events.push(HostEvent::Spawned {
                        slot,
                        generation,
                        pid,
                        shell,
                        standby,
                        spare,
                    });
                }
                FromTemplate::SpawnFailed {
                    slot,
                    generation,
                    error,
                } => {
                    if self
                        .live
                        .get(&slot)
                        .is_some_and(|i| i.generation == generation)
                    {
                        self.live.remove(&slot);
                    }
                    events.push(HostEvent::Log {
                        slot,
                        generation,
                        line: format!("cannot start: {error}"),
                    });
                    events.push(HostEvent::Exited {
                        slot,
                        generation,
                        pid: 0,
                        status: ExitStatus::Code(crate::nf_loop::exit_code::SPAWN_FAILED),
                        host_lost: false,
                    });
                }
                FromTemplate::Exited {
                    slot,
                    generation,
                    pid,
                    status,
                } => {
                    if self
                        .live
                        .get(&slot)
                        .is_some_and(|i| i.generation == generation)
                    {
                        self.live.remove(&slot);
                    }
                    // Its last lines before its exit.
                    if let Some(o) = &mut self.outputs {
                        o.ended(pid, events);
                    }
                    events.push(HostEvent::Exited {
                        slot,
                        generation,
                        pid,
                        status: status.into(),
                        host_lost: false,
                    });
                }
                FromTemplate::Log {
                    slot,
                    generation,
                    line,
                } => events.push(HostEvent::Log {
                    slot,
                    generation,
                    line,
                }),
            }
        }
    }
}

impl NfHost for ForkHost {
    fn spawn(&mut self, req: SpawnRequest) -> Result<(), HostError> {
        let Some(t) = &mut self.tpl else {
            return Err(HostError(format!(
                "the NF template of worker {} is down",
                self.cfg.worker
            )));
        };
        let (slot, generation) = (req.slot, req.generation);
        t.chan
            .send(&ToTemplate::Spawn(req))
            .map_err(|e| HostError(format!("cannot reach the NF template: {e}")))?;
        self.live.insert(
            slot,
            Instance {
                generation,
                pid: 0,
                doomed: false,
            },
        );
        Ok(())
    }

    fn kill(&mut self, slot: u32, generation: u32) {
        if let Some(i) = self.live.get_mut(&slot) {
            if i.generation != generation {
                return;
            }
            match sluice_sys::Pid::from_raw(i.pid) {
                Some(p) => {
                    let _ = sluice_sys::kill(p);
                }
                None => i.doomed = true,
            }
        }
    }

    fn release(&mut self, slot: u32) {
        if let Some(t) = &mut self.tpl {
            // A template that is gone took its standbys with it.
            let _ = t.chan.send(&ToTemplate::Release { slot });
        }
    }

    fn keep_spare(&mut self, like: SpawnRequest) {
        let asked = Some((like.slot, like.spare_key()));
        if self.spare_asked == asked {
            return;
        }
        if let Some(t) = &mut self.tpl {
            if t.chan.send(&ToTemplate::Spare(like)).is_ok() {
                self.spare_asked = asked;
            }
        }
    }

    fn poll(&mut self, events: &mut Vec<HostEvent>) {
        if let Some(o) = &mut self.outputs {
            o.read_ready(events);
        }
        self.take_messages(events);
        if self.tpl.as_ref().is_some_and(|t| t.chan.is_closed()) {
            self.lost(events);
        }
    }

    fn wait(&mut self, timeout_ms: i32) {
        if let Some(t) = &mut self.tpl {
            t.chan.flush();
            let _ = sluice_sys::wait_readable(t.chan.as_fd(), timeout_ms);
        } else {
            std::thread::sleep(std::time::Duration::from_millis(timeout_ms.max(0) as u64));
        }
    }

    fn shutdown(&mut self, events: &mut Vec<HostEvent>) {
        if let Some(t) = &mut self.tpl {
            let _ = t.chan.send(&ToTemplate::Quit);
            let deadline = sluice_sys::monotonic_ns() + 3_000_000_000;
            while !self.tpl.as_ref().is_some_and(|t| t.chan.is_closed())
                && sluice_sys::monotonic_ns() < deadline
            {
                self.wait(20);
                self.take_messages(events);
            }
        }
        if let Some(mut t) = self.tpl.take() {
            if !t.chan.is_closed() {
                let _ = t.child.kill();
            }
            let _ = t.child.wait();
        }
        // Anything the template did not report (it was killed): make sure.
        self.bury_all(false, events);
    }

    fn restarts(&self) -> u32 {
        self.restarts
    }
}

impl Drop for ForkHost {
    fn drop(&mut self) {
        if self.tpl.is_some() {
            let mut ignored = Vec::new();
            self.shutdown(&mut ignored);
        }
    }
}
