//! Running an NF: the same code path for inline NFs (called by a platform
//! worker) and process NFs (called by the NF process loop).

use std::sync::atomic::Ordering::Relaxed;

use sluice_mem::{Arena, HandleBatch, NfControl, NfStats};

use crate::batch::Batch;
use crate::context::{Context, RawOutput};
use crate::nf::NetworkFunction;
use crate::owned::PacketIo;

/// What an NF call may use besides its packets.
pub struct Services<'a> {
    /// The NF's control block (statistics, counters).
    pub control: &'a NfControl,
    /// The packet arena.
    pub arena: &'a Arena,
    /// Batch start time.
    pub now_ns: u64,
    /// Allocation and emission of packets outside the batch.
    pub io: Option<&'a mut dyn PacketIo>,
    /// Raw ring output for fault injection (process NFs only).
    pub raw: Option<RawOutput<'a>>,
}

impl<'a> Services<'a> {
    /// Services with neither packet I/O nor raw output.
    pub fn basic(control: &'a NfControl, arena: &'a Arena, now_ns: u64) -> Self {
        Services {
            control,
            arena,
            now_ns,
            io: None,
            raw: None,
        }
    }

    fn context(self) -> Context<'a> {
        let mut ctx = Context::new(self.control, self.arena, self.now_ns);
        if let Some(io) = self.io {
            ctx = ctx.with_io(io);
        }
        if let Some(raw) = self.raw {
            ctx = ctx.with_raw_output(raw);
        }
        ctx
    }
}

/// Runs `nf` on `handles` and charges the time spent to the NF's
/// statistics (two TSC reads per batch, a few ns, amortised). Every packet
/// must arrive with verdict `Next`: the platform's routing leaves it so.
#[inline]
pub fn run_batch(nf: &mut dyn NetworkFunction, handles: &mut HandleBatch, svc: Services<'_>) {
    let n = handles.len() as u64;
    if n == 0 {
        return;
    }
    let control = svc.control;
    let mut batch = Batch::new(svc.arena, handles);
    let mut ctx = svc.context();
    // Cycles, not clock_gettime: two vDSO calls per NF batch were 7 % of
    // a 3-NF inline chain.
    let start = sluice_sys::cycles();
    control.stats.inside.store(1, Relaxed);
    nf.process(&mut batch, &mut ctx);
    control.stats.inside.store(0, Relaxed);
    let spent = sluice_sys::cycles_to_ns(sluice_sys::cycles().saturating_sub(start));
    NfStats::add(&control.stats.packets, n);
    NfStats::add(&control.stats.batches, 1);
    NfStats::add(&control.stats.busy_ns, spent);
}

/// Delivers a flow-end event.
pub fn run_flow_end(nf: &mut dyn NetworkFunction, flow_id: u32, svc: Services<'_>) {
    let control = svc.control;
    control.stats.inside.store(1, Relaxed);
    nf.flow_end(flow_id, &mut svc.context());
    control.stats.inside.store(0, Relaxed);
    NfStats::add(&control.stats.events, 1);
}

/// Resets the NF for its next flow (`per_flow` pools), counting it as an
/// event.
pub fn run_reset(nf: &mut dyn NetworkFunction, svc: Services<'_>) {
    let control = svc.control;
    control.stats.inside.store(1, Relaxed);
    nf.reset();
    control.stats.inside.store(0, Relaxed);
    NfStats::add(&control.stats.events, 1);
}

/// Runs the NF's timer hook, charging its time to the NF.
pub fn run_tick(nf: &mut dyn NetworkFunction, svc: Services<'_>) {
    let control = svc.control;
    let start = sluice_sys::monotonic_ns();
    control.stats.inside.store(1, Relaxed);
    nf.tick(&mut svc.context());
    control.stats.inside.store(0, Relaxed);
    let spent = sluice_sys::monotonic_ns().saturating_sub(start);
    NfStats::add(&control.stats.busy_ns, spent);
}

/// Runs the NF's stop hook (it emits whatever it still holds).
pub fn run_stop(nf: &mut dyn NetworkFunction, svc: Services<'_>) {
    nf.stop(&mut svc.context());
}
