//! NF replicas (`nfs[].replicas`, `steer`): the compiler's expansion and
//! stable ids, and end-to-end runs with inline replicas showing that each
//! flow, packets and end alike, stays with one replica. Process replicas
//! and live scaling are tested through the binary (sluice-cli).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use sluice_dataplane::compile::{compile, Target};
use sluice_dataplane::plan::{Hop, Plan};
use sluice_dataplane::{run, RunOptions, RunReport};
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_packet::FlowKey;
use sluice_spec::{SpecError, Steer};

/// Which instance saw each flow first, over every instance of every test
/// in this file (keys carry the test's own ports, so tests do not meet).
static OWNERS: Mutex<Option<HashMap<(u16, FlowKey), u32>>> = Mutex::new(None);
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

/// Claims every flow it sees for itself and counts packets of flows
/// another instance claimed first (`foreign`), flows it claimed and the
/// ends of flows it never claimed (`foreign_ends`).
struct Owner {
    me: u32,
    tag: u16,
    mine: HashMap<u32, FlowKey>,
}

impl NetworkFunction for Owner {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let mut foreign = 0;
        let mut claimed = 0;
        let mut owners = OWNERS.lock().unwrap();
        let owners = owners.get_or_insert_with(HashMap::new);
        batch.for_each(|p| {
            let key = sluice_packet::flow_key(p.data()).unwrap().canonical();
            let owner = *owners.entry((self.tag, key)).or_insert(self.me);
            if owner != self.me {
                foreign += 1;
            } else if self.mine.insert(p.flow_id(), key).is_none() {
                claimed += 1;
            }
        });
        ctx.count(0, batch.len() as u64);
        ctx.count(1, foreign);
        ctx.count(2, claimed);
    }

    fn flow_end(&mut self, flow: u32, ctx: &mut Context<'_>) {
        if self.mine.remove(&flow).is_none() {
            ctx.count(3, 1);
        }
    }
}

fn build_owner(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let tag = ctx.config.get("tag").and_then(|n| n.as_u64()).unwrap_or(0) as u16;
    Ok(Box::new(Owner {
        me: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
        tag,
        mine: HashMap::new(),
    }))
}

/// Sends every packet to the NF named `to` (`ToNf`), skipping the hops
/// between.
struct Detour(sluice_nf::NfId);

impl NetworkFunction for Detour {
    fn process(&mut self, batch: &mut Batch<'_>, _ctx: &mut Context<'_>) {
        let to = self.0;
        batch.for_each(|p| p.set_verdict(sluice_nf::Verdict::ToNf(to)));
    }
}

fn build_detour(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let to = ctx
        .config
        .get("to")
        .and_then(|n| n.as_str())
        .unwrap_or_default();
    let id = ctx
        .resolver
        .nf(to)
        .ok_or_else(|| ctx.config.error(format!("no NF named {to}")))?;
    Ok(Box::new(Detour(id)))
}

static REGISTRY: &[NfType] = &[
    NfType {
        name: "detour",
        summary: "test NF",
        drop_reasons: &[],
        counters: &[],
        build: build_detour,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    NfType {
        name: "owner",
        summary: "test NF",
        drop_reasons: &[],
        counters: &["packets", "foreign", "claimed", "foreign_ends"],
        build: build_owner,
        frames: sluice_nf::FrameNeeds::MtuFrames,
    },
    sluice_nfs::monitor::TYPE,
    sluice_nfs::forwarder::TYPE,
];

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

/// The report rows of NF `name`'s replicas, replica 0 first.
fn rows<'r>(r: &'r RunReport, name: &str) -> Vec<&'r sluice_dataplane::report::NfReport> {
    r.nfs
        .iter()
        .filter(|n| sluice_dataplane::naming::instance_of(&n.name).nf == name)
        .collect()
}

fn sum(rows: &[&sluice_dataplane::report::NfReport], counter: &str) -> u64 {
    rows.iter().map(|n| n.counters[counter]).sum()
}

const TCP_FLOWS: &str = "ports:\n  - { name: gen, kind: generator, flows: 8, protocol: tcp, size: 64, count: 4000, rate_pps: 200000, packets_per_flow: 10 }\n  - { name: out, kind: sink }\n";

#[test]
fn each_flow_and_its_end_stay_with_one_replica_under_either_steering() {
    for (tag, steer) in [(1, "hash"), (2, "shortest_queue")] {
        let spec = format!(
            "{TCP_FLOWS}nfs:\n  - {{ name: a, type: owner, isolation: inline, replicas: 3, steer: {steer}, config: {{ tag: {tag} }} }}\n  - {{ name: m, type: monitor, isolation: inline, replicas: 2, steer: {steer} }}\nchains:\n  - {{ name: c, from: gen, nfs: [a, m], to: out }}\n"
        );
        let r = run_spec(&spec);
        assert_eq!(r.packets_out, 4000, "{r:#?}");
        // 4000 packets / 10 per connection: 400 connections, each its own
        // flow, each closed by FIN.
        assert_eq!(r.flows.created, 400, "{r:#?}");
        let a = rows(&r, "a");
        let names: Vec<&str> = a.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "a.1", "a.2"]);
        assert_eq!(a.iter().map(|n| n.packets).sum::<u64>(), 4000);
        assert!(
            a.iter().all(|n| n.packets > 0),
            "{steer}: a replica idle: {a:#?}"
        );
        assert_eq!(sum(&a, "foreign"), 0, "{steer}: a flow met two replicas");
        assert_eq!(sum(&a, "claimed"), 400, "{steer}");
        // Every flow's end reached the replica that served it, and only it.
        assert_eq!(sum(&a, "foreign_ends"), 0, "{steer}");
        let m = rows(&r, "m");
        assert_eq!(m.len(), 2);
        assert!(m.iter().all(|n| n.packets > 0), "{steer}: {m:#?}");
        assert_eq!(sum(&m, "flows_ended"), 400, "{steer}");
        assert_eq!(sum(&m, "flows_active"), 0, "{steer}");
    }
}

