//! Sink reports.

use hdrhistogram::Histogram;

/// Latency distribution summary, in nanoseconds.
///
/// Percentiles are HDR-histogram values (3 significant digits: within
/// 0.1 % of the exact value); all fields are 0 when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample (samples above the histogram's range are recorded
    /// as its maximum).
    pub max: u64,
}

impl LatencySummary {
    /// Summarises a histogram.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// What a [`super::Sink`] observed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SinkReport {
    /// Frames observed.
    pub packets: u64,
    /// Bytes observed (frame lengths).
    pub bytes: u64,
    /// Frames that carried a [`crate::Stamp`].
    pub stamped: u64,
    /// Frames that did not parse as Ethernet/IP (counted, latency from the
    /// metadata timestamp, no ordering check).
    pub unparsed: u64,
    /// One-way latency: receive time minus the stamp's send time, or minus
    /// the metadata timestamp for frames without a stamp.
    pub latency: LatencySummary,
    /// Packets that arrived after a later packet of their flow.
    pub reordered: u64,
    /// Packets seen before: same stamp flow and sequence (within the last
    /// 64 sequences of the flow), or same TCP connection and sequence
    /// number as one of its last four segments.
    pub duplicates: u64,
    /// Distinct flows seen: TCP connections (5-tuples) plus stamp flow ids
    /// of other (UDP) traffic.  A flow evicted from a full table and seen
    /// again counts twice.
    pub flows_seen: u64,
    /// Flow states evicted because a table set was full; non-zero means
    /// the tables are too small for the traffic and ordering results are
    /// approximate.
    pub evictions: u64,
}
