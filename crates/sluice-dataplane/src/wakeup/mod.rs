//! When the worker wakes a sleeping process NF: the wake-up policies of
//! Flurries' Table 2 (seed 004 §5.1, §6.3) and sluice's own, per NF
//! (`settings.wakeup`, `chains[].wakeup`, `nfs[].wakeup`; the spec's
//! `sluice_spec::WakeRule` says which applies to which NF).
//!
//! Waking an NF for every packet that reaches its empty ring costs a futex
//! call on the worker and a context switch on the NF's core each time, and
//! hands the NF batches of one or two packets. Holding packets back until
//! more arrive batches the work, but must not hold a lone packet for long.
//! A [`WakeGate`] per NF decides: wake once the ring holds `threshold`
//! packets, or once the first held packet has waited `timeout`. How the
//! threshold moves is the policy's [`Growth`]:
//!
//! * `Fixed` (`threshold`, Flurries' "Naive"): it never moves;
//! * `Aimd` (`hybrid`, `adaptive`): +1 after each wake-up by count, up to
//!   `max_batch`, halved after each wake-up by timeout;
//! * `RateAware` (`auto`): as `Aimd`, but it grows only when the packets
//!   came fast, so a sparse flow is never held (Flurries' AIMD alternates
//!   such a flow between thresholds 1 and 2: every other packet waits the
//!   whole timeout).
//!
//! Under `adaptive` and `auto` a packet of a flow that has carried fewer
//! than `short_flow_packets` packets (Flurries' T_short: handshakes and
//! short requests) wakes the NF at once. An NF that is awake polls its ring
//! itself and is never gated; one taking turns is woken with its turn.

use sluice_spec::{WakeRule, WakeupPolicy};

/// Whether an idle NF polls its ring before it sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdlePoll {
    /// Always (`hybrid`): no wake-up while packets come within the window.
    Always,
    /// Never (`every_packet`, `threshold`, `adaptive`): it sleeps at once.
    Never,
    /// While at most [`POLL_WHILE_FEW`] NFs share its core (`auto`).
    WhileFew,
}

/// Under `auto`, NFs poll idle while at most this many share a core. With
/// few, polling keeps the core with the chain and spares the wake of a
/// halted vCPU (3-NF chain: p99 37–43 µs polling, 74–191 µs sleeping at
/// once; `docs/benchmarks.md`, "Busy polling"). With many, the pollers
/// crowd the core: 16 one-NF chains sharing a core burnt 98 % of it
/// polling where sleeping at once with `adaptive` used 17–20 % and gave
/// short flows a lower latency (`sluice bench sched`, `wakeup_policies`).
pub const POLL_WHILE_FEW: usize = 4;

impl IdlePoll {
    /// Whether an NF polls idle when `sharing` NFs share its core.
    pub fn polls(self, sharing: usize) -> bool {
        match self {
            IdlePoll::Always => true,
            IdlePoll::Never => false,
            IdlePoll::WhileFew => sharing <= POLL_WHILE_FEW,
        }
    }
}

/// How a gate's threshold moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// Never: the threshold is `max_batch`.
    Fixed,
    /// Additive increase per wake-up by count, halved per timeout.
    Aimd,
    /// As `Aimd`, increased only when the count was reached quickly.
    RateAware,
}

/// One NF's wake-up policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakePolicy {
    /// The spec's name for it.
    pub policy: WakeupPolicy,
    /// How the threshold moves.
    pub growth: Growth,
    /// Threshold ceiling in packets (1: always wake at once).
    pub max_batch: u32,
    /// Longest a held packet waits, in nanoseconds.
    pub timeout_ns: u64,
    /// A packet of a flow with fewer packets than this wakes at once.
    pub short_flow_packets: u32,
    /// Whether the NF polls idle before it sleeps.
    pub idle: IdlePoll,
}

impl Default for WakePolicy {
    /// The spec's default (`auto`).
    fn default() -> Self {
        WakePolicy::from_rule(&WakeRule::default())
    }
}

impl WakePolicy {
    /// Wake at the first packet (no batching), polling idle.
    pub const IMMEDIATE: WakePolicy = WakePolicy {
        policy: WakeupPolicy::Hybrid,
        growth: Growth::Aimd,
        max_batch: 1,
        timeout_ns: 0,
        short_flow_packets: 0,
        idle: IdlePoll::Always,
    };

