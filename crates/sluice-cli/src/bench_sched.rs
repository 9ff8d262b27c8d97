//! `sluice bench sched`: the scheduler's experiments from the seeds, each
//! under sluice's scheduling and the baselines the seeds compare with, in
//! alternating rounds ([`Setup`]):
//!
//! * `turns`: the workflow-aware order of UNiS (seed 001,
//!   `settings.scheduler.policy: turns`); `default`: nothing set;
//! * `hybrid`: every NF polls, yields after each batch (UNiS's kbatch-1)
//!   and sleeps, the kernel's default scheduler picks the order;
//!   `kbatch_8`: UNiS's cooperative baseline, a yield every 8 batches;
//! * `polling`: pure poll mode, no yields, the kernel (EEVDF) alone ends an
//!   NF's time; `rr`: the same in real-time round robin (`SCHED_RR`, its
//!   slice set to the 1 ms minimum UNiS found, where the bench may);
//! * `every_packet`: NFs sleep when idle and are woken by each packet.
//!
//! Sections:
//!
//! * `nfs_per_core`: N chains of one process forwarder each, all NFs on
//!   one core, at full rate (Flurries Fig. 4a/6: throughput as N grows);
//! * `wakeup_policies`: short interactive and long bulk flows through NFs
//!   sharing a core under each wake-up policy (Flurries Table 2,
//!   `bench_wakeup`);
//! * `long_chain`: chains of 50 and 60 process forwarders at 0.1 Mpps,
//!   p50 and p99 (Flurries §6; HyperNF: a 50-NF chain's p99);
//! * `chains`: chains of 1, 4 and 8 `cycle_burner`s of light and heavy
//!   cost per packet at full rate (UNiS's set), turns against kbatch-8,
//!   kbatch-1, the kernel's scheduler and round robin;
//! * `allocation` and `fairness`: how NFs share a core's CPU with and
//!   without weights (`bench_share`).
//!
//! Every run is a separate `sluice run` (`bench::run_child`).

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use crate::cli::SchedArgs;

/// A way of scheduling NFs the bench compares: its rows' name and the
/// `settings` lines that select it.
#[derive(Debug, Clone, Copy)]
struct Setup {
    name: &'static str,
    settings: &'static str,
}

const TURNS: Setup = Setup {
    name: "turns",
    settings: "  scheduler: { policy: turns }\n",
};
const DEFAULT: Setup = Setup {
    name: "default",
    settings: "",
};
const HYBRID: Setup = Setup {
    name: "hybrid",
    settings: "  scheduler: { policy: hybrid }\n",
};
const KBATCH_8: Setup = Setup {
    name: "kbatch_8",
    settings: "  scheduler: { policy: hybrid, yield_every: 8 }\n",
};
/// Poll mode: an idle NF polls for up to a second before it sleeps, so
/// within a run it never does.
const POLLING: Setup = Setup {
    name: "polling",
    settings: "  scheduler: { policy: hybrid, yield_every: 0 }\n  wakeup: { policy: hybrid, busy_poll_us: 1000000 }\n",
};
const RR: Setup = Setup {
    name: "rr",
    settings: "  scheduler: { policy: hybrid, yield_every: 0, kernel_class: round_robin }\n  wakeup: { policy: hybrid, busy_poll_us: 1000000 }\n",
};
const EVERY_PACKET: Setup = Setup {
    name: "every_packet",
    settings: "  scheduler: { policy: hybrid }\n  wakeup: { policy: every_packet }\n",
};

/// Each section's setups, in the order each round runs them.
const NFS_PER_CORE: [Setup; 5] = [POLLING, EVERY_PACKET, HYBRID, TURNS, DEFAULT];
const LONG_CHAIN: [Setup; 2] = [HYBRID, TURNS];
const CHAINS: [Setup; 5] = [TURNS, KBATCH_8, HYBRID, POLLING, RR];