#[test]
fn hash_steering_spreads_flows_evenly_over_the_replicas() {
    let spec = "ports:\n  - { name: gen, kind: generator, flows: 4000, protocol: udp, size: 64, count: 40000, rate_pps: 1000000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: f, type: forwarder, isolation: inline, replicas: 4 }\nchains:\n  - { name: c, from: gen, nfs: [f], to: out }\n";
    let r = run_spec(spec);
    assert_eq!(r.packets_out, 40_000);
    let f = rows(&r, "f");
    assert_eq!(f.len(), 4);
    for n in &f {
        // 10,000 each on average; jump hashing of 4,000 flows keeps every
        // replica within a few percent.
        assert!((8_500..11_500).contains(&n.packets), "{f:#?}");
    }
}

/// An NF named elsewhere (here a `ToNf` verdict by name, which resolves
/// to replica 0's id) means the whole set: the packet skips ahead to the
/// set's hop and reaches its flow's replica, like the route's own.
#[test]
fn naming_an_nf_with_replicas_reaches_the_flows_replica() {
    let spec = format!(
        "{TCP_FLOWS}nfs:\n  - {{ name: d, type: detour, isolation: inline, config: {{ to: m }} }}\n  - {{ name: x, type: forwarder, isolation: inline }}\n  - {{ name: m, type: monitor, isolation: inline, replicas: 3 }}\nchains:\n  - {{ name: c, from: gen, nfs: [d, x, m], to: out }}\n"
    );
    let r = run_spec(&spec);
    assert_eq!(r.packets_out, 4000, "{r:#?}");
    assert_eq!(rows(&r, "x")[0].packets, 0, "skipped ahead");
    let m = rows(&r, "m");
    assert_eq!(m.iter().map(|n| n.packets).sum::<u64>(), 4000);
    assert!(m.iter().all(|n| n.packets > 0), "{m:#?}");
    assert_eq!(sum(&m, "flows_ended"), 400);
    assert_eq!(sum(&m, "flows_active"), 0);
}

fn plan_of(text: &str, prev: Option<&Plan>) -> Result<Plan, SpecError> {
    let spec = sluice_spec::parse_str(text, "<test>", &names()).unwrap();
    compile(&spec, REGISTRY, &Target::of_spec(&spec), prev)
}

fn spec_with(replicas: u32) -> String {
    format!("{TCP_FLOWS}nfs:\n  - {{ name: m, type: monitor, replicas: {replicas}, steer: shortest_queue }}\n  - {{ name: z, type: forwarder }}\nchains:\n  - {{ name: c, from: gen, nfs: [m, z], to: out }}\n")
}

#[test]
fn replicas_are_nfs_of_the_plan_with_stable_ids_and_one_set_hop() {
    let two = plan_of(&spec_with(2), None).unwrap();
    let id = |p: &Plan, name: &str| {
        p.nfs_in_order()
            .find(|(_, n)| n.name == name)
            .map(|(i, _)| i)
    };
    let (m0, m1, z) = (
        id(&two, "m").unwrap(),
        id(&two, "m.1").unwrap(),
        id(&two, "z").unwrap(),
    );
    let set = two.set(m0).unwrap();
    assert_eq!(set.members, [m0, m1]);
    assert_eq!(set.steer, Steer::ShortestQueue);
    assert_eq!(two.nf(m1).unwrap().set, Some(m0));
    assert_eq!(two.nf(z).unwrap().set, None);
    assert_eq!(
        two.chain_path(0).unwrap(),
        [Hop::Set(m0), Hop::Nf(z), Hop::Port(1)]
    );
    // Scaling out keeps the replicas there were (same ids, same route)
    // and adds one at the end.
    let three = plan_of(&spec_with(3), Some(&two)).unwrap();
    assert_eq!(id(&three, "m"), Some(m0));
    assert_eq!(id(&three, "m.1"), Some(m1));
    let m2 = id(&three, "m.2").unwrap();
    assert_eq!(three.set(m0).unwrap().members, [m0, m1, m2]);
    assert!(three.nf(m1).unwrap().same_build(two.nf(m1).unwrap()));
    assert_eq!(
        three.chains[0].as_ref().unwrap().route,
        two.chains[0].as_ref().unwrap().route
    );
    // Scaling in to one: no set, a plain hop, replica 0 still there.
    let one = plan_of(&spec_with(1), Some(&three)).unwrap();
    assert_eq!(id(&one, "m"), Some(m0));
    assert_eq!(id(&one, "m.1"), None);
    assert!(one.set(m0).is_none());
    assert_eq!(one.chain_path(0).unwrap()[0], Hop::Nf(m0));
}

#[test]
fn replicas_count_against_the_platforms_nf_capacity() {
    let spec = sluice_spec::parse_str(&spec_with(8), "<test>", &names()).unwrap();
    let target = Target {
        max_nfs: 8,
        ..Target::of_spec(&spec)
    };
    let e = compile(&spec, REGISTRY, &target, None).unwrap_err();
    assert_eq!(e.field, "nfs");
    assert!(
        e.message
            .contains("9 nfs exceed the platform's capacity of 8"),
        "{e}"
    );
}
