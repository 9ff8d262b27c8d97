//! Flows that no chain takes, remembered until the plan changes.
//!
//! A packet whose flow has no entry is matched against its port's chains'
//! selectors in order (`Plan::classify`). When one matches, the flow gets
//! an entry and its later packets skip the match. When none does, nothing
//! remembered that, so every packet of such a flow (stray traffic, a
//! tenant's chain removed while its flows go on) was matched against
//! every selector of its port again: with 1,000 chains on a port, 1,000
//! matches per packet.
//!
//! This cache remembers those flows: a fixed table of two-way buckets
//! indexed by the flow's hash, a newer flow pushing the older of a full
//! bucket's two out. Nothing is allocated after it is made, it never
//! fills, and a lookup compares two slots. It is emptied whenever the
//! plan changes ([`NoChain::forget`]), as a change may add a chain that
//! takes the flow: emptying is a generation bump, not a sweep.
//!
//! Why not a flow-table entry for "no chain": the flow table is the
//! platform's memory of real flows, with a capacity operators size;
//! traffic no chain wants (a scan, a flood of spoofed sources) must not
//! fill it, and here it only overwrites slots of its own kind.

use sluice_packet::FlowKey;

/// Buckets (a power of two) of two slots, 44 B each: 352 KiB in all.
/// Measured with a generator's 2,048 no-chain flows, sent round robin (the
/// worst order for any cache: a flow whose bucket is full pushes out one
/// that comes back before it does): 2,048 buckets missed 25 % of lookups,
/// 4,096 miss 8 %. More would hold more, but a flood of distinct flows (a
/// scan) defeats any size, and a bigger table makes each lookup a likelier
/// cache miss. Skewed traffic (a few flows carry most packets) fares far
/// better than round robin.
pub(crate) const BUCKETS: usize = 4096;

/// Chains on a port from which a lookup here is cheaper than matching
/// the selectors (a match is a few ns; a lookup may miss the core's
/// first- and second-level caches, tens of ns).
pub(crate) const WORTH_FROM_CHAINS: usize = 16;

/// One remembered flow.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The flow's key as its packets carry it (the direction decides the
    /// match, as in `Plan::classify`).
    key: FlowKey,
    /// Its input port.
    port: u16,
    /// The generation it was remembered in (0: never; generations start
    /// at 1).
    generation: u32,
}

/// Flows no chain of their port takes under the current plan.
pub(crate) struct NoChain {
    /// Per bucket: the newer flow first.
    buckets: Box<[[Slot; 2]]>,
    generation: u32,
}

impl Default for NoChain {
    fn default() -> Self {
        NoChain {
            buckets: vec![[Slot::default(); 2]; BUCKETS].into_boxed_slice(),
            generation: 1,
        }
    }
}

impl NoChain {
    #[inline]
    fn bucket(hash: u32) -> usize {
        hash as usize & (BUCKETS - 1)
    }

    /// Whether flow `key` (as its packet carries it) from `port` is known
    /// to match no chain.
    #[inline]
    pub(crate) fn knows(&self, key: &FlowKey, hash: u32, port: u16) -> bool {
        self.buckets[Self::bucket(hash)]
            .iter()
            .any(|s| s.generation == self.generation && s.port == port && s.key == *key)
    }

    /// Remembers that flow `key` from `port` matches no chain (the older
    /// flow of a full bucket is forgotten).
    #[inline]
    pub(crate) fn remember(&mut self, key: &FlowKey, hash: u32, port: u16) {
        let b = &mut self.buckets[Self::bucket(hash)];
        b[1] = b[0];
        b[0] = Slot {
            key: *key,
            port,
            generation: self.generation,
        };
    }

    /// Forgets every flow: the plan changed, and a chain it added may take
    /// them.
    pub(crate) fn forget(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 changes: clear for real, so a slot of generation
            // 1 from long ago cannot come back.
            self.buckets.fill([Slot::default(); 2]);
            self.generation = 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::IpProtocol;

    fn key(n: u16) -> FlowKey {
        let a = "10.0.0.1".parse().unwrap();
        let b = "10.0.0.2".parse().unwrap();
        FlowKey::new(a, b, 1000 + n, 53, IpProtocol::UDP)
    }

    #[test]
    fn a_flow_is_known_on_its_port_until_the_plan_changes() {
        let mut c = NoChain::default();
        let k = key(1);
        assert!(!c.knows(&k, 7, 0));
        c.remember(&k, 7, 0);
        assert!(c.knows(&k, 7, 0));
        assert!(!c.knows(&k, 7, 1), "another port's chains were not asked");
        assert!(!c.knows(&k.reversed(), 7, 0), "nor for the other direction");
        c.forget();
        assert!(!c.knows(&k, 7, 0));
    }

    #[test]
    fn a_full_bucket_forgets_its_older_flow() {
        let mut c = NoChain::default();
        let (a, b, d) = (key(1), key(2), key(4));
        let same = |n: u32| 5 + n * BUCKETS as u32;
        c.remember(&a, same(0), 0);
        c.remember(&b, same(1), 0);
        assert!(c.knows(&a, same(0), 0) && c.knows(&b, same(1), 0));
        c.remember(&d, same(2), 0);
        assert!(c.knows(&d, same(2), 0) && c.knows(&b, same(1), 0));
        assert!(
            !c.knows(&a, same(0), 0),
            "forgotten: matched again, never wrongly"
        );
    }

    #[test]
    fn generations_wrap_without_bringing_old_flows_back() {
        let mut c = NoChain::default();
        let k = key(3);
        c.remember(&k, 9, 0);
        c.generation = u32::MAX;
        c.remember(&k, 9, 0);
        c.forget();
        assert_eq!(c.generation, 1);
        assert!(!c.knows(&k, 9, 0));
    }
}
