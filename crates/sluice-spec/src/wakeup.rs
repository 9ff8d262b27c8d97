//! Wake-up rules: when the platform wakes a sleeping process NF
//! (`settings.wakeup`, and per chain or per NF `chains[].wakeup`,
//! `nfs[].wakeup`). The policies are Flurries' Table 2 (seed 004 §5.1,
//! §6.3) plus today's hybrid polling and sluice's default:
//!
//! | policy | NF idle | a sleeping NF is woken |
//! |---|---|---|
//! | `every_packet` | sleeps at once | at its first packet (Flurries "Min") |
//! | `threshold` | sleeps at once | at `threshold` packets or after `timeout_us` ("Naive") |
//! | `adaptive` | sleeps at once | at once for a packet of a flow shorter than `short_flow_packets`, else at an AIMD threshold (+1 per wake-up by count, ½ per timeout) up to `max_batch` |
//! | `hybrid` | polls `busy_poll_us`, then sleeps | at an AIMD threshold up to `max_batch` (default 1: at once) |
//! | `auto` | polls while at most 4 NFs share its core, else sleeps at once | as `adaptive` at a chain's first process NF, but the threshold grows only while packets come within half the timeout; at once elsewhere in the chain |
//!
//! A rule on an NF replaces its chains' rules, which replace
//! `settings.wakeup`; a rule names its policy and takes that policy's
//! defaults for the parameters it leaves out (it does not inherit them).

use crate::config_node::ConfigNode;
use crate::fields::{self, Fields, Res};
use crate::limits;

/// How a sleeping process NF is woken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeupPolicy {
    /// Hybrid polling, and a per-flow, rate-aware threshold (`auto`).
    #[default]
    Auto,
    /// Polls idle, then sleeps; an AIMD threshold (`hybrid`).
    Hybrid,
    /// Sleeps when idle, woken at its first packet (`every_packet`).
    EveryPacket,
    /// Sleeps when idle, woken at a fixed count or timeout (`threshold`).
    Threshold,
    /// Sleeps when idle; short flows at once, long ones by AIMD
    /// (`adaptive`, Flurries).
    Adaptive,
}

spec_names!(WakeupPolicy {
    Auto = "auto",
    Hybrid = "hybrid",
    EveryPacket = "every_packet",
    Threshold = "threshold",
    Adaptive = "adaptive",
});

impl WakeupPolicy {
    /// Whether an idle NF polls before it sleeps (else it sleeps at once).
    pub fn polls_idle(self) -> bool {
        matches!(self, WakeupPolicy::Auto | WakeupPolicy::Hybrid)
    }

    /// Which parameters the policy takes.
    fn takes(self, key: &str) -> bool {
        match self {
            WakeupPolicy::EveryPacket => false,
            WakeupPolicy::Threshold => matches!(key, "threshold" | "timeout_us"),
            WakeupPolicy::Hybrid => matches!(key, "max_batch" | "timeout_us"),
            WakeupPolicy::Adaptive | WakeupPolicy::Auto => {
                matches!(key, "max_batch" | "timeout_us" | "short_flow_packets")
            }
        }
    }
}

/// A wake-up rule: a policy and the parameters given for it (`None`: the
/// policy's default, see [`WakeRule::max_batch`] and the others).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WakeRule {
    /// `policy`, default `auto`.
    pub policy: WakeupPolicy,
    /// Ceiling of the adaptive threshold in packets (`max_batch`, 1..=256).
    pub max_batch: Option<u32>,
    /// Fixed threshold in packets of `threshold` (`threshold`, 1..=256).
    pub threshold: Option<u32>,
    /// Longest a held packet waits, µs (`timeout_us`, 1..=100000).
    pub timeout_us: Option<u64>,
    /// Flows with fewer packets than this wake their NF at once
    /// (`short_flow_packets`, 0..=1000000; Flurries' T_short).
    pub short_flow_packets: Option<u32>,
}

