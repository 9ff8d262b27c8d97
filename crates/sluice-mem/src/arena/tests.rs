//! Tests of the arena: layout of regions, attaching, the huge-page
//! fallback, and keeping one trust domain.

use super::*;
use crate::control::NfControl;
use crate::turn::CoreTurn;

fn small() -> ArenaConfig {
    ArenaConfig {
        buffers: 256,
        ring_size: 64,
        nf_slots: 3,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..ArenaConfig::default()
    }
}

fn fds(a: &Arena) -> Vec<OwnedFd> {
    a.fds()
        .into_iter()
        .map(|fd| fd.try_clone_to_owned().unwrap())
        .collect()
}

#[test]
fn large_buffers_follow_the_ordinary_ones_and_do_not_overlap() {
    let mut c = small();
    c.large_buffers = 3;
    let a = Arena::create(c).unwrap();
    assert_eq!(a.total_buffers(), 259);
    let pool = crate::pool::BufferPool::for_arena(&a);
    let mut cache = crate::pool::PoolCache::new(&pool, 8);
    let mut last = cache.alloc().unwrap();
    let mut big: Vec<_> = (0..3).map(|_| cache.alloc_large().unwrap()).collect();
    assert!(cache.alloc_large().is_none());
    let mut ends = Vec::new();
    for h in big.iter_mut() {
        assert!(h.index() >= 256);
        let i = h.index() as u8;
        let mut p = a.pkt(h);
        assert!(p.is_large());
        p.reset(65_000);
        p.data_mut().fill(i);
        ends.push((p.data().as_ptr() as usize, p.data().len()));
    }
    // The last ordinary buffer ends before the first large one starts.
    let mut p = a.pkt(&mut last);
    p.reset(2048);
    p.data_mut().fill(0xee);
    for h in big.iter_mut() {
        let i = h.index() as u8;
        assert!(a.pkt(h).data().iter().all(|&b| b == i));
    }
    ends.sort();
    for w in ends.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0);
    }
    assert!(a.size() >= 256 * BUF_STRIDE + 3 * LARGE_STRIDE);
    for h in big {
        cache.free(h);
    }
    cache.free(last);
    drop(cache);
    assert_eq!(pool.audit().free, 259);
}

#[test]
fn regions_do_not_overlap() {
    let a = Arena::create(small()).unwrap();
    let base = a.base.as_ptr() as usize;
    let ctl = |s| a.nf_control(s) as *const _ as usize - base;
    assert!(ctl(1) - ctl(0) >= std::mem::size_of::<NfControl>());
    assert!(a.worker_wake(0) as *const _ as usize - base < ctl(0));
    let bells = a.nf_slots_bells();
    let last_bell = a.bell_word(bells - 1) as *const _ as usize - base;
    assert!(
        a.bell_word(0) as *const _ as usize - base
            > a.domain_turn(0, MAX_CORES as u32 - 1) as *const _ as usize - base
    );
    assert!(last_bell + 8 <= ctl(0));
    assert!(a.nf_rx_ring(2).capacity() > 0);
    assert_eq!(a.backing(), &Backing::NormalPages);
    assert!(a.size() >= 256 * BUF_STRIDE);
}

#[test]
fn hugepages_fall_back_with_a_reason_when_unavailable() {
    let mut c = small();
    c.hugepages = true;
    let a = Arena::create(c).unwrap();
    match a.backing() {
        Backing::HugePages => {}
        Backing::NormalPagesFallback(why) => assert!(why.contains("huge pages")),
        Backing::NormalPages => panic!("asked for huge pages, got a silent normal-page arena"),
    }
}

