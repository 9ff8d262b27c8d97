//! `cycle_burner`: spends a set amount of CPU per packet in a busy loop,
//! to model an expensive NF in scheduler experiments (cf. the seeds'
//! CPU-sharing studies). Every packet passes unchanged.
//!
//! `iterations_per_packet` spins exactly that many loop iterations
//! (deterministic work, about one cycle each). `ns_per_packet` converts
//! ns to iterations with a calibration run at build time (≈ 2 ms; on a
//! loaded machine the calibration, and thus the cost, is approximate).
//! The two add up. The loop does no syscalls and touches no memory.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `ns_per_packet` | u64 | `0` | calibrated busy time per packet |
//! | `iterations_per_packet` | u64 | `0` | raw loop iterations per packet |
//!
//! Counters: `packets`, `iterations` (total spun).

use std::hint::black_box;

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    ns_per_packet: u64,
    #[serde(default)]
    iterations_per_packet: u64,
}

/// Spins `n` iterations the optimiser cannot remove.
#[inline(never)]
pub fn spin(n: u64) {
    let mut i = 0u64;
    while i < n {
        i = black_box(i) + 1;
    }
}

/// Loop iterations per ns on this machine, measured now (best of 5).
pub fn calibrate() -> f64 {
    const N: u64 = 400_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        spin(N);
        best = best.min(t.elapsed().as_nanos().max(1) as f64);
    }
    N as f64 / best
}

/// The cycle burning NF.
pub struct CycleBurner {
    iterations: u64,
}

impl CycleBurner {
    /// Iterations spun per packet.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }
}

impl NetworkFunction for CycleBurner {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let n = batch.len() as u64;
        batch.for_each(|_| spin(self.iterations));
        ctx.count(0, n);
        ctx.count(1, n * self.iterations);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    if cfg.ns_per_packet > 10_000_000 {
        return Err(ctx.config.error_at_path(
            "ns_per_packet",
            "ns_per_packet above 10 ms would stall the worker",
        ));
    }
    let calibrated = if cfg.ns_per_packet > 0 {
        (cfg.ns_per_packet as f64 * calibrate()) as u64
    } else {
        0
    };
    Ok(Box::new(CycleBurner {
        iterations: calibrated.saturating_add(cfg.iterations_per_packet),
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "cycle_burner",
    summary: "busy-loops a configured time or iteration count per packet",
    drop_reasons: &[],
    counters: &["packets", "iterations"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
