//! `sluice bench sched`: the scheduler's experiments from the seeds, each
//! under turns (`settings.scheduler.policy: turns`, the workflow-aware
//! order of UNiS, seed 001) and under the baseline every NF scheduling
//! itself (`hybrid`: poll, yield after each batch, sleep; the kernel's
//! default scheduler picks the order), in alternating rounds.
//!
//! * `nfs_per_core`: N chains of one process forwarder each, all NFs on
//!   one core, at full rate (Flurries Fig. 4a/6: throughput as N grows);
//! * `wakeup_policies`: short interactive and long bulk flows through NFs
//!   sharing a core under each wake-up policy (Flurries Table 2,
//!   `bench_wakeup`);
//! * `long_chain`: chains of 50 and 60 process forwarders at 0.1 Mpps,
//!   p50 and p99 (Flurries §6; HyperNF: a 50-NF chain's p99);
//! * `chains`: chains of 1, 4 and 8 `cycle_burner`s of light and heavy
//!   cost per packet at full rate (UNiS's set);
//! * `allocation` and `fairness`: how NFs share a core's CPU with and
//!   without weights (`bench_share`).
//!
//! Every run is a separate `sluice run` (`bench::run_child`).

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use crate::cli::SchedArgs;

/// The two policies, in the order each round runs them.
const POLICIES: [&str; 2] = ["hybrid", "turns"];

#[derive(Debug, Serialize, Clone)]
struct Row {
    policy: &'static str,
    mpps: f64,
    p50_us: f64,
    p99_us: f64,
    drops: u64,
    turns_per_s: f64,
}

#[derive(Debug, Serialize)]
struct NfsRow {
    n: usize,
    #[serde(flatten)]
    row: Row,
}

#[derive(Debug, Serialize)]
struct ChainRow {
    length: usize,
    cycles_per_packet: u64,
    #[serde(flatten)]
    row: Row,
}

#[derive(Debug, Serialize, Default)]
struct Summary {
    /// Turns: Mpps with the most NFs per core over Mpps with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    nfs_max_vs_1: Option<f64>,
    /// The goal figure: the same at 1,000 NFs (full runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    nfs_1000_vs_1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    long_chain_60_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chain_50_p99_us: Option<f64>,
    /// Over the `chains` set: the lowest ratio of turns' Mpps to the best
    /// of both policies.
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_vs_best_min: Option<f64>,
    /// With weights: the worst error of CPU shares against weight shares,
    /// % (`allocation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    allocation_error_max_pct: Option<f64>,
    /// With weights: the lowest Jain's index of CPU shares (`fairness`).
    #[serde(skip_serializing_if = "Option::is_none")]
    jain_min: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    cpu: String,
    seconds_per_run: f64,
    nfs_per_core: Vec<NfsRow>,
    wakeup_policies: Vec<crate::bench_wakeup::WakeRow>,
    long_chain: Vec<ChainRow>,
    chains: Vec<ChainRow>,
    allocation: Vec<crate::bench_share::AllocRow>,
    fairness: Vec<crate::bench_share::FairRow>,
    summary: Summary,
}

/// A spec of `chains` (each a list of NF lines) fed by one generator, its
/// flows spread over one UDP destination port per chain.
fn spec(policy: &str, rate: Option<u64>, chains: &[Vec<String>]) -> String {
    let n = chains.len();
    let mut s = format!(
        "settings:\n  buffers: 65536\n  ring_size: 1024\n  scheduler: {{ policy: {policy} }}\nports:\n  - {{ name: gen, kind: generator, flows: {}, protocol: udp, size: 64, dst_ports: 1000-{}{} }}\n  - {{ name: out, kind: sink }}\nnfs:\n",
        n.max(64),
        1000 + n - 1,
        rate.map_or(String::new(), |r| format!(", rate_pps: {r}"))
    );
    for (c, nfs) in chains.iter().enumerate() {
        for (h, line) in nfs.iter().enumerate() {
            s += &format!("  - {{ name: n{c}_{h}, {line}, isolation: process }}\n");
        }
    }
    s += "chains:\n";
    for (c, nfs) in chains.iter().enumerate() {
        let names: Vec<String> = (0..nfs.len()).map(|h| format!("n{c}_{h}")).collect();
        let select = if n > 1 {
            format!(", match: {{ proto: udp, dst_port: {} }}", 1000 + c)
        } else {
            String::new()
        };
        s += &format!(
            "  - {{ name: c{c}, from: gen{select}, nfs: [{}], to: out }}\n",
            names.join(", ")
        );
    }
    s
}

