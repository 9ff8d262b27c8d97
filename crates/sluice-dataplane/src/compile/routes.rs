//! Chains and their routes in a plan: a chain keeps its route while its
//! path is unchanged, gets a new one otherwise, and a route no chain uses
//! retires (kept for the packets on it, held for flows a rollout keeps).

use std::sync::Arc;

use sluice_spec::{Spec, SpecError};

use super::{err, IdMap};
use crate::plan::{ChainPlan, Hop, Plan, Route, MAX_CHAIN_NFS, MAX_ROUTES};
use crate::selector_index::Ingress;

/// Puts chain `c` (`id`, whose path is `resolved`) into `plan`: its
/// route, kept from `prev` if the path is the same, and its place in its
/// port's first-match order (after the chains placed before it). `nf`
/// gives the id routes reach for a spec NF name.
#[allow(clippy::too_many_arguments)]
pub(super) fn place_chain(
    spec: &Spec,
    c: &sluice_spec::ChainSpec,
    id: u16,
    resolved: &sluice_spec::ResolvedChain<'_>,
    nf: &dyn Fn(&str) -> u16,
    ports: &IdMap,
    prev: &Plan,
    plan: &mut Plan,
) -> Result<(), SpecError> {
    if resolved.nfs.len() > MAX_CHAIN_NFS {
        return Err(err(
            spec,
            c.location,
            format!("chains.{}", c.name),
            format!(
                "the chain passes {} NFs (following its `to` links); at most {MAX_CHAIN_NFS} are supported",
                resolved.nfs.len()
            ),
        ));
    }
    let mut path: Vec<Hop> = resolved.nfs.iter().map(|n| plan.hop_of(nf(n))).collect();
    path.push(Hop::Port(
        ports.get(resolved.output).expect("validated port name"),
    ));
    let from = ports.get(&c.from).expect("validated port name");
    let old = prev.chain(id).map(|pc| pc.route).filter(|&r| {
        prev.route(r)
            .is_some_and(|r| r.path == path && r.chain == id)
    });
    let route = match old {
        Some(r) => r,
        None => {
            let r = allocate_route(&mut plan.routes).ok_or_else(|| {
                err(
                    spec,
                    c.location,
                    format!("chains.{}", c.name),
                    "no route id is free",
                )
            })?;
            plan.routes[r as usize] = Some(Arc::new(Route::new(id, path)));
            r
        }
    };
    plan.ingress[from as usize].push(id, c.matcher.as_ref());
    plan.chains[id as usize] = Some(Arc::new(ChainPlan {
        name: c.name.clone(),
        from,
        matcher: c.matcher.clone(),
        route,
    }));
    plan.chain_order.push(id);
    Ok(())
}

/// Retires every route no chain of `plan` uses (it is kept for packets
/// inside), then marks the retired routes flows may stay on.
pub(super) fn retire_unused_routes(plan: &mut Plan) {
    let current: std::collections::HashSet<u16> =
        plan.chains.iter().flatten().map(|c| c.route).collect();
    for (i, r) in plan.routes.iter_mut().enumerate() {
        if let Some(r) = r {
            if r.retired.is_none() && !current.contains(&(i as u16)) {
                Arc::make_mut(r).retired = Some(plan.generation);
            }
        }
    }
    hold_routes(plan);
}

/// The plan of nothing, after `prev`: every port, NF and chain gone (their
/// ids free), every route retired for the packets still on it. What an
/// empty spec would compile to, if a spec could be empty (it needs a
/// chain): a daemon whose last chain moved away runs this.
pub fn nothing(prev: &Plan) -> Plan {
    let mut plan = Plan {
        ports: vec![None; prev.ports.len()],
        nfs: vec![None; prev.nfs.len()],
        chains: vec![None; prev.chains.len()],
        routes: prev.routes.clone(),
        ingress: vec![Ingress::default(); prev.ports.len()],
        flow_capacity: prev.flow_capacity,
        generation: prev.generation + 1,
        domains: prev.domains.clone(),
        sets: vec![None; prev.nfs.len()],
        ..Plan::default()
    };
    retire_unused_routes(&mut plan);
    plan
}

/// Marks the retired routes that flows may stay on ([`Route::held`]):
/// each passes a draining NF version, and every NF it passes still runs.
/// A route that passes a removed NF is never held, so the flows once kept
/// on it take their chain's route (and none is lost to `nf_removed`).
fn hold_routes(plan: &mut Plan) {
    let mut held = vec![false; plan.routes.len()];
    for (i, r) in plan.routes.iter().enumerate() {
        let Some(r) = r.as_ref().filter(|r| r.retired.is_some()) else {
            continue;
        };
        let alive = r.path.iter().all(|h| match h {
            Hop::Nf(i) => plan.nf(*i).is_some(),
            Hop::Set(b) => plan.set(*b).is_some(),
            Hop::Port(p) => plan.port(*p).is_some(),
        });
        let draining = |&id: &u16| plan.nf(id).is_some_and(|n| n.draining);
        held[i] = alive && r.path.iter().any(|h| plan.hop_nfs(h).iter().any(draining));
    }
    for (r, h) in plan.routes.iter_mut().zip(held) {
        // Copied only when it changes: most routes are shared with the
        // plan before.
        if let Some(r) = r.as_mut().filter(|r| r.held != h) {
            Arc::make_mut(r).held = h;
        }
    }
}

/// A route id: a never-used one while any is left, else the one retired
/// longest ago that no flow is held on.
fn allocate_route(routes: &mut Vec<Option<Arc<Route>>>) -> Option<u16> {
    if routes.len() < MAX_ROUTES {
        routes.push(None);
        return Some((routes.len() - 1) as u16);
    }
    let (i, _) = routes
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i, r.as_ref().filter(|r| !r.held)?.retired?)))
        .min_by_key(|&(_, gen)| gen)?;
    routes[i] = None;
    Some(i as u16)
}
