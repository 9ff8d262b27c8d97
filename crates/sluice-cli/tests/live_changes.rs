//! Live changes lose nothing: while a generator offers 1 Mpps to a running
//! daemon, NFs are inserted into and removed from its chain, an NF takes a
//! new config live, and a chain with its own port comes and goes. The sink
//! checks every flow's order; every packet generated must leave, none
//! dropped (the spec's ACL drops nothing), none reordered or duplicated.

mod common;
use common::*;

const COUNT: u64 = 1_500_000;

fn spec(isolation: &str, nfs: &[&str], acl_rule: &str, side: bool) -> String {
    let mut s = format!(
        "ports:\n  - {{ name: gen, kind: generator, flows: 256, protocol: udp, size: 64, rate_pps: 1000000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\n"
    );
    if side {
        s += "  - { name: side, kind: sink }\n";
    }
    s += &format!(
        "nfs:\n  - {{ name: acl, type: acl, isolation: {isolation}, config: {{ default: accept, rules: [{acl_rule}] }} }}\n  - {{ name: fw, type: forwarder, isolation: {isolation} }}\n  - {{ name: mon, type: monitor, isolation: {isolation} }}\n"
    );
    s += "chains:\n";
    if side {
        // Matches no generated flow: the chain and its port come and go
        // beside the traffic (listed first: the first match wins).
        s += "  - { name: sidechain, from: gen, match: { proto: udp, dst_port: 65000 }, nfs: [fw], to: side }\n";
    }
    s += &format!(
        "  - {{ name: main, from: gen, nfs: [{}], to: out }}\n",
        nfs.join(", ")
    );
    s
}

/// Runs the change sequence under load and checks nothing was lost.
fn changes_lose_nothing(isolation: &str) {
    let d = Daemon::start();
    let never = "{ action: drop, proto: tcp, dst_port: 9 }";
    let never2 = "{ action: drop, proto: tcp, dst_port: 10 }";
    d.apply(&spec(isolation, &["acl", "mon"], never, false));

    d.wait_packets_in(100_000);
    let acl_pid = |d: &Daemon| {
        d.instances()
            .iter()
            .find(|i| i["nf"] == "acl")
            .map(|i| i["pid"].clone())
    };
    let pid_before = acl_pid(&d);
    // Insert an NF into the running chain.
    let r = d.apply(&spec(isolation, &["acl", "fw", "mon"], never, false));
    assert_eq!(r["diff"]["chains"]["changed"][0], "main", "{r:#}");
    d.wait_packets_in(300_000);
    // The ACL takes new rules live: same instance, new config.
    let r = d.apply(&spec(isolation, &["acl", "fw", "mon"], never2, false));
    assert_eq!(r["diff"]["nfs"]["changed"][0], "acl", "{r:#}");
    assert_eq!(
        acl_pid(&d),
        pid_before,
        "reconfigured in place, not replaced"
    );
    d.wait_packets_in(500_000);
    // Remove the NF again (the chain drains before it takes the shorter path).
    d.apply(&spec(isolation, &["acl", "mon"], never2, false));
    d.wait_packets_in(700_000);
    // A chain with its own port comes and goes.
    let r = d.apply(&spec(isolation, &["acl", "mon"], never2, true));
    assert_eq!(r["diff"]["ports"]["added"][0], "side", "{r:#}");
    d.wait_packets_in(900_000);
    d.apply(&spec(isolation, &["acl", "mon"], never2, false));
    // Let the generator finish and everything drain.
    let s = d.wait_done(COUNT);
    assert_eq!(s["packets_in"], COUNT, "{s:#}");
    assert_eq!(s["drops_total"], 0, "no packet dropped: {s:#}");
    assert_eq!(s["packets_out"], COUNT, "every packet left: {s:#}");
    assert_eq!(
        port(&s, "out")["reordered"],
        0,
        "per-flow order kept: {s:#}"
    );
    assert_eq!(port(&s, "out")["duplicates"], 0, "{s:#}");
    assert_eq!(nf(&s, "acl")["packets"], COUNT, "{s:#}");
    assert_eq!(nf(&s, "acl")["restarts"], 0, "{s:#}");
}

#[test]
fn process_nfs_change_under_load_without_loss() {
    changes_lose_nothing("process");
}

#[test]
fn inline_nfs_change_under_load_without_loss() {
    changes_lose_nothing("inline");
}
