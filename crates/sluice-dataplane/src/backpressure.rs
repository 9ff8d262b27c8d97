//! Backpressure at a chain's entry (`settings.backpressure`; NFVnice: drop
//! only at the chain's head; seed 000 §4: RED at the ring).
//!
//! Inside a chain nothing is ever dropped for lack of room: the worker
//! drains an NF's output only as far as the next NF's ring has room, so a
//! slow NF stops the hops before it. What differs is what happens at the
//! entry, when the chain is full:
//!
//! * **hold** (default): a port is read only as far as the first rings of
//!   its chains have room. Lossless where the source can wait (a generator
//!   slows down), but one congested chain stops every chain of its port,
//!   and a NIC or the kernel then drops what the port cannot hold, out of
//!   the platform's sight.
//! * **drop**: ports are read at full speed, and a packet whose chain is
//!   congested (any process NF of its route at or above `watermark_pct`)
//!   is dropped at once, counted as `backpressure`: no NF has spent work
//!   on it, and the port's other chains keep flowing.
//! * **red**: as `drop`, and from `red_min_pct` up to the mark a packet is
//!   dropped with a probability rising linearly from 0 to 1 (Random Early
//!   Detection on the chain's fullest ring), so a chain that fills sheds
//!   load before its rings are full and its latency stays bounded.
//!
//! The fill of a chain is its fullest process NF ring (inline NFs run in
//! the worker and have none), read once per route per ingress pass.

use sluice_spec::{BackpressureMode, BackpressureSettings};

/// Drop chances are out of this (one in 65,536 steps).
pub const CERTAIN: u32 = 1 << 16;

/// The entry policy of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryPolicy {
    mode: BackpressureMode,
    /// In basis points.
    watermark_bp: u32,
    red_min_bp: u32,
}

impl Default for EntryPolicy {
    fn default() -> Self {
        EntryPolicy::from_settings(&BackpressureSettings::default())
    }
}

impl EntryPolicy {
    /// The policy of `settings.backpressure` (validated by the spec).
    pub fn from_settings(s: &BackpressureSettings) -> EntryPolicy {
        EntryPolicy {
            mode: s.mode,
            watermark_bp: s.watermark_pct.clamp(1, 100) * 100,
            red_min_bp: s.red_min_pct.min(99) * 100,
        }
    }

    /// Whether ports are read only as far as their chains have room.
    pub fn holds(&self) -> bool {
        self.mode == BackpressureMode::Hold
    }

    /// The chance, out of [`CERTAIN`], that a new packet of a chain whose
    /// fullest ring is `fill_bp` basis points full is dropped at entry.
    pub fn drop_chance(&self, fill_bp: u32) -> u32 {
        match self.mode {
            BackpressureMode::Hold => 0,
            _ if fill_bp >= self.watermark_bp => CERTAIN,
            BackpressureMode::Drop => 0,
            BackpressureMode::Red if fill_bp <= self.red_min_bp => 0,
            BackpressureMode::Red => {
                let span = u64::from(self.watermark_bp - self.red_min_bp).max(1);
                let over = u64::from(fill_bp - self.red_min_bp);
                (over * u64::from(CERTAIN) / span) as u32
            }
        }
    }
}

/// A small, fast pseudo-random source for early drops (xorshift64*: the
/// decision needs no cryptographic quality, only no bias and no syscall).
#[derive(Debug, Clone)]
pub struct Dice(u64);

impl Default for Dice {
    fn default() -> Self {
        Dice(0x9E37_79B9_7F4A_7C15)
    }
}

impl Dice {
    /// Whether an event of `chance` out of [`CERTAIN`] happens.
    pub fn roll(&mut self, chance: u32) -> bool {
        if chance == 0 {
            return false;
        }
        if chance >= CERTAIN {
            return true;
        }
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 48) as u32) < chance
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: BackpressureMode) -> EntryPolicy {
        EntryPolicy::from_settings(&BackpressureSettings {
            mode,
            watermark_pct: 80,
            red_min_pct: 40,
        })
    }

    #[test]
    fn hold_never_drops_and_drop_only_at_the_mark() {
        let hold = policy(BackpressureMode::Hold);
        assert!(hold.holds());
        assert_eq!(hold.drop_chance(10_000), 0);
        let drop = policy(BackpressureMode::Drop);
        assert!(!drop.holds());
        assert_eq!(drop.drop_chance(7_999), 0);
        assert_eq!(drop.drop_chance(8_000), CERTAIN);
        assert_eq!(drop.drop_chance(10_000), CERTAIN);
    }

    #[test]
    fn red_rises_linearly_between_its_thresholds() {
        let red = policy(BackpressureMode::Red);
        assert_eq!(red.drop_chance(4_000), 0);
        assert_eq!(red.drop_chance(6_000), CERTAIN / 2);
        assert_eq!(red.drop_chance(7_000), CERTAIN * 3 / 4);
        assert_eq!(red.drop_chance(8_000), CERTAIN);
        // Monotonic over the whole range.
        let chances: Vec<u32> = (0..=10_000).map(|f| red.drop_chance(f)).collect();
        assert!(chances.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn the_dice_follow_the_chance() {
        let mut d = Dice::default();
        assert!(!(0..1000).any(|_| d.roll(0)));
        assert!((0..1000).all(|_| d.roll(CERTAIN)));
        let hits = (0..100_000).filter(|_| d.roll(CERTAIN / 4)).count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
    }
}
