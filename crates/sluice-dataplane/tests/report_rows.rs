//! A report's NF and chain rows carry every name, key and list: the
//! worker hands back numbers only and whoever asked names them from the
//! plan (`report::nf::RowLists`, `report_merge::Unnamed`), with one
//! worker and with two (whose rows are merged by name).

use std::time::Duration;

use sluice_dataplane::{run, RunOptions, RunReport};
use sluice_nf::NfType;

static REGISTRY: &[NfType] = &[sluice_nfs::acl::TYPE, sluice_nfs::forwarder::TYPE];

/// UDP through an ACL that denies UDP (chain `a`), TCP through a
/// forwarder (chain `b`); chain `idle` matches nothing it is offered.
fn spec(workers: u32) -> String {
    format!(
        "settings: {{ workers: {workers} }}
ports:
  - {{ name: gen_udp, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: 50000 }}
  - {{ name: gen_tcp, kind: generator, flows: 64, protocol: tcp, size: 64, rate_pps: 50000 }}
  - {{ name: out, kind: sink }}
  - {{ name: out_b, kind: sink }}
nfs:
  - {{ name: acl, type: acl, isolation: inline, config: {{ rules: [ {{ action: drop, proto: udp }} ] }} }}
  - {{ name: fwd, type: forwarder, isolation: inline }}
  - {{ name: spare, type: forwarder, isolation: inline }}
chains:
  - {{ name: a, from: gen_udp, nfs: [acl], to: out }}
  - {{ name: idle, from: gen_tcp, match: {{ proto: udp }}, nfs: [spare], to: out_b }}
  - {{ name: b, from: gen_tcp, nfs: [fwd], to: out_b }}
"
    )
}

fn run_for(workers: u32) -> RunReport {
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    let spec = sluice_spec::parse_str(&spec(workers), "<test>", &names).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_millis(400)),
        ..RunOptions::default()
    };
    run(&spec, REGISTRY, opts).unwrap()
}

fn check(r: &RunReport, workers: usize) {
    let names: Vec<&str> = r.nfs.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["acl", "fwd", "spare"], "{r:#?}");
    let acl = &r.nfs[0];
    assert_eq!(
        (acl.nf_type.as_str(), acl.isolation.as_str()),
        ("acl", "inline")
    );
    assert_eq!(acl.domain, "platform");
    assert_eq!(acl.wakeup, "", "inline NFs have no wake-up policy");
    assert!(acl.sandbox.is_none(), "inline NFs have no sandbox");
    let keys: Vec<&str> = acl.counters.keys().map(String::as_str).collect();
    assert_eq!(keys, ["accepted", "denied", "rule_scans"]);
    assert!(acl.counters["denied"] > 0, "{acl:#?}");
    assert_eq!(acl.counters["accepted"], 0);
    // Only reasons that dropped something are listed.
    let drops: Vec<&str> = acl.drops.keys().map(String::as_str).collect();
    assert_eq!(drops, ["denied"]);
    assert_eq!(acl.drops["denied"], acl.counters["denied"]);
    assert_eq!(r.drops["acl:denied"], acl.drops["denied"]);
    assert!(acl.packets >= acl.counters["denied"]);

    let fwd = &r.nfs[1];
    assert_eq!(fwd.nf_type, "forwarder");
    assert!(fwd.drops.is_empty());
    assert!(fwd.packets > 0);
    assert_eq!(r.nfs[2].packets, 0);

    let chains: Vec<(&str, bool)> = (r.chains.iter())
        .map(|c| (c.name.as_str(), c.packets > 0))
        .collect();
    assert_eq!(chains, [("a", false), ("idle", false), ("b", true)]);
    let b = &r.chains[2];
    assert_eq!(b.packets, b.histogram.count);
    assert!(b.p50_ns > 0 && b.p50_ns <= b.p99_ns);

    if workers > 1 {
        for nf in &r.nfs {
            assert_eq!(nf.counters_by_worker.len(), workers, "{}", nf.name);
            for (k, &total) in &nf.counters {
                let sum: u64 = nf.counters_by_worker.iter().map(|w| w[k]).sum();
                assert_eq!(sum, total, "{}: {k}", nf.name);
            }
        }
    } else {
        assert!(r.nfs.iter().all(|n| n.counters_by_worker.is_empty()));
    }
}

#[test]
fn one_worker_s_rows_are_named_from_its_plan() {
    check(&run_for(1), 1);
}

#[test]
fn two_workers_rows_are_named_then_merged_by_name() {
    check(&run_for(2), 2);
}