/// The keys of a rule (`settings.wakeup` adds `busy_poll_us`).
pub(crate) const RULE_KEYS: [&str; 5] = [
    "policy",
    "max_batch",
    "threshold",
    "timeout_us",
    "short_flow_packets",
];

impl WakeRule {
    /// A rule of `policy` with its defaults.
    pub fn of(policy: WakeupPolicy) -> WakeRule {
        WakeRule {
            policy,
            ..WakeRule::default()
        }
    }

    /// The threshold ceiling in force: `hybrid` 1 (wake at once unless
    /// raised), `threshold` its fixed threshold, otherwise 32 (the NF
    /// batch).
    pub fn max_batch(&self) -> u32 {
        match self.policy {
            WakeupPolicy::EveryPacket => 1,
            WakeupPolicy::Threshold => self.threshold(),
            WakeupPolicy::Hybrid => self.max_batch.unwrap_or(1),
            WakeupPolicy::Adaptive | WakeupPolicy::Auto => self.max_batch.unwrap_or(32),
        }
    }

    /// The fixed threshold of `threshold` (default 32, Flurries' Naive).
    pub fn threshold(&self) -> u32 {
        self.threshold.unwrap_or(32)
    }

    /// The timeout in force, µs: `threshold` 100 (Naive-100us), `adaptive`
    /// and `auto` 1000 (Flurries' Adaptive), `hybrid` 20.
    pub fn timeout_us(&self) -> u64 {
        self.timeout_us.unwrap_or(match self.policy {
            WakeupPolicy::Threshold => 100,
            WakeupPolicy::Adaptive | WakeupPolicy::Auto => 1000,
            _ => 20,
        })
    }

    /// Flows shorter than this (packets) wake at once: 36 (Flurries'
    /// T_short) for `adaptive` and `auto`, otherwise 0.
    pub fn short_flow_packets(&self) -> u32 {
        match self.policy {
            WakeupPolicy::Adaptive | WakeupPolicy::Auto => self.short_flow_packets.unwrap_or(36),
            _ => 0,
        }
    }

    /// The parameters given, by key.
    fn given(&self) -> [(&'static str, Option<u64>); 4] {
        [
            ("max_batch", self.max_batch.map(u64::from)),
            ("threshold", self.threshold.map(u64::from)),
            ("timeout_us", self.timeout_us),
            ("short_flow_packets", self.short_flow_packets.map(u64::from)),
        ]
    }

    /// Checks the rule: each parameter in range and taken by the policy.
    /// `Err((key, message))`.
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        for (key, v) in self.given() {
            let Some(v) = v else { continue };
            if !self.policy.takes(key) {
                return Err((key, self.refusal(key)));
            }
            limit(key).check(v).map_err(|m| (key, m))?;
        }
        Ok(())
    }

    fn refusal(&self, key: &str) -> String {
        let takes: Vec<&str> = RULE_KEYS[1..]
            .iter()
            .copied()
            .filter(|k| self.policy.takes(k))
            .collect();
        format!(
            "wake-up policy {} takes no `{key}` (it takes {})",
            self.policy.name(),
            if takes.is_empty() {
                "no parameters".to_string()
            } else {
                takes.join(", ")
            }
        )
    }

    /// The rule as JSON (the keys given and the policy).
    pub(crate) fn emit(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "policy": self.policy.name() });
        for (key, x) in self.given() {
            if let Some(x) = x {
                v[key] = x.into();
            }
        }
        v
    }
}

fn limit(key: &str) -> limits::Limit {
    match key {
        "max_batch" => limits::WAKE_MAX_BATCH,
        "threshold" => limits::WAKE_MAX_BATCH,
        "timeout_us" => limits::WAKE_TIMEOUT_US,
        _ => limits::SHORT_FLOW_PACKETS,
    }
}

/// The optional parameter `key` within its limit.
fn param<T: TryFrom<u64>>(f: &Fields<'_>, key: &str) -> Res<Option<T>> {
    f.opt(key)
        .map(|n| fields::int_as(n, limit(key)))
        .transpose()
}

