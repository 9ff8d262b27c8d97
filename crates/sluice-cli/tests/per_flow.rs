//! `steer: per_flow` with process NFs: each TCP connection gets a monitor
//! process of its own from a pool of 32, reset by an event in its ring
//! when the connection ends and then reused by a later one. Nothing is
//! lost, the reset events are not mistaken for flow ends, and the pool's
//! processes each served many connections.

mod common;
use common::*;

const COUNT: u64 = 20_000;

#[test]
fn process_instances_are_reset_and_reused_flow_after_flow() {
    let spec = format!(
        "settings:\n  flow_table: {{ idle_timeout_ms: 50, close_timeout_ms: 2 }}\nports:\n  - {{ name: gen, kind: generator, flows: 2, protocol: tcp, packets_per_flow: 20, size: 64, rate_pps: 20000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: mon, type: monitor, isolation: process, replicas: 32, steer: per_flow }}\nchains:\n  - {{ name: main, from: gen, nfs: [mon], to: out }}\n"
    );
    let (_d, path) = spec_file(&spec);
    let (out, r) = run_json(&path, 10.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["packets_out"], COUNT, "{r:#}");
    assert_eq!(r["nf_faults"]["invalid_events"], 0, "{r:#}");
    let rows: Vec<&serde_json::Value> = r["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["name"].as_str().unwrap().starts_with("mon"))
        .collect();
    assert_eq!(rows.len(), 32, "{r:#}");
    // 1,000 connections; each ended on the instance that served it.
    let ended: u64 = rows
        .iter()
        .map(|n| n["counters"]["flows_ended"].as_u64().unwrap_or(0))
        .sum();
    assert!(ended >= 990, "{ended}: {r:#}");
    let most = rows
        .iter()
        .map(|n| n["counters"]["flows_ended"].as_u64().unwrap_or(0))
        .max()
        .unwrap();
    assert!(most > 10, "instances were reused: {r:#}");
}
