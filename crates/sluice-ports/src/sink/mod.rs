//! Measuring sink: counters, latency histogram and per-flow ordering.
//!
//! # Per packet
//!
//! [`Sink::observe`] parses the frame with `sluice_packet::parse`, reads the
//! [`crate::Stamp`] at the start of the L4 payload if there is one, and:
//!
//! * records the latency `now - stamp.timestamp_ns` (or `now - meta_ts_ns`
//!   without a stamp; a metadata timestamp of 0 means "none") in an HDR
//!   histogram (ns, 3 significant digits, up to
//!   [`SinkConfig::max_latency_ns`]);
//! * checks ordering, counting reordered and duplicate packets (gaps, i.e.
//!   loss, are not reordering): per stamp flow id and stamp sequence, and
//!   for TCP also per connection (5-tuple) and TCP sequence number for
//!   every segment, stamped or not — frames too small for a stamp (IMIX
//!   64 B) are thus still checked when they are TCP.  Stampless non-TCP
//!   frames are counted and timed but cannot be order-checked.
//!
//! Per-flow state lives in fixed-size set-associative tables allocated in
//! [`Sink::new`]: no allocation per packet.
//!
//! # Several workers
//!
//! Give each worker its own sink and [`Sink::merge`] them for the report;
//! flows must not be split between workers (RSS keeps them together).

mod latency;
mod locate;
mod report;
mod table;

pub use report::{LatencySummary, SinkReport};

use hdrhistogram::Histogram;
use sluice_packet::tcp::TcpFlags;

use crate::stamp::Stamp;
use latency::LatencyCounts;
use locate::{conn_key, locate, Located, L4};
use table::{Order, SeqWindow, Slot, Table, TcpOrder};

/// Sink sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkConfig {
    /// Entries of the stamp-flow ordering table (rounded up to a power of
    /// two); should exceed the number of concurrent flows.  32 bytes each.
    pub flow_capacity: usize,
    /// Entries of the TCP connection table (rounded up to a power of two);
    /// should exceed the number of concurrently open connections.  32 bytes
    /// each.
    pub tcp_capacity: usize,
    /// Highest latency the histogram resolves (larger samples are recorded
    /// as this value), ns; at least 2.
    pub max_latency_ns: u64,
}

impl Default for SinkConfig {
    /// 65536 flows, 65536 TCP connections, latencies up to 10 s.
    fn default() -> Self {
        SinkConfig {
            flow_capacity: 1 << 16,
            tcp_capacity: 1 << 16,
            max_latency_ns: 10_000_000_000,
        }
    }
}

/// The measuring sink.  See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Sink {
    lat: LatencyCounts,
    flows: Table<SeqWindow>,
    tcp: Table<TcpOrder>,
    r: SinkReport,
}

/// Key of a stamp flow id in the flow table (never 0).
#[inline(always)]
fn stamp_key(flow: u32) -> u64 {
    u64::from(flow) | 1 << 63
}

/// Verdict for a TCP segment from its stamp check (if stamped) and its
/// sequence-number check.  The sequence check sees every segment of the
/// connection, stamped or not, so it catches reordering between stamped
/// and stampless segments (IMIX); the stamp check is exact for duplicates.
/// A TCP flow is a connection: only the sequence check's `First` counts,
/// and only it says what is reordered. A generator's stamp flow spans
/// its successive connections, which are flows of their own: a new
/// connection's first segments may rightly pass the last ones of the
/// one before (they may take different NF replicas), which the stamp
/// order would count as reordering.
#[inline]
fn combine(by_stamp: Option<Order>, by_seq: Order) -> Order {
    match (by_stamp, by_seq) {
        (Some(Order::Duplicate), _) | (_, Order::Duplicate) => Order::Duplicate,
        (_, v) => v,
    }
}

impl Sink {
    /// A sink with preallocated tables and histogram.
    pub fn new(cfg: SinkConfig) -> Sink {
        Sink {
            lat: LatencyCounts::new(cfg.max_latency_ns),
            flows: Table::new(cfg.flow_capacity),
            tcp: Table::new(cfg.tcp_capacity),
            r: SinkReport::default(),
        }
    }