#[test]
fn an_attached_arena_sees_the_same_memory_at_the_same_offsets() {
    use std::sync::atomic::Ordering;
    let a = Arena::create(small()).unwrap();
    let b = Arena::attach(fds(&a), small(), a.size(), false).unwrap();
    a.nf_control(2).pid.store(4242, Ordering::Relaxed);
    assert_eq!(b.nf_control(2).pid.load(Ordering::Relaxed), 4242);
    let mut cfg = small();
    cfg.buffers *= 4;
    assert!(matches!(
        Arena::attach(fds(&a), cfg, a.size(), false),
        Err(ArenaError::Config(_))
    ));
}

#[test]
fn bad_config_is_an_error() {
    let mut c = small();
    c.ring_size = 100;
    assert!(matches!(Arena::create(c), Err(ArenaError::Config(_))));
}

fn with_domains() -> ArenaConfig {
    let mut c = small();
    c.domain_buffers[..2].copy_from_slice(&[300, 300]);
    c.large_buffers = 1;
    c
}

#[test]
fn an_attached_arena_sees_every_domain_and_checks_its_descriptors() {
    let a = Arena::create(with_domains()).unwrap();
    assert_eq!(a.domains().len(), 3);
    let b = Arena::attach(fds(&a), with_domains(), a.size(), false).unwrap();
    for d in a.domains() {
        let i = d.indices.end - 1;
        let mut h = PktHandle::from_raw_owned(i);
        a.pkt(&mut h).reset(4);
        a.pkt(&mut h).data_mut().copy_from_slice(&i.to_le_bytes());
        let mut h = PktHandle::from_raw_owned(i);
        assert_eq!(b.pkt(&mut h).data(), i.to_le_bytes());
    }
    let mut short = fds(&a);
    short.pop();
    assert!(matches!(
        Arena::attach(short, with_domains(), a.size(), false),
        Err(ArenaError::Config(_))
    ));
}

/// Forks a child that takes a pointer into the arena (`take`, as hostile
/// code would before its sandbox closes), keeps domain `keep`, reads
/// through the pointer, then asks the arena for the same thing again
/// (`again`); its wait status. Exit 0: both worked (its own domain's);
/// 4: the arena refused the second time but the read did not fault.
fn child(
    a: &mut Arena,
    keep: usize,
    take: &dyn Fn(&Arena) -> *const u8,
    again: &dyn Fn(&Arena),
) -> i32 {
    // SAFETY: the child runs only the block below (no locks; it ends
    // with `_exit`, never returning into the harness).
    match unsafe { libc::fork() } {
        0 => {
            let p = take(a);
            let kept = a.keep_domain(keep).is_ok();
            // SAFETY: deliberately none if `p` is another domain's: the
            // read is what the test is about.
            let _ = unsafe { std::ptr::read_volatile(p) };
            let refused =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| again(a))).is_err();
            let code = match (kept, refused) {
                (false, _) => 3,
                (true, false) => 0,
                (true, true) => 4,
            };
            // SAFETY: ends the child without running the harness.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for our own child into a local.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            status
        }
    }
}

/// [`child`] reading buffer `touch`.
fn child_touching(a: &mut Arena, keep: usize, touch: u32) -> i32 {
    child(
        a,
        keep,
        &|a| {
            let mut h = PktHandle::from_raw_owned(touch);
            a.pkt(&mut h).scratch().as_ptr()
        },
        &|a| {
            let mut h = PktHandle::from_raw_owned(touch);
            let _ = a.pkt(&mut h).scratch()[0];
        },
    )
}

fn segfaulted(st: i32) -> bool {
    libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGSEGV
}

fn exited_ok(st: i32) -> bool {
    libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0
}

#[test]
fn a_process_that_keeps_one_domain_cannot_touch_another() {
    let mut a = Arena::create(with_domains()).unwrap();
    let d = a.domains().to_vec();
    let own = child_touching(&mut a, 1, d[1].indices.start);
    assert!(exited_ok(own), "{own}");
    let large = a.buffers();
    for other in [d[0].indices.start, d[2].indices.end - 1, large] {
        let st = child_touching(&mut a, 1, other);
        assert!(segfaulted(st), "buffer {other}: {st}");
    }
    // Domain 0 keeps the large buffers; the parent still has all.
    let st = child_touching(&mut a, 0, large);
    assert!(exited_ok(st), "{st}");
    let mut h = PktHandle::from_raw_owned(d[2].indices.start);
    a.pkt(&mut h).scratch()[0] = 2;
}

