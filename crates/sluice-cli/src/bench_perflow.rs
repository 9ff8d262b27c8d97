//! `sluice bench perflow`: per-flow NFs (`steer: per_flow`) against one
//! shared instance, on short TCP connections (SYN, data, FIN; `--packets`
//! each, `--flows` at once, no FIN linger so a connection's instance is
//! recycled as soon as its end marker has passed), in alternating rounds
//! (median round of each by Mpps):
//!
//! * `shared`: one monitor serves every connection;
//! * `per_flow_inline` / `per_flow_process`: a pool of 64 monitors, each
//!   connection taking one of its own, reset (its `reset` hook) and reused
//!   when the connection ends;
//! * `per_flow_refork`: the same pool of processes with `reset: refork`:
//!   each instance is discarded when its connection ends and a fresh one
//!   forked from the template for the next.
//!
//! `activations_per_s` is connections served to their end per second of
//! the run (under `per_flow` each took an instance of its own; the
//! monitors count the ends they saw, so a connection refused for want of
//! an instance counts nothing). `assign_ns` times the pool's own
//! work for a new flow outside a run (take an idle member, pin it; then
//! release and return it), batch by batch; `reset_us.hook` times a
//! monitor's reset after its flow ended; `reset_us.refork` is the median
//! start of the reforked instances (fork from the template requested →
//! the fresh instance runs), from the `per_flow_refork` rounds.

use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;
use sluice_dataplane::exclusive::Exclusive;
use sluice_dataplane::replicas::ReplicaSet;
use sluice_nf::NetworkFunction;

use crate::bench::{median_round, nf_type_names, run_spec, Figures};
use crate::cli::PerflowArgs;

/// Instances in a per-flow pool.
const POOL: u32 = 64;

#[derive(Debug, Serialize)]
struct Row {
    setup: &'static str,
    #[serde(flatten)]
    figures: Figures,
    activations_per_s: f64,
    /// Packets dropped because every instance served a flow.
    nf_pool_exhausted: u64,
    /// Instances forked afresh for a next flow (`reset: refork`).
    reforks: u64,
    /// Median start of the fresh instances, µs (`reset: refork`; 0 else).
    #[serde(skip)]
    refork_start_us: f64,
}

#[derive(Debug, Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
}

#[derive(Debug, Serialize)]
struct Resets {
    hook: f64,
    refork: f64,
}

#[derive(Debug, Serialize)]
struct PerflowResult {
    cpu: String,
    rounds: usize,
    packets_per_flow: u32,
    concurrent_flows: u32,
    pool: u32,
    rows: Vec<Row>,
    /// The best per-flow setup's activations per second.
    activations_per_s: f64,
    assign_ns: Percentiles,
    reset_us: Resets,
    /// Mpps of each per-flow setup over the shared instance's.
    ratio_inline_vs_shared: f64,
    ratio_process_vs_shared: f64,
    ratio_refork_vs_shared: f64,
}

type Setup = (&'static str, &'static str, &'static str);

const SETUPS: [Setup; 4] = [
    ("shared", "inline", "replicas: 1"),
    ("per_flow_inline", "inline", "replicas: 64, steer: per_flow"),
    (
        "per_flow_process",
        "process",
        "replicas: 64, steer: per_flow",
    ),
    (
        "per_flow_refork",
        "process",
        "replicas: 64, steer: per_flow, reset: refork",
    ),
];

fn spec(isolation: &str, mode: &str, a: &PerflowArgs) -> String {
    format!(
        "settings:\n  flow_table: {{ close_timeout_ms: 0, idle_timeout_ms: 1000 }}\nports:\n  - {{ name: gen, kind: generator, flows: {}, protocol: tcp, packets_per_flow: {}, size: 64 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: m, type: monitor, isolation: {isolation}, {mode} }}\nchains:\n  - {{ name: c, from: gen, nfs: [m], to: out }}\n",
        a.flows, a.packets
    )
}

fn measure(a: &PerflowArgs, rounds: usize) -> Result<Vec<Row>, ExitCode> {
    let mut runs: Vec<Vec<Row>> = (0..SETUPS.len()).map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (k, &(name, isolation, mode)) in SETUPS.iter().enumerate() {
            let text = spec(isolation, mode, a);
            let spec = sluice_spec::parse_str(&text, "<bench perflow>", &nf_type_names()).map_err(
                |e| {
                    eprintln!("sluice: {e}");
                    ExitCode::from(2)
                },
            )?;
            let r = run_spec(&spec, a.duration)?;
            let exhausted = r.drops.get("nf_pool_exhausted").copied().unwrap_or(0);
            // Connections an instance served to their end (each monitor
            // counts the flow ends it saw; a reforked one counted one
            // before it was discarded): a connection whose packets were
            // all refused (`nf_pool_exhausted`) activated nothing.
            let reforks: u64 = r.nfs.iter().map(|n| n.reforks).sum();
            let served: u64 = reforks
                + r.nfs
                    .iter()
                    .map(|n| n.counters.get("flows_ended").copied().unwrap_or(0))
                    .sum::<u64>();
            let mut starts: Vec<f64> = if reforks > 0 {
                r.nfs
                    .iter()
                    .flat_map(|n| n.startup_us.iter().copied())
                    .collect()
            } else {
                Vec::new()
            };
            starts.sort_by(f64::total_cmp);
            if r.leaked_buffers > 0 || r.drops_total > exhausted {
                eprintln!(
                    "sluice: {name} dropped {:?} or leaked {}",
                    r.drops, r.leaked_buffers
                );
                return Err(ExitCode::from(3));
            }
            runs[k].push(Row {
                setup: name,
                activations_per_s: served as f64 / r.duration_s.max(1e-9),
                nf_pool_exhausted: exhausted,
                reforks,
                refork_start_us: starts.get(starts.len() / 2).copied().unwrap_or(0.0),
                figures: Figures::of(&r),
            });
        }
    }
    Ok(runs
        .into_iter()
        .map(|rows| median_round(rows, |r| r.figures.mpps))
        .collect())
}

