//! Synthetic traffic generator: checksum-correct Ethernet/IPv4/IPv6 TCP
//! and UDP frames at data-plane rates.
//!
//! # How a packet is made
//!
//! At construction every flow slot gets a template: its full header stack
//! built once with `sluice_packet::builder::write_frame` for the flow's
//! base size class and an all-zero payload.  Per packet,
//! [`Generator::write_next`] copies the template's 80 bytes, zeroes the
//! payload, writes the [`crate::Stamp`] when there is room, patches length
//! fields for a non-base size class and, for TCP, the sequence number,
//! flags and ack — and fixes the L4 (and IPv4 header) checksum
//! incrementally per RFC 1624 with one fold at the end, using
//! `sluice_packet::checksum`'s partial-sum primitives.  No allocation, no
//! full checksum pass.
//!
//! # Flows
//!
//! Packets go round-robin over `flows` slots with distinct 5-tuples.  UDP
//! flows are long-lived.  A TCP slot sends a connection of
//! `packets_per_flow` segments: a SYN, data segments (ACK|PSH) whose
//! sequence numbers advance by the payload length, and a FIN|ACK; then the
//! slot opens a new connection from a new source port (`flows` positions
//! further along the source port range) with a new ISN.  SYN and FIN
//! carry a payload of the packet's size like data segments (legal TCP, as
//! with TCP Fast Open), so every packet has the configured size and can
//! carry a stamp; each consumes payload + 1 sequence numbers.
//!
//! # Memory
//!
//! About 140 bytes per flow slot (80-byte template plus state), allocated
//! once in [`Generator::new`]: 1 M flows take about 140 MB.
//!
//! # Timing
//!
//! The generator never reads a clock: the caller passes `now_ns`
//! (`CLOCK_MONOTONIC`) to [`Generator::due`] and [`Generator::write_next`].
//! The rate is enforced by `due` (token bucket), the count and duration by
//! both.

mod config;
mod flows;
mod rate;
mod size;
mod template;

pub use config::{
    ConfigError, GeneratorConfig, IpVersionChoice, Protocol, Shard, SizeSpec,
    DATACENTER_FRAME_LENS, IMIX_FRAME_LENS, MAX_FRAME_LEN,
};
pub use rate::{MAX_BURST, MIN_BURST};

use sluice_packet::checksum;

use crate::rng::SplitMix64;
use crate::stamp::Stamp;
use rate::TokenBucket;
use size::SizeModel;
use template::{Flow, KindInfo, FIN_FLAGS, SYN_FLAGS, TEMPLATE_LEN};

/// Bytes of the output buffer the generator may use for every frame: the
/// template copy and a stamp after the longest header stack (74 + 24).
const WORK_LEN: usize = 128;

/// Counters of a [`Generator`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GeneratorStats {
    /// Frames written.
    pub packets: u64,
    /// Bytes written (frame lengths, without FCS).
    pub bytes: u64,
    /// Flows opened: UDP flows at their first packet, TCP connections at
    /// their SYN.
    pub flows_opened: u64,
    /// TCP connections closed (FIN sent).
    pub flows_closed: u64,
}

/// The traffic generator.  See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Generator {
    flows: Vec<Flow>,
    kinds: [KindInfo; 4],
    sizes: SizeModel,
    /// More than one size class (IMIX, datacenter).
    multi_class: bool,
    fin_delta: u64,
    next_flow: usize,
    /// Packets per TCP connection (0 = never close).
    ppf: u32,
    src_port_lo: u16,
    src_port_span: u32,
    /// How far a slot's source port index moves on churn.
    port_step: u32,
    seed: u64,
    bucket: Option<TokenBucket>,
    count: Option<u64>,
    duration_ns: Option<u64>,
    start_ns: Option<u64>,
    stats: GeneratorStats,
}

/// A well-mixed 32-bit value from `seed` and two indices (ISNs, acks).
fn mix32(seed: u64, a: u32, b: u32) -> u32 {
    let mut r = SplitMix64::new(seed ^ (u64::from(a) << 32 | u64::from(b)));
    (r.next_u64() >> 32) as u32
}

