//! Device and kernel counters read at most once a millisecond.
//!
//! A port's `stats()` is asked before and after every transmit batch (the
//! worker's `nic_tx`), and the counters only the kernel or the device
//! keeps cost a system call (`PACKET_STATISTICS`, `XDP_STATISTICS`) or a
//! driver call with register reads (`rte_eth_stats_get`). Every port reads
//! them through one [`Sampled`], so the packet path pays a clock read, and
//! the counters are at most a millisecond old; a caller that needs them
//! exact (the end of a run) waits that long first.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How old a sampled value may be.
const PERIOD: Duration = Duration::from_millis(1);

/// A value refreshed at most once per [`PERIOD`].
pub(crate) struct Sampled<T: Copy> {
    last: Cell<(T, Option<Instant>)>,
}

impl<T: Copy> Sampled<T> {
    /// Holds `v`; the first [`Self::get`] refreshes it.
    pub(crate) fn new(v: T) -> Self {
        Sampled {
            last: Cell::new((v, None)),
        }
    }

    /// The value, refreshed by `refresh(previous)` if it is older than the
    /// period (counters that reset on read add to the previous value).
    pub(crate) fn get(&self, refresh: impl FnOnce(T) -> T) -> T {
        let (v, at) = self.last.get();
        let now = Instant::now();
        if at.is_some_and(|t| now.duration_since(t) < PERIOD) {
            return v;
        }
        let v = refresh(v);
        self.last.set((v, Some(now)));
        v
    }

    /// Replaces the value (as fresh).
    pub(crate) fn set(&self, v: T) {
        self.last.set((v, Some(Instant::now())));
    }
}

#[cfg(test)]
mod tests {
    use super::Sampled;

    #[test]
    fn refreshes_first_then_at_most_once_a_period() {
        let s = Sampled::new(0u64);
        let mut calls = 0;
        assert_eq!(
            s.get(|v| {
                calls += 1;
                v + 5
            }),
            5
        );
        // Within the period the value stands, whatever the refresh says.
        assert_eq!(
            s.get(|v| {
                calls += 1;
                v + 5
            }),
            5
        );
        assert_eq!(calls, 1);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(s.get(|v| v + 5), 10, "refreshed from the previous value");
        s.set(1);
        assert_eq!(s.get(|_| 99), 1, "a value set is fresh");
    }
}
