//! End-to-end runs of the data plane with inline NFs (in this test
//! process; process NFs are tested through the binary in sluice-cli).

use std::time::Duration;

use sluice_dataplane::{run, RunError, RunOptions, RunReport};
use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfId, NfType, PortId, Verdict,
};
use sluice_spec::SpecError;

/// Sends packets with an odd flow id straight to port `side`, and keeps a
/// list of flow ends it saw.
struct Steer {
    side: PortId,
    me: NfId,
    loop_forever: bool,
}

impl NetworkFunction for Steer {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (side, me, looping) = (self.side, self.me, self.loop_forever);
        batch.for_each(|p| {
            if looping {
                p.set_verdict(Verdict::ToNf(me));
            } else if p.flow_id() % 2 == 1 {
                p.set_verdict(Verdict::ToPort(side));
            } else if p.data().len() < 80 {
                p.drop_with(DropReason::nf_local(0));
            }
        });
        ctx.count(0, batch.len() as u64);
    }

    fn flow_end(&mut self, _flow: u32, ctx: &mut Context<'_>) {
        ctx.count(1, 1);
    }
}

fn build_steer(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Steer {
        side: ctx
            .resolver
            .port("side")
            .ok_or_else(|| ctx.config.error("no port `side`"))?,
        me: ctx.resolver.nf(&ctx.name).expect("own name resolves"),
        loop_forever: ctx
            .config
            .get("loop")
            .and_then(|n| n.as_bool())
            .unwrap_or(false),
    }))
}

/// Checks that every packet of a 5-tuple (either direction) carries the
/// same flow id and the flow-hash of that tuple: counts packets, then
/// mismatches.
#[derive(Default)]
struct FlowCheck {
    ids: std::collections::HashMap<sluice_packet::FlowKey, u32>,
}

impl NetworkFunction for FlowCheck {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut bad = 0;
        batch.for_each(|p| {
            let Ok(key) = sluice_packet::flow_key(p.data()) else {
                bad += 1;
                return;
            };
            let id = *self.ids.entry(key.canonical()).or_insert(p.flow_id());
            if id != p.flow_id() || key.symmetric_hash() != p.flow_hash() {
                bad += 1;
            }
        });
        ctx.count(0, batch.len() as u64);
        ctx.count(1, bad);
    }
}

