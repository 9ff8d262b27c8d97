//! `sluice bench instantiate`: how fast a running daemon creates process
//! NFs, and whether creating the n-th costs what creating the first did
//! (LightVM's flatness plot, seed 000 §2; the lifecycle issue's figures).
//!
//! The daemon (this binary, started as a child) carries traffic through a
//! base chain the whole time. The bench then creates `--count` forwarders
//! through the API, `--batch` per request, one request after the other,
//! each in a chain of its own, so the n-th request lands on a daemon that
//! runs n - 1 batches already. A request is answered once its new NFs run,
//! so its round trip is the create time: `create_us` is request → every NF
//! of the batch running, per NF when the batch is 1.
//!
//! Beside it, in the same run:
//!
//! - `spawn_us`: the platform's own part, from the worker asking its NF
//!   template for the fork to the NF reporting itself running (the
//!   report's `startup_us`);
//! - `first_packet_us`: for a sample of 20 creates, the new NF's chain has
//!   its own generator and sink, and the figure is request → the first
//!   packet leaving that sink (the sink's `first_tx_unix_ns`);
//! - `pss_kib_per_nf` and `private_kib_per_nf`: the NF processes' memory
//!   (`/proc/PID/smaps_rollup`) once all run, medians;
//! - `fork_exec_us`: fork + exec of `/bin/true` from this process (the
//!   floor of starting any fresh program);
//! - `crun_us`: an OCI container running `/bin/true` with Debian's `crun`
//!   (create, start, wait, delete), `null` when crun is missing or cannot
//!   run here.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::bench_baselines::{crun_us, fork_exec_us};
use crate::bench_daemon::{add, apply, first_tx, median, spread, start_daemon_with, Spread};
use crate::cli::{InstantiateArgs, OnOff, Via};

/// Creates whose chain gets its own generator and sink.
const SAMPLES: u32 = 20;

/// The p50 of each tenth of `v`, in order.
fn by_decile(v: &[f64]) -> Vec<f64> {
    (0..10)
        .map(|d| {
            let (a, b) = (v.len() * d / 10, v.len() * (d + 1) / 10);
            median(&v[a..b.max(a)])
        })
        .collect()
}

#[derive(Debug, Serialize)]
struct Phases {
    compile: Spread,
    prepare: Spread,
    commit: Spread,
    outside_runtime: Spread,
}

/// Each phase's p50 over each tenth of the requests: which of them grows
/// with the NFs that run.
#[derive(Debug, Serialize)]
struct PhaseDeciles {
    compile: Vec<f64>,
    prepare: Vec<f64>,
    commit: Vec<f64>,
    outside_runtime: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct InstantiateResult {
    count: u32,
    batch: u32,
    /// The NFs' sandbox (`strict` or `off`).
    sandbox: &'static str,
    /// NFs started from shells (`settings.shells`).
    shells: bool,
    /// How each request asked for its NFs (`add`: only them; `apply`:
    /// the whole desired state).
    via: Via,
    /// µs between an answer and the next request (0: back to back).
    gap_us: u64,
    /// NFs running at the end (the base chain's included).
    alive: usize,
    /// Request → every NF of its batch running, µs.
    create_us: Spread,
    /// The p50 of `create_us` over each tenth of the requests, in order.
    create_us_by_decile: Vec<f64>,
    /// Last decile's p50 ÷ first decile's.
    last_vs_first_decile: f64,
    /// Where a request's time goes (µs): compiling and diffing the spec,
    /// preparing (forking until the NFs run), committing, and the rest
    /// (HTTP, parsing, persisting the desired state).
    phases_us: Phases,
    phases_us_by_decile: PhaseDeciles,
    /// Fork request → NF running, inside the platform, µs.
    spawn_us: Spread,
    spawn_us_by_decile: Vec<f64>,
    /// Request → first packet out of the new NF's chain, µs (sampled).
    first_packet_us: Spread,
    pss_kib_per_nf: f64,
    private_kib_per_nf: f64,
    fork_exec_us: Spread,
    /// `null`: crun is not installed or cannot run containers here.
    crun_us: Option<Spread>,
    crun_note: Option<String>,
    cpu: String,
}

/// Batch `k`'s spec entries: its NFs, chains and (sampled) ports.
fn entries(k: u32, batch: u32, sampled: bool, sandbox: &str, out: &mut [String; 3]) {
    let [ports, nfs, chains] = out;
    for j in 0..batch {
        let i = k * batch + j;
        *nfs += &format!(
            "  - {{ name: n{i}, type: forwarder, isolation: process, sandbox: {sandbox} }}\n"
        );
        if sampled && j == 0 {
            *ports += &format!(
                "  - {{ name: pg{k}, kind: generator, flows: 1, protocol: udp, size: 64, rate_pps: 100000, count: 20 }}\n  - {{ name: ps{k}, kind: sink }}\n"
            );
            *chains += &format!("  - {{ name: c{i}, from: pg{k}, nfs: [n{i}], to: ps{k} }}\n");
        } else {
            // The base generator sends UDP: these chains idle, as most
            // of a host's per-tenant NFs do at any moment.
            *chains += &format!(
                "  - {{ name: c{i}, from: gen, match: {{ proto: tcp, dst_port: {} }}, nfs: [n{i}], to: out }}\n",
                i % 65_535 + 1
            );
        }
    }
}

/// The whole spec with `parts`. The base chain takes only the
/// generator's UDP, so the TCP chains of the batches, which come after it
/// when they are added, are not shadowed by it.
fn spec(parts: &[String; 3], shells: bool) -> String {
    format!(
        "settings:\n  shells: {shells}\nports:\n  - {{ name: gen, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: 100000 }}\n  - {{ name: out, kind: sink }}\n{}nfs:\n  - {{ name: base, type: forwarder, isolation: process }}\n{}chains:\n{}  - {{ name: main, from: gen, match: {{ proto: udp }}, nfs: [base], to: out }}\n",
        parts[0], parts[1], parts[2]
    )
}

/// One batch's entries as an addition.
fn addition(parts: &[String; 3]) -> String {
    format!(
        "ports:\n{}nfs:\n{}chains:\n{}",
        parts[0], parts[1], parts[2]
    )
}

/// Pss and private memory of process `pid`, KiB.
fn memory_kib(pid: i32) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    Some((
        field("Pss:"),
        field("Private_Clean:") + field("Private_Dirty:"),
    ))
}

