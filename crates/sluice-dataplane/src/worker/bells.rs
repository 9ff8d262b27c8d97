//! Which process NFs a worker looks at on a pass.
//!
//! A worker used to read every process NF's transmit ring on every pass:
//! with a thousand NFs on its core that is a thousand cache misses per
//! pass, most of them on empty rings, and every packet waited behind them.
//! Now an NF rings its slot's doorbell in the arena after each send
//! (`sluice_mem::doorbell`, where the protocol is stated and model-checked)
//! and a pass visits only:
//!
//! - the NFs whose bell rang since the last pass;
//! - the NFs the last pass left with work (their ring still held entries,
//!   or the next hop had no room): kept in `pending`, a bitmap beside the
//!   bell words;
//! - a few bell words' worth of NFs per maintenance tick (the sweep), so
//!   an NF that never rings (a hostile one) or needs spare buffers without
//!   sending still gets looked at, and every NF after a change of plan.
//!
//! The cost of a pass is then one relaxed load per 64 NFs plus the NFs
//! with work, not a ring read per NF.

use sluice_mem::{Arena, BellWord, BELLS_PER_WORD};

/// Bell words swept per maintenance tick (every millisecond): 128 NFs,
/// so 10,000 NFs are all looked at within 80 ms even if none rings.
pub(super) const SWEEP_WORDS_PER_TICK: usize = 2;

const NONE: u16 = u16::MAX;

/// A worker's view of its process NFs' doorbells.
#[derive(Debug, Default)]
pub(crate) struct Bells {
    /// The bell words holding this worker's NFs, and their bits in each.
    words: Vec<(u32, u64)>,
    /// Per word of `words`: NFs to look at on the next pass whatever
    /// their bell says.
    pending: Vec<u64>,
    /// NF id by slot, from `base`.
    by_slot: Vec<u16>,
    base: u32,
    /// Next word the sweep marks.
    sweep: usize,
}

impl Bells {
    /// Rebuilds the map for the live process NFs (`(slot, id)`), all of
    /// them pending: the next pass looks at each once.
    pub(crate) fn rebuild(&mut self, nfs: impl Iterator<Item = (u32, u16)>) {
        let mut nfs: Vec<(u32, u16)> = nfs.collect();
        nfs.sort_unstable();
        self.words.clear();
        self.by_slot.clear();
        self.base = nfs.first().map_or(0, |&(s, _)| s);
        if let Some(&(last, _)) = nfs.last() {
            self.by_slot.resize((last - self.base + 1) as usize, NONE);
        }
        for &(slot, id) in &nfs {
            self.by_slot[(slot - self.base) as usize] = id;
            let (word, bit) = BellWord::locate(slot);
            match self.words.last_mut() {
                Some((w, mask)) if *w as usize == word => *mask |= bit,
                _ => self.words.push((word as u32, bit)),
            }
        }
        self.pending = self.words.iter().map(|&(_, mask)| mask).collect();
        self.sweep = 0;
    }
    /// Adds NF `id` in `slot` (a change that only added NFs), pending so
    /// the next pass looks at it once; the others keep their state.
    pub(crate) fn add(&mut self, slot: u32, id: u16) {
        if self.by_slot.is_empty() || slot < self.base {
            let shift = if self.by_slot.is_empty() {
                0
            } else {
                (self.base - slot) as usize
            };
            self.by_slot.splice(0..0, std::iter::repeat_n(NONE, shift));
            self.base = slot;
        }
        let at = (slot - self.base) as usize;
        if at >= self.by_slot.len() {
            self.by_slot.resize(at + 1, NONE);
        }
        self.by_slot[at] = id;
        let (word, bit) = BellWord::locate(slot);
        match self.words.binary_search_by_key(&word, |&(w, _)| w as usize) {
            Ok(k) => {
                self.words[k].1 |= bit;
                self.pending[k] |= bit;
            }
            Err(k) => {
                self.words.insert(k, (word as u32, bit));
                self.pending.insert(k, bit);
            }
        }
    }

    /// Whether `other` rings for the same NFs in the same slots.
    #[cfg(debug_assertions)]
    pub(crate) fn same_nfs(&self, other: &Bells) -> bool {
        let slots = |b: &Bells| -> Vec<(u32, Option<u16>)> {
            let mut v = Vec::new();
            for &(w, mask) in &b.words {
                let mut bits = mask;
                while bits != 0 {
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    let slot = w * BELLS_PER_WORD + bit;
                    v.push((slot, b.nf_in_slot(slot)));
                }
            }
            v
        };
        slots(self) == slots(other)
    }

