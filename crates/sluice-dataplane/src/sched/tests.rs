//! The scheduler as a component: assignments as pure functions, budgets
//! and the watchdog on a real arena.

use super::*;
use crate::polling::LoopConfig;
use sluice_mem::NfStats;
use sluice_sys::SchedTimes;
use std::sync::atomic::Ordering;

fn member(slot: u32, cpu: u32, order: (u32, u32)) -> Member {
    Member {
        slot,
        cpu,
        order,
        beside_worker: false,
        weight: None,
        idle: IdlePoll::Always,
        domain: 0,
    }
}

fn auto() -> SchedPolicy {
    SchedPolicy {
        mode: SchedMode::Auto,
        slice_ns: 20_000,
        busy_poll_us: None,
        yield_every: None,
        kernel_class: sluice_sys::SchedClass::Normal,
    }
}

fn turns() -> SchedPolicy {
    SchedPolicy {
        mode: SchedMode::Turns,
        ..auto()
    }
}

#[test]
fn each_core_runs_its_nfs_in_chain_order_in_a_circle() {
    // Slots deliberately out of chain order.
    let m = [
        member(7, 1, (0, 2)),
        member(3, 1, (0, 0)),
        member(9, 1, (1, 0)),
        member(5, 1, (0, 1)),
    ];
    let a = assign(&turns(), &m);
    let next: Vec<(u32, u32)> = a.iter().map(|a| (a.slot, a.next)).collect();
    assert_eq!(next, [(3, 5), (5, 7), (7, 9), (9, 3)]);
    assert!(a.iter().all(|a| a.mode == mode::TURNS && a.core == 1));
}

#[test]
fn auto_lets_a_few_nfs_poll_and_never_schedules_a_workers_core() {
    let few = [member(0, 1, (0, 0)), member(1, 1, (0, 1))];
    let a = assign(&auto(), &few);
    assert!(a.iter().all(|a| a.mode == mode::HYBRID));
    let forced = turns();
    assert!(assign(&forced, &few).iter().all(|a| a.mode == mode::TURNS));
    let beside: Vec<Member> = (0..8)
        .map(|i| Member {
            beside_worker: true,
            weight: None,
            idle: IdlePoll::Always,
            ..member(i, 0, (0, i))
        })
        .collect();
    assert!(assign(&forced, &beside)
        .iter()
        .all(|a| a.mode == mode::HYBRID));
}

#[test]
fn cores_are_separate_circles() {
    let m: Vec<Member> = (0..8).map(|i| member(i, 1 + i % 2, (0, i))).collect();
    let a = assign(&auto(), &m);
    for x in &a {
        let next = a.iter().find(|y| y.slot == x.next).unwrap();
        assert_eq!(next.core, x.core, "a link never leaves its core");
    }
    let on1: Vec<u32> = a.iter().filter(|x| x.core == 1).map(|x| x.slot).collect();
    assert_eq!(on1, [0, 2, 4, 6]);
}

fn arena(slots: u32) -> Arena {
    Arena::create(sluice_mem::ArenaConfig {
        buffers: 1024,
        ring_size: 64,
        nf_slots: slots,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .unwrap()
}

/// Puts one entry in `slot`'s receive ring (the scheduler only looks
/// at occupancy).
fn give_work(a: &Arena, slot: u32) {
    assert_eq!(a.nf_rx_ring(slot).producer().enqueue(&[1]).unwrap(), 1);
}

#[test]
fn the_budgets_reach_the_control_blocks_and_a_new_policy_replaces_them() {
    let a = arena(4);
    let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, 3 - i))).collect();
    let mut s = Scheduler::new(auto());
    s.apply(&a, &m);
    let b = |slot: u32| &a.nf_control(slot).budget;
    assert_eq!(b(3).mode.load(Ordering::Relaxed), mode::TURNS);
    assert_eq!(
        b(3).next.load(Ordering::Relaxed),
        2,
        "chain order, not slots"
    );
    assert_eq!(b(0).next.load(Ordering::Relaxed), 3, "a circle");
    assert_eq!(b(0).slice_ns.load(Ordering::Relaxed), 20_000);
    assert_eq!(s.stats().taking_turns, 4);
    s.set_policy(SchedPolicy {
        mode: SchedMode::Hybrid,
        ..auto()
    });
    s.apply(&a, &m);
    assert!((0..4).all(|i| b(i).mode.load(Ordering::Relaxed) == mode::HYBRID));
    assert_eq!(s.stats(), SchedStats::default());
}

