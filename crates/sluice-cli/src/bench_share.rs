//! `sluice bench sched`, sections `allocation` and `fairness`: how NF
//! processes that share one core share its CPU, with weights
//! (`nfs[].cpu_weight`) and without (the baseline: each NF yields after
//! every batch and the kernel's scheduler picks, seed 000 §4).
//!
//! Every NF has a chain and a generator of its own, so each is offered
//! more than it can take and the core's time is all that limits it.
//! Shares are measured, not inferred: each NF's CPU time is the kernel's
//! count for its process (`nfs[].process_cpu_us` of the report).
//!
//! * `allocation` (HyperNF, seed 000 §3): two NFs of different cost with
//!   weights 50/50, 30/70 and 70/30. The error is (CPU share − weight
//!   share) / weight share: what the weights control. Two more views are
//!   reported: the *work share* (packets over what the NF forwards alone
//!   on the core in the same round) and the *goodput* error (packets
//!   against weight share × packets alone). Both also count how much
//!   sharing costs each NF's efficiency (context switches, caches: on this
//!   VM a switch costs microseconds), which weights do not control.
//! * `fairness`: 2, 10 and 30 NFs, alternately of 0 and 1,000 cycles per
//!   packet; Jain's index of their CPU shares (1: equal).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// Loop iterations per packet (about a cycle each) of the allocation
/// experiment's light and heavy NF: costs the worker can feed at once.
const ALLOC_COSTS: [u64; 2] = [2_000, 6_000];
const ALLOC_WEIGHTS: [[u32; 2]; 3] = [[50, 50], [30, 70], [70, 30]];
/// The fairness experiment's two costs, alternating.
const FAIR_COSTS: [u64; 2] = [0, 1_000];

/// One NF of a share experiment: its cost and weight.
#[derive(Clone, Copy)]
struct Nf {
    cycles: u64,
    weight: Option<u32>,
}

/// What one NF did in a run.
#[derive(Debug, Clone, Copy, Default)]
struct Done {
    mpps: f64,
    cpu_s: f64,
}

/// A spec of one-NF chains, each fed by its own generator.
fn spec(nfs: &[Nf]) -> String {
    let mut s = String::from("settings:\n  buffers: 65536\n  ring_size: 1024\nports:\n");
    for k in 0..nfs.len() {
        s +=
            &format!("  - {{ name: g{k}, kind: generator, flows: 64, protocol: udp, size: 64 }}\n");
    }
    s += "  - { name: out, kind: sink }\nnfs:\n";
    for (k, nf) in nfs.iter().enumerate() {
        let weight = nf
            .weight
            .map_or(String::new(), |w| format!(", cpu_weight: {w}"));
        s += &format!(
            "  - {{ name: n{k}, type: cycle_burner, config: {{ iterations_per_packet: {} }}, isolation: process{weight} }}\n",
            nf.cycles
        );
    }
    s += "chains:\n";
    for k in 0..nfs.len() {
        s += &format!("  - {{ name: c{k}, from: g{k}, nfs: [n{k}], to: out }}\n");
    }
    s
}

fn run(path: &Path, nfs: &[Nf], secs: f64) -> Result<Vec<Done>, String> {
    std::fs::write(path, spec(nfs)).map_err(|e| format!("cannot write the spec: {e}"))?;
    let r = crate::bench::run_child(path, secs)?;
    let d = r["duration_s"].as_f64().unwrap_or(0.0).max(1e-9);
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    Ok((0..nfs.len())
        .map(|k| {
            let nf = r["nfs"]
                .as_array()
                .and_then(|a| a.iter().find(|n| n["name"] == format!("n{k}")));
            nf.map_or(Done::default(), |n| Done {
                mpps: f(&n["packets"]) / d / 1e6,
                cpu_s: f(&n["process_cpu_us"]) / 1e6,
            })
        })
        .collect())
}

/// Shares of a whole (zeros if the whole is zero).
fn shares(x: &[f64]) -> Vec<f64> {
    let sum: f64 = x.iter().sum();
    x.iter()
        .map(|v| if sum > 0.0 { v / sum } else { 0.0 })
        .collect()
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has all.
pub(crate) fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}