fn bench(a: &InstantiateArgs) -> Result<InstantiateResult, String> {
    let (count, batch) = (a.count, a.batch.min(a.count));
    let sandbox = match a.sandbox {
        OnOff::On => "strict",
        OnOff::Off => "off",
    };
    let shells = a.shells == OnOff::On;
    let requests = count.div_ceil(batch);
    let room = (count + 64).to_string();
    let (d, c) = start_daemon_with(&[
        "--max-nfs",
        &room,
        "--max-chains",
        &room,
        "--max-ports",
        "64",
    ])?;
    let mut parts: [String; 3] = Default::default();
    apply(&c, &spec(&parts, shells))?;
    let every = (requests / SAMPLES).max(1);
    let (mut create, mut first) = (Vec::new(), Vec::new());
    let mut phases: [Vec<f64>; 4] = Default::default();
    for k in 0..requests {
        if a.gap_us > 0 && k > 0 {
            std::thread::sleep(Duration::from_micros(a.gap_us));
        }
        let this = batch.min(count - k * batch);
        let sampled = k % every == 0 && k / every < SAMPLES;
        let took = match a.via {
            Via::Apply => {
                entries(k, this, sampled, sandbox, &mut parts);
                apply(&c, &spec(&parts, shells))?
            }
            Via::Add => {
                let mut one: [String; 3] = Default::default();
                entries(k, this, sampled, sandbox, &mut one);
                add(&c, &addition(&one))?
            }
        };
        create.push(took.request_ms * 1e3);
        took.record(&mut phases);
        if sampled {
            let t = first_tx(&c, &format!("ps{k}"), Duration::from_millis(1))?;
            first.push(t.saturating_sub(took.t0) as f64 / 1e3);
        }
    }
    let stats: Value = c.get("/v1/stats")?;
    let spawn: Vec<f64> = stats["nfs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|n| n["name"] != "base")
                .filter_map(|n| n["startup_us"].get(0)?.as_f64())
                .collect()
        })
        .unwrap_or_default();
    let instances: Vec<Value> = c.get("/v1/instances")?;
    let running: Vec<i32> = instances
        .iter()
        .filter(|i| i["state"] == "running" && i["isolation"] == "process")
        .filter_map(|i| i["pid"].as_i64().map(|p| p as i32))
        .collect();
    let memory: Vec<(f64, f64)> = running.iter().filter_map(|&p| memory_kib(p)).collect();
    drop(d);
    let pss: Vec<f64> = memory.iter().map(|m| m.0).collect();
    let private: Vec<f64> = memory.iter().map(|m| m.1).collect();
    let deciles = by_decile(&create);
    let (crun, crun_note) = crun_us();
    let phases = phases.map(|v| v.into_iter().map(|ms| ms * 1e3).collect::<Vec<f64>>());
    let [d_compile, d_prepare, d_commit, d_outside] = phases.each_ref().map(|v| by_decile(v));
    let [compile, prepare, commit, outside_runtime] = phases.map(spread);
    Ok(InstantiateResult {
        count,
        batch,
        sandbox,
        shells,
        via: a.via,
        gap_us: a.gap_us,
        alive: running.len(),
        last_vs_first_decile: deciles[9] / deciles[0].max(1e-9),
        create_us: spread(create),
        create_us_by_decile: deciles,
        phases_us: Phases {
            compile,
            prepare,
            commit,
            outside_runtime,
        },
        phases_us_by_decile: PhaseDeciles {
            compile: d_compile,
            prepare: d_prepare,
            commit: d_commit,
            outside_runtime: d_outside,
        },
        spawn_us_by_decile: by_decile(&spawn),
        spawn_us: spread(spawn),
        first_packet_us: spread(first),
        pss_kib_per_nf: median(&pss),
        private_kib_per_nf: median(&private),
        fork_exec_us: fork_exec_us(),
        crun_us: crun,
        crun_note,
        cpu: crate::bench::cpu_model(),
    })
}

