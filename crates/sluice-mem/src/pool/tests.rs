//! Tests of the pool: exact accounting, the large class, trust domains
//! and caches on two threads.

use super::*;

#[test]
fn alloc_free_keeps_accounting_exact() {
    let pool = BufferPool::new(100);
    let mut cache = PoolCache::new(&pool, 16);
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(cache.alloc().unwrap());
    }
    assert!(cache.alloc().is_none(), "pool must be exhausted");
    assert_eq!(pool.audit().platform, 100);
    let mut seen: Vec<u32> = held.iter().map(|h| h.index()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 100, "no index handed out twice");
    for h in held {
        cache.free(h);
    }
    drop(cache);
    assert_eq!(
        pool.audit(),
        Audit {
            free: 100,
            platform: 0,
            at_nfs: 0,
            capacity: 100
        }
    );
    assert_eq!(pool.global_free(), 100);
}

#[test]
fn large_buffers_are_a_separate_class_with_exact_accounting() {
    let pool = BufferPool::with_large(10, 3);
    assert_eq!((pool.capacity(), pool.large_capacity()), (13, 3));
    let mut cache = PoolCache::new(&pool, 4);
    let small: Vec<_> = (0..10).map(|_| cache.alloc().unwrap()).collect();
    assert!(
        cache.alloc().is_none(),
        "ordinary allocations never take large buffers"
    );
    let large: Vec<_> = (0..3).map(|_| cache.alloc_large().unwrap()).collect();
    assert!(cache.alloc_large().is_none());
    assert!(large.iter().all(|h| pool.is_large(h.index())));
    assert!(small.iter().all(|h| !pool.is_large(h.index())));
    assert_eq!(pool.audit().platform, 13);
    for h in large {
        cache.free(h);
    }
    assert!(
        cache.alloc().is_none(),
        "a freed large buffer is not handed out as ordinary"
    );
    for h in small {
        cache.free(h);
    }
    drop(cache);
    assert_eq!(pool.audit().free, 13);
    assert_eq!((pool.global_free(), pool.global_free_large()), (10, 3));
}

#[test]
fn each_domain_hands_out_only_its_own_buffers_and_holes_never() {
    // Domain 0: 0..10, a hole at 10, domain 1: 11..15, domain 2: 15..20.
    let pool = BufferPool::with_domains(&[0..10, 11..15, 15..20], 2);
    assert_eq!(pool.capacity(), 21);
    assert_eq!(pool.owner(10), Some(OWNER_RESERVED));
    let mut cache = PoolCache::new(&pool, 2);
    let mut by_domain: Vec<Vec<PktHandle>> = Vec::new();
    for (d, want) in [(0, 0..10), (1, 11..15), (2, 15..20)] {
        let mut got: Vec<PktHandle> = std::iter::from_fn(|| cache.alloc_in(d)).collect();
        let mut idx: Vec<u32> = got.iter().map(|h| h.index()).collect();
        idx.sort();
        assert_eq!(idx, want.collect::<Vec<_>>(), "domain {d}");
        assert!(got.iter().all(|h| pool.domain_of(h.index()) == d));
        by_domain.push(std::mem::take(&mut got));
    }
    assert!(cache.alloc_in(3).is_none(), "no such domain");
    let big = cache.alloc_large().unwrap();
    assert_eq!(pool.domain_of(big.index()), 0);
    assert_eq!(pool.audit().platform, 20, "all but one large buffer");
    cache.free(big);
    // Freed buffers go back to their own domain.
    for h in by_domain.pop().unwrap() {
        cache.free(h);
    }
    assert!(cache.alloc_in(1).is_none() && cache.alloc().is_none());
    assert_eq!(pool.domain_of(cache.alloc_in(2).unwrap().index()), 2);
    for h in by_domain.into_iter().flatten() {
        cache.free(h);
    }
    drop(cache);
    let a = pool.audit();
    assert_eq!((a.free, a.platform, a.capacity), (20, 1, 21));
    let by: Vec<(u32, u32, u32)> = pool
        .audit_domains()
        .iter()
        .map(|a| (a.capacity, a.free, a.platform))
        .collect();
    // Domain 0 counts the large buffers; the held one is domain 2's.
    assert_eq!(by, [(12, 12, 0), (4, 4, 0), (5, 4, 1)]);
}

#[test]
fn two_caches_share_the_pool() {
    let pool = BufferPool::new(64);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut c = PoolCache::new(&pool, 8);
                for _ in 0..10_000 {
                    let a = c.alloc();
                    let b = c.alloc();
                    if let Some(a) = a {
                        c.free(a);
                    }
                    if let Some(b) = b {
                        c.free(b);
                    }
                }
            });
        }
    });
    assert_eq!(pool.audit().free, 64);
    assert_eq!(pool.global_free(), 64);
}

#[test]
fn available_in_says_what_alloc_in_will_give() {
    let pool = BufferPool::with_domains(&[0..10, 11..15], 0);
    let mut cache = PoolCache::new(&pool, 2);
    // It refills up to what is wanted, never past what the domain has.
    assert_eq!(cache.available_in(1, 3), 3);
    assert_eq!(cache.available_in(1, 8), 4);
    assert_eq!(cache.available_in(0, 32), 10);
    assert_eq!(cache.available_in(2, 1), 0, "no such domain");
    let held: Vec<PktHandle> = (0..3).map(|_| cache.alloc_in(1).unwrap()).collect();
    assert_eq!(cache.available_in(1, 4), 1);
    let last = cache.alloc_in(1).unwrap();
    assert_eq!(cache.available_in(1, 4), 0);
    for h in held {
        cache.free(h);
    }
    assert_eq!(cache.available_in(1, 4), 3);
    cache.free(last);
    drop(cache);
    assert_eq!(pool.audit().free, 14);
}
