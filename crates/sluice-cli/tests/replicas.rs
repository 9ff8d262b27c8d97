//! Process NFs with replicas, scaled live: while a generator offers
//! traffic to a running daemon (TCP connections of 200 packets, so new
//! flows keep arriving: `shortest_queue` places only new flows), an NF of two process replicas grows to
//! three and shrinks back to two. The replicas that stay keep their
//! processes, the new one takes a share of the flows, nothing is lost,
//! reordered or duplicated, and the API shows each replica's share.

mod common;
use common::*;

use std::time::Duration;

const COUNT: u64 = 1_200_000;

fn spec(replicas: u32, steer: &str) -> String {
    format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: 256, protocol: tcp, packets_per_flow: 200, size: 64, rate_pps: 1000000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: mon, type: monitor, isolation: process, replicas: {replicas}, steer: {steer} }}\n  - {{ name: fw, type: forwarder, isolation: process }}\nchains:\n  - {{ name: main, from: gen, nfs: [mon, fw], to: out }}\n"
    )
}

fn pid_of(d: &Daemon, nf: &str) -> Option<u64> {
    d.instances()
        .iter()
        .find(|i| i["nf"] == nf)
        .and_then(|i| i["pid"].as_u64())
        .filter(|&p| p > 0)
}

fn scale_live(steer: &str) {
    let d = Daemon::start();
    d.apply(&spec(2, steer));

    d.wait_packets_in(200_000);
    let before = (pid_of(&d, "mon"), pid_of(&d, "mon.1"));
    assert!(
        before.0.is_some() && before.1.is_some(),
        "{:#?}",
        d.instances()
    );
    let r = d.apply(&spec(3, steer));
    assert_eq!(
        r["diff"]["nfs"]["added"],
        serde_json::json!(["mon.2"]),
        "{r:#}"
    );
    d.wait_packets_in(600_000);
    assert_eq!(
        (pid_of(&d, "mon"), pid_of(&d, "mon.1")),
        before,
        "kept running"
    );
    let newcomer = nf(&d.stats(), "mon.2")["packets"].as_u64().unwrap_or(0);
    assert!(newcomer > 0, "the new replica took flows");
    let r = d.apply(&spec(2, steer));
    assert_eq!(
        r["diff"]["nfs"]["removed"],
        serde_json::json!(["mon.2"]),
        "{r:#}"
    );
    let s = d.wait_done(COUNT);
    assert_eq!(s["packets_in"], COUNT, "{s:#}");
    assert_eq!(s["drops_total"], 0, "no packet dropped: {s:#}");
    assert_eq!(s["packets_out"], COUNT, "every packet left: {s:#}");
    assert_eq!(
        port(&s, "out")["reordered"],
        0,
        "per-flow order kept: {s:#}"
    );
    assert_eq!(port(&s, "out")["duplicates"], 0, "{s:#}");
    assert_eq!(
        (pid_of(&d, "mon"), pid_of(&d, "mon.1")),
        before,
        "kept running"
    );
    // The API's view of the NF: the sum, and each replica's share.
    let (ok, v, err) = d.cli(&["get", "nf", "mon", "-o", "json"]);
    assert!(ok, "{err}");
    let shares: Vec<u64> = v["replicas"]
        .as_array()
        .unwrap_or_else(|| panic!("{v:#}"))
        .iter()
        .map(|r| r["packets"].as_u64().unwrap())
        .collect();
    assert_eq!(shares.len(), 2, "{v:#}");
    assert!(shares.iter().all(|&p| p > 0), "{v:#}");
    assert_eq!(
        v["packets"].as_u64(),
        Some(shares.iter().sum::<u64>()),
        "{v:#}"
    );
    assert_eq!(v["instances"].as_array().map(Vec::len), Some(2), "{v:#}");
}

#[test]
fn hash_replicas_scale_out_and_in_under_load_without_loss() {
    scale_live("hash");
}

#[test]
fn shortest_queue_replicas_scale_out_and_in_under_load_without_loss() {
    scale_live("shortest_queue");
}

/// A replica that crashes costs only its own flows' packets it held: the
/// other replica keeps its process and its flows, the crashed one comes
/// back under its own name (`nf:mon.1`), and nothing else is dropped.
#[test]
fn a_crashed_replica_costs_only_what_it_held() {
    let spec = chain_spec(
        200_000,
        "  - { name: mon, type: monitor, isolation: process, replicas: 2 }\n",
        "mon",
        "policy: always, max_restarts: 10, backoff_ms: 0",
    )
    .replace("rate_pps: 200000 }", "rate_pps: 200000, count: 400000 }");
    let (_d, path) = spec_file(&spec);
    let child = start_run(&path);
    // Each replica names its process after itself: one process each.
    wait_for(child.id(), "nf:mon", 1);
    let victim = wait_for(child.id(), "nf:mon.1", 1);
    std::thread::sleep(Duration::from_millis(400));
    kill_9(victim[0]);
    let (out, r) = finish_json(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(nf(&r, "mon.1")["restarts"], 1, "{r:#}");
    assert_eq!(nf(&r, "mon")["restarts"], 0, "{r:#}");
    // A monitor holds at most the batch it took in.
    let crashed = r["drops"]["nf_crashed"].as_u64().unwrap_or(0);
    assert!(crashed <= 32, "{crashed}: {r:#}");
    assert_eq!(r["drops_total"].as_u64(), Some(crashed), "{r:#}");
    assert_eq!(r["packets_out"].as_u64(), Some(400_000 - crashed), "{r:#}");
}
