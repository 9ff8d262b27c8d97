//! `steer: per_flow` (Flurries' per-flow NFs): each flow gets an instance
//! of its own from the NF's pool, reset when the flow ends and reused by a
//! later flow. A test NF that remembers the first flow it saw since its
//! last reset proves no state leaks from one flow to the next; the same
//! NF under `hash` steering sees flows mixed (the control).

use std::time::Duration;

use sluice_dataplane::{run, RunOptions, RunReport};
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::FlowKey;
use sluice_spec::SpecError;

/// Remembers the flow of its first packet since it was built or reset,
/// and counts packets of any other flow (`leaked`: it saw state of an
/// earlier flow) and its resets.
#[derive(Default)]
struct Solo {
    flow: Option<FlowKey>,
}

impl NetworkFunction for Solo {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut leaked = 0;
        batch.for_each(|p| {
            let key = sluice_packet::flow_key(p.data()).unwrap().canonical();
            if *self.flow.get_or_insert(key) != key {
                leaked += 1;
            }
        });
        ctx.count(0, batch.len() as u64);
        ctx.count(1, leaked);
    }

    fn reset(&mut self) {
        self.flow = None;
    }

    fn resets(&self) -> bool {
        true
    }
}

fn build_solo(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::<Solo>::default())
}

/// Remembers the /24 of the source of its first packet since it was built
/// or reset, and counts packets from another /24 (`leaked`) and the flows
/// that joined it while it served another since its last reset (`joined`:
/// flows of one class sharing its instance; always 0 under `per_flow`).
#[derive(Default)]
struct ClassSolo {
    class: Option<[u8; 3]>,
    flows: Vec<FlowKey>,
}

impl NetworkFunction for ClassSolo {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let (mut leaked, mut joined) = (0, 0);
        batch.for_each(|p| {
            let key = sluice_packet::flow_key(p.data()).unwrap();
            let std::net::IpAddr::V4(src) = key.src_ip() else {
                panic!("IPv4 only")
            };
            let o = src.octets();
            if *self.class.get_or_insert([o[0], o[1], o[2]]) != [o[0], o[1], o[2]] {
                leaked += 1;
            }
            if !self.flows.contains(&key) {
                joined += u64::from(!self.flows.is_empty());
                self.flows.push(key);
            }
        });
        ctx.count(0, batch.len() as u64);
        ctx.count(1, leaked);
        ctx.count(2, joined);
    }

    fn reset(&mut self) {
        self.class = None;
        self.flows.clear();
    }

    fn resets(&self) -> bool {
        true
    }
}

fn build_class_solo(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::<ClassSolo>::default())
}

/// Keeps state and cannot reset it.
struct Sticky;

impl NetworkFunction for Sticky {
    fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
}

fn build_sticky(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Sticky))
}

