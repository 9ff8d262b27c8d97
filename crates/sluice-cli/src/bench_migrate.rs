//! `sluice bench migrate`: a firewall tracking `--flows` UDP connections
//! moves between two daemons, back and forth `--rounds` times, while a
//! paced stream over those connections flows between two network
//! namespaces through its tap ports (`migrate_env`); every frame the
//! server's side receives is counted, so `lost_packets` is what the moves
//! cost the stream. Needs root.
//!
//! Timed at the client, step by step as `sluice migrate` takes them:
//! `prepare_ms` is the import before traffic stops (descriptors taken,
//! objects added, NFs forked); `checkpoint_ms` the pause (ports paused,
//! NFs drained, states taken); `restore_ms` the resume (states restored,
//! ports read again); `migrate_ms` the last two together, the time frames
//! waited in the taps; `commit_ms` the source letting go afterwards
//! (traffic already flows through the destination then).

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::bench_daemon::{self, spread, Spread};
use crate::cli::MigrateBenchArgs;
use crate::migrate_cmd::{migrate, Moved};
use crate::migrate_env::{udp_stream, TapEnv};

const FIREWALL: &str = "nfs:\n  - name: fw\n    type: firewall\n    config:\n      default: drop\n      rules:\n        - { action: accept, proto: udp, dst: 10.77.0.2/32 }\n";

#[derive(Debug, Serialize)]
struct MigrateResult {
    flows: u16,
    rate_pps: u64,
    moves: usize,
    /// Connections the firewall tracked before the first move.
    tracked: u64,
    state_bytes: u64,
    prepare_ms: Spread,
    checkpoint_ms: Spread,
    restore_ms: Spread,
    migrate_ms: Spread,
    commit_ms: Spread,
    drain_us: Spread,
    sent: u64,
    delivered: u64,
    lost_packets: i64,
    by_move: Vec<Value>,
}

fn tracked(c: &crate::client::Client) -> u64 {
    c.get::<Value>("/v1/stats").ok().map_or(0, |s| {
        s["nfs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["counters"]["entries"].as_u64())
            .sum()
    })
}

fn bench(a: &MigrateBenchArgs) -> Result<MigrateResult, String> {
    if !sluice_nic::has_net_caps() {
        return Err("bench migrate needs root (namespaces, taps, pidfd_getfd)".into());
    }
    let env = TapEnv::new(&format!("{}", std::process::id() % 100_000))?;
    let (_da, ca) = bench_daemon::start_daemon()?;
    let (_db, cb) = bench_daemon::start_daemon()?;
    bench_daemon::apply(&ca, &format!("{}{FIREWALL}", env.spec("fw")))?;
    env.attach(Duration::from_secs(10))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stream = udp_stream(&env.cli_ns, (1000, a.flows), a.rate, stop.clone());
    // Every connection opened and tracked before the first move.
    let warm =
        Duration::from_secs_f64(f64::from(a.flows) / a.rate as f64) + Duration::from_millis(500);
    std::thread::sleep(warm);
    let tracked_before = tracked(&ca);
    let mut moves: Vec<Moved> = Vec::new();
    let mut failure = None;
    for i in 0..a.rounds as usize * 2 {
        let (from, to) = if i % 2 == 0 { (&ca, &cb) } else { (&cb, &ca) };
        match migrate(from, to, "fw") {
            Ok(m) => moves.push(m),
            Err(e) => {
                failure = Some(format!("move {}: {}", i + 1, e.message));
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::Relaxed);
    let sent = stream
        .join()
        .map_err(|_| "the stream thread panicked".to_string())??;
    std::thread::sleep(Duration::from_millis(300));
    let delivered = env.delivered()?;
    if let Some(f) = failure {
        return Err(f);
    }
    let pick = |f: &dyn Fn(&Moved) -> f64| spread(moves.iter().map(f).collect());
    let by_move: Vec<Value> = moves.iter().map(Moved::to_json).collect();
    Ok(MigrateResult {
        flows: a.flows,
        rate_pps: a.rate,
        moves: moves.len(),
        tracked: tracked_before,
        state_bytes: by_move
            .first()
            .and_then(|m| m["state_bytes"].as_u64())
            .unwrap_or(0),
        prepare_ms: pick(&|m| m.import_ms),
        checkpoint_ms: pick(&|m| m.pause_ms),
        restore_ms: pick(&|m| m.resume_ms),
        migrate_ms: pick(&|m| m.waited_ms),
        commit_ms: pick(&|m| m.commit_ms),
        drain_us: pick(&|m| m.resumed["drain_us"].as_f64().unwrap_or(0.0)),
        sent,
        delivered,
        lost_packets: sent as i64 - delivered as i64,
        by_move,
    })
}

/// `sluice bench migrate`.
pub fn run(a: MigrateBenchArgs) -> ExitCode {
    match bench(&a) {
        Ok(r) => {
            let text = if a.json {
                serde_json::to_string_pretty(&r).unwrap_or_default() + "\n"
            } else {
                format!(
                    "firewall with {} tracked connections ({} bytes of state), {} moves under {} datagrams/s\n\
                     prepare (import)      p50 {:.1} ms  max {:.1} ms\n\
                     checkpoint (pause)    p50 {:.1} ms  max {:.1} ms\n\
                     restore (resume)      p50 {:.1} ms  max {:.1} ms\n\
                     migrate (frames wait) p50 {:.1} ms  max {:.1} ms\n\
                     commit at the source  p50 {:.1} ms\n\
                     stream: {} sent, {} delivered, {} lost\n",
                    r.tracked,
                    r.state_bytes,
                    r.moves,
                    r.rate_pps,
                    r.prepare_ms.p50,
                    r.prepare_ms.max,
                    r.checkpoint_ms.p50,
                    r.checkpoint_ms.max,
                    r.restore_ms.p50,
                    r.restore_ms.max,
                    r.migrate_ms.p50,
                    r.migrate_ms.max,
                    r.commit_ms.p50,
                    r.sent,
                    r.delivered,
                    r.lost_packets
                )
            };
            crate::print_stdout(&text);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench migrate: {e}");
            ExitCode::FAILURE
        }
    }
}
