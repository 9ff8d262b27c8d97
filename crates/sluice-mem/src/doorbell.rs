//! Doorbells: how a worker serving thousands of NF slots finds the few
//! that have handed something back, without reading every slot's ring.
//!
//! Each NF slot owns one bit in an array of 64-bit [`BellWord`]s kept in
//! the arena. The protocol, stated once:
//!
//! * **NF (producer)**: publish entries on its transmit ring (the ring's
//!   tail store is `Release`), then [`BellWord::ring`] its bit
//!   (`fetch_or`, `Release`). It rings on every send, even when the bit
//!   is already set: skipping the `fetch_or` when a plain load sees the
//!   bit would let the worker clear the bit (for the earlier entries)
//!   and miss these ones, unless a full fence separated the tail store
//!   from that load. One locked instruction per batch is cheaper than
//!   reasoning about the fence on every architecture.
//! * **Worker (consumer)**: [`BellWord::take`] the bits of its own slots
//!   (`fetch_and` of the complement, `Acquire`), then read those slots'
//!   rings.
//!
//! If `take` reads a value written by the NF's `ring` (or by a later
//! read-modify-write of the same word: they form one release sequence),
//! it synchronises with that ring, so the ring's entries published before
//! it are visible when the worker reads the ring. If the worker's `take`
//! came first in the word's modification order, the bit the NF sets
//! afterwards stays set until the next `take`. Either way no entry is
//! left behind without its bit set. The loom model in `tests/loom.rs`
//! checks this over the interleavings (it fails if the NF rings before it
//! publishes, or if `take` clears bits that are not its own); the
//! skipped-`fetch_or` race above needs a reordering loom does not
//! produce, which is why the rule is stated here rather than left to it.
//!
//! `take` looks with a plain load first and skips the locked instruction
//! when none of its bits is set: a bit set concurrently is then simply
//! taken on the next pass, which is what would happen anyway had the
//! `fetch_and` come a moment earlier.
//!
//! Sleeping composes with the wake word ([`crate::wake`]): the NF rings
//! before it calls `WakeWord::wake` (full fence, load), and the worker
//! looks at its bell words after `WakeWord::prepare_sleep` (store, full
//! fence): either the worker sees the bit or the NF sees it sleeping.
//!
//! A bit is a hint, never an authority: a stale bit costs one look at an
//! empty ring, and an NF that never rings (a hostile one) only delays its
//! own packets until the worker's periodic sweep looks at every slot.

use crate::sync::{AtomicU64, Ordering};

/// Bits per bell word.
pub const BELLS_PER_WORD: u32 = 64;

/// 64 doorbells, one bit per NF slot (`slot % 64`, in word `slot / 64`).
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct BellWord(AtomicU64);

impl BellWord {
    /// The word and bit of `slot`.
    pub fn locate(slot: u32) -> (usize, u64) {
        (
            (slot / BELLS_PER_WORD) as usize,
            1u64 << (slot % BELLS_PER_WORD),
        )
    }

    /// Rings the bits of `bits` (an NF: its own bit, after publishing).
    #[inline]
    pub fn ring(&self, bits: u64) {
        self.0.fetch_or(bits, Ordering::Release);
    }

    /// Clears and returns the bits of `mask` that were set (a worker: the
    /// bits of the slots it serves, before reading their rings).
    #[inline]
    pub fn take(&self, mask: u64) -> u64 {
        if self.0.load(Ordering::Relaxed) & mask == 0 {
            return 0;
        }
        self.0.fetch_and(!mask, Ordering::Acquire) & mask
    }

    /// Whether any bit of `mask` is set (a worker about to sleep, after
    /// `WakeWord::prepare_sleep`'s fence).
    #[inline]
    pub fn any(&self, mask: u64) -> bool {
        self.0.load(Ordering::Relaxed) & mask != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn take_returns_only_the_masked_bits_and_clears_only_them() {
        let w = BellWord::default();
        w.ring(0b1011);
        assert!(w.any(0b0010));
        assert!(!w.any(0b0100));
        assert_eq!(w.take(0b0011), 0b0011);
        // Another worker's bit (bit 3) stays.
        assert_eq!(w.take(0b0011), 0);
        assert_eq!(w.take(!0), 0b1000);
        assert_eq!(w.take(!0), 0);
    }

    #[test]
    fn locate_covers_every_bit_of_a_word() {
        assert_eq!(BellWord::locate(0), (0, 1));
        assert_eq!(BellWord::locate(63), (0, 1 << 63));
        assert_eq!(BellWord::locate(64), (1, 1));
        assert_eq!(BellWord::locate(1_048_575), (16_383, 1 << 63));
    }
}
