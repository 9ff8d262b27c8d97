//! When the worker wakes a sleeping process NF: Flurries' adaptive wake-up
//! batching (seed 004 §5.1, `settings.wakeup`).
//!
//! Waking an NF for every packet that reaches its empty ring costs a futex
//! call on the worker and a context switch on the NF's core each time, and
//! hands the NF batches of one or two packets. Holding packets back until
//! more arrive batches the work, but must not hold a lone packet for long.
//! A [`WakeGate`] per NF decides: wake once the ring holds `threshold`
//! packets (then raise the threshold by one, up to `max_batch`), or once
//! the first held packet has waited `timeout` (then halve the threshold).
//! An NF that is awake polls its ring itself and is never gated.

use sluice_spec::WakeupSettings;

/// The wake-up policy of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakePolicy {
    /// Threshold ceiling in packets (1: always wake at once).
    pub max_batch: u32,
    /// Longest a held packet waits, in nanoseconds.
    pub timeout_ns: u64,
}

impl WakePolicy {
    /// Wake at the first packet (no batching).
    pub const IMMEDIATE: WakePolicy = WakePolicy {
        max_batch: 1,
        timeout_ns: 0,
    };

    /// The policy of `settings.wakeup`.
    pub fn from_settings(s: &WakeupSettings) -> Self {
        WakePolicy {
            max_batch: s.max_batch.max(1),
            timeout_ns: s.timeout_us.saturating_mul(1_000),
        }
    }

    /// Whether any packet may be held back at all.
    pub fn batches(&self) -> bool {
        self.max_batch > 1
    }
}

const NOT_HOLDING: u64 = u64::MAX;

/// One NF's wake-up state: its adaptive threshold and since when packets
/// wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeGate {
    threshold: u32,
    holding_since: u64,
}

impl Default for WakeGate {
    fn default() -> Self {
        WakeGate {
            threshold: 1,
            holding_since: NOT_HOLDING,
        }
    }
}

impl WakeGate {
    /// Packets were queued for the NF while it sleeps, and `queued` now
    /// wait in its ring: whether to wake it now.
    pub fn on_queued(&mut self, queued: u32, now: u64, policy: &WakePolicy) -> bool {
        if queued >= self.threshold {
            self.threshold = (self.threshold + 1).min(policy.max_batch.max(1));
            self.holding_since = NOT_HOLDING;
            return true;
        }
        if self.holding_since == NOT_HOLDING {
            self.holding_since = now;
        }
        false
    }

    /// Whether held packets have waited long enough that the NF must be
    /// woken now (the threshold then halves: traffic was sparser than it
    /// assumed).
    pub fn on_timer(&mut self, now: u64, policy: &WakePolicy) -> bool {
        if self.holding_since == NOT_HOLDING
            || now.saturating_sub(self.holding_since) < policy.timeout_ns
        {
            return false;
        }
        self.threshold = (self.threshold / 2).max(1);
        self.holding_since = NOT_HOLDING;
        true
    }

    /// The NF is awake (or was woken for another reason): nothing is held.
    pub fn release(&mut self) {
        self.holding_since = NOT_HOLDING;
    }

    /// Whether packets are being held for this NF.
    pub fn is_holding(&self) -> bool {
        self.holding_since != NOT_HOLDING
    }

    /// The current threshold in packets.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: WakePolicy = WakePolicy {
        max_batch: 4,
        timeout_ns: 20_000,
    };

    #[test]
    fn immediate_policy_wakes_at_every_first_packet() {
        let mut g = WakeGate::default();
        for t in 0..10 {
            assert!(g.on_queued(1, t, &WakePolicy::IMMEDIATE));
            assert_eq!(g.threshold(), 1);
            assert!(!g.is_holding());
        }
    }

    #[test]
    fn threshold_grows_by_one_per_wake_up_by_count_up_to_the_ceiling() {
        let mut g = WakeGate::default();
        let mut seen = Vec::new();
        for _ in 0..6 {
            let need = g.threshold();
            assert!(!g.on_queued(need - 1, 0, &P) || need == 1);
            assert!(g.on_queued(need, 0, &P));
            seen.push(need);
        }
        assert_eq!(seen, [1, 2, 3, 4, 4, 4]);
    }

    #[test]
    fn held_packets_wake_the_nf_at_the_timeout_and_halve_the_threshold() {
        let mut g = WakeGate::default();
        for _ in 0..3 {
            assert!(g.on_queued(g.threshold(), 0, &P));
        }
        assert_eq!(g.threshold(), 4);
        assert!(!g.on_queued(1, 1_000, &P));
        assert!(!g.on_queued(2, 5_000, &P), "the clock starts at the first");
        assert!(!g.on_timer(20_999, &P));
        assert!(g.on_timer(21_000, &P));
        assert_eq!(g.threshold(), 2);
        assert!(!g.is_holding());
        assert!(!g.on_timer(1_000_000, &P), "nothing held any more");
    }

    #[test]
    fn released_gate_holds_nothing() {
        let mut g = WakeGate::default();
        assert!(g.on_queued(1, 0, &P));
        assert!(!g.on_queued(1, 10, &P));
        assert!(g.is_holding());
        g.release();
        assert!(!g.is_holding());
        assert!(!g.on_timer(u64::MAX, &P));
    }

    #[test]
    fn policy_from_settings() {
        let p = WakePolicy::from_settings(&WakeupSettings {
            max_batch: 16,
            timeout_us: 25,
            busy_poll_us: None,
        });
        assert_eq!(p.max_batch, 16);
        assert_eq!(p.timeout_ns, 25_000);
        assert!(p.batches());
        assert!(!WakePolicy::from_settings(&WakeupSettings::default()).batches());
    }
}
