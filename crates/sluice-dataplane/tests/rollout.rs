//! Rolling upgrade (`nfs[].generation`, `nfs[].draining`): while a
//! generator offers TCP connections to a running platform, an NF's new
//! version starts beside the old one. The flows live at that moment stay
//! on the old version until they end, new flows go to the new one, no
//! version ever sees a packet of a flow another instance started, nothing
//! drains, and nothing is lost. Then the old version retires. The same
//! config change applied plainly hands live flows to a fresh instance
//! mid-stream: the difference this mode exists for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sluice_dataplane::compile::{compile, Target};
use sluice_dataplane::plan::Plan;
use sluice_dataplane::report::RunReport;
use sluice_dataplane::{PlatformSettings, Runtime};
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::FlowKey;
use sluice_spec::{Spec, SpecError};

/// Which instance saw each flow first (keys carry each test's tag).
static OWNERS: Mutex<Option<HashMap<(u16, FlowKey), u32>>> = Mutex::new(None);
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// Claims every flow it sees first, and counts packets of flows another
/// instance claimed (`foreign`): what an NF with per-flow state would get
/// wrong.
struct Owner {
    me: u32,
    tag: u16,
}

impl NetworkFunction for Owner {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut foreign = 0;
        let mut owners = OWNERS.lock().unwrap();
        let owners = owners.get_or_insert_with(HashMap::new);
        batch.for_each(|p| {
            let key = sluice_packet::flow_key(p.data()).unwrap().canonical();
            if *owners.entry((self.tag, key)).or_insert(self.me) != self.me {
                foreign += 1;
            }
        });
        ctx.count(0, batch.len() as u64);
        ctx.count(1, foreign);
    }
}

fn build_owner(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let tag = ctx.config.get("tag").and_then(|n| n.as_u64()).unwrap_or(0) as u16;
    Ok(Box::new(Owner {
        me: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        tag,
    }))
}

