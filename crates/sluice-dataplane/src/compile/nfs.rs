//! The NFs of a plan: each spec NF built once (or kept from the previous
//! plan) and laid out as its replicas.

use std::sync::Arc;

use sluice_mem::MAX_BATCH;
use sluice_nf::NfType;
use sluice_spec::{Spec, SpecError};

use super::{IdMap, SpecNames, Target};
use crate::naming::instance_name;
use crate::plan::{NfPlan, Plan};
use crate::recipe::NfRecipe;
use crate::replicas::ReplicaSet;
use crate::wakeup::WakePolicy;

/// One version of a spec NF: the current one, or the one a rolling
/// upgrade retires.
struct Version<'s> {
    generation: u32,
    config: &'s sluice_spec::ConfigNode,
    replicas: u32,
    draining: bool,
}

/// The versions of `n` that run: its current one, and the draining one
/// while a rollout retires it.
fn versions(n: &sluice_spec::NfSpec) -> impl Iterator<Item = Version<'_>> {
    let current = Version {
        generation: n.generation,
        config: &n.config,
        replicas: n.replicas,
        draining: false,
    };
    let old = n.draining.as_ref().map(|d| Version {
        generation: d.generation,
        config: &d.config,
        replicas: d.replicas,
        draining: true,
    });
    std::iter::once(current).chain(old)
}

/// The plan names of every instance of `n`: each version's replicas.
pub(super) fn instance_names(n: &sluice_spec::NfSpec) -> impl Iterator<Item = String> + '_ {
    versions(n)
        .flat_map(move |v| (0..v.replicas).map(move |k| instance_name(&n.name, v.generation, k)))
}

/// The plan name of the instance routes to `n` go to: replica 0 of its
/// current version.
pub(super) fn base_name(n: &sluice_spec::NfSpec) -> String {
    instance_name(&n.name, n.generation, 0)
}

/// Some NFs of a spec, with what their chains say of them.
pub(super) struct Among<'s> {
    /// The NFs.
    pub nfs: &'s [sluice_spec::NfSpec],
    /// Those of them that are the first process NF of a chain.
    pub entries: std::collections::HashSet<&'s str>,
    /// Their wake-up rules.
    pub wakeup: std::collections::HashMap<&'s str, sluice_spec::WakeRule>,
}

