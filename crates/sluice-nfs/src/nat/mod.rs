//! `nat`: NAT44 — source NAT of inside traffic to an address pool, port
//! forwarding, hairpinning and ICMP error translation, following RFC 4787
//! (UDP), RFC 5382 (TCP) and RFC 5508 (ICMP).
//!
//! Packets from the inside (source in `inside`, or arriving on one of
//! `inside_ports`) to anywhere but the inside are **outbound**: their
//! source becomes an external endpoint of the pool. Packets from outside
//! to a pool address (or a `forward` rule's external address) are
//! **inbound**: a mapping translates their destination back, if the
//! filtering behaviour admits the sender. Everything else (IPv6, ARP,
//! inside to inside, outside to other addresses) passes unchanged.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `inside` | list of IPv4 prefixes | — | inside hosts |
//! | `inside_ports` | list of port names | — | ingress ports that are inside (instead of `inside`) |
//! | `pool` | list of IPv4 prefixes | required | external addresses (≤ 1024) |
//! | `ports` | `"A-B"` | `1024-65535` | range for ports that cannot be preserved |
//! | `mapping` | `endpoint_independent` / `address_dependent` / `address_and_port_dependent` | `endpoint_independent` | RFC 4787 §4.1 |
//! | `filtering` | same | `endpoint_independent` | RFC 4787 §5 |
//! | `capacity` | integer | 65536 | sessions (and dynamic mappings) |
//! | `timeouts.udp` / `tcp_established` / `tcp_transitory` / `icmp` | seconds | 300 / 7440 / 240 / 60 | idle timeouts |
//! | `forward[]` | `{proto, external, internal}` | — | port forwarding `a.b.c.d:p` → `w.x.y.z:q` (proto `tcp`/`udp`, absent: both) |
//! | `hairpin` | bool | true | translate inside → external address → inside |
//! | `hairpin_output` | `ingress` / `next` | `ingress` | where hairpinned packets go |
//!
//! Drop reasons: `no_mapping`, `filtered`, `fragment`, `unsupported`;
//! malformed frames as `malformed:<why>`. Counters: see [`TYPE`].
//!
//! ```yaml
//! - name: nat
//!   type: nat
//!   config:
//!     inside: [10.0.0.0/16]
//!     pool: [192.0.2.0/30]
//!     forward:
//!       - { proto: tcp, external: "192.0.2.1:8080", internal: "10.0.0.5:80" }
//! ```
//!
//! Reference: `docs/nfs/nat.md`.

mod config;
mod endpoint;
mod expiry;
mod fast;
mod index;
mod pool;
mod rewrite;
mod state;
#[cfg(test)]
mod state_tests;
mod table;
mod translate;

pub use endpoint::Endpoint;
pub use table::{Behaviour, TableStats, Timeouts};
pub use translate::{Action, Nat, NatDrop, NatStats, SWEEP_PER_BATCH};

use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, PortId, Verdict, MAX_BATCH,
};
use sluice_spec::SpecError;

use config::HairpinOutput;

/// Counter indices (into [`TYPE`]'s `counters`).
pub mod counters {
    /// Outbound packets translated.
    pub const TRANSLATED_OUT: usize = 0;
    /// Inbound packets translated.
    pub const TRANSLATED_IN: usize = 1;
    /// Hairpinned packets.
    pub const HAIRPINNED: usize = 2;
    /// ICMP errors translated.
    pub const ICMP_ERRORS_TRANSLATED: usize = 3;
    /// Live dynamic mappings (gauge).
    pub const MAPPINGS: usize = 4;
    /// Live sessions (gauge).
    pub const SESSIONS: usize = 5;
    /// Dynamic mappings created.
    pub const MAPPING_CREATED: usize = 6;
    /// Dynamic mappings expired.
    pub const MAPPING_EXPIRED: usize = 7;
    /// Drops for want of a mapping.
    pub const NO_MAPPING: usize = 8;
    /// Unsolicited inbound drops.
    pub const FILTERED: usize = 9;
    /// Packets passed unchanged.
    pub const UNTRANSLATED: usize = 10;
}

/// How often `tick` runs.
pub const TICK_NS: u64 = 100_000_000;
/// Session slots checked per tick: the default 64 k table every 0.4 s, the
/// largest (4 M) every 26 s; ≈ 1 ns per slot.
pub const SWEEP_PER_TICK: usize = 16_384;

/// The `nat` NF: a [`Nat`] plus counter publishing.
pub struct NatNf {
    nat: Nat,
    hairpin_output: HairpinOutput,
    published: [u64; 11],
}

impl NatNf {
    /// The translator inside.
    pub fn nat(&self) -> &Nat {
        &self.nat
    }

    /// The translator, unwrapped (benches and tools drive it directly).
    pub fn into_nat(self) -> Nat {
        self.nat
    }

