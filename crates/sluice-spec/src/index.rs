//! What an addition is checked against: every name of a valid spec, the
//! order of its chains per input port and its chains' wake-up rules per
//! NF, kept beside the spec ([`IndexedSpec`]) so that checking one added
//! NF and its chain reads only them, not the thousand that run already.
//!
//! Validation ([`crate::validate`]) builds the same maps over the objects
//! it checks; for an addition it checks the added objects only and looks
//! up everything else here. That is sound because an addition appends:
//! nothing of the spec it is added to can name an added object (its
//! names were free), so every check of an object before the addition
//! passes as it did, and only the added objects' own checks and their
//! references into the spec remain.

use std::borrow::Borrow;
use std::hash::Hash;

use foldhash::{HashMap, HashMapExt};

use crate::model::{MatchSpec, Spec};
use crate::wakeup::WakeRule;

/// How many ports, NFs and chains a spec had before an addition appended
/// its objects ([`ValidSpec::grown_from`]): the objects at and after
/// these indexes are the added ones, and everything before them, settings
/// included, is the spec the addition was made to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grown {
    /// Ports before the addition.
    pub ports: usize,
    /// NFs before the addition.
    pub nfs: usize,
    /// Chains before the addition.
    pub chains: usize,
}

impl Grown {
    /// No objects: everything is added.
    pub(crate) const NOTHING: Grown = Grown {
        ports: 0,
        nfs: 0,
        chains: 0,
    };

    /// The counts of `spec`'s lists.
    pub fn of(spec: &Spec) -> Grown {
        Grown {
            ports: spec.ports.len(),
            nfs: spec.nfs.len(),
            chains: spec.chains.len(),
        }
    }
}

/// What a name names, by its index in the spec's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Named {
    Port(usize),
    Nf(usize),
    Chain(usize),
}

impl Named {
    /// `port`, `NF` or `chain`, as errors say it.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Named::Port(_) => "port",
            Named::Nf(_) => "NF",
            Named::Chain(_) => "chain",
        }
    }
}

/// Names to what they name. When a name repeats (an invalid spec), the
/// first wins in the order ports, NFs, chains: the order a reference has
/// always been resolved in.
#[derive(Debug, Clone)]
pub(crate) struct NameMap<K>(HashMap<K, Named>);

impl<K: Borrow<str> + Hash + Eq> NameMap<K> {
    pub(crate) fn new() -> Self {
        NameMap(HashMap::new())
    }

    /// Adds the objects of `spec` from `from` on, keyed by `key`.
    pub(crate) fn extend<'s>(&mut self, spec: &'s Spec, from: Grown, key: impl Fn(&'s str) -> K) {
        self.0.reserve(
            (spec.ports.len() - from.ports)
                + (spec.nfs.len() - from.nfs)
                + (spec.chains.len() - from.chains),
        );
        let ports = (spec.ports.iter().enumerate().skip(from.ports))
            .map(|(i, p)| (&p.name, Named::Port(i)));
        let nfs =
            (spec.nfs.iter().enumerate().skip(from.nfs)).map(|(i, n)| (&n.name, Named::Nf(i)));
        let chains = (spec.chains.iter().enumerate().skip(from.chains))
            .map(|(i, c)| (&c.name, Named::Chain(i)));
        for (name, named) in ports.chain(nfs).chain(chains) {
            self.0.entry(key(name)).or_insert(named);
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<Named> {
        self.0.get(name).copied()
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &Named)> {
        self.0.iter()
    }
}

/// The chains of one input port, to find the first that covers a later
/// one (only chains from one port can shadow each other). Those that match
/// one destination port are kept apart: such a chain covers only a chain
/// of that same single port, so a later chain is compared with the
/// earlier chains of its own destination port and those of none or a
/// range. Comparing every pair was most of the daemon's time per request
/// with a thousand chains from one port (`sluice bench instantiate`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Earlier {
    rest: Vec<usize>,
    by_dst_port: HashMap<u16, Vec<usize>>,
}

impl Earlier {
    fn single(m: &MatchSpec) -> Option<u16> {
        m.dst_port.as_ref().filter(|r| r.lo == r.hi).map(|r| r.lo)
    }

    /// The first of these chains (of `chains`) whose match covers `m`.
    pub(crate) fn first_covering(
        &self,
        chains: &[crate::ChainSpec],
        m: &MatchSpec,
    ) -> Option<usize> {
        let all = MatchSpec::default();
        let same_port = Self::single(m)
            .and_then(|p| self.by_dst_port.get(&p))
            .map_or(&[][..], Vec::as_slice);
        self.rest
            .iter()
            .chain(same_port)
            .copied()
            .filter(|&i| chains[i].matcher.as_ref().unwrap_or(&all).covers(m))
            .min()
    }

