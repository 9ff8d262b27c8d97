//! `sluice soak`: the platform under load while everything around it
//! changes, then the books. A daemon (this binary, its own socket and
//! state directory) runs the realistic chain of `sluice bench nfs`
//! (`examples/bench-realistic.yaml`: firewall → NAT → monitor → router,
//! every NF a process) from a rate-limited generator, and while it runs:
//!
//! - every `--kill-every` seconds one NF process, picked at random among
//!   those running, gets SIGKILL (the supervisor restarts it);
//! - every 2 seconds a side chain (its own generator, an ACL and a
//!   forwarder, a sink) is added or removed again through `PUT /v1/spec`;
//! - half way, the daemon is stopped with SIGTERM and started again on
//!   the same state directory (it re-applies what it ran).
//!
//! At the end the side chain is removed, the slots and the daemon's
//! descriptors and memory are read, and the daemon is stopped: its final
//! report (`last-run.json`, one per daemon run, summed) gives the totals,
//! drops and leaked buffers. The claim checked is the supervisor's: a
//! SIGKILL loses only the packets the killed NF held (`nf_crashed`), so
//! `loss_vs_held` = (packets in − out − drops the NFs chose) ÷ held ≤ 1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};
use sluice_spec::Isolation;

use crate::bench::nf_type_names;
use crate::bench_daemon::{apply, start_daemon, Daemon};
use crate::cli::{OnOff, SoakArgs};
use crate::client::Client;

/// The chain's spec; the soak makes every NF a process, limits the rate
/// and restarts NFs at once and without limit.
const SPEC: &str = include_str!("../../../examples/bench-realistic.yaml");

/// What `sluice soak --json` prints.
#[derive(Debug, Default, Serialize)]
struct Soak {
    seconds: f64,
    rate_pps: u64,
    packets_in: u64,
    packets_out: u64,
    /// All drops, by reason, over both daemon runs.
    drops: std::collections::BTreeMap<String, u64>,
    /// SIGKILLs sent to NF processes.
    kills: u64,
    /// NF restarts that came back, and how long they took from the exit
    /// seen to the new instance running.
    restarts: u64,
    restart_us_mean: f64,
    restart_us_max: f64,
    /// Restarts that took more than 1 ms.
    restarts_over_1ms: u64,
    /// The same per NF: where restart time goes (an NF's build, its
    /// tables, is most of it).
    restarts_by_nf: std::collections::BTreeMap<String, sluice_dataplane::nf_rt::RestartTimes>,
    /// NFs were started from shells (`--shells`), and how many starts
    /// (first starts and restarts) were forks of one.
    shells: bool,
    shell_starts: u64,
    /// NFs kept a standby (`--standby`), and how many restarts one took
    /// over.
    standby: bool,
    standby_starts: u64,
    /// Side-chain additions and removals applied.
    changes: u64,
    /// Changes the daemon refused (must be 0).
    changes_failed: u64,
    /// The daemon restart: SIGTERM to its API answering again, ms.
    daemon_restart_ms: f64,
    leaked_buffers: u64,
    leaked_slots: u64,
    /// Growth of the daemon's open descriptors over each run (the larger),
    /// from a third of the run (10 s at least) to its end; `null` when no
    /// run lasted 20 s.
    fd_growth: Option<i64>,
    /// Growth of the daemon's resident memory over the same span, %.
    /// Resident memory includes the pages of the shared packet arena the
    /// daemon has touched, which grow as the pool hands out buffers it had
    /// not used before: not a leak.
    rss_growth_pct: Option<f64>,
    /// Growth of its private anonymous memory (`RssAnon`: the heap, where
    /// a leak would show), %.
    anon_growth_pct: Option<f64>,
    /// Packets held by killed NFs (`nf_crashed`).
    held: u64,
    /// Packets lost: in − out − drops by the NFs' own reasons.
    lost: u64,
    /// `lost / held` (0 when nothing was lost).
    loss_vs_held: f64,
}

/// Runs `sluice soak`.
pub fn run(a: SoakArgs) -> ExitCode {
    match soak(&a) {
        Ok(s) => {
            if a.json {
                println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
            } else {
                print_table(&s);
            }
            if s.leaked_buffers + s.leaked_slots + s.changes_failed > 0 || s.loss_vs_held > 1.0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("sluice soak: {e}");
            ExitCode::from(1)
        }
    }
}

