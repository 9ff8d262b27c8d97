//! A fixed-capacity hash index from 128-bit keys to slots of a slab.
//!
//! Open addressing with linear probing and backward-shift deletion, so
//! there are no tombstones and the table never rehashes: every operation
//! touches only the run of occupied buckets around the key, and nothing
//! allocates after construction. The keys themselves live in the slab
//! (sessions, mappings); the index stores 32 bits of hash and the slot, and
//! the caller confirms a candidate by comparing the full key.
//!
//! The table is sized to at most half full, so probe runs stay short
//! (expected ≈ 1.5 buckets for a hit at load 0.5).

/// Folded 64×64→128-bit multiply (one `mul`), as in `sluice_packet::flow`.
#[inline(always)]
const fn fmul(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Hash of a 128-bit key with a per-table seed (two multiplies).
#[inline(always)]
pub(crate) fn hash(key: u128, seed: u64) -> u64 {
    let h = fmul(
        key as u64 ^ 0x243f_6a88_85a3_08d3 ^ seed,
        (key >> 64) as u64 ^ 0x1319_8a2e_0370_7344,
    );
    fmul(h ^ 0xa409_3822_299f_31d0, seed ^ 0x082e_fa98_ec4e_6c89)
}

/// The index. An entry is `hash32 << 32 | (slot + 1)`; 0 marks an empty
/// bucket; the home bucket of an entry is `hash32 & mask`.
pub(crate) struct Index {
    buckets: Box<[u64]>,
    mask: usize,
}

#[inline(always)]
fn h32(h: u64) -> u32 {
    (h >> 32) as u32
}

impl Index {
    /// An index for up to `capacity` entries (buckets: the next power of
    /// two at or above twice that).
    pub(crate) fn with_capacity(capacity: usize) -> Index {
        let n = (capacity.max(1) * 2).next_power_of_two();
        Index {
            buckets: sluice_sys::vec_on_huge_pages(n, 0u64).into_boxed_slice(),
            mask: n - 1,
        }
    }

    /// The slot whose key hashes to `h` and for which `is_key` holds.
    #[inline]
    pub(crate) fn find(&self, h: u64, mut is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let tag = h32(h);
        let mut i = tag as usize & self.mask;
        loop {
            let e = *self.buckets.get(i)?;
            if e == 0 {
                return None;
            }
            if (e >> 32) as u32 == tag {
                let slot = (e as u32).wrapping_sub(1);
                if is_key(slot) {
                    return Some(slot);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Adds `slot` under hash `h`. The caller keeps the number of entries
    /// within the capacity given at construction (the slab is that size).
    #[inline]
    pub(crate) fn insert(&mut self, h: u64, slot: u32) {
        let entry = (u64::from(h32(h)) << 32) | u64::from(slot.wrapping_add(1));
        let mut i = h32(h) as usize & self.mask;
        while let Some(b) = self.buckets.get_mut(i) {
            if *b == 0 {
                *b = entry;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Removes `slot` (stored under hash `h`); false if it is not there.
    pub(crate) fn remove(&mut self, h: u64, slot: u32) -> bool {
        let want = (u64::from(h32(h)) << 32) | u64::from(slot.wrapping_add(1));
        let mut i = h32(h) as usize & self.mask;
        loop {
            match self.buckets.get(i) {
                Some(&e) if e == want => break,
                Some(&0) | None => return false,
                Some(_) => i = (i + 1) & self.mask,
            }
        }
        // Backward shift: pull later entries of the run into the hole when
        // their home bucket is not inside (hole, their position].
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        loop {
            let e = self.buckets[j];
            if e == 0 {
                break;
            }
            let home = (e >> 32) as usize & self.mask;
            let dist_home = j.wrapping_sub(home) & self.mask;
            let dist_hole = j.wrapping_sub(hole) & self.mask;
            if dist_home >= dist_hole {
                self.buckets[hole] = e;
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.buckets[hole] = 0;
        true
    }

    /// Empties the index.
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Behaves like a map under any sequence of inserts and removes,
        /// even when every key collides into a few buckets.
        #[test]
        fn matches_a_hashmap(ops in proptest::collection::vec((any::<bool>(), 0u32..64, 0u64..4), 0..400)) {
            let mut idx = Index::with_capacity(64);
            let mut model: HashMap<u32, u64> = HashMap::new();
            for (ins, slot, hsel) in ops {
                // Few distinct hashes: long runs and wrap-around.
                let h = ((hsel * 63 + 120) << 32) | u64::from(slot);
                if ins {
                    if let std::collections::hash_map::Entry::Vacant(v) = model.entry(slot) {
                        v.insert(h);
                        idx.insert(h, slot);
                    }
                } else if let Some(h) = model.remove(&slot) {
                    prop_assert!(idx.remove(h, slot));
                }
                for (&s, &h) in &model {
                    prop_assert_eq!(idx.find(h, |x| x == s), Some(s));
                }
                prop_assert_eq!(idx.find(5 << 32, |x| !model.contains_key(&x) && x == 99), None);
            }
        }
    }
}
