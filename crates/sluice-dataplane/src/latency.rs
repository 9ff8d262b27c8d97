//! Per-chain latency: a fixed log2 histogram of the time from a packet's
//! arrival (its ingress timestamp) to its departure through a port,
//! recorded by the worker at transmit for every packet, with no
//! allocation and no division (a leading-zeros count picks the bucket).
//! Prometheus exports it as `sluice_chain_latency_seconds`.

use serde::Serialize;

/// Buckets: upper bounds 2^10 ns (≈1 µs) to 2^33 ns (≈8.6 s); the last
/// also takes everything above.
pub const BUCKETS: usize = 24;

/// The smallest bucket's upper bound is 2^`FIRST_BIT` ns.
const FIRST_BIT: u32 = 10;

/// One chain's histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Histogram {
    /// Packets per bucket (not cumulative); bucket `i` holds latencies up
    /// to `2^(10 + i)` ns.
    pub buckets: Vec<u64>,
    /// Packets recorded.
    pub count: u64,
    /// Sum of their latencies, ns.
    pub sum_ns: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
        }
    }

    /// The bucket for a latency of `ns`.
    #[inline]
    pub fn bucket(ns: u64) -> usize {
        // ceil(log2(ns)) - FIRST_BIT, clamped to the table.
        let bits = 64 - ns.saturating_sub(1).leading_zeros();
        (bits.saturating_sub(FIRST_BIT) as usize).min(BUCKETS - 1)
    }

    /// Records one packet.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if self.buckets.len() != BUCKETS {
            self.buckets.resize(BUCKETS, 0);
        }
        self.buckets[Self::bucket(ns)] += 1;
        self.count += 1;
        self.sum_ns = self.sum_ns.wrapping_add(ns);
    }

    /// Adds another histogram (another worker's).
    pub fn merge(&mut self, o: &Histogram) {
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum_ns = self.sum_ns.wrapping_add(o.sum_ns);
    }

    /// Upper bound of bucket `i`, ns.
    pub fn upper_ns(i: usize) -> u64 {
        1u64 << (FIRST_BIT as usize + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_their_power_of_two_bucket() {
        assert_eq!(Histogram::bucket(0), 0);
        assert_eq!(Histogram::bucket(1024), 0);
        assert_eq!(Histogram::bucket(1025), 1);
        assert_eq!(Histogram::bucket(2048), 1);
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        let mut h = Histogram::new();
        for ns in [500, 1500, 3000, 3000] {
            h.record(ns);
        }
        assert_eq!(&h.buckets[..3], &[1, 1, 2]);
        assert_eq!((h.count, h.sum_ns), (4, 8000));
        for i in 0..BUCKETS - 1 {
            assert!(Histogram::bucket(Histogram::upper_ns(i)) == i);
            assert!(Histogram::bucket(Histogram::upper_ns(i) + 1) == i + 1);
        }
    }
}
