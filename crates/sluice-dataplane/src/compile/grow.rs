//! Compiling an addition: the running plan, and the added objects only.
//!
//! A daemon that creates one NF while a thousand run compiled the whole
//! spec each time (1.4 ms at 1,000 NFs, `benches/compile.rs`), though an
//! addition changes nothing that runs: no id, route or built NF of the
//! spec it was added to can differ. So the plan of the grown spec is the
//! running plan (its NF entries shared, not copied) with the added ports,
//! NFs and chains placed the way [`super::compile`] would place them:
//! the lowest free ids in spec order, new routes, each chain after the
//! earlier ones of its port.
//!
//! That holds while the added objects are reached only by added chains.
//! An added chain through an NF that runs already, or into a chain that
//! does, changes that NF (the ports its chains start at, maybe its
//! wake-up policy), and an NF that looked up a name now added would get
//! another answer: such an addition is compiled whole. Debug builds
//! compile every addition both ways and compare the plans.

use std::collections::HashMap;

use sluice_nf::NfType;
use sluice_spec::{Grown, SpecError, ValidSpec};

use super::{check_options, nfs, place_chain, IdMap, SpecNames, Target};
use crate::plan::{Plan, PortPlan};
use crate::selector_index::Ingress;

/// The plan of `spec`, an addition's result, from `prev`, the plan of the
/// spec it grew from (the caller's word: it holds both). `Ok(None)` when
/// the addition reaches objects that run already and needs the whole
/// compile.
pub(super) fn grow(
    spec: &ValidSpec,
    from: Grown,
    registry: &'static [NfType],
    target: &Target,
    prev: &Plan,
) -> Result<Option<Plan>, SpecError> {
    let (new_ports, new_nfs, new_chains) = (
        &spec.ports[from.ports..],
        &spec.nfs[from.nfs..],
        &spec.chains[from.chains..],
    );
    // The added NFs by name, and the added chains' paths: only over them.
    let added: HashMap<&str, &sluice_spec::NfSpec> =
        new_nfs.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut paths = Vec::with_capacity(new_chains.len());
    for c in new_chains {
        match spec.resolve_among(&c.name, new_chains) {
            Some(r) if r.nfs.iter().all(|n| added.contains_key(n)) => paths.push(r),
            _ => return Ok(None),
        }
    }
    if prev.nfs.iter().flatten().any(|n| {
        n.recipe
            .asked_about()
            .any(|name| added.contains_key(name) || new_ports.iter().any(|p| p.name == name))
    }) {
        return Ok(None);
    }
    check_options(new_ports)?;
    let instances: Vec<String> = new_nfs.iter().flat_map(nfs::instance_names).collect();
    super::check_capacity(
        spec,
        target,
        [
            prev.port_order.len() + new_ports.len(),
            prev.nf_order.len() + instances.len(),
            prev.chain_order.len() + new_chains.len(),
        ],
    )?;
    // Ports are few: their ids as a whole compile gives them.
    let ports = IdMap::assign(
        spec.ports.iter().map(|p| p.name.as_str()),
        prev.ports_in_order().map(|(i, p)| (i, p.name.as_str())),
    );
    let nf_ids = IdMap::fresh(&prev.nfs, instances.iter().map(String::as_str));
    let chain_ids = IdMap::fresh(&prev.chains, new_chains.iter().map(|c| c.name.as_str()));
    // Names of NFs that ran already are looked up in the running plan,
    // indexed only if an added NF asks for one.
    let running = std::cell::OnceCell::new();
    let instance = |name: &str| {
        nf_ids.get(name).or_else(|| {
            let index: &HashMap<&str, u16> = running.get_or_init(|| {
                prev.nfs_in_order()
                    .map(|(i, n)| (n.name.as_str(), i))
                    .collect()
            });
            index.get(name).copied()
        })
    };
    let names = SpecNames::new(spec, &ports, &instance);

    let mut plan = prev.clone();
    plan.generation = prev.generation + 1;
    plan.flow_capacity = target.flow_capacity;
    let grow_to = |len: usize, ids: &IdMap| len.max(ids.table_len());
    let (port_len, nf_len) = (
        grow_to(plan.ports.len(), &ports),
        grow_to(plan.nfs.len(), &nf_ids),
    );
    plan.ports.resize(port_len, None);
    plan.ingress.resize(port_len, Ingress::default());
    plan.nfs.resize(nf_len, None);
    plan.sets.resize(nf_len, None);
    let chain_len = grow_to(plan.chains.len(), &chain_ids);
    plan.chains.resize(chain_len, None);
    for p in new_ports {
        let id = ports.get(&p.name).expect("assigned above");
        plan.ports[id as usize] = Some(PortPlan {
            name: p.name.clone(),
            kind: p.kind.clone(),
        });
        plan.port_order.push(id);
    }
    let among = nfs::Among {
        nfs: new_nfs,
        entries: nfs::chain_entries(new_nfs, new_chains),
        wakeup: spec.wakeup_rules_among(new_nfs, new_chains),
    };
    nfs::add(
        spec, &among, registry, target, prev, &names, &nf_ids, &mut plan,
    )?;
    for (c, resolved) in new_chains.iter().zip(&paths) {
        let id = chain_ids.get(&c.name).expect("assigned above");
        // Every NF of an added chain is an added one (checked above).
        let hops = |n: &str| {
            nf_ids
                .get(&nfs::base_name(added[n]))
                .expect("assigned above")
        };
        place_chain(spec, c, id, resolved, &hops, &ports, prev, &mut plan)?;
    }
    // No chain that ran changed its route, so no route retires, and the
    // retired ones pass the NFs they passed: which of them flows stay on
    // is as before.
    Ok(Some(plan))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile_addition, compile_checked};

    const REGISTRY: &[NfType] = sluice_nfs::REGISTRY;

    fn types() -> Vec<&'static str> {
        REGISTRY.iter().map(|t| t.name).collect()
    }

    fn target() -> Target {
        Target {
            replicas: 2,
            flow_capacity: 4096,
            max_ports: 16,
            max_nfs: 64,
            max_chains: 64,
        }
    }

    /// `n` forwarders, each in a chain of its own from `gen`.
    fn base(n: usize) -> String {
        let mut s = String::from(
            "ports:\n  - { name: gen, kind: generator }\n  - { name: out, kind: sink }\n  \
             - { name: cap, kind: sink }\nnfs:\n",
        );
        for i in 0..n {
            s += &format!("  - {{ name: n{i}, type: forwarder, isolation: process }}\n");
        }
        s += "chains:\n";
        for i in 0..n {
            s += &format!(
                "  - {{ name: c{i}, from: gen, match: {{ proto: tcp, dst_port: {} }}, nfs: [n{i}], to: out }}\n",
                100 + i
            );
        }
        s
    }

    /// The running plan of `text` (compiled after `before`'s, so ids may
    /// have holes), the grown spec, and both ways of compiling it.
    fn grow_both(before: &str, text: &str, addition: &str) -> (Option<Plan>, Plan) {
        let t = target();
        let first = sluice_spec::parse_str(before, "a.yaml", &types()).unwrap();
        let p0 = compile_checked(&first.into_valid(&types()).unwrap(), REGISTRY, &t, None).unwrap();
        let spec = sluice_spec::parse_str(text, "b.yaml", &types()).unwrap();
        let prev = compile_checked(
            &spec.clone().into_valid(&types()).unwrap(),
            REGISTRY,
            &t,
            Some(&p0),
        )
        .unwrap();
        let add = sluice_spec::parse_additions(addition, "add.yaml").unwrap();
        let grown = sluice_spec::add(Some(&spec), add, &types()).unwrap();
        let fast = grow(&grown, grown.grown_from().unwrap(), REGISTRY, &t, &prev).unwrap();
        // compile_addition compares both ways itself in debug builds.
        let whole = compile_addition(&grown, REGISTRY, &t, &prev).unwrap();
        (fast, whole)
    }

    fn same(fast: Option<Plan>, whole: &Plan) {
        let fast = fast.expect("compiled alone");
        assert_eq!(format!("{fast:#?}"), format!("{whole:#?}"));
    }

    #[test]
    fn an_nf_and_its_chain_compile_alone_as_the_whole_spec_would() {
        let b = base(5);
        let (fast, whole) = grow_both(
            &b,
            &b,
            "nfs:\n  - { name: x, type: forwarder, isolation: process }\n\
             chains:\n  - { name: cx, from: gen, match: { proto: udp }, nfs: [x], to: out }\n",
        );
        assert_eq!(whole.nf_order.len(), 6);
        same(fast, &whole);
    }

    #[test]
    fn added_objects_take_the_ids_a_removal_freed() {
        // n1 and c1 are gone from the running spec: their ids are free.
        let before = base(4);
        let now = base(4)
            .replace("  - { name: n1, type: forwarder, isolation: process }\n", "")
            .replace(
                "  - { name: c1, from: gen, match: { proto: tcp, dst_port: 101 }, nfs: [n1], to: out }\n",
                "",
            );
        let (fast, whole) = grow_both(
            &before,
            &now,
            "nfs:\n  - { name: y, type: forwarder, replicas: 3 }\n  - { name: z, type: tee, config: { to: cap } }\n\
             chains:\n  - { name: cy, from: gen, match: { proto: udp }, nfs: [y, z], to: out }\n",
        );
        same(fast, &whole);
    }

    #[test]
    fn ports_and_chains_that_continue_into_added_chains_compile_alone() {
        let b = base(3);
        let (fast, whole) = grow_both(
            &b,
            &b,
            "ports:\n  - { name: g2, kind: generator }\n\
             nfs:\n  - { name: p, type: forwarder }\n  - { name: q, type: forwarder, isolation: process }\n\
             chains:\n  - { name: cq, from: g2, match: { proto: udp }, nfs: [q], to: cp }\n  \
             - { name: cp, from: g2, match: { proto: tcp }, nfs: [p], to: out }\n",
        );
        same(fast, &whole);
    }

    #[test]
    fn an_addition_that_reaches_running_objects_is_compiled_whole() {
        let b = base(3);
        // A chain through a running NF changes the ports its chains
        // start at.
        let (fast, _) = grow_both(
            &b,
            &b,
            "chains:\n  - { name: cz, from: gen, match: { proto: udp }, nfs: [n0], to: out }\n",
        );
        assert!(fast.is_none());
        // So does one that continues into a running chain.
        let (fast, _) = grow_both(
            &b,
            &b,
            "nfs:\n  - { name: w, type: forwarder }\n\
             chains:\n  - { name: cw, from: gen, match: { proto: udp }, nfs: [w], to: c1 }\n",
        );
        assert!(fast.is_none());
    }

    #[test]
    fn capacity_is_refused_as_the_whole_compile_refuses_it() {
        let b = base(63); // 63 instances of 64
        let spec = sluice_spec::parse_str(&b, "b.yaml", &types()).unwrap();
        let t = target();
        let prev = compile_checked(
            &spec.clone().into_valid(&types()).unwrap(),
            REGISTRY,
            &t,
            None,
        )
        .unwrap();
        let add = sluice_spec::parse_additions(
            "nfs:\n  - { name: x, type: forwarder, replicas: 2 }\n\
             chains:\n  - { name: cx, from: gen, match: { proto: udp }, nfs: [x], to: out }\n",
            "add.yaml",
        )
        .unwrap();
        let grown = sluice_spec::add(Some(&spec), add, &types()).unwrap();
        let fast = grow(&grown, grown.grown_from().unwrap(), REGISTRY, &t, &prev).unwrap_err();
        let whole = compile_checked(&grown, REGISTRY, &t, Some(&prev)).unwrap_err();
        assert_eq!(fast.to_string(), whole.to_string());
        assert!(fast.to_string().contains("65 nfs exceed"), "{fast}");
    }
}
