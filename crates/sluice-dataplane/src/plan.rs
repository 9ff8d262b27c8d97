//! The spec compiled for execution: names become indices, chains become
//! flat paths of hops, and every NF config is built once up front so that a
//! bad config fails before anything starts.

use sluice_mem::MAX_BATCH;
use sluice_nf::{BuildContext, IngressPort, NetworkFunction, NfId, NfType, PortId, Resolver};
use sluice_packet::flow::FlowKey;
use sluice_spec::{ConfigNode, Isolation, MatchSpec, PortKind, Spec, SpecError};

/// One step of a chain's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// Visit NF `i`.
    Nf(u16),
    /// Leave through port `i`.
    Port(u16),
}

/// A port of the plan.
#[derive(Debug, Clone)]
pub struct PortPlan {
    /// Name from the spec.
    pub name: String,
    /// Kind and settings.
    pub kind: PortKind,
}

/// An NF instance of the plan.
#[derive(Debug, Clone)]
pub struct NfPlan {
    /// Name from the spec.
    pub name: String,
    /// Its type.
    pub nf_type: &'static NfType,
    /// Inline or process.
    pub isolation: Isolation,
    /// Its config node.
    pub config: ConfigNode,
    /// Names of its local drop reasons (the type's, or the instance's own
    /// when they depend on config, as in an element graph).
    pub drop_reasons: Vec<String>,
    /// Names of its counters by index (indices from `NF_COUNTERS` on are
    /// extended counters).
    pub counters: Vec<(usize, String)>,
    /// Spare buffers a process instance keeps for allocation (capped at a
    /// batch), from the validation build.
    pub alloc_reserve: u32,
}

/// A chain of the plan.
#[derive(Debug, Clone)]
pub struct ChainPlan {
    /// Name from the spec.
    pub name: String,
    /// Ingress port index.
    pub from: u16,
    /// Traffic selector (`None`: everything from the port).
    pub matcher: Option<MatchSpec>,
    /// NFs in order, then the output port.
    pub path: Vec<Hop>,
}

/// The executable plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Ports in spec order.
    pub ports: Vec<PortPlan>,
    /// NFs in spec order (index = NF slot).
    pub nfs: Vec<NfPlan>,
    /// Chains in spec order.
    pub chains: Vec<ChainPlan>,
    /// Per port: chains starting there, in first-match order.
    pub ingress: Vec<Vec<u16>>,
    /// Flow-table capacity (NFs size per-flow state by it).
    pub flow_capacity: u32,
}

/// The spec's names, how many instances ran before this one, and the
/// name of the NF being built.
struct PlanResolver<'a>(&'a Spec, u32, &'a str);

impl Resolver for PlanResolver<'_> {
    fn replicas(&self) -> u32 {
        u32::from(self.0.settings.workers.max(1))
    }
    fn restarts(&self) -> u32 {
        self.1
    }
    fn nf(&self, name: &str) -> Option<NfId> {
        self.0
            .nfs
            .iter()
            .position(|n| n.name == name)
            .map(|i| NfId(i as u16))
    }
    fn port(&self, name: &str) -> Option<PortId> {
        self.0
            .ports
            .iter()
            .position(|p| p.name == name && p.kind.is_output())
            .map(|i| PortId(i as u16))
    }
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.0
            .ports
            .iter()
            .position(|p| p.name == name && p.kind.is_input())
            .map(|i| PortId(i as u16))
    }
    fn chain_ingress(&self) -> Vec<IngressPort> {
        let spec = self.0;
        let mut out: Vec<IngressPort> = Vec::new();
        for c in &spec.chains {
            // Chain links count: a chain that continues into another one
            // passes that one's NFs too.
            let passes = spec
                .resolve_chain(&c.name)
                .is_some_and(|r| r.nfs.contains(&self.2));
            if !passes {
                continue;
            }
            let Some(i) = spec.ports.iter().position(|p| p.name == c.from) else {
                continue;
            };
            if !out.iter().any(|p| usize::from(p.id.0) == i) {
                let p = &spec.ports[i];
                out.push(IngressPort {
                    id: PortId(i as u16),
                    name: p.name.clone(),
                    kind: p.kind.kind_name(),
                    can_transmit: p.kind.is_output(),
                });
            }
        }
        out
    }
}

