//! Small multi-threaded runs of the ring and the pool, sized so that Miri
//! (`scripts/miri.sh`) finishes them in seconds: Miri checks them for data
//! races and, with its weak-memory emulation, for reads of stale values that
//! the orderings allow. They complement the loom models (tests/loom.rs),
//! which explore interleavings exhaustively but only for 2–3 items. Natively
//! they take milliseconds.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use sluice_mem::{BufferPool, PoolCache, RingRef, RingShared};

/// Items moved through the ring (Miri runs roughly 10⁵× slower than native).
const ITEMS: u32 = if cfg!(miri) { 600 } else { 100_000 };

#[test]
fn ring_moves_items_in_order_between_threads() {
    let shared = RingShared::default();
    let slots: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
    let ring = RingRef::new(&shared, &slots).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut p = ring.producer();
            let mut next = 0u32;
            let mut batch = 1u32;
            while next < ITEMS {
                // Batches of 1..=5, so slots are reused at shifting offsets.
                let end = (next + batch).min(ITEMS);
                let items: Vec<u32> = (next..end).collect();
                next += p.enqueue(&items).unwrap() as u32;
                batch = batch % 5 + 1;
                std::thread::yield_now();
            }
        });
        let mut c = ring.consumer();
        let mut out = [0u32; 3];
        let mut expect = 0u32;
        while expect < ITEMS {
            let n = c.dequeue(&mut out).unwrap();
            for &v in &out[..n] {
                assert_eq!(v, expect, "item lost, duplicated or reordered");
                expect += 1;
            }
            if n == 0 {
                std::thread::yield_now();
            }
        }
    });
    assert_eq!(ring.occupancy(), 0);
}

#[test]
fn two_worker_caches_share_a_small_pool() {
    let pool = BufferPool::new(6);
    let in_use: Vec<AtomicBool> = (0..6).map(|_| AtomicBool::new(false)).collect();
    let rounds = if cfg!(miri) { 40 } else { 20_000 };
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                // A refill of 2 makes every few operations touch the global
                // stack, so the two caches keep trading buffers.
                let mut cache = PoolCache::new(&pool, 2);
                let mut held = Vec::new();
                for i in 0..rounds {
                    if i % 3 != 2 {
                        if let Some(h) = cache.alloc() {
                            let was = in_use[h.index() as usize].swap(true, Ordering::AcqRel);
                            assert!(!was, "buffer {} handed out twice", h.index());
                            held.push(h);
                        }
                    } else if let Some(h) = held.pop() {
                        in_use[h.index() as usize].store(false, Ordering::Release);
                        cache.free(h);
                    }
                }
                for h in held {
                    in_use[h.index() as usize].store(false, Ordering::Release);
                    cache.free(h);
                }
            });
        }
    });
    let audit = pool.audit();
    assert_eq!((audit.free, audit.platform, audit.at_nfs), (6, 0, 0));
    assert_eq!(pool.global_free(), 6);
}
