//! The compiled plan: what the workers execute. Built from a spec by
//! [`crate::compile`] and nothing else; below the compiler no code sees
//! the spec.
//!
//! **Ids.** Ports, NFs and chains have small integer ids that are stable
//! across recompilations: an object keeps its id as long as it exists
//! under the same name, so an NF built against id 3 for port `out` stays
//! right when unrelated objects come and go. Tables are indexed by id and
//! have holes (`None`) where objects were removed.
//!
//! **Routes.** A chain's path is a [`Route`], and a packet carries the id
//! of the route it entered on (metadata field `chain`), not of the chain.
//! When a chain's path changes the chain gets a new route and the old one
//! stays in the table, retired, so packets already inside finish on the
//! path they started on. Retired routes are reused oldest first, and only
//! once every never-used id is taken (65,535 route ids against at most a
//! few thousand chains).

use std::sync::Arc;

use sluice_nf::{NfType, NO_CHAIN};
use sluice_packet::flow::FlowKey;
use sluice_spec::{Isolation, MatchSpec, PortKind};

use crate::recipe::NfRecipe;
use crate::replicas::ReplicaSet;
use crate::selector_index::Ingress;
use crate::wakeup::WakePolicy;

/// One step of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hop {
    /// Visit NF `i`.
    Nf(u16),
    /// Visit one replica of the NF with id `i` (its set, [`Plan::sets`]),
    /// chosen per flow by the worker ([`crate::replicas`]).
    Set(u16),
    /// Leave through port `i`.
    Port(u16),
}

/// Most NF hops one chain may have (route positions are 16-bit, and the
/// visit counter must stay below `u16::MAX` with room for detours).
pub const MAX_CHAIN_NFS: usize = 16_384;

/// NF visits a packet may make beyond its route's own NFs (detours to
/// named NFs) before it is dropped as `loop_detected`; also the whole
/// allowance of packets that NFs created, which have no route.
pub const DETOUR_VISITS: u16 = 64;

/// Most route ids ([`NO_CHAIN`] marks packets without one).
pub const MAX_ROUTES: usize = NO_CHAIN as usize;

/// A port of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PortPlan {
    /// Name from the spec.
    pub name: String,
    /// Kind and settings.
    pub kind: PortKind,
}

/// An NF of the plan.
#[derive(Debug, Clone)]
pub struct NfPlan {
    /// Name from the spec.
    pub name: String,
    /// Its type.
    pub nf_type: &'static NfType,
    /// Inline or process.
    pub isolation: Isolation,
    /// How to build an instance.
    pub recipe: NfRecipe,
    /// Names of its local drop reasons (the type's, or the instance's own
    /// when they depend on config, as in an element graph).
    pub drop_reasons: Vec<String>,
    /// Names of its counters by index (indices from `NF_COUNTERS` on are
    /// extended counters).
    pub counters: Vec<(usize, String)>,
    /// Spare buffers a process instance keeps for allocation (capped at a
    /// batch), from the validation build.
    pub alloc_reserve: u32,
    /// Its type takes a new config live, keeping state
    /// (`NetworkFunction::live_reconfigure` of the validation build).
    pub live_reconfigure: bool,
    /// Its CPU weight (`cpu_weight`), if set. Not part of how it is built:
    /// a new weight applies to the running instance.
    pub cpu_weight: Option<u32>,
    /// When the worker wakes it from sleep (its `wakeup` rule, its chains'
    /// or `settings.wakeup`). Not part of how it is built either.
    pub wakeup: WakePolicy,
    /// What its process may do (`sandbox`). Part of how it is built: a
    /// new sandbox needs a new process.
    pub sandbox: crate::host::SandboxPlan,
    /// Its trust domain (0: the platform's; see [`Plan::domains`]). Part
    /// of how it is built too: the process maps only that domain.
    pub domain: u8,
    /// The id of replica 0 when it is one of an NF's replicas (that id
    /// names the set, [`Plan::sets`]); `None` for an NF of one instance.
    pub set: Option<u16>,
    /// It is an NF's previous version during a rolling upgrade
    /// (`nfs[].draining`): only the flows it served when the rollout began
    /// reach it, over routes the compiler holds for them ([`Route::held`]).
    pub draining: bool,
    /// Its type's `reset` returns it to its just-built state
    /// (`NetworkFunction::resets`), as `steer: per_flow` needs.
    pub resets: bool,
    /// Its type's checkpoint layout (`NetworkFunction::state_version`):
    /// `None` when it exports no state.
    pub state_version: Option<u16>,
}

