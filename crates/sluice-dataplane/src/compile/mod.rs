//! Spec → [`Plan`]: the only code that reads a [`Spec`].
//!
//! Compiling validates the whole spec (syntax was checked when it was
//! loaded; here every NF is built once, so a bad config fails before
//! anything changes), gives ports, NFs and chains ids that are stable
//! against the previous plan (same name, same id), reuses the previous
//! plan's NFs whose type, isolation and config are unchanged and whose
//! recorded name lookups still hold (a router with a million routes is
//! not rebuilt because a chain elsewhere changed), and gives every chain
//! whose path changed a new route while keeping the old one, retired, for
//! packets already on it.

use std::collections::HashMap;

use sluice_nf::{IngressPort, NfType, PortId};
use sluice_spec::{Location, Spec, SpecError, ValidSpec};

use crate::plan::{Plan, PortPlan};
use crate::recipe::Names;
use crate::selector_index::Ingress;

mod grow;
mod nfs;
mod routes;

pub use routes::nothing;
use routes::{place_chain, retire_unused_routes};

/// What compilation needs besides the spec: facts about the platform
/// that runs the plan.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Instances of every NF side by side (one per worker).
    pub replicas: u32,
    /// Flow-table capacity.
    pub flow_capacity: u32,
    /// Most ports, NFs and chains the platform holds.
    pub max_ports: usize,
    /// Most NFs.
    pub max_nfs: usize,
    /// Most chains.
    pub max_chains: usize,
}

impl Target {
    /// The target a spec describes on its own (`sluice run`, `sluice
    /// validate`): its own settings, room for exactly its objects.
    pub fn of_spec(spec: &Spec) -> Target {
        Target {
            replicas: u32::from(spec.settings.workers.max(1)),
            flow_capacity: spec.settings.flow_table.capacity,
            max_ports: spec.ports.len(),
            max_nfs: spec.nfs.iter().map(|n| n.instances() as usize).sum(),
            max_chains: spec.chains.len(),
        }
    }
}

/// Ids by name, keeping the previous plan's and filling holes otherwise
/// (never with an id the previous plan used).
struct IdMap {
    ids: HashMap<String, u16>,
}

impl IdMap {
    fn assign<'a>(
        names: impl Iterator<Item = &'a str> + Clone,
        prev: impl Iterator<Item = (u16, &'a str)>,
    ) -> IdMap {
        let wanted: std::collections::HashSet<&str> = names.clone().collect();
        let mut ids = HashMap::new();
        let mut taken = std::collections::HashSet::new();
        for (id, name) in prev {
            if wanted.contains(name) {
                ids.insert(name.to_string(), id);
            }
            // A gone name's id is not given to a new name in the same
            // apply: the diff would see one object renamed and changed
            // rather than one removed and one added (and a renamed chain
            // with the same path as unchanged). It is free again at the
            // next apply.
            taken.insert(id);
        }
        let mut next = 0u16;
        for name in names {
            if ids.contains_key(name) {
                continue;
            }
            while taken.contains(&next) {
                next += 1;
            }
            ids.insert(name.to_string(), next);
            taken.insert(next);
        }
        IdMap { ids }
    }

    /// Ids for `names`, none of which `table` (a plan's table) holds:
    /// the lowest ones free in it, in order, as [`IdMap::assign`] gives
    /// names that are new. A scan of the table, not of its entries'
    /// names.
    fn fresh<'a, T>(table: &[Option<T>], names: impl Iterator<Item = &'a str>) -> IdMap {
        let mut ids = HashMap::new();
        let mut next = 0usize;
        for name in names {
            while table.get(next).is_some_and(Option::is_some) {
                next += 1;
            }
            ids.insert(name.to_string(), next as u16);
            next += 1;
        }
        IdMap { ids }
    }

    fn get(&self, name: &str) -> Option<u16> {
        self.ids.get(name).copied()
    }

    fn table_len(&self) -> usize {
        self.ids
            .values()
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0)
    }
}

