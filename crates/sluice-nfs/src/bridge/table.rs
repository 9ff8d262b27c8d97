//! A fixed-capacity open-addressing hash table (linear probing,
//! backward-shift deletion, no tombstones), sized once at build time so the
//! packet path never allocates. Used by the bridge's MAC table and the load
//! balancer's connection tables; callers bring their own hash.

/// Returned by [`FixedTable::insert`] when `max_entries` are already in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

#[derive(Debug, Clone)]
struct Slot<K, V> {
    hash: u64,
    key: K,
    val: V,
}

/// The table. At most `max_entries` entries live in at least twice as many
/// slots, so probe runs stay short (load ≤ 0.5).
#[derive(Debug, Clone)]
pub struct FixedTable<K, V> {
    slots: Vec<Option<Slot<K, V>>>,
    mask: usize,
    len: usize,
    max: usize,
}

impl<K: Copy + Eq, V: Copy> FixedTable<K, V> {
    /// A table that can hold `max_entries` (at least 1).
    pub fn new(max_entries: usize) -> Self {
        let max = max_entries.max(1);
        let n = (max * 2).next_power_of_two();
        FixedTable {
            slots: vec![None; n],
            mask: n - 1,
            len: 0,
            max,
        }
    }

    /// Entries in the table.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of entries.
    pub fn max_entries(&self) -> usize {
        self.max
    }

    /// Number of slots (for incremental sweeps).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Found: `Ok(slot)`; absent: `Err(first empty slot of the run)`.
    #[inline]
    fn find(&self, hash: u64, key: &K) -> Result<usize, usize> {
        let mut i = hash as usize & self.mask;
        loop {
            match &self.slots[i] {
                None => return Err(i),
                Some(s) if s.hash == hash && s.key == *key => return Ok(i),
                Some(_) => i = (i + 1) & self.mask,
            }
        }
    }

    /// The value for `key`.
    #[inline]
    pub fn get(&self, hash: u64, key: &K) -> Option<&V> {
        let i = self.find(hash, key).ok()?;
        self.slots[i].as_ref().map(|s| &s.val)
    }

    /// The value for `key`, mutable.
    #[inline]
    pub fn get_mut(&mut self, hash: u64, key: &K) -> Option<&mut V> {
        let i = self.find(hash, key).ok()?;
        self.slots[i].as_mut().map(|s| &mut s.val)
    }

    /// Inserts or replaces; returns the previous value.
    #[inline]
    pub fn insert(&mut self, hash: u64, key: K, val: V) -> Result<Option<V>, Full> {
        match self.find(hash, &key) {
            Ok(i) => {
                let s = self.slots[i].as_mut().expect("found slot is occupied");
                Ok(Some(std::mem::replace(&mut s.val, val)))
            }
            Err(i) => {
                if self.len >= self.max {
                    return Err(Full);
                }
                self.slots[i] = Some(Slot { hash, key, val });
                self.len += 1;
                Ok(None)
            }
        }
    }

    /// Removes `key`; returns its value.
    #[inline]
    pub fn remove(&mut self, hash: u64, key: &K) -> Option<V> {
        let i = self.find(hash, key).ok()?;
        self.remove_at(i)
    }

    /// Removes the entry in slot `i` and shifts the rest of its probe run
    /// back so lookups need no tombstones.
    fn remove_at(&mut self, mut i: usize) -> Option<V> {
        let out = self.slots[i].take()?.val;
        self.len -= 1;
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let Some(s) = &self.slots[j] else { break };
            let home = s.hash as usize & self.mask;
            // Move s back to i unless its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < home && home <= j
            } else {
                i < home || home <= j
            };
            if !stays {
                self.slots[i] = self.slots[j].take();
                i = j;
            }
        }
        Some(out)
    }

    /// Examines `n` slots from `start` (wrapping) and removes the entries
    /// for which `expired` is true; returns the slot after the last one
    /// examined, to continue the sweep from there next time, and how many
    /// were removed. An entry shifted back over the sweep position by a
    /// removal is examined on the next round.
    pub fn sweep(
        &mut self,
        start: usize,
        n: usize,
        mut expired: impl FnMut(&K, &V) -> bool,
    ) -> (usize, usize) {
        let mut i = start & self.mask;
        let mut removed = 0;
        for _ in 0..n.min(self.slots.len()) {
            while let Some(s) = &self.slots[i] {
                if !expired(&s.key, &s.val) {
                    break;
                }
                self.remove_at(i);
                removed += 1;
            }
            i = (i + 1) & self.mask;
        }
        (i, removed)
    }

    /// Removes everything.
    pub fn clear(&mut self) {
        self.slots.fill(None);
        self.len = 0;
    }

    /// Every entry (tests and reports; not for the packet path).
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.slots.iter().flatten().map(|s| (&s.key, &s.val))
    }
}

/// A 64-bit mixer (splitmix64 finaliser) for integer keys.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Any sequence of inserts and removes (with colliding hashes)
        /// behaves like a HashMap capped at max entries.
        #[test]
        fn matches_a_hashmap(ops in prop::collection::vec((any::<bool>(), 0u64..40, any::<u8>()), 0..400)) {
            let mut t: FixedTable<u64, u8> = FixedTable::new(16);
            let mut m: HashMap<u64, u8> = HashMap::new();
            for (ins, k, v) in ops {
                let h = k % 7; // many collisions, long runs
                if ins {
                    let r = t.insert(h, k, v);
                    if m.len() >= 16 && !m.contains_key(&k) {
                        prop_assert_eq!(r, Err(Full));
                    } else {
                        prop_assert_eq!(r, Ok(m.insert(k, v)));
                    }
                } else {
                    prop_assert_eq!(t.remove(h, &k), m.remove(&k));
                }
                prop_assert_eq!(t.len(), m.len());
                for (k, v) in &m {
                    prop_assert_eq!(t.get(k % 7, k), Some(v));
                }
            }
            let (_, removed) = t.sweep(0, usize::MAX, |_, v| v % 2 == 0);
            let even = m.values().filter(|v| *v % 2 == 0).count();
            prop_assert_eq!(removed, even);
            m.retain(|_, v| *v % 2 == 1);
            for (k, v) in &m {
                prop_assert_eq!(t.get(k % 7, k), Some(v));
            }
        }
    }
}