impl NfPlan {
    /// Whether a running instance of `self` can become `next` by taking
    /// its config live: same type and isolation, reconfigurable, and only
    /// the config (or what its names resolve to) differs.
    pub fn reconfigurable_to(&self, next: &NfPlan) -> bool {
        std::ptr::eq(self.nf_type, next.nf_type)
            && self.isolation == next.isolation
            && self.live_reconfigure
            && next.live_reconfigure
            && self.sandbox == next.sandbox
            && self.domain == next.domain
            && self.recipe.replicas == next.recipe.replicas
            && self.recipe.flow_capacity == next.recipe.flow_capacity
            && (self.isolation == Isolation::Inline
                || postcard::to_stdvec(&next.recipe)
                    .is_ok_and(|b| b.len() < sluice_mem::link_blob::MAX_BYTES))
    }

    /// Whether `other` is the same NF, built the same way (so a running
    /// instance of one serves as the other).
    pub fn same_build(&self, other: &NfPlan) -> bool {
        std::ptr::eq(self.nf_type, other.nf_type)
            && self.isolation == other.isolation
            && self.recipe == other.recipe
            && self.sandbox == other.sandbox
            && self.domain == other.domain
    }
}

/// A chain of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainPlan {
    /// Name from the spec.
    pub name: String,
    /// Ingress port id.
    pub from: u16,
    /// Traffic selector (`None`: everything from the port).
    pub matcher: Option<MatchSpec>,
    /// The route new packets of the chain take.
    pub route: u16,
}

/// A path packets follow: NFs in order, then the output port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The chain it was made for.
    pub chain: u16,
    /// NF hops, then one port hop.
    pub path: Vec<Hop>,
    /// NF visits allowed before `loop_detected`: the route's NFs plus
    /// [`DETOUR_VISITS`].
    pub max_visits: u16,
    /// `None` while the chain uses it; once retired, the compilation
    /// number that retired it (older retired routes are reused first).
    pub retired: Option<u64>,
    /// Retired, but held for the flows that were on it when a rolling
    /// upgrade began: it passes a draining NF version and every NF on it
    /// still runs. Workers keep those flows on it until they end
    /// (`worker/held.rs`); everything else takes the chain's route.
    pub held: bool,
}

impl Route {
    /// A route for `chain` along `path`.
    pub fn new(chain: u16, path: Vec<Hop>) -> Route {
        let nfs = path
            .iter()
            .filter(|h| matches!(h, Hop::Nf(_) | Hop::Set(_)))
            .count();
        Route {
            chain,
            max_visits: (nfs as u16).saturating_add(DETOUR_VISITS),
            path,
            retired: None,
            held: false,
        }
    }
}

/// The executable plan.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Ports by id.
    pub ports: Vec<Option<PortPlan>>,
    /// NFs by id.
    /// Shared, not copied: a change makes a new plan from the running
    /// one, and a thousand NFs copied whole cost a fifth of a
    /// millisecond per change (`benches/compile.rs`).
    pub nfs: Vec<Option<Arc<NfPlan>>>,
    /// Chains by id (shared, as NFs are: an addition copies the running
    /// plan, and a thousand chains and routes copied whole were nearly
    /// all of that copy's 66 µs).
    pub chains: Vec<Option<Arc<ChainPlan>>>,
    /// Routes by id (current and retired; shared, as chains are).
    pub routes: Vec<Option<Arc<Route>>>,
    /// Per port id: the chains starting there, in first-match order, and
    /// their index by destination port.
    pub ingress: Vec<Ingress>,
    /// Port, NF and chain ids in spec order (for reports and listings).
    pub port_order: Vec<u16>,
    /// NF ids in spec order.
    pub nf_order: Vec<u16>,
    /// Chain ids in spec order.
    pub chain_order: Vec<u16>,
    /// Flow-table capacity (NFs size per-flow state by it).
    pub flow_capacity: u32,
    /// How many compilations led to this plan (retirement clock).
    pub generation: u64,
    /// Names of the named trust domains, 1 on (`settings.domains`;
    /// domain 0 is the platform's).
    pub domains: Vec<String>,
    /// Replica sets by the id of their replica 0 (`None` elsewhere; as
    /// long as `nfs`).
    pub sets: Vec<Option<ReplicaSet>>,
}

impl Plan {
    /// The name of trust domain `d`.
    pub fn domain_name(&self, d: u8) -> &str {
        match d {
            0 => sluice_spec::PLATFORM_DOMAIN,
            d => self
                .domains
                .get(usize::from(d) - 1)
                .map_or("?", String::as_str),
        }
    }

    /// NF `id`, if it exists.
    #[inline]
    pub fn nf(&self, id: u16) -> Option<&NfPlan> {
        self.nfs.get(id as usize)?.as_deref()
    }