#[test]
fn applying_hands_a_free_turn_to_an_nf_with_packets() {
    let a = arena(4);
    let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, i))).collect();
    give_work(&a, 2);
    Scheduler::new(auto()).apply(&a, &m);
    assert_eq!(a.domain_turn(0, 1).holder(), Some(2));
}

#[test]
fn trust_domains_on_one_core_are_separate_circles() {
    // Slots 0..4 in the platform's domain, 64..68 in domain 1 (its first
    // slot), all on core 1 and in one chain.
    let m: Vec<Member> = (0..8)
        .map(|i| {
            let d = (i % 2) as u8;
            Member {
                domain: d,
                ..member(u32::from(d) * 64 + i / 2, 1, (0, i))
            }
        })
        .collect();
    let a = assign(&turns(), &m);
    for x in &a {
        let next = a.iter().find(|y| y.slot == x.next).unwrap();
        assert_eq!(next.group(), x.group(), "a link never leaves its domain");
    }
    let ring = |d: u8| -> Vec<u32> {
        let mut s = a.iter().find(|x| x.domain == d).unwrap().slot;
        let mut out = vec![s];
        loop {
            s = a.iter().find(|x| x.slot == s).unwrap().next;
            if s == out[0] {
                return out;
            }
            out.push(s);
        }
    };
    assert_eq!(ring(0), [0, 1, 2, 3]);
    assert_eq!(ring(1), [64, 65, 66, 67]);
    // On an arena: each domain's free turn goes to its own NF with
    // packets, through its own turn word.
    let mut c = *arena(4).config();
    c.domain_buffers[0] = 256;
    let arena = Arena::create(c).unwrap();
    give_work(&arena, 2);
    give_work(&arena, 65);
    let mut s = Scheduler::new(turns());
    s.apply(&arena, &m);
    assert_eq!(arena.domain_turn(0, 1).holder(), Some(2));
    assert_eq!(arena.domain_turn(1, 1).holder(), Some(65));
    assert_eq!(s.stats().turn_cores, 2, "two turn groups");
}

/// A holder's process as the kernel would show it: at every look it has
/// run `ran` ns more, and it is `runnable` or not.
fn clock(ran: u64, runnable: bool) -> impl FnMut(u32) -> Option<SchedTimes> {
    let mut looks = 0u64;
    move |_| {
        looks += 1;
        Some(SchedTimes {
            on_cpu_ns: looks * ran,
            runnable_ns: 0,
            timeslices: looks,
            runnable,
        })
    }
}

/// Four NFs of one chain on core 1 taking turns; slot 0 holds the turn
/// and slot `waiter` has packets.
fn holder_of_four(waiter: u32) -> (Arena, Scheduler, Vec<Member>) {
    let a = arena(4);
    let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, i))).collect();
    let mut s = Scheduler::new(turns());
    s.apply(&a, &m);
    assert!(a.domain_turn(0, 1).claim(0));
    give_work(&a, waiter);
    (a, s, m)
}

/// Polices at `t0` and at `t0` + 1.5 limits: the holder loses the turn.
fn hand_over(
    a: &Arena,
    s: &mut Scheduler,
    t0: u64,
    times: &mut dyn FnMut(u32) -> Option<SchedTimes>,
) -> Vec<(u32, Revocation)> {
    let mut out = Vec::new();
    s.police(a, t0, times, &mut out);
    assert!(a.domain_turn(0, 1).holds(0), "not yet: {out:?}");
    s.police(a, t0 + HOG_MIN_NS * 3 / 2, times, &mut out);
    assert!(!a.domain_turn(0, 1).holds(0), "the turn moved on: {out:?}");
    out
}