impl<'s> Among<'s> {
    /// Every NF of `spec`.
    pub fn all(spec: &'s Spec) -> Among<'s> {
        Among {
            nfs: &spec.nfs,
            entries: chain_entries(&spec.nfs, &spec.chains),
            wakeup: spec.wakeup_rules(),
        }
    }
}

/// Puts the NFs of `among` (all of `spec`'s, or an addition's, which only
/// its chains pass) into `plan` under their ids in `nf_ids`, with their
/// replicas and their set (and, during a rollout, the draining version
/// the same way), keeping `prev`'s instances that still serve.
#[allow(clippy::too_many_arguments)]
pub(super) fn add(
    spec: &Spec,
    among: &Among<'_>,
    registry: &'static [NfType],
    target: &Target,
    prev: &Plan,
    names: &SpecNames<'_>,
    nf_ids: &IdMap,
    plan: &mut Plan,
) -> Result<(), SpecError> {
    let (entries, wakeup) = (&among.entries, &among.wakeup);
    for n in among.nfs {
        let nf_type = registry
            .iter()
            .find(|t| t.name == n.nf_type)
            .expect("validate() checked NF types");
        // A per-flow pool is a set even of one: its member is reset
        // between flows.
        let per_flow = n.steer.exclusive();
        for v in versions(n) {
            // Instances side by side: one per worker, times the replicas.
            let copies = target.replicas.saturating_mul(v.replicas);
            let base = nf_ids
                .get(&instance_name(&n.name, v.generation, 0))
                .expect("assigned above");
            let mut built: Option<NfPlan> = None;
            let mut members = Vec::with_capacity(v.replicas as usize);
            for k in 0..v.replicas {
                let name = instance_name(&n.name, v.generation, k);
                let id = nf_ids.get(&name).expect("assigned above");
                // A type tells one copy from several, not how many (the
                // `Resolver::replicas` contract): a replica kept across a
                // change of `replicas` keeps running.
                let kept = prev
                    .nfs
                    .get(id as usize)
                    .and_then(Option::as_ref)
                    .filter(|p| {
                        std::ptr::eq(p.nf_type, nf_type)
                            && p.isolation == n.isolation
                            && p.recipe.config == *v.config
                            && (p.recipe.replicas > 1) == (copies > 1)
                            && p.recipe.flow_capacity == target.flow_capacity
                            && p.recipe.answers_hold(names)
                            && p.sandbox == crate::host::SandboxPlan::of(&n.sandbox_or_default())
                            && p.domain == domain_of(spec, n)
                    });
                let set = (v.replicas > 1 || per_flow).then_some(base);
                // An inline NF never sleeps: no rule applies to it.
                let wake = match n.isolation {
                    sluice_spec::Isolation::Process => {
                        let entry = entries.contains(n.name.as_str());
                        let rule = wakeup.get(n.name.as_str()).copied();
                        WakePolicy::for_hop(&rule.unwrap_or(spec.settings.wakeup.rule), entry)
                    }
                    sluice_spec::Isolation::Inline => WakePolicy::IMMEDIATE,
                };
                let nf = match kept {
                    // Unchanged in every respect: the running plan's entry
                    // itself, shared rather than copied.
                    Some(p)
                        if p.name == name
                            && p.set == set
                            && p.draining == v.draining
                            && p.cpu_weight == n.cpu_weight
                            && p.wakeup == wake =>
                    {
                        Arc::clone(p)
                    }
                    _ => {
                        let mut nf = match (kept, &built) {
                            (Some(p), _) => NfPlan::clone(p),
                            (None, Some(b)) => b.clone(),
                            (None, None) => {
                                let b = build_nf(nf_type, n, v.config, names, copies, target)?;
                                built.insert(b).clone()
                            }
                        };
                        nf.name = name;
                        nf.set = set;
                        nf.draining = v.draining;
                        nf.cpu_weight = n.cpu_weight;
                        nf.wakeup = wake;
                        Arc::new(nf)
                    }
                };
                if per_flow && !nf.resets && n.reset == sluice_spec::ResetMode::Hook {
                    return Err(SpecError::new(
                        spec.source.as_str(),
                        n.location,
                        format!("nfs.{}.steer", n.name),
                        format!(
                            "steer: {} recycles an instance from one flow to the next, and \
                             type {} cannot reset one to its just-built state (its `reset` hook); \
                             use `reset: refork` (a fresh process per flow), or hash or \
                             shortest_queue",
                            n.steer, n.nf_type
                        ),
                    ));
                }
                plan.nfs[id as usize] = Some(nf);
                plan.nf_order.push(id);
                members.push(id);
            }
            if v.replicas > 1 || per_flow {
                let mut set = ReplicaSet::new(members, n.steer);
                set.fallback = n.fallback;
                set.class = n.class;
                set.reset = n.reset;
                plan.sets[base as usize] = Some(set);
            }
        }
    }
    Ok(())
}

fn build_nf(
    nf_type: &'static NfType,
    n: &sluice_spec::NfSpec,
    config: &sluice_spec::ConfigNode,
    names: &SpecNames<'_>,
    copies: u32,
    target: &Target,
) -> Result<NfPlan, SpecError> {
    // Building must not touch files (this is all `sluice validate` does):
    // NFs open them when they first run. The built instance also names its
    // drop reasons and counters when they depend on its config.
    let (recipe, nf) = NfRecipe::first_build(
        nf_type,
        &n.name,
        config,
        names,
        copies,
        target.flow_capacity,
    )?;
    Ok(NfPlan {
        name: n.name.clone(),
        nf_type,
        isolation: n.isolation,
        recipe,
        drop_reasons: nf
            .drop_reason_names()
            .unwrap_or_else(|| nf_type.drop_reasons.iter().map(|r| r.to_string()).collect()),
        counters: nf.counter_names().unwrap_or_else(|| {
            nf_type
                .counters
                .iter()
                .enumerate()
                .map(|(i, c)| (i, c.to_string()))
                .collect()
        }),
        alloc_reserve: nf.alloc_reserve().min(MAX_BATCH as u32),
        live_reconfigure: nf.live_reconfigure(),
        cpu_weight: n.cpu_weight,
        // Set by the caller, which sees the chains.
        wakeup: WakePolicy::IMMEDIATE,
        sandbox: crate::host::SandboxPlan::of(&n.sandbox_or_default()),
        domain: domain_of(names.spec, n),
        // Set by the caller, which knows the replica and version.
        set: None,
        draining: false,
        resets: nf.resets(),
        state_version: nf.state_version(),
    })
}

/// NF `n`'s trust domain (validation checked it names one).
fn domain_of(spec: &Spec, n: &sluice_spec::NfSpec) -> u8 {
    spec.domain_index(n).unwrap_or(0) as u8
}

/// The NFs of `nfs` that are the first process NF of one of `chains`
/// (where `auto` may hold packets, `WakePolicy::for_hop`). Built once per
/// compile: thousands of NFs and chains must not cost a scan per NF.
pub(super) fn chain_entries<'s>(
    nfs: &'s [sluice_spec::NfSpec],
    chains: &'s [sluice_spec::ChainSpec],
) -> std::collections::HashSet<&'s str> {
    let process: std::collections::HashSet<&str> = nfs
        .iter()
        .filter(|n| n.isolation == sluice_spec::Isolation::Process)
        .map(|n| n.name.as_str())
        .collect();
    chains
        .iter()
        .filter_map(|c| {
            c.nfs
                .iter()
                .map(String::as_str)
                .find(|n| process.contains(n))
        })
        .collect()
}
