//! The router example runs through the binary: every generated packet
//! (IPv4 and IPv6) is routed out of the uplink, none is lost.

mod common;
use common::*;

#[test]
fn router_example_forwards_every_packet() {
    let (out, r) = run_json(&root().join("examples/router.yaml"), 20.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["packets_in"], 20000, "{r:#}");
    assert_eq!(r["packets_out"], 20000, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_accounted(&r);
    let c = &nf(&r, "rtr")["counters"];
    assert_eq!(c["forwarded"], 20000, "{r:#}");
    // 2 inline + 2 from router-routes.txt + 2 connected.
    assert_eq!(c["routes"], 6, "{r:#}");
    assert_eq!(c["neighbours"], 2, "{r:#}");
    for k in [
        "no_route",
        "ttl_expired",
        "neighbour_unresolved",
        "icmp_sent",
    ] {
        assert_eq!(c[k], 0, "{k}: {r:#}");
    }
}
