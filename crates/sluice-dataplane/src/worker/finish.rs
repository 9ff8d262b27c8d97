//! Stopping a worker: end every flow (so NFs see `flow_end`), stop the
//! process NFs and the host, let inline NFs release what they hold,
//! reclaim anything left and flush the output ports.

use std::sync::atomic::Ordering;

use sluice_mem::MAX_BATCH;
use sluice_nf::runtime::run_stop;
use sluice_nf::DropReason;

use super::{Worker, MS};
use crate::nf_loop::STOP_CALLS_MAX;
use crate::nf_rt::{Exec, Phase};
use crate::report_merge::ShardResult;

impl<'a> Worker<'a> {
    /// Ends every remaining flow so each NF gets its `flow_end` (and can
    /// flush per-flow state) before it stops; waits up to a second for the
    /// end markers to pass through process NFs.
    fn end_all_flows(&mut self) {
        let now = sluice_sys::monotonic_ns();
        for id in self.flows.active_ids() {
            if self.flows.close(id) {
                self.start_marker(id, now);
            }
        }
        let deadline = now + 1_000 * MS;
        while self.flows.live() > 0 && sluice_sys::monotonic_ns() < deadline {
            let now = sluice_sys::monotonic_ns();
            // Draining: every NF, rung or not.
            self.bells.mark_all();
            if self.poll_nfs(now) == 0 {
                self.maintain(now);
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
    }

    /// Stops every NF (after the drain), returns all buffers and flushes
    /// output ports.
    pub(super) fn finish(&mut self) {
        self.drop_waiting(Some(sluice_nf::DropReason::SHUTDOWN));
        self.end_all_flows();
        // The last look at the NFs' CPU time, while their processes live.
        self.sample_cpu(usize::MAX);
        for k in 0..self.derived.process_ids.len() {
            let i = self.derived.process_ids[k];
            let Some(nf) = self.nf_mut(i) else { continue };
            let control = nf.control;
            if let Some(p) = nf.process() {
                // A member being forked afresh is not started again.
                p.recycle = false;
                if matches!(p.phase, Phase::Starting | Phase::Running) {
                    control.stop.store(1, Ordering::Release);
                    p.phase = Phase::Stopping;
                    p.link.wake();
                }
            }
        }
        let deadline = sluice_sys::monotonic_ns() + 3_000 * MS;
        while sluice_sys::monotonic_ns() < deadline {
            let now = sluice_sys::monotonic_ns();
            self.bells.mark_all();
            self.poll_nfs(now);
            self.poll_host(now);
            let stopping = self.derived.process_ids.iter().any(|&i| {
                self.nfs[i as usize]
                    .as_ref()
                    .and_then(|n| n.process_ref())
                    .is_some_and(|p| p.phase == Phase::Stopping)
            }) || !self.cmd.retiring.is_empty();
            if !stopping {
                break;
            }
            self.reap_retiring();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        // Inline NFs release what they hold last, so nothing they emit meets
        // a process NF that is still draining.
        let now = sluice_sys::monotonic_ns();
        for i in 0..self.nfs.len() as u16 {
            if matches!(self.nf_mut(i).map(|n| &n.exec), Some(Exec::Inline(_))) {
                // `stop` runs again while it fills its output (one call may
                // emit at most a batch).
                for _ in 0..STOP_CALLS_MAX {
                    let emitted = self.with_inline_io(i, now, run_stop).emitted();
                    self.dispatch(now);
                    if emitted < MAX_BATCH {
                        break;
                    }
                }
            }
        }
        if let Some(mut host) = self.host.take() {
            let now = sluice_sys::monotonic_ns();
            let mut events = Vec::new();
            host.shutdown(&mut events);
            self.host = Some(host);
            for ev in events {
                self.on_host_event(ev, now);
            }
        }
        self.reap_retiring();
        for nf in self.nfs.iter_mut().flatten() {
            if let Exec::Process(p) = &mut nf.exec {
                let n = p.link.reclaim(&mut self.cache).packets as u64;
                self.drops.add(DropReason::SHUTDOWN, n);
            }
        }
        for p in self.ports.iter_mut().flatten() {
            p.release_held(&mut self.cache);
            if let Err(e) = p.flush() {
                tracing::error!("{e}");
            }
        }
    }

    /// What the worker counted, with its sinks merged (for latency).
    pub(crate) fn shard_result(&self) -> ShardResult {
        // In the report's order of NFs (`report::run_report`).
        let listed = self.plan.nf_order.iter();
        let cpu = (listed.filter_map(|&i| self.nfs.get(i as usize)?.as_ref()))
            .enumerate()
            .filter_map(|(k, nf)| Some((k, nf.cpu.clone(), nf.process_ref()?.pid)))
            .collect();
        let (report, unnamed) = super::report::run_report(self);
        ShardResult {
            report,
            sink: super::report::merged_sink(self),
            cpu,
            unnamed: Some(unnamed),
        }
    }
}