    fn publish(&mut self, ctx: &mut Context<'_>) {
        let s = self.nat.stats();
        let t = self.nat.table_stats();
        let now = [
            s.translated_out,
            s.translated_in,
            s.hairpinned,
            s.icmp_errors_translated,
            0,
            0,
            t.mapping_created,
            t.mapping_expired,
            s.no_mapping,
            s.filtered,
            s.untranslated,
        ];
        for (i, (v, p)) in now.iter().zip(self.published.iter_mut()).enumerate() {
            if *v > *p {
                ctx.count(i, *v - *p);
            }
            *p = *v;
        }
        ctx.set_gauge(counters::MAPPINGS, self.nat.mapping_count() as u64);
        ctx.set_gauge(counters::SESSIONS, self.nat.session_count() as u64);
    }
}

impl NetworkFunction for NatNf {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let nat = &mut self.nat;
        let to_ingress = self.hairpin_output == HairpinOutput::Ingress;
        // Three passes: prefetch every packet's hint slot, then (hints
        // read) every packet's session line, then translate; the batch's
        // cache misses overlap, the second level's without waiting for a
        // read to retire. At 100 k mappings (bench nat/outbound_100k, NAT
        // share, on-CPU under load, sweep reading every slot): ≈ 150–175
        // ns/packet with no warm-up, ≈ 96–98 with touch reads of hint
        // and session, ≈ 65–69 with these prefetches; ≈ 46–59 with the
        // bounded sweep too.
        // The flow ids are kept from the first pass, so the second reads
        // them from this array instead of from each buffer's metadata
        // (≈ 8 fewer instructions per packet).
        let mut ids = [u32::MAX; MAX_BATCH];
        let mut n = 0;
        batch.for_each(|p| {
            let id = p.flow_id();
            nat.prefetch_hint(id);
            if let Some(slot) = ids.get_mut(n) {
                *slot = id;
                n += 1;
            }
        });
        for &id in &ids[..n] {
            nat.prefetch_session(id);
        }
        batch.for_each(|p| {
            let (port_in, flow_id) = (p.port_in(), p.flow_id());
            match nat.translate(p.data_mut(), port_in, flow_id, now) {
                Action::Drop(r) => p.drop_with(DropReason::nf_local(r as u16)),
                Action::Malformed(e) => p.drop_malformed(e),
                Action::Hairpin if to_ingress => p.set_verdict(Verdict::ToPort(PortId(port_in))),
                _ => {}
            }
        });
        // Per-block expiry bounds let this skip the 64 session lines it
        // would read (see `expiry.rs`): ≈ 17–25 ns/packet saved at 100 k
        // mappings.
        nat.expire(now, SWEEP_PER_BATCH);
        self.publish(ctx);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        self.nat.flow_end(flow_id);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(TICK_NS)
    }

    /// Sweeps for expired sessions even when no packets come, so idle
    /// mappings release their ports and the gauges stay true.
    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.nat.expire(ctx.now_ns(), SWEEP_PER_TICK);
        self.publish(ctx);
    }

    fn reset(&mut self) {
        self.nat.reset();
        self.published = [0; 11];
    }

    /// Version 1: dynamic mappings and sessions (layout in `state.rs`).
    fn state_version(&self) -> Option<u16> {
        Some(state::VERSION)
    }

    fn checkpoint(&self, out: &mut sluice_nf::StateWriter) {
        self.nat.write_state(out);
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), sluice_nf::StateError> {
        self.nat.read_state(state)
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(build_nf(ctx)?))
}

/// Builds the NF from its config (for tests and benches that need the
/// concrete type).
pub fn build_nf(ctx: &BuildContext<'_>) -> Result<NatNf, SpecError> {
    let replicas = ctx.resolver.replicas();
    if replicas > 1 {
        // A mapping spans flows (endpoint-independent mapping, inbound
        // packets from any outside endpoint) and the port pool is shared:
        // copies (per worker, or replicas) would hand out the same
        // external port twice.
        return Err(ctx.config.error(format!(
            "NF {}: nat keeps mappings and a port pool shared by all flows, so it cannot run as {replicas} copies side by side (settings.workers × replicas); run it as one",
            ctx.name
        )));
    }
    let b = config::build(ctx)?;
    Ok(NatNf {
        nat: b.nat,
        hairpin_output: b.hairpin_output,
        published: [0; 11],
    })
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "nat",
    summary:
        "NAT44: source NAT to an address pool, port forwarding, hairpinning, ICMP error translation",
    drop_reasons: &["no_mapping", "filtered", "fragment", "unsupported"],
    counters: &[
        "translated_out",
        "translated_in",
        "hairpinned",
        "icmp_errors_translated",
        "mappings",
        "sessions",
        "mapping_created",
        "mapping_expired",
        "no_mapping",
        "filtered",
        "untranslated",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
