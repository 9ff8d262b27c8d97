//! One report from the reports of several workers (`settings.workers > 1`).
//!
//! Every worker ran its own copy of each port and NF on its share of the
//! flows, so counts add up; latency comes from the merged sink histograms
//! and the buffer audit is taken once, after every worker has stopped.
//! NF counters add up too, which is right for counts and per-flow state;
//! each worker's own values are kept in `counters_by_worker` for gauges
//! that do not add (maxima, percentiles, configured table sizes).

use std::collections::BTreeMap;

use sluice_mem::Arena;
use sluice_ports::Sink;

use crate::cpu_clock::CpuClock;
use crate::latency::Histogram;
use crate::plan::Plan;
use crate::report::{latency_of, BufferReport, ChainReport, NfReport, RowLists, RunReport};

/// What one worker hands back: its report and its merged sink, if any.
pub struct ShardResult {
    /// The worker's own report (its buffer audit is not used).
    pub report: RunReport,
    /// All of the worker's sinks merged (for exact latency percentiles).
    pub sink: Option<Sink>,
    /// Each process NF's CPU clock and its process now, by its place in
    /// `report.nfs`: the kernel's count is read by whoever asked for the
    /// report ([`ShardResult::read_cpu`]), not by the worker, for whom a
    /// read per NF (a `/proc` file each) was a stall of its packets that
    /// grew with the NFs.
    pub cpu: Vec<(usize, CpuClock, i32)>,
    /// What the asker finishes ([`ShardResult::finish`]); `None` once done.
    pub(crate) unnamed: Option<Unnamed>,
}

/// What the worker leaves of its report for the asker to make: its NF
/// rows' names and lists (`report::nf`), and its chains' rows. Strings
/// and maps made on the worker's thread are time its packets wait (a
/// report of 1,000 NFs and chains cost it ~2.6 ms); here they are made
/// from the plan the worker ran, which it shares.
pub(crate) struct Unnamed {
    /// The worker's plan when it made the report.
    pub(crate) plan: std::sync::Arc<Plan>,
    /// Its NF rows' lists, in `report.nfs` order.
    pub(crate) rows: RowLists,
    /// Latency per chain id (`None`: no packet took it).
    pub(crate) chains: Vec<Option<Histogram>>,
}

/// Whose CPU time a report reads from the kernel. Each process NF's read
/// is a `/proc` file (a few microseconds): at 1,000 NFs most of what a
/// report costs its asker, which a view of one NF or of the ports need
/// not pay. A row not read keeps the time the worker last read (it reads
/// each NF in turn, every NF about every 0.25 s at 1,000 NFs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuRead<'a> {
    /// Every process NF's.
    All,
    /// Only the instances' of the NF of this name (every replica and
    /// generation, as its view shows them).
    Nf(&'a str),
    /// None.
    None,
}

impl CpuRead<'_> {
    /// Whether the report row of instance `nf` is read.
    fn wants(&self, nf: &str) -> bool {
        match self {
            CpuRead::All => true,
            CpuRead::Nf(name) => crate::naming::instance_of(nf).nf == *name,
            CpuRead::None => false,
        }
    }
}

impl ShardResult {
    /// Makes what the worker left unnamed (see [`Unnamed`]), then brings
    /// the CPU time of the NFs `which` names up to date from the kernel
    /// (see `cpu`). Once per result, before it is merged.
    pub fn finish(&mut self, which: CpuRead<'_>) {
        if let Some(u) = self.unnamed.take() {
            u.rows.name_rows(&mut self.report.nfs, &u.plan);
            let mut chains = u.chains;
            self.report.chains = (u.plan.chains_in_order())
                .map(|(id, c)| {
                    let h = chains.get_mut(id as usize).and_then(Option::take);
                    ChainReport::from_histogram(c.name.clone(), h.unwrap_or_default())
                })
                .collect();
        }
        self.read_cpu(which);
    }

    fn read_cpu(&mut self, which: CpuRead<'_>) {
        for (k, mut clock, pid) in std::mem::take(&mut self.cpu) {
            let Some(name) = self.report.nfs.get(k).map(|r| r.name.as_str()) else {
                continue;
            };
            if !which.wants(name) {
                continue;
            }
            clock.sample(pid);
            if let Some(r) = self.report.nfs.get_mut(k) {
                r.process_cpu_us = clock.total_ns() / 1000;
                r.process_switches = clock.switches();
            }
        }
    }
}

