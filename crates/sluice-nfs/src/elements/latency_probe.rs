//! `latency_probe`: a histogram of each packet's age at this hop
//! (`now - packet.timestamp_ns()`, the ingress timestamp), published as
//! gauges.
//!
//! The histogram is log-linear (8 sub-buckets per power of two: ≤ 12.5 %
//! relative error, 496 buckets, fixed size) and cumulative since start or
//! `reset`. Percentiles are the upper bound of the bucket holding them.
//! Packets without a timestamp (0) are not counted. The age uses the
//! batch clock (one read per batch), so it includes the time the packet
//! waited in this NF's ring; a packet stamped after that read (it reached
//! the ring while the batch was being taken) is counted with age 0, not
//! as unstamped: under load that happened to one packet in tens of
//! thousands, and the probe then missed a sample it had.
//!
//! No config keys. Counters (gauges): `samples`, `p50_ns`, `p99_ns`,
//! `max_ns`; and `unstamped`. Every packet passes.

use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

const SUB: u32 = 8;
const BUCKETS: usize = 8 + 61 * 8;

/// A fixed-size log-linear histogram of u64 values.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < u64::from(SUB) {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ 3
    let sub = (v >> (e - 3)) - u64::from(SUB);
    8 + (e as usize - 3) * 8 + sub as usize
}

fn upper(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let e = (i - 8) / 8 + 3;
    let sub = ((i - 8) % 8) as u64;
    let low = (8 + sub) << (e - 3);
    low + ((1u64 << (e - 3)) - 1)
}

impl Histogram {
    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Largest value recorded.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q`-quantile (0 < q ≤ 1) as a bucket upper bound (capped at
    /// the maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64 * q).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return upper(i).min(self.max);
            }
        }
        self.max
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.total = 0;
        self.max = 0;
    }
}

/// The latency probe NF.
#[derive(Default)]
pub struct LatencyProbe {
    hist: Histogram,
    unstamped: u64,
}

impl LatencyProbe {
    /// The histogram so far.
    pub fn histogram(&self) -> &Histogram {
        &self.hist
    }
}

impl NetworkFunction for LatencyProbe {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        let (hist, unstamped) = (&mut self.hist, &mut self.unstamped);
        batch.for_each(|p| {
            let ts = p.timestamp_ns();
            if ts == 0 {
                *unstamped += 1;
            } else {
                hist.record(now.saturating_sub(ts));
            }
        });
        // Scans ≤ 496 buckets once per batch, amortised over its packets
        // (not benchmarked).
        ctx.set_gauge(0, self.hist.total());
        ctx.set_gauge(1, self.hist.quantile(0.5));
        ctx.set_gauge(2, self.hist.quantile(0.99));
        ctx.set_gauge(3, self.hist.max());
        ctx.set_gauge(4, self.unstamped);
    }

    fn reset(&mut self) {
        self.hist.clear();
        self.unstamped = 0;
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    if !ctx.config.is_null() && ctx.config.as_map().is_none_or(|m| !m.is_empty()) {
        return Err(ctx.config.error("latency_probe takes no config keys"));
    }
    Ok(Box::new(LatencyProbe::default()))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "latency_probe",
    summary: "histogram of packet age since ingress, as p50/p99/max gauges",
    drop_reasons: &[],
    counters: &["samples", "p50_ns", "p99_ns", "max_ns", "unstamped"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_bounded() {
        let mut prev = None;
        for v in (0..5000u64).chain([u64::MAX / 3, u64::MAX]) {
            let b = bucket(v);
            assert!(b < BUCKETS);
            assert!(upper(b) >= v, "{v} above its bucket bound");
            assert!(upper(b) - v <= v / 8, "{v}: error above 12.5 %");
            if let Some(p) = prev {
                assert!(b >= p);
            }
            prev = Some(b);
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for v in 1..=1000 {
            h.record(v);
        }
        assert_eq!(h.max(), 1000);
        let p50 = h.quantile(0.5);
        assert!((500..=500 + 500 / 8).contains(&p50), "{p50}");
        let p99 = h.quantile(0.99);
        assert!((990..=1000).contains(&p99), "{p99}");
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
