//! NF replicas: an NF with `replicas: N` runs as N instances, and each
//! flow is served by one of them for its whole life, both directions.
//!
//! The compiler turns such an NF into N NFs of the plan (replica 0 keeps
//! the NF's name and id, the others are `NAME.1` … `NAME.{N-1}`) and
//! every route hop to it into [`crate::plan::Hop::Set`]. The worker
//! resolves a packet's set to one member when it groups the packet
//! (`worker/steering.rs`), by one of two rules:
//!
//! - **`hash`**: the flow's symmetric hash picks one of 4,096 buckets,
//!   and [`bucket_table`] gave each bucket its replica when the set was
//!   made. No per-flow state, the same answer in every worker and after a
//!   restart, every replica holding the same number of buckets (±1), and
//!   growing the set from N to N+1 moves only the buckets the new replica
//!   takes (shrinking moves only the last replica's): live scaling keeps
//!   most flows, and their per-flow state, where they were.
//! - **`shortest_queue`**: a flow's first packet goes to the member with
//!   the fewest packets waiting in its receive ring (ties go round), and
//!   the choice is pinned by flow id in [`Pins`] until the flow's slot is
//!   released (NetVM's load-aware steering, seed 002). Cost: two bytes per
//!   flow and set, allocated when the plan is installed, never on the
//!   packet path.

use sluice_spec::{Steer, MAX_REPLICAS};

/// Buckets of the `hash` table. The table is 4 KiB, so it stays in L1
/// beside the packet path's other data. A first version filled 65,536
/// buckets by jump consistent hashing (which needs that many to split
/// flows evenly): with 4 inline replicas and 1,024 flows its 64 KiB table
/// ran at 7.29 Mpps against 8.10 for `shortest_queue`'s pinned choice
/// (14 ns more per packet), and computing jump per packet instead cost
/// 10 ns at 4 replicas and 39 at 64. [`bucket_table`] splits 4,096
/// buckets exactly.
const BUCKET_BITS: u32 = 12;
const BUCKETS: usize = 1 << BUCKET_BITS;

/// The members of one replicated NF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSet {
    /// NF ids by replica number (member 0 is the NF the set is named by).
    pub members: Vec<u16>,
    /// How flows are spread.
    pub steer: Steer,
    /// `per_flow`, `per_class`: what a new flow gets when every member
    /// serves one.
    pub fallback: sluice_spec::Fallback,
    /// `per_class`: what makes a class.
    pub class: Option<sluice_spec::ClassBy>,
    /// `per_flow`, `per_class`: how a released member is made new.
    pub reset: sluice_spec::ResetMode,
    /// Replica number by hash bucket (`hash` steering; see
    /// [`BUCKET_BITS`]); at most [`MAX_REPLICAS`], so two bytes each (8 KiB,
    /// still a quarter of L1).
    buckets: Box<[u16]>,
}

impl ReplicaSet {
    /// A set of `members` (NF ids by replica number, at least one).
    pub fn new(members: Vec<u16>, steer: Steer) -> ReplicaSet {
        // The compiler makes sets of 2 to MAX_REPLICAS (`nfs[].replicas`):
        // every bucket names a member, so the packet path cannot index
        // past one.
        assert!(
            (1..=MAX_REPLICAS as usize).contains(&members.len()),
            "a replica set has 1 to {MAX_REPLICAS} members"
        );
        let buckets = bucket_table(members.len());
        ReplicaSet {
            members,
            steer,
            fallback: sluice_spec::Fallback::default(),
            class: None,
            reset: sluice_spec::ResetMode::default(),
            buckets,
        }
    }

    /// The member a flow with symmetric hash `hash` belongs to under
    /// `hash` steering: its bucket's. The multiply spreads any bits of the
    /// hash over the top ones, which pick the bucket.
    #[inline]
    pub fn by_hash(&self, hash: u32) -> u16 {
        let b = self.buckets[(hash.wrapping_mul(0x9e37_79b1) >> (32 - BUCKET_BITS)) as usize];
        self.members[usize::from(b)]
    }
}

/// The replica of each bucket for a set of `n` replicas (1..=[`MAX_REPLICAS`]). Built
/// up one replica at a time from everything in replica 0: replica `k`
/// takes from each earlier replica what it holds above its new share,
/// scanning the buckets in a fixed scattered order. So the table for `n`
/// is a function of `n` alone (a restart, another worker, an apply all
/// compute the same), each replica holds 4096/n buckets (±1), and the
/// table for `n+1` differs from the one for `n` only in the buckets
/// replica `n` took.
pub fn bucket_table(n: usize) -> Box<[u16]> {
    let mut table = vec![0u16; BUCKETS];
    let mut held = vec![BUCKETS; 1];
    for k in 1..n.min(MAX_REPLICAS as usize) {
        // Shares of k+1 replicas: the first `BUCKETS % (k+1)` get one more.
        let share = |j: usize| BUCKETS / (k + 1) + usize::from(j < BUCKETS % (k + 1));
        let mut surplus: Vec<usize> = (0..k).map(|j| held[j].saturating_sub(share(j))).collect();
        held.push(0);
        // An odd step visits every bucket once (mod a power of two).
        for i in 0..BUCKETS {
            let b = i.wrapping_mul(2_654_435_761) % BUCKETS;
            let from = usize::from(table[b]);
            if from < k && surplus[from] > 0 {
                surplus[from] -= 1;
                held[from] -= 1;
                held[k] += 1;
                table[b] = k as u16;
            }
        }
    }
    table.into_boxed_slice()
}

