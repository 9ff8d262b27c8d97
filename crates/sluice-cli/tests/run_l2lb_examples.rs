//! The issue-3 examples (bridge, load balancer, policer) run through the
//! binary with exact accounting and the counters their comments promise.

mod common;
use common::*;

fn run_example(name: &str) -> serde_json::Value {
    let (out, r) = run_json(&root().join("examples").join(name), 2.0);
    assert!(
        out.status.success(),
        "{name}: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert!(r["packets_in"].as_u64().unwrap() > 1000, "{r:#}");
    r
}

fn counter(r: &serde_json::Value, nf_name: &str, c: &str) -> u64 {
    nf(r, nf_name)["counters"][c]
        .as_u64()
        .unwrap_or_else(|| panic!("{nf_name}.{c} missing: {r:#}"))
}

#[test]
fn bridge_example_floods_to_the_trunk() {
    let r = run_example("bridge.yaml");
    let n = nf(&r, "br0")["packets"].as_u64().unwrap();
    assert_eq!(counter(&r, "br0", "learned"), 1, "{r:#}");
    assert_eq!(counter(&r, "br0", "flooded"), n, "{r:#}");
    assert_eq!(counter(&r, "br0", "forwarded"), 0, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["packets_out"], r["packets_in"], "{r:#}");
}

#[test]
fn load_balancer_example_tracks_every_connection() {
    let r = run_example("load_balancer.yaml");
    let n = nf(&r, "lb")["packets"].as_u64().unwrap();
    let new = counter(&r, "lb", "new_connections");
    assert!(new >= 256, "{r:#}");
    assert_eq!(new + counter(&r, "lb", "tracked"), n, "{r:#}");
    assert_eq!(counter(&r, "lb", "other"), 0, "{r:#}");
    assert_eq!(counter(&r, "lb", "untracked"), 0, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    // Requests per backend (extended counters, by backend index): every
    // request is counted once, and web3 (weight 2) gets about twice the
    // share of web1 and web2.
    let ext: Vec<u64> = nf(&r, "lb")["ext_counters"]
        .as_array()
        .unwrap_or_else(|| panic!("no ext_counters: {r:#}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ext.iter().sum::<u64>(), n, "{r:#}");
    assert_eq!(ext.len(), 3, "{r:#}");
    let w3 = ext[2] as f64 / n as f64;
    assert!((0.35..0.65).contains(&w3), "web3 share {w3}: {r:#}");
}

#[test]
fn policer_example_colours_and_drops_red() {
    let r = run_example("policer.yaml");
    for c in ["green", "yellow", "red"] {
        assert!(counter(&r, "police", c) > 0, "{c}: {r:#}");
    }
    assert_eq!(
        r["drops"]["police:red"].as_u64().unwrap(),
        counter(&r, "police", "red"),
        "{r:#}"
    );
    assert_eq!(
        counter(&r, "police", "marked"),
        counter(&r, "police", "yellow")
    );
}
