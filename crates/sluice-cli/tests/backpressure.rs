//! `settings.backpressure`: what happens at a chain's entry when an NF of
//! the chain cannot keep up (`sluice_dataplane::backpressure`). Under
//! `hold` a port is read only as fast as all its chains take packets, so a
//! slow chain stops a fast one sharing its port; under `drop` and `red`
//! the port is read at full speed and the slow chain's excess is dropped at
//! its entry, counted as `backpressure`, before any NF worked on it.

mod common;
use common::*;

/// One generator feeding two chains: a forwarder and a costly burner, each
/// weighted so both get half the NFs' core whatever the other does.
fn spec(backpressure: &str) -> String {
    format!(
        "settings:
  backpressure: {backpressure}
ports:
  - {{ name: gen, kind: generator, flows: 64, protocol: udp, size: 64, dst_ports: 1000-1001 }}
  - {{ name: out, kind: sink }}
nfs:
  - {{ name: fast, type: forwarder, isolation: process, cpu_weight: 100 }}
  - {{ name: slow, type: cycle_burner, config: {{ iterations_per_packet: 20000 }}, isolation: process, cpu_weight: 100 }}
chains:
  - {{ name: f, from: gen, match: {{ proto: udp, dst_port: 1000 }}, nfs: [fast], to: out }}
  - {{ name: s, from: gen, match: {{ proto: udp, dst_port: 1001 }}, nfs: [slow], to: out }}
"
    )
}

fn run(backpressure: &str) -> serde_json::Value {
    run_spec(&spec(backpressure))
}

/// Runs `text` for 2 s; its report, checked to account for every packet.
fn run_spec(text: &str) -> serde_json::Value {
    let (_d, path) = spec_file(text);
    let (out, r) = run_json(&path, 2.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    r
}

fn packets(r: &serde_json::Value, name: &str) -> u64 {
    nf(r, name)["packets"].as_u64().unwrap()
}

#[test]
fn dropping_at_the_entry_keeps_a_ports_other_chains_flowing() {
    let hold = run("{ mode: hold }");
    assert_eq!(hold["drops_total"], 0, "hold loses nothing: {hold:#}");
    let drop = run("{ mode: drop, watermark_pct: 75 }");
    let shed = drop["drops"]["backpressure"].as_u64().unwrap_or(0);
    assert!(shed > 0, "{drop:#}");
    assert_eq!(
        drop["drops_total"].as_u64(),
        Some(shed),
        "only at the entry: {drop:#}"
    );
    assert_eq!(
        drop["wasted_visits"], 0,
        "no work was spent on them: {drop:#}"
    );
    // Under hold the forwarder waits for the burner (27-50× fewer packets
    // measured); under drop it runs at its own pace.
    let (held, freed) = (packets(&hold, "fast"), packets(&drop, "fast"));
    assert!(
        freed > 3 * held,
        "fast chain: {held} under hold, {freed} under drop"
    );
}

#[test]
fn red_sheds_load_early_and_counts_it() {
    let r = run("{ mode: red, red_min_pct: 10, watermark_pct: 90 }");
    assert!(
        r["drops"]["backpressure"].as_u64().unwrap_or(0) > 0,
        "{r:#}"
    );
    assert!(packets(&r, "slow") > 0 && packets(&r, "fast") > 0, "{r:#}");
}

#[test]
fn bad_backpressure_settings_are_spec_errors() {
    for (bad, field) in [
        ("{ mode: lossy }", "settings.backpressure.mode"),
        (
            "{ mode: drop, watermark_pct: 0 }",
            "settings.backpressure.watermark_pct",
        ),
        (
            "{ mode: drop, watermark_pct: 101 }",
            "settings.backpressure.watermark_pct",
        ),
        (
            "{ mode: red, red_min_pct: 80, watermark_pct: 60 }",
            "settings.backpressure.red_min_pct",
        ),
        ("{ mode: red, high: 3 }", "high"),
    ] {
        let (_d, path) = spec_file(&spec(bad));
        let out = sluice().args(["validate"]).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field), "{bad}: {err}");
    }
}

/// The mode changes on a running daemon, without restarting an NF.
#[test]
fn the_mode_changes_live() {
    use std::time::{Duration, Instant};
    let d = Daemon::start();
    d.apply(&spec("{ mode: hold }"));
    let pids = || {
        let mut p = d.running_pids(2);
        p.sort_unstable();
        p
    };
    let before = pids();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.stats()["drops"]["backpressure"].as_u64().unwrap_or(0), 0);
    d.apply(&spec("{ mode: drop }"));
    let t = Instant::now();
    while d.stats()["drops"]["backpressure"].as_u64().unwrap_or(0) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no backpressure drops"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(pids(), before, "no NF restarted");
}

/// Many chains on one port, each entering its own process NF, one of them
/// slow: under `hold` the port is read within the room of all of their
/// rings, which the worker looks at only when a lower bound it keeps
/// (`worker/room_floor.rs`) falls under a batch. A bound that were too
/// high shows as `ring_full` drops (a worker that trusted a stale bound
/// dropped 32 k of 437 k packets here).
#[test]
fn hold_loses_nothing_across_many_chains_on_one_port() {
    const CHAINS: u32 = 16;
    let mut s = format!(
        "settings:
  backpressure: {{ mode: hold }}
ports:
  - {{ name: gen, kind: generator, flows: 512, protocol: udp, size: 64, dst_ports: 1000-{last} }}
  - {{ name: out, kind: sink }}
nfs:
  - {{ name: slow, type: cycle_burner, config: {{ iterations_per_packet: 200000 }}, isolation: process }}
",
        last = 1000 + CHAINS
    );
    for i in 0..CHAINS {
        s += &format!("  - {{ name: f{i}, type: forwarder, isolation: process }}\n");
    }
    s += &format!(
        "chains:\n  - {{ name: s, from: gen, match: {{ proto: udp, dst_port: {} }}, nfs: [slow], to: out }}\n",
        1000 + CHAINS
    );
    for i in 0..CHAINS {
        s += &format!(
            "  - {{ name: c{i}, from: gen, match: {{ proto: udp, dst_port: {} }}, nfs: [f{i}], to: out }}\n",
            1000 + i
        );
    }
    let r = run_spec(&s);
    assert_eq!(r["drops_total"], 0, "hold loses nothing: {:#}", r["drops"]);
    for i in 0..CHAINS {
        assert!(packets(&r, &format!("f{i}")) > 0, "f{i}: {r:#}");
    }
    assert!(packets(&r, "slow") > 0);
}
