//! The wake-up gate under each policy, driven with explicit clocks.

use super::*;

fn policy(rule: WakeRule) -> WakePolicy {
    WakePolicy::from_rule(&rule)
}

/// `hybrid` with a ceiling of 4 and a 20 µs timeout.
fn aimd() -> WakePolicy {
    policy(WakeRule {
        max_batch: Some(4),
        timeout_us: Some(20),
        ..WakeRule::of(WakeupPolicy::Hybrid)
    })
}

#[test]
fn immediate_policy_wakes_at_every_first_packet() {
    for p in [
        WakePolicy::IMMEDIATE,
        policy(WakeRule::of(WakeupPolicy::EveryPacket)),
        policy(WakeRule::of(WakeupPolicy::Hybrid)),
    ] {
        let mut g = WakeGate::new(p);
        for t in 0..10 {
            assert!(g.on_queued(1, false, t));
            assert_eq!(g.threshold(), 1);
            assert!(!g.is_holding());
        }
    }
}

#[test]
fn aimd_threshold_grows_by_one_per_wake_up_by_count_up_to_the_ceiling() {
    let mut g = WakeGate::new(aimd());
    let mut seen = Vec::new();
    for _ in 0..6 {
        let need = g.threshold();
        assert!(!g.on_queued(need - 1, false, 0) || need == 1);
        assert!(g.on_queued(need, false, 0));
        seen.push(need);
    }
    assert_eq!(seen, [1, 2, 3, 4, 4, 4]);
}

#[test]
fn held_packets_wake_the_nf_at_the_timeout_and_halve_the_threshold() {
    let p = aimd();
    let mut g = WakeGate::new(p);
    for _ in 0..3 {
        assert!(g.on_queued(g.threshold(), false, 0));
    }
    assert_eq!(g.threshold(), 4);
    assert!(!g.on_queued(1, false, 1_000));
    assert!(
        !g.on_queued(2, false, 5_000),
        "the clock starts at the first"
    );
    assert!(!g.on_timer(20_999));
    assert!(g.on_timer(21_000));
    assert_eq!(g.threshold(), 2);
    assert!(!g.is_holding());
    assert!(!g.on_timer(1_000_000), "nothing held any more");
}

#[test]
fn a_fixed_threshold_never_moves() {
    let p = policy(WakeRule {
        threshold: Some(8),
        ..WakeRule::of(WakeupPolicy::Threshold)
    });
    assert_eq!(p.timeout_ns, 100_000);
    let mut g = WakeGate::new(p);
    assert_eq!(g.threshold(), 8);
    assert!(!g.on_queued(7, false, 0));
    assert!(g.on_queued(8, false, 10));
    assert_eq!(g.threshold(), 8);
    assert!(!g.on_queued(1, false, 20));
    assert!(g.on_timer(100_020));
    assert_eq!(g.threshold(), 8);
    // No short-flow rule under `threshold`.
    assert!(!g.wants_short_flows());
    assert!(!g.on_queued(1, true, 0));
}

#[test]
fn a_short_flow_wakes_at_once_without_moving_the_threshold() {
    let mut g = WakeGate::new(policy(WakeRule::of(WakeupPolicy::Adaptive)));
    for _ in 0..5 {
        assert!(g.on_queued(g.threshold(), false, 0));
    }
    assert_eq!(g.threshold(), 6);
    assert!(g.wants_short_flows());
    assert!(!g.on_queued(1, false, 0), "a long flow waits");
    assert!(g.on_queued(2, true, 10), "a short flow does not");
    assert!(!g.is_holding());
    assert_eq!(g.threshold(), 6);
}

#[test]
fn rate_aware_growth_never_holds_a_sparse_flow() {
    // One packet per hand-over, each long after the last: `auto` stays
    // at threshold 1 while Flurries' AIMD holds every other packet.
    let mut auto = WakeGate::new(policy(WakeRule::of(WakeupPolicy::Auto)));
    let mut flurries = WakeGate::new(aimd());
    let (mut held_auto, mut held_aimd) = (0, 0);
    for k in 0..100u64 {
        let t = k * 1_000_000;
        if !auto.on_queued(1, false, t) {
            held_auto += 1;
            assert!(auto.on_timer(t + 20_000));
        }
        if !flurries.on_queued(1, false, t) {
            held_aimd += 1;
            assert!(flurries.on_timer(t + 20_000));
        }
    }
    assert_eq!(held_auto, 0);
    assert_eq!(held_aimd, 50);
}

#[test]
fn rate_aware_growth_batches_a_dense_flow() {
    let mut g = WakeGate::new(policy(WakeRule {
        timeout_us: Some(20),
        ..WakeRule::of(WakeupPolicy::Auto)
    }));
    // Bursts of two in one hand-over, then packets 1 µs apart.
    assert!(g.on_queued(2, false, 0));
    assert_eq!(g.threshold(), 2);
    let mut t = 10_000;
    for _ in 0..40 {
        let need = g.threshold();
        for q in 1..need {
            assert!(!g.on_queued(q, false, t));
            t += 1_000;
        }
        assert!(g.on_queued(need, false, t));
        t += 50_000;
    }
    assert_eq!(g.threshold(), 11, "grew while the count came within 10 µs");
}

#[test]
fn released_gate_holds_nothing() {
    let p = aimd();
    let mut g = WakeGate::new(p);
    assert!(g.on_queued(1, false, 0));
    assert!(!g.on_queued(1, false, 10));
    assert!(g.is_holding());
    g.release();
    assert!(!g.is_holding());
    assert!(!g.on_timer(u64::MAX));
}

#[test]
fn a_new_policy_restarts_the_threshold_and_keeps_what_is_held() {
    let mut g = WakeGate::new(aimd());
    assert!(g.on_queued(1, false, 0));
    assert!(!g.on_queued(1, false, 10));
    g.set_policy(aimd());
    assert_eq!(g.threshold(), 2, "same policy: nothing changes");
    g.set_policy(policy(WakeRule::of(WakeupPolicy::Threshold)));
    assert_eq!(g.threshold(), 32);
    assert!(g.is_holding());
    assert!(g.on_timer(100_010));
}

#[test]
fn policy_from_rule() {
    let p = policy(WakeRule {
        max_batch: Some(16),
        timeout_us: Some(25),
        ..WakeRule::of(WakeupPolicy::Hybrid)
    });
    assert_eq!(p.max_batch, 16);
    assert_eq!(p.timeout_ns, 25_000);
    assert!(p.batches() && p.idle == IdlePoll::Always);
    assert!(!policy(WakeRule::of(WakeupPolicy::Hybrid)).batches());
    assert_eq!(
        policy(WakeRule::of(WakeupPolicy::EveryPacket)).idle,
        IdlePoll::Never
    );
    let auto = WakeRule::of(WakeupPolicy::Auto);
    assert!(policy(auto).idle.polls(POLL_WHILE_FEW));
    assert!(!policy(auto).idle.polls(POLL_WHILE_FEW + 1));
    // Only a chain's entry holds packets under `auto`.
    assert!(WakePolicy::for_hop(&auto, true).batches());
    assert!(!WakePolicy::for_hop(&auto, false).batches());
    let adaptive = WakeRule::of(WakeupPolicy::Adaptive);
    assert!(WakePolicy::for_hop(&adaptive, false).batches());
    assert_eq!(WakePolicy::default().growth, Growth::RateAware);
}
