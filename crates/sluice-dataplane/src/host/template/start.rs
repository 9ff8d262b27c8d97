//! How the template starts an NF: by handing the start to the slot's
//! standby (`super::super::standby`) or to its spare (`spare.rs`), or by
//! forking an instance (or a standby) from the recipe's shell. Apart from the template's loop
//! (`mod.rs`) because this is the code that forks: what runs in the child
//! and what the template keeps of it.

use rustix::event::epoll;
use sluice_sys::sandbox::RunFilter;
use sluice_sys::{ChildExits, Forked, LimitGroups};

use super::super::child::{nf_main, standby_main, Fork};
use super::super::output::NfOutput;
use super::super::proto::{FromTemplate, SpawnRequest};
use super::super::shells::ShellId;
use super::super::standby::Taken;
use super::{Child, Template, TEMPLATE_SLOT};
use crate::nf_loop::exit_code;

/// What [`Template::fork_nf`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Made {
    /// An instance that runs at once.
    Instance,
    /// A standby for the slot's next start (`super::super::standby`).
    Standby,
    /// A standby made as the worker's spare: for the next NF of the
    /// request's recipe, whatever its name (`super::super::spare`).
    Spare,
}

impl Template<'_> {
    /// Starts an NF: hands the start to the slot's standby, or forks.
    pub(super) fn spawn(&mut self, req: SpawnRequest) {
        let (slot, generation) = (req.slot, req.generation);
        if self.arena.slot_domain(slot) != Some(usize::from(req.domain)) {
            // The child keeps only its domain's slots: one in another
            // domain would be withdrawn under its feet.
            let error = format!(
                "slot {slot} is not one of trust domain {}'s slots",
                req.domain
            );
            self.fail(slot, generation, error);
            return;
        }
        let now = sluice_sys::monotonic_ns();
        if !req.standby && !self.standbys.is_spare(slot) {
            // Standbys were turned off since this slot's was made.
            self.standbys.release(slot);
        }
        if self.standbys.has(slot) {
            // Taken or killed (made like another NF), the spare is gone
            // either way, and not by accident: its exit is not logged.
            if self.standbys.is_spare(slot) {
                self.confined_spare = None;
            }
            if let Taken::Handed { pid, spare } = self.standbys.take(&req) {
                if let Some(c) = self.children.get_mut(&pid) {
                    c.generation = generation;
                    c.standby = false;
                    c.spare = false;
                }
                let output = self.offer_output(pid, true);
                let _ = self.chan.send(&FromTemplate::Spawned {
                    slot,
                    generation,
                    pid,
                    shell: true,
                    standby: !spare,
                    spare,
                    output,
                });
                if req.standby {
                    self.standbys.want(&req, now);
                }
                return;
            }
        }
        let started = match self.start_spare(&req) {
            Some((pid, shell)) => Ok((pid, shell, true)),
            None => self
                .fork_nf(&req, Made::Instance)
                .map(|(pid, shell)| (pid, shell, false)),
        };
        match started {
            Ok((pid, shell, spare)) => {
                let output = self.offer_output(pid, spare);
                let _ = self.chan.send(&FromTemplate::Spawned {
                    slot,
                    generation,
                    pid,
                    shell: shell.is_some(),
                    standby: false,
                    spare,
                    output,
                });
                if req.standby && shell.is_some_and(|id| self.shells.serves_every_start(id)) {
                    self.standbys.want(&req, now);
                }
            }
            Err(e) => self.fail(slot, generation, e),
        }
    }

    fn fail(&mut self, slot: u32, generation: u32, error: String) {
        let _ = self.chan.send(&FromTemplate::SpawnFailed {
            slot,
            generation,
            error,
        });
    }

    /// Makes the standbys that are due (`super::standby`).
    pub(super) fn make_standbys(&mut self) {
        for req in self.standbys.due(sluice_sys::monotonic_ns()) {
            if let Err(e) = self.fork_nf(&req, Made::Standby) {
                let line = format!("cannot make a standby for slot {}: {e}", req.slot);
                self.send_log(TEMPLATE_SLOT, 0, line);
            }
        }
    }

    /// Forks an instance of `req`, or a standby of it: its pid and the
    /// shell it was forked from. The child never returns.
    pub(super) fn fork_nf(
        &mut self,
        req: &SpawnRequest,
        made: Made,
    ) -> Result<(i32, Option<ShellId>), String> {
        let slot = req.slot;
        let standby = made != Made::Instance;
        let (r, w) =
            sluice_sys::output_pipe().map_err(|e| format!("cannot create its output pipe: {e}"))?;
        // A standby's stdin: where its start comes from.
        let (input, handover) = if standby {
            let (i, h) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| format!("cannot create its hand-over pipe: {e}"))?;
            (Some(i), Some(h))
        } else {
            (None, None)
        };
        let (limits, join) = self.limits_for(req)?;
        let release_limits = |t: &mut Self| {
            if let (Some(key), Some(g)) = (limits, &t.limits) {
                g.remove(key);
            }
        };
        if req.sandbox.seccomp && self.run_filter.is_none() {
            match RunFilter::compile() {
                Ok(f) => self.run_filter = Some(f),
                Err(e) => {
                    release_limits(self);
                    return Err(format!("cannot compile its sandbox: {e}"));
                }
            }
        }
        // Built here once per recipe (and kept), or `None`: the child
        // builds its own, as without shells.
        let shell = self.shells.acquire(req, self.registry);
        let me = sluice_sys::getpid();
        match sluice_sys::fork_single_threaded() {
            Ok(Forked::Child) => {
                drop((r, handover));
                enter_child(me, w, input);
                self.run_child(me, req, shell, &join, made)
            }
            Ok(Forked::Parent(pid)) => {
                drop(w);
                drop(input);
                let raw = pid.as_raw_nonzero().get();
                // Read here only if it stays here: a standby's until its
                // start, every one when the platform cannot take them.
                if standby || !self.hello.output_to_platform {
                    let _ = epoll::add(
                        &self.epoll,
                        &r,
                        epoll::EventData::new_u64(raw as u64),
                        epoll::EventFlags::IN,
                    );
                }
                if let Some(key) = limits {
                    self.limit_keys.insert(key);
                }
                self.children.insert(
                    raw,
                    Child {
                        slot,
                        generation: if standby { u32::MAX } else { req.generation },
                        limits,
                        standby,
                        spare: made == Made::Spare,
                        out: Some(NfOutput::new(r)),
                        shell,
                    },
                );
                if let Some(h) = handover {
                    self.standbys.parked(req, raw, h, made == Made::Spare);
                }
                Ok((raw, shell))
            }
            Err(e) => {
                release_limits(self);
                if let Some(id) = shell {
                    self.shells.release(id);
                }
                Err(format!("fork failed: {e}"))
            }
        }
    }
}

