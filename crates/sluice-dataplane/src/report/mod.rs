//! The end-of-run summary (`sluice run --json` prints it), and the live
//! report (`GET /v1/stats`) with the same keys. An NF's row is in `nf.rs`.

mod nf;

pub use nf::NfReport;
pub(crate) use nf::{nf_numbers, RowLists};

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_ports::Sink;

use crate::latency::Histogram;
use crate::ports::PortStats;

/// Latency percentiles in nanoseconds (from the sinks' HDR histograms).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// One chain's latency (ingress to egress through any port).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ChainReport {
    /// Chain name.
    pub name: String,
    /// Packets that left through a port.
    pub packets: u64,
    /// Mean time inside, ns.
    pub mean_ns: f64,
    /// Median, ns (the upper bound of its power-of-two bucket).
    pub p50_ns: u64,
    /// 99th percentile, ns (bucket upper bound).
    pub p99_ns: u64,
    /// The histogram.
    pub histogram: Histogram,
}

impl ChainReport {
    /// A chain's report from its histogram.
    pub fn from_histogram(name: String, h: Histogram) -> ChainReport {
        let q = |p: f64| {
            let want = (h.count as f64 * p).ceil() as u64;
            let mut seen = 0;
            for (i, &n) in h.buckets.iter().enumerate() {
                seen += n;
                if seen >= want.max(1) {
                    return Histogram::upper_ns(i);
                }
            }
            0
        };
        ChainReport {
            packets: h.count,
            mean_ns: if h.count > 0 {
                h.sum_ns as f64 / h.count as f64
            } else {
                0.0
            },
            p50_ns: if h.count > 0 { q(0.5) } else { 0 },
            p99_ns: if h.count > 0 { q(0.99) } else { 0 },
            name,
            histogram: h,
        }
    }
}

/// One port's summary.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PortReport {
    /// Port name.
    pub name: String,
    /// Port kind.
    pub kind: String,
    /// How a NIC port moves frames: `af_xdp` gives its XDP mode and
    /// whether its sockets are zero-copy or copy (`native XDP, copy`),
    /// `dpdk` says it copies between mbufs and arena buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Counters.
    #[serde(flatten)]
    pub stats: PortStats,
    /// Sink only: packets that arrived out of order within their flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<u64>,
    /// Sink only: duplicate packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
}

/// Flow-table summary.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FlowReport {
    /// Flows created.
    pub created: u64,
    /// Flows ended.
    pub ended: u64,
    /// Flows alive at the end.
    pub live: u32,
    /// Packets refused because the table was full.
    pub table_full: u64,
}

/// Buffer accounting at the end of the run.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct BufferReport {
    /// Buffers in the arena.
    pub capacity: u32,
    /// Buffers back in the pool.
    pub free: u32,
    /// Buffers still held by the platform.
    pub held_by_platform: u32,
    /// Buffers still held by NFs.
    pub held_by_nfs: u32,
    /// The same per trust domain, the platform's first (which counts the
    /// large buffers too); empty when the spec names no domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainBuffers>,
}

/// One trust domain's buffers (`settings.domains`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct DomainBuffers {
    /// The domain.
    pub name: String,
    /// Its buffers.
    pub capacity: u32,
    /// Back in its pool.
    pub free: u32,
    /// Held by the platform.
    pub held_by_platform: u32,
    /// Held by NFs.
    pub held_by_nfs: u32,
}

impl BufferReport {
    /// The accounting of `pool` now; `name` names trust domain `d`.
    pub fn of(pool: &sluice_mem::BufferPool, name: impl Fn(u8) -> String) -> BufferReport {
        let a = pool.audit();
        let domains = if pool.domains() > 1 {
            let by = pool.audit_domains().into_iter().enumerate();
            by.map(|(d, a)| DomainBuffers {
                name: name(d as u8),
                capacity: a.capacity,
                free: a.free,
                held_by_platform: a.platform,
                held_by_nfs: a.at_nfs,
            })
            .collect()
        } else {
            Vec::new()
        };
        BufferReport {
            capacity: a.capacity,
            free: a.free,
            held_by_platform: a.platform,
            held_by_nfs: a.at_nfs,
            domains,
        }
    }
}

