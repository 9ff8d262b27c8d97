//! `sluice rollout` against a running daemon under load: a process NF of
//! two replicas takes a new config while a generator offers 0.5 Mpps of
//! TCP connections. The new version starts beside the old one, new
//! connections go to it, the live ones finish on the old one (whose
//! processes keep running meanwhile), and the old version retires by
//! itself: nothing is lost, reordered or duplicated, and nothing drains.
//! Then the bad requests: each refused with a clear error, nothing
//! changed.

mod common;
use common::*;

use std::time::{Duration, Instant};

const COUNT: u64 = 1_500_000;

fn spec() -> String {
    format!(
        "settings:\n  flow_table: {{ idle_timeout_ms: 300 }}\nports:\n  - {{ name: gen, kind: generator, flows: 128, protocol: tcp, packets_per_flow: 300, size: 64, rate_pps: 500000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: acl, type: acl, isolation: process, replicas: 2, config: {{ default: accept }} }}\n  - {{ name: fwd, type: forwarder, isolation: process }}\nchains:\n  - {{ name: main, from: gen, nfs: [acl, fwd], to: out }}\n"
    )
}

fn pids(d: &Daemon, names: &[&str]) -> Vec<Option<u64>> {
    let inst = d.instances();
    names
        .iter()
        .map(|n| {
            inst.iter()
                .find(|i| i["nf"] == *n)
                .and_then(|i| i["pid"].as_u64())
                .filter(|&p| p > 0)
        })
        .collect()
}

fn packets(d: &Daemon, row: &str) -> u64 {
    nf(&d.stats(), row)["packets"].as_u64().unwrap_or(0)
}

#[test]
fn a_rollout_under_load_moves_new_flows_to_the_new_version_and_loses_nothing() {
    let d = Daemon::start();
    d.apply(&spec());
    d.wait_packets_in(200_000);
    let old = pids(&d, &["acl", "acl.1"]);
    assert!(old.iter().all(Option::is_some), "{:#?}", d.instances());
    let config = d.dir.path().join("acl-v2.yaml");
    std::fs::write(
        &config,
        "default: accept\nrules:\n  - { action: drop, proto: udp, dst_port: 9 }\n",
    )
    .unwrap();
    let (ok, v, err) = d.cli(&[
        "rollout",
        "acl",
        "--config",
        config.to_str().unwrap(),
        "--timeout",
        "60",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    assert_eq!(v["generation"], 1, "{v:#}");
    assert_eq!(v["draining_generation"], 0, "{v:#}");
    assert_eq!(
        v["diff"]["nfs"]["added"],
        serde_json::json!(["acl@1", "acl@1.1"]),
        "{v:#}"
    );
    assert!(
        v["held_flows"].as_u64().unwrap() > 0,
        "live flows are kept: {v:#}"
    );
    let old_at_start = packets(&d, "acl") + packets(&d, "acl.1");
    // While it drains: the old version keeps its processes and serves its
    // flows; then it retires by itself once they have ended.
    let mut old_seen = old_at_start;
    let t = Instant::now();
    loop {
        let (ok, view, err) = d.cli(&["get", "nf", "acl", "-o", "json"]);
        assert!(ok, "{err}");
        let Some(r) = view.get("rollout") else {
            assert_eq!(view["definition"]["generation"], 1, "{view:#}");
            assert!(view["definition"].get("draining").is_none(), "{view:#}");
            break;
        };
        assert_eq!(r["draining_generation"], 0, "{view:#}");
        let rows = view["replicas"].as_array().unwrap();
        let old: u64 = rows
            .iter()
            .filter(|r| r["name"] == "acl" || r["name"] == "acl.1")
            .map(|r| r["packets"].as_u64().unwrap())
            .sum();
        old_seen = old_seen.max(old);
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "did not retire: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        old_seen > old_at_start,
        "the old version served its flows after the rollout began"
    );
    assert_eq!(pids(&d, &["acl", "acl.1"]), [None, None], "retired");
    assert!(pids(&d, &["acl@1", "acl@1.1"]).iter().all(Option::is_some));
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
    let new_total = packets(&d, "acl@1") + packets(&d, "acl@1.1");
    assert!(new_total > 0, "new flows reached the new version: {s:#}");
}

#[test]
fn bad_rollouts_are_refused_and_change_nothing() {
    let d = Daemon::start();
    d.apply(&spec().replace("count: 1500000", "count: 100"));
    let dir = d.dir.path();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let same = write("same.yaml", "default: accept\n");
    let bad = write("bad.yaml", "default: maybe\n");
    let good = write("good.yaml", "default: drop\n");
    let version = |d: &Daemon| {
        let (_, v, _) = d.cli(&["get", "nfs", "-o", "json"]);
        v.as_array().map(|a| {
            a.iter()
                .map(|n| n["definition"].clone())
                .collect::<Vec<_>>()
        })
    };
    let before = version(&d);
    for (nf, file, says) in [
        ("nope", &good, "no nf named nope"),
        ("acl", &same, "already runs this config"),
        ("acl", &bad, "nfs[0].config"),
    ] {
        let (ok, _, err) = d.cli(&["rollout", nf, "--config", file]);
        assert!(!ok, "{nf} {file}");
        assert!(err.contains(says), "{err}");
        assert_eq!(version(&d), before, "nothing changed: {err}");
    }
    let (ok, _, err) = d.cli(&["rollout", "acl", "--config", &good, "--timeout", "100000"]);
    assert!(!ok && err.contains("timeout_s"), "{err}");
}