    /// Words to visit on a pass.
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }

    /// Takes word `k`'s work for this pass: the bits rung since the last
    /// pass and the ones left pending.
    pub(crate) fn take(&mut self, arena: &Arena, k: usize) -> u64 {
        let (word, mask) = self.words[k];
        std::mem::take(&mut self.pending[k]) | arena.bell_word(word as usize).take(mask)
    }

    /// The NF id of bit `bit` of word `k`.
    pub(crate) fn nf(&self, k: usize, bit: u32) -> Option<u16> {
        self.nf_in_slot(self.words[k].0 * BELLS_PER_WORD + bit)
    }

    /// Keeps bit `bit` of word `k` for the next pass.
    pub(crate) fn keep(&mut self, k: usize, bit: u32) {
        self.pending[k] |= 1 << bit;
    }

    /// The NF in `slot`, if it is one of this worker's live process NFs.
    pub(crate) fn nf_in_slot(&self, slot: u32) -> Option<u16> {
        let id = *self.by_slot.get(slot.checked_sub(self.base)? as usize)?;
        (id != NONE).then_some(id)
    }

    /// Looks at the NF in `slot` on the next pass (it just started).
    pub(crate) fn mark(&mut self, slot: u32) {
        let (word, bit) = BellWord::locate(slot);
        // `words` is sorted (built from sorted slots).
        if let Ok(k) = self.words.binary_search_by_key(&word, |&(w, _)| w as usize) {
            self.pending[k] |= bit & self.words[k].1;
        }
    }

    /// Looks at every NF on the next pass (a drain before stopping).
    pub(crate) fn mark_all(&mut self) {
        for (p, &(_, mask)) in self.pending.iter_mut().zip(&self.words) {
            *p = mask;
        }
    }

    /// Marks the next `words` words' NFs (the maintenance sweep).
    pub(crate) fn sweep(&mut self, words: usize) {
        for _ in 0..words.min(self.words.len()) {
            self.sweep %= self.words.len();
            self.pending[self.sweep] = self.words[self.sweep].1;
            self.sweep += 1;
        }
    }

    /// Whether an NF has work for the worker: pending, or its bell rang.
    /// Called after `WakeWord::prepare_sleep`, whose fence orders these
    /// loads after the worker's announcement (`sluice_mem::doorbell`).
    pub(crate) fn any(&self, arena: &Arena) -> bool {
        self.pending.iter().any(|&p| p != 0)
            || self
                .words
                .iter()
                .any(|&(w, mask)| arena.bell_word(w as usize).any(mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_mem::ArenaConfig;

    fn arena() -> Arena {
        Arena::create(ArenaConfig {
            buffers: 64,
            ring_size: 16,
            nf_slots: 200,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
            ..Default::default()
        })
        .unwrap()
    }

    fn visit(b: &mut Bells, a: &Arena) -> Vec<u16> {
        let mut seen = Vec::new();
        for k in 0..b.len() {
            let mut bits = b.take(a, k);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                seen.push(b.nf(k, bit).unwrap());
            }
        }
        seen
    }

    #[test]
    fn a_pass_visits_only_the_nfs_that_rang_or_were_kept() {
        let a = arena();
        let mut b = Bells::default();
        // Slots 60..=130 span three bell words; NF id = slot + 1000.
        b.rebuild((60..=130).rev().map(|s| (s, s as u16 + 1000)));
        assert_eq!(b.len(), 3);
        // After a rebuild every NF is looked at once, then none.
        assert_eq!(visit(&mut b, &a).len(), 71);
        assert!(visit(&mut b, &a).is_empty());
        assert!(!b.any(&a));
        // Slot 70 and 129 ring; slot 5 (not this worker's) rings too.
        for s in [70, 129, 5] {
            let (w, bit) = BellWord::locate(s);
            a.bell_word(w).ring(bit);
        }
        assert!(b.any(&a));
        assert_eq!(visit(&mut b, &a), vec![1070, 1129]);
        // The other worker's bit is left for it.
        assert!(a.bell_word(0).any(1 << 5));
        // Kept NFs come back once.
        b.keep(1, 100 - 64);
        assert_eq!(visit(&mut b, &a), vec![1100]);
        assert!(visit(&mut b, &a).is_empty());
        b.mark(61);
        b.mark(7); // not ours: ignored
        assert_eq!(visit(&mut b, &a), vec![1061]);
        assert_eq!(b.nf_in_slot(99), Some(1099));
        assert_eq!(b.nf_in_slot(131), None);
        assert_eq!(b.nf_in_slot(59), None);
    }

    #[test]
    fn adding_nfs_gives_what_a_rebuild_gives_and_looks_at_the_new_ones_once() {
        let a = arena();
        let mut b = Bells::default();
        let mut all = vec![(100u32, 7u16)];
        b.add(100, 7);
        assert_eq!(visit(&mut b, &a), vec![7]);
        // Same word, a new word above, one below the first slot (the
        // slot table grows downwards), and one below that word.
        for (slot, id) in [(101, 8), (190, 9), (70, 10), (3, 11)] {
            b.add(slot, id);
            all.push((slot, id));
            let mut whole = Bells::default();
            whole.rebuild(all.iter().copied());
            assert!(b.same_nfs(&whole), "after adding slot {slot}");
            assert_eq!(visit(&mut b, &a), vec![id], "only the new NF is pending");
        }
        let (w, bit) = BellWord::locate(190);
        a.bell_word(w).ring(bit);
        assert_eq!(visit(&mut b, &a), vec![9]);
        assert_eq!(b.nf_in_slot(3), Some(11));
        assert_eq!(b.nf_in_slot(4), None);
    }

    #[test]
    fn the_sweep_reaches_every_nf_in_turn() {
        let a = arena();
        let mut b = Bells::default();
        b.rebuild((0..200).map(|s| (s, s as u16)));
        visit(&mut b, &a);
        let mut seen = Vec::new();
        for _ in 0..2 {
            b.sweep(SWEEP_WORDS_PER_TICK);
            seen.extend(visit(&mut b, &a));
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..200).collect::<Vec<u16>>());
    }

    #[test]
    fn no_nfs_no_words() {
        let a = arena();
        let mut b = Bells::default();
        b.rebuild(std::iter::empty());
        b.sweep(2);
        b.mark(3);
        b.mark_all();
        assert_eq!(b.len(), 0);
        assert!(!b.any(&a));
    }
}
