//! Packets crossing a trust boundary.
//!
//! An NF process maps only its own trust domain's buffers (see
//! `arena::layout`), so a packet bound for an NF of another domain is
//! copied by the platform into a buffer of that domain, and the old buffer
//! goes back to its pool: the bytes cross, the handle never does. Within
//! one domain nothing is copied (NetVM's trust groups, seed 002).
//!
//! The copy takes the metadata and the packet's own bytes, not the whole
//! buffer (`Pkt::copy_to`); its cost per packet is measured by
//! `cargo bench -p sluice-mem --bench pool -- crossing`.

use crate::arena::Arena;
use crate::batch::{HandleBatch, MAX_BATCH};
use crate::pool::PoolCache;

/// What [`cross_into`] did to a batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Crossed {
    /// Packets copied into the target domain.
    pub copied: u32,
    /// Packets dropped because the target domain had no free buffer.
    pub no_buffer: u32,
    /// Packets dropped because they do not fit an ordinary buffer (a
    /// super-packet bound for a domain without large buffers).
    pub too_large: u32,
}

/// Makes every packet of `batch` one of trust domain `domain`'s: packets
/// already there stay as they are; others are copied into a new buffer
/// of that domain (their old buffer is freed); packets that cannot be
/// copied are freed and counted. Order is kept. One pass over the
/// indices when nothing needs to cross.
pub fn cross_into(
    arena: &Arena,
    cache: &mut PoolCache<'_>,
    batch: &mut HandleBatch,
    domain: usize,
) -> Crossed {
    let pool = cache.pool();
    let mut crossed = Crossed::default();
    if batch.indices().iter().all(|&i| pool.domain_of(i) == domain) {
        return crossed;
    }
    let mut lost = [false; MAX_BATCH];
    for (i, h) in batch.iter_mut().enumerate() {
        if pool.domain_of(h.index()) == domain {
            continue;
        }
        let Some(mut copy) = cache.alloc_in(domain) else {
            crossed.no_buffer += 1;
            lost[i] = true;
            continue;
        };
        if arena.pkt(h).copy_to(&mut arena.pkt(&mut copy)) {
            std::mem::swap(h, &mut copy);
            crossed.copied += 1;
        } else {
            crossed.too_large += 1;
            lost[i] = true;
        }
        // The old buffer, or the unused copy.
        cache.free(copy);
    }
    if crossed.no_buffer + crossed.too_large > 0 {
        let mut i = 0;
        batch.retain(
            |_| {
                i += 1;
                !lost[i - 1]
            },
            |h| cache.free(h),
        );
    }
    crossed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::ArenaConfig;
    use crate::pool::BufferPool;

    fn arena() -> Arena {
        let mut c = ArenaConfig {
            buffers: 300,
            ring_size: 64,
            nf_slots: 1,
            workers: 1,
            large_buffers: 1,
            ..ArenaConfig::default()
        };
        c.domain_buffers[0] = 256;
        Arena::create(c).unwrap()
    }

    #[test]
    fn packets_cross_by_copy_in_order_and_the_old_buffers_come_back() {
        let a = arena();
        let pool = BufferPool::for_arena(&a);
        let mut cache = PoolCache::new(&pool, 8);
        let mut b = HandleBatch::default();
        for k in 0..6u8 {
            // Domain 1 already, domain 0, domain 0 with a moved start.
            let mut h = if k % 3 == 0 {
                cache.alloc_in(1).unwrap()
            } else {
                cache.alloc().unwrap()
            };
            let mut p = a.pkt(&mut h);
            p.reset(60 + usize::from(k));
            if k % 3 == 2 {
                p.pull_front(14).unwrap();
            }
            p.data_mut().fill(k);
            p.set_flow_id(u32::from(k) * 7);
            b.push(h).unwrap();
        }
        let before = pool.audit();
        let c = cross_into(&a, &mut cache, &mut b, 1);
        assert_eq!(
            c,
            Crossed {
                copied: 4,
                ..Crossed::default()
            }
        );
        assert_eq!(b.len(), 6);
        for (k, h) in b.iter_mut().enumerate() {
            assert_eq!(pool.domain_of(h.index()), 1);
            let p = a.pkt(h);
            let shift = if k % 3 == 2 { 14 } else { 0 };
            assert_eq!(p.data().len(), 60 + k - shift);
            assert!(p.data().iter().all(|&x| x == k as u8));
            assert_eq!(p.flow_id(), k as u32 * 7);
        }
        assert_eq!(pool.audit(), before, "one buffer out for each one in");
        b.drain(|h| cache.free(h));
    }

    #[test]
    fn what_cannot_cross_is_freed_and_counted() {
        let a = arena();
        let pool = BufferPool::for_arena(&a);
        let mut cache = PoolCache::new(&pool, 8);
        let mut b = HandleBatch::default();
        let mut big = cache.alloc_large().unwrap();
        a.pkt(&mut big).reset(9000);
        let mut small = cache.alloc().unwrap();
        a.pkt(&mut small).reset(64);
        b.push(big).unwrap();
        b.push(small).unwrap();
        let c = cross_into(&a, &mut cache, &mut b, 1);
        assert_eq!((c.copied, c.too_large, c.no_buffer), (1, 1, 0));
        assert_eq!(b.len(), 1);
        // Domain 1 exhausted: the next packet is dropped, not leaked.
        let hoard: Vec<_> = std::iter::from_fn(|| cache.alloc_in(1)).collect();
        let mut b2 = HandleBatch::default();
        b2.push(cache.alloc().unwrap()).unwrap();
        let c = cross_into(&a, &mut cache, &mut b2, 1);
        assert_eq!((c.copied, c.no_buffer, b2.len()), (0, 1, 0));
        for h in hoard {
            cache.free(h);
        }
        b.drain(|h| cache.free(h));
        drop(cache);
        assert_eq!(pool.audit().free, pool.capacity());
    }

    #[test]
    fn an_nf_of_a_domain_gets_only_that_domain_s_buffers() {
        use crate::link::{NfEndpoint, NfLink, RxEntry};
        use std::sync::atomic::Ordering;
        let a = arena();
        let pool = BufferPool::for_arena(&a);
        let mut cache = PoolCache::new(&pool, 8);
        let own = a.domains()[1].indices.clone();
        let mut link = NfLink::new(&a, 0).in_domain(1);
        a.nf_control(0).spare_target.store(4, Ordering::Relaxed);
        assert_eq!(link.refill_spares(&mut cache).unwrap(), 4);
        let ep = NfEndpoint::new(&a, 0, 0).in_domain(1);
        let mut raw = [0u32; 8];
        let mut ep = ep;
        let n = ep.recv_raw(&mut raw).unwrap();
        assert_eq!(n, 4);
        for &r in &raw[..n] {
            match ep.decode(r) {
                Some(RxEntry::Spare(h)) => assert!(own.contains(&h.index())),
                _ => panic!("a spare of domain 1 expected"),
            }
        }
        // Indices of domain 0 or the large buffers (forged by someone with
        // access to the ring) are refused, not followed.
        for forged in [0, a.domains()[0].indices.end - 1, a.buffers()] {
            assert!(ep.decode(forged).is_none(), "{forged}");
        }
        assert!(ep.decode(own.start).is_some());
        // The platform's NFs take domain 0's and the large buffers.
        let ep0 = NfEndpoint::new(&a, 0, 0);
        assert!(ep0.decode(0).is_some() && ep0.decode(a.buffers()).is_some());
        assert!(ep0.decode(own.start).is_none());
    }
}
