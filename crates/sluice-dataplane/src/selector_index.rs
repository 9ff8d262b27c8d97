//! The chains that start at one port, in first-match order, indexed by
//! the destination port their selectors name.
//!
//! A new flow takes the first chain of its input port whose selector
//! matches it (`Plan::classify`). Walking every chain is linear in the
//! chains of the port: at 1,000 chains, microseconds for each new flow,
//! and for each packet of a flood of distinct flows (a scan) that no chain
//! takes. Most selectors at that scale name one destination port (a
//! service per chain), so those chains are also listed by that port: a
//! flow is then matched only against the chains of its destination port
//! and the chains whose selector names none. Both lists hold positions in
//! first-match order and are walked merged, so the first match is the
//! same chain the linear walk finds (a property test checks it against
//! the linear walk).

use sluice_packet::FlowKey;
use sluice_spec::MatchSpec;

/// One port's chains, in first-match order, with the index.
#[derive(Debug, Clone, Default)]
pub struct Ingress {
    /// Chain ids in first-match order.
    chains: Vec<u16>,
    /// Positions (in `chains`, ascending) of the chains whose selector
    /// names exactly one destination port, by that port (sorted).
    by_dst_port: Vec<(u16, Vec<u32>)>,
    /// Positions (ascending) of the others.
    other: Vec<u32>,
}

/// The destination port a selector names, if it names exactly one. Such a
/// selector matches only flows of a protocol with ports to that port
/// (`plan::matches`).
fn one_dst_port(m: Option<&MatchSpec>) -> Option<u16> {
    let r = m?.dst_port?;
    (r.lo == r.hi).then_some(r.lo)
}

impl Ingress {
    /// Appends chain `id` with selector `matcher` (last in match order).
    pub fn push(&mut self, id: u16, matcher: Option<&MatchSpec>) {
        let pos = self.chains.len() as u32;
        self.chains.push(id);
        match one_dst_port(matcher) {
            Some(port) => match self.by_dst_port.binary_search_by_key(&port, |(p, _)| *p) {
                Ok(i) => self.by_dst_port[i].1.push(pos),
                Err(i) => self.by_dst_port.insert(i, (port, vec![pos])),
            },
            None => self.other.push(pos),
        }
    }

    /// The chains in first-match order.
    pub fn chains(&self) -> &[u16] {
        &self.chains
    }

    /// How many chains start here.
    pub fn len(&self) -> usize {
        self.chains.len()
    }

    /// Whether no chain starts here.
    pub fn is_empty(&self) -> bool {
        self.chains.is_empty()
    }

    /// The first chain, in match order, for which `takes` holds, among the
    /// chains that may match `key`: those indexed under its destination
    /// port (when its protocol has ports) and those not indexed.
    #[inline]
    pub fn first(&self, key: &FlowKey, takes: impl Fn(u16) -> bool) -> Option<u16> {
        let has_ports = matches!(key.proto, 6 | 17 | 132);
        let bucket: &[u32] = match has_ports {
            true => self
                .by_dst_port
                .binary_search_by_key(&key.dst_port, |(p, _)| *p)
                .map_or(&[], |i| &self.by_dst_port[i].1),
            false => &[],
        };
        let (mut a, mut b) = (self.other.iter().peekable(), bucket.iter().peekable());
        loop {
            let from_other = match (a.peek(), b.peek()) {
                (Some(&&x), Some(&&y)) => x < y,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            let pos = if from_other { a.next() } else { b.next() };
            let id = self.chains[*pos.expect("peeked") as usize];
            if takes(id) {
                return Some(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use sluice_packet::IpProtocol;
    use sluice_spec::PortRange;

    use super::*;
    use crate::plan::matches;

    /// A selector from a small alphabet: none, one destination port, a
    /// range, a protocol, or a protocol and one port.
    fn selector(kind: u8, port: u16) -> Option<MatchSpec> {
        let p = |lo, hi| Some(PortRange { lo, hi });
        match kind % 5 {
            0 => None,
            1 => Some(MatchSpec {
                dst_port: p(port, port),
                ..MatchSpec::default()
            }),
            2 => Some(MatchSpec {
                dst_port: p(port, port.saturating_add(2)),
                ..MatchSpec::default()
            }),
            3 => Some(MatchSpec {
                proto: Some(if port % 2 == 0 { 6 } else { 17 }),
                ..MatchSpec::default()
            }),
            _ => Some(MatchSpec {
                proto: Some(17),
                dst_port: p(port, port),
                ..MatchSpec::default()
            }),
        }
    }

    proptest! {
        /// The index finds the chain the linear walk finds, for any list
        /// of selectors and any flow.
        #[test]
        fn the_index_finds_the_first_match_of_the_linear_walk(
            chains in proptest::collection::vec((0u8..5, 0u16..6), 0..40),
            flows in proptest::collection::vec((0u16..8, 0u8..3), 1..30),
        ) {
            let selectors: Vec<Option<MatchSpec>> =
                chains.iter().map(|&(k, p)| selector(k, p)).collect();
            let mut ing = Ingress::default();
            for (id, m) in selectors.iter().enumerate() {
                ing.push(id as u16, m.as_ref());
            }
            let a = "10.0.0.1".parse().unwrap();
            let b = "10.0.0.2".parse().unwrap();
            for (dst_port, proto) in flows {
                let proto = [IpProtocol::UDP, IpProtocol::TCP, IpProtocol::ICMP][proto as usize];
                let key = FlowKey::new(a, b, 1000, dst_port, proto);
                let takes = |id: u16| {
                    selectors[id as usize].as_ref().is_none_or(|m| matches(m, &key))
                };
                let linear = ing.chains().iter().copied().find(|&id| takes(id));
                prop_assert_eq!(ing.first(&key, takes), linear);
            }
        }
    }

    #[test]
    fn chains_keep_their_order_whatever_the_index() {
        let mut ing = Ingress::default();
        let one = selector(1, 53);
        ing.push(7, one.as_ref());
        ing.push(3, None);
        ing.push(9, one.as_ref());
        assert_eq!(ing.chains(), [7, 3, 9]);
        assert_eq!(ing.len(), 3);
        let a = "10.0.0.1".parse().unwrap();
        let key = FlowKey::new(a, a, 1, 53, IpProtocol::UDP);
        // All three may match: the first in order wins.
        assert_eq!(ing.first(&key, |_| true), Some(7));
        assert_eq!(ing.first(&key, |id| id != 7), Some(3));
        // Port 54: only the unindexed chain is looked at.
        let key = FlowKey::new(a, a, 1, 54, IpProtocol::UDP);
        let looked = std::cell::RefCell::new(Vec::new());
        ing.first(&key, |id| {
            looked.borrow_mut().push(id);
            false
        });
        assert_eq!(looked.into_inner(), [3]);
    }
}
