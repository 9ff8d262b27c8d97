//! Hot-path latency recording, bucket-compatible with `hdrhistogram`.
//!
//! `hdrhistogram::Histogram::saturating_record` is a non-inlined call of
//! about 60 instructions (range checks, min/max tracking, resizing logic).
//! At 10-20 Mpps that is a large share of the sink's budget, so the sink
//! counts into a plain array laid out exactly like an HDR histogram with
//! lowest discernible value 1 and 3 significant digits (2048 sub-buckets,
//! unit magnitude 0), a shift and an add per sample, and converts to a real
//! `Histogram` (lossless: same buckets) when a report is asked for.

use hdrhistogram::Histogram;

/// log2 of half the sub-bucket count for 3 significant digits.
const HALF_MAG: u32 = 10;
/// Values below this land in bucket 0 one-to-one.
const SUB_MASK: u64 = (1 << (HALF_MAG + 1)) - 1;
/// `hdrhistogram`'s `leading_zero_count_base` for unit magnitude 0.
const LZ_BASE: u32 = 64 - HALF_MAG - 1;
/// Significant digits of the histograms produced.
pub(crate) const SIGFIG: u8 = 3;

/// Counts index of `v` (HDR layout).
#[inline(always)]
fn index(v: u64) -> usize {
    let bucket = LZ_BASE - (v | SUB_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize) << HALF_MAG) + sub
}

/// Lowest value of the bucket at counts index `i` (inverse of [`index`]).
fn value_at(i: usize) -> u64 {
    let bucket = (i >> HALF_MAG).saturating_sub(1) as u32;
    let sub = (i - ((bucket as usize) << HALF_MAG)) as u64;
    sub << bucket
}

/// Latency counts in HDR layout, clamped to `max`.
#[derive(Debug, Clone)]
pub(crate) struct LatencyCounts {
    counts: Vec<u64>,
    max: u64,
    total: u64,
}

impl LatencyCounts {
    /// Counts for values `0..=max` (`max >= 2`).
    pub(crate) fn new(max: u64) -> Self {
        let max = max.max(2);
        LatencyCounts {
            counts: vec![0; index(max) + 1],
            max,
            total: 0,
        }
    }

    /// Records one sample, clamped to the maximum.
    #[inline(always)]
    pub(crate) fn record(&mut self, v: u64) {
        let i = index(v.min(self.max));
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.total += 1;
    }

    /// Adds `other`'s samples (clamped to this maximum).
    pub(crate) fn merge(&mut self, other: &LatencyCounts) {
        for (i, &n) in other.counts.iter().enumerate() {
            if n != 0 {
                let j = index(value_at(i).min(self.max));
                if let Some(c) = self.counts.get_mut(j) {
                    *c += n;
                }
            }
        }
        self.total += other.total;
    }

    /// The equivalent `hdrhistogram` histogram (bounds 1..=max, 3 digits).
    pub(crate) fn to_histogram(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, self.max, SIGFIG)
            .expect("valid bounds: low 1, high >= 2");
        for (i, &n) in self.counts.iter().enumerate() {
            if n != 0 {
                h.saturating_record_n(value_at(i), n);
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_hdrhistogram() {
        let max = 10_000_000_000u64;
        let h = Histogram::<u64>::new_with_bounds(1, max, SIGFIG).unwrap();
        let mut v = 0u64;
        while v <= max {
            let lo = value_at(index(v));
            assert_eq!(lo, h.lowest_equivalent(v), "value {v}");
            assert!(index(v) < index(max) + 1);
            v = v * 17 / 16 + 1;
        }
        for v in 0..5000 {
            assert_eq!(value_at(index(v)), h.lowest_equivalent(v), "value {v}");
            assert_eq!(index(value_at(index(v))), index(v));
        }
    }

    #[test]
    fn converts_losslessly() {
        let mut c = LatencyCounts::new(1_000_000);
        let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000, SIGFIG).unwrap();
        for v in [
            0u64, 1, 7, 2047, 2048, 2049, 123_456, 999_999, 1_000_000, 5_000_000,
        ] {
            c.record(v);
            h.saturating_record(v);
        }
        let g = c.to_histogram();
        assert_eq!(g.len(), h.len());
        assert_eq!(g.max(), h.max());
        assert_eq!(g.min(), h.min());
        assert_eq!(g.mean(), h.mean());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(g.value_at_quantile(q), h.value_at_quantile(q));
        }
        let mut small = LatencyCounts::new(1000);
        small.merge(&c);
        assert_eq!(small.to_histogram().len(), 10);
        assert!(small.to_histogram().max() <= 1001);
    }
}
