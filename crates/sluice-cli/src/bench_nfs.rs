//! `sluice bench nfs`: the realistic chain of the NF library — generator →
//! firewall → NAT → monitor → router → sink (`examples/bench-realistic.yaml`,
//! built into the binary) — with the cost of each NF per packet.

use std::process::ExitCode;

use serde::Serialize;
use sluice_spec::{Isolation, PortKind};

use crate::bench::{isolation_name, nf_type_names, run_spec, Figures};
use crate::cli::{IsolationArg, NfsArgs};

/// The chain's spec; `--flows`, `--workers` and `--isolation` override it.
const SPEC: &str = include_str!("../../../examples/bench-realistic.yaml");

/// The spec with its tables (platform flow table, NAT sessions; the
/// firewall follows the flow table) sized for `flows` concurrent flows:
/// the file's 65536 entries hold its 4096 flows, not 100 000.
fn sized_spec(flows: u32) -> String {
    let capacity = (u64::from(flows) * 2)
        .next_power_of_two()
        .clamp(65_536, 4_194_304);
    SPEC.replace("capacity: 65536", &format!("capacity: {capacity}"))
}

#[derive(Debug, Serialize)]
struct NfCost {
    name: String,
    #[serde(rename = "type")]
    nf_type: String,
    packets: u64,
    ns_per_packet: f64,
}

#[derive(Debug, Serialize)]
struct NfsResult {
    flows: u32,
    isolation: &'static str,
    #[serde(flatten)]
    figures: Figures,
    /// Drops by reason (the chain passes every packet: empty unless broken).
    drops: std::collections::BTreeMap<String, u64>,
    nfs: Vec<NfCost>,
}

/// Runs `sluice bench nfs`.
pub fn run(a: NfsArgs) -> ExitCode {
    let mut spec =
        match sluice_spec::parse_str(&sized_spec(a.flows), "<bench nfs>", &nf_type_names()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sluice: {e}");
                return ExitCode::from(2);
            }
        };
    for p in &mut spec.ports {
        if let PortKind::Generator(g) = &mut p.kind {
            g.flows = a.flows;
        }
    }
    let isolation = match a.isolation {
        IsolationArg::Inline => Isolation::Inline,
        IsolationArg::Process => Isolation::Process,
    };
    for nf in &mut spec.nfs {
        nf.isolation = isolation;
    }
    // `run_spec` puts the overrides through the same checks as a file.
    let report = match run_spec(&spec, a.duration) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = NfsResult {
        flows: a.flows,
        isolation: isolation_name(a.isolation),
        figures: Figures::of(&report),
        drops: report.drops.clone(),
        nfs: report
            .nfs
            .iter()
            .map(|n| NfCost {
                name: n.name.clone(),
                nf_type: n.nf_type.clone(),
                packets: n.packets,
                ns_per_packet: n.ns_per_packet,
            })
            .collect(),
    };
    if a.json {
        crate::print_stdout(&(serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"));
    } else {
        let mut s = format!(
            "realistic chain, {} flows, {}: {:.3} Mpps  latency p50 {:.1} µs p99 {:.1} µs  drops {}  leaked {}\n",
            result.flows,
            result.isolation,
            result.figures.mpps,
            result.figures.latency_ns.p50 as f64 / 1e3,
            result.figures.latency_ns.p99 as f64 / 1e3,
            result.figures.drops_total,
            result.figures.leaked_buffers
        );
        for n in &result.nfs {
            s.push_str(&format!(
                "  {:<6} {:<9} {:>7.1} ns/packet\n",
                n.name, n.nf_type, n.ns_per_packet
            ));
        }
        crate::print_stdout(&s);
    }
    if report.leaked_buffers > 0 || report.drops_total > 0 {
        // The chain is built to pass every packet: a drop is a bug.
        eprintln!(
            "sluice: the realistic chain dropped packets ({:?}) or leaked {} buffers",
            report.drops, report.leaked_buffers
        );
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}
