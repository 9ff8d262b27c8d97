//! Flows that no chain takes are remembered (`worker/no_chain.rs`) so
//! their packets skip the selectors; a change that adds a chain for them
//! takes them at once, as if nothing had been remembered.

use std::thread::sleep;
use std::time::{Duration, Instant};

use sluice_dataplane::{PlatformSettings, RunReport, Runtime};
use sluice_nf::NfType;
use sluice_spec::Spec;

static REGISTRY: &[NfType] = &[sluice_nfs::forwarder::TYPE];

/// Destination ports of the generator's flows, and the chains of the
/// first spec: at least `WORTH_FROM_CHAINS` (16), so that the port's
/// no-chain flows are remembered.
const PORTS: u16 = 32;
const FIRST: u16 = 20;

/// UDP flows to destination ports 1..=PORTS from one generator; forwarder
/// chains for ports 1..=`chains`.
fn spec(chains: u16) -> Spec {
    let mut text = format!(
        "ports:
  - {{ name: gen, kind: generator, flows: 256, protocol: udp, size: 64, dst_ports: 1-{PORTS}, rate_pps: 200000 }}
  - {{ name: out, kind: sink }}
nfs:
"
    );
    for i in 1..=PORTS {
        text += &format!("  - {{ name: f{i}, type: forwarder, isolation: inline }}\n");
    }
    text += "chains:\n";
    for i in 1..=chains {
        text += &format!(
            "  - {{ name: c{i}, from: gen, match: {{ proto: udp, dst_port: {i} }}, nfs: [f{i}], to: out }}\n"
        );
    }
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    sluice_spec::parse_str(&text, "<test>", &names).unwrap()
}

fn no_chain(r: &RunReport) -> u64 {
    r.drops.get("no_chain").copied().unwrap_or(0)
}

fn packets_of(r: &RunReport, nf: &str) -> u64 {
    r.nfs.iter().find(|n| n.name == nf).map_or(0, |n| n.packets)
}

/// Waits until `done` holds of a report (or fails after 10 s).
fn until(rt: &Runtime, what: &str, done: impl Fn(&RunReport) -> bool) -> RunReport {
    let t = Instant::now();
    loop {
        let r = rt.report();
        if done(&r) {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never: {what}");
        sleep(Duration::from_millis(5));
    }
}

#[test]
fn remembered_no_chain_flows_are_taken_by_a_chain_added_later() {
    let first = spec(FIRST);
    let mut settings = PlatformSettings::for_spec(&first);
    settings.max_nfs = 80;
    settings.max_chains = 64;
    let mut rt = Runtime::start(settings, REGISTRY).unwrap();
    rt.apply(&first).unwrap();
    // Flows to the ports above FIRST match no chain, packet after packet.
    until(&rt, "no-chain drops", |r| no_chain(r) > 1_000);

    rt.apply(&spec(PORTS)).unwrap();
    // The change is in place once `apply` returns: from here no packet
    // may be dropped for want of a chain, remembered or not.
    let after_apply = rt.report();
    let later = until(&rt, "the added chains' traffic", |r| {
        (FIRST + 1..=PORTS).all(|i| packets_of(r, &format!("f{i}")) > 100)
    });
    assert_eq!(
        no_chain(&later),
        no_chain(&after_apply),
        "a flow remembered before the change was dropped after it"
    );

    let last = rt.stop();
    assert_eq!(last.unaccounted, 0, "{last:#?}");
}

#[test]
fn a_removed_chain_s_flows_are_dropped_as_no_chain_from_then_on() {
    let all = spec(PORTS);
    let mut settings = PlatformSettings::for_spec(&all);
    settings.max_nfs = 80;
    settings.max_chains = 64;
    let mut rt = Runtime::start(settings, REGISTRY).unwrap();
    rt.apply(&all).unwrap();
    until(&rt, "every chain's traffic", |r| {
        (1..=PORTS).all(|i| packets_of(r, &format!("f{i}")) > 100)
    });
    assert_eq!(no_chain(&rt.report()), 0);

    rt.apply(&spec(FIRST)).unwrap();
    let r = until(&rt, "the removed chains' flows dropped", |r| {
        no_chain(r) > 1_000
    });
    // The chains that stayed still carry their flows.
    let before: Vec<u64> = (1..=FIRST)
        .map(|i| packets_of(&r, &format!("f{i}")))
        .collect();
    let later = until(&rt, "the kept chains' traffic", |r| {
        (1..=FIRST).all(|i| packets_of(r, &format!("f{i}")) > before[usize::from(i) - 1] + 100)
    });
    assert!(no_chain(&later) > no_chain(&r));

    let last = rt.stop();
    assert_eq!(last.unaccounted, 0, "{last:#?}");
}
