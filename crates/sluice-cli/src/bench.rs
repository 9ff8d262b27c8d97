//! `sluice bench chain`: the standard chain benchmark, a generator feeding
//! N forwarders feeding a sink, built as a spec and run like any other.

use std::process::ExitCode;

use serde::Serialize;
use sluice_dataplane::report::Latency;
use sluice_dataplane::{RunError, RunReport};

use crate::args::Seconds;
use crate::cli::{ChainArgs, IsolationArg};

#[derive(Debug, Serialize)]
struct ChainResult {
    length: u32,
    isolation: &'static str,
    workers: u16,
    packet_size: u16,
    offered_pps: Option<u64>,
    scheduler: &'static str,
    /// `one` or `per_nf` (`--domains`).
    domains: &'static str,
    /// Packets copied into another trust domain on the way, per packet
    /// out (the chain's length with `per_nf`, 0 with `one`).
    domain_copies_per_packet: f64,
    /// Turns the NFs took per second (0 unless they take turns).
    turns_per_s: f64,
    #[serde(flatten)]
    figures: Figures,
    nf_ns_per_packet: Vec<f64>,
}

/// What every system benchmark reports about its run.
#[derive(Debug, Serialize)]
pub(crate) struct Figures {
    pub mpps: f64,
    pub gbps: f64,
    pub latency_ns: Latency,
    pub packets_out: u64,
    pub drops_total: u64,
    pub leaked_buffers: u64,
    pub duration_s: f64,
    /// Time the workers' loops were held off their cores (stalls of more
    /// than 50 µs: the kernel, the hypervisor, other tasks), µs.
    pub worker_stalled_us: u64,
    /// The same for the most-stalled process NF, µs.
    pub nf_stalled_us_max: u64,
}

impl Figures {
    pub(crate) fn of(r: &RunReport) -> Figures {
        Figures {
            mpps: r.mpps,
            gbps: r.gbps,
            latency_ns: r.latency_ns.clone(),
            packets_out: r.packets_out,
            drops_total: r.drops_total,
            leaked_buffers: r.leaked_buffers,
            duration_s: r.duration_s,
            worker_stalled_us: r.worker_stalled_us,
            nf_stalled_us_max: r.nfs.iter().map(|n| n.stalled_us).max().unwrap_or(0),
        }
    }
}

/// The median of a setup's rounds by Mpps (alternating rounds put the
/// host's noise on every setup alike; the median round is reported).
pub(crate) fn median_round<T>(mut rounds: Vec<T>, mpps: impl Fn(&T) -> f64) -> T {
    rounds.sort_by(|a, b| mpps(a).total_cmp(&mpps(b)));
    rounds.swap_remove(rounds.len() / 2)
}

/// Builds the benchmark spec text.
pub fn chain_spec(a: &ChainArgs) -> String {
    let isolation = isolation_name(a.isolation);
    let mut s = format!(
        "settings:\n  batch: {}\n  buffers: 32768\n  ring_size: 1024\n  workers: {}\n  wakeup: {{ max_batch: {}, timeout_us: {}{} }}\n  scheduler: {{ policy: {} }}\nports:\n  - name: gen\n    kind: generator\n    flows: {}\n    protocol: udp\n    size: {}\n",
        a.batch,
        a.workers,
        a.wake_batch,
        a.wake_timeout_us,
        a.busy_poll_us
            .map_or(String::new(), |us| format!(", busy_poll_us: {us}")),
        a.scheduler.name(),
        a.flows,
        a.packet_size
    );
    if let Some(r) = a.rate {
        s.push_str(&format!("    rate_pps: {r}\n"));
    }
    s.push_str("  - name: sink\n    kind: sink\nnfs:\n");
    let sandbox = match (a.isolation, a.sandbox) {
        (IsolationArg::Process, crate::cli::OnOff::Off) => "    sandbox: off\n",
        _ => "",
    };
    let per_nf = a.domains == crate::cli::DomainsArg::PerNf;
    for i in 0..a.length {
        s.push_str(&format!(
            "  - name: fwd{i}\n    type: forwarder\n    isolation: {isolation}\n{sandbox}"
        ));
        if per_nf {
            s.push_str(&format!("    domain: d{i}\n"));
        }
    }
    if per_nf && a.length > 0 {
        // Settings come first in the text; the domains go at its end.
        let domains: Vec<String> = (0..a.length)
            .map(|i| format!("{{ name: d{i}, buffers: 8192 }}"))
            .collect();
        s = s.replacen(
            "\nports:\n",
            &format!("\n  domains: [{}]\nports:\n", domains.join(", ")),
            1,
        );
    }
    let names: Vec<String> = (0..a.length).map(|i| format!("fwd{i}")).collect();
    s.push_str(&format!(
        "chains:\n  - name: bench\n    from: gen\n    nfs: [{}]\n    to: sink\n",
        names.join(", ")
    ));
    s
}