    /// Its chains, in an order that does not depend on hashing.
    #[cfg(test)]
    pub(crate) fn sorted(&self) -> (Vec<usize>, Vec<(u16, Vec<usize>)>) {
        let mut by: Vec<_> = self
            .by_dst_port
            .iter()
            .map(|(p, v)| (*p, v.clone()))
            .collect();
        by.sort();
        (self.rest.clone(), by)
    }

    /// Chain `j`, of match `m`, comes next.
    pub(crate) fn push(&mut self, j: usize, m: &MatchSpec) {
        match Self::single(m) {
            Some(p) => self.by_dst_port.entry(p).or_default().push(j),
            None => self.rest.push(j),
        }
    }
}

/// The index of a valid spec (see the module's documentation).
#[derive(Clone)]
pub struct SpecIndex {
    /// The lengths of the lists it indexes.
    of: Grown,
    pub(crate) names: NameMap<Box<str>>,
    /// Per input port, its chains in order.
    pub(crate) chains_from: HashMap<Box<str>, Earlier>,
    /// Per NF without a wake-up rule of its own, the first chain through
    /// it that has one, and that rule.
    pub(crate) chain_rules: HashMap<Box<str>, (usize, WakeRule)>,
}

impl std::fmt::Debug for SpecIndex {
    // The maps are as large as the spec; their size says enough.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpecIndex")
            .field("of", &self.of)
            .finish_non_exhaustive()
    }
}

impl SpecIndex {
    /// The index of `spec`, which must be valid (names unique).
    pub(crate) fn of(spec: &Spec) -> SpecIndex {
        let mut index = SpecIndex {
            of: Grown::NOTHING,
            names: NameMap::new(),
            chains_from: HashMap::new(),
            chain_rules: HashMap::new(),
        };
        index.extend(spec);
        index
    }

    /// Whether it indexes a spec of `spec`'s lengths (the spec it was
    /// built for, or that spec with an addition not indexed yet).
    pub(crate) fn covers(&self, g: Grown) -> bool {
        self.of == g
    }

    /// The lengths of the spec it indexes.
    pub(crate) fn of_lengths(&self) -> Grown {
        self.of
    }

    /// Indexes the objects `spec` has beyond those indexed: the spec it
    /// indexes with a valid addition appended.
    pub(crate) fn extend(&mut self, spec: &Spec) {
        let from = self.of;
        self.names.extend(spec, from, Box::from);
        let all = MatchSpec::default();
        for (j, c) in spec.chains.iter().enumerate().skip(from.chains) {
            let m = c.matcher.as_ref().unwrap_or(&all);
            match self.chains_from.get_mut(c.from.as_str()) {
                Some(e) => e.push(j, m),
                None => {
                    let mut e = Earlier::default();
                    e.push(j, m);
                    self.chains_from.insert(c.from.as_str().into(), e);
                }
            }
            let Some(rule) = c.wakeup else { continue };
            for n in &c.nfs {
                if self.has_own_rule(spec, n) || self.chain_rules.contains_key(n.as_str()) {
                    continue;
                }
                self.chain_rules.insert(n.as_str().into(), (j, rule));
            }
        }
        self.of = Grown::of(spec);
    }

    /// Whether NF `name` of `spec` has a wake-up rule of its own.
    pub(crate) fn has_own_rule(&self, spec: &Spec, name: &str) -> bool {
        matches!(self.names.get(name), Some(Named::Nf(i)) if spec.nfs[i].wakeup.is_some())
    }
}

/// A valid spec with its [`SpecIndex`], built the first time an addition
/// needs it ([`crate::add_to`]) and then kept up to date by each addition
/// ([`crate::ValidSpec::into_indexed`]), so that an addition costs what
/// it adds. Any other change starts a new one (`From<Spec>`).
#[derive(Debug, Clone)]
pub struct IndexedSpec {
    spec: Spec,
    /// `None` until an addition needs it, and for a spec found invalid
    /// when it was to be indexed (each addition is then checked whole).
    pub(crate) index: Option<SpecIndex>,
}

impl IndexedSpec {
    pub(crate) fn with(spec: Spec, index: Option<SpecIndex>) -> IndexedSpec {
        IndexedSpec { spec, index }
    }

    /// The spec, owned.
    pub fn into_spec(self) -> Spec {
        self.spec
    }

    pub(crate) fn into_parts(self) -> (Spec, Option<SpecIndex>) {
        (self.spec, self.index)
    }
}

impl From<Spec> for IndexedSpec {
    fn from(spec: Spec) -> Self {
        IndexedSpec { spec, index: None }
    }
}

impl std::ops::Deref for IndexedSpec {
    type Target = Spec;

    fn deref(&self) -> &Spec {
        &self.spec
    }
}

impl PartialEq for IndexedSpec {
    /// Two are equal when their specs are: the index is derived.
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
