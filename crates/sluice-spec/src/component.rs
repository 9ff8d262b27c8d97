//! The part of a spec connected to an NF: what moves with it when it
//! moves to another daemon (`sluice migrate`).
//!
//! An NF cannot leave its chains behind (a chain runs in one daemon), a
//! chain cannot leave its ports and NFs, and a port cannot leave the
//! other chains it feeds or ends. So the part that moves is the connected
//! component of the NF in the graph whose edges are chain ↔ port and
//! chain ↔ NF: every chain through the NF, the ports and NFs of those
//! chains, every chain of those ports and NFs, and so on until closed.

use std::collections::BTreeSet;

use crate::model::Spec;

/// The names of the objects connected to an NF, each in spec order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Component {
    /// Ports.
    pub ports: Vec<String>,
    /// NFs (the NF itself included).
    pub nfs: Vec<String>,
    /// Chains.
    pub chains: Vec<String>,
}

impl Spec {
    /// The component of NF `nf`; `None` if the spec has no such NF.
    pub fn component_of(&self, nf: &str) -> Option<Component> {
        if !self.nfs.iter().any(|n| n.name == nf) {
            return None;
        }
        let mut nfs: BTreeSet<&str> = BTreeSet::from([nf]);
        let mut ports: BTreeSet<&str> = BTreeSet::new();
        let mut chains: BTreeSet<&str> = BTreeSet::new();
        // Each round adds at least one chain or stops: at most one round
        // per chain.
        loop {
            let before = chains.len();
            for c in &self.chains {
                let joined = ports.contains(c.from.as_str())
                    || ports.contains(c.to.as_str())
                    || c.nfs.iter().any(|n| nfs.contains(n.as_str()));
                if joined && chains.insert(c.name.as_str()) {
                    ports.insert(&c.from);
                    ports.insert(&c.to);
                    nfs.extend(c.nfs.iter().map(String::as_str));
                }
            }
            if chains.len() == before {
                break;
            }
        }
        Some(Component {
            ports: in_order(self.ports.iter().map(|p| &p.name), &ports),
            nfs: in_order(self.nfs.iter().map(|n| &n.name), &nfs),
            chains: in_order(self.chains.iter().map(|c| &c.name), &chains),
        })
    }

    /// Splits the spec's objects in two: those of `part`, and the rest
    /// (both keep this spec's settings and order).
    pub fn split_off(&self, part: &Component) -> (Spec, Spec) {
        let mut moved = self.clone();
        moved.ports.retain(|p| part.ports.contains(&p.name));
        moved.nfs.retain(|n| part.nfs.contains(&n.name));
        moved.chains.retain(|c| part.chains.contains(&c.name));
        let mut rest = self.clone();
        rest.ports.retain(|p| !part.ports.contains(&p.name));
        rest.nfs.retain(|n| !part.nfs.contains(&n.name));
        rest.chains.retain(|c| !part.chains.contains(&c.name));
        (moved, rest)
    }
}

fn in_order<'a>(names: impl Iterator<Item = &'a String>, set: &BTreeSet<&str>) -> Vec<String> {
    names
        .filter(|n| set.contains(n.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Spec {
        crate::parse_str(text, "t.yaml", &["forwarder", "monitor"]).unwrap()
    }

    const TWO_ISLANDS: &str = "ports:
  - { name: a, kind: generator }
  - { name: b, kind: sink }
  - { name: c, kind: generator }
  - { name: d, kind: sink }
nfs:
  - { name: x, type: forwarder }
  - { name: y, type: forwarder }
  - { name: z, type: monitor }
  - { name: idle, type: forwarder }
chains:
  - { name: three, from: a, match: { proto: udp, dst_port: 53 }, nfs: [y], to: d }
  - { name: one, from: a, nfs: [x], to: b }
  - { name: two, from: c, nfs: [z], to: d }
";

    #[test]
    fn a_component_is_closed_over_shared_ports_and_nfs() {
        let s = spec(TWO_ISLANDS);
        // x → chain one → port a → chain three → y and port d → chain two → z.
        let c = s.component_of("x").unwrap();
        assert_eq!(c.chains, ["three", "one", "two"]);
        assert_eq!(c.ports, ["a", "b", "c", "d"]);
        assert_eq!(c.nfs, ["x", "y", "z"]);
    }

    #[test]
    fn an_nf_on_no_chain_is_its_own_component_and_an_unknown_one_none() {
        let s = spec(TWO_ISLANDS);
        let c = s.component_of("idle").unwrap();
        assert_eq!(c.nfs, ["idle"]);
        assert!(c.ports.is_empty() && c.chains.is_empty());
        assert_eq!(s.component_of("nope"), None);
    }

    #[test]
    fn split_off_parts_the_objects_and_keeps_order() {
        let s = spec(
            "ports:
  - { name: a, kind: generator }
  - { name: b, kind: sink }
  - { name: c, kind: generator }
nfs:
  - { name: x, type: forwarder }
  - { name: y, type: forwarder }
chains:
  - { name: three, from: a, match: { proto: udp }, to: b }
  - { name: one, from: a, nfs: [x], to: b }
  - { name: two, from: c, nfs: [y], to: b }
",
        );
        // Port b joins everything: one component.
        assert_eq!(s.component_of("y").unwrap().chains, ["three", "one", "two"]);
        let part = Component {
            ports: vec!["c".into()],
            nfs: vec!["y".into()],
            chains: vec!["two".into()],
        };
        let (moved, rest) = s.split_off(&part);
        let names = |s: &Spec| {
            (
                s.ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                s.nfs.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                s.chains.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            names(&moved),
            (vec!["c".into()], vec!["y".into()], vec!["two".into()])
        );
        assert_eq!(
            names(&rest),
            (
                vec!["a".into(), "b".into()],
                vec!["x".into()],
                vec!["three".into(), "one".into()]
            )
        );
        assert_eq!(moved.settings, s.settings);
    }
}