static REGISTRY: &[NfType] = &[
    NfType {
        name: "owner",
        summary: "test NF",
        drop_reasons: &[],
        counters: &["packets", "foreign"],
        build: build_owner,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    sluice_nfs::forwarder::TYPE,
];

const COUNT: u64 = 600_000;

fn parse(text: &str) -> Spec {
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    sluice_spec::parse_str(text, "<test>", &names).unwrap()
}

/// The owner NF `own` at `version` (a config key, so each version is
/// built afresh), with `rollout` appended to its definition.
fn spec(tag: u16, version: u32, rollout: &str) -> Spec {
    parse(&format!(
        "settings:\n  flow_table: {{ idle_timeout_ms: 200 }}\nports:\n  - {{ name: gen, kind: generator, flows: 64, protocol: tcp, packets_per_flow: 400, size: 64, rate_pps: 200000, count: {COUNT} }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: own, type: owner, isolation: inline, config: {{ tag: {tag}, v: {version} }}{rollout} }}\n  - {{ name: fwd, type: forwarder, isolation: inline }}\nchains:\n  - {{ name: main, from: gen, nfs: [own, fwd], to: out }}\n"
    ))
}

fn start(spec: &Spec) -> Runtime {
    let mut settings = PlatformSettings::for_spec(spec);
    settings.max_nfs = 8;
    let mut rt = Runtime::start(settings, REGISTRY).unwrap();
    rt.apply(spec).unwrap();
    rt
}

fn counter(r: &RunReport, nf: &str, c: &str) -> u64 {
    r.nfs
        .iter()
        .find(|n| n.name == nf)
        .map_or(0, |n| n.counters.get(c).copied().unwrap_or(0))
}

fn wait(rt: &Runtime, what: &str, mut done: impl FnMut(&Runtime) -> bool) {
    let t = Instant::now();
    while !done(rt) {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_in(rt: &Runtime, packets: u64) {
    wait(rt, "packets in", |rt| rt.report().packets_in >= packets);
}

#[test]
fn live_flows_finish_on_the_old_version_and_new_flows_take_the_new_one() {
    let mut rt = start(&spec(1, 1, ""));
    wait_in(&rt, 100_000);
    let rollout = spec(
        1,
        2,
        ", generation: 1, draining: { generation: 0, config: { tag: 1, v: 1 } }",
    );
    let a = rt.apply(&rollout).unwrap();
    assert_eq!(a.diff.nfs.added, ["own@1"], "{:?}", a.diff);
    assert!(a.diff.nfs.removed.is_empty() && a.diff.nfs.changed.is_empty());
    assert_eq!(a.quiesce_us, 0, "nothing drains");
    // The open connections stay where they began (with the ones the
    // generator closed one way only, which idle out after 200 ms).
    assert!(rt.held_flows() > 0);
    let old_at_start = counter(&rt.report(), "own", "packets");
    // 400-packet connections at 200 kpps end within a fraction of a second.
    wait(&rt, "kept flows to end", |rt| rt.held_flows() == 0);
    let r = rt.report();
    assert!(
        counter(&r, "own", "packets") > old_at_start,
        "the old version served its flows after the rollout began"
    );
    assert!(
        counter(&r, "own@1", "packets") > 0,
        "new flows reached the new version"
    );
    // The old version retires.
    let a = rt.apply(&spec(1, 2, ", generation: 1")).unwrap();
    assert_eq!(a.diff.nfs.removed, ["own"], "{:?}", a.diff);
    wait(&rt, "the generator to finish", |rt| rt.inputs_done());
    let r = rt.stop();
    assert_eq!(r.packets_in, COUNT, "{r:#?}");
    assert_eq!(r.drops_total, 0, "{r:#?}");
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
    assert_eq!(r.leaked_buffers, 0, "{r:#?}");
    assert_eq!(counter(&r, "own@1", "foreign"), 0, "{r:#?}");
    assert_eq!(counter(&r, "own", "foreign"), 0, "{r:#?}");
}

/// The control: the same change applied without a rollout replaces the
/// instance, and the fresh one is handed the live flows mid-stream.
#[test]
fn a_plain_config_change_hands_live_flows_to_a_fresh_instance() {
    let mut rt = start(&spec(2, 1, ""));
    wait_in(&rt, 100_000);
    rt.apply(&spec(2, 2, "")).unwrap();
    wait_in(&rt, 300_000);
    let r = rt.report();
    assert!(counter(&r, "own", "foreign") > 0, "{r:#?}");
    drop(rt.stop());
}

/// A rollout's deadline may remove the old version while flows are still
/// kept on it: they take the chain's route (the new version), none is
/// dropped as `nf_removed`, and the workers keep no flow.
#[test]
fn removing_the_old_version_early_moves_its_flows_to_the_new_one() {
    let mut rt = start(&spec(3, 1, ""));
    wait_in(&rt, 100_000);
    rt.apply(&spec(
        3,
        2,
        ", generation: 1, draining: { generation: 0, config: { tag: 3, v: 1 } }",
    ))
    .unwrap();
    assert!(rt.held_flows() > 0);
    rt.apply(&spec(3, 2, ", generation: 1")).unwrap();
    assert_eq!(rt.held_flows(), 0);
    wait(&rt, "the generator to finish", |rt| rt.inputs_done());
    let r = rt.stop();
    assert_eq!(r.drops_total, 0, "{r:#?}");
    assert_eq!(r.packets_out, COUNT, "{r:#?}");
}

fn plan_of(spec: &Spec, prev: Option<&Plan>) -> Plan {
    let mut t = Target::of_spec(spec);
    t.max_nfs = 8;
    compile(spec, REGISTRY, &t, prev).unwrap()
}

#[test]
fn the_plan_routes_to_the_new_version_and_holds_the_old_route_until_it_retires() {
    let v1 = plan_of(&spec(4, 1, ""), None);
    let rolling = plan_of(
        &spec(
            4,
            2,
            ", generation: 1, draining: { generation: 0, config: { tag: 4, v: 1 } }, replicas: 3",
        ),
        Some(&v1),
    );
    let id = |p: &Plan, n: &str| p.nfs_in_order().find(|(_, x)| x.name == n).map(|(i, _)| i);
    // The old version keeps its id (its instance keeps running); the new
    // version's three replicas are new.
    assert_eq!(id(&rolling, "own"), id(&v1, "own"));
    let d = sluice_dataplane::diff::Diff::between(&v1, &rolling);
    assert_eq!(d.nfs.added, ["own@1", "own@1.1", "own@1.2"], "{d:?}");
    assert!(d.nfs.changed.is_empty() && !d.quiesce, "{d:?}");
    let draining: Vec<&str> = rolling
        .nfs_in_order()
        .filter(|(_, n)| n.draining)
        .map(|(_, n)| n.name.as_str())
        .collect();
    assert_eq!(draining, ["own"]);
    let main = rolling.chains_in_order().next().unwrap().1;
    let new_base = id(&rolling, "own@1").unwrap();
    assert_eq!(
        rolling.route(main.route).unwrap().path[0],
        sluice_dataplane::plan::Hop::Set(new_base)
    );
    let old_route = v1.chains_in_order().next().unwrap().1.route;
    let r = rolling.route(old_route).unwrap();
    assert!(r.held && r.retired.is_some());
    // Retired: the old version is gone, and so is the hold.
    let done = plan_of(&spec(4, 2, ", generation: 1, replicas: 3"), Some(&rolling));
    assert!(id(&done, "own").is_none());
    assert!(done.route(old_route).is_none_or(|r| !r.held));
    assert_eq!(id(&done, "own@1"), id(&rolling, "own@1"), "kept running");
}
