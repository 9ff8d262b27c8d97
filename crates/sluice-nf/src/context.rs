//! What an NF can reach besides its packets: time and its counters.

use sluice_mem::{NfControl, NfStats, NF_COUNTERS};

/// Writes raw entries into the NF's transmit ring (fault injection only).
pub type RawOutput<'a> = &'a mut dyn FnMut(&[u32]) -> usize;

/// Per-call context handed to an NF.
pub struct Context<'a> {
    control: &'a NfControl,
    now_ns: u64,
    raw_output: Option<RawOutput<'a>>,
}

impl<'a> Context<'a> {
    /// A context publishing counters into `control`.
    pub fn new(control: &'a NfControl, now_ns: u64) -> Self {
        Context {
            control,
            now_ns,
            raw_output: None,
        }
    }

    /// A context that can also write raw ring entries (process NFs only).
    pub fn with_raw_output(control: &'a NfControl, now_ns: u64, raw: RawOutput<'a>) -> Self {
        Context {
            control,
            now_ns,
            raw_output: Some(raw),
        }
    }

    /// Fault injection: writes arbitrary entries into this NF's transmit
    /// ring, as a hostile NF could. Returns how many were written (0 for
    /// inline NFs, whose code the platform trusts). Only the `chaos` NF
    /// uses this, to prove the platform validates what NFs return.
    pub fn inject_raw_output(&mut self, raw: &[u32]) -> usize {
        match &mut self.raw_output {
            Some(f) => f(raw),
            None => 0,
        }
    }

    /// Time at the start of this batch (CLOCK_MONOTONIC ns); one clock read
    /// per batch, not per packet.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Adds `v` to NF-specific counter `index` (named by the NF type's
    /// `counters`); out-of-range indices are ignored.
    #[inline]
    pub fn count(&mut self, index: usize, v: u64) {
        if let Some(c) = self.control.counters.get(index) {
            NfStats::add(c, v);
        }
    }

    /// Sets NF-specific counter `index` to `v` (a gauge).
    #[inline]
    pub fn set_gauge(&mut self, index: usize, v: u64) {
        if index < NF_COUNTERS {
            self.control.counters[index].store(v, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
