//! `ttl`: decrements the IPv4 TTL (with an RFC 1624 incremental header
//! checksum update) or the IPv6 hop limit, as a router does.
//!
//! As Linux `ip_forward` / `ip6_forward`: a packet that arrives with a TTL
//! (hop limit) of 0 or 1 cannot be forwarded and is dropped (`expired`);
//! no ICMP time-exceeded is generated. Non-IP frames pass unchanged.
//!
//! No config keys. Counters: `decremented`, `expired`. Drop reasons:
//! `expired`, `malformed:<why>`.

use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_packet::checksum;
use sluice_spec::SpecError;

const EXPIRED: DropReason = DropReason::nf_local(0);

/// The TTL decrementing NF.
pub struct Ttl;

impl NetworkFunction for Ttl {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut dec, mut expired) = (0u64, 0u64);
        batch.for_each(|p| {
            let h = match p.headers() {
                Ok(h) => h,
                Err(e) => {
                    p.drop_malformed(e);
                    return;
                }
            };
            let l3 = usize::from(h.l3_offset);
            let at = match h.ip_version {
                4 => l3 + 8,
                6 => l3 + 7,
                _ => return,
            };
            let d = p.data_mut();
            let ttl = d[at];
            if ttl <= 1 {
                expired += 1;
                p.drop_with(EXPIRED);
                return;
            }
            d[at] = ttl - 1;
            if h.ip_version == 4 {
                // TTL shares a 16-bit word with the protocol.
                let old = [ttl, d[l3 + 9]];
                let new = [ttl - 1, d[l3 + 9]];
                let c = u16::from_be_bytes([d[l3 + 10], d[l3 + 11]]);
                let c = checksum::update_bytes(c, &old, &new);
                d[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
            dec += 1;
        });
        ctx.count(0, dec);
        ctx.count(1, expired);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    if !ctx.config.is_null() && ctx.config.as_map().is_none_or(|m| !m.is_empty()) {
        return Err(ctx.config.error("ttl takes no config keys"));
    }
    Ok(Box::new(Ttl))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "ttl",
    summary: "decrements the IPv4 TTL / IPv6 hop limit and drops expired packets",
    drop_reasons: &["expired"],
    counters: &["decremented", "expired"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
