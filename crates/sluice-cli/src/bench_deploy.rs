//! `sluice bench deploy`: how fast a running daemon changes.
//!
//! - **deploy → first packet**: from the API request that adds a chain
//!   (its own generator and sink, and three process NFs) to the first
//!   packet of that chain leaving its sink (the sink port's
//!   `first_tx_unix_ns`, the same wall clock as the request's start);
//! - **rule update → effect**: from the API request that adds a rule to
//!   a process firewall that dropped everything to the first packet that
//!   passes it (the firewall takes its new config live, on its ring,
//!   keeping its connections).
//!
//! The daemon is this binary started as a child, talked to over its UNIX
//! socket, as a user would. Changes accumulate: the n-th deploy runs
//! beside the n - 1 chains before it. Every chain's generator sends 10 kpps
//! (a packet every 100 µs, the figures' resolution): enough to see the
//! first packet at once, and with `--count 20` (40 chains, 80 process NFs)
//! 0.4 Mpps in all, so the bench measures the control path rather than a
//! core it overloads itself (at 100 kpps per chain the NFs' core was
//! saturated and every change waited for its turn).

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::bench_daemon::{apply, first_tx, spread, start_daemon, Spread};
use crate::cli::DeployArgs;

/// How often a first packet is looked for (the figure is the port's own
/// timestamp, not the time it was seen).
const POLL: Duration = Duration::from_millis(5);

#[derive(Debug, Serialize)]
struct DeployResult {
    count: u32,
    /// Request sent → first packet of the new chain out of its sink.
    deploy_to_first_packet_ms: Spread,
    /// Request sent → first packet through the reconfigured firewall.
    rule_update_to_effect_ms: Spread,
    /// The deploy requests' own round trips (the daemon answers once the
    /// new NFs run and the chain is installed).
    deploy_request_ms: Spread,
    /// Where a deploy request's time goes inside the runtime: compiling
    /// and diffing, preparing (ports opened, NFs forked until they run),
    /// committing (the workers switch plans), and the rest of the request
    /// (HTTP, the control actor, persisting the desired state).
    deploy_phases_ms: Phases,
    /// The same for the rule updates.
    rule_phases_ms: Phases,
    /// The same chain in the daemon and under `sluice run`, side by side
    /// (`--steady-rounds 0`: not measured).
    steady_state: Option<crate::bench_steady::Steady>,
    cpu: String,
}

#[derive(Debug, Serialize)]
struct Phases {
    compile: Spread,
    prepare: Spread,
    commit: Spread,
    outside_runtime: Spread,
}

/// The spec with `deploys` chains deployed and the first `accepted` firewalls
/// of `count` accepting.
fn spec(count: u32, deploys: u32, accepted: u32) -> String {
    let mut ports = String::new();
    let mut nfs = String::new();
    let mut chains = String::new();
    for i in 0..count {
        // A rule trial: a flow dropped by its firewall until a rule accepts it.
        ports += &format!(
            "  - {{ name: rg{i}, kind: generator, flows: 1, protocol: udp, size: 64, rate_pps: 10000 }}\n  - {{ name: rs{i}, kind: sink }}\n"
        );
        let rules = if i < accepted {
            "[{ action: accept, proto: udp }]"
        } else {
            "[]"
        };
        nfs += &format!(
            "  - {{ name: rfw{i}, type: firewall, isolation: process, config: {{ default: drop, rules: {rules} }} }}\n"
        );
        chains += &format!("  - {{ name: rc{i}, from: rg{i}, nfs: [rfw{i}], to: rs{i} }}\n");
    }
    for i in 0..deploys {
        ports += &format!(
            "  - {{ name: dg{i}, kind: generator, flows: 1, protocol: udp, size: 64, rate_pps: 10000 }}\n  - {{ name: ds{i}, kind: sink }}\n"
        );
        let names: Vec<String> = (0..3).map(|k| format!("d{i}n{k}")).collect();
        for n in &names {
            nfs += &format!("  - {{ name: {n}, type: forwarder, isolation: process }}\n");
        }
        chains += &format!(
            "  - {{ name: dc{i}, from: dg{i}, nfs: [{}], to: ds{i} }}\n",
            names.join(", ")
        );
    }
    format!("ports:\n{ports}nfs:\n{nfs}chains:\n{chains}")
}

