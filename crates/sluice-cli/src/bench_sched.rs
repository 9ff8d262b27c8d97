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
//!   cost per packet at full rate (UNiS's set), sluice's default and
//!   forced turns against kbatch-8, kbatch-1, the kernel's scheduler and
//!   round robin;
//! * `allocation` and `fairness`: how NFs share a core's CPU with and
//!   without weights (`bench_share`).
//!
//! Every run is a separate `sluice run` (`bench::run_child`).

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use crate::bench_setups::{
    burners, forwarders, measure, Row, RrSlice, BASELINES, CHAINS, DEFAULT, LONG_CHAIN,
    NFS_PER_CORE, POLLING, TURNS,
};
use crate::cli::SchedArgs;

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
    /// Over the `chains` set: the lowest ratio of sluice's Mpps (its
    /// default scheduling, `auto`: turns where a chain has four or more
    /// NFs on a core) to the best baseline's (kbatch-8, hybrid, polling,
    /// round robin).
    #[serde(skip_serializing_if = "Option::is_none")]
    workflow_vs_best_min: Option<f64>,
    /// The same with turns forced on every chain, one NF included.
    #[serde(skip_serializing_if = "Option::is_none")]
    turns_vs_best_min: Option<f64>,
    /// Sluice's default against the kernel's scheduler alone (`polling`).
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
                let best = rows
                    .iter()
                    .filter(|r| BASELINES.iter().any(|b| b.name == r.policy))
                    .map(|r| r.mpps)
                    .fold(0.0, f64::max)
                    .max(1e-9);
                let (d, t, k) = (mpps(DEFAULT.name), mpps(TURNS.name), mpps(POLLING.name));
                if let (Some(d), Some(t), Some(k)) = (d, t, k) {
                    let low = |x: &mut Option<f64>, v: f64| *x = Some(x.map_or(v, |x| x.min(v)));
                    let s = &mut report.summary;
                    low(&mut s.workflow_vs_best_min, d / best);
                    low(&mut s.turns_vs_best_min, t / best);
                    low(&mut s.workflow_vs_kernel_min, d / k.max(1e-9));
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