/// The pool's work for one new flow and its end, ns, per batch of 1,024
/// flows (the median and 99th percentile over batches).
fn assign_ns() -> Percentiles {
    const FLOWS: u32 = 1024;
    let mut set = ReplicaSet::new((0..POOL as u16).collect(), sluice_spec::Steer::PerFlow);
    set.fallback = sluice_spec::Fallback::Drop;
    let sets = vec![Some(set.clone())];
    let mut e = Exclusive::default();
    e.install(&sets, 65_536);
    let mut idle = Vec::with_capacity(POOL as usize);
    let mut per_batch: Vec<f64> = Vec::with_capacity(2_000);
    let mut flow = 0u32;
    for _ in 0..2_000 {
        let start = Instant::now();
        for _ in 0..FLOWS {
            flow = (flow + 1) % 65_536;
            std::hint::black_box(
                e.pick(0, &set, flow, || sluice_dataplane::classes::ClassKey::NONE),
            );
            e.release(flow, &mut idle);
            for i in idle.drain(..) {
                e.idle_again(i);
            }
        }
        per_batch.push(start.elapsed().as_nanos() as f64 / f64::from(FLOWS));
    }
    percentiles(per_batch)
}

/// A monitor's reset after its flow ended, µs (median of 10,001).
fn reset_hook_us() -> f64 {
    let mut m = sluice_nfs::monitor::Monitor::new(65_536);
    let mut times: Vec<f64> = (0..10_001)
        .map(|_| {
            let start = Instant::now();
            m.reset();
            start.elapsed().as_nanos() as f64 / 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn percentiles(mut v: Vec<f64>) -> Percentiles {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    Percentiles {
        p50: at(0.5),
        p99: at(0.99),
    }
}

/// Runs `sluice bench perflow`.
pub fn run(a: PerflowArgs) -> ExitCode {
    let rounds = if a.quick { 1 } else { a.rounds as usize };
    let rows = match measure(&a, rounds) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let ratio = |k: usize| rows[k].figures.mpps / rows[0].figures.mpps.max(1e-9);
    let result = PerflowResult {
        cpu: crate::bench::cpu_model(),
        rounds,
        packets_per_flow: a.packets,
        concurrent_flows: a.flows,
        pool: POOL,
        activations_per_s: rows[1..]
            .iter()
            .map(|r| r.activations_per_s)
            .fold(0.0, f64::max),
        assign_ns: assign_ns(),
        reset_us: Resets {
            hook: reset_hook_us(),
            refork: rows[3].refork_start_us,
        },
        ratio_inline_vs_shared: ratio(1),
        ratio_process_vs_shared: ratio(2),
        ratio_refork_vs_shared: ratio(3),
        rows,
    };
    if a.json {
        crate::print_stdout(&(serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"));
    } else {
        let mut s = format!(
            "{}, median of {rounds}; {} packets a connection, {} at once\n",
            result.cpu, a.packets, a.flows
        );
        for r in &result.rows {
            s.push_str(&format!(
                "  {:<18} {:>7.3} Mpps  {:>9.0} activations/s  exhausted {}\n",
                r.setup, r.figures.mpps, r.activations_per_s, r.nf_pool_exhausted
            ));
        }
        s.push_str(&format!(
            "  assign {:.1} ns p50, {:.1} p99; reset hook {:.3} µs, refork {:.0} µs\n",
            result.assign_ns.p50,
            result.assign_ns.p99,
            result.reset_us.hook,
            result.reset_us.refork
        ));
        crate::print_stdout(&s);
    }
    ExitCode::SUCCESS
}
