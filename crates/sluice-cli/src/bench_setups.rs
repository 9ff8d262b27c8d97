//! The ways of scheduling NFs `sluice bench sched` compares ([`Setup`]),
//! the spec each section runs under them, and how one configuration is
//! measured under each: every setup once per round, `rounds` rounds, the
//! median kept (`bench_sched` has the sections).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// A way of scheduling NFs the bench compares: its rows' name and the
/// `settings` lines that select it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    pub(crate) name: &'static str,
    settings: &'static str,
}

pub(crate) const TURNS: Setup = Setup {
    name: "turns",
    settings: "  scheduler: { policy: turns }\n",
};
pub(crate) const DEFAULT: Setup = Setup {
    name: "default",
    settings: "",
};
pub(crate) const HYBRID: Setup = Setup {
    name: "hybrid",
    settings: "  scheduler: { policy: hybrid }\n",
};
pub(crate) const KBATCH_8: Setup = Setup {
    name: "kbatch_8",
    settings: "  scheduler: { policy: hybrid, yield_every: 8 }\n",
};
/// Poll mode: an idle NF polls for up to a second before it sleeps, so
/// within a run it never does.
pub(crate) const POLLING: Setup = Setup {
    name: "polling",
    settings: "  scheduler: { policy: hybrid, yield_every: 0 }\n  wakeup: { policy: hybrid, busy_poll_us: 1000000 }\n",
};
pub(crate) const RR: Setup = Setup {
    name: "rr",
    settings: "  scheduler: { policy: hybrid, yield_every: 0, kernel_class: round_robin }\n  wakeup: { policy: hybrid, busy_poll_us: 1000000 }\n",
};
pub(crate) const EVERY_PACKET: Setup = Setup {
    name: "every_packet",
    settings: "  scheduler: { policy: hybrid }\n  wakeup: { policy: every_packet }\n",
};

/// Each section's setups, in the order each round runs them.
pub(crate) const NFS_PER_CORE: [Setup; 5] = [POLLING, EVERY_PACKET, HYBRID, TURNS, DEFAULT];
pub(crate) const LONG_CHAIN: [Setup; 2] = [HYBRID, TURNS];
pub(crate) const CHAINS: [Setup; 6] = [DEFAULT, TURNS, KBATCH_8, HYBRID, POLLING, RR];
/// What sluice's scheduling is measured against in `chains`.
pub(crate) const BASELINES: [Setup; 4] = [KBATCH_8, HYBRID, POLLING, RR];

#[derive(Debug, Serialize, Clone)]
pub(crate) struct Row {
    pub(crate) policy: &'static str,
    pub(crate) mpps: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) drops: u64,
    pub(crate) turns_per_s: f64,
    /// The NFs' CPU time, % of one core (the kernel's count).
    pub(crate) cpu_pct: f64,
    /// The NFs' context switches per second (the kernel's count).
    pub(crate) switches_per_s: f64,
}

/// A spec of `chains` (each a list of NF lines) fed by one generator, its
/// flows spread over one UDP destination port per chain.
pub(crate) fn spec(setup: Setup, rate: Option<u64>, chains: &[Vec<String>]) -> String {
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

pub(crate) fn forwarders(n: usize) -> Vec<String> {
    vec!["type: forwarder".to_string(); n]
}

pub(crate) fn burners(n: usize, cycles: u64) -> Vec<String> {
    vec![format!("type: cycle_burner, config: {{ iterations_per_packet: {cycles} }}"); n]
}

/// Runs a configuration under each of `setups`, `rounds` rounds that
/// each run every setup once (so the host's noise falls on all alike),
/// keeping the median round of each by Mpps (by p50 for the fixed-rate
/// runs).
pub(crate) fn measure(
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

/// The kernel's round-robin slice set for a while (UNiS tuned RR to its
/// 1 ms minimum; the default is 100 ms), restored when dropped. Left as it
/// is where the bench may not write it (not root, a container).
pub(crate) struct RrSlice {
    was: Option<u64>,
    pub(crate) in_force: Option<u64>,
}

const RR_SLICE: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

impl RrSlice {
    pub(crate) fn set(ms: u64) -> RrSlice {
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