/// The base spec (JSON text) and the same with the side chain.
fn specs(rate_pps: u64, shells: bool, standby: bool) -> Result<(String, String), String> {
    let mut spec =
        sluice_spec::parse_str(SPEC, "<soak>", &nf_type_names()).map_err(|e| e.to_string())?;
    for nf in &mut spec.nfs {
        nf.isolation = Isolation::Process;
    }
    let mut v = spec.to_json();
    v["ports"][0]["rate_pps"] = json!(rate_pps);
    v["settings"]["restart"] = json!({ "policy": "always", "max_restarts": 1_000_000,
        "backoff_ms": 0, "hold_ms": 1000, "standby": standby });
    v["settings"]["shells"] = json!(shells);
    let base = v.to_string();
    let mut side = |key: &str, item: Value| {
        if let Some(a) = v[key].as_array_mut() {
            a.push(item);
        }
    };
    side(
        "ports",
        json!({ "name": "side_in", "kind": "generator", "flows": 64, "protocol": "udp",
                "rate_pps": (rate_pps / 10).max(1) }),
    );
    side("ports", json!({ "name": "side_out", "kind": "sink" }));
    side(
        "nfs",
        json!({ "name": "side_acl", "type": "acl", "config": { "default": "accept" } }),
    );
    side("nfs", json!({ "name": "side_fwd", "type": "forwarder" }));
    side(
        "chains",
        json!({ "name": "side", "from": "side_in", "nfs": ["side_acl", "side_fwd"], "to": "side_out" }),
    );
    Ok((base, v.to_string()))
}

