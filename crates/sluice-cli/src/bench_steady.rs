//! The steady-state half of `sluice bench deploy`: the same chain run by
//! the daemon and by `sluice run`, side by side, in alternating rounds.
//!
//! The chain is a generator at full speed through three inline
//! forwarders to a sink, on one worker. `sluice run` reports its own
//! rate over the run (`--duration`, start-up included: a few ms of
//! seconds); the daemon's rate is the sink's transmit count over the same
//! time, read through the API once the chain runs.

use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::bench_daemon::{apply, start_daemon};

/// The chain both run.
const SPEC: &str = "ports:\n  - { name: gen, kind: generator, flows: 64, protocol: udp, size: 64 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: a, type: forwarder, isolation: inline }\n  - { name: b, type: forwarder, isolation: inline }\n  - { name: c, type: forwarder, isolation: inline }\nchains:\n  - { name: main, from: gen, nfs: [a, b, c], to: out }\n";

/// Seconds each round measures.
const SECS: f64 = 3.0;

#[derive(Debug, Serialize)]
pub struct Steady {
    /// Mpps of each round under `sluice run`.
    pub run_mpps: Vec<f64>,
    /// Mpps of each round in the daemon.
    pub daemon_mpps: Vec<f64>,
    /// Median daemon / median run (goal ≥ 0.98).
    pub ratio: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// One `sluice run` round: its reported Mpps.
fn run_round(spec: &std::path::Path) -> Result<f64, String> {
    crate::bench::run_child(spec, SECS)?["mpps"]
        .as_f64()
        .ok_or_else(|| "the run report has no mpps".to_string())
}

/// The sink's transmitted packets, through the daemon's API.
fn sink_tx(c: &crate::client::Client) -> Result<u64, String> {
    let p: Value = c.get("/v1/ports/out")?;
    p["stats"]["tx_packets"]
        .as_u64()
        .ok_or_else(|| "the sink has no tx_packets".to_string())
}

/// One daemon round: the chain applied to a fresh daemon, its sink's rate
/// over `SECS` once it runs.
fn daemon_round() -> Result<f64, String> {
    let (_d, c) = start_daemon()?;
    apply(&c, SPEC)?;
    // Let it settle as `sluice run` has by its second millisecond.
    std::thread::sleep(Duration::from_millis(200));
    let (n0, t0) = (sink_tx(&c)?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(SECS));
    let (n1, t1) = (sink_tx(&c)?, Instant::now());
    Ok((n1 - n0) as f64 / (t1 - t0).as_secs_f64() / 1e6)
}

/// `rounds` alternating rounds of each.
pub fn measure(rounds: u32) -> Result<Steady, String> {
    let spec = std::env::temp_dir().join(format!("sluice-steady-{}.yaml", std::process::id()));
    std::fs::write(&spec, SPEC).map_err(|e| e.to_string())?;
    let mut run_mpps = Vec::new();
    let mut daemon_mpps = Vec::new();
    let mut rounds_done = || -> Result<(), String> {
        for _ in 0..rounds {
            run_mpps.push(run_round(&spec)?);
            daemon_mpps.push(daemon_round()?);
        }
        Ok(())
    };
    let done = rounds_done();
    let _ = std::fs::remove_file(&spec);
    done?;
    let ratio = median(&daemon_mpps) / median(&run_mpps).max(f64::MIN_POSITIVE);
    Ok(Steady {
        run_mpps,
        daemon_mpps,
        ratio,
    })
}