impl Generator {
    /// Validates `cfg`, draws the flows' 5-tuples and builds their
    /// templates (the only allocation the generator does).
    pub fn new(cfg: GeneratorConfig) -> Result<Generator, ConfigError> {
        if cfg.flows == 0 {
            return Err(ConfigError::NoFlows);
        }
        if cfg.rate_pps == Some(0) {
            return Err(ConfigError::ZeroRate);
        }
        for (which, r) in [("src_ports", cfg.src_ports), ("dst_ports", cfg.dst_ports)] {
            if r.0 > r.1 {
                return Err(ConfigError::BadPortRange { which });
            }
        }
        let shard = cfg.shard;
        if shard.count == 0 || shard.index >= shard.count || shard.count > cfg.flows {
            return Err(ConfigError::BadShard(shard));
        }
        flows::check_families(&cfg)?;
        let mut kinds = [KindInfo::default(); 4];
        for (i, k) in kinds.iter_mut().enumerate() {
            *k = KindInfo::new(i & 1 == 1, i & 2 == 2, cfg.size)?;
        }
        let tuples = flows::assign(&cfg)?;
        let mut scratch = Box::new([0u8; MAX_FRAME_LEN]);
        // Every shard draws the same tuples and keeps its own slots, so the
        // shards together send exactly what one generator would.
        let flows = tuples
            .iter()
            .enumerate()
            .filter(|(i, _)| shard.owns(*i as u32))
            .map(|(i, t)| {
                let ki = template::kind_index(t.tcp, t.src_ip.is_ipv6());
                let ack = mix32(cfg.seed ^ 0x61636b, i as u32, 0) | 1;
                template::build_flow(&cfg, &kinds[ki], ki, t, i as u32, ack, &mut scratch)
            })
            .map(|mut f| {
                f.tcp_seq = mix32(cfg.seed, f.stamp_flow, 0);
                f
            })
            .collect();
        let span = flows::port_span(cfg.src_ports);
        let step = match cfg.flows % span {
            0 => 1,
            s => s,
        };
        Ok(Generator {
            flows,
            kinds,
            sizes: SizeModel::new(cfg.size, cfg.seed ^ u64::from(shard.index)),
            multi_class: !matches!(cfg.size, SizeSpec::Fixed(_)),
            fin_delta: template::fin_delta(),
            next_flow: 0,
            ppf: match cfg.packets_per_flow {
                0 => 0,
                n => n.max(2),
            },
            src_port_lo: cfg.src_ports.0,
            src_port_span: span,
            port_step: step,
            seed: cfg.seed,
            bucket: cfg
                .rate_pps
                .map(|r| TokenBucket::new(shard.part_of(r, cfg.flows).max(1))),
            count: cfg.count.map(|c| shard.part_of(c, cfg.flows)),
            duration_ns: cfg.duration_ns,
            start_ns: None,
            stats: GeneratorStats::default(),
        })
    }

    /// How many packets may be written at `now_ns`: the token bucket's
    /// whole tokens (rate-limited) or `max` (unlimited), never more than
    /// `max` nor than the packets left of `count`; 0 once finished.
    ///
    /// The first call to `due` or [`Generator::write_next`] starts the
    /// duration clock.
    pub fn due(&mut self, now_ns: u64, max: usize) -> usize {
        self.start_ns.get_or_insert(now_ns);
        if self.is_finished(now_ns) {
            return 0;
        }
        let mut n = max as u64;
        if let Some(tb) = &mut self.bucket {
            n = n.min(tb.available(now_ns));
        }
        if let Some(c) = self.count {
            n = n.min(c - self.stats.packets);
        }
        n as usize
    }

    /// True once `count` packets were written or `duration_ns` has elapsed
    /// since the first call to `due`/`write_next`.
    pub fn is_finished(&self, now_ns: u64) -> bool {
        self.count.is_some_and(|c| self.stats.packets >= c)
            || match (self.duration_ns, self.start_ns) {
                (Some(d), Some(s)) => now_ns.saturating_sub(s) >= d,
                _ => false,
            }
    }

    /// Counters so far.
    pub fn stats(&self) -> GeneratorStats {
        self.stats
    }

