//! The API's view of an NF (`GET /v1/nfs`): its definition, with the
//! figures of its report rows (its own and its replicas', summed) and its
//! instances.

use std::collections::HashMap;

use sluice_dataplane::naming::instance_of;
use sluice_dataplane::report::{NfReport, RunReport};
use sluice_dataplane::worker::Instance;

use crate::control::State as Ctl;
use crate::types::{NfView, PoolView, ReplicaView};

/// Every NF of the desired state as the API shows it, or only the one
/// named `only`.
pub(crate) fn nf_views(
    s: &Ctl,
    report: &RunReport,
    instances: &[Instance],
    only: Option<&str>,
) -> Vec<NfView> {
    // Each NF's report rows (its own, then its replicas', `NAME.k`, and
    // other generations', `NAME@g`) and instances, found in one pass
    // over each: looking them up per NF made listing N NFs cost N².
    let mut rows_of: HashMap<&str, Vec<&NfReport>> = HashMap::new();
    for r in &report.nfs {
        rows_of.entry(instance_of(&r.name).nf).or_default().push(r);
    }
    let mut instances_of: HashMap<&str, Vec<&Instance>> = HashMap::new();
    for i in instances {
        instances_of
            .entry(instance_of(&i.nf).nf)
            .or_default()
            .push(i);
    }
    s.desired_entries("nfs", only)
        .into_iter()
        .map(|d| {
            let name = d["name"].as_str().unwrap_or_default().to_string();
            let rows = rows_of.remove(name.as_str()).unwrap_or_default();
            let r = rows.first().copied();
            let sum = |f: fn(&NfReport) -> u64| -> u64 { rows.iter().map(|r| f(r)).sum() };
            let mut drops = std::collections::BTreeMap::new();
            for (k, v) in rows.iter().flat_map(|r| &r.drops) {
                *drops.entry(k.clone()).or_insert(0) += v;
            }
            NfView {
                nf_type: d["type"].as_str().unwrap_or_default().to_string(),
                isolation: d["isolation"].as_str().unwrap_or_default().to_string(),
                packets: sum(|r| r.packets),
                cpu_ns: sum(|r| r.cpu_ns),
                process_cpu_us: sum(|r| r.process_cpu_us),
                process_switches: sum(|r| r.process_switches),
                restarts: sum(|r| r.restarts.into()) as u32,
                sandbox: r.and_then(|r| r.sandbox.clone()),
                sandbox_kills: sum(|r| r.sandbox_kills.into()) as u32,
                oom_kills: sum(|r| r.oom_kills.into()) as u32,
                domain: r.map_or_else(
                    || sluice_spec::PLATFORM_DOMAIN.to_string(),
                    |r| r.domain.clone(),
                ),
                domain_copies: sum(|r| r.domain_copies),
                drops,
                instances: (instances_of.remove(name.as_str()).unwrap_or_default())
                    .into_iter()
                    .cloned()
                    .collect(),
                replicas: if rows.len() > 1 {
                    rows.iter()
                        .map(|r| ReplicaView {
                            name: r.name.clone(),
                            packets: r.packets,
                            restarts: r.restarts,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                pool: pool_view(&rows),
                rollout: s.rollout_view(&name),
                name,
                definition: d,
            }
        })
        .collect()
}

/// The pool of a `per_flow` NF from its instances' rows (none for others).
fn pool_view(rows: &[&NfReport]) -> Option<PoolView> {
    let flows: Vec<u64> = rows.iter().filter_map(|r| r.pool_flows).collect();
    if flows.is_empty() {
        return None;
    }
    let busy = flows.iter().filter(|&&f| f > 0).count() as u32;
    Some(PoolView {
        instances: flows.len() as u32,
        busy,
        idle: flows.len() as u32 - busy,
        flows: flows.iter().sum(),
    })
}
