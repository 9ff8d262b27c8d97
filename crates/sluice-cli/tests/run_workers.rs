//! `settings.workers > 1`: flows are sharded over workers that each run
//! their own ports and inline NF instances; the merged report must equal
//! the single-worker run of the same traffic, packet for packet.

mod common;
use common::*;

fn spec(workers: u32, isolation: &str) -> String {
    format!(
        "settings:\n  workers: {workers}\nports:\n  - {{ name: gen, kind: generator, flows: 100, protocol: tcp, packets_per_flow: 10, count: 200000, dst_ports: \"1-1000\" }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - name: acl\n    type: acl\n    isolation: {isolation}\n    config:\n      rules:\n        - {{ action: drop, dst_port: \"1-500\" }}\n  - {{ name: mon, type: monitor, isolation: {isolation} }}\nchains:\n  - {{ name: c, from: gen, nfs: [acl, mon], to: out }}\n"
    )
}

#[test]
fn two_workers_forward_exactly_what_one_worker_does() {
    let run = |workers: u32| {
        let (_d, path) = spec_file(&spec(workers, "inline"));
        let (out, r) = run_json(&path, 30.0);
        assert!(
            out.status.success(),
            "workers {workers}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_accounted(&r);
        r
    };
    let one = run(1);
    let two = run(2);
    assert_eq!(one["packets_in"], 200000);
    for k in ["packets_in", "packets_out", "drops", "bytes_out"] {
        assert_eq!(one[k], two[k], "{k}: {two:#}");
    }
    let denied = two["drops"]["acl:denied"].as_u64().unwrap();
    assert!(denied > 0 && denied < 200000, "{two:#}");
    // Every TCP connection (20 000 of them) is created and ended once.
    for k in ["created", "ended"] {
        assert_eq!(two["flows"][k], 20000, "{two:#}");
    }
    assert_eq!(two["flows"]["live"], 0);
    for name in ["acl", "mon"] {
        assert_eq!(
            nf(&one, name)["packets"],
            nf(&two, name)["packets"],
            "{name}"
        );
        assert_eq!(
            nf(&one, name)["counters"]["packets"],
            nf(&two, name)["counters"]["packets"]
        );
    }
    // Both workers carried traffic, and their counters add up.
    let per = nf(&two, "mon")["counters_by_worker"].as_array().unwrap();
    assert_eq!(per.len(), 2);
    let packets: Vec<u64> = per.iter().map(|c| c["packets"].as_u64().unwrap()).collect();
    assert!(packets.iter().all(|&p| p > 0), "{packets:?}");
    assert_eq!(
        packets.iter().sum::<u64>(),
        nf(&two, "mon")["counters"]["packets"].as_u64().unwrap()
    );
    assert!(nf(&one, "mon").get("counters_by_worker").is_none());
    // Per-flow order holds (a flow never leaves its worker) and the sink
    // measured every packet's latency.
    assert_eq!(two["ports"][1]["reordered"], 0);
    assert_eq!(two["latency_ns"]["count"], two["packets_out"]);
    assert_eq!(two["leaked_buffers"], 0);
}

#[test]
fn workers_with_a_process_nf_are_refused_before_anything_starts() {
    let (_d, path) = spec_file(&spec(2, "process"));
    let (out, _) = run_json(&path, 5.0);
    assert_eq!(out.status.code(), Some(2), "a spec error exits 2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nfs[0].isolation: NF acl runs as a process, but settings.workers = 2"),
        "{err}"
    );
}
