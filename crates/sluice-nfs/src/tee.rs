//! `tee`: sends every packet on along its chain and a copy to a port
//! (Click's `Tee`): a tap for a capture port or a monitoring chain.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `to` | port name | required | output port that receives the copies |
//!
//! Verdicts: the original continues (`Next`); the copy goes to `to`.
//! Counters: `copies` (copies sent), `copies_missed` (no buffer was ready
//! for a copy: the original still passes; raise `settings.buffers` if this
//! grows). Copies are counted as originated packets in the run report.
//!
//! ```yaml
//! - name: tap
//!   type: tee
//!   config: { to: capture }
//! ```
//!
//! Cost: one buffer allocation and one copy of the frame per packet.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType, PortId, Verdict};
use sluice_spec::SpecError;

const C_COPIES: usize = 0;
const C_MISSED: usize = 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    to: String,
}

/// The tee NF.
pub struct Tee {
    to: PortId,
}

impl NetworkFunction for Tee {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut copies, mut missed) = (0, 0);
        batch.for_each(|p| match ctx.alloc_copy(p) {
            Some(copy) => match ctx.emit(copy, Verdict::ToPort(self.to)) {
                Ok(()) => copies += 1,
                Err(copy) => {
                    ctx.discard(copy);
                    missed += 1;
                }
            },
            None => missed += 1,
        });
        ctx.count(C_COPIES, copies);
        ctx.count(C_MISSED, missed);
    }

    fn alloc_reserve(&self) -> u32 {
        // One full batch of copies.
        sluice_nf::MAX_BATCH as u32
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    let to = ctx.resolver.port(&cfg.to).ok_or_else(|| {
        ctx.config.error_at_path(
            "to",
            format!("`{}` is not an output port of this spec", cfg.to),
        )
    })?;
    Ok(Box::new(Tee { to }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "tee",
    summary: "passes every packet on and sends a copy to a port",
    drop_reasons: &[],
    counters: &["copies", "copies_missed"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
