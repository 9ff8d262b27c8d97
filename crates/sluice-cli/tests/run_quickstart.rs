//! The quickstart spec runs through a process chain with exact accounting.

mod common;
use common::*;

#[test]
fn quickstart_runs_a_process_chain_with_no_leaks() {
    let (out, r) = run_json(&root().join("examples/quickstart.yaml"), 2.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(r["packets_out"].as_u64().unwrap() > 10_000, "{r:#}");
    assert_accounted(&r);
    for name in ["acl", "mon"] {
        let n = nf(&r, name);
        assert_eq!(n["isolation"], "process");
        assert_eq!(n["restarts"], 0);
        assert!(n["packets"].as_u64().unwrap() > 0);
    }
    // The ACL denies the 10.0.240.0/20 clients and DNS; every denial is
    // counted, and what passes the ACL is exactly what reaches the monitor.
    let denied = r["drops"]["acl:denied"].as_u64().unwrap_or(0);
    assert!(denied > 0, "{r:#}");
    assert_eq!(
        nf(&r, "acl")["packets"].as_u64().unwrap() - denied,
        nf(&r, "mon")["packets"].as_u64().unwrap()
    );
    // Every flow ends by shutdown, and the end reaches the process NFs.
    assert_eq!(r["flows"]["ended"], r["flows"]["created"], "{r:#}");
    assert_eq!(r["flows"]["live"], 0, "{r:#}");
    assert_eq!(
        nf(&r, "mon")["counters"]["flows_ended"],
        r["flows"]["ended"],
        "{r:#}"
    );
    assert_eq!(nf(&r, "mon")["counters"]["flows_active"], 0, "{r:#}");
    for k in ["mpps", "gbps"] {
        assert!(r[k].as_f64().unwrap() > 0.0);
    }
    for k in ["p50", "p99", "p999"] {
        assert!(r["latency_ns"][k].as_u64().is_some());
    }
}

#[test]
fn inline_and_process_isolation_forward_the_same_packets() {
    let make = |iso: &str| {
        format!(
            "ports:\n  - {{ name: gen, kind: generator, flows: 16, protocol: udp, size: 128, count: 20000, rate_pps: 200000 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: a, type: forwarder, isolation: {iso} }}\n  - {{ name: b, type: monitor, isolation: {iso} }}\nchains:\n  - {{ name: c, from: gen, nfs: [a, b], to: out }}\n"
        )
    };
    for iso in ["inline", "process"] {
        let (_d, path) = spec_file(&make(iso));
        let (out, r) = run_json(&path, 20.0);
        assert!(
            out.status.success(),
            "{iso}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(r["packets_in"], 20000, "{iso}");
        assert_eq!(r["packets_out"], 20000, "{iso}: {r:#}");
        assert_eq!(r["ports"][1]["reordered"], 0, "{iso}");
        assert_eq!(nf(&r, "b")["counters"]["packets"], 20000, "{iso}");
        assert_accounted(&r);
    }
}