/// Runs a spec under `sluice run` for `secs`; its figures.
fn run(path: &Path, text: &str, policy: &'static str, secs: f64) -> Result<Row, String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write the spec: {e}"))?;
    let r = crate::bench::run_child(path, secs)?;
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let turns: u64 = r["nfs"]
        .as_array()
        .map_or(0, |a| a.iter().filter_map(|n| n["turns"].as_u64()).sum());
    Ok(Row {
        policy,
        mpps: f(&r["mpps"]),
        p50_us: f(&r["latency_ns"]["p50"]) / 1e3,
        p99_us: f(&r["latency_ns"]["p99"]) / 1e3,
        drops: r["drops_total"].as_u64().unwrap_or(0),
        turns_per_s: turns as f64 / f(&r["duration_s"]).max(1e-9),
    })
}

fn forwarders(n: usize) -> Vec<String> {
    vec!["type: forwarder".to_string(); n]
}

fn burners(n: usize, cycles: u64) -> Vec<String> {
    vec![format!("type: cycle_burner, config: {{ iterations_per_packet: {cycles} }}"); n]
}

/// Runs every configuration under both policies, `rounds` times in
/// alternation, keeping the median round of each by Mpps (by p50 for the
/// fixed-rate runs).
fn measure(
    path: &Path,
    secs: f64,
    rounds: usize,
    rate: Option<u64>,
    chains: &[Vec<String>],
) -> Result<Vec<Row>, String> {
    let mut out = Vec::new();
    for policy in POLICIES {
        let mut rows = Vec::new();
        for _ in 0..rounds {
            rows.push(run(path, &spec(policy, rate, chains), policy, secs)?);
        }
        if rate.is_some() {
            rows.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
        } else {
            rows.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
        }
        out.push(rows.swap_remove(rows.len() / 2));
    }
    Ok(out)
}

fn sections(a: &SchedArgs, name: &str) -> bool {
    a.section.is_empty() || a.section.iter().any(|s| s == name)
}