#[test]
fn the_watchdog_takes_the_turn_from_a_hog_only_while_others_wait() {
    let a = arena(4);
    let m: Vec<Member> = (0..4).map(|i| member(i, 1, (0, i))).collect();
    let mut s = Scheduler::new(turns());
    s.apply(&a, &m);
    let turn = a.domain_turn(0, 1);
    assert!(turn.claim(0));
    let hog = &mut clock(JUDGE_NS / 2, true);
    let t0 = sluice_sys::monotonic_ns();
    let mut out = Vec::new();
    // Nobody waits: a holder may keep the turn as long as it likes.
    s.police(&a, t0 + 1, hog, &mut out);
    s.police(&a, t0 + 10 * HOG_MIN_NS, hog, &mut out);
    assert!(out.is_empty() && turn.holds(0));
    // Slot 3 waits: after the limit it gets the turn...
    give_work(&a, 3);
    let t1 = t0 + 10 * HOG_MIN_NS;
    let out = hand_over(&a, &mut s, t1, hog);
    assert!(out.is_empty(), "no verdict yet: {out:?}");
    assert_eq!(turn.holder(), Some(3), "the waiting NF gets the turn");
    // ...and the holder, which ran inside `process` without a sign of
    // life, is judged.
    a.nf_control(0).stats.inside.store(1, Ordering::Relaxed);
    let mut out = Vec::new();
    let t2 = t1 + HOG_MIN_NS * 3 / 2;
    s.police(&a, t2 + JUDGE_NS / 2, hog, &mut out);
    assert!(out.is_empty(), "{out:?}");
    s.police(&a, t2 + JUDGE_NS, hog, &mut out);
    assert_eq!(out, [(0, Revocation::Hog)]);
    assert_eq!(s.stats().revoked, 1);
    // The hog leaves the circle: the turn never comes back to it.
    assert_eq!(s.stats().demoted, 1);
    let b = |slot: u32| &a.nf_control(slot).budget;
    assert_eq!(b(0).mode.load(Ordering::Relaxed), mode::HYBRID);
    assert_eq!(b(3).next.load(Ordering::Relaxed), 1, "3 → 1, skipping 0");
    // It stays out when the worker applies its NFs again, and a free turn
    // never goes to it, packets or not.
    s.apply(&a, &m);
    assert_eq!(b(0).mode.load(Ordering::Relaxed), mode::HYBRID);
    assert_eq!(s.stats().taking_turns, 3);
    assert!(turn.revoke(3, None));
    give_work(&a, 0);
    s.apply(&a, &m);
    assert_eq!(turn.holder(), Some(3), "the member with packets, not 0");
}

