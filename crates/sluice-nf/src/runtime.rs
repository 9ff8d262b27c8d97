//! Running an NF on one batch: the same code path for inline NFs (called
//! by a platform worker) and process NFs (called by the NF process loop).

use sluice_mem::{Arena, HandleBatch, NfControl, NfStats};

use crate::batch::Batch;
use crate::context::Context;
use crate::nf::NetworkFunction;

/// Runs `nf` on `handles` and charges the time spent to the NF's
/// statistics (two clock reads per batch, ≈ 40 ns, amortised). Every packet
/// must arrive with verdict `Next`: the platform's routing leaves it so.
#[inline]
pub fn run_batch(
    nf: &mut dyn NetworkFunction,
    arena: &Arena,
    handles: &mut HandleBatch,
    control: &NfControl,
    now_ns: u64,
) {
    run_batch_with(nf, arena, handles, control, now_ns, None)
}

/// [`run_batch`] with a raw-output hook for fault injection (process NFs).
#[inline]
pub fn run_batch_with(
    nf: &mut dyn NetworkFunction,
    arena: &Arena,
    handles: &mut HandleBatch,
    control: &NfControl,
    now_ns: u64,
    raw: Option<crate::context::RawOutput<'_>>,
) {
    let n = handles.len() as u64;
    if n == 0 {
        return;
    }
    let mut batch = Batch::new(arena, handles);
    let start = sluice_sys::monotonic_ns();
    let mut ctx = match raw {
        Some(r) => Context::with_raw_output(control, now_ns, r),
        None => Context::new(control, now_ns),
    };
    nf.process(&mut batch, &mut ctx);
    let spent = sluice_sys::monotonic_ns().saturating_sub(start);
    NfStats::add(&control.stats.packets, n);
    NfStats::add(&control.stats.batches, 1);
    NfStats::add(&control.stats.busy_ns, spent);
}

/// Delivers a flow-end event.
pub fn run_flow_end(nf: &mut dyn NetworkFunction, control: &NfControl, flow_id: u32, now_ns: u64) {
    let mut ctx = Context::new(control, now_ns);
    nf.flow_end(flow_id, &mut ctx);
    NfStats::add(&control.stats.events, 1);
}