fn phases_of(v: [Vec<f64>; 4]) -> Phases {
    let [compile, prepare, commit, outside_runtime] = v.map(spread);
    Phases {
        compile,
        prepare,
        commit,
        outside_runtime,
    }
}

fn bench(a: &DeployArgs) -> Result<DeployResult, String> {
    let (d, c) = start_daemon()?;
    let n = a.count;
    // The rule trials' chains first, every firewall dropping.
    apply(&c, &spec(n, 0, 0))?;
    let mut deploy = Vec::new();
    let mut request = Vec::new();
    let mut phases: [Vec<f64>; 4] = Default::default();
    for i in 0..n {
        let took = apply(&c, &spec(n, i + 1, 0))?;
        let t1 = first_tx(&c, &format!("ds{i}"), POLL)?;
        deploy.push(t1.saturating_sub(took.t0) as f64 / 1e6);
        request.push(took.request_ms);
        took.record(&mut phases);
    }
    let deploy_phases = phases_of(phases);
    let mut rules = Vec::new();
    let mut phases: [Vec<f64>; 4] = Default::default();
    for i in 0..n {
        let took = apply(&c, &spec(n, n, i + 1))?;
        let t1 = first_tx(&c, &format!("rs{i}"), POLL)?;
        rules.push(t1.saturating_sub(took.t0) as f64 / 1e6);
        took.record(&mut phases);
    }
    // The steady-state rounds run alone on the machine.
    drop(d);
    Ok(DeployResult {
        count: n,
        deploy_to_first_packet_ms: spread(deploy),
        rule_update_to_effect_ms: spread(rules),
        deploy_request_ms: spread(request),
        deploy_phases_ms: deploy_phases,
        rule_phases_ms: phases_of(phases),
        steady_state: match a.steady_rounds {
            0 => None,
            n => Some(crate::bench_steady::measure(n)?),
        },
        cpu: crate::bench::cpu_model(),
    })
}

/// `"1.23 / 1.25"`.
fn list_mpps(v: &[f64]) -> String {
    v.iter()
        .map(|m| format!("{m:.2}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// `sluice bench deploy`.
pub fn run(a: DeployArgs) -> ExitCode {
    match bench(&a) {
        Ok(r) => {
            let text = if a.json {
                serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
            } else {
                format!(
                    "deploy → first packet  p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({} chains of 3 process NFs)\n\
                     rule update → effect   p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  (p50: compile {:.2}, prepare {:.2}, commit {:.2}, outside the runtime {:.2})\n\
                     deploy request         p50 {:.2} ms  p99 {:.2} ms  (p50: compile {:.2}, prepare {:.2}, commit {:.2}, outside the runtime {:.2})\n",
                    r.deploy_to_first_packet_ms.p50,
                    r.deploy_to_first_packet_ms.p99,
                    r.deploy_to_first_packet_ms.max,
                    r.count,
                    r.rule_update_to_effect_ms.p50,
                    r.rule_update_to_effect_ms.p99,
                    r.rule_update_to_effect_ms.max,
                    r.rule_phases_ms.compile.p50,
                    r.rule_phases_ms.prepare.p50,
                    r.rule_phases_ms.commit.p50,
                    r.rule_phases_ms.outside_runtime.p50,
                    r.deploy_request_ms.p50,
                    r.deploy_request_ms.p99,
                    r.deploy_phases_ms.compile.p50,
                    r.deploy_phases_ms.prepare.p50,
                    r.deploy_phases_ms.commit.p50,
                    r.deploy_phases_ms.outside_runtime.p50,
                ) + &r.steady_state.as_ref().map_or(String::new(), |s| {
                    format!(
                        "steady state           daemon {} Mpps, sluice run {} Mpps: {:.3}×\n",
                        list_mpps(&s.daemon_mpps),
                        list_mpps(&s.run_mpps),
                        s.ratio
                    )
                })
            };
            crate::print_stdout(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench deploy: {e}");
            ExitCode::from(1)
        }
    }
}