fn soak(a: &SoakArgs) -> Result<Soak, String> {
    let total = Duration::from_secs_f64(a.minutes.as_secs_f64() * 60.0);
    let standby = a.standby == OnOff::On;
    if standby && a.shells == OnOff::Off {
        return Err(
            "a standby is forked from its NF's shell: --standby on needs --shells on".into(),
        );
    }
    let (base, with_side) = specs(a.rate_pps, a.shells == OnOff::On, standby)?;
    let (mut daemon, client) = start_daemon()?;
    apply(&client, &base)?;
    let mut s = Soak {
        rate_pps: a.rate_pps,
        shells: a.shells == OnOff::On,
        standby,
        ..Soak::default()
    };
    let mut rng = XorShift(a.seed.unwrap_or_else(seed_from_clock) | 1);
    let started = Instant::now();
    let mut run_start = Instant::now();
    let mut baseline: Option<Usage> = None;
    let (mut next_kill, mut next_change) = (Duration::ZERO, Duration::from_secs(2));
    let mut side_on = false;
    let mut restarted = false;
    while started.elapsed() < total {
        let now = started.elapsed();
        // The baseline waits for what fills once and then holds: the
        // allocator's arenas (the first hundred or so changes grow the heap
        // by a few MiB, the next hundred by under 0.1 MiB) and the NFs'
        // log books (1,000 lines each). The end is read after `/v1/stats`
        // requests, whose first ones raise the heap's high water by ~5 MiB
        // (the next 500 by 12 KiB): the baseline is read after one too.
        if baseline.is_none() && run_start.elapsed() >= (total / 6).max(Duration::from_secs(10)) {
            client.get::<Value>("/v1/stats")?;
            baseline = Some(usage(daemon.pid())?);
        }
        if now >= next_kill {
            next_kill = now + a.kill_every.duration();
            if let Some(pid) = pick_process(&client, &mut rng)? {
                if sluice_sys::Pid::from_raw(pid).is_some_and(|p| sluice_sys::kill(p).is_ok()) {
                    s.kills += 1;
                }
            }
        }
        if now >= next_change {
            next_change = now + Duration::from_secs(2);
            side_on = !side_on;
            match apply(&client, if side_on { &with_side } else { &base }) {
                Ok(_) => s.changes += 1,
                Err(e) => {
                    tracing::warn!("a change was refused: {e}");
                    s.changes_failed += 1;
                }
            }
        }
        if !restarted && now >= total / 2 {
            restarted = true;
            end_run(&mut s, &daemon, &client, &base, baseline.take(), run_start)?;
            let gone = daemon.restart(Duration::from_secs(60))?;
            s.daemon_restart_ms = gone.as_secs_f64() * 1e3;
            add_last_run(&mut s, &daemon)?;
            run_start = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    end_run(&mut s, &daemon, &client, &base, baseline.take(), run_start)?;
    daemon.stop(Duration::from_secs(60))?;
    add_last_run(&mut s, &daemon)?;
    s.seconds = started.elapsed().as_secs_f64();
    s.held = s.drops.get("nf_crashed").copied().unwrap_or(0);
    s.restart_us_mean /= (s.restarts.max(1)) as f64;
    s.loss_vs_held = if s.lost == 0 {
        0.0
    } else {
        s.lost as f64 / s.held.max(1) as f64
    };
    Ok(s)
}

/// The end of one daemon run: the side chain goes, the slots settle and
/// the daemon's descriptors and memory are compared with `baseline`.
fn end_run(
    s: &mut Soak,
    daemon: &Daemon,
    client: &Client,
    base: &str,
    baseline: Option<Usage>,
    run_start: Instant,
) -> Result<(), String> {
    if let Err(e) = apply(client, base) {
        tracing::warn!("removing the side chain was refused: {e}");
        s.changes_failed += 1;
    }
    // Replaced instances free their slots once they have stopped.
    let deadline = Instant::now() + Duration::from_secs(10);
    let stopping = loop {
        let st: Value = client.get("/v1/stats")?;
        let n = st["nf_slots"]["stopping"].as_u64().unwrap_or(0);
        if n == 0 || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    s.leaked_slots += stopping;
    if let Some(u0) = baseline.filter(|_| run_start.elapsed() > Duration::from_secs(20)) {
        let u = usage(daemon.pid())?;
        s.fd_growth = Some(s.fd_growth.unwrap_or(i64::MIN).max(u.fds - u0.fds));
        let pct = |now: u64, then: u64| (now as f64 - then as f64) * 100.0 / then.max(1) as f64;
        let grew = |kept: Option<f64>, pct: f64| Some(kept.unwrap_or(f64::MIN).max(pct));
        s.rss_growth_pct = grew(s.rss_growth_pct, pct(u.rss_kib, u0.rss_kib));
        s.anon_growth_pct = grew(s.anon_growth_pct, pct(u.anon_kib, u0.anon_kib));
    }
    Ok(())
}

/// Adds the final report of the daemon's last run.
fn add_last_run(s: &mut Soak, daemon: &Daemon) -> Result<(), String> {
    let path = daemon.state_dir().join(sluice_daemon::state::LAST_RUN);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{}: {e} (the daemon kept no final report)", path.display()))?;
    let r: sluice_dataplane::RunReport =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    s.packets_in += r.packets_in;
    s.packets_out += r.packets_out;
    s.leaked_buffers += r.leaked_buffers;
    let mut chosen = 0;
    for (reason, n) in &r.drops {
        *s.drops.entry(reason.clone()).or_default() += n;
        // `<nf>:<reason>`: the NF decided (a firewall rule, a policer).
        if reason.contains(':') {
            chosen += n;
        }
    }
    let through = r.packets_out + chosen;
    s.lost += (r.packets_in + r.packets_originated).saturating_sub(through);
    for nf in &r.nfs {
        let t = &nf.restart_times;
        s.restarts_by_nf
            .entry(nf.name.clone())
            .or_default()
            .merge(t);
        s.restarts += u64::from(t.count);
        s.restarts_over_1ms += u64::from(t.over_1ms);
        s.shell_starts += u64::from(nf.shell_starts);
        s.standby_starts += u64::from(nf.standby_starts);
        s.restart_us_mean += t.total_us;
        s.restart_us_max = s.restart_us_max.max(t.max_us);
    }
    Ok(())
}

/// A running NF process, at random.
fn pick_process(client: &Client, rng: &mut XorShift) -> Result<Option<i32>, String> {
    let all: Vec<Value> = client.get("/v1/instances")?;
    let pids: Vec<i32> = all
        .iter()
        .filter(|i| i["state"] == "running")
        .filter_map(|i| i["pid"].as_i64())
        .filter(|&p| p > 0)
        .map(|p| p as i32)
        .collect();
    Ok((!pids.is_empty()).then(|| pids[(rng.next() % pids.len() as u64) as usize]))
}

/// What the daemon holds.
#[derive(Debug, Clone, Copy)]
struct Usage {
    rss_kib: u64,
    anon_kib: u64,
    fds: i64,
}

/// The daemon's resident and private anonymous memory and its open
/// descriptors.
fn usage(pid: u32) -> Result<Usage, String> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or(format!("no {name} in /proc/{pid}/status"))
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| e.to_string())?
        .count() as i64;
    Ok(Usage {
        rss_kib: field("VmRSS:")?,
        anon_kib: field("RssAnon:")?,
        fds,
    })
}

fn seed_from_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Marsaglia's xorshift64: which NF to kill needs no better randomness.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn print_table(s: &Soak) {
    println!("soak: {:.0} s at {} pps", s.seconds, s.rate_pps);
    println!(
        "  packets in {}  out {}  lost {}  held by killed NFs {}  loss/held {:.3}",
        s.packets_in, s.packets_out, s.lost, s.held, s.loss_vs_held
    );
    println!(
        "  kills {}  restarts {} (mean {:.0} µs, max {:.0} µs, {} over 1 ms)  changes {} ({} refused)",
        s.kills,
        s.restarts,
        s.restart_us_mean,
        s.restart_us_max,
        s.restarts_over_1ms,
        s.changes,
        s.changes_failed
    );
    println!(
        "  shells {}  starts from a shell {}  standby {}  restarts taken over by one {}",
        if s.shells { "on" } else { "off" },
        s.shell_starts,
        if s.standby { "on" } else { "off" },
        s.standby_starts
    );
    let growth = match (s.fd_growth, s.rss_growth_pct, s.anon_growth_pct) {
        (Some(f), Some(r), Some(a)) => {
            format!("fd growth {f}  rss growth {r:.2} % (anonymous {a:.2} %)")
        }
        _ => "fd and rss growth not measured (no daemon run lasted 20 s)".into(),
    };
    println!(
        "  daemon restart {:.0} ms  leaked buffers {}  leaked slots {}  {growth}",
        s.daemon_restart_ms, s.leaked_buffers, s.leaked_slots
    );
    for (nf, t) in &s.restarts_by_nf {
        let mean = t.total_us / f64::from(t.count.max(1));
        println!(
            "  nf {nf:<10} restarts {:>4}  mean {mean:>8.0} µs  max {:>8.0} µs",
            t.count, t.max_us
        );
    }
    for (reason, n) in &s.drops {
        println!("  drop {reason}: {n}");
    }
}
