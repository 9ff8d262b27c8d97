//! The worker's calls into inline NFs: a batch, a timer, a flow end, a
//! stop. Each goes through [`Worker::with_inline_io`], which lends the NF
//! the worker's buffer cache for what it creates, steers what it emits,
//! and is the one place a panic in its code is met (`inline_crash.rs`).

use std::sync::atomic::Ordering;

use sluice_mem::{HandleBatch, NfControl};
use sluice_nf::runtime::{run_batch, run_tick, Services};
use sluice_nf::NetworkFunction;

use super::inline_crash::InlineCall;
use super::Worker;
use crate::inline_nf::Fault;
use crate::nf_io::InlineIo;
use crate::nf_rt::Exec;

impl<'a> Worker<'a> {
    /// Runs inline NF `i` (its control block `control`) on batch `b` and
    /// steers what comes out; a batch it cannot take (it is down, or its
    /// code panicked on it) is dropped and counted.
    pub(super) fn deliver_inline(
        &mut self,
        i: u16,
        control: &NfControl,
        b: &mut HandleBatch,
        now: u64,
    ) {
        // The NF's time is work, not a stall of the worker's loop.
        let busy = &control.stats.busy_ns;
        let before = busy.load(Ordering::Relaxed);
        let ran = self.with_inline_io(i, now, |f, svc| run_batch(f, b, svc));
        // Saturating: a crash folds the counter into the NF's
        // totals and zeroes it (`inline_crash.rs`).
        self.inline_busy_ns += busy.load(Ordering::Relaxed).saturating_sub(before);
        match ran.drop_reason() {
            None => self.regroup_after(i, b),
            // Down, or its code panicked on this batch: what is
            // left of the batch goes no further.
            Some(reason) => {
                self.drops.add(reason, b.len() as u64);
                if !b.is_empty() {
                    self.count_wasted(b, 1);
                }
                b.drain(|h| self.cache.free(h));
            }
        }
    }

    /// Calls inline NF `i` with packet I/O (allocation from the worker's
    /// cache), then queues what it emitted for steering like its batch.
    /// The call is not made if the NF has crashed; a panic in it crashes
    /// the NF, not the worker (`inline_crash.rs`).
    pub(super) fn with_inline_io(
        &mut self,
        i: u16,
        now: u64,
        call: impl FnOnce(&mut dyn NetworkFunction, Services<'_>),
    ) -> InlineCall {
        let mut out = self.take_batch();
        let arena = self.arena;
        let Some(nf) = self.nfs.get_mut(i as usize).and_then(Option::as_mut) else {
            self.put_batch(out);
            return InlineCall::Down;
        };
        let control = nf.control;
        let Exec::Inline(f) = &mut nf.exec else {
            self.put_batch(out);
            return InlineCall::Down;
        };
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
        let ran = match f.call(|code| call(code, svc)) {
            Ok(()) => {
                let emitted = out.len();
                self.regroup_after(i, &mut out);
                InlineCall::Ran(emitted)
            }
            Err(Fault::Down) => InlineCall::Down,
            Err(Fault::Panicked(payload)) => {
                self.inline_crashed(i, payload, &mut out, now);
                InlineCall::Crashed
            }
        };
        self.put_batch(out);
        ran
    }

    /// Runs the timers of inline NFs that are due.
    pub(super) fn tick_inline(&mut self, now: u64) {
        for k in 0..self.derived.ticking.len() {
            let i = self.derived.ticking[k];
            let Some(nf) = self.nf_mut(i) else { continue };
            match nf.tick {
                Some((every, due)) if now >= due => {
                    nf.tick = Some((every, now + every));
                    self.with_inline_io(i, now, run_tick);
                }
                _ => {}
            }
        }
        self.dispatch(now);
    }
}