#[test]
fn a_holder_the_host_held_off_its_cpu_hands_the_turn_on_and_stays() {
    let (a, mut s, _) = holder_of_four(2);
    // Runnable, on the CPU hardly at all.
    let held_off = &mut clock(JUDGE_NS / 100, true);
    let t0 = sluice_sys::monotonic_ns();
    assert!(hand_over(&a, &mut s, t0, held_off).is_empty());
    assert_eq!(a.domain_turn(0, 1).holder(), Some(2));
    // No sign of life yet after a judging window: watched again.
    let t1 = t0 + HOG_MIN_NS * 3 / 2;
    let mut out = Vec::new();
    s.police(&a, t1 + JUDGE_NS, held_off, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // Then its loop finishes the batch it was in.
    NfStats::add(&a.nf_control(0).stats.batches, 1);
    s.police(&a, t1 + 2 * JUDGE_NS, held_off, &mut out);
    assert_eq!(out, [(0, Revocation::HeldOff)]);
    let st = s.stats();
    assert_eq!((st.held_off, st.revoked, st.demoted), (1, 0, 0));
    assert_eq!(
        a.nf_control(0).budget.mode.load(Ordering::Relaxed),
        mode::TURNS,
        "it still takes turns"
    );
}

#[test]
fn a_holder_that_blocked_leaves_the_turns() {
    let (a, mut s, _) = holder_of_four(1);
    let asleep = &mut clock(0, false);
    let t0 = sluice_sys::monotonic_ns();
    assert!(hand_over(&a, &mut s, t0, asleep).is_empty());
    // Asleep in the platform's loop: waiting for a wake-up another NF
    // has begun, not its fault.
    let t1 = t0 + HOG_MIN_NS * 3 / 2;
    let mut out = Vec::new();
    s.police(&a, t1 + JUDGE_NS, asleep, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // Asleep inside `process`.
    a.nf_control(0).stats.inside.store(1, Ordering::Relaxed);
    s.police(&a, t1 + 2 * JUDGE_NS, asleep, &mut out);
    assert_eq!(out, [(0, Revocation::Blocked)]);
    assert_eq!(a.domain_turn(0, 1).holder(), Some(1));
    assert_eq!(s.stats().demoted, 1);
}

#[test]
fn the_verdict_follows_where_the_holders_time_went() {
    let t = |on_cpu_ns, runnable| SchedTimes {
        on_cpu_ns,
        runnable_ns: 0,
        timeslices: 0,
        runnable,
    };
    let w = 1_000;
    let inside = |a, b| judge(a, b, w, true);
    assert_eq!(inside(t(0, true), t(250, true)), Some(Revocation::Hog));
    assert_eq!(inside(t(0, true), t(250, false)), Some(Revocation::Hog));
    assert_eq!(inside(t(0, true), t(249, true)), None, "held off");
    assert_eq!(inside(t(0, true), t(100, false)), Some(Revocation::Blocked));
    // A restarted process's counters start again: it did not run.
    assert_eq!(inside(t(900, true), t(0, true)), None);
    // In the platform's loop an NF is never to blame.
    for last in [t(1_000, true), t(0, false)] {
        assert_eq!(judge(t(0, true), last, w, false), None);
    }
    assert!(Revocation::Hog.demotes() && Revocation::Blocked.demotes());
    assert!(!Revocation::HeldOff.demotes() && !Revocation::Stranger.demotes());
}

#[test]
fn a_turn_held_by_a_slot_that_left_is_taken_back_at_once() {
    let a = arena(4);
    let m: Vec<Member> = (0..3).map(|i| member(i, 1, (0, i))).collect();
    let mut s = Scheduler::new(turns());
    s.apply(&a, &m);
    assert!(a.domain_turn(0, 1).claim(3), "slot 3 is no member");
    let mut out = Vec::new();
    let never = &mut |_| -> Option<SchedTimes> { panic!("a stranger is not judged") };
    s.police(&a, sluice_sys::monotonic_ns() + 1, never, &mut out);
    assert_eq!(out, [(3, Revocation::Stranger)]);
    assert_eq!(a.domain_turn(0, 1).holder(), None);
    assert_eq!(s.stats().revoked, 0, "no NF's fault");
}

#[test]
fn auto_takes_turns_for_a_chain_not_for_nfs_of_separate_chains() {
    let separate: Vec<Member> = (0..10).map(|i| member(i, 1, (i, 0))).collect();
    assert!(assign(&auto(), &separate)
        .iter()
        .all(|a| a.mode == mode::HYBRID));
    let mut mixed = separate;
    mixed.extend((10..14).map(|i| member(i, 1, (20, i))));
    assert!(assign(&auto(), &mixed)
        .iter()
        .all(|a| a.mode == mode::TURNS));
}

#[test]
fn hybrid_turns_nobody() {
    let m: Vec<Member> = (0..10).map(|i| member(i, 1, (0, i))).collect();
    let p = SchedPolicy {
        mode: SchedMode::Hybrid,
        ..auto()
    };
    assert!(assign(&p, &m).iter().all(|a| a.mode == mode::HYBRID));
}

#[test]
fn nfs_polling_on_their_own_learn_how_many_share_their_core() {
    use sluice_mem::turn::poll;
    let a = arena(8);
    let hybrid = SchedPolicy {
        mode: SchedMode::Hybrid,
        ..auto()
    };
    let polling = |slot: u32| {
        let b = &a.nf_control(slot).budget;
        (
            b.poll_flags.load(Ordering::Relaxed),
            b.poll_ns.load(Ordering::Relaxed),
        )
    };
    let mut s = Scheduler::new(hybrid);
    // Started alone: it spins while it polls, and never yields.
    s.apply(&a, &[member(0, 1, (0, 0))]);
    assert_eq!(polling(0), (poll::PUBLISHED, 200_000));
    // Seven siblings join its core: it yields now, and polls 100 µs.
    let m: Vec<Member> = (0..8).map(|i| member(i, 1, (0, i))).collect();
    s.apply(&a, &m);
    let shared = poll::PUBLISHED | poll::YIELD_WHILE_POLLING | (1 << poll::YIELD_EVERY_SHIFT);
    assert!((0..8).all(|i| polling(i) == (shared, 100_000)));
    // `settings.wakeup.busy_poll_us` applied live.
    s.set_policy(SchedPolicy {
        busy_poll_us: Some(50),
        ..hybrid
    });
    s.apply(&a, &m);
    assert_eq!(polling(0), (shared, 50_000));
    // A wake-up policy that sleeps when idle (`every_packet`, ...) turns
    // its NF's polling off, and only its NF's.
    let mut sleepy = m.clone();
    sleepy[2].idle = IdlePoll::Never;
    s.apply(&a, &sleepy);
    assert_eq!(polling(2), (shared, 0));
    assert_eq!(polling(3), (shared, 50_000));
    s.apply(&a, &m);
    assert_eq!(polling(2), (shared, 50_000));
    // `settings.scheduler.yield_every`: UNiS's cooperative k, and 0 for
    // pure polling (no yield after a batch, none while idle).
    let every = |k: u32| SchedPolicy {
        busy_poll_us: Some(50),
        yield_every: Some(k),
        ..hybrid
    };
    s.set_policy(every(8));
    s.apply(&a, &m);
    let k8 = poll::PUBLISHED | poll::YIELD_WHILE_POLLING | (8 << poll::YIELD_EVERY_SHIFT);
    assert!((0..8).all(|i| polling(i) == (k8, 50_000)));
    s.set_policy(every(0));
    s.apply(&a, &m);
    assert!((0..8).all(|i| polling(i) == (poll::PUBLISHED, 50_000)));
    s.set_policy(SchedPolicy {
        busy_poll_us: Some(50),
        ..hybrid
    });
    s.apply(&a, &m);
    assert_eq!(polling(0), (shared, 50_000));
    // `auto` polls while few NFs share the core, and sleeps at once with
    // more.
    let auto: Vec<Member> = m
        .iter()
        .map(|&x| Member {
            idle: IdlePoll::WhileFew,
            ..x
        })
        .collect();
    s.apply(&a, &auto);
    assert_eq!(polling(0), (shared, 0));
    s.apply(&a, &auto[..4]);
    assert_eq!(polling(0), (shared, 50_000));
    s.apply(&a, &m);
    // Beside its worker (several workers): it gives way and sleeps.
    let beside: Vec<Member> = m
        .iter()
        .map(|&x| Member {
            beside_worker: true,
            weight: None,
            idle: IdlePoll::Always,
            ..x
        })
        .collect();
    s.set_policy(hybrid);
    s.apply(&a, &beside);
    assert_eq!(polling(3), (poll::PUBLISHED | poll::YIELD_WHILE_POLLING, 0));
}

#[test]
fn weights_lengthen_and_shorten_turns_and_turn_off_with_the_last_weight() {
    let a = arena(3);
    let weighted = |w: [Option<u32>; 3]| -> Vec<Member> {
        (0..3)
            .map(|i| Member {
                weight: w[i as usize],
                idle: IdlePoll::Always,
                ..member(i, 1, (0, i))
            })
            .collect()
    };
    let mut s = Scheduler::new(turns());
    let slice = |slot: u32| a.nf_control(slot).budget.slice_ns.load(Ordering::Relaxed);
    s.apply(&a, &weighted([Some(300), Some(50), None]));
    // Slices of 20 µs × weight / 100; an NF without a weight weighs 100.
    assert_eq!([slice(0), slice(1), slice(2)], [60_000, 10_000, 20_000]);
    assert_ne!(s.stats().weights, Enforced::Off);
    // The lightest weight still gets a turn of a microsecond.
    s.apply(&a, &weighted([Some(1), None, None]));
    assert_eq!(slice(0), 1_000);
    s.apply(&a, &weighted([None, None, None]));
    assert_eq!([slice(0), slice(1), slice(2)], [20_000; 3]);
    assert_eq!(s.stats().weights, Enforced::Off);
}

#[test]
fn a_change_rewrites_only_budgets_that_differ_and_a_reused_slot_whole() {
    let a = arena(8);
    let b = |slot: u32| &a.nf_control(slot).budget;
    // Two chains of one NF on core 1: both poll on their own (hybrid).
    let mut m: Vec<Member> = (0..2).map(|i| member(i, 1, (i, 0))).collect();
    let mut s = Scheduler::new(auto());
    s.apply(&a, &m);
    let window = |n| LoopConfig::for_sharing(0, n, None).busy_poll_ns;
    assert_eq!(b(0).poll_ns.load(Ordering::Relaxed), window(2));
    // A mark only the scheduler could overwrite: an NF whose budget is
    // unchanged by the next change keeps it.
    b(0).slice_ns.store(12_345, Ordering::Relaxed);
    m.push(member(2, 1, (2, 0)));
    s.apply(&a, &m);
    assert_eq!(
        b(0).slice_ns.load(Ordering::Relaxed),
        12_345,
        "not rewritten"
    );
    assert_eq!(b(2).poll_ns.load(Ordering::Relaxed), window(3));
    // Five on the core: the share halves, every budget is written again.
    m.extend((3..5).map(|i| member(i, 1, (i, 0))));
    s.apply(&a, &m);
    assert_eq!(b(0).slice_ns.load(Ordering::Relaxed), 20_000);
    assert!((0..5).all(|i| b(i).poll_ns.load(Ordering::Relaxed) == window(5)));
    // Slot 4's NF leaves and a new one takes the slot, its budget cleared
    // (a fresh slot): it is written whole, though its values are the old
    // NF's.
    let gone = m.pop().unwrap();
    s.apply(&a, &m);
    b(4).poll_ns.store(0, Ordering::Relaxed);
    b(4).core.store(0, Ordering::Relaxed);
    m.push(gone);
    s.apply(&a, &m);
    assert_eq!(b(4).poll_ns.load(Ordering::Relaxed), window(5));
    assert_eq!(b(4).core.load(Ordering::Relaxed), 1);
}
