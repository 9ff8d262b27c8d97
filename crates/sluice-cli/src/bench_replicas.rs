//! `sluice bench replicas`: what NF replicas (`nfs[].replicas`, `steer`)
//! cost and give, in alternating rounds so the host's noise falls on every
//! setup alike (median round of each by Mpps):
//!
//! * `steering`: one inline forwarder against four replicas of it under
//!   `hash` and `shortest_queue`, at full rate: the worker-bound case, so
//!   the difference is what picking a replica costs per packet;
//! * `costly`: one process `cycle_burner` against two replicas of it,
//!   NF-bound: on a host with more than two CPUs the replicas run on NF
//!   cores of their own; on two CPUs every NF shares the one NF core, and
//!   the figures say so (`nf_cpus`).
//!
//! Each row also gives each replica's share of the packets.

use std::process::ExitCode;

use serde::Serialize;

use crate::bench::{median_round, nf_type_names, run_spec, Figures};
use crate::cli::ReplicasArgs;

#[derive(Debug, Serialize)]
struct Row {
    setup: String,
    replicas: u32,
    steer: &'static str,
    #[serde(flatten)]
    figures: Figures,
    /// Packets each replica processed, replica 0 first.
    shares: Vec<u64>,
}

#[derive(Debug, Serialize)]
struct ReplicasResult {
    cpu: String,
    /// CPUs process NFs are placed on (all but the worker's).
    nf_cpus: usize,
    rounds: usize,
    steering: Vec<Row>,
    costly: Vec<Row>,
    /// Mpps of the four-replica setups over the single forwarder's.
    steering_ratio_hash: f64,
    steering_ratio_shortest_queue: f64,
    /// Mpps of two burner replicas over one.
    costly_ratio_hash: f64,
}

fn spec(nf: &str, isolation: &str, replicas: u32, steer: &str, flows: u32) -> String {
    format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: {flows}, protocol: udp, size: 64 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: r, {nf}, isolation: {isolation}, replicas: {replicas}, steer: {steer} }}\nchains:\n  - {{ name: c, from: gen, nfs: [r], to: out }}\n"
    )
}

type Setup = (&'static str, &'static str, &'static str, u32, &'static str);

const STEERING: [Setup; 3] = [
    ("forwarder_x1", "type: forwarder", "inline", 1, "hash"),
    ("forwarder_x4_hash", "type: forwarder", "inline", 4, "hash"),
    (
        "forwarder_x4_shortest_queue",
        "type: forwarder",
        "inline",
        4,
        "shortest_queue",
    ),
];

const COSTLY: [Setup; 3] = [
    ("burner_x1", BURNER, "process", 1, "hash"),
    ("burner_x2_hash", BURNER, "process", 2, "hash"),
    (
        "burner_x2_shortest_queue",
        BURNER,
        "process",
        2,
        "shortest_queue",
    ),
];

/// About 4 µs a packet on a 2.6 GHz EPYC: the NF, not the worker, is
/// the bottleneck.
const BURNER: &str = "type: cycle_burner, config: { iterations_per_packet: 20000 }";

fn measure(setups: &[Setup], a: &ReplicasArgs, rounds: usize) -> Result<Vec<Row>, ExitCode> {
    let mut runs: Vec<Vec<Row>> = (0..setups.len()).map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (k, &(name, nf, isolation, replicas, steer)) in setups.iter().enumerate() {
            let text = spec(nf, isolation, replicas, steer, a.flows);
            let spec = sluice_spec::parse_str(&text, "<bench replicas>", &nf_type_names())
                .map_err(|e| {
                    eprintln!("sluice: {e}");
                    ExitCode::from(2)
                })?;
            let r = run_spec(&spec, a.duration)?;
            if r.leaked_buffers > 0 || r.drops_total > 0 {
                eprintln!(
                    "sluice: {name} dropped {:?} or leaked {}",
                    r.drops, r.leaked_buffers
                );
                return Err(ExitCode::from(3));
            }
            runs[k].push(Row {
                setup: name.to_string(),
                replicas,
                steer,
                figures: Figures::of(&r),
                shares: r.nfs.iter().map(|n| n.packets).collect(),
            });
        }
    }
    Ok(runs
        .into_iter()
        .map(|rows| median_round(rows, |r| r.figures.mpps))
        .collect())
}

/// Runs `sluice bench replicas`.
pub fn run(a: ReplicasArgs) -> ExitCode {
    let rounds = if a.quick { 1 } else { a.rounds as usize };
    let (steering, costly) = match (measure(&STEERING, &a, rounds), measure(&COSTLY, &a, rounds)) {
        (Ok(s), Ok(c)) => (s, c),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let ratio = |rows: &[Row], k: usize| rows[k].figures.mpps / rows[0].figures.mpps.max(1e-9);
    let result = ReplicasResult {
        cpu: crate::bench::cpu_model(),
        nf_cpus: std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .saturating_sub(1)
            .max(1),
        rounds,
        steering_ratio_hash: ratio(&steering, 1),
        steering_ratio_shortest_queue: ratio(&steering, 2),
        costly_ratio_hash: ratio(&costly, 1),
        steering,
        costly,
    };
    if a.json {
        crate::print_stdout(&(serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"));
    } else {
        let mut s = format!(
            "{} ({} NF CPUs), median of {rounds}\n",
            result.cpu, result.nf_cpus
        );
        for r in result.steering.iter().chain(&result.costly) {
            s.push_str(&format!(
                "  {:<30} {:>7.3} Mpps  p50 {:>8.1} µs  shares {:?}\n",
                r.setup,
                r.figures.mpps,
                r.figures.latency_ns.p50 as f64 / 1e3,
                r.shares
            ));
        }
        crate::print_stdout(&s);
    }
    ExitCode::SUCCESS
}