/// `sluice bench sched`.
pub fn run_bench(a: SchedArgs) -> ExitCode {
    match bench(&a) {
        Ok(r) => {
            let text = serde_json::to_string_pretty(&r).unwrap_or_default();
            if a.json {
                crate::print_stdout(&(text + "\n"));
            } else {
                crate::print_stdout(&human(&r));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench sched: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench(a: &SchedArgs) -> Result<Report, String> {
    let path = std::env::temp_dir().join(format!("sluice-sched-{}.yaml", std::process::id()));
    let r = measure_all(a, &path);
    let _ = std::fs::remove_file(&path);
    r
}

fn measure_all(a: &SchedArgs, path: &Path) -> Result<Report, String> {
    let (secs, rounds) = if a.quick { (1.5, 1) } else { (3.0, 3) };
    let ns: &[usize] = if a.quick {
        &[1, 10, 100]
    } else {
        &[1, 10, 100, 250, 500, 1000]
    };
    let mut report = Report {
        cpu: crate::bench::cpu_model(),
        seconds_per_run: secs,
        nfs_per_core: Vec::new(),
        wakeup_policies: Vec::new(),
        long_chain: Vec::new(),
        chains: Vec::new(),
        allocation: Vec::new(),
        fairness: Vec::new(),
        summary: Summary::default(),
    };
    if sections(a, "nfs_per_core") {
        for &n in ns {
            let chains: Vec<Vec<String>> = (0..n).map(|_| forwarders(1)).collect();
            for row in measure(path, secs, rounds, None, &chains)? {
                report.nfs_per_core.push(NfsRow { n, row });
            }
        }
        let turns = |n: usize| {
            report
                .nfs_per_core
                .iter()
                .find(|r| r.n == n && r.row.policy == "turns")
                .map(|r| r.row.mpps)
        };
        if let (Some(one), Some(max)) = (turns(1), turns(*ns.last().unwrap_or(&1))) {
            report.summary.nfs_max_vs_1 = Some(max / one.max(1e-9));
        }
        if let (Some(one), Some(k)) = (turns(1), turns(1000)) {
            report.summary.nfs_1000_vs_1 = Some(k / one.max(1e-9));
        }
    }
    if sections(a, "wakeup_policies") {
        let setups: &[(usize, usize)] = if a.quick {
            &[(3, 1), (8, 1), (3, 3)]
        } else {
            &[(3, 1), (16, 1), (5, 3)]
        };
        report.wakeup_policies = crate::bench_wakeup::wakeup_policies(path, secs, rounds, setups)?;
    }
    if sections(a, "long_chain") {
        for length in [50, 60] {
            let chains = [forwarders(length)];
            for row in measure(path, secs, rounds, Some(100_000), &chains)? {
                report.long_chain.push(ChainRow {
                    length,
                    cycles_per_packet: 0,
                    row,
                });
            }
        }
        let turns = |l: usize| {
            report
                .long_chain
                .iter()
                .find(|r| r.length == l && r.row.policy == "turns")
        };
        report.summary.long_chain_60_p50_us = turns(60).map(|r| r.row.p50_us);
        report.summary.chain_50_p99_us = turns(50).map(|r| r.row.p99_us);
    }
    if sections(a, "chains") {
        for cycles in [50, 250] {
            for length in [1, 4, 8] {
                let chains = [burners(length, cycles)];
                let rows = measure(path, secs, rounds, None, &chains)?;
                let best = rows.iter().map(|r| r.mpps).fold(0.0, f64::max);
                if let Some(t) = rows.iter().find(|r| r.policy == "turns") {
                    let ratio = t.mpps / best.max(1e-9);
                    let min = report.summary.workflow_vs_best_min.get_or_insert(ratio);
                    *min = min.min(ratio);
                }
                for row in rows {
                    report.chains.push(ChainRow {
                        length,
                        cycles_per_packet: cycles,
                        row,
                    });
                }
            }
        }
    }
    if sections(a, "allocation") {
        let (rows, worst) = crate::bench_share::allocation(path, secs, rounds)?;
        report.allocation = rows;
        report.summary.allocation_error_max_pct = Some(worst);
    }
    if sections(a, "fairness") {
        let ns: &[usize] = if a.quick { &[2, 10] } else { &[2, 10, 30] };
        let (rows, lowest) = crate::bench_share::fairness(path, secs, rounds, ns)?;
        report.fairness = rows;
        report.summary.jain_min = Some(lowest);
    }
    Ok(report)
}

fn human(r: &Report) -> String {
    let mut s = format!("CPU: {}, {} s per run\n", r.cpu, r.seconds_per_run);
    let line = |row: &Row| {
        format!(
            "{:7} {:8.3} Mpps  p50 {:9.1} µs  p99 {:9.1} µs  drops {}  turns/s {:.0}\n",
            row.policy, row.mpps, row.p50_us, row.p99_us, row.drops, row.turns_per_s
        )
    };
    for x in &r.nfs_per_core {
        s += &format!("nfs_per_core N={:<5} {}", x.n, line(&x.row));
    }
    s += &crate::bench_wakeup::human(&r.wakeup_policies);
    for x in &r.long_chain {
        s += &format!("long_chain {:>3} NFs    {}", x.length, line(&x.row));
    }
    for x in &r.chains {
        s += &format!(
            "chains {} × {:>3} cycles  {}",
            x.length,
            x.cycles_per_packet,
            line(&x.row)
        );
    }
    s += &crate::bench_share::human(&r.allocation, &r.fairness);
    s += &format!(
        "summary: {}\n",
        serde_json::to_string(&r.summary).unwrap_or_default()
    );
    s
}
