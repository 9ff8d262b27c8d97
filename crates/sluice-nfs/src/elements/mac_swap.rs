//! `mac_swap`: swaps the Ethernet source and destination addresses (so a
//! frame can be sent back where it came from; Click's `EtherMirror`).
//!
//! No config keys. Counters: `swapped`. Drop reasons: only
//! `malformed:ethernet_truncated` (frames shorter than 14 bytes).

use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::ParseError;
use sluice_spec::SpecError;

/// The MAC swapping NF.
pub struct MacSwap;

impl NetworkFunction for MacSwap {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut n = 0u64;
        batch.for_each(|p| {
            let d = p.data_mut();
            if d.len() < 14 {
                p.drop_malformed(ParseError::EthernetTruncated);
                return;
            }
            let (dst, rest) = d.split_at_mut(6);
            dst.swap_with_slice(&mut rest[..6]);
            n += 1;
        });
        ctx.count(0, n);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    if !ctx.config.is_null() && ctx.config.as_map().is_none_or(|m| !m.is_empty()) {
        return Err(ctx.config.error("mac_swap takes no config keys"));
    }
    Ok(Box::new(MacSwap))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "mac_swap",
    summary: "swaps Ethernet source and destination addresses",
    drop_reasons: &[],
    counters: &["swapped"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
