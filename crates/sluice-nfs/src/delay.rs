//! `delay`: a fixed-latency delay line (a wire of a given length, or
//! netem's `delay` without jitter), for latency experiments and to test
//! timers in a chain.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `delay_us` | integer ≥ 1 | required | time each packet is held, µs |
//! | `capacity` | integer ≥ 1 | `4096` | most packets held at once |
//!
//! Every packet is taken out of its batch, held for `delay_us`, then sent
//! on (`Next`) in arrival order. A packet arriving when `capacity` packets
//! are held is dropped as `queue_full`. At shutdown every held packet is
//! sent on. Release granularity: the NF's timer (a quarter of the delay,
//! at least 50 µs) for process NFs; the worker's 1 ms maintenance tick for
//! inline NFs (plus every batch either way).
//!
//! Counters: `delayed` (packets sent on), `held` (gauge).
//!
//! ```yaml
//! - name: wire
//!   type: delay
//!   config: { delay_us: 500, capacity: 8192 }
//! ```

use std::collections::VecDeque;

use serde::Deserialize;
use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, OwnedPacket, Verdict,
};
use sluice_spec::SpecError;

const QUEUE_FULL: DropReason = DropReason::nf_local(0);
const C_DELAYED: usize = 0;
const C_HELD: usize = 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    delay_us: u64,
    #[serde(default = "default_capacity")]
    capacity: usize,
}

fn default_capacity() -> usize {
    4096
}

/// The delay NF.
pub struct Delay {
    delay_ns: u64,
    capacity: usize,
    held: VecDeque<(u64, OwnedPacket)>,
}

impl Delay {
    /// Sends on every packet due by `until` (all of them for `u64::MAX`),
    /// as far as this call may emit.
    fn release(&mut self, until: u64, ctx: &mut Context<'_>) {
        let mut sent = 0;
        while self.held.front().is_some_and(|(due, _)| *due <= until) {
            let Some((due, p)) = self.held.pop_front() else {
                break;
            };
            if let Err(p) = ctx.emit(p, Verdict::Next) {
                self.held.push_front((due, p));
                break;
            }
            sent += 1;
        }
        ctx.count(C_DELAYED, sent);
        ctx.set_gauge(C_HELD, self.held.len() as u64);
    }
}

impl NetworkFunction for Delay {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        self.release(now, ctx);
        // Saturating: the longest delays are due at the end of time, not
        // in the past.
        let due = now.saturating_add(self.delay_ns);
        let (held, capacity) = (&mut self.held, self.capacity);
        let mut room = capacity - held.len();
        batch.take_if(
            |p| {
                if room == 0 {
                    p.drop_with(QUEUE_FULL);
                    return false;
                }
                room -= 1;
                true
            },
            |p| held.push_back((due, p)),
        );
        ctx.set_gauge(C_HELD, self.held.len() as u64);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some((self.delay_ns / 4).max(50_000))
    }

    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.release(ctx.now_ns(), ctx);
    }

    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.release(u64::MAX, ctx);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    if cfg.delay_us == 0 {
        return Err(ctx.config.error_at_path("delay_us", "must be at least 1"));
    }
    if cfg.capacity == 0 || cfg.capacity > 1 << 20 {
        return Err(ctx
            .config
            .error_at_path("capacity", "must be between 1 and 1048576"));
    }
    Ok(Box::new(Delay {
        delay_ns: cfg.delay_us.saturating_mul(1_000),
        capacity: cfg.capacity,
        held: VecDeque::with_capacity(cfg.capacity),
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "delay",
    summary: "holds every packet for a fixed time, then sends it on in order",
    drop_reasons: &["queue_full"],
    counters: &["delayed", "held"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
