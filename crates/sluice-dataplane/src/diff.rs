//! What changes between two plans: the part of an apply that decides what
//! to start, stop and reroute.

use serde::Serialize;

use crate::plan::{Hop, Plan};
use crate::replicas::ReplicaSet;

/// Names added, changed and removed, for one kind of object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Changes {
    /// New names.
    pub added: Vec<String>,
    /// Names whose definition changed.
    pub changed: Vec<String>,
    /// Names gone.
    pub removed: Vec<String>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

/// The difference between the running plan and a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Diff {
    /// Ports.
    pub ports: Changes,
    /// NFs.
    pub nfs: Changes,
    /// Chains.
    pub chains: Changes,
    /// NF ids that need a new instance (added, or changed).
    #[serde(skip)]
    pub new_nfs: Vec<u16>,
    /// NF ids removed.
    #[serde(skip)]
    pub gone_nfs: Vec<u16>,
    /// NF ids whose running instances take their new config live
    /// (keeping their state); also listed in `nfs.changed`.
    #[serde(skip)]
    pub reconfigure_nfs: Vec<u16>,
    /// Port ids that need opening (added, or changed).
    #[serde(skip)]
    pub new_ports: Vec<u16>,
    /// Port ids removed.
    #[serde(skip)]
    pub gone_ports: Vec<u16>,
    /// Chain ids added.
    #[serde(skip)]
    pub new_chains: Vec<u16>,
    /// Whether a replica set of the running plan changed (its members, or
    /// how it steers).
    #[serde(skip)]
    pub sets_changed: bool,
    /// Whether the running plan's chains keep their places in the chain
    /// order (the new ones come after them): the scheduler's run order
    /// follows it.
    #[serde(skip)]
    pub chain_order_kept: bool,
    /// Whether workers must drain before the swap: something packets may
    /// be inside goes away, or a route changes other than by gaining NFs.
    #[serde(skip)]
    pub quiesce: bool,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && self.nfs.is_empty() && self.chains.is_empty()
    }

    /// Whether the change only adds: nothing of the running plan changes
    /// or goes, so what it meant to a worker still holds
    /// (`worker/derive.rs` works out only what the additions mean).
    pub fn only_adds(&self) -> bool {
        let adds = |c: &Changes| c.changed.is_empty() && c.removed.is_empty();
        adds(&self.ports)
            && adds(&self.nfs)
            && adds(&self.chains)
            && self.reconfigure_nfs.is_empty()
            && !self.sets_changed
            && self.chain_order_kept
            && !self.quiesce
    }

    /// The difference from `old` to `new` (plans whose ids agree, as
    /// [`crate::compile::compile`] makes them).
    pub fn between(old: &Plan, new: &Plan) -> Diff {
        let mut d = Diff::default();
        for (id, n) in new.nfs_in_order() {
            match old.nf(id) {
                // The running plan's entry itself: unchanged, nothing to
                // compare (most NFs of most changes).
                Some(_) if new.shares_nf(old, id) => {}
                None => {
                    d.nfs.added.push(n.name.clone());
                    d.new_nfs.push(id);
                }
                Some(o) if !o.same_build(n) => {
                    d.nfs.changed.push(n.name.clone());
                    if o.reconfigurable_to(n) {
                        // In ring order with its packets: no drain needed.
                        d.reconfigure_nfs.push(id);
                    } else {
                        d.new_nfs.push(id);
                        d.quiesce = true;
                    }
                }
                // A new weight applies to the running instance...
                // So do a new weight and a new wake-up rule.
                Some(o) if o.cpu_weight != n.cpu_weight || o.wakeup != n.wakeup => {
                    d.nfs.changed.push(n.name.clone())
                }
                Some(_) => {}
            }
        }
        for (id, o) in old.nfs_in_order() {
            if new.nf(id).is_none() {
                d.nfs.removed.push(o.name.clone());
                d.gone_nfs.push(id);
                d.quiesce = true;
            }
        }
        for (id, p) in new.ports_in_order() {
            match old.port(id) {
                None => {
                    d.ports.added.push(p.name.clone());
                    d.new_ports.push(id);
                }
                Some(o) if o != p => {
                    d.ports.changed.push(p.name.clone());
                    d.new_ports.push(id);
                    d.quiesce = true;
                }
                Some(_) => {}
            }
        }
        for (id, o) in old.ports_in_order() {
            if new.port(id).is_none() {
                d.ports.removed.push(o.name.clone());
                d.gone_ports.push(id);
                d.quiesce = true;
            }
        }
        for (id, c) in new.chains_in_order() {
            match old.chain(id) {
                None => {
                    d.chains.added.push(c.name.clone());
                    d.new_chains.push(id);
                }
                Some(_) if new.shares_chain(old, id) => {}
                Some(o) => {
                    let (op, np) = (old.chain_path(id), new.chain_path(id));
                    let path_changed = op != np;
                    if path_changed || o.from != c.from || o.matcher != c.matcher {
                        d.chains.changed.push(c.name.clone());
                    }
                    // A rollout's old route is held for the flows on it
                    // (`worker/held.rs`): they cannot be reordered, and a
                    // flow new to the route has no packet inside.
                    let held = new.route(o.route).is_some_and(|r| r.held);
                    if path_changed
                        && !held
                        && !only_gains_nfs(op.unwrap_or(&[]), np.unwrap_or(&[]))
                    {
                        d.quiesce = true;
                    }
                }
            }
        }
        for (id, o) in old.chains_in_order() {
            if new.chain(id).is_none() {
                d.chains.removed.push(o.name.clone());
            }
        }
        // A replica set that gains or loses members, or steers another
        // way, moves flows between replicas: a moved flow's next packet
        // must not overtake the ones still inside its old replica.
        let sets = old.sets.len().max(new.sets.len());
        // A set new with its NF (a rollout's new version) moves nothing,
        // and neither does a `per_flow` pool that only grows: its flows
        // keep their instances, the new ones start idle.
        let grows = |o: &ReplicaSet, n: &ReplicaSet| {
            o.steer.exclusive()
                && n.steer == o.steer
                && o.fallback == n.fallback
                && o.class == n.class
                && n.members.starts_with(&o.members)
        };
        let moves = |b: u16| match (old.set(b), new.set(b)) {
            (Some(o), Some(n)) => o != n && !grows(o, n),
            (None, n) => n.is_some() && old.nf(b).is_some(),
            (Some(_), None) => true,
        };
        if (0..sets).any(|b| moves(b as u16)) {
            d.quiesce = true;
        }
        d.sets_changed = (0..sets as u16).any(|b| old.set(b).is_some() && old.set(b) != new.set(b));
        d.chain_order_kept = new.chain_order.starts_with(&old.chain_order);
        d
    }
}

