//! A `per_flow` NF's pool as the daemon shows it: `GET /v1/nfs/{name}`
//! gives `pool` (instances, busy, idle, flows) and `/metrics` gives
//! `sluice_nf_pool_instances{nf, state}`; four long connections over a
//! pool of eight keep four instances busy.

mod daemon_util;

use daemon_util::Daemon;

#[test]
fn the_pool_shows_its_busy_and_idle_instances() {
    let d = Daemon::start();
    let text = "ports:\n  - { name: gen, kind: generator, flows: 4, protocol: tcp, packets_per_flow: 100000000, size: 64, rate_pps: 20000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: mon, type: monitor, isolation: inline, replicas: 8, steer: per_flow }\nchains:\n  - { name: main, from: gen, nfs: [mon], to: out }\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, text).unwrap();
    d.apply(text, &path);
    let t = std::time::Instant::now();
    let pool = loop {
        let v = d.get("/v1/nfs/mon");
        if v["pool"]["busy"] == 4 {
            break v["pool"].clone();
        }
        assert!(t.elapsed().as_secs() < 20, "{v:#}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(
        pool,
        serde_json::json!({ "instances": 8, "busy": 4, "idle": 4, "flows": 4 })
    );
    let m = d.req("GET", "/metrics", None).text();
    for line in [
        "sluice_nf_pool_instances{nf=\"mon\",state=\"busy\"} 4",
        "sluice_nf_pool_instances{nf=\"mon\",state=\"idle\"} 4",
    ] {
        assert!(m.contains(line), "{line} in:\n{m}");
    }
}

/// A pool with bounds follows its load: eight long connections on a pool
/// of two grow it (the refused flows get instances at the next look), and
/// when the traffic is gone it shrinks back to its least.
#[test]
fn a_bounded_pool_grows_with_its_flows_and_shrinks_when_they_are_gone() {
    let d = Daemon::start();
    let text = "settings:\n  flow_table: { idle_timeout_ms: 200 }\nports:\n  - { name: gen, kind: generator, flows: 8, protocol: tcp, packets_per_flow: 100000000, size: 64, rate_pps: 40000, count: 200000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: mon, type: monitor, isolation: inline, steer: per_flow, pool: { min: 2, max: 32 } }\nchains:\n  - { name: main, from: gen, nfs: [mon], to: out }\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, text).unwrap();
    d.apply(text, &path);
    let wait = |what: &str, ok: &dyn Fn(&serde_json::Value) -> bool| {
        let t = std::time::Instant::now();
        loop {
            let v = d.get("/v1/nfs/mon");
            if ok(&v) {
                return v;
            }
            assert!(t.elapsed().as_secs() < 30, "{what}: {v:#}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // Refused flows double it (2, 4, 8, 16); two seconds on, it settles
    // at 8 busy and a quarter of that idle for the next arrivals.
    let grown = wait("grows", &|v| v["pool"]["instances"] == 10);
    assert_eq!(grown["pool"]["busy"], 8, "{grown:#}");
    assert_eq!(grown["definition"]["replicas"], 10, "{grown:#}");
    // The generator stops at 200,000 packets; the connections idle out.
    let shrunk = wait("shrinks", &|v| v["pool"]["instances"] == 2);
    assert_eq!(shrunk["pool"]["busy"], 0, "{shrunk:#}");
    assert_eq!(
        shrunk["definition"]["pool"],
        serde_json::json!({ "min": 2, "max": 32 })
    );
}
