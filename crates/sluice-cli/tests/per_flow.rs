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

/// A per-flow instance that crashes costs only its own flow's packets it
/// held: the buffers come back, the other instances keep serving their
/// flows, and the crashed one restarts and serves later flows.
#[test]
fn a_crashed_per_flow_instance_costs_only_its_own_flow() {
    let count = 400_000u64;
    let spec = format!(
        "settings:\n  flow_table: {{ close_timeout_ms: 0 }}\n  restart: {{ policy: always, max_restarts: 10, backoff_ms: 0 }}\nports:\n  - {{ name: gen, kind: generator, flows: 4, protocol: tcp, packets_per_flow: 200000, size: 64, rate_pps: 200000, count: {count} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: mon, type: monitor, isolation: process, replicas: 8, steer: per_flow }}\nchains:\n  - {{ name: main, from: gen, nfs: [mon], to: out }}\n"
    );
    let (_d, path) = spec_file(&spec);
    let child = start_run(&path);
    // Four long connections take mon … mon.3, one each.
    let victim = wait_for(child.id(), "nf:mon.1", 1);
    std::thread::sleep(std::time::Duration::from_millis(400));
    kill_9(victim[0]);
    let (out, r) = finish_json(child);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(nf(&r, "mon.1")["restarts"], 1, "{r:#}");
    assert!(
        nf(&r, "mon.1")["packets"].as_u64().unwrap() > 0,
        "it served a flow: {r:#}"
    );
    assert_eq!(
        nf(&r, "mon.4")["packets"],
        0,
        "a free instance took nothing: {r:#}"
    );
    for other in ["mon", "mon.2", "mon.3"] {
        assert_eq!(nf(&r, other)["restarts"], 0, "{r:#}");
    }
    // A monitor holds at most the batch it took in; nothing else is lost.
    let crashed = r["drops"]["nf_crashed"].as_u64().unwrap_or(0);
    assert!(crashed <= 32, "{crashed}: {r:#}");
    assert_eq!(r["drops_total"].as_u64(), Some(crashed), "{r:#}");
    assert_eq!(r["packets_out"].as_u64(), Some(count - crashed), "{r:#}");
}

/// `reset: refork`: each instance is discarded when its connection ends
/// and a fresh process is forked for the next, so even a type without a
/// reset hook (a per-flow policer, whose buckets would otherwise carry
/// over) serves one connection per instance. Its packets queue in the
/// fresh instance's ring while it starts, and a connection that finds
/// every instance still being forked (a loaded host forks slowly) waits
/// for one (`fallback: wait`): nothing is lost.
#[test]
fn refork_gives_every_connection_a_fresh_process_even_for_a_type_without_a_reset_hook() {
    let count = 4_000u64;
    let spec = |reset: &str| {
        format!(
            "settings:\n  flow_table: {{ idle_timeout_ms: 50, close_timeout_ms: 2 }}\nports:\n  - {{ name: gen, kind: generator, flows: 2, protocol: tcp, packets_per_flow: 20, size: 64, rate_pps: 4000, count: {count} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: pol, type: policer, isolation: process, replicas: 32, steer: per_flow, fallback: wait, {reset} config: {{ cir: 1gbit, cbs: 1mb, key: flow }} }}\nchains:\n  - {{ name: main, from: gen, nfs: [pol], to: out }}\n"
        )
    };
    // The hook is refused for a type without one, with the way out named.
    let (_d, path) = spec_file(&spec(""));
    let out = sluice().arg("run").arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("reset: refork"),
        "{err}"
    );

    let (_d, path) = spec_file(&spec("reset: refork,"));
    let (out, r) = run_json(&path, 10.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["packets_out"], count, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    let rows: Vec<&serde_json::Value> = r["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["name"].as_str().unwrap().starts_with("pol"))
        .collect();
    let reforks: u64 = rows.iter().map(|n| n["reforks"].as_u64().unwrap()).sum();
    let restarts: u64 = rows.iter().map(|n| n["restarts"].as_u64().unwrap()).sum();
    // 200 connections, each on an instance of its own, reforked when it
    // ended; the last ones may still be serving or forking when the run
    // stops (a loaded host forks slowly), and those are not reforked.
    assert!((100..=200).contains(&reforks), "{reforks}: {r:#}");
    assert_eq!(restarts, 0, "a refork is no crash: {r:#}");
}
