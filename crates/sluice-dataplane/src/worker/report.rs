//! A worker's own report: what it counted, read into a [`RunReport`].
//! It lives with the worker (it reads the worker's state), so the report
//! types in `crate::report` do not depend on the worker.

use sluice_mem::Backing;
use sluice_ports::Sink;

use crate::latency::Histogram;
use crate::nf_rt::NfRt;
use crate::report::{
    nf_numbers, wasted_share, BufferReport, FlowReport, Latency, NfFaults, NfReport, PortReport,
    RowLists, RunReport,
};
use crate::report_merge::Unnamed;

use super::mailbox::Instance;
use super::Worker;
use crate::nf_rt::Phase;

/// Latency per chain, by chain id (`None`: no packet took it): the
/// histograms of its routes (current and retired) added up. The asker
/// makes the chains' rows ([`Unnamed`]).
fn chain_histograms(w: &Worker<'_>) -> Vec<Option<Histogram>> {
    let mut by_chain: Vec<Option<Histogram>> = vec![None; w.plan.chains.len()];
    for (route, h) in w.route_latency.iter().enumerate() {
        if h.count == 0 {
            continue;
        }
        let Some(r) = w.plan.route(route as u16) else {
            continue;
        };
        if let Some(slot) = by_chain.get_mut(r.chain as usize) {
            slot.get_or_insert_with(Histogram::new).merge(h);
        }
    }
    by_chain
}

/// All of a worker's sinks merged into one (None without sinks): their
/// counters and latency samples, not their flow tables (a live report is
/// made on the worker's thread, between its packets).
pub(crate) fn merged_sink(w: &Worker<'_>) -> Option<Sink> {
    let mut merged: Option<Sink> = None;
    for s in w.ports.iter().flatten().filter_map(|p| p.sink()) {
        match &mut merged {
            Some(m) => m.merge(s),
            None => merged = Some(s.without_flows()),
        }
    }
    merged
}