/// The arena's NF slots (a live report; zero in a run's final one).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct SlotReport {
    /// Slots, all workers.
    pub capacity: u64,
    /// Free.
    pub free: u64,
    /// Held by the NFs of the running spec (one per NF and worker).
    pub in_use: u64,
    /// Held by instances of removed or replaced NFs that have not stopped
    /// yet; once changes have settled, any here are leaked.
    pub stopping: u64,
}

/// NF protocol violations the platform rejected.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct NfFaults {
    /// Ring entries that were not buffers the NF owned.
    pub invalid_handles: u64,
    /// Flow-end events that were not at that NF.
    pub invalid_events: u64,
}

/// The summary of a run.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RunReport {
    /// Spec file.
    pub spec: String,
    /// Seconds from the first poll to the stop.
    pub duration_s: f64,
    /// Packets received by input ports.
    pub packets_in: u64,
    /// Packets created by NFs (reject replies, flood copies, …).
    pub packets_originated: u64,
    /// Packets transmitted by output ports.
    pub packets_out: u64,
    /// Bytes transmitted (L2 frames, no FCS).
    pub bytes_out: u64,
    /// Drops by reason (`<nf>:<reason>` for NF-local reasons).
    pub drops: BTreeMap<String, u64>,
    /// All drops.
    pub drops_total: u64,
    /// `packets_in + packets_originated - packets_out - drops_total`: must
    /// be 0 (no silent loss).
    pub unaccounted: i64,
    /// NF visits spent on packets the platform dropped afterwards (a full
    /// ring, an NF down, a bad verdict, a loop): work wasted. Backpressure
    /// at the entry (`settings.backpressure`) drops before any.
    #[serde(default)]
    pub wasted_visits: u64,
    /// `wasted_visits` over all NF visits (the NFs' packets).
    #[serde(default)]
    pub wasted_share: f64,
    /// How `nfs[].cpu_weight` is enforced: `off` (no NF has one),
    /// `cgroup-v2`, `cgroup-v1` (the kernel's cpu controller, and turn
    /// slices) or `slices` (turn slices only: no cpu controller usable).
    #[serde(default)]
    pub cpu_weights: String,
    /// NF processes in the kernel's real-time class
    /// (`settings.scheduler.kernel_class: round_robin`; 0 where the kernel
    /// refused it).
    #[serde(default)]
    pub realtime_nfs: u64,
    /// Output rate, million packets per second.
    pub mpps: f64,
    /// Output rate, Gbit/s of L2 frame bytes.
    pub gbps: f64,
    /// End-to-end latency at sink ports.
    pub latency_ns: Latency,
    /// Times a worker's loop was held off the CPU for more than 50 µs
    /// between two passes without sleeping (the kernel, the hypervisor or
    /// other tasks ran on its core); summed over workers.
    pub worker_stalls: u64,
    /// Total time of those stalls, µs.
    pub worker_stalled_us: u64,
    /// Times an NF template process died and was started again (its NFs
    /// were restarted, and count in their `restarts`).
    pub template_restarts: u32,
    /// Workers that stopped because their code panicked, each with the
    /// panic's message; their packets, NFs and ports are missing from
    /// every other figure here. Empty while the platform is whole.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub failed_workers: Vec<String>,
    /// Per-NF summaries.
    pub nfs: Vec<NfReport>,
    /// Per-port summaries.
    pub ports: Vec<PortReport>,
    /// Per-chain latency, ingress to egress.
    pub chains: Vec<ChainReport>,
    /// Flow table.
    pub flows: FlowReport,
    /// Buffer accounting.
    pub buffers: BufferReport,
    /// Protocol violations by NFs (rejected, not trusted).
    pub nf_faults: NfFaults,
    /// Buffers not back in the pool at the end: must be 0.
    pub leaked_buffers: u64,
    /// The arena's NF slots.
    #[serde(default)]
    pub nf_slots: SlotReport,
    /// Arena size in bytes.
    pub arena_bytes: usize,
    /// What backs the arena.
    pub arena_backing: String,
}

