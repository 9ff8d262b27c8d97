//! `forwarder`: passes every packet to the next hop, optionally swapping
//! the Ethernet source and destination (a reflector).
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `mac_swap` | bool | `false` | swap Ethernet src/dst MACs |
//!
//! Ports: one in, one out (the chain's next hop). Cost: 1.4–2.3 ns/packet
//! charged in `sluice bench chain` (mostly the two clock reads per batch
//! that measure it); the MAC swap adds one cache-line write per packet.

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    mac_swap: bool,
}

/// The forwarder NF.
pub struct Forwarder {
    mac_swap: bool,
}

impl NetworkFunction for Forwarder {
    fn live_reconfigure(&self) -> bool {
        true
    }

    /// No state but its config: nothing to reset.
    fn resets(&self) -> bool {
        true
    }

    fn reconfigure(
        &mut self,
        fresh: Box<dyn NetworkFunction>,
    ) -> Result<(), Box<dyn NetworkFunction>> {
        self.mac_swap = sluice_nf::downcast::<Forwarder>(fresh)?.mac_swap;
        Ok(())
    }

    fn process(&mut self, batch: &mut Batch<'_>, _ctx: &mut Context<'_>) {
        if !self.mac_swap {
            return;
        }
        batch.for_each(|p| {
            let d = p.data_mut();
            if d.len() >= 12 {
                let (dst, rest) = d.split_at_mut(6);
                dst.swap_with_slice(&mut rest[..6]);
            }
        });
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = if ctx.config.is_null() {
        Config::default()
    } else {
        ctx.config.deserialize()?
    };
    Ok(Box::new(Forwarder {
        mac_swap: cfg.mac_swap,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "forwarder",
    summary: "forwards every packet to the next hop, optionally swapping MAC addresses",
    drop_reasons: &[],
    counters: &[],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