    /// Number of flow slots.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Writes the next frame into `buf` (stamped with `now_ns`) and returns
    /// its length; 0 (nothing written) if the generator is finished or
    /// `buf` is shorter than the frame or than 128 bytes (the generator
    /// works in a fixed 128-byte area for the template copy and the stamp;
    /// buffers of [`MAX_FRAME_LEN`] bytes always suffice).  Bytes of `buf`
    /// past the returned length may be changed.
    ///
    /// Spends one token of the rate limiter; call [`Generator::due`] to
    /// know how many frames to write.
    #[inline]
    pub fn write_next(&mut self, buf: &mut [u8], now_ns: u64) -> usize {
        let start = *self.start_ns.get_or_insert(now_ns);
        if self.count.is_some_and(|c| self.stats.packets >= c)
            || self
                .duration_ns
                .is_some_and(|d| now_ns.saturating_sub(start) >= d)
        {
            return 0;
        }
        let fi = self.next_flow;
        let nflows = self.flows.len();
        let class = self.sizes.pick();
        let flow = &mut self.flows[fi];
        let kind = &self.kinds[usize::from(flow.kind)];
        let c = &kind.classes[class];
        let len = usize::from(c.len);
        let Some(out) = buf.get_mut(..len.max(WORK_LEN)) else {
            return 0;
        };
        self.next_flow = if fi + 1 == nflows { 0 } else { fi + 1 };

        out[..TEMPLATE_LEN].copy_from_slice(&flow.hdr);
        let h = kind.hdr_len;
        let l4 = kind.l4_off;
        // Complemented template checksum: the start of RFC 1624 eqn. 3.
        let mut acc = u64::from(!flow.l4_csum);

        // With several size classes, patch the length fields every time
        // (the base class's deltas are one's-complement zero): a random
        // class would make a per-packet branch unpredictable.
        if self.multi_class {
            if kind.v6 {
                out[18..20].copy_from_slice(&c.ip_len.to_be_bytes());
            } else {
                out[16..18].copy_from_slice(&c.ip_len.to_be_bytes());
                let ip = checksum::finish(checksum::add(u64::from(!flow.ip_csum), c.ip_delta));
                out[24..26].copy_from_slice(&ip.to_be_bytes());
            }
            if !kind.tcp {
                out[l4 + 4..l4 + 6].copy_from_slice(&c.l4_len.to_be_bytes());
            }
            acc += c.l4_delta;
        }

        // The stamp is written unconditionally (the work area always has
        // room) and counted only when it fits the frame; the zero fill then
        // starts after it, or at the payload start (overwriting it) when
        // it does not fit.  Again no class-dependent branch.
        Stamp {
            flow: flow.stamp_flow,
            seq: flow.seq,
            timestamp_ns: now_ns,
        }
        .write(&mut out[h..h + Stamp::LEN]);
        // The stamp's words, from the values rather than by re-reading the
        // bytes just stored (avoids store-forwarding stalls).
        let stamp_words = flow.stamp_sum + template::words64(flow.seq) + template::words64(now_ns);
        acc += stamp_words * u64::from(c.stamped);
        let zero_from = h + Stamp::LEN * usize::from(c.stamped);
        if zero_from < len {
            out[zero_from..len].fill(0);
        }
        if flow.seq == 0 && !kind.tcp {
            self.stats.flows_opened += 1;
        }
        flow.seq += 1;

        if kind.tcp {
            let seq = flow.tcp_seq;
            out[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            acc += template::words32(seq);
            let mut consumed = u32::from(c.payload_len);
            if flow.conn_pkt == 0 {
                // SYN: flags SYN, ack 0.
                out[l4 + 13] = SYN_FLAGS;
                out[l4 + 8..l4 + 12].fill(0);
                acc = checksum::add(acc, flow.syn_delta);
                consumed += 1;
                self.stats.flows_opened += 1;
            } else if self.ppf != 0 && flow.conn_pkt + 1 >= self.ppf {
                out[l4 + 13] = FIN_FLAGS;
                acc += self.fin_delta;
                consumed += 1;
            }
            flow.tcp_seq = seq.wrapping_add(consumed);
            flow.conn_pkt = flow.conn_pkt.saturating_add(1);
            if self.ppf != 0 && flow.conn_pkt >= self.ppf {
                self.stats.flows_closed += 1;
                Self::churn(
                    flow,
                    l4,
                    self.src_port_lo,
                    self.src_port_span,
                    self.port_step,
                    self.seed,
                );
            }
        }

        let mut csum = checksum::finish(acc);
        if csum == 0 && !kind.tcp {
            // RFC 768: a computed zero is sent as all ones.
            csum = 0xffff;
        }
        out[kind.csum_off..kind.csum_off + 2].copy_from_slice(&csum.to_be_bytes());

        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        if let Some(tb) = &mut self.bucket {
            tb.take_one();
        }
        len
    }

    /// Closes a TCP slot's connection: next source port, new ISN.
    #[cold]
    fn churn(flow: &mut Flow, l4: usize, lo: u16, span: u32, step: u32, seed: u64) {
        let old = lo + flow.src_port_idx as u16;
        flow.src_port_idx =
            ((u64::from(flow.src_port_idx) + u64::from(step)) % u64::from(span)) as u32;
        let new = lo + flow.src_port_idx as u16;
        flow.hdr[l4..l4 + 2].copy_from_slice(&new.to_be_bytes());
        flow.l4_csum = checksum::update_u16(flow.l4_csum, old, new);
        flow.conns += 1;
        flow.conn_pkt = 0;
        flow.tcp_seq = mix32(seed, flow.stamp_flow, flow.conns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_configs() {
        let bad = |f: fn(&mut GeneratorConfig)| {
            let mut c = GeneratorConfig::default();
            f(&mut c);
            Generator::new(c).unwrap_err()
        };
        assert_eq!(bad(|c| c.flows = 0), ConfigError::NoFlows);
        assert_eq!(bad(|c| c.rate_pps = Some(0)), ConfigError::ZeroRate);
        assert!(matches!(
            bad(|c| c.src_ports = (10, 9)),
            ConfigError::BadPortRange { .. }
        ));
        assert!(matches!(
            bad(|c| c.ip_version = IpVersionChoice::V6),
            ConfigError::PrefixFamily { .. }
        ));
        assert_eq!(
            bad(|c| c.size = SizeSpec::Fixed(4000)),
            ConfigError::FrameTooLarge(4000)
        );
        assert!(matches!(
            bad(|c| {
                c.src_prefix = "10.0.0.1/32".parse().unwrap();
                c.dst_prefix = "10.0.0.2/32".parse().unwrap();
                c.src_ports = (1000, 1009);
                c.dst_ports = (80, 80);
                c.flows = 11;
            }),
            ConfigError::TooManyFlows { flows: 11 }
        ));
    }
}
