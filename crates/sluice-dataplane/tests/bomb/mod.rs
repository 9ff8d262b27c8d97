//! A test NF whose code panics on cue, for the tests of what a panic in
//! an inline NF does (`inline_panic.rs`, `worker_failure.rs`).

use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

/// Forwards `after` batches, then panics in `process` (or, with `in:
/// tick`, in its timer). With `first_only`, only its first instance does.
struct Bomb {
    left: u64,
    in_tick: bool,
}

impl NetworkFunction for Bomb {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        if self.left == 0 && !self.in_tick {
            panic!("the bomb went off");
        }
        self.left = self.left.saturating_sub(1);
        ctx.count(0, batch.len() as u64);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        self.in_tick.then_some(1_000_000)
    }

    fn tick(&mut self, _: &mut Context<'_>) {
        if self.left == 0 {
            panic!("the timer went off");
        }
    }
}

/// An instance that never panics, for a bomb with `first_only` whose
/// instance is a restart.
struct Defused;

impl NetworkFunction for Defused {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        ctx.count(0, batch.len() as u64);
    }
}

fn build_bomb(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let get = |k: &str| ctx.config.get(k);
    let first_only = get("first_only").and_then(|n| n.as_bool()) == Some(true);
    if first_only && ctx.resolver.restarts() > 0 {
        return Ok(Box::new(Defused));
    }
    Ok(Box::new(Bomb {
        left: get("after").and_then(|n| n.as_u64()).unwrap_or(0),
        in_tick: get("in").and_then(|n| n.as_str()) == Some("tick"),
    }))
}

/// The bomb and the forwarder.
pub static REGISTRY: &[NfType] = &[
    NfType {
        name: "bomb",
        summary: "test NF: panics after some batches",
        drop_reasons: &[],
        counters: &["packets"],
        build: build_bomb,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    sluice_nfs::forwarder::TYPE,
];
