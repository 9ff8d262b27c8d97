//! NF replicas: an NF with `replicas: N` runs as N instances, and each
//! flow is served by one of them for its whole life, both directions.
//!
//! The compiler turns such an NF into N NFs of the plan (replica 0 keeps
//! the NF's name and id, the others are `NAME.1` … `NAME.{N-1}`) and
//! every route hop to it into [`crate::plan::Hop::Set`]. The worker
//! resolves a packet's set to one member when it groups the packet
//! (`worker/steering.rs`), by one of two rules:
//!
//! - **`hash`**: [`jump`] of the flow's symmetric hash. No state, the same
//!   answer in every worker and after a restart, and growing the set from
//!   N to N+1 moves only the 1/(N+1) of flows that the new replica takes
//!   (shrinking moves only the last replica's flows): live scaling keeps
//!   most flows, and their per-flow state, where they were.
//! - **`shortest_queue`**: a flow's first packet goes to the member with
//!   the fewest packets waiting in its receive ring (ties go round), and
//!   the choice is pinned by flow id in [`Pins`] until the flow's slot is
//!   released (NetVM's load-aware steering, seed 002). Cost: one byte per
//!   flow and set, allocated when the plan is installed, never on the
//!   packet path.

use sluice_spec::Steer;

/// The members of one replicated NF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSet {
    /// NF ids by replica number (member 0 is the NF the set is named by).
    pub members: Vec<u16>,
    /// How flows are spread.
    pub steer: Steer,
}

impl ReplicaSet {
    /// The member a flow with symmetric hash `hash` belongs to under
    /// `hash` steering.
    #[inline]
    pub fn by_hash(&self, hash: u32) -> u16 {
        self.members[jump(u64::from(hash), self.members.len() as u32) as usize]
    }
}

/// The name of replica `k` of NF `name`: the NF's own for 0, `name.k`
/// after (a dot no spec name may contain, so no clash is possible).
pub fn replica_name(name: &str, k: u32) -> String {
    if k == 0 {
        name.to_string()
    } else {
        format!("{name}.{k}")
    }
}

/// The NF a report row or instance named `name` belongs to, and its
/// replica number: `("fw", 2)` for `fw.2`, `("fw", 0)` for `fw`.
pub fn replica_of(name: &str) -> (&str, u32) {
    match name.rsplit_once('.') {
        Some((base, k)) => match k.parse() {
            Ok(k) => (base, k),
            Err(_) => (name, 0),
        },
        None => (name, 0),
    }
}

/// Jump consistent hash (Lamping and Veach, "A Fast, Minimal Memory,
/// Consistent Hash Algorithm", 2014): a bucket in `0..buckets` for `key`
/// such that going from n to n+1 buckets moves a key only into the new
/// bucket, and each bucket gets 1/n of the keys. About ln(n) rounds of a
/// multiply and a float division: ~2 for 4 replicas.
#[inline]
pub fn jump(mut key: u64, buckets: u32) -> u32 {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(buckets) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    // `buckets` 0 (no set has none) would give -1: bucket 0 keeps the
    // index in range anyway.
    b.max(0) as u32
}

/// `shortest_queue` choices by flow id, one table per set (a byte per
/// flow: member + 1, 0 while the flow has none).
#[derive(Debug, Default)]
pub struct Pins {
    /// By base NF id: the set's table and its round-robin cursor.
    tables: Vec<Option<(Box<[u8]>, u8)>>,
}

impl Pins {
    /// Tables for every `shortest_queue` set of `sets` (indexed by base NF
    /// id), keeping the choices of sets that stay, for `flow_capacity`
    /// flow ids.
    pub fn install(&mut self, sets: &[Option<ReplicaSet>], flow_capacity: u32) {
        let mut tables: Vec<Option<(Box<[u8]>, u8)>> = Vec::with_capacity(sets.len());
        for (base, set) in sets.iter().enumerate() {
            let keep = self.tables.get_mut(base).and_then(Option::take);
            tables.push(match set {
                Some(s) if s.steer == Steer::ShortestQueue => {
                    Some(keep.unwrap_or_else(|| {
                        (vec![0u8; flow_capacity as usize].into_boxed_slice(), 0)
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
        *cursor = ((best + 1) % set.members.len()) as u8;
        if let Some(s) = slot {
            *s = best as u8 + 1;
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
        ReplicaSet {
            members: (0..n).map(|i| 10 + i).collect(),
            steer,
        }
    }

    #[test]
    fn replica_names_keep_the_first_and_number_the_rest() {
        assert_eq!(replica_name("fw", 0), "fw");
        assert_eq!(replica_name("fw", 3), "fw.3");
        assert_eq!(replica_of("fw.3"), ("fw", 3));
        assert_eq!(replica_of("fw"), ("fw", 0));
        assert_eq!(replica_of("fw.x"), ("fw.x", 0));
    }

    #[test]
    fn jump_spreads_keys_evenly() {
        let mut counts = [0u32; 5];
        for k in 0..100_000u64 {
            counts[jump(k.wrapping_mul(0x9e37_79b9_7f4a_7c15), 5) as usize] += 1;
        }
        for c in counts {
            assert!((19_000..21_000).contains(&c), "{counts:?}");
        }
    }

    proptest! {
        /// Growing by one bucket moves a key only into the new bucket,
        /// which is what keeps flows (and their state) in place when a
        /// replica is added live.
        #[test]
        fn jump_moves_keys_only_to_the_new_bucket(key in any::<u64>(), n in 1u32..64) {
            let before = jump(key, n);
            let after = jump(key, n + 1);
            prop_assert!(before < n);
            prop_assert!(after == before || after == n);
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