/// `shortest_queue` choices by flow id, one table per set (two bytes per
/// flow: member + 1, 0 while the flow has none).
#[derive(Debug, Default)]
pub struct Pins {
    /// By base NF id: the set's table and its round-robin cursor.
    tables: Vec<Option<(Box<[u16]>, u16)>>,
}

impl Pins {
    /// Tables for every `shortest_queue` set of `sets` (indexed by base NF
    /// id), keeping the choices of sets that stay, for `flow_capacity`
    /// flow ids.
    pub fn install(&mut self, sets: &[Option<ReplicaSet>], flow_capacity: u32) {
        let mut tables: Vec<Option<(Box<[u16]>, u16)>> = Vec::with_capacity(sets.len());
        for (base, set) in sets.iter().enumerate() {
            let keep = self.tables.get_mut(base).and_then(Option::take);
            tables.push(match set {
                Some(s) if s.steer == Steer::ShortestQueue => {
                    Some(keep.unwrap_or_else(|| {
                        (vec![0u16; flow_capacity as usize].into_boxed_slice(), 0)
                    }))
                }
                _ => None,
            });
        }
        self.tables = tables;
    }

    /// The member of `set` (based at NF `base`) that flow `flow` is pinned
    /// to, pinning it first to the member whose `queued` is least. A
    /// member pinned before that is no longer in the set (the set shrank)
    /// is chosen afresh. Flowless packets (`flow` beyond the table) go to
    /// the least-loaded member without a pin.
    pub fn pick(
        &mut self,
        base: u16,
        set: &ReplicaSet,
        flow: u32,
        queued: impl Fn(u16) -> usize,
    ) -> u16 {
        let Some((table, cursor)) = self.tables.get_mut(base as usize).and_then(Option::as_mut)
        else {
            // Not installed for this set (not `shortest_queue`): the least
            // queued member, unpinned.
            return set.members[least_queued(set, 0, &queued)];
        };
        let slot = table.get_mut(flow as usize);
        if let Some(&mut pinned @ 1..) = slot {
            if let Some(&m) = set.members.get(usize::from(pinned - 1)) {
                return m;
            }
        }
        let best = least_queued(set, usize::from(*cursor), &queued);
        *cursor = ((best + 1) % set.members.len()) as u16;
        if let Some(s) = slot {
            *s = best as u16 + 1;
        }
        set.members[best]
    }

    /// Forgets flow `flow`'s choices (its slot was released; the id will
    /// name a new flow).
    pub fn release(&mut self, flow: u32) {
        for (table, _) in self.tables.iter_mut().flatten() {
            if let Some(s) = table.get_mut(flow as usize) {
                *s = 0;
            }
        }
    }

    /// The member flow `flow` is pinned to in the set based at `base`, if
    /// it is pinned (for end markers: a flow that never reached the set
    /// has nothing to end there).
    pub fn pinned(&self, base: u16, set: &ReplicaSet, flow: u32) -> Option<u16> {
        let (table, _) = self.tables.get(base as usize)?.as_ref()?;
        let p = *table.get(flow as usize)?;
        set.members.get(usize::from(p.checked_sub(1)?)).copied()
    }
}