/// The report of what a worker counted so far, its NF and chain rows
/// unnamed (see [`Unnamed`]; its `spec` is left empty for the caller to
/// fill in).
pub(crate) fn run_report(w: &Worker<'_>) -> (RunReport, Unnamed) {
    let end = if w.stopped_ns > 0 {
        w.stopped_ns
    } else {
        sluice_sys::monotonic_ns()
    };
    let duration_ns = end.max(w.started_ns + 1) - w.started_ns;
    let duration_s = duration_ns as f64 / 1e9;
    let ports: Vec<&crate::ports::PortRt> = w
        .plan
        .port_order
        .iter()
        .filter_map(|&i| w.ports.get(i as usize)?.as_ref())
        .collect();
    let nfs: Vec<&NfRt<'_>> = w
        .plan
        .nf_order
        .iter()
        .filter_map(|&i| w.nfs.get(i as usize)?.as_ref())
        .collect();
    let gone = &w.gone;
    let packets_in: u64 =
        ports.iter().map(|p| p.stats.rx_packets).sum::<u64>() + gone.ports.rx_packets;
    let packets_out: u64 =
        ports.iter().map(|p| p.stats.tx_packets).sum::<u64>() + gone.ports.tx_packets;
    // Segments a port cut from a super-packet on transmit, beyond the
    // first, are packets the platform originated.
    let packets_originated: u64 = nfs.iter().map(|n| n.originated).sum::<u64>()
        + gone.originated
        + ports
            .iter()
            .map(|p| p.stats.offload.gso_segments)
            .sum::<u64>()
        + gone.ports.offload.gso_segments;
    let bytes_out: u64 = ports.iter().map(|p| p.stats.tx_bytes).sum::<u64>() + gone.ports.tx_bytes;
    let mut drops = w.drops.named();
    for nf in &nfs {
        for (name, &n) in nf.drop_names.iter().zip(&nf.local_drops) {
            if n > 0 {
                *drops.entry(format!("{}:{name}", nf.name)).or_default() += n;
            }
        }
    }
    for (k, &n) in &gone.nf_drops {
        *drops.entry(k.clone()).or_default() += n;
    }
    let drops_total: u64 = drops.values().sum();
    let fs = w.flows.stats();
    let mut rows = RowLists::default();
    let nfs: Vec<NfReport> = nfs
        .iter()
        .map(|nf| {
            let plan = w.plan.nf(nf.id);
            let counters = plan.map_or(&[][..], |p| &p.counters[..]);
            let mut r = nf_numbers(nf, counters, &mut rows);
            let set = plan.and_then(|p| p.set);
            r.pool_flows = w.exclusive.flows_of(set, nf.id).map(u64::from);
            r
        })
        .collect();
    let unnamed = Unnamed {
        plan: std::sync::Arc::clone(&w.plan),
        rows,
        chains: chain_histograms(w),
    };
    let report = RunReport {
        spec: String::new(),
        duration_s,
        packets_in,
        packets_originated,
        packets_out,
        bytes_out,
        drops,
        drops_total,
        unaccounted: (packets_in + packets_originated) as i64
            - packets_out as i64
            - drops_total as i64,
        mpps: packets_out as f64 / duration_s / 1e6,
        gbps: bytes_out as f64 * 8.0 / duration_s / 1e9,
        // The asker fills it in from the shard's merged sink
        // (`RunReport::merge_shards`): the histogram work is not the
        // worker's, and the sinks are merged once per report.
        latency_ns: Latency::default(),
        worker_stalls: w.stalls,
        worker_stalled_us: w.stalled_ns / 1000,
        template_restarts: w.host.as_ref().map_or(0, |h| h.restarts()),
        failed_workers: Vec::new(),
        wasted_visits: w.wasted_visits(),
        wasted_share: wasted_share(w.wasted_visits(), &nfs),
        cpu_weights: w.sched.stats().weights.name().to_string(),
        realtime_nfs: w.sched.stats().realtime as u64,
        nfs,
        ports: ports
            .iter()
            .map(|p| {
                let sink = p.sink_report();
                PortReport {
                    name: p.name.clone(),
                    kind: p.kind.to_string(),
                    mode: p.mode.clone(),
                    stats: p.report_stats(),
                    reordered: sink.map(|s| s.reordered),
                    duplicates: sink.map(|s| s.duplicates),
                }
            })
            .collect(),
        chains: Vec::new(),
        flows: FlowReport {
            created: fs.created,
            ended: fs.ended,
            live: w.flows.live(),
            table_full: fs.full,
        },
        // The asker audits the pool once for the whole report
        // (`RunReport::merge_shards`): a walk of every buffer's owner
        // here would be one more the packets wait for.
        buffers: BufferReport {
            capacity: 0,
            free: 0,
            held_by_platform: 0,
            held_by_nfs: 0,
            domains: Vec::new(),
        },
        nf_faults: NfFaults {
            invalid_handles: w.drops.invalid_handles,
            invalid_events: w.drops.invalid_events,
        },
        leaked_buffers: 0,
        nf_slots: Default::default(),
        arena_bytes: w.arena.size(),
        arena_backing: match w.arena.backing() {
            Backing::HugePages => "2 MiB huge pages".to_string(),
            Backing::NormalPages => "normal pages".to_string(),
            Backing::NormalPagesFallback(_) => "normal pages (huge pages unavailable)".to_string(),
        },
    };
    (report, unnamed)
}

impl Worker<'_> {
    /// The NF instances this worker runs, in spec order.
    pub(super) fn instances(&self) -> Vec<Instance> {
        let plan = &self.plan;
        plan.nf_order
            .iter()
            .filter_map(|&i| self.nfs.get(i as usize)?.as_ref())
            .map(|nf| {
                let (pid, cpu, state, queued) = match nf.process_ref() {
                    Some(p) => (
                        p.pid,
                        Some(p.spawn.cpu),
                        match p.phase {
                            Phase::Starting => "starting",
                            Phase::Running => "running",
                            Phase::Down { .. } => "down",
                            Phase::Stopping => "stopping",
                            Phase::Stopped => "stopped",
                            Phase::Failed => "failed",
                        },
                        p.link.queued(),
                    ),
                    None => (0, None, "running", 0),
                };
                Instance {
                    nf: nf.name.clone(),
                    nf_type: nf.type_name.to_string(),
                    isolation: nf.isolation.name().to_string(),
                    worker: self.cfg.index,
                    slot: nf.slot,
                    pid,
                    cpu,
                    state: state.to_string(),
                    restarts: nf.restarts,
                    packets: nf.packets(),
                    cpu_ns: nf.busy_ns(),
                    queued,
                }
            })
            .collect()
    }
}