/// First thing in a child of the template: what it inherited is made its
/// own (the template's signal mask, its parent-death signal, its standard
/// streams: `out` for output, `input` or `/dev/null` for input).
pub(super) fn enter_child(
    template: sluice_sys::Pid,
    out: std::os::fd::OwnedFd,
    input: Option<std::os::fd::OwnedFd>,
) {
    ChildExits::unblock_in_child();
    let _ = sluice_sys::die_with_parent(template);
    if sluice_sys::isolate_child_stdio(out, input).is_err() {
        std::process::exit(exit_code::SPAWN_FAILED);
    }
}

impl Template<'_> {
    /// The limit groups of an instance of `req` (made now), and the
    /// `cgroup.procs` files it joins: none when it has no limits.
    pub(super) fn limits_for(
        &mut self,
        req: &SpawnRequest,
    ) -> Result<(Option<u32>, Vec<std::path::PathBuf>), String> {
        // An instance and its standby are two processes: limit groups of
        // their own, two per slot.
        let Some(key) = req.sandbox.limits().any().then(|| {
            let key = req.slot.wrapping_mul(2);
            if self.limit_keys.contains(&key) {
                key + 1
            } else {
                key
            }
        }) else {
            return Ok((None, Vec::new()));
        };
        let join = super::super::sandbox::prepare_limits(&mut self.limits, key, &req.sandbox)
            .map_err(|e| format!("cannot set its limits: {e}"))?;
        Ok((Some(key), join))
    }

    /// In a child forked for `req`: joins its limit groups, runs it (as a
    /// standby when `standby`) and exits with its code.
    pub(super) fn run_child(
        &mut self,
        me: sluice_sys::Pid,
        req: &SpawnRequest,
        shell: Option<ShellId>,
        join: &[std::path::PathBuf],
        made: Made,
    ) -> ! {
        // Into its limit groups before any of its own code runs.
        if let Err(e) = LimitGroups::join(join) {
            eprintln!(
                "sluice: NF {} cannot join its limit groups: {e}",
                req.recipe.name
            );
            std::process::exit(exit_code::SANDBOX_FAILED);
        }
        // The template's descriptors are closed in this process, so
        // its objects must never be dropped here: a panic must not
        // unwind into the template's frames (dropping an already
        // closed descriptor aborts). The hook has printed the panic;
        // exit as a panicking Rust program does.
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let f = Fork {
                built: shell.and_then(|id| self.shells.take_in_child(id)),
                arena: &mut self.arena,
                worker: self.hello.worker,
                req,
                registry: self.registry,
                template: me,
                filter: self.run_filter.as_ref(),
                spare: made == Made::Spare,
            };
            if made != Made::Instance {
                standby_main(f)
            } else {
                nf_main(f)
            }
        }))
        .unwrap_or(exit_code::PANICKED);
        std::process::exit(code);
    }
}
