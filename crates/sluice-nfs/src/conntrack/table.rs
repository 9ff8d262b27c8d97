//! The table of tracked connections: a fixed-capacity open-addressing hash
//! table (linear probing, backward-shift deletion, no tombstones) over a
//! slab of entries, all allocated at build time. Nothing on the packet path
//! allocates: inserts take a slab entry from a free list sized to the
//! capacity and fail (the caller counts it) when none is left.

use sluice_packet::FlowKey;
use sluice_sys::ZeroedTable;

use crate::expiry_bounds::{self, Bounds, Expiring};

/// Entry flag: the slab entry holds a connection.
pub const LIVE: u8 = 0x01;
/// Entry flag: a packet was seen in the reply direction.
pub const SEEN_REPLY: u8 = 0x02;
/// Entry flag: the originator is the canonical key's source.
pub const ORIG_IS_SRC: u8 = 0x04;
/// Entry flag: the connection is assured (Linux `IPS_ASSURED`: a TCP
/// connection that reached ESTABLISHED with a reply seen).
pub const ASSURED: u8 = 0x08;

/// One tracked connection: exactly one cache line (64 B, 64-aligned), so
/// a hit touches a single line of the slab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, zerocopy::FromZeros)]
#[repr(align(64))]
pub struct Entry {
    /// The 5-tuple in canonical order (see [`FlowKey::canonical`]).
    pub key: FlowKey,
    /// Conntrack zone.
    pub zone: u16,
    /// Protocol state: a [`TcpState`](super::TcpState) for TCP, 0 otherwise.
    pub proto_state: u8,
    /// [`LIVE`], [`SEEN_REPLY`], [`ORIG_IS_SRC`], [`ASSURED`].
    pub flags: u8,
    /// When the connection expires unless a packet refreshes it (ns).
    pub expires_ns: u64,
    /// When the connection was created (ns).
    pub created_ns: u64,
    /// Free for the NF using the tracker (e.g. the rule that accepted it).
    pub user: u32,
}

// A field added to `Entry` must not push it onto a second cache line.
const _: () = assert!(std::mem::size_of::<Entry>() == 64);

impl Entry {
    /// Whether the slab entry holds a connection.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.flags & LIVE != 0
    }

    /// Whether a packet with key `k` travels in the reply direction.
    #[inline]
    pub fn is_reply(&self, k: &FlowKey) -> bool {
        // For a key equal to its reverse both directions look canonical;
        // such a "connection to itself" has no reply direction.
        (self.key.src == k.src && self.key.src_port == k.src_port)
            != (self.flags & ORIG_IS_SRC != 0)
    }
}

/// Fixed-capacity connection table.
pub struct Table {
    /// `hash << 32 | (entry index + 1)`; 0 is an empty slot.
    slots: ZeroedTable<u64>,
    mask: usize,
    entries: ZeroedTable<Entry>,
    /// Entries freed since they were first used, reused first.
    free: Vec<u32>,
    /// Entries `fresh..` have never been used (a zero `Entry`, the
    /// default, is free): the table is built without writing its slab.
    fresh: u32,
    seed: u64,
    cursor: usize,
    /// Lower bounds of the expiries per block of entries, so the sweep
    /// skips blocks where nothing can have timed out.
    bounds: Bounds,
}

#[inline]
fn slot_entry(s: u64) -> usize {
    (s as u32 as usize).wrapping_sub(1)
}

impl Table {
    /// A table for `capacity` connections (at least 1, at most 2^30) with
    /// at most 50 % slot load.
    pub fn new(capacity: usize, seed: u64) -> Table {
        let capacity = capacity.clamp(1, 1 << 30);
        let nslots = (capacity * 2).next_power_of_two().max(16);
        Table {
            // Zeroed, not written: building the table costs nothing until
            // connections fill it (an NF is built to validate its config
            // and again for a live reconfiguration).
            slots: ZeroedTable::new(nslots),
            mask: nslots - 1,
            // At 100 k connections a hit's cost is this slab's cache and
            // TLB miss (6.4 MB; bench: firewall/hit_cached_warm at 100 k vs
            // 1 k): 2 MiB pages take the TLB miss away (ZeroedTable asks
            // for them).
            entries: ZeroedTable::new(capacity),
            free: Vec::new(),
            fresh: 0,
            seed,
            cursor: 0,
            bounds: Bounds::new(capacity),
        }
    }

    /// The hash seed (a table rebuilt with it hashes keys alike).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Maximum number of connections.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Number of connections held.
    pub fn len(&self) -> usize {
        self.fresh as usize - self.free.len()
    }

    /// Whether no connection is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The hash of `(zone, key)`; equal for both directions of a key.
    #[inline]
    pub fn hash(&self, zone: u16, key: &FlowKey) -> u32 {
        key.symmetric_hash_with_seed(
            self.seed ^ u64::from(zone).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        )
    }

    /// Entry `i` (any index below the capacity).
    #[inline]
    pub fn get(&self, i: u32) -> Option<&Entry> {
        self.entries.get(i as usize)
    }