fn deciles_text(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `sluice bench instantiate`.
pub fn run(a: InstantiateArgs) -> ExitCode {
    match bench(&a) {
        Ok(r) => {
            let text = if a.json {
                serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
            } else {
                format!(
                    "{} process NFs created, {} per request ({}); {} running at the end\n\
                     create (request → running)  p50 {:.0} µs  p99 {:.0} µs  max {:.0} µs\n\
                     by tenth (p50, µs)          {}  (last ÷ first {:.2})\n\
                     in the platform (fork → running)  p50 {:.0} µs  p99 {:.0} µs; by tenth {}\n\
                     request → first packet      p50 {:.0} µs  p99 {:.0} µs\n\
                     memory per NF               Pss {:.0} KiB, private {:.0} KiB\n\
                     fork+exec /bin/true         p50 {:.0} µs;  crun {}\n",
                    r.count,
                    r.batch,
                    match r.via {
                        Via::Add => "each request adds its NFs",
                        Via::Apply => "each request applies the whole spec",
                    },
                    r.alive,
                    r.create_us.p50,
                    r.create_us.p99,
                    r.create_us.max,
                    deciles_text(&r.create_us_by_decile),
                    r.last_vs_first_decile,
                    r.spawn_us.p50,
                    r.spawn_us.p99,
                    deciles_text(&r.spawn_us_by_decile),
                    r.first_packet_us.p50,
                    r.first_packet_us.p99,
                    r.pss_kib_per_nf,
                    r.private_kib_per_nf,
                    r.fork_exec_us.p50,
                    r.crun_us.as_ref().map_or_else(
                        || format!("not measured ({})", r.crun_note.as_deref().unwrap_or("?")),
                        |s| format!("p50 {:.0} µs", s.p50)
                    ),
                )
            };
            crate::print_stdout(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench instantiate: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deciles_follow_the_order_of_the_sample() {
        let v: Vec<f64> = (0..100).map(f64::from).collect();
        let d = by_decile(&v);
        assert_eq!(d.len(), 10);
        assert_eq!(d[0], 4.0);
        assert_eq!(d[9], 94.0);
        // Fewer values than tenths: empty tenths are 0, never a panic.
        assert_eq!(
            by_decile(&[5.0, 7.0]).iter().filter(|&&x| x > 0.0).count(),
            2
        );
    }

    #[test]
    fn every_batch_is_a_valid_spec() {
        let mut parts: [String; 3] = Default::default();
        entries(0, 3, true, "strict", &mut parts);
        entries(1, 3, false, "off", &mut parts);
        let text = spec(&parts, false);
        let s = sluice_spec::parse_str(&text, "<bench>", &crate::bench::nf_type_names()).unwrap();
        assert!(!s.settings.shells);
        assert_eq!(s.nfs.len(), 7);
        assert_eq!(s.chains.len(), 7);
        assert_eq!(s.ports.len(), 4);
    }

    /// Each batch, added to what the earlier ones made, is accepted
    /// (the base chain does not shadow the added ones).
    #[test]
    fn every_batch_is_a_valid_addition() {
        let types = crate::bench::nf_type_names();
        let empty: [String; 3] = Default::default();
        let mut whole = sluice_spec::parse_str(&spec(&empty, true), "<bench>", &types).unwrap();
        for (k, sampled) in [(0, true), (1, false), (2, false)] {
            let mut one: [String; 3] = Default::default();
            entries(k, 2, sampled, "strict", &mut one);
            let a = sluice_spec::parse_additions(&addition(&one), "<bench>").unwrap();
            whole = sluice_spec::add(Some(&whole), a, &types)
                .unwrap()
                .into_spec();
        }
        assert_eq!(whole.nfs.len(), 7);
        assert_eq!(whole.chains.len(), 7);
        assert_eq!(whole.ports.len(), 4);
    }
}