/// The index of the member with the least `queued`, looking from `start`
/// on so that equal loads (idle rings, inline members) take turns.
fn least_queued(set: &ReplicaSet, start: usize, queued: &impl Fn(u16) -> usize) -> usize {
    let n = set.members.len();
    let (mut best, mut least) = (start % n, usize::MAX);
    for k in 0..n {
        let i = (start + k) % n;
        let q = queued(set.members[i]);
        if q < least {
            (best, least) = (i, q);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(n: u16, steer: Steer) -> ReplicaSet {
        ReplicaSet::new((0..n).map(|i| 10 + i).collect(), steer)
    }

    proptest! {
        /// Growing by one replica moves a bucket only to the new replica,
        /// which is what keeps flows (and their state) in place when a
        /// replica is added live, and every replica holds its share.
        #[test]
        fn buckets_move_only_to_a_new_replica_and_are_shared_exactly(n in 1usize..64) {
            let (small, big) = (bucket_table(n), bucket_table(n + 1));
            for (a, b) in small.iter().zip(big.iter()) {
                prop_assert!(a == b || usize::from(*b) == n);
            }
            let mut held = vec![0usize; n + 1];
            for &r in big.iter() {
                held[usize::from(r)] += 1;
            }
            let (lo, hi) = (held.iter().min().unwrap(), held.iter().max().unwrap());
            prop_assert!(hi - lo <= 1, "{held:?}");
        }
    }

    proptest! {
        /// So a set grown by one member sends a flow where it went before
        /// or to the new member.
        #[test]
        fn hash_steering_moves_flows_only_to_a_new_replica(hash in any::<u32>(), n in 1u16..64) {
            let (small, big) = (set(n, Steer::Hash), set(n + 1, Steer::Hash));
            let (before, after) = (small.by_hash(hash), big.by_hash(hash));
            prop_assert!(after == before || after == 10 + n);
        }
    }

    /// Sets past a byte's reach (more than 255 members, up to the most
    /// the spec allows) keep both properties and name every member.
    #[test]
    fn large_sets_grow_by_moving_buckets_only_to_the_new_replica() {
        for n in [255usize, 256, 700, MAX_REPLICAS as usize - 1] {
            let (small, big) = (bucket_table(n), bucket_table(n + 1));
            assert!(small
                .iter()
                .zip(big.iter())
                .all(|(a, b)| a == b || usize::from(*b) == n));
            let mut held = vec![0usize; n + 1];
            for &r in big.iter() {
                held[usize::from(r)] += 1;
            }
            let (lo, hi) = (held.iter().min().unwrap(), held.iter().max().unwrap());
            assert!(
                hi - lo <= 1 && *lo > 0,
                "{n}: every replica holds its share"
            );
        }
    }

    #[test]
    fn shortest_queue_pins_members_past_255() {
        let s = set(MAX_REPLICAS as u16, Steer::ShortestQueue);
        let mut pins = Pins::default();
        pins.install(&[Some(s.clone())], 16);
        let m = pins.pick(0, &s, 3, |m| usize::from(m != 10 + 1000));
        assert_eq!(m, 10 + 1000);
        assert_eq!(pins.pick(0, &s, 3, |_| 0), 10 + 1000, "pinned");
        assert_eq!(pins.pinned(0, &s, 3), Some(10 + 1000));
    }

    #[test]
    fn hash_steering_spreads_flows_evenly() {
        for n in [2u16, 4, 16, 64] {
            let s = set(n, Steer::Hash);
            let mut counts = vec![0u32; usize::from(n)];
            for f in 0..200_000u32 {
                // Hashes as the flow table makes them: any u32.
                let h = f.wrapping_mul(2_654_435_761).rotate_left(7);
                counts[usize::from(s.by_hash(h) - 10)] += 1;
            }
            let mean = 200_000 / u32::from(n);
            for c in &counts {
                assert!(c.abs_diff(mean) * 100 < mean * 12, "{n}: {counts:?}");
            }
        }
    }

    #[test]
    fn shortest_queue_picks_the_least_queued_member_and_pins_the_flow() {
        let s = set(3, Steer::ShortestQueue);
        let mut pins = Pins::default();
        pins.install(&[None, Some(s.clone())], 16);
        let load = |q: [usize; 3]| move |m: u16| q[usize::from(m - 10)];
        assert_eq!(pins.pick(1, &s, 4, load([5, 1, 9])), 11);
        // Pinned: the flow stays on 11 whatever the queues say now.
        assert_eq!(pins.pick(1, &s, 4, load([0, 50, 0])), 11);
        assert_eq!(pins.pinned(1, &s, 4), Some(11));
        assert_eq!(pins.pinned(1, &s, 5), None);
        // Released: the id names a new flow, which is placed afresh.
        pins.release(4);
        assert_eq!(pins.pinned(1, &s, 4), None);
        assert_eq!(pins.pick(1, &s, 4, load([0, 50, 7])), 10);
    }

    #[test]
    fn equal_queues_take_turns() {
        let s = set(3, Steer::ShortestQueue);
        let mut pins = Pins::default();
        pins.install(&[Some(s.clone())], 64);
        let picks: Vec<u16> = (0..6).map(|f| pins.pick(0, &s, f, |_| 0)).collect();
        assert_eq!(picks, [10, 11, 12, 10, 11, 12]);
    }

    #[test]
    fn a_pin_to_a_member_the_set_lost_is_made_again() {
        let big = set(3, Steer::ShortestQueue);
        let mut pins = Pins::default();
        pins.install(&[Some(big.clone())], 8);
        assert_eq!(pins.pick(0, &big, 2, |m| usize::from(m != 12)), 12);
        let small = set(2, Steer::ShortestQueue);
        pins.install(&[Some(small.clone())], 8);
        assert_eq!(pins.pinned(0, &small, 2), None);
        let m = pins.pick(0, &small, 2, |_| 0);
        assert!(m == 10 || m == 11);
        assert_eq!(pins.pinned(0, &small, 2), Some(m));
    }

    #[test]
    fn flowless_packets_and_sets_without_a_table_are_placed_unpinned() {
        let s = set(4, Steer::ShortestQueue);
        let mut pins = Pins::default();
        pins.install(&[Some(s.clone())], 8);
        // A flow id beyond the table (FLOWLESS) is placed but not pinned.
        assert_eq!(pins.pick(0, &s, u32::MAX, |m| usize::from(m != 13)), 13);
        let h = set(4, Steer::Hash);
        pins.install(&[Some(h.clone())], 8);
        assert_eq!(pins.pick(0, &h, 5, |m| usize::from(m != 12)), 12);
        assert_eq!(pins.pinned(0, &h, 5), None);
    }
}