    /// Observes one received frame.  `meta_ts_ns` is the timestamp the
    /// data plane attached to the packet (used when the frame has no stamp;
    /// 0 = none), `now_ns` the receive time, on the generator's clock.
    #[inline]
    pub fn observe(&mut self, frame: &[u8], meta_ts_ns: u64, now_ns: u64) {
        self.r.packets += 1;
        self.r.bytes += frame.len() as u64;
        let Some(l) = locate(frame) else {
            self.r.unparsed += 1;
            self.record_meta(meta_ts_ns, now_ns);
            return;
        };
        let stamp = if l.l4 == L4::Other || l.payload_len < Stamp::LEN {
            None
        } else {
            frame.get(l.payload_off..).and_then(Stamp::read)
        };
        let by_stamp = match stamp {
            Some(s) => Some(self.stamped(s, now_ns)),
            None => {
                self.record_meta(meta_ts_ns, now_ns);
                None
            }
        };
        let verdict = if l.l4 == L4::Tcp {
            match self.observe_tcp(frame, &l) {
                Some(by_seq) => Some(combine(by_stamp, by_seq)),
                None => by_stamp.map(|v| {
                    if v == Order::First {
                        Order::Sequential
                    } else {
                        v
                    }
                }),
            }
        } else {
            by_stamp
        };
        if let Some(v) = verdict {
            self.count(v);
        }
    }

    /// Records a stamped packet's latency and runs the stamp order check.
    #[inline(always)]
    fn stamped(&mut self, s: Stamp, now_ns: u64) -> Order {
        self.r.stamped += 1;
        self.lat.record(now_ns.saturating_sub(s.timestamp_ns));
        match self.flows.lookup(stamp_key(s.flow)) {
            Slot::Hit(i) => self.flows.state_mut(i).observe(s.seq),
            Slot::New { idx, evicted } => {
                self.r.evictions += u64::from(evicted);
                self.flows.state_mut(idx).observe(s.seq)
            }
        }
    }

    /// Observes a batch of `(frame, meta_ts_ns)` received at `now_ns`.
    pub fn observe_batch<'a, I>(&mut self, frames: I, now_ns: u64)
    where
        I: IntoIterator<Item = (&'a [u8], u64)>,
    {
        for (f, ts) in frames {
            self.observe(f, ts, now_ns);
        }
    }

    #[inline]
    fn record_meta(&mut self, meta_ts_ns: u64, now_ns: u64) {
        if meta_ts_ns != 0 {
            self.lat.record(now_ns.saturating_sub(meta_ts_ns));
        }
    }

    #[inline]
    fn count(&mut self, verdict: Order) {
        match verdict {
            Order::First => self.r.flows_seen += 1,
            Order::Sequential => {}
            Order::Reordered => self.r.reordered += 1,
            Order::Duplicate => self.r.duplicates += 1,
        }
    }

    /// Runs the TCP sequence-number check; `None` if the segment's header
    /// cannot be read.
    #[inline]
    fn observe_tcp(&mut self, frame: &[u8], l: &Located) -> Option<Order> {
        let t = frame.get(l.l4_off..l.l4_off + 14)?;
        let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
        let flags = TcpFlags::from_bits(t[13]);
        let len = l.payload_len as u32
            + u32::from(flags.contains(TcpFlags::SYN))
            + u32::from(flags.contains(TcpFlags::FIN));
        Some(match self.tcp.lookup(conn_key(frame, l)) {
            Slot::Hit(i) => self.tcp.state_mut(i).observe(seq, len),
            Slot::New { idx, evicted } => {
                self.r.evictions += u64::from(evicted);
                self.tcp.state_mut(idx).observe(seq, len)
            }
        })
    }

    /// The report so far.
    pub fn report(&self) -> SinkReport {
        SinkReport {
            latency: LatencySummary::from_histogram(&self.histogram()),
            ..self.r
        }
    }

    /// The latency histogram (ns, values 1..=`max_latency_ns`, 3
    /// significant digits), e.g. for a full percentile dump or export.
    /// Built on demand (allocates).
    pub fn histogram(&self) -> Histogram<u64> {
        self.lat.to_histogram()
    }

    /// A sink with this one's counters and latency samples but empty
    /// ordering tables: what merging and reporting read. A report taken
    /// while packets flow copies this, not the flow tables (a few MiB
    /// that the copy would fault in and fill on the data plane's thread).
    pub fn without_flows(&self) -> Sink {
        Sink {
            lat: self.lat.clone(),
            flows: Table::new(0),
            tcp: Table::new(0),
            r: self.r,
        }
    }

    /// Adds `other`'s counters and latency samples to this sink (for
    /// multi-worker runs).  Ordering state is per sink and is not merged.
    pub fn merge(&mut self, other: &Sink) {
        self.lat.merge(&other.lat);
        let (a, b) = (&mut self.r, &other.r);
        a.packets += b.packets;
        a.bytes += b.bytes;
        a.stamped += b.stamped;
        a.unparsed += b.unparsed;
        a.reordered += b.reordered;
        a.duplicates += b.duplicates;
        a.flows_seen += b.flows_seen;
        a.evictions += b.evictions;
    }
}