    /// Entry `i`, mutable. A caller that changes its `expires_ns` must
    /// then call [`Table::expiry_changed`].
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> Option<&mut Entry> {
        self.entries.get_mut(i as usize)
    }

    /// Entry `i`'s expiry was `before` and may have changed: an earlier one
    /// lowers its block's sweep bound (the common later one costs a compare).
    #[inline]
    pub fn expiry_changed(&mut self, i: u32, before: u64) {
        if let Some(e) = self.entries.get(i as usize) {
            if e.expires_ns < before {
                self.bounds.lower(i, e.expires_ns);
            }
        }
    }

    /// The entry of `(zone, canon)` (`canon` in canonical order) with
    /// precomputed `hash`.
    #[inline]
    pub fn find(&self, zone: u16, canon: &FlowKey, hash: u32) -> Option<u32> {
        let tag = u64::from(hash) << 32;
        let mut i = hash as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s & 0xffff_ffff_0000_0000 == tag {
                let e = slot_entry(s);
                if let Some(en) = self.entries.get(e) {
                    if en.zone == zone && en.key == *canon {
                        return Some(e as u32);
                    }
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts `e` (marked live) under `hash`; `None` when the table is
    /// full. The caller makes sure the key is not present.
    pub fn insert(&mut self, mut e: Entry, hash: u32) -> Option<u32> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None if (self.fresh as usize) < self.entries.len() => {
                self.fresh += 1;
                self.fresh - 1
            }
            None => return None,
        };
        e.flags |= LIVE;
        self.bounds.lower(idx, e.expires_ns);
        self.entries[idx as usize] = e;
        let mut i = hash as usize & self.mask;
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = u64::from(hash) << 32 | u64::from(idx + 1);
        Some(idx)
    }

    /// Removes live entry `idx` (no-op for a free one).
    pub fn remove(&mut self, idx: u32) {
        let Some(e) = self.entries.get(idx as usize).copied() else {
            return;
        };
        if !e.is_live() {
            return;
        }
        let hash = self.hash(e.zone, &e.key);
        let want = u64::from(hash) << 32 | u64::from(idx + 1);
        let mut i = hash as usize & self.mask;
        while self.slots[i] != want {
            if self.slots[i] == 0 {
                debug_assert!(false, "live entry missing from its slots");
                return;
            }
            i = (i + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the cluster back
        // over the hole unless their home slot lies cyclically in (hole, j].
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = (s >> 32) as usize & self.mask;
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = 0;
        self.entries[idx as usize].flags = 0;
        self.free.push(idx);
    }

    /// Removes up to `budget` slab positions' worth of expired entries,
    /// continuing where the last sweep stopped; returns how many it removed.
    /// Blocks whose bound says nothing there can have timed out are passed
    /// without reading them (see `expiry_bounds.rs`): the same removals, in
    /// the same order, as reading every position. At 100 k connections
    /// that takes the sweep's two cold lines per packet (64 positions per
    /// batch of 32) off the packet path (bench: firewall/process_100k).
    pub fn sweep(&mut self, now_ns: u64, budget: usize) -> usize {
        let n = self.entries.len();
        if budget == 0 || n == 0 {
            return 0;
        }
        // The positions visited are the `budget` after the cursor, which
        // then rests on the last one.
        let first = if self.cursor + 1 >= n {
            0
        } else {
            self.cursor + 1
        };
        let (removed, next) = expiry_bounds::sweep(self, first, budget, now_ns);
        self.cursor = if next == 0 { n - 1 } else { next - 1 };
        removed
    }

    /// The plain sweep, reading every position: the reference the bounded
    /// [`Table::sweep`] must match.
    #[cfg(test)]
    fn sweep_plain(&mut self, now_ns: u64, budget: usize) -> usize {
        let n = self.entries.len();
        let mut removed = 0;
        for _ in 0..budget.min(n) {
            self.cursor = if self.cursor + 1 >= n {
                0
            } else {
                self.cursor + 1
            };
            let e = &self.entries[self.cursor];
            if e.is_live() && e.expires_ns <= now_ns {
                self.remove(self.cursor as u32);
                removed += 1;
            }
        }
        removed
    }

    /// Forgets every connection.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.entries.fill(Entry::default());
        self.free.clear();
        self.fresh = 0;
        self.cursor = 0;
        self.bounds.reset();
    }

    /// Live entries (for tests and diagnostics; not for the packet path).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Entry)> {
        // Entries past `fresh` were never used (a checkpoint of a large,
        // lightly used table reads only what was touched).
        self.entries
            .iter()
            .take(self.fresh as usize)
            .enumerate()
            .filter(|(_, e)| e.is_live())
            .map(|(i, e)| (i as u32, e))
    }
}

impl Expiring for Table {
    fn slots(&self) -> usize {
        self.entries.len()
    }

    fn bounds(&mut self) -> &mut Bounds {
        &mut self.bounds
    }

    #[inline]
    fn first_expired(&self, i: usize, end: usize, now: u64) -> (Option<usize>, u64) {
        let run = self.entries.get(i..end).unwrap_or_default();
        expiry_bounds::first_expired(run, now, |e| e.is_live().then_some(e.expires_ns))
    }