impl Plan {
    /// Compiles a validated spec against the NF types in `registry`.
    pub fn build(spec: &Spec, registry: &'static [NfType]) -> Result<Plan, SpecError> {
        let names: Vec<&str> = registry.iter().map(|t| t.name).collect();
        spec.validate(&names)?;
        for p in &spec.ports {
            sluice_nic::check_options(&p.kind)?;
        }
        let port_index = |name: &str| {
            spec.ports
                .iter()
                .position(|p| p.name == name)
                .map(|i| i as u16)
        };
        let nf_index = |name: &str| {
            spec.nfs
                .iter()
                .position(|n| n.name == name)
                .map(|i| i as u16)
        };
        let nfs = spec
            .nfs
            .iter()
            .map(|n| {
                let nf_type = registry
                    .iter()
                    .find(|t| t.name == n.nf_type)
                    .expect("validate() checked NF types");
                NfPlan {
                    name: n.name.clone(),
                    nf_type,
                    isolation: n.isolation,
                    config: n.config.clone(),
                    drop_reasons: nf_type.drop_reasons.iter().map(|r| r.to_string()).collect(),
                    counters: nf_type
                        .counters
                        .iter()
                        .enumerate()
                        .map(|(i, c)| (i, c.to_string()))
                        .collect(),
                    alloc_reserve: 0,
                }
            })
            .collect::<Vec<_>>();
        let mut chains = Vec::new();
        for c in &spec.chains {
            let resolved = spec.resolve_chain(&c.name).ok_or_else(|| {
                SpecError::new(
                    spec.source.as_str(),
                    c.location,
                    format!("chains.{}", c.name),
                    "chain cannot be resolved",
                )
            })?;
            let mut path: Vec<Hop> = resolved
                .nfs
                .iter()
                .map(|n| Hop::Nf(nf_index(n).expect("validated NF name")))
                .collect();
            path.push(Hop::Port(
                port_index(resolved.output).expect("validated port name"),
            ));
            chains.push(ChainPlan {
                name: c.name.clone(),
                from: port_index(&c.from).expect("validated port name"),
                matcher: c.matcher.clone(),
                path,
            });
        }
        let mut ingress = vec![Vec::new(); spec.ports.len()];
        for (i, c) in chains.iter().enumerate() {
            ingress[c.from as usize].push(i as u16);
        }
        let mut plan = Plan {
            ports: spec
                .ports
                .iter()
                .map(|p| PortPlan {
                    name: p.name.clone(),
                    kind: p.kind.clone(),
                })
                .collect(),
            nfs,
            chains,
            ingress,
            flow_capacity: spec.settings.flow_table.capacity,
        };
        // Build every NF once so config errors surface before anything runs
        // (this is all `sluice validate` does, so building must not touch
        // files: NFs open them when they first run). The built instance
        // also names its drop reasons and counters when they depend on its
        // config.
        for i in 0..plan.nfs.len() {
            let nf = plan.build_nf(spec, i, 0)?;
            if let Some(names) = nf.drop_reason_names() {
                plan.nfs[i].drop_reasons = names;
            }
            if let Some(names) = nf.counter_names() {
                plan.nfs[i].counters = names;
            }
            plan.nfs[i].alloc_reserve = nf.alloc_reserve().min(MAX_BATCH as u32);
        }
        Ok(plan)
    }

    /// Builds an instance of NF `i`; `restarts` instances of it ran before
    /// this one in this run ([`Resolver::restarts`]).
    pub fn build_nf(
        &self,
        spec: &Spec,
        i: usize,
        restarts: u32,
    ) -> Result<Box<dyn NetworkFunction>, SpecError> {
        let nf = &self.nfs[i];
        let ctx = BuildContext {
            name: &nf.name,
            config: &nf.config,
            resolver: &PlanResolver(spec, restarts, &nf.name),
            flow_capacity: self.flow_capacity,
        };
        (nf.nf_type.build)(&ctx)
    }

    /// The first chain from `port` whose selector matches `key` (any chain
    /// whose selector is absent matches everything).
    pub fn classify(&self, port: u16, key: &FlowKey) -> Option<u16> {
        self.ingress.get(port as usize)?.iter().copied().find(|&c| {
            self.chains[c as usize]
                .matcher
                .as_ref()
                .is_none_or(|m| matches(m, key))
        })
    }

    /// The chain for frames without a 5-tuple (ARP, other non-IP): the
    /// first match-everything chain from `port`.
    pub fn classify_flowless(&self, port: u16) -> Option<u16> {
        self.ingress.get(port as usize)?.iter().copied().find(|&c| {
            self.chains[c as usize]
                .matcher
                .as_ref()
                .is_none_or(|m| m.is_match_all())
        })
    }
}

/// Whether flow `key` satisfies selector `m`.
pub fn matches(m: &MatchSpec, key: &FlowKey) -> bool {
    if m.proto.is_some_and(|p| p != key.proto) {
        return false;
    }
    if m.ip_version.is_some_and(|v| v != key.ip_version) {
        return false;
    }
    if m.src.as_ref().is_some_and(|n| !n.contains(&key.src_ip())) {
        return false;
    }
    if m.dst.as_ref().is_some_and(|n| !n.contains(&key.dst_ip())) {
        return false;
    }
    // Ports exist only for TCP, UDP and SCTP; the flow key stores the echo
    // id of ICMP in its port fields, which a port selector must not match.
    let has_ports = matches!(key.proto, 6 | 17 | 132);
    if m.src_port
        .is_some_and(|r| !has_ports || !r.contains(key.src_port))
    {
        return false;
    }
    if m.dst_port
        .is_some_and(|r| !has_ports || !r.contains(key.dst_port))
    {
        return false;
    }
    true
}

/// Whether the spec runs any NF as a process.
pub fn has_process_nfs(plan: &Plan) -> bool {
    plan.nfs.iter().any(|n| n.isolation == Isolation::Process)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::IpProtocol;
    use sluice_spec::PortRange;

    #[test]
    fn port_selectors_match_only_protocols_with_ports() {
        let m = MatchSpec {
            dst_port: Some(PortRange::single(53)),
            ..MatchSpec::default()
        };
        let a = "10.0.0.1".parse().unwrap();
        let b = "10.0.0.2".parse().unwrap();
        assert!(matches(&m, &FlowKey::new(a, b, 1000, 53, IpProtocol::UDP)));
        // An ICMP echo with id 53 carries 53 in the key's port fields.
        assert!(!matches(&m, &FlowKey::new(a, b, 53, 53, IpProtocol::ICMP)));
        let any = MatchSpec::default();
        assert!(matches(&any, &FlowKey::new(a, b, 53, 53, IpProtocol::ICMP)));
    }
}