#[test]
fn each_domain_has_its_own_slots_and_turn_words() {
    let a = Arena::create(with_domains()).unwrap();
    let slots: Vec<_> = (0..3).map(|d| a.domain_slots(d)).collect();
    assert_eq!(slots[0], 0..3);
    assert_eq!(
        slots[1],
        64..67,
        "a domain's first slot is a multiple of 64"
    );
    assert_eq!(slots[2], 128..131);
    assert_eq!(a.nf_slots(), 131);
    assert_eq!((a.slot_domain(66), a.slot_domain(3)), (Some(1), None));
    assert!(!a.has_slot(3) && a.has_slot(130));
    // Each domain's core 0 turn word is its own.
    assert!(a.domain_turn(1, 0).claim(64));
    assert_eq!(a.domain_turn(0, 0).holder(), None);
    assert_eq!(a.slot_turn(65, 0).holder(), Some(64));
    // Slot 65 rings bit 1 of word 1, which is domain 1's.
    a.bell_word(1).ring(1 << 1);
    assert!(a.bell_word(1).any(1 << 1) && !a.bell_word(0).any(u64::MAX));
    let addr = |p: *const u8| p as usize;
    let ctl = |s| addr(a.nf_control(s) as *const NfControl as *const u8);
    for d in 0..3 {
        let r = a.domain_slots(d);
        let bytes = &a.offsets.slot_regions[d].bytes;
        let base = a.base.as_ptr() as usize;
        for s in r {
            assert!(bytes.contains(&(ctl(s) - base)), "slot {s}");
        }
    }
}

#[test]
fn a_process_that_keeps_one_domain_cannot_touch_another_s_slots() {
    let mut a = Arena::create(with_domains()).unwrap();
    let control = |slot: u32| move |a: &Arena| a.nf_control(slot) as *const NfControl as *const u8;
    let turn = |slot: u32| move |a: &Arena| a.slot_turn(slot, 5) as *const CoreTurn as *const u8;
    let ring = |slot: u32| move |a: &Arena| a.nf_rx_ring(slot).occupancy() as usize as *const u8;
    // Its own slots: control blocks, turn words, rings all there.
    let own = child(&mut a, 1, &control(66), &|a| {
        a.nf_control(66);
        a.nf_tx_ring(66).occupancy();
        a.bell_word(1).any(1);
    });
    assert!(exited_ok(own), "{own}");
    // Another domain's control blocks and turn words are gone...
    for other in [0, 2, 128, 130] {
        let st = child(&mut a, 1, &control(other), &|_| ());
        assert!(segfaulted(st), "control block of slot {other}: {st}");
        let st = child(&mut a, 1, &turn(other), &|_| ());
        assert!(segfaulted(st), "turn word of slot {other}'s domain: {st}");
    }
    // ...and the arena refuses them instead of reading where nothing is.
    for other in [0u32, 130] {
        let st = child(
            &mut a,
            1,
            &|a| a.worker_wake(0) as *const WakeWord as *const u8,
            &|a| {
                a.nf_control(other);
            },
        );
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 4, "{st}");
        let st = child(
            &mut a,
            1,
            &|a| a.worker_wake(0) as *const WakeWord as *const u8,
            &|a| {
                ring(other)(a);
            },
        );
        assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 4, "{st}");
    }
    // The workers' wake words stay: every NF must be able to ring them.
    let st = child(
        &mut a,
        2,
        &|a| a.worker_wake(0) as *const WakeWord as *const u8,
        &|a| {
            a.worker_wake(0).wake();
        },
    );
    assert!(exited_ok(st), "{st}");
}
