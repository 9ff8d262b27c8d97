//! Lookups on a spec and following chain-to-chain links.

use std::collections::HashMap;

use crate::domains::PLATFORM_DOMAIN;
use crate::model::{ChainSpec, NfSpec, Spec};
use crate::ports::PortSpec;

/// The full path of a chain once chain-to-chain `to` links are followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedChain<'a> {
    /// The chains passed through, starting with the resolved one.
    pub chains: Vec<&'a str>,
    /// Every NF on the way, in processing order.
    pub nfs: Vec<&'a str>,
    /// The output port packets finally leave through.
    pub output: &'a str,
}

/// A spec's chains by name ([`Spec::chain_index`]).
#[derive(Debug)]
pub struct ChainIndex<'a> {
    spec: &'a Spec,
    by_name: HashMap<&'a str, &'a ChainSpec>,
}

impl<'a> ChainIndex<'a> {
    /// [`Spec::resolve_chain`], with lookups in the index.
    pub fn resolve(&self, chain: &str) -> Option<ResolvedChain<'a>> {
        self.spec
            .resolve_with(chain, |name| self.by_name.get(name).copied())
    }
}

impl Spec {
    /// The port named `name`.
    pub fn port(&self, name: &str) -> Option<&PortSpec> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// The NF named `name`.
    pub fn nf(&self, name: &str) -> Option<&NfSpec> {
        self.nfs.iter().find(|n| n.name == name)
    }

    /// The chain named `name`.
    pub fn chain(&self, name: &str) -> Option<&ChainSpec> {
        self.chains.iter().find(|c| c.name == name)
    }

    /// The chains fed by port `port`, in the order their matches are tried
    /// (first match wins).
    pub fn chains_from<'a>(&'a self, port: &'a str) -> impl Iterator<Item = &'a ChainSpec> + 'a {
        self.chains.iter().filter(move |c| c.from == port)
    }

    /// Follows `chain`'s `to` links through other chains to an output port.
    /// `None` if the chain does not exist, the links loop, or the final `to`
    /// is not a port (none of which happens in a validated spec).
    pub fn resolve_chain(&self, chain: &str) -> Option<ResolvedChain<'_>> {
        self.resolve_with(chain, |name| self.chain(name))
    }

    /// Chains by name, to resolve many chains of this spec: each
    /// [`Spec::chain`] is a scan, and resolving every chain with it costs
    /// the square of their number.
    pub fn chain_index(&self) -> ChainIndex<'_> {
        ChainIndex {
            spec: self,
            by_name: self.chains.iter().map(|c| (c.name.as_str(), c)).collect(),
        }
    }

    /// [`Spec::resolve_chain`] through `among` (some of the spec's
    /// chains) only: `None` also when the path continues into a chain
    /// that is not one of them. What a compiler needs for an addition's
    /// chains, without indexing every chain the spec has.
    pub fn resolve_among<'a>(
        &'a self,
        chain: &str,
        among: &'a [ChainSpec],
    ) -> Option<ResolvedChain<'a>> {
        let index: HashMap<&str, &ChainSpec> = among.iter().map(|c| (c.name.as_str(), c)).collect();
        self.resolve_with(chain, |name| index.get(name).copied())
    }

    fn resolve_with<'a>(
        &'a self,
        chain: &str,
        lookup: impl Fn(&str) -> Option<&'a ChainSpec>,
    ) -> Option<ResolvedChain<'a>> {
        let mut cur = lookup(chain)?;
        let mut resolved = ResolvedChain {
            chains: Vec::new(),
            nfs: Vec::new(),
            output: "",
        };
        loop {
            if resolved.chains.contains(&cur.name.as_str()) {
                return None;
            }
            resolved.chains.push(&cur.name);
            resolved.nfs.extend(cur.nfs.iter().map(String::as_str));
            match lookup(&cur.to) {
                Some(next) => cur = next,
                None => {
                    self.port(&cur.to)?;
                    resolved.output = &cur.to;
                    return Some(resolved);
                }
            }
        }
    }

    /// The NFs a packet entering `chain` passes, following chain-to-chain
    /// `to` links, followed by the output port it leaves through, e.g.
    /// `["acl", "mon", "out"]`. Empty if the chain cannot be resolved (see
    /// [`Spec::resolve_chain`]).
    pub fn resolve_chain_path(&self, chain: &str) -> Vec<&str> {
        match self.resolve_chain(chain) {
            Some(r) => {
                let mut path = r.nfs;
                path.push(r.output);
                path
            }
            None => Vec::new(),
        }
    }
}

impl NfSpec {
    /// The name of its domain: its `domain`, else [`PLATFORM_DOMAIN`].
    pub fn domain_name(&self) -> &str {
        self.domain.as_deref().unwrap_or(PLATFORM_DOMAIN)
    }
}

impl Spec {
    /// The index of NF `nf`'s domain: 0 for the platform's own (no
    /// `domain`, or `platform`), 1 + its position in `settings.domains`
    /// for a declared one. `None` for a domain that is not declared, which
    /// only a spec that failed validation has.
    pub fn domain_index(&self, nf: &NfSpec) -> Option<usize> {
        match nf.domain.as_deref() {
            None | Some(PLATFORM_DOMAIN) => Some(0),
            Some(d) => self
                .settings
                .domains
                .iter()
                .position(|x| x.name == d)
                .map(|i| i + 1),
        }
    }

    /// [`Spec::domain_index`] of the NF named `nf` (at most
    /// [`crate::MAX_DOMAINS`] in a valid spec); `None` if there is no such NF.
    pub fn domain_of(&self, nf: &str) -> Option<u8> {
        let nf = self.nfs.iter().find(|n| n.name == nf)?;
        self.domain_index(nf).and_then(|i| u8::try_from(i).ok())
    }
}