fn add_maps(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn add_vec(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

fn add_nf(into: &mut NfReport, from: &NfReport) {
    into.packets += from.packets;
    into.cpu_ns += from.cpu_ns;
    into.ns_per_packet = if into.packets > 0 {
        into.cpu_ns as f64 / into.packets as f64
    } else {
        0.0
    };
    into.restarts += from.restarts;
    into.reforks += from.reforks;
    into.sandbox_kills += from.sandbox_kills;
    into.oom_kills += from.oom_kills;
    if from.last_exit.is_some() {
        into.last_exit.clone_from(&from.last_exit);
    }
    into.startup_us.extend_from_slice(&from.startup_us);
    into.shell_starts += from.shell_starts;
    into.starts += from.starts;
    into.standby_starts += from.standby_starts;
    into.spare_starts += from.spare_starts;
    into.domain_copies += from.domain_copies;
    into.restart_times.merge(&from.restart_times);
    add_maps(&mut into.drops, &from.drops);
    add_maps(&mut into.counters, &from.counters);
    into.sleeps += from.sleeps;
    into.yields += from.yields;
    into.turns += from.turns;
    into.out_of_turn += from.out_of_turn;
    into.turn_wait_us += from.turn_wait_us;
    into.stalls += from.stalls;
    into.stalled_us += from.stalled_us;
    into.wakeups += from.wakeups;
    into.wakeups_by_timeout += from.wakeups_by_timeout;
    into.turns_revoked += from.turns_revoked;
    into.turns_held_off += from.turns_held_off;
    into.process_cpu_us += from.process_cpu_us;
    into.process_switches += from.process_switches;
    into.invalid_handles += from.invalid_handles;
    into.originated += from.originated;
    add_vec(&mut into.ext_counters, &from.ext_counters);
    if let Some(f) = from.pool_flows {
        *into.pool_flows.get_or_insert(0) += f;
    }
}

impl RunReport {
    /// Merges the reports of workers that ran the same plan on disjoint
    /// shares of the flows. `buffers` is the pool's accounting after all
    /// stopped.
    /// Returns `None` for an empty list.
    pub fn merge_shards(
        parts: Vec<ShardResult>,
        buffers: BufferReport,
        arena: &Arena,
    ) -> Option<RunReport> {
        let by_worker: Vec<Vec<(String, BTreeMap<String, u64>)>> = parts
            .iter()
            .map(|p| {
                p.report
                    .nfs
                    .iter()
                    .map(|n| (n.name.clone(), n.counters.clone()))
                    .collect()
            })
            .collect();
        let mut parts = parts.into_iter();
        let first = parts.next()?;
        let mut r = first.report;
        let mut sink = first.sink;
        for p in parts {
            let o = p.report;
            r.duration_s = r.duration_s.max(o.duration_s);
            r.packets_in += o.packets_in;
            r.packets_originated += o.packets_originated;
            r.packets_out += o.packets_out;
            r.bytes_out += o.bytes_out;
            add_maps(&mut r.drops, &o.drops);
            r.worker_stalls += o.worker_stalls;
            r.wasted_visits += o.wasted_visits;
            r.realtime_nfs += o.realtime_nfs;
            if r.cpu_weights == "off" {
                r.cpu_weights = o.cpu_weights;
            }
            r.worker_stalled_us += o.worker_stalled_us;
            r.template_restarts += o.template_restarts;
            // By name: during an apply, workers may briefly differ.
            let index: std::collections::HashMap<String, usize> = r
                .nfs
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.clone(), i))
                .collect();
            for b in &o.nfs {
                match index.get(&b.name) {
                    Some(&i) => add_nf(&mut r.nfs[i], b),
                    None => r.nfs.push(b.clone()),
                }
            }
            for b in &o.ports {
                let Some(a) = r.ports.iter_mut().find(|a| a.name == b.name) else {
                    r.ports.push(b.clone());
                    continue;
                };
                a.stats += &b.stats;
                let add = |x: &mut Option<u64>, y: Option<u64>| {
                    if let (Some(x), Some(y)) = (x.as_mut(), y) {
                        *x += y;
                    }
                };
                add(&mut a.reordered, b.reordered);
                add(&mut a.duplicates, b.duplicates);
            }
            for b in &o.chains {
                match r.chains.iter_mut().find(|a| a.name == b.name) {
                    Some(a) => {
                        let mut h = a.histogram.clone();
                        h.merge(&b.histogram);
                        *a = crate::report::ChainReport::from_histogram(a.name.clone(), h);
                    }
                    None => r.chains.push(b.clone()),
                }
            }
            r.flows.created += o.flows.created;
            r.flows.ended += o.flows.ended;
            r.flows.live += o.flows.live;
            r.flows.table_full += o.flows.table_full;
            r.nf_faults.invalid_handles += o.nf_faults.invalid_handles;
            r.nf_faults.invalid_events += o.nf_faults.invalid_events;
            match (&mut sink, p.sink) {
                (Some(m), Some(s)) => m.merge(&s),
                (None, s) => sink = s,
                _ => {}
            }
        }
        let by_worker: Vec<std::collections::HashMap<String, BTreeMap<String, u64>>> = by_worker
            .into_iter()
            .map(|w| w.into_iter().collect())
            .collect();
        if by_worker.len() > 1 {
            for nf in r.nfs.iter_mut() {
                nf.counters_by_worker = by_worker
                    .iter()
                    .map(|w| w.get(&nf.name).cloned().unwrap_or_default())
                    .collect();
            }
        }
        r.drops_total = r.drops.values().sum();
        r.wasted_share = crate::report::wasted_share(r.wasted_visits, &r.nfs);
        r.unaccounted = (r.packets_in + r.packets_originated) as i64
            - r.packets_out as i64
            - r.drops_total as i64;
        let secs = r.duration_s.max(1e-9);
        r.mpps = r.packets_out as f64 / secs / 1e6;
        r.gbps = r.bytes_out as f64 * 8.0 / secs / 1e9;
        r.latency_ns = latency_of(sink.as_ref());
        r.leaked_buffers = u64::from(buffers.capacity - buffers.free);
        r.buffers = buffers;
        r.arena_bytes = arena.size();
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::CpuRead;

    #[test]
    fn one_nf_s_read_takes_its_every_instance_and_no_other_nf() {
        let one = CpuRead::Nf("acl");
        for instance in ["acl", "acl.3", "acl@2", "acl@2.1"] {
            assert!(one.wants(instance), "{instance}");
        }
        for other in ["acl2", "acl@x", "fw", "fw@1.0", "xacl"] {
            assert!(!one.wants(other), "{other}");
        }
        assert!(CpuRead::All.wants("fw@1.0"));
        assert!(!CpuRead::None.wants("acl"));
    }
}
