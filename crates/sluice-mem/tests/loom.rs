//! Model checks of the lock-free ring and the pool under every interleaving
//! loom explores. Run with:
//! `RUSTFLAGS="--cfg loom" cargo test -p sluice-mem --test loom --release`
#![cfg(loom)]

use loom::sync::atomic::AtomicU32;
use loom::sync::Arc;
use sluice_mem::{BufferPool, PoolCache, RingRef, RingShared};

struct Ring {
    shared: RingShared,
    slots: Vec<AtomicU32>,
}

fn ring(n: usize) -> Arc<Ring> {
    Arc::new(Ring {
        shared: RingShared::default(),
        slots: (0..n).map(|_| AtomicU32::new(0)).collect(),
    })
}

#[test]
fn ring_delivers_every_item_once_in_order() {
    loom::model(|| {
        let r = ring(2);
        let r2 = r.clone();
        let producer = loom::thread::spawn(move || {
            let ring = RingRef::new(&r2.shared, &r2.slots).unwrap();
            let mut p = ring.producer();
            let items = [1u32, 2, 3];
            let mut sent = 0;
            while sent < items.len() {
                let n = p.enqueue(&items[sent..]).unwrap();
                if n == 0 {
                    loom::thread::yield_now();
                }
                sent += n;
            }
        });
        let ring = RingRef::new(&r.shared, &r.slots).unwrap();
        let mut c = ring.consumer();
        let mut got = Vec::new();
        let mut out = [0u32; 2];
        while got.len() < 3 {
            let n = c.dequeue(&mut out).unwrap();
            if n == 0 {
                loom::thread::yield_now();
            }
            got.extend_from_slice(&out[..n]);
        }
        assert_eq!(got, vec![1, 2, 3]);
        producer.join().unwrap();
    });
}

#[test]
fn pool_caches_never_hand_out_a_buffer_twice() {
    loom::model(|| {
        let pool = Arc::new(BufferPool::new(3));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                loom::thread::spawn(move || {
                    let mut cache = PoolCache::new(&pool, 1);
                    let a = cache.alloc();
                    let b = cache.alloc();
                    let got: Vec<u32> = [&a, &b].iter().filter_map(|h| h.as_ref().map(|h| h.index())).collect();
                    if let Some(a) = a {
                        cache.free(a);
                    }
                    if let Some(b) = b {
                        cache.free(b);
                    }
                    got
                })
            })
            .collect();
        for h in handles {
            let got = h.join().unwrap();
            if got.len() == 2 {
                assert_ne!(got[0], got[1]);
            }
        }
        let audit = pool.audit();
        assert_eq!(audit.free, 3);
        assert_eq!(pool.global_free(), 3);
    });
}