#[derive(Debug, Serialize, Clone)]
struct Row {
    policy: &'static str,
    mpps: f64,
    p50_us: f64,
    p99_us: f64,
    drops: u64,
    turns_per_s: f64,
    /// The NFs' CPU time, % of one core (the kernel's count).
    cpu_pct: f64,
    /// The NFs' context switches per second (the kernel's count).
    switches_per_s: f64,
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
    /// The default: Mpps with the most NFs per core over Mpps with one.
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
    /// of all setups.
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_vs_best_min: Option<f64>,
    /// The same against the kernel's scheduler (`polling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_vs_kernel_min: Option<f64>,
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
    /// The kernel's round-robin slice during the `rr` rows, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    rr_timeslice_ms: Option<u64>,
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
fn spec(setup: Setup, rate: Option<u64>, chains: &[Vec<String>]) -> String {
    let n = chains.len();
    let mut s = format!(
        "settings:\n  buffers: 65536\n  ring_size: 1024\n{}ports:\n  - {{ name: gen, kind: generator, flows: {}, protocol: udp, size: 64, dst_ports: 1000-{}{} }}\n  - {{ name: out, kind: sink }}\nnfs:\n",
        setup.settings,
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
    let sum = |key: &str| -> f64 {
        r["nfs"].as_array().map_or(0.0, |a| {
            a.iter().filter_map(|n| n[key].as_u64()).sum::<u64>() as f64
        })
    };
    let duration = f(&r["duration_s"]).max(1e-9);
    Ok(Row {
        policy,
        mpps: f(&r["mpps"]),
        p50_us: f(&r["latency_ns"]["p50"]) / 1e3,
        p99_us: f(&r["latency_ns"]["p99"]) / 1e3,
        drops: r["drops_total"].as_u64().unwrap_or(0),
        turns_per_s: sum("turns") / duration,
        cpu_pct: sum("process_cpu_us") / duration / 1e4,
        switches_per_s: sum("process_switches") / duration,
    })
}

fn forwarders(n: usize) -> Vec<String> {
    vec!["type: forwarder".to_string(); n]
}

fn burners(n: usize, cycles: u64) -> Vec<String> {
    vec![format!("type: cycle_burner, config: {{ iterations_per_packet: {cycles} }}"); n]
}

/// Runs a configuration under each of `setups`, `rounds` rounds that
/// each run every setup once (so the host's noise falls on all alike),
/// keeping the median round of each by Mpps (by p50 for the fixed-rate
/// runs).
fn measure(
    path: &Path,
    secs: f64,
    rounds: usize,
    setups: &[Setup],
    rate: Option<u64>,
    chains: &[Vec<String>],
) -> Result<Vec<Row>, String> {
    let mut runs: Vec<Vec<Row>> = vec![Vec::new(); setups.len()];
    for _ in 0..rounds {
        for (k, &setup) in setups.iter().enumerate() {
            runs[k].push(run(path, &spec(setup, rate, chains), setup.name, secs)?);
        }
    }
    Ok(runs
        .into_iter()
        .map(|mut rows| {
            if rate.is_some() {
                rows.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
            } else {
                rows.sort_by(|a, b| a.mpps.total_cmp(&b.mpps));
            }
            rows.swap_remove(rows.len() / 2)
        })
        .collect())
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
        rr_timeslice_ms: None,
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
            for row in measure(path, secs, rounds, &NFS_PER_CORE, None, &chains)? {
                report.nfs_per_core.push(NfsRow { n, row });
            }
        }
        let default = |n: usize| {
            report
                .nfs_per_core
                .iter()
                .find(|r| r.n == n && r.row.policy == DEFAULT.name)
                .map(|r| r.row.mpps)
        };
        if let (Some(one), Some(max)) = (default(1), default(*ns.last().unwrap_or(&1))) {
            report.summary.nfs_max_vs_1 = Some(max / one.max(1e-9));
        }
        if let (Some(one), Some(k)) = (default(1), default(1000)) {
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
            for row in measure(path, secs, rounds, &LONG_CHAIN, Some(100_000), &chains)? {
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
        let rr = RrSlice::set(1);
        report.rr_timeslice_ms = rr.in_force;
        for cycles in [50, 250] {
            for length in [1, 4, 8] {
                let chains = [burners(length, cycles)];
                let rows = measure(path, secs, rounds, &CHAINS, None, &chains)?;
                let mpps = |name: &str| rows.iter().find(|r| r.policy == name).map(|r| r.mpps);
                let best = rows.iter().map(|r| r.mpps).fold(0.0, f64::max);
                if let (Some(t), Some(k)) = (mpps(TURNS.name), mpps(POLLING.name)) {
                    let low = |x: &mut Option<f64>, v: f64| *x = Some(x.map_or(v, |x| x.min(v)));
                    low(&mut report.summary.workflow_vs_best_min, t / best.max(1e-9));
                    low(&mut report.summary.workflow_vs_kernel_min, t / k.max(1e-9));
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

/// The kernel's round-robin slice set for a while (UNiS tuned RR to its
/// 1 ms minimum; the default is 100 ms), restored when dropped. Left as it
/// is where the bench may not write it (not root, a container).
struct RrSlice {
    was: Option<u64>,
    in_force: Option<u64>,
}

const RR_SLICE: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

impl RrSlice {
    fn set(ms: u64) -> RrSlice {
        let was = sluice_sys::rr_timeslice_ms();
        let set = was != Some(ms) && std::fs::write(RR_SLICE, ms.to_string()).is_ok();
        RrSlice {
            was: if set { was } else { None },
            in_force: sluice_sys::rr_timeslice_ms(),
        }
    }
}

impl Drop for RrSlice {
    fn drop(&mut self) {
        if let Some(ms) = self.was {
            let _ = std::fs::write(RR_SLICE, ms.to_string());
        }
    }
}

fn human(r: &Report) -> String {
    let mut s = format!("CPU: {}, {} s per run\n", r.cpu, r.seconds_per_run);
    let line = |row: &Row| {
        format!(
            "{:12} {:8.3} Mpps  p50 {:9.1} µs  p99 {:9.1} µs  drops {}  turns/s {:.0}  cpu {:.0} %  switches/s {:.0}\n",
            row.policy,
            row.mpps,
            row.p50_us,
            row.p99_us,
            row.drops,
            row.turns_per_s,
            row.cpu_pct,
            row.switches_per_s
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setup_is_a_valid_spec_that_says_what_it_names() {
        let types = crate::bench::nf_type_names();
        let all = [TURNS, DEFAULT, HYBRID, KBATCH_8, POLLING, RR, EVERY_PACKET];
        for setup in all {
            let text = spec(setup, Some(1000), &[burners(2, 50), forwarders(1)]);
            let s = sluice_spec::parse_str(&text, setup.name, &types)
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", setup.name));
            s.validate(&types).unwrap();
            let sched = &s.settings.scheduler;
            let rr = sched.kernel_class == sluice_spec::KernelClass::RoundRobin;
            assert_eq!(rr, setup.name == "rr", "{}", setup.name);
            let k = match setup.name {
                "kbatch_8" => Some(8),
                "polling" | "rr" => Some(0),
                _ => None,
            };
            assert_eq!(sched.yield_every, k, "{}", setup.name);
        }
    }
}
