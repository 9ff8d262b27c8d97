//! Arena NF slots of one worker, handed out and taken back at run time
//! from the range fixed when the platform started.

use crate::report::SlotReport;

/// A worker's slots: `base..base + count`.
#[derive(Debug)]
pub struct Slots {
    free: Vec<u32>,
    is_free: Vec<bool>,
    base: u32,
}

impl Slots {
    /// All of `base..base + count` free.
    pub fn new(base: u32, count: u32) -> Slots {
        // Lowest first: a fresh platform fills slots in order.
        Slots {
            free: (base..base + count).rev().collect(),
            is_free: vec![true; count as usize],
            base,
        }
    }

    /// A free slot, if any.
    pub fn take(&mut self) -> Option<u32> {
        let s = self.free.pop()?;
        self.is_free[(s - self.base) as usize] = false;
        Some(s)
    }

    /// Takes `want` if it is free (the slot a spare waits for), else
    /// what [`Self::take`] would.
    pub fn take_preferring(&mut self, want: Option<u32>) -> Option<u32> {
        let i = want
            .and_then(|w| w.checked_sub(self.base))
            .map(|i| i as usize);
        if let Some(i) = i.filter(|&i| self.is_free.get(i) == Some(&true)) {
            let slot = self.base + i as u32;
            // Usually the top of the stack; `remove` keeps the others'
            // order either way.
            if let Some(k) = self.free.iter().rposition(|&s| s == slot) {
                self.free.remove(k);
                self.is_free[i] = false;
                return Some(slot);
            }
        }
        self.take()
    }

    /// The slot [`Self::take`] would hand out now.
    pub fn peek(&self) -> Option<u32> {
        self.free.last().copied()
    }

    /// Gives `slot` back (ignores slots outside the range and doubles).
    pub fn free(&mut self, slot: u32) {
        let Some(i) = slot.checked_sub(self.base) else {
            return;
        };
        if let Some(f) = self.is_free.get_mut(i as usize) {
            if !*f {
                *f = true;
                self.free.push(slot);
            }
        }
    }
}

/// Where every worker's slots are: free (here, or freed by a worker and
/// not yet taken back, `freed_not_taken`), held by the running spec's NFs
/// (`in_use`), or else held by an instance that is still stopping, which
/// is a leak if it stays so once changes have settled.
pub fn report(all: &[&Slots], freed_not_taken: usize, in_use: usize) -> SlotReport {
    let capacity: usize = all.iter().map(|s| s.is_free.len()).sum();
    let free = all.iter().map(|s| s.free.len()).sum::<usize>() + freed_not_taken;
    SlotReport {
        capacity: capacity as u64,
        free: free as u64,
        in_use: in_use as u64,
        stopping: capacity.saturating_sub(free + in_use) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_come_out_lowest_first_and_go_back_once() {
        let mut s = Slots::new(10, 3);
        assert_eq!(s.peek(), Some(10));
        assert_eq!([s.take(), s.take()], [Some(10), Some(11)]);
        assert_eq!(s.peek(), Some(12));
        s.free(10);
        s.free(10);
        s.free(99);
        assert_eq!(s.free.len(), 2);
        // The slot given back last comes out first.
        assert_eq!(s.peek(), Some(10));
        assert_eq!([s.take(), s.take(), s.take()], [Some(10), Some(12), None]);
    }

    #[test]
    fn a_wanted_slot_is_taken_if_free_and_the_others_keep_their_order() {
        let mut s = Slots::new(10, 4);
        assert_eq!(s.take_preferring(Some(12)), Some(12));
        // Taken already, outside the range, or none: the usual one.
        assert_eq!(s.take_preferring(Some(12)), Some(10));
        assert_eq!(s.take_preferring(Some(99)), Some(11));
        s.free(10);
        s.free(11);
        assert_eq!(s.take_preferring(Some(13)), Some(13));
        assert_eq!([s.take(), s.take(), s.take()], [Some(11), Some(10), None]);
        assert_eq!(s.take_preferring(None), None);
    }
}
