//! `examples/firewall.yaml` runs through the real binary: the firewall
//! tracks the accepted UDP flows, drops the rest by its default, and its
//! counters agree with the platform's accounting.

mod common;
use common::*;

#[test]
fn firewall_example_tracks_accepted_flows_and_drops_the_rest() {
    let (out, r) = run_json(&root().join("examples/firewall.yaml"), 2.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    let fw = &nf(&r, "fw")["counters"];
    let c = |k: &str| {
        fw[k]
            .as_u64()
            .unwrap_or_else(|| panic!("counter {k}: {r:#}"))
    };
    let denied = r["drops"]["fw:denied"].as_u64().unwrap_or(0);
    assert!(denied > 0, "flows to ports 512-1023 are dropped: {r:#}");
    assert_eq!(c("dropped"), denied);
    assert_eq!(c("accepted"), r["packets_out"].as_u64().unwrap());
    assert_eq!(
        c("accepted"),
        nf(&r, "mon")["counters"]["packets"].as_u64().unwrap()
    );
    // Each accepted flow is one NEW connection; every later packet of it
    // passes as established, without a rule scan.
    assert!(c("new") > 0 && c("new") <= 256, "{r:#}");
    assert_eq!(c("new") + c("established"), c("accepted"));
    assert_eq!(c("entries"), c("new"));
    for k in ["invalid", "rejected", "related", "table_full", "untracked"] {
        assert_eq!(c(k), 0, "{k}: {r:#}");
    }
}