struct SpecNames<'a> {
    spec: &'a Spec,
    /// The spec's chains by name (every NF built resolves every chain),
    /// made on first use: most NF types look nothing up, and an
    /// addition's compile must not cost what the whole spec holds.
    chains: std::cell::OnceCell<sluice_spec::ChainIndex<'a>>,
    ports: &'a IdMap,
    /// Spec NF name → id of the instance routes and verdicts reach:
    /// replica 0 of its current version (made on first use, from
    /// `instance`).
    current: std::cell::OnceCell<HashMap<&'a str, u16>>,
    /// The id of an instance, by its plan name.
    instance: &'a dyn Fn(&str) -> Option<u16>,
}

impl<'a> SpecNames<'a> {
    fn new(spec: &'a Spec, ports: &'a IdMap, instance: &'a dyn Fn(&str) -> Option<u16>) -> Self {
        SpecNames {
            spec,
            chains: std::cell::OnceCell::new(),
            ports,
            current: std::cell::OnceCell::new(),
            instance,
        }
    }

    fn chains(&self) -> &sluice_spec::ChainIndex<'a> {
        self.chains.get_or_init(|| self.spec.chain_index())
    }
}

impl Names for SpecNames<'_> {
    fn nf(&self, name: &str) -> Option<u16> {
        let current = self.current.get_or_init(|| {
            (self.spec.nfs.iter())
                .map(|n| {
                    let id = (self.instance)(&nfs::base_name(n)).expect("assigned an id");
                    (n.name.as_str(), id)
                })
                .collect()
        });
        current.get(name).copied()
    }
    fn output_port(&self, name: &str) -> Option<u16> {
        let p = self.spec.port(name)?;
        p.kind.is_output().then(|| self.ports.get(name))?
    }
    fn input_port(&self, name: &str) -> Option<u16> {
        let p = self.spec.port(name)?;
        p.kind.is_input().then(|| self.ports.get(name))?
    }
    fn chain_ingress(&self, nf: &str) -> Vec<IngressPort> {
        let mut out: Vec<IngressPort> = Vec::new();
        for c in &self.spec.chains {
            // A chain that continues into another one passes its NFs too.
            let passes = self
                .chains()
                .resolve(&c.name)
                .is_some_and(|r| r.nfs.contains(&nf));
            let (Some(p), Some(id)) = (self.spec.port(&c.from), self.ports.get(&c.from)) else {
                continue;
            };
            if passes && !out.iter().any(|i| i.id.0 == id) {
                out.push(IngressPort {
                    id: PortId(id),
                    name: p.name.clone(),
                    kind: p.kind.kind_name(),
                    can_transmit: p.kind.is_output(),
                });
            }
        }
        out
    }
}

fn err(
    spec: &Spec,
    location: Location,
    path: impl Into<String>,
    msg: impl Into<String>,
) -> SpecError {
    SpecError::new(spec.source.as_str(), location, path, msg)
}

/// Compiles `spec` for `target`, keeping ids and unchanged NFs of `prev`.
pub fn compile(
    spec: &Spec,
    registry: &'static [NfType],
    target: &Target,
    prev: Option<&Plan>,
) -> Result<Plan, SpecError> {
    let type_names: Vec<&str> = registry.iter().map(|t| t.name).collect();
    spec.validate(&type_names)?;
    compile_valid(spec, registry, target, prev)
}

/// [`compile`] for a spec validated already (a [`sluice_spec::ValidSpec`],
/// checked against `registry`'s types): validating a whole spec again
/// cost a quarter of a daemon's time per created NF.
pub fn compile_checked(
    spec: &ValidSpec,
    registry: &'static [NfType],
    target: &Target,
    prev: Option<&Plan>,
) -> Result<Plan, SpecError> {
    compile_valid(spec, registry, target, prev)
}

/// [`compile_checked`] for an addition's result ([`ValidSpec::grown_from`])
/// when `prev` is the plan of the spec it grew from (the caller's word):
/// the running plan with the added objects placed, at a cost that does
/// not grow with the plan (`grow.rs`); the whole compile when the
/// addition reaches objects that ran already, or is not an addition.
pub fn compile_addition(
    spec: &ValidSpec,
    registry: &'static [NfType],
    target: &Target,
    prev: &Plan,
) -> Result<Plan, SpecError> {
    let grown = match spec.grown_from() {
        Some(from) => grow::grow(spec, from, registry, target, prev)?,
        None => None,
    };
    let Some(plan) = grown else {
        return compile_valid(spec, registry, target, Some(prev));
    };
    // Both ways must agree (every test that adds through a debug build
    // checks it).
    #[cfg(debug_assertions)]
    {
        let whole = compile_valid(spec, registry, target, Some(prev))?;
        assert_eq!(
            format!("{plan:#?}"),
            format!("{whole:#?}"),
            "an addition compiled alone differs from the whole compile"
        );
    }
    Ok(plan)
}