/// Decodes a rule from `f` (whose unknown keys the caller refused). A
/// parameter the policy does not take is an error at that parameter.
pub(crate) fn decode(f: &Fields<'_>) -> Res<WakeRule> {
    let policy = match f.opt("policy") {
        Some(n) => fields::choice(n, "wake-up policy", &WakeupPolicy::ALL)?,
        None => WakeupPolicy::default(),
    };
    let rule = WakeRule {
        policy,
        max_batch: param(f, "max_batch")?,
        threshold: param(f, "threshold")?,
        timeout_us: param(f, "timeout_us")?,
        short_flow_packets: param(f, "short_flow_packets")?,
    };
    if let Err((key, msg)) = rule.check() {
        let node = f.opt(key).unwrap_or_else(|| f.node());
        return Err(node.error(msg));
    }
    Ok(rule)
}

/// Decodes `chains[].wakeup` or `nfs[].wakeup`.
pub(crate) fn decode_rule(node: &ConfigNode) -> Res<WakeRule> {
    let f = Fields::of(node, "a wake-up rule")?;
    f.deny_unknown("wakeup", &RULE_KEYS)?;
    decode(&f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_has_its_defaults() {
        let r = |p| WakeRule::of(p);
        assert_eq!(r(WakeupPolicy::Hybrid).max_batch(), 1);
        assert_eq!(r(WakeupPolicy::Hybrid).timeout_us(), 20);
        assert_eq!(r(WakeupPolicy::Threshold).max_batch(), 32);
        assert_eq!(r(WakeupPolicy::Threshold).timeout_us(), 100);
        assert_eq!(r(WakeupPolicy::Adaptive).timeout_us(), 1000);
        assert_eq!(r(WakeupPolicy::Adaptive).short_flow_packets(), 36);
        assert_eq!(r(WakeupPolicy::Auto).short_flow_packets(), 36);
        assert_eq!(r(WakeupPolicy::Auto).timeout_us(), 1000);
        assert_eq!(r(WakeupPolicy::EveryPacket).max_batch(), 1);
        assert_eq!(r(WakeupPolicy::EveryPacket).short_flow_packets(), 0);
        assert!(r(WakeupPolicy::Auto).policy.polls_idle());
        assert!(!r(WakeupPolicy::Adaptive).policy.polls_idle());
    }

    #[test]
    fn a_parameter_the_policy_does_not_take_is_refused() {
        let rule = WakeRule {
            threshold: Some(8),
            ..WakeRule::of(WakeupPolicy::Adaptive)
        };
        let (key, msg) = rule.check().unwrap_err();
        assert_eq!(key, "threshold");
        assert!(
            msg.contains("takes max_batch, timeout_us, short_flow_packets"),
            "{msg}"
        );
        let rule = WakeRule {
            timeout_us: Some(5),
            ..WakeRule::of(WakeupPolicy::EveryPacket)
        };
        assert!(rule.check().unwrap_err().1.contains("no parameters"));
    }

    #[test]
    fn out_of_range_parameters_are_refused() {
        let rule = WakeRule {
            max_batch: Some(0),
            ..WakeRule::of(WakeupPolicy::Hybrid)
        };
        assert_eq!(rule.check().unwrap_err().0, "max_batch");
        let rule = WakeRule {
            timeout_us: Some(100_001),
            ..WakeRule::of(WakeupPolicy::Threshold)
        };
        assert_eq!(rule.check().unwrap_err().0, "timeout_us");
    }

    #[test]
    fn emit_names_the_policy_and_only_the_given_parameters() {
        let rule = WakeRule {
            threshold: Some(8),
            ..WakeRule::of(WakeupPolicy::Threshold)
        };
        assert_eq!(
            rule.emit(),
            serde_json::json!({"policy": "threshold", "threshold": 8})
        );
        for (name, p) in WakeupPolicy::ALL {
            assert_eq!(p.name(), name);
        }
    }
}