static REGISTRY: &[NfType] = &[
    NfType {
        name: "solo",
        summary: "test NF",
        drop_reasons: &[],
        counters: &["packets", "leaked"],
        build: build_solo,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    NfType {
        name: "class_solo",
        summary: "test NF",
        drop_reasons: &[],
        counters: &["packets", "leaked", "joined"],
        build: build_class_solo,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    NfType {
        name: "sticky",
        summary: "test NF",
        drop_reasons: &[],
        counters: &[],
        build: build_sticky,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
];

const COUNT: u64 = 40_000;

/// `flows` generator slots of 40-packet TCP connections at 40 kpps (each
/// connection lasts `flows` ms), through `solo` with `nf`'s settings.
/// The generator closes connections one way, so an ended one holds its
/// instance until the 20 ms idle timeout.
fn spec(flows: u32, nf: &str) -> String {
    format!(
        "settings:\n  flow_table: {{ idle_timeout_ms: 20, close_timeout_ms: 2 }}\nports:\n  - {{ name: gen, kind: generator, flows: {flows}, protocol: tcp, packets_per_flow: 40, size: 64, rate_pps: 40000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: s, type: solo, isolation: inline, {nf} }}\nchains:\n  - {{ name: main, from: gen, nfs: [s], to: out }}\n"
    )
}

fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|t| t.name).collect()
}

fn run_spec(text: &str) -> RunReport {
    let spec = sluice_spec::parse_str(text, "<test>", &names()).unwrap();
    let r = run(
        &spec,
        REGISTRY,
        RunOptions {
            duration: Some(Duration::from_secs(10)),
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(r.leaked_buffers, 0, "{r:#?}");
    assert_eq!(r.unaccounted, 0, "{r:#?}");
    r
}

fn total(r: &RunReport, counter: &str) -> u64 {
    r.nfs
        .iter()
        .filter(|n| sluice_dataplane::naming::instance_of(&n.name).nf == "s")
        .map(|n| n.counters.get(counter).copied().unwrap_or(0))
        .sum()
}

#[test]
fn every_flow_gets_a_fresh_instance_and_instances_are_reused() {
    let r = run_spec(&spec(2, "replicas: 16, steer: per_flow"));
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
    assert_eq!(r.drops_total, 0, "{r:#?}");
    assert_eq!(total(&r, "packets"), COUNT);
    assert_eq!(total(&r, "leaked"), 0, "no instance saw two flows: {r:#?}");
    // 1,000 connections over 16 instances: each instance served many.
    let connections = COUNT / 40;
    assert!(r.flows.created >= connections, "{:?}", r.flows);
    let busiest = r.nfs.iter().map(|n| n.packets).max().unwrap();
    assert!(busiest > 40 * 10, "instances were reused: {busiest}");
}

/// A pool past a byte's reach (300 members: pins are two bytes): 300
/// concurrent connections each get an instance of their own, and more
/// than 255 instances serve.
#[test]
fn a_pool_of_hundreds_gives_each_of_hundreds_of_flows_its_own_instance() {
    let r = run_spec(&spec(300, "replicas: 300, steer: per_flow"));
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
    assert_eq!(r.drops_total, 0, "{r:#?}");
    assert_eq!(total(&r, "leaked"), 0, "no instance saw two flows");
    let serving = r.nfs.iter().filter(|n| n.packets > 0).count();
    assert!(serving > 255, "{serving} instances served");
}

#[test]
fn the_control_shared_instances_see_flows_mixed() {
    let r = run_spec(&spec(2, "replicas: 16, steer: hash"));
    assert!(total(&r, "leaked") > 0, "{r:#?}");
}

#[test]
fn a_busy_pool_drops_new_flows_as_nf_pool_exhausted_or_shares_under_shared() {
    let r = run_spec(&spec(8, "replicas: 2, steer: per_flow"));
    let exhausted = r.drops.get("nf_pool_exhausted").copied().unwrap_or(0);
    assert!(exhausted > 0, "{r:#?}");
    assert_eq!(r.drops_total, exhausted, "{r:#?}");
    assert_eq!(r.packets_out + exhausted, COUNT, "every packet accounted");
    assert_eq!(total(&r, "leaked"), 0, "{r:#?}");

    let r = run_spec(&spec(8, "replicas: 2, steer: per_flow, fallback: shared"));
    assert_eq!(r.drops_total, 0, "{r:#?}");
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
}

#[test]
fn a_type_without_a_reset_hook_is_refused() {
    let text = spec(2, "replicas: 4, steer: per_flow").replace("type: solo", "type: sticky");
    let spec = sluice_spec::parse_str(&text, "<test>", &names()).unwrap();
    let e = run(&spec, REGISTRY, RunOptions::default()).unwrap_err();
    assert!(e.to_string().contains("cannot reset"), "{e}");
}

#[test]
fn fallback_without_per_flow_is_a_spec_error() {
    let text = spec(2, "replicas: 4, fallback: shared");
    let e = sluice_spec::parse_str(&text, "<test>", &names()).unwrap_err();
    assert_eq!(e.field, "nfs[0].fallback", "{e}");
}

/// As [`spec`], through `class_solo`, with sources from four /24s.
fn class_spec(flows: u32, nf: &str) -> String {
    spec(flows, nf)
        .replace("type: solo", "type: class_solo")
        .replace("count: ", "src_prefix: 10.9.0.0/22, count: ")
}

#[test]
fn every_class_gets_an_instance_of_its_own_shared_by_its_flows() {
    let r = run_spec(&class_spec(
        8,
        "replicas: 4, steer: per_class, class: { by: src, prefix: 24 }",
    ));
    assert_eq!(r.drops_total, 0, "four classes, four instances: {r:#?}");
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
    assert_eq!(
        total(&r, "leaked"),
        0,
        "no instance saw two classes: {r:#?}"
    );
    assert!(
        total(&r, "joined") > 0,
        "flows of a class shared its instance: {r:#?}"
    );
    // The controls: `per_flow` never puts two flows on one instance, and
    // `hash` steering mixes classes.
    let r = run_spec(&class_spec(8, "replicas: 8, steer: per_flow"));
    assert_eq!(total(&r, "joined"), 0, "{r:#?}");
    let r = run_spec(&class_spec(8, "replicas: 4, steer: hash"));
    assert!(total(&r, "leaked") > 0, "{r:#?}");
}

#[test]
fn a_class_without_per_class_or_per_class_without_a_class_is_a_spec_error() {
    let e = sluice_spec::parse_str(
        &class_spec(2, "replicas: 4, steer: per_class"),
        "<test>",
        &names(),
    )
    .unwrap_err();
    assert_eq!(e.field, "nfs[0].class", "{e}");
    let e = sluice_spec::parse_str(
        &class_spec(2, "replicas: 4, class: { by: vlan }"),
        "<test>",
        &names(),
    )
    .unwrap_err();
    assert_eq!(e.field, "nfs[0].class", "{e}");
}

/// `fallback: wait`: four connections at once over a pool of three, so
/// one waits for the next instance to be released. Its packets wait in the
/// worker, in order, and are delivered, each connection still on an
/// instance of its own and in order; the same load under `drop` loses the
/// waiting connection's packets (the control). On an idle host nothing is
/// lost; a host so loaded that a packet waits past 100 ms loses it, so the
/// test asks for fewer losses than `drop`'s, every one counted.
#[test]
fn with_wait_a_flow_waits_for_a_free_instance_and_keeps_its_order() {
    let spec = |fallback: &str| {
        format!(
            "settings:\n  flow_table: {{ idle_timeout_ms: 2000, close_timeout_ms: 0 }}\nports:\n  - {{ name: gen, kind: generator, flows: 4, protocol: tcp, packets_per_flow: 10, size: 64, rate_pps: 4000, count: 400 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: s, type: solo, isolation: inline, replicas: 3, steer: per_flow, fallback: {fallback} }}\nchains:\n  - {{ name: main, from: gen, nfs: [s], to: out }}\n"
        )
    };
    let waited = run_spec(&spec("wait"));
    let lost = waited.drops.get("nf_pool_exhausted").copied().unwrap_or(0);
    assert_eq!(waited.drops_total, lost, "{waited:#?}");
    assert_eq!(waited.packets_out + lost, 400, "{waited:#?}");
    assert_eq!(
        total(&waited, "leaked"),
        0,
        "one flow per instance: {waited:#?}"
    );
    let out = waited.ports.iter().find(|p| p.name == "out").unwrap();
    assert_eq!(
        out.reordered,
        Some(0),
        "waiting kept every flow in order: {waited:#?}"
    );
    let dropped = run_spec(&spec("drop"));
    let refused = dropped.drops.get("nf_pool_exhausted").copied().unwrap_or(0);
    assert!(refused > 0, "{dropped:#?}");
    assert!(lost < refused, "wait lost {lost}, drop {refused}");
}
