//! The arena's NF slots: each trust domain's control blocks, rings,
//! doorbell and turn words (`layout::SlotRegion`), and how a slot's are
//! found. A process that keeps one domain ([`Arena::keep_domain`]) finds
//! only that domain's; the platform finds every domain's.

use std::sync::atomic::AtomicU32;

use super::layout::{bell_words, SlotRegion, LINE};
use super::{Arena, MAX_CORES};
use crate::control::NfControl;
use crate::doorbell::BellWord;
use crate::ring::{RingRef, RingShared};
use crate::turn::CoreTurn;

impl Arena {
    /// Slot indices (`0..nf_slots()`, every trust domain's, with the
    /// holes between domains, which no slot allocator hands out).
    pub fn nf_slots(&self) -> u32 {
        self.offsets.slots
    }

    /// Trust domain `domain`'s slots (empty for a domain that does not
    /// exist).
    pub fn domain_slots(&self, domain: usize) -> std::ops::Range<u32> {
        self.offsets
            .slot_regions
            .get(domain)
            .map_or(0..0, |r| r.slots.clone())
    }

    /// The trust domain of slot `slot` (`None`: a hole or out of range).
    pub fn slot_domain(&self, slot: u32) -> Option<usize> {
        self.offsets.slot_region(slot).map(|(d, _)| d)
    }

    /// Whether slot `slot` exists and is mapped in this process (an NF
    /// process keeps only its own domain's). What an NF reads from
    /// another slot's control block is checked with this before use.
    pub fn has_slot(&self, slot: u32) -> bool {
        self.kept_region(slot).is_some()
    }

    /// The region of slot `slot`, if this process keeps it. On the
    /// worker's and NFs' paths (doorbells, rings), so one compare for the
    /// usual case: a slot of the kept domain (an NF's own; the platform's
    /// own domain in the platform). Else, in a process that keeps every
    /// domain, the layout's lookup.
    #[inline]
    fn kept_region(&self, slot: u32) -> Option<&SlotRegion> {
        if slot.wrapping_sub(self.fast.slots.start) < self.fast.slots.end - self.fast.slots.start {
            return Some(&self.fast);
        }
        self.other_region(slot)
    }

    /// [`Arena::kept_region`] past its usual case.
    #[inline(never)]
    fn other_region(&self, slot: u32) -> Option<&SlotRegion> {
        if self.kept_domain.is_some() {
            return None;
        }
        self.offsets.slot_region(slot).map(|(_, r)| r)
    }

    /// The region of slot `slot`; panics for a slot this process does not
    /// keep (a hole, out of range, or another trust domain's).
    #[inline]
    fn slot_region(&self, slot: u32) -> &SlotRegion {
        match self.kept_region(slot) {
            Some(r) => r,
            None => slot_not_mapped(slot),
        }
    }

    /// Turn word of CPU `core` among trust domain `domain`'s NFs (NF
    /// processes of a domain sharing that core take turns through it; see
    /// [`crate::turn`]). Each domain has its own, so no NF passes a turn
    /// to, or reads the rings of, another domain's.
    pub fn domain_turn(&self, domain: usize, core: u32) -> &CoreTurn {
        assert!((core as usize) < MAX_CORES, "core {core} out of range");
        assert!(
            self.kept_domain.is_none_or(|k| k == domain),
            "trust domain {domain}'s turn words are not mapped in this process"
        );
        self.at(self.offsets.slot_regions[domain].turns + core as usize * LINE)
    }

    /// The turn word slot `slot`'s NF takes on CPU `core` (its domain's).
    pub fn slot_turn(&self, slot: u32, core: u32) -> &CoreTurn {
        assert!((core as usize) < MAX_CORES, "core {core} out of range");
        self.at(self.slot_region(slot).turns + core as usize * LINE)
    }

    /// Bell word `i` of the NF slots' doorbells (see [`crate::doorbell`]);
    /// slot `s` rings bit `s % 64` of word `s / 64`, in its domain's
    /// region (a domain's first slot is a multiple of 64).
    #[inline]
    pub fn bell_word(&self, i: usize) -> &BellWord {
        // Past the slots a u32 can name, no word exists (and `i * 64`
        // must not wrap onto one that does).
        let first = if i < (u32::MAX / crate::doorbell::BELLS_PER_WORD) as usize {
            i as u32 * crate::doorbell::BELLS_PER_WORD
        } else {
            u32::MAX
        };
        let r = self.slot_region(first);
        let local = i - (r.slots.start / crate::doorbell::BELLS_PER_WORD) as usize;
        self.at(r.bells + local * std::mem::size_of::<BellWord>())
    }

    /// How many bell words the NF slots' doorbells take (holes included:
    /// word `i` exists only where slot `64 i` does).
    pub fn nf_slots_bells(&self) -> usize {
        bell_words(self.offsets.slots)
    }

    /// Control block of NF slot `slot`.
    #[inline]
    pub fn nf_control(&self, slot: u32) -> &NfControl {
        let r = self.slot_region(slot);
        self.at(r.controls + (slot - r.slots.start) as usize * self.offsets.control_size)
    }

    /// Ring `dir` (0: receive, 1: transmit) of NF slot `slot`.
    #[inline]
    fn ring(&self, slot: u32, dir: usize) -> RingRef<'_> {
        let r = self.slot_region(slot);
        let index = 2 * (slot - r.slots.start) as usize + dir;
        let off = r.rings + index * self.offsets.ring_bytes;
        let shared: &RingShared = self.at(off);
        let slots_off = off + std::mem::size_of::<RingShared>();
        let n = self.config.ring_size as usize;
        assert!(slots_off + n * 4 <= r.bytes.end);
        // SAFETY: `n` AtomicU32 slots lie in bounds (checked: inside the
        // slot region, which this process keeps) at a 4-aligned offset
        // inside the mapping, which outlives the returned borrow.
        let slots = unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().add(slots_off).cast::<AtomicU32>(), n)
        };
        RingRef::new(shared, slots).expect("ring_size validated as a power of two")
    }

    /// Receive ring of NF slot `slot` (platform → NF).
    #[inline]
    pub fn nf_rx_ring(&self, slot: u32) -> RingRef<'_> {
        self.ring(slot, 0)
    }

    /// Transmit ring of NF slot `slot` (NF → platform).
    #[inline]
    pub fn nf_tx_ring(&self, slot: u32) -> RingRef<'_> {
        self.ring(slot, 1)
    }
}

/// The panic of [`Arena::slot_region`], out of line so the accessors
/// stay small.
#[cold]
#[inline(never)]
fn slot_not_mapped(slot: u32) -> ! {
    panic!("NF slot {slot} is out of range or not mapped in this process")
}