    /// Whether NF `id` of this plan is `other`'s very entry (a compile
    /// keeps an unchanged NF's entry rather than copying it).
    pub fn shares_nf(&self, other: &Plan, id: u16) -> bool {
        let i = id as usize;
        match (self.nfs.get(i), other.nfs.get(i)) {
            (Some(Some(a)), Some(Some(b))) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether chain `id` of this plan and its route are `other`'s very
    /// entries (an addition keeps the running chains rather than copying
    /// them): then nothing of it changed.
    pub fn shares_chain(&self, other: &Plan, id: u16) -> bool {
        let shared = |a: Option<&Arc<ChainPlan>>, b: Option<&Arc<ChainPlan>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b).then_some(a.route as usize),
            _ => None,
        };
        let i = id as usize;
        let (mine, theirs) = (
            self.chains.get(i).and_then(Option::as_ref),
            other.chains.get(i).and_then(Option::as_ref),
        );
        shared(mine, theirs).is_some_and(|r| {
            match (
                self.routes.get(r).and_then(Option::as_ref),
                other.routes.get(r).and_then(Option::as_ref),
            ) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
        })
    }

    /// Port `id`, if it exists.
    #[inline]
    pub fn port(&self, id: u16) -> Option<&PortPlan> {
        self.ports.get(id as usize)?.as_ref()
    }

    /// Chain `id`, if it exists.
    #[inline]
    pub fn chain(&self, id: u16) -> Option<&ChainPlan> {
        self.chains.get(id as usize)?.as_deref()
    }

    /// The replica set named by NF `base`, if it has one.
    #[inline]
    pub fn set(&self, base: u16) -> Option<&ReplicaSet> {
        self.sets.get(base as usize)?.as_ref()
    }

    /// The NFs hop `h` may visit: its NF, or every member of its set.
    #[inline]
    pub fn hop_nfs<'h>(&'h self, h: &'h Hop) -> &'h [u16] {
        match h {
            Hop::Nf(i) => std::slice::from_ref(i),
            Hop::Set(b) => self.set(*b).map_or(&[], |s| &s.members[..]),
            Hop::Port(_) => &[],
        }
    }

    /// The hop NF `id` is visited as on a route: its set's when it is a
    /// replica, else its own.
    #[inline]
    pub fn hop_of(&self, id: u16) -> Hop {
        match self.nf(id).and_then(|n| n.set) {
            Some(base) => Hop::Set(base),
            None => Hop::Nf(id),
        }
    }

    /// Route `id`, if it exists (current or retired).
    #[inline]
    pub fn route(&self, id: u16) -> Option<&Route> {
        self.routes.get(id as usize)?.as_deref()
    }

    /// The NFs in spec order.
    pub fn nfs_in_order(&self) -> impl Iterator<Item = (u16, &NfPlan)> + '_ {
        self.nf_order.iter().filter_map(|&i| Some((i, self.nf(i)?)))
    }

    /// The ports in spec order.
    pub fn ports_in_order(&self) -> impl Iterator<Item = (u16, &PortPlan)> + '_ {
        self.port_order
            .iter()
            .filter_map(|&i| Some((i, self.port(i)?)))
    }

    /// The chains in spec order.
    pub fn chains_in_order(&self) -> impl Iterator<Item = (u16, &ChainPlan)> + '_ {
        self.chain_order
            .iter()
            .filter_map(|&i| Some((i, self.chain(i)?)))
    }

    /// The current path of chain `id`.
    pub fn chain_path(&self, id: u16) -> Option<&[Hop]> {
        Some(&self.route(self.chain(id)?.route)?.path)
    }

    /// How many chains start at `port` (what [`Self::classify`] may look
    /// at).
    #[inline]
    pub fn chains_from(&self, port: u16) -> usize {
        self.ingress.get(port as usize).map_or(0, Ingress::len)
    }

    /// The first chain from `port` whose selector matches `key` (any chain
    /// whose selector is absent matches everything).
    pub fn classify(&self, port: u16, key: &FlowKey) -> Option<u16> {
        // Only the chains that may take it (`selector_index`).
        self.ingress.get(port as usize)?.first(key, |c| {
            self.chain(c)
                .is_some_and(|c| c.matcher.as_ref().is_none_or(|m| matches(m, key)))
        })
    }

    /// The chain for frames without a 5-tuple (ARP, other non-IP): the
    /// first match-everything chain from `port`.
    pub fn classify_flowless(&self, port: u16) -> Option<u16> {
        self.ingress
            .get(port as usize)?
            .chains()
            .iter()
            .copied()
            .find(|&c| {
                self.chain(c)
                    .is_some_and(|c| c.matcher.as_ref().is_none_or(|m| m.is_match_all()))
            })
    }

    /// Whether any NF runs as a process.
    pub fn has_process_nfs(&self) -> bool {
        self.nfs
            .iter()
            .flatten()
            .any(|n| n.isolation == Isolation::Process)
    }

    /// How many ports, NFs and chains it has.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.ports.iter().flatten().count(),
            self.nfs.iter().flatten().count(),
            self.chains.iter().flatten().count(),
        )
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

    #[test]
    fn a_route_allows_its_own_nfs_plus_the_detours() {
        let path: Vec<Hop> = (0..1024).map(Hop::Nf).chain([Hop::Port(0)]).collect();
        assert_eq!(Route::new(0, path).max_visits, 1024 + DETOUR_VISITS);
    }
}