/// `wasted` NF visits over all visits of `nfs` (their packets).
pub fn wasted_share(wasted: u64, nfs: &[NfReport]) -> f64 {
    let visits: u64 = nfs.iter().map(|n| n.packets).sum();
    if visits == 0 {
        0.0
    } else {
        wasted as f64 / visits as f64
    }
}

/// Latency percentiles of a (merged) sink.
pub(crate) fn latency_of(sink: Option<&Sink>) -> Latency {
    sink.map(|m| {
        let l = m.report().latency;
        Latency {
            count: l.count,
            p50: l.p50,
            p90: l.p90,
            p99: l.p99,
            p999: l.p999,
            max: l.max,
            mean: l.mean,
        }
    })
    .unwrap_or_default()
}

impl RunReport {
    /// The report of a platform with no workers' reports (none answered).
    pub fn empty(arena: &sluice_mem::Arena) -> RunReport {
        RunReport {
            spec: String::new(),
            duration_s: 0.0,
            packets_in: 0,
            packets_originated: 0,
            packets_out: 0,
            bytes_out: 0,
            drops: BTreeMap::new(),
            drops_total: 0,
            unaccounted: 0,
            wasted_visits: 0,
            wasted_share: 0.0,
            cpu_weights: "off".into(),
            realtime_nfs: 0,
            mpps: 0.0,
            gbps: 0.0,
            latency_ns: Latency::default(),
            worker_stalls: 0,
            worker_stalled_us: 0,
            template_restarts: 0,
            failed_workers: Vec::new(),
            nfs: Vec::new(),
            ports: Vec::new(),
            chains: Vec::new(),
            flows: FlowReport {
                created: 0,
                ended: 0,
                live: 0,
                table_full: 0,
            },
            buffers: BufferReport {
                capacity: arena.capacity(),
                free: 0,
                held_by_platform: 0,
                held_by_nfs: 0,
                domains: Vec::new(),
            },
            nf_faults: NfFaults {
                invalid_handles: 0,
                invalid_events: 0,
            },
            leaked_buffers: 0,
            nf_slots: SlotReport::default(),
            arena_bytes: arena.size(),
            arena_backing: String::new(),
        }
    }

    /// A human-readable summary.
    pub fn human(&self) -> String {
        self.human_as("sluice run")
    }

    /// [`Self::human`] headed by `who` (`sluice daemon` for a daemon's
    /// report) instead of `sluice run`.
    pub fn human_as(&self, who: &str) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "{who} {}: {:.2} s\n  in  {} packets\n  out {} packets  {:.3} Mpps  {:.3} Gbit/s\n",
            self.spec, self.duration_s, self.packets_in, self.packets_out, self.mpps, self.gbps
        ));
        s.push_str(&format!(
            "  latency p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  max {:.1} µs\n",
            self.latency_ns.p50 as f64 / 1e3,
            self.latency_ns.p99 as f64 / 1e3,
            self.latency_ns.p999 as f64 / 1e3,
            self.latency_ns.max as f64 / 1e3
        ));
        s.push_str(&format!("  drops {}", self.drops_total));
        for (k, v) in &self.drops {
            s.push_str(&format!("  {k}={v}"));
        }
        s.push('\n');
        for nf in &self.nfs {
            s.push_str(&format!(
                "  nf {:<12} {:<8} {:<7} {:>11} pkts {:>7.1} ns/pkt  restarts {}\n",
                nf.name, nf.nf_type, nf.isolation, nf.packets, nf.ns_per_packet, nf.restarts
            ));
        }
        s.push_str(&format!(
            "  flows created {} ended {} live {}\n  buffers {} leaked {}  unaccounted {}\n",
            self.flows.created,
            self.flows.ended,
            self.flows.live,
            self.buffers.capacity,
            self.leaked_buffers,
            self.unaccounted
        ));
        s
    }
}