    fn remove(&mut self, i: usize) {
        Table::remove(self, i as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::IpProtocol;

    fn key(i: u32) -> FlowKey {
        FlowKey::new(
            std::net::Ipv4Addr::from(0x0a00_0000 + i).into(),
            "192.0.2.1".parse().unwrap(),
            1000 + (i % 5000) as u16,
            80,
            IpProtocol::TCP,
        )
        .canonical()
    }

    fn entry(i: u32, zone: u16) -> Entry {
        Entry {
            key: key(i),
            zone,
            ..Entry::default()
        }
    }

    #[test]
    fn insert_find_remove_under_churn_matches_a_model() {
        // A tiny table with a weak seed-independent load: every operation
        // is checked against a HashMap model, so backward-shift deletion
        // must keep every cluster reachable.
        let mut t = Table::new(64, 7);
        let mut model = std::collections::HashMap::new();
        let mut rng = 0x1234_5678_u64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng % 100) as u32;
            let zone = (rng >> 40) as u16 % 2;
            let k = key(i);
            let h = t.hash(zone, &k);
            match (t.find(zone, &k, h), model.get(&(zone, i)).copied()) {
                (Some(idx), Some(m)) => {
                    assert_eq!(idx, m);
                    t.remove(idx);
                    model.remove(&(zone, i));
                }
                (None, None) => {
                    if let Some(idx) = t.insert(entry(i, zone), h) {
                        model.insert((zone, i), idx);
                    } else {
                        assert_eq!(model.len(), 64);
                    }
                }
                (a, b) => panic!("table {a:?} model {b:?}"),
            }
            assert_eq!(t.len(), model.len());
        }
    }

    #[test]
    fn zones_keep_equal_tuples_apart_and_sweep_expires() {
        let mut t = Table::new(8, 0);
        let k = key(1);
        let a = t
            .insert(
                Entry {
                    expires_ns: 10,
                    ..entry(1, 1)
                },
                t.hash(1, &k),
            )
            .unwrap();
        let b = t
            .insert(
                Entry {
                    expires_ns: 20,
                    ..entry(1, 2)
                },
                t.hash(2, &k),
            )
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(t.find(1, &k, t.hash(1, &k)), Some(a));
        assert_eq!(t.find(2, &k, t.hash(2, &k)), Some(b));
        assert_eq!(t.find(3, &k, t.hash(3, &k)), None);
        assert_eq!(t.sweep(15, 8), 1);
        assert_eq!(t.find(1, &k, t.hash(1, &k)), None);
        assert_eq!(t.len(), 1);
        t.clear();
        assert!(t.is_empty());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert { id: u32, expires: u64 },
        Refresh { pick: u32, expires: u64 },
        Sweep { now: u64, budget: usize },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (0u32..400, 0u64..1000).prop_map(|(id, expires)| Op::Insert { id, expires }),
            2 => (any::<u32>(), 0u64..1000).prop_map(|(pick, expires)| Op::Refresh { pick, expires }),
            2 => (0u64..1000, 0usize..200).prop_map(|(now, budget)| Op::Sweep { now, budget }),
        ]
    }

    proptest::proptest! {
        /// The bounded sweep removes exactly what reading every position
        /// removes, in the same order, over inserts, refreshes (earlier and
        /// later) and sweeps with budgets that do and do not line up with
        /// the blocks, on a table with a partial last block.
        #[test]
        fn bounded_sweep_removes_exactly_what_a_plain_sweep_removes(
            ops in proptest::collection::vec(op(), 1..400)
        ) {
            let (mut bounded, mut plain) = (Table::new(150, 3), Table::new(150, 3));
            for op in ops {
                match op {
                    Op::Insert { id, expires } => {
                        for t in [&mut bounded, &mut plain] {
                            let e = Entry { expires_ns: expires, ..entry(id, 0) };
                            let h = t.hash(0, &e.key);
                            if t.find(0, &e.key, h).is_none() {
                                t.insert(e, h);
                            }
                        }
                    }
                    Op::Refresh { pick, expires } => {
                        let live: Vec<u32> = plain.iter().map(|(i, _)| i).collect();
                        if live.is_empty() {
                            continue;
                        }
                        let i = live[pick as usize % live.len()];
                        for t in [&mut bounded, &mut plain] {
                            let e = t.get_mut(i).unwrap();
                            let before = e.expires_ns;
                            e.expires_ns = expires;
                            t.expiry_changed(i, before);
                        }
                    }
                    Op::Sweep { now, budget } => {
                        let a = bounded.sweep(now, budget);
                        let b = plain.sweep_plain(now, budget);
                        proptest::prop_assert_eq!(a, b);
                        proptest::prop_assert_eq!(bounded.cursor, plain.cursor);
                    }
                }
                let live = |t: &Table| t.iter().map(|(i, e)| (i, *e)).collect::<Vec<_>>();
                proptest::prop_assert_eq!(live(&bounded), live(&plain));
            }
        }
    }
}