    /// The policy of a rule for an NF that is the first process NF of a
    /// chain (`entry`) or not. Under `auto` only a chain's entry holds
    /// packets: what it emits reaches the NFs after it in batches already,
    /// and a hold at every hop would add up along the chain.
    pub fn for_hop(r: &WakeRule, entry: bool) -> Self {
        let p = WakePolicy::from_rule(r);
        if r.policy == WakeupPolicy::Auto && !entry {
            return WakePolicy { max_batch: 1, ..p };
        }
        p
    }

    /// The policy of a rule.
    pub fn from_rule(r: &WakeRule) -> Self {
        WakePolicy {
            policy: r.policy,
            growth: match r.policy {
                WakeupPolicy::Threshold => Growth::Fixed,
                WakeupPolicy::Auto => Growth::RateAware,
                _ => Growth::Aimd,
            },
            max_batch: r.max_batch().max(1),
            timeout_ns: r.timeout_us().saturating_mul(1_000),
            short_flow_packets: r.short_flow_packets(),
            idle: match r.policy {
                WakeupPolicy::Auto => IdlePoll::WhileFew,
                WakeupPolicy::Hybrid => IdlePoll::Always,
                _ => IdlePoll::Never,
            },
        }
    }

    /// Whether any packet may be held back at all.
    pub fn batches(&self) -> bool {
        self.max_batch > 1
    }

    /// The threshold a gate starts from.
    fn initial(&self) -> u32 {
        match self.growth {
            Growth::Fixed => self.max_batch,
            _ => 1,
        }
    }
}

const NOT_HOLDING: u64 = u64::MAX;

/// One NF's wake-up state: its policy, its threshold and since when
/// packets wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeGate {
    policy: WakePolicy,
    threshold: u32,
    holding_since: u64,
}

impl Default for WakeGate {
    fn default() -> Self {
        WakeGate::new(WakePolicy::IMMEDIATE)
    }
}

impl WakeGate {
    /// A gate under `policy`, holding nothing.
    pub fn new(policy: WakePolicy) -> Self {
        WakeGate {
            policy,
            threshold: policy.initial(),
            holding_since: NOT_HOLDING,
        }
    }

    /// Takes `policy` (a new plan); the threshold starts again if it
    /// changed. Held packets stay held until the next decision.
    pub fn set_policy(&mut self, policy: WakePolicy) {
        if self.policy != policy {
            *self = WakeGate {
                holding_since: self.holding_since,
                ..WakeGate::new(policy)
            };
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &WakePolicy {
        &self.policy
    }

    /// Whether the worker must look for short flows in a batch for this
    /// gate: only then does a short flow change the decision.
    pub fn wants_short_flows(&self) -> bool {
        self.policy.short_flow_packets > 0 && self.threshold > 1
    }

    /// Packets were queued for the NF while it sleeps, and `queued` now
    /// wait in its ring; `short` says whether one of them belongs to a
    /// short flow. Whether to wake it now.
    pub fn on_queued(&mut self, queued: u32, short: bool, now: u64) -> bool {
        if queued >= self.threshold {
            let fast = if self.holding_since == NOT_HOLDING {
                // Reached in one hand-over: more than one packet came at
                // once.
                queued > 1
            } else {
                now.saturating_sub(self.holding_since) < self.policy.timeout_ns / 2
            };
            let grow = match self.policy.growth {
                Growth::Fixed => false,
                Growth::Aimd => true,
                Growth::RateAware => fast,
            };
            if grow {
                self.threshold = (self.threshold + 1).min(self.policy.max_batch);
            }
            self.holding_since = NOT_HOLDING;
            return true;
        }
        if short && self.policy.short_flow_packets > 0 {
            self.holding_since = NOT_HOLDING;
            return true;
        }
        if self.holding_since == NOT_HOLDING {
            self.holding_since = now;
        }
        false
    }

    /// Whether held packets have waited long enough that the NF must be
    /// woken now (an adaptive threshold then halves: traffic was sparser
    /// than it assumed).
    pub fn on_timer(&mut self, now: u64) -> bool {
        if self.holding_since == NOT_HOLDING
            || now.saturating_sub(self.holding_since) < self.policy.timeout_ns
        {
            return false;
        }
        if self.policy.growth != Growth::Fixed {
            self.threshold = (self.threshold / 2).max(1);
        }
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
mod tests;