/// Runs `spec` as a child `sluice run SPEC --duration SECS --json` (a
/// fresh platform per run, so no process of one run lingers into the
/// next); its report.
pub(crate) fn run_child(spec: &std::path::Path, secs: f64) -> Result<serde_json::Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::process::Command::new(exe)
        .arg("run")
        .arg(spec)
        .args(["--duration", &secs.to_string(), "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot start sluice run: {e}"))?;
    serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "sluice run printed no report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The CPU model, as /proc/cpuinfo names it (benchmark figures depend on it).
pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Names of every NF type this binary has.
pub(crate) fn nf_type_names() -> Vec<&'static str> {
    sluice_nfs::REGISTRY.iter().map(|t| t.name).collect()
}

/// Runs a benchmark's spec for `duration`; on failure prints why and
/// gives the exit code (2: the spec, 1: the run).
pub(crate) fn run_spec(spec: &sluice_spec::Spec, duration: Seconds) -> Result<RunReport, ExitCode> {
    if let Err(e) = spec.validate(&nf_type_names()) {
        eprintln!("sluice: {e}");
        return Err(ExitCode::from(2));
    }
    crate::execute(spec, Some(duration.duration())).map_err(|e| {
        eprintln!("sluice: {e}");
        match e {
            RunError::Spec(_) => ExitCode::from(2),
            RunError::Setup(_) => ExitCode::from(crate::EXIT_SETUP),
            RunError::Failed(_) => ExitCode::from(crate::EXIT_FAILED),
        }
    })
}

/// The spec name of an isolation choice.
pub(crate) fn isolation_name(i: IsolationArg) -> &'static str {
    match i {
        IsolationArg::Inline => "inline",
        IsolationArg::Process => "process",
    }
}

pub fn chain(a: ChainArgs) -> ExitCode {
    let spec = match sluice_spec::parse_str(&chain_spec(&a), "<bench chain>", &nf_type_names()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match run_spec(&spec, a.duration) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = ChainResult {
        length: a.length,
        isolation: isolation_name(a.isolation),
        scheduler: a.scheduler.name(),
        domains: a.domains.name(),
        domain_copies_per_packet: report.nfs.iter().map(|n| n.domain_copies).sum::<u64>() as f64
            / report.packets_out.max(1) as f64,
        turns_per_s: report.nfs.iter().map(|n| n.turns).sum::<u64>() as f64
            / report.duration_s.max(1e-9),
        workers: a.workers,
        packet_size: a.packet_size,
        offered_pps: a.rate,
        figures: Figures::of(&report),
        nf_ns_per_packet: report.nfs.iter().map(|n| n.ns_per_packet).collect(),
    };
    if a.json {
        crate::print_stdout(&(serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"));
    } else {
        crate::print_stdout(&format!(
            "chain length {} {} ×{} workers {} B: {:.3} Mpps {:.3} Gbit/s  latency p50 {:.1} µs p99 {:.1} µs p99.9 {:.1} µs  drops {}  leaked {}\n",
            result.length,
            result.isolation,
            result.workers,
            result.packet_size,
            result.figures.mpps,
            result.figures.gbps,
            result.figures.latency_ns.p50 as f64 / 1e3,
            result.figures.latency_ns.p99 as f64 / 1e3,
            result.figures.latency_ns.p999 as f64 / 1e3,
            result.figures.drops_total,
            result.figures.leaked_buffers
        ));
    }
    if report.leaked_buffers > 0 {
        return ExitCode::from(3);
    }
    ExitCode::SUCCESS
}