static REGISTRY: &[NfType] = &[
    NfType {
        name: "flowcheck",
        summary: "test NF",
        drop_reasons: &[],
        counters: &["packets", "mismatched"],
        build: |_| Ok(Box::<FlowCheck>::default()),
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    sluice_nfs::forwarder::TYPE,
    sluice_nfs::monitor::TYPE,
    sluice_nfs::acl::TYPE,
    NfType {
        name: "steer",
        summary: "test NF",
        drop_reasons: &["short"],
        counters: &["packets", "flow_ends"],
        build: build_steer,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
];

fn run_spec(text: &str) -> Result<RunReport, RunError> {
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    let spec = sluice_spec::parse_str(text, "<test>", &names).map_err(RunError::Spec)?;
    run(
        &spec,
        REGISTRY,
        RunOptions {
            duration: Some(Duration::from_secs(10)),
            ..RunOptions::default()
        },
    )
}

fn accounted(r: &RunReport) {
    assert_eq!(r.leaked_buffers, 0, "{r:#?}");
    assert_eq!(r.unaccounted, 0, "{r:#?}");
}

const PORTS: &str = "ports:\n  - { name: gen, kind: generator, flows: 64, protocol: udp, size: [SIZE], count: 6400, rate_pps: 500000 }\n  - { name: out, kind: sink }\n  - { name: side, kind: sink }\n";

#[test]
fn verdicts_steer_to_ports_and_count_nf_drops() {
    let spec = PORTS.replace("[SIZE]", "imix")
        + "nfs:\n  - { name: s, type: steer, isolation: inline }\n  - { name: m, type: monitor, isolation: inline }\nchains:\n  - { name: c, from: gen, nfs: [s, m], to: out }\n";
    let r = run_spec(&spec).unwrap();
    accounted(&r);
    assert_eq!(r.packets_in, 6400);
    let side = r
        .ports
        .iter()
        .find(|p| p.name == "side")
        .unwrap()
        .stats
        .tx_packets;
    let out = r
        .ports
        .iter()
        .find(|p| p.name == "out")
        .unwrap()
        .stats
        .tx_packets;
    let short = *r.drops.get("s:short").unwrap_or(&0);
    assert!(side > 0 && out > 0 && short > 0, "{r:#?}");
    assert_eq!(side + out + short, 6400);
    // Packets sent straight to a port skip the monitor.
    assert_eq!(r.nfs[1].counters["packets"], out);
}

#[test]
fn forwarding_loops_are_cut_and_counted() {
    let spec = PORTS.replace("[SIZE]", "64")
        + "nfs:\n  - { name: s, type: steer, isolation: inline, config: { loop: true } }\nchains:\n  - { name: c, from: gen, nfs: [s], to: out }\n";
    let r = run_spec(&spec).unwrap();
    accounted(&r);
    assert_eq!(r.drops.get("loop_detected"), Some(&6400), "{r:#?}");
    // The route's one NF plus the detour allowance, then the drop.
    assert_eq!(
        r.nfs[0].packets,
        6400 * (1 + u64::from(sluice_dataplane::plan::DETOUR_VISITS)),
        "each packet visits the NF 1 + 64 times, then is dropped"
    );
}

/// Loop detection follows the route's own length: a chain of 1,024 NFs
/// delivers every packet (a fixed bound of 64 visits once dropped them
/// all as `loop_detected`).
#[test]
fn a_chain_of_1024_nfs_delivers_every_packet() {
    let names: Vec<String> = (0..1024).map(|i| format!("f{i}")).collect();
    let mut spec = PORTS.replace("[SIZE]", "64") + "nfs:\n";
    for n in &names {
        spec += &format!("  - {{ name: {n}, type: forwarder, isolation: inline }}\n");
    }
    spec += &format!(
        "chains:\n  - {{ name: c, from: gen, nfs: [{}], to: out }}\n",
        names.join(", ")
    );
    let r = run_spec(&spec).unwrap();
    accounted(&r);
    assert_eq!(r.drops_total, 0, "{:?}", r.drops);
    assert_eq!(r.packets_out, 6400);
    assert!(r.nfs.iter().all(|n| n.packets == 6400));
}

#[test]
fn traffic_no_chain_selects_is_dropped_as_no_chain() {
    let spec = PORTS.replace("[SIZE]", "64")
        + "chains:\n  - { name: c, from: gen, match: { proto: tcp }, to: out }\n";
    let r = run_spec(&spec).unwrap();
    accounted(&r);
    assert_eq!(r.drops.get("no_chain"), Some(&6400));
    assert_eq!(r.packets_out, 0);
}

#[test]
fn first_matching_chain_wins() {
    let spec = "ports:\n  - { name: gen, kind: generator, flows: 64, protocol: mixed, size: 64, count: 6400, rate_pps: 500000 }\n  - { name: out, kind: sink }\n  - { name: side, kind: sink }\nchains:\n  - { name: tcp, from: gen, match: { proto: tcp }, to: side }\n  - { name: rest, from: gen, to: out }\n";
    let r = run_spec(spec).unwrap();
    accounted(&r);
    let side = r
        .ports
        .iter()
        .find(|p| p.name == "side")
        .unwrap()
        .stats
        .tx_packets;
    assert_eq!(side, 3200, "mixed alternates TCP and UDP flows");
    assert_eq!(r.packets_out, 6400);
}

#[test]
fn ended_tcp_flows_reach_every_nf_of_the_chain() {
    let spec = "ports:\n  - { name: gen, kind: generator, flows: 8, protocol: tcp, size: 64, count: 4000, rate_pps: 200000, packets_per_flow: 10 }\n  - { name: out, kind: sink }\n  - { name: side, kind: sink }\nnfs:\n  - { name: a, type: monitor, isolation: inline }\n  - { name: b, type: monitor, isolation: inline }\nchains:\n  - { name: c, from: gen, nfs: [a, b], to: out }\n";
    let r = run_spec(spec).unwrap();
    accounted(&r);
    // 4000 packets / 10 per connection = 400 connections, each closed by FIN.
    // Shutdown ends the flows still lingering after their FIN.
    assert_eq!(r.flows.created, 400, "{r:#?}");
    assert_eq!(r.flows.ended, 400, "{r:#?}");
    assert_eq!(r.flows.live, 0, "{r:#?}");
    for nf in &r.nfs {
        assert_eq!(nf.counters["flows_ended"], 400, "{}: {r:#?}", nf.name);
        assert_eq!(nf.counters["flows_active"], 0, "{}: {r:#?}", nf.name);
    }
}

/// Process NFs start from a template process: this program exec'd with
/// the template argument. A test binary is not one, so process NFs cannot
/// start here: the error says why, and nothing runs.
#[test]
fn process_nfs_need_a_template_program_and_nothing_starts_without_one() {
    let spec = PORTS.replace("[SIZE]", "64")
        + "nfs:\n  - { name: f, type: forwarder, isolation: process }\nchains:\n  - { name: c, from: gen, nfs: [f], to: out }\n";
    match run_spec(&spec) {
        Err(RunError::Setup(msg)) => {
            assert!(msg.contains("template_main_if_invoked"), "{msg}")
        }
        other => panic!("expected a setup error, got {other:?}"),
    }
}

/// Above 32 768 live flows ingress classifies a batch in three passes
/// (prefetching the flow table); every packet must still get its own
/// flow, in order, exactly as with few flows.
#[test]
fn many_flows_are_classified_like_few() {
    for flows in [1_000u32, 40_000] {
        let count = flows * 4;
        let spec = format!(
            "ports:\n  - {{ name: gen, kind: generator, flows: {flows}, protocol: mixed, size: 64, count: {count} }}\n  - {{ name: out, kind: sink }}\n  - {{ name: side, kind: sink }}\nnfs:\n  - {{ name: m, type: monitor, isolation: inline }}\n  - {{ name: f, type: flowcheck, isolation: inline }}\nchains:\n  - {{ name: c, from: gen, nfs: [m, f], to: out }}\n"
        );
        let r = run_spec(&spec).unwrap();
        accounted(&r);
        assert_eq!(r.packets_in, u64::from(count), "{r:#?}");
        assert_eq!(r.packets_out, u64::from(count), "{r:#?}");
        assert_eq!(
            r.flows.created,
            u64::from(flows),
            "one flow per 5-tuple: {r:#?}"
        );
        assert_eq!(r.flows.ended, u64::from(flows), "{r:#?}");
        let m = &r.nfs[0];
        assert_eq!(m.counters["packets"], u64::from(count), "{r:#?}");
        assert_eq!(m.counters["flows_ended"], u64::from(flows), "{r:#?}");
        let f = &r.nfs[1];
        assert_eq!(f.counters["packets"], u64::from(count), "{r:#?}");
        assert_eq!(
            f.counters["mismatched"], 0,
            "each packet has its own tuple's flow id and hash"
        );
        let out = r.ports.iter().find(|p| p.name == "out").unwrap();
        assert_eq!(out.reordered, Some(0), "{r:#?}");
    }
}