/// Largest |measured − expected| / expected, in percent.
fn worst_error(measured: &[f64], expected: &[f64]) -> f64 {
    measured
        .iter()
        .zip(expected)
        .map(|(m, e)| ((m - e) / e.max(1e-12)).abs() * 100.0)
        .fold(0.0, f64::max)
}

#[derive(Debug, Serialize)]
pub(crate) struct AllocRow {
    /// `weighted` (`cpu_weight` set) or `unweighted` (the baseline).
    mode: &'static str,
    weights: [u32; 2],
    cycles_per_packet: [u64; 2],
    mpps: [f64; 2],
    /// Each NF's packets alone on the core in the same round.
    alone_mpps: [f64; 2],
    cpu_share: [f64; 2],
    work_share: [f64; 2],
    /// Worst (CPU share − weight share) / weight share, %.
    error_pct: f64,
    /// Worst (work share − weight share) / weight share, %.
    work_error_pct: f64,
    /// Worst (Mpps − weight share × alone) / (weight share × alone), %.
    goodput_error_pct: f64,
}

#[derive(Debug, Serialize)]
pub(crate) struct FairRow {
    mode: &'static str,
    n: usize,
    /// Jain's index of the NFs' CPU shares.
    jain: f64,
    /// The 1,000-cycle NFs' part of the core's CPU time.
    heavy_cpu_share: f64,
    mpps: f64,
}

/// The median of `rows` by `key`.
fn median<T>(mut rows: Vec<T>, key: impl Fn(&T) -> f64) -> Option<T> {
    rows.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let mid = rows.len() / 2;
    rows.into_iter().nth(mid)
}

/// The `allocation` section; rows and the worst weighted error.
pub(crate) fn allocation(
    path: &Path,
    secs: f64,
    rounds: usize,
) -> Result<(Vec<AllocRow>, f64), String> {
    let mut out = Vec::new();
    let mut worst: f64 = 0.0;
    for weights in ALLOC_WEIGHTS {
        for mode in ["weighted", "unweighted"] {
            let mut tries = Vec::new();
            for _ in 0..rounds {
                let alone: Vec<f64> = ALLOC_COSTS
                    .iter()
                    .map(|&cycles| {
                        let nf = Nf {
                            cycles,
                            weight: None,
                        };
                        run(path, &[nf], secs).map(|d| d[0].mpps)
                    })
                    .collect::<Result<_, _>>()?;
                let nfs: Vec<Nf> = (0..2)
                    .map(|k| Nf {
                        cycles: ALLOC_COSTS[k],
                        weight: (mode == "weighted").then_some(weights[k]),
                    })
                    .collect();
                let done = run(path, &nfs, secs)?;
                tries.push(alloc_row(mode, weights, &alone, &done));
            }
            let row = median(tries, |r| r.error_pct).ok_or("no rounds")?;
            if mode == "weighted" {
                worst = worst.max(row.error_pct);
            }
            out.push(row);
        }
    }
    Ok((out, worst))
}

fn alloc_row(mode: &'static str, weights: [u32; 2], alone: &[f64], done: &[Done]) -> AllocRow {
    let want = shares(&[f64::from(weights[0]), f64::from(weights[1])]);
    let mpps = [done[0].mpps, done[1].mpps];
    let work = shares(&[mpps[0] / alone[0].max(1e-12), mpps[1] / alone[1].max(1e-12)]);
    let cpu = shares(&[done[0].cpu_s, done[1].cpu_s]);
    let expected = [want[0] * alone[0], want[1] * alone[1]];
    AllocRow {
        mode,
        weights,
        cycles_per_packet: ALLOC_COSTS,
        mpps,
        alone_mpps: [alone[0], alone[1]],
        cpu_share: [cpu[0], cpu[1]],
        work_share: [work[0], work[1]],
        error_pct: worst_error(&cpu, &want),
        work_error_pct: worst_error(&work, &want),
        goodput_error_pct: worst_error(&mpps, &expected),
    }
}