fn compile_valid(
    spec: &Spec,
    registry: &'static [NfType],
    target: &Target,
    prev: Option<&Plan>,
) -> Result<Plan, SpecError> {
    check_options(&spec.ports)?;
    // Every replica of every running version is an NF of the plan.
    let nf_names: Vec<String> = spec.nfs.iter().flat_map(nfs::instance_names).collect();
    check_capacity(
        spec,
        target,
        [spec.ports.len(), nf_names.len(), spec.chains.len()],
    )?;
    let empty = Plan::default();
    let prev = prev.unwrap_or(&empty);
    let ports = IdMap::assign(
        spec.ports.iter().map(|p| p.name.as_str()),
        prev.ports_in_order().map(|(i, p)| (i, p.name.as_str())),
    );
    let nf_ids = IdMap::assign(
        nf_names.iter().map(String::as_str),
        prev.nfs_in_order().map(|(i, n)| (i, n.name.as_str())),
    );
    let chain_ids = IdMap::assign(
        spec.chains.iter().map(|c| c.name.as_str()),
        prev.chains_in_order().map(|(i, c)| (i, c.name.as_str())),
    );
    let instance = |name: &str| nf_ids.get(name);
    let names = SpecNames::new(spec, &ports, &instance);
    let mut plan = Plan {
        ports: vec![None; ports.table_len()],
        nfs: vec![None; nf_ids.table_len()],
        chains: vec![None; chain_ids.table_len()],
        routes: prev.routes.clone(),
        ingress: vec![Ingress::default(); ports.table_len()],
        flow_capacity: target.flow_capacity,
        generation: prev.generation + 1,
        domains: spec
            .settings
            .domains
            .iter()
            .map(|d| d.name.clone())
            .collect(),
        sets: vec![None; nf_ids.table_len()],
        ..Plan::default()
    };
    for p in &spec.ports {
        let id = ports.get(&p.name).expect("assigned above");
        plan.ports[id as usize] = Some(PortPlan {
            name: p.name.clone(),
            kind: p.kind.clone(),
        });
        plan.port_order.push(id);
    }
    let all = nfs::Among::all(spec);
    nfs::add(
        spec, &all, registry, target, prev, &names, &nf_ids, &mut plan,
    )?;
    // Routes: a chain whose path is unchanged keeps its route.
    for c in &spec.chains {
        let id = chain_ids.get(&c.name).expect("assigned above");
        let resolved = names.chains().resolve(&c.name).ok_or_else(|| {
            err(
                spec,
                c.location,
                format!("chains.{}", c.name),
                "chain cannot be resolved",
            )
        })?;
        let hops = |n: &str| names.nf(n).expect("validated NF name");
        place_chain(spec, c, id, &resolved, &hops, &ports, prev, &mut plan)?;
    }
    retire_unused_routes(&mut plan);
    Ok(plan)
}

/// Checks the options of `ports` that only the NIC layer knows.
fn check_options(ports: &[sluice_spec::PortSpec]) -> Result<(), SpecError> {
    for p in ports {
        sluice_nic::check_options(&p.kind)?;
    }
    Ok(())
}

/// Refuses more ports, NF instances or chains than `target` holds.
fn check_capacity(
    spec: &Spec,
    target: &Target,
    [ports, nfs, chains]: [usize; 3],
) -> Result<(), SpecError> {
    for (what, n, max) in [
        ("ports", ports, target.max_ports),
        ("nfs", nfs, target.max_nfs),
        ("chains", chains, target.max_chains),
    ] {
        if n > max {
            return Err(err(
                spec,
                Location::GENERATED,
                what,
                format!("{n} {what} exceed the platform's capacity of {max} (set when it started)"),
            ));
        }
    }
    Ok(())
}