/// Whether `new` is `old` with NFs inserted (same output port, the old
/// NFs in the same order). Packets already on the old route then reach
/// every later hop ahead of packets on the new one, so no flow can be
/// reordered and no drain is needed: a packet behind another at hop `k`
/// of the old route is still behind it at every shared hop after `k`.
fn only_gains_nfs(old: &[Hop], new: &[Hop]) -> bool {
    if old.last() != new.last() {
        return false;
    }
    let mut it = new.iter();
    old.iter().all(|h| it.any(|n| n == h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserting_nfs_needs_no_drain_but_removing_or_reordering_does() {
        let p = |v: &[u16]| -> Vec<Hop> {
            v.iter()
                .map(|&i| Hop::Nf(i))
                .chain([Hop::Port(9)])
                .collect()
        };
        assert!(only_gains_nfs(&p(&[1, 2]), &p(&[1, 5, 2])));
        assert!(only_gains_nfs(&p(&[1, 2]), &p(&[0, 1, 2, 3])));
        assert!(!only_gains_nfs(&p(&[1, 2]), &p(&[1])));
        assert!(!only_gains_nfs(&p(&[1, 2]), &p(&[2, 1])));
        let mut other_port = p(&[1, 2]);
        *other_port.last_mut().unwrap() = Hop::Port(8);
        assert!(!only_gains_nfs(&p(&[1, 2]), &other_port));
    }

    /// A rename is one object removed and one added, never an object
    /// "changed" under a new name (a gone name's id is not reused in the
    /// same apply), and a renamed chain is not "unchanged".
    #[test]
    fn renames_are_removals_and_additions() {
        let registry = sluice_nfs::REGISTRY;
        let types: Vec<&str> = registry.iter().map(|t| t.name).collect();
        let spec = |port: &str, nf: &str, chain: &str| {
            let text = format!(
                "ports:\n  - {{ name: {port}, kind: generator, count: 1 }}\n  - {{ name: out, kind: sink }}\n\
                 nfs:\n  - {{ name: {nf}, type: forwarder }}\n\
                 chains:\n  - {{ name: {chain}, from: {port}, nfs: [{nf}], to: out }}\n"
            );
            sluice_spec::parse_str(&text, "t.yaml", &types).unwrap()
        };
        let a = spec("gen", "f", "c");
        let target = crate::compile::Target::of_spec(&a);
        let old = crate::compile::compile(&a, registry, &target, None).unwrap();
        let b = spec("gen2", "g", "d");
        let new = crate::compile::compile(&b, registry, &target, Some(&old)).unwrap();
        let d = Diff::between(&old, &new);
        let names = |c: &Changes| (c.added.clone(), c.changed.clone(), c.removed.clone());
        let one = |x: &str| vec![x.to_string()];
        assert_eq!(names(&d.ports), (one("gen2"), vec![], one("gen")));
        assert_eq!(names(&d.nfs), (one("g"), vec![], one("f")));
        assert_eq!(names(&d.chains), (one("d"), vec![], one("c")));
        // The next apply may use the freed ids again.
        let again = crate::compile::compile(&a, registry, &target, Some(&new)).unwrap();
        assert_eq!(Diff::between(&new, &again).nfs.added, one("f"));
    }

    /// A spec that only gains objects is an addition for the workers, as
    /// long as the running chains keep their places in the chain order
    /// (the scheduler's run order follows it); a new chain listed before
    /// them is not.
    #[test]
    fn only_adds_needs_the_running_chains_first() {
        let registry = sluice_nfs::REGISTRY;
        let types: Vec<&str> = registry.iter().map(|t| t.name).collect();
        let spec = |nfs: &str, chains: &str| {
            let text = format!(
                "ports:\n  - {{ name: gen, kind: generator, count: 1 }}\n  - {{ name: out, kind: sink }}\n\
                 nfs:\n{nfs}chains:\n{chains}"
            );
            sluice_spec::parse_str(&text, "t.yaml", &types).unwrap()
        };
        let (a, b) = (
            "  - { name: a, type: forwarder }\n",
            "  - { name: b, type: forwarder }\n",
        );
        let c = "  - { name: c, from: gen, match: { proto: udp }, nfs: [a], to: out }\n";
        let d = "  - { name: d, from: gen, match: { proto: tcp }, nfs: [b], to: out }\n";
        let both = spec(&format!("{a}{b}"), &format!("{c}{d}"));
        let target = crate::compile::Target::of_spec(&both);
        let compile = |s, prev| crate::compile::compile(&s, registry, &target, prev).unwrap();
        let old = compile(spec(a, c), None);
        let after = compile(both, Some(&old));
        let diff = Diff::between(&old, &after);
        assert!(diff.only_adds(), "{diff:?}");
        assert_eq!(diff.new_chains.len(), 1);
        let before = compile(spec(&format!("{a}{b}"), &format!("{d}{c}")), Some(&old));
        let diff = Diff::between(&old, &before);
        assert_eq!(diff.chains.added, ["d"]);
        assert!(!diff.only_adds(), "the running chain moved down the order");
    }

    /// Scaling a replica set out adds only the new replica and scaling in
    /// removes only the last; either moves flows between replicas, so the
    /// workers drain first. A new `steer` moves flows too.
    #[test]
    fn changing_a_replica_set_adds_or_removes_its_last_replicas_after_a_drain() {
        let registry = sluice_nfs::REGISTRY;
        let types: Vec<&str> = registry.iter().map(|t| t.name).collect();
        let spec = |replicas: u32, steer: &str| {
            let text = format!(
                "ports:\n  - {{ name: gen, kind: generator, count: 1 }}\n  - {{ name: out, kind: sink }}\n\
                 nfs:\n  - {{ name: m, type: monitor, replicas: {replicas}, steer: {steer} }}\n\
                 chains:\n  - {{ name: c, from: gen, nfs: [m], to: out }}\n"
            );
            sluice_spec::parse_str(&text, "t.yaml", &types).unwrap()
        };
        let big = spec(4, "hash");
        let target = crate::compile::Target::of_spec(&big);
        let compile = |s, prev| crate::compile::compile(&s, registry, &target, prev).unwrap();
        let two = compile(spec(2, "hash"), None);
        let three = compile(spec(3, "hash"), Some(&two));
        let d = Diff::between(&two, &three);
        assert_eq!(d.nfs.added, ["m.2"]);
        assert!(d.nfs.changed.is_empty() && d.nfs.removed.is_empty());
        assert!(d.chains.changed.is_empty(), "the route is the same set");
        assert!(d.quiesce);
        let back = compile(spec(2, "hash"), Some(&three));
        let d = Diff::between(&three, &back);
        assert_eq!(d.nfs.removed, ["m.2"]);
        assert!(d.quiesce);
        let steered = compile(spec(2, "shortest_queue"), Some(&back));
        let d = Diff::between(&back, &steered);
        assert!(d.nfs.is_empty() && d.quiesce);
        let same = compile(spec(2, "shortest_queue"), Some(&steered));
        assert!(!Diff::between(&steered, &same).quiesce);
    }

    /// Each NF gets its rule from the compiler; under `auto` only a
    /// chain's first process NF may hold packets; a new rule changes the
    /// NF without a rebuild.
    #[test]
    fn wake_up_rules_resolve_per_hop_and_change_without_a_rebuild() {
        use sluice_spec::WakeupPolicy;
        let registry = sluice_nfs::REGISTRY;
        let types: Vec<&str> = registry.iter().map(|t| t.name).collect();
        let spec = |chain_rule: &str| {
            let text = format!(
                "ports:\n  - {{ name: gen, kind: generator, count: 1 }}\n  - {{ name: out, kind: sink }}\n\
                 nfs:\n  - {{ name: i, type: forwarder, isolation: inline }}\n  - {{ name: a, type: forwarder }}\n  - {{ name: b, type: forwarder }}\n\
                 chains:\n  - {{ name: c, from: gen, nfs: [i, a, b], to: out{chain_rule} }}\n"
            );
            sluice_spec::parse_str(&text, "t.yaml", &types).unwrap()
        };
        let s = spec("");
        let target = crate::compile::Target::of_spec(&s);
        let old = crate::compile::compile(&s, registry, &target, None).unwrap();
        let wake = |p: &Plan, name: &str| {
            let (_, nf) = p.nfs_in_order().find(|(_, n)| n.name == name).unwrap();
            nf.wakeup
        };
        // `a` is the first process NF (the inline one does not count).
        assert_eq!(wake(&old, "a").policy, WakeupPolicy::Auto);
        assert!(wake(&old, "a").batches());
        assert!(
            !wake(&old, "b").batches(),
            "inner hops never hold under auto"
        );
        let s2 = spec(", wakeup: { policy: adaptive }");
        let new = crate::compile::compile(&s2, registry, &target, Some(&old)).unwrap();
        assert!(wake(&new, "b").batches(), "adaptive holds at every hop");
        let d = Diff::between(&old, &new);
        assert_eq!(d.nfs.changed, vec!["a".to_string(), "b".to_string()]);
        assert!(d.new_nfs.is_empty() && !d.quiesce, "no NF is rebuilt");
    }
}
