//! Inline NFs whose code panicked: the NF fails, not the worker.
//!
//! Every call into an inline NF goes through
//! [`InlineNf::call`](crate::inline_nf::InlineNf::call), which catches a
//! panic and marks the NF crashed (`inline_nf.rs`). This file is what the
//! worker does next, under `settings.restart.inline_panic: contain` (the
//! default):
//!
//! 1. What the call held is dropped and counted as `nf_crashed`: the batch
//!    it was given (what is still in it) and what it emitted during the
//!    call. The batch's handles are exact even after a panic mid-pass
//!    (`sluice_mem::HandleBatch` is written for it). Packets the NF kept
//!    in its own state from earlier calls (a queue, a reorder buffer) are
//!    lost with that state; their buffers show in the report's
//!    `leaked_buffers`, and the packets in `unaccounted`.
//! 2. The NF's counters are folded into its totals, its restarts counted
//!    and its `last_exit` set to `panicked: <message>`, as for a process
//!    NF that died; a line goes to its log.
//! 3. Until a fresh instance is in place, packets for it are dropped as
//!    `nf_down` (an inline NF has no ring to hold them in) and its other
//!    hooks (timer, flow ends, stop) are skipped.
//! 4. The restart policy decides as for a process NF (`policy`,
//!    `max_restarts`, `backoff_ms`): after the backoff, the worker's
//!    millisecond maintenance builds a fresh instance from the NF's recipe
//!    in the current plan and puts it in place. The build runs on the
//!    worker's thread (an inline NF lives in its address space), between
//!    two passes; a build that fails or panics leaves the NF down for good.
//!    A new config for the NF (a live reconfigure) also puts a fresh
//!    instance in place.
//!
//! Under `inline_panic: stop` the panic goes on, and the worker fails as
//! for a panic in the platform's own code (`failure.rs`).

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

use sluice_mem::HandleBatch;
use sluice_nf::DropReason;
use sluice_spec::{InlinePanic, RestartMode};

use super::{Worker, MS};
use crate::inline_nf::panic_message;
use crate::nf_rt::Exec;

/// A crashed inline NF waiting for its fresh instance.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InlineDown {
    /// Its id in the plan.
    nf: u16,
    /// Its slot, to tell it from an NF that took its id after a removal.
    slot: u32,
    /// When its code panicked.
    since_ns: u64,
    /// When to build the fresh instance.
    rebuild_at_ns: u64,
}

/// What a call into an inline NF came to ([`Worker::with_inline_io`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InlineCall {
    /// It ran and emitted this many packets.
    Ran(usize),
    /// It had crashed before: not called.
    Down,
    /// Its code panicked during this call.
    Crashed,
}

impl InlineCall {
    /// What it emitted (nothing unless it ran).
    pub(super) fn emitted(self) -> usize {
        match self {
            InlineCall::Ran(n) => n,
            InlineCall::Down | InlineCall::Crashed => 0,
        }
    }

    /// Why what it was given is dropped, unless it ran.
    pub(super) fn drop_reason(self) -> Option<DropReason> {
        match self {
            InlineCall::Ran(_) => None,
            InlineCall::Down => Some(DropReason::NF_DOWN),
            InlineCall::Crashed => Some(DropReason::NF_CRASHED),
        }
    }
}

impl<'a> Worker<'a> {
    /// Inline NF `i`'s code panicked with `payload` during a call that
    /// emitted `emitted`: drops and counts what it emitted, records the
    /// crash and schedules the fresh instance (see the module docs).
    /// Under `inline_panic: stop` the panic goes on from here.
    pub(super) fn inline_crashed(
        &mut self,
        i: u16,
        payload: Box<dyn Any + Send>,
        emitted: &mut HandleBatch,
        now: u64,
    ) {
        if self.cfg.restart.inline_panic == InlinePanic::Stop {
            // Its batch goes with the worker's state (`failure.rs`).
            resume_unwind(payload);
        }
        self.drops.add(DropReason::NF_CRASHED, emitted.len() as u64);
        emitted.drain(|h| self.cache.free(h));
        let policy = &self.cfg.restart;
        let Some(nf) = self.nfs.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        let why = format!("panicked: {}", panic_message(payload.as_ref()));
        nf.retire_instance();
        nf.restarts += 1;
        let allowed = policy.policy != RestartMode::Never && nf.restarts <= policy.max_restarts;
        let what = if allowed {
            format!(
                "its code {why}; the batch it held is dropped; a fresh instance in {} ms \
                 (restart {}/{})",
                policy.backoff_ms, nf.restarts, policy.max_restarts
            )
        } else {
            format!("its code {why}; the batch it held is dropped; not restarting (restart policy)")
        };
        nf.last_exit = Some(why);
        tracing::warn!("NF {}: {what}", nf.name);
        self.logbook
            .push(&nf.name, self.cfg.index, "platform", what);
        if allowed {
            self.inline_down.push(InlineDown {
                nf: i,
                slot: nf.slot,
                since_ns: now,
                rebuild_at_ns: now.saturating_add(policy.backoff_ms.saturating_mul(MS)),
            });
        }
    }

    /// Builds the fresh instances whose backoff has passed (maintenance).
    pub(super) fn rebuild_crashed_inline(&mut self, now: u64) {
        let mut k = 0;
        while k < self.inline_down.len() {
            let d = self.inline_down[k];
            if now < d.rebuild_at_ns {
                k += 1;
                continue;
            }
            self.inline_down.swap_remove(k);
            self.rebuild_inline(d, now);
        }
    }

    fn rebuild_inline(&mut self, d: InlineDown, now: u64) {
        let plan = Rc::clone(&self.plan);
        let registry = self.cfg.registry;
        let Some(nf) = self.nfs.get_mut(d.nf as usize).and_then(Option::as_mut) else {
            return;
        };
        let Exec::Inline(f) = &mut nf.exec else {
            return;
        };
        // Removed meanwhile (the id may be another NF's now), or already
        // whole again (a new config put a fresh instance in place).
        if nf.slot != d.slot || !f.is_crashed() {
            return;
        }
        let Some(recipe) = plan.nf(d.nf).map(|p| &p.recipe) else {
            return;
        };
        let restarts = nf.restarts;
        let built = catch_unwind(AssertUnwindSafe(|| recipe.build(registry, restarts)));
        let line = match built {
            Ok(Ok(fresh)) => {
                nf.control.reset();
                f.replace(fresh);
                // The same recipe: the same timer, due a period from now.
                nf.tick = nf.tick.map(|(every, _)| (every, now + every));
                let us = now.saturating_sub(d.since_ns) as f64 / 1e3;
                nf.restart_times.record(us);
                format!("a fresh instance runs ({us:.0} µs after the panic)")
            }
            Ok(Err(e)) => format!("a fresh instance could not be built: {e}; not restarting"),
            Err(p) => format!(
                "building a fresh instance panicked: {}; not restarting",
                panic_message(p.as_ref())
            ),
        };
        tracing::info!("NF {}: {line}", nf.name);
        self.logbook
            .push(&nf.name, self.cfg.index, "platform", line);
    }
}
