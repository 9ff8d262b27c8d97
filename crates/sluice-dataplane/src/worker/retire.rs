//! Taking NFs and ports out of service. Removed inline NFs are stopped at
//! once (their `stop` hook emits what they hold, steered on their old
//! routes); removed process NFs are asked to stop and stay `retiring`
//! until they have exited, handing back what they held, and only then is
//! their slot freed. Whatever a removed NF or port counted is folded into
//! the totals of things gone, so no count is lost with it.

use std::sync::atomic::Ordering;

use sluice_mem::control::state;
use sluice_nf::runtime::run_stop;
use sluice_nf::DropReason;

use super::Worker;
use crate::nf_loop::STOP_CALLS_MAX;
use crate::nf_rt::{Exec, NfRt, Phase};
use crate::ports::PortRt;

impl<'a> Worker<'a> {
    /// Takes an NF out of service: inline NFs release what they hold now
    /// (steered on their old routes); process NFs are asked to stop.
    pub(super) fn remove_nf(&mut self, mut nf: NfRt<'a>, now: u64) {
        if let Exec::Inline(_) = nf.exec {
            // Put it back briefly so its emitted packets are steered as
            // its own (routing reads the NF's id from its table slot).
            let id = nf.id as usize;
            let displaced = self.nfs[id].replace(nf);
            for _ in 0..STOP_CALLS_MAX {
                let emitted = self.with_inline_io(id as u16, now, run_stop).emitted();
                self.dispatch(now);
                if emitted < sluice_mem::MAX_BATCH {
                    break;
                }
            }
            let nf = std::mem::replace(&mut self.nfs[id], displaced).expect("put back above");
            self.fold_away(&nf);
            self.logbook.forget(&nf.name);
            self.mail.free_slot(nf.slot);
            return;
        }
        self.retire(&mut nf);
        self.cmd.retiring.push(nf);
    }

    /// Asks a process NF to stop (it exits, then `reap_retiring` frees it).
    pub(super) fn retire(&mut self, nf: &mut NfRt<'a>) {
        let control = nf.control;
        if let Some(p) = nf.process() {
            match p.phase {
                Phase::Starting | Phase::Running => {
                    control.stop.store(1, Ordering::Release);
                    p.phase = Phase::Stopping;
                    p.link.wake();
                }
                Phase::Stopping => {}
                _ => p.phase = Phase::Stopped,
            }
        }
    }

    /// Takes back what a retiring NF hands back after its drain timed out:
    /// its packets are counted as `nf_removed` (their routes may be gone).
    pub(super) fn salvage_retiring(&mut self, k: usize) {
        let pool = self.pool;
        let mut b = self.take_batch();
        let arena = self.arena;
        if let Some(p) = self.cmd.retiring[k].process() {
            let _ = p.link.recv(pool, &mut b, sluice_mem::MAX_BATCH);
            let mut events = Vec::new();
            p.link.take_events(&mut events);
            let _ = p.link.take_blob_answers(arena, &mut self.cache);
        }
        self.drops.add(DropReason::NF_REMOVED, b.len() as u64);
        b.drain(|h| self.cache.free(h));
        self.put_batch(b);
    }

    /// Frees retiring NFs that have exited (or that never started).
    pub(super) fn reap_retiring(&mut self) {
        let mut k = 0;
        while k < self.cmd.retiring.len() {
            let nf = &mut self.cmd.retiring[k];
            let done = nf.process_ref().is_none_or(|p| {
                matches!(p.phase, Phase::Stopped | Phase::Failed | Phase::Down { .. })
            });
            if !done {
                // Keep draining what it hands back while it stops.
                if nf.process_ref().is_some_and(|p| p.link.in_flight() > 0) {
                    self.salvage_retiring(k);
                }
                k += 1;
                continue;
            }
            let mut nf = self.cmd.retiring.swap_remove(k);
            if let Some(p) = nf.process() {
                let lost = p.link.reclaim(&mut self.cache).packets as u64;
                self.drops.add(DropReason::NF_REMOVED, lost);
            }
            nf.retire_instance();
            nf.control.state.store(state::EMPTY, Ordering::Relaxed);
            self.fold_away(&nf);
            if let (Some(h), true) = (&mut self.host, nf.process_ref().is_some()) {
                h.release(nf.slot);
            }
            self.mail.free_slot(nf.slot);
        }
    }

    /// Adds a removed NF's counters to the totals of things gone.
    pub(super) fn fold_away(&mut self, nf: &NfRt<'a>) {
        for (name, &n) in nf.drop_names.iter().zip(&nf.local_drops) {
            if n > 0 {
                *self
                    .gone
                    .nf_drops
                    .entry(format!("{}:{name}", nf.name))
                    .or_default() += n;
            }
        }
        self.gone.originated += nf.originated;
        self.gone.invalid_handles += nf.invalid_handles;
    }

    pub(super) fn remove_port(&mut self, mut p: PortRt) {
        p.release_held(&mut self.cache);
        if let Err(e) = p.flush() {
            tracing::warn!("port {}: {e}", p.name);
        }
        self.gone.ports += &p.report_stats();
    }
}
