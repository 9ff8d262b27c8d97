//! `settings.workers > 1`: flows are sharded over workers that each run
//! their own ports and NF instances (inline, or processes on the worker's
//! core); the merged report must equal the single-worker run of the same
//! traffic, packet for packet.

mod common;
use common::*;

fn spec(workers: u32, isolation: &str) -> String {
    format!(
        "settings:\n  workers: {workers}\nports:\n  - {{ name: gen, kind: generator, flows: 100, protocol: tcp, packets_per_flow: 10, count: 200000, dst_ports: \"1-1000\" }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - name: acl\n    type: acl\n    isolation: {isolation}\n    config:\n      rules:\n        - {{ action: drop, dst_port: \"1-500\" }}\n  - {{ name: mon, type: monitor, isolation: {isolation} }}\nchains:\n  - {{ name: c, from: gen, nfs: [acl, mon], to: out }}\n"
    )
}

fn run(workers: u32, isolation: &str) -> serde_json::Value {
    let (_d, path) = spec_file(&spec(workers, isolation));
    let (out, r) = run_json(&path, 30.0);
    assert!(
        out.status.success(),
        "workers {workers}, {isolation}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    r
}

/// The two runs carried the same packets through the same NFs, and the
/// sharded one spread them over both workers without reordering a flow.
fn assert_same_traffic(one: &serde_json::Value, two: &serde_json::Value) {
    assert_eq!(one["packets_in"], 200000);
    for k in ["packets_in", "packets_out", "drops", "bytes_out"] {
        assert_eq!(one[k], two[k], "{k}: {two:#}");
    }
    for name in ["acl", "mon"] {
        assert_eq!(nf(one, name)["packets"], nf(two, name)["packets"], "{name}");
        assert_eq!(
            nf(one, name)["counters"]["packets"],
            nf(two, name)["counters"]["packets"]
        );
    }
    let per = nf(two, "mon")["counters_by_worker"].as_array().unwrap();
    assert_eq!(per.len(), 2);
    let packets: Vec<u64> = per.iter().map(|c| c["packets"].as_u64().unwrap()).collect();
    assert!(packets.iter().all(|&p| p > 0), "{packets:?}");
    assert_eq!(two["ports"][1]["reordered"], 0);
    assert_eq!(two["latency_ns"]["count"], two["packets_out"]);
    assert_eq!(two["leaked_buffers"], 0);
}

#[test]
fn two_workers_forward_exactly_what_one_worker_does() {
    let one = run(1, "inline");
    let two = run(2, "inline");
    assert_same_traffic(&one, &two);
    let denied = two["drops"]["acl:denied"].as_u64().unwrap();
    assert!(denied > 0 && denied < 200000, "{two:#}");
    // Every TCP connection (20 000 of them) is created and ended once.
    for k in ["created", "ended"] {
        assert_eq!(two["flows"][k], 20000, "{two:#}");
    }
    assert_eq!(two["flows"]["live"], 0);
    // Both workers' counters add up to the merged one.
    let per = nf(&two, "mon")["counters_by_worker"].as_array().unwrap();
    let sum: u64 = per.iter().map(|c| c["packets"].as_u64().unwrap()).sum();
    assert_eq!(
        sum,
        nf(&two, "mon")["counters"]["packets"].as_u64().unwrap()
    );
    assert!(nf(&one, "mon").get("counters_by_worker").is_none());
}

#[test]
fn two_workers_with_process_nfs_forward_exactly_what_one_worker_does() {
    // Each worker forks its own instance of every process NF from its own
    // template; the result must not differ from one worker running the
    // same NFs inline.
    let one = run(1, "inline");
    let two = run(2, "process");
    assert_same_traffic(&one, &two);
    for name in ["acl", "mon"] {
        let n = nf(&two, name);
        assert_eq!(n["isolation"], "process");
        assert_eq!(n["restarts"], 0, "{n:#}");
        // Both instances started (one start-up time each).
        assert_eq!(n["startup_us"].as_array().unwrap().len(), 2, "{n:#}");
    }
    assert_eq!(two["flows"]["created"], 20000);
    assert_eq!(two["flows"]["live"], 0);
}
