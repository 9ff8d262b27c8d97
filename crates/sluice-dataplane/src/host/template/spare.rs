//! The template's side of its spare (`super::super::spare`): making one
//! like the request the platform names, handing it a start, replacing it.
//!
//! A spare is made **confined** when it can be: a standby of the named
//! request (`super::super::standby`), built from the recipe's shell and
//! with its sandbox closed, which any NF of the same recipe, whatever its
//! name, takes over as a restart takes over a standby. That needs a shell
//! whose build read neither the NF's name nor its restart count. Else it
//! is **bare**: forked, and handed the whole request at its start.

use rustix::event::epoll;
use sluice_sys::sandbox::RunFilter;
use sluice_sys::Forked;

use super::super::output::NfOutput;
use super::super::proto::SpawnRequest;
use super::super::shells::ShellId;
use super::super::spare::{self, Spare, SpareStart};
use super::start::{enter_child, Made};
use super::{Child, Template, TEMPLATE_SLOT};
use crate::nf_loop::exit_code;

impl Template<'_> {
    /// Keeps a spare for the next NF, most likely like `like` and in its
    /// slot: the one kept for another goes.
    pub(super) fn keep_spare(&mut self, like: SpawnRequest) {
        let slot = like.slot;
        if self.arena.slot_domain(slot) != Some(usize::from(like.domain)) {
            return;
        }
        let confine = like.shell
            && self
                .shells
                .find(&like)
                .is_some_and(|id| self.shells.name_free(id) && self.shells.serves_every_start(id));
        let kept_confined = self.standbys.spare_for(&like);
        let kept_bare = self.spare.as_ref().is_some_and(|s| s.slot == slot);
        if (confine && kept_confined) || (!confine && kept_bare) {
            return;
        }
        if let Some(old) = self.spare.take() {
            if let Some(p) = sluice_sys::Pid::from_raw(old.pid) {
                let _ = sluice_sys::kill(p);
            }
        }
        if let Some((old, _)) = self.confined_spare.take() {
            self.standbys.release(old);
        }
        if confine {
            // Nothing waits for it: made at the NFs' priority, not ahead
            // of the answer to the change that asked for it.
            let raised = sluice_sys::own_nice();
            let _ = sluice_sys::set_own_nice(0);
            let made = self.fork_nf(&like, Made::Spare);
            if let Some(n) = raised {
                let _ = sluice_sys::set_own_nice(n);
            }
            match made {
                Ok((pid, _)) => self.confined_spare = Some((slot, pid)),
                Err(e) => {
                    let line = format!("cannot make a spare for slot {slot}: {e}");
                    self.send_log(TEMPLATE_SLOT, 0, line);
                }
            }
            return;
        }
        match self.fork_spare(slot) {
            Ok(s) => self.spare = Some(s),
            Err(e) => {
                let line = format!("cannot make a spare for slot {slot}: {e}");
                self.send_log(TEMPLATE_SLOT, 0, line);
            }
        }
    }

    /// Forks a bare process that waits for a start of `slot`.
    fn fork_spare(&mut self, slot: u32) -> Result<Spare, String> {
        let (r, w) =
            sluice_sys::output_pipe().map_err(|e| format!("cannot create its output pipe: {e}"))?;
        let (input, handover) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| format!("cannot create its hand-over pipe: {e}"))?;
        let capacity = rustix::pipe::fcntl_getpipe_size(&handover).unwrap_or(0);
        // Most NFs run under the allow-list: compiled before the fork, so
        // the spare's copy has it (an NF that needs it from a spare
        // without it is forked instead).
        if self.run_filter.is_none() {
            self.run_filter = RunFilter::compile().ok();
        }
        let me = sluice_sys::getpid();
        // Nothing waits for a spare: it is forked at the NFs' priority,
        // not ahead of the answer to the change that asked for it (the
        // template's raised one put about 100 µs of its fork before each
        // create's answer in `bench instantiate`). The spare itself takes
        // the raised one back: its start is waited for.
        let raised = sluice_sys::own_nice();
        let _ = sluice_sys::set_own_nice(0);
        let forked = sluice_sys::fork_single_threaded();
        if let (Some(n), Ok(Forked::Parent(_)) | Err(_)) = (raised, &forked) {
            let _ = sluice_sys::set_own_nice(n);
        }
        match forked {
            Ok(Forked::Child) => {
                drop((r, handover));
                enter_child(me, w, Some(input));
                if let Some(n) = raised {
                    let _ = sluice_sys::set_own_nice(n);
                }
                sluice_sys::set_thread_name("sluice-spare");
                let Some(start) = spare::wait_for_start(rustix::stdio::stdin()) else {
                    std::process::exit(exit_code::STOPPED);
                };
                self.run_child(me, &start.req, start.shell, &start.join, Made::Instance)
            }
            Ok(Forked::Parent(pid)) => {
                drop((w, input));
                let raw = pid.as_raw_nonzero().get();
                // Its output is the template's to read until its start.
                let _ = epoll::add(
                    &self.epoll,
                    &r,
                    epoll::EventData::new_u64(raw as u64),
                    epoll::EventFlags::IN,
                );
                self.children.insert(
                    raw,
                    Child {
                        slot,
                        generation: u32::MAX,
                        limits: None,
                        standby: true,
                        spare: true,
                        out: Some(NfOutput::new(r)),
                        shell: None,
                    },
                );
                Ok(Spare {
                    slot,
                    pid: raw,
                    handover,
                    shells_before: self.shells.next_id(),
                    has_filter: self.run_filter.is_some(),
                    capacity,
                })
            }
            Err(e) => Err(format!("fork failed: {e}")),
        }
    }

    /// Hands `req` to the spare if it fits: its pid and the shell its NF
    /// comes from. `None`: there is none for this start, or the hand-over
    /// failed (the spare is killed); the caller forks.
    pub(super) fn start_spare(&mut self, req: &SpawnRequest) -> Option<(i32, Option<ShellId>)> {
        let spare = self.spare.take_if(|s| s.fits(req))?;
        let kill = |pid: i32| {
            if let Some(p) = sluice_sys::Pid::from_raw(pid) {
                let _ = sluice_sys::kill(p);
            }
        };
        let Ok((limits, join)) = self.limits_for(req) else {
            // The fork will fail alike, and say why.
            kill(spare.pid);
            return None;
        };
        // Only a shell the spare's copy of the template holds; a shell is
        // not built for it here (the spare would build the NF again).
        let found = self.shells.find(req);
        let shell = spare.shell(found);
        if let (Some(id), None) = (found, shell) {
            self.shells.release(id);
        }
        let start = SpareStart {
            req: req.clone(),
            shell,
            join,
        };
        if !spare.hand_over(&start) {
            if let (Some(key), Some(g)) = (limits, &self.limits) {
                g.remove(key);
            }
            if let Some(id) = shell {
                self.shells.release(id);
            }
            kill(spare.pid);
            return None;
        }
        if let Some(key) = limits {
            self.limit_keys.insert(key);
        }
        let c = self.children.get_mut(&spare.pid)?;
        c.generation = req.generation;
        c.standby = false;
        c.spare = false;
        c.limits = limits;
        c.shell = shell;
        Some((spare.pid, shell))
    }
}