/// The `fairness` section; rows and the lowest weighted index.
pub(crate) fn fairness(
    path: &Path,
    secs: f64,
    rounds: usize,
    ns: &[usize],
) -> Result<(Vec<FairRow>, f64), String> {
    let mut out = Vec::new();
    let mut lowest: f64 = 1.0;
    for &n in ns {
        for mode in ["weighted", "unweighted"] {
            let nfs: Vec<Nf> = (0..n)
                .map(|k| Nf {
                    cycles: FAIR_COSTS[k % 2],
                    weight: (mode == "weighted").then_some(100),
                })
                .collect();
            let mut tries = Vec::new();
            for _ in 0..rounds {
                let done = run(path, &nfs, secs)?;
                let cpu: Vec<f64> = done.iter().map(|d| d.cpu_s).collect();
                let heavy: f64 = cpu.iter().skip(1).step_by(2).sum();
                tries.push(FairRow {
                    mode,
                    n,
                    jain: jain(&cpu),
                    heavy_cpu_share: heavy / cpu.iter().sum::<f64>().max(1e-12),
                    mpps: done.iter().map(|d| d.mpps).sum(),
                });
            }
            let row = median(tries, |r| r.jain).ok_or("no rounds")?;
            if mode == "weighted" {
                lowest = lowest.min(row.jain);
            }
            out.push(row);
        }
    }
    Ok((out, lowest))
}

/// Lines of the human-readable report.
pub(crate) fn human(alloc: &[AllocRow], fair: &[FairRow]) -> String {
    let mut s = String::new();
    for r in alloc {
        s += &format!(
            "allocation {:10} {:>2}/{:<2}  cpu {:.3}/{:.3} (error {:5.1} %)  work {:.3}/{:.3} ({:5.1} %)  goodput error {:5.1} %\n",
            r.mode, r.weights[0], r.weights[1], r.cpu_share[0], r.cpu_share[1], r.error_pct,
            r.work_share[0], r.work_share[1], r.work_error_pct, r.goodput_error_pct
        );
    }
    for r in fair {
        s += &format!(
            "fairness {:10} N={:<3} Jain {:.3}  heavy NFs' CPU {:.3}  {:.3} Mpps\n",
            r.mode, r.n, r.jain, r.heavy_cpu_share, r.mpps
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() {
        assert!((jain(&[2.0, 2.0, 2.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn the_allocation_error_compares_work_shares_with_weight_shares() {
        let done = [
            Done {
                mpps: 0.3,
                cpu_s: 0.9,
            },
            Done {
                mpps: 1.4,
                cpu_s: 2.1,
            },
        ];
        // Alone 1.0 and 2.0 Mpps: work 0.3 and 0.7 of the core, as weighed.
        let r = alloc_row("weighted", [30, 70], &[1.0, 2.0], &done);
        assert!(r.error_pct < 1e-9, "{r:?}");
        assert!(r.work_error_pct < 1e-9);
        assert!(r.goodput_error_pct < 1e-9);
        // Half the packets each: work shares unchanged, goodput 50 % off.
        let half = done.map(|d| Done {
            mpps: d.mpps / 2.0,
            ..d
        });
        let r = alloc_row("weighted", [30, 70], &[1.0, 2.0], &half);
        assert!(r.work_error_pct < 1e-9);
        assert!((r.goodput_error_pct - 50.0).abs() < 1e-9);
        // The CPU shifted to the light NF: 0.4 against 0.3 wanted.
        let shifted = [
            Done {
                cpu_s: 1.2,
                ..done[0]
            },
            Done {
                cpu_s: 1.8,
                ..done[1]
            },
        ];
        let r = alloc_row("weighted", [30, 70], &[1.0, 2.0], &shifted);
        assert!((r.error_pct - 100.0 / 3.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn specs_give_every_nf_its_own_generator_and_weight() {
        let s = spec(&[
            Nf {
                cycles: 0,
                weight: Some(30),
            },
            Nf {
                cycles: 10,
                weight: None,
            },
        ]);
        let spec = sluice_spec::parse_str(&s, "bench", &["cycle_burner"]).unwrap();
        assert_eq!(spec.nfs[0].cpu_weight, Some(30));
        assert_eq!(spec.nfs[1].cpu_weight, None);
        assert_eq!(spec.ports.len(), 3);
        assert_eq!(spec.chains[1].from, "g1");
    }
}
