//! Tests of both ends of an NF's ring pair: ownership round trips,
//! garbage and forged handles, dead NFs' queues, quotas and spares.

use super::*;
use crate::arena::ArenaConfig;

fn arena() -> Arena {
    Arena::create(ArenaConfig {
        buffers: 512,
        ring_size: 64,
        nf_slots: 2,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .unwrap()
}

fn batch_of(cache: &mut PoolCache<'_>, n: usize) -> HandleBatch {
    let mut b = HandleBatch::new();
    for _ in 0..n {
        b.push(cache.alloc().unwrap()).unwrap();
    }
    b
}

#[test]
fn round_trip_through_an_nf_preserves_ownership() {
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut nf = NfEndpoint::new(&a, 0, 0);
    let mut b = batch_of(&mut cache, 10);
    assert_eq!(link.send(&pool, &mut b).unwrap(), 10);
    assert_eq!(pool.audit().at_nfs, 10);
    let mut raw = [0u32; 32];
    let n = nf.recv_raw(&mut raw).unwrap();
    let mut back = HandleBatch::new();
    for &r in &raw[..n] {
        match nf.decode(r) {
            Some(RxEntry::Packet(h)) => back.push(h).unwrap(),
            other => panic!("unexpected {other:?}"),
        }
    }
    nf.send(&mut back).unwrap();
    let mut out = HandleBatch::new();
    let got = link.recv(&pool, &mut out, 64).unwrap();
    assert_eq!(
        got,
        RecvOutcome {
            received: 10,
            invalid: 0,
            events: 0,
            originated: 0
        }
    );
    assert_eq!(link.in_flight(), 0);
    out.drain(|h| cache.free(h));
    drop(cache);
    assert_eq!(pool.audit().free, a.buffers());
}

#[test]
fn garbage_and_duplicate_handles_are_rejected() {
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 1);
    let mut nf = NfEndpoint::new(&a, 1, 0);
    let mut b = batch_of(&mut cache, 4);
    let first = b.indices()[0];
    let not_sent = cache.alloc().unwrap();
    link.send(&pool, &mut b).unwrap();
    // The hostile NF returns: a valid handle twice, an out-of-range index,
    // an event, and a buffer the platform still holds.
    nf.send_raw_for_fault_injection(&[first, first, 99_999, EVENT_BIT | 3, not_sent.index()])
        .unwrap();
    let mut out = HandleBatch::new();
    let got = link.recv(&pool, &mut out, 64).unwrap();
    assert_eq!(
        got,
        RecvOutcome {
            received: 1,
            invalid: 3,
            events: 1,
            originated: 0
        }
    );
    assert_eq!(
        pool.owner(not_sent.index()),
        Some(crate::pool::OWNER_PLATFORM)
    );
    out.drain(|h| cache.free(h));
    cache.free(not_sent);
    // The three buffers the NF still holds come back on reclaim.
    assert_eq!(link.reclaim(&mut cache).packets, 3);
    drop(cache);
    assert_eq!(pool.audit().free, a.buffers());
}

#[test]
fn a_dead_nf_s_unread_queue_is_kept_for_its_successor() {
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut b = batch_of(&mut cache, 10);
    link.send(&pool, &mut b).unwrap();
    link.send_event(7).unwrap();
    // The NF takes 4 packets in and dies holding them.
    let mut dead = NfEndpoint::new(&a, 0, 0);
    let mut raw = [0u32; 4];
    assert_eq!(dead.recv_raw(&mut raw).unwrap(), 4);
    let (lost, events) = link.reclaim_held(&mut cache);
    assert_eq!(lost.packets, 4);
    assert_eq!(events, vec![7]);
    assert_eq!(link.in_flight(), 6);
    // Its successor finds the other six and the event, in order.
    let mut next = NfEndpoint::new(&a, 0, 0);
    let mut raw = [0u32; 16];
    let n = next.recv_raw(&mut raw).unwrap();
    assert_eq!(n, 7);
    let mut back = HandleBatch::new();
    for &r in &raw[..6] {
        match next.decode(r) {
            Some(RxEntry::Packet(h)) => back.push(h).unwrap(),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(next.decode(raw[6]), Some(RxEntry::Event(7)));
    next.send(&mut back).unwrap();
    let mut out = HandleBatch::new();
    assert_eq!(link.recv(&pool, &mut out, 64).unwrap().received, 6);
    out.drain(|h| cache.free(h));
    drop(cache);
    assert_eq!(pool.audit().free, a.buffers());
}

#[test]
fn a_queue_the_nf_tampered_with_is_not_trusted() {
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut b = batch_of(&mut cache, 3);
    link.send(&pool, &mut b).unwrap();
    // A hostile NF reads all three, returns the first, then rewinds
    // the ring's head so the three look queued again.
    let mut nf = NfEndpoint::new(&a, 0, 0);
    let mut raw = [0u32; 3];
    assert_eq!(nf.recv_raw(&mut raw).unwrap(), 3);
    let mut first = HandleBatch::new();
    first.push_raw_owned(raw[0]);
    nf.send(&mut first).unwrap();
    let mut out = HandleBatch::new();
    assert_eq!(link.recv(&pool, &mut out, 64).unwrap().received, 1);
    a.nf_rx_ring(0).reset();
    // The "queue" names a buffer the NF no longer owns: nothing of it
    // is kept, and the two the NF held are reclaimed.
    let (lost, events) = link.reclaim_held(&mut cache);
    assert_eq!((lost.packets, events.len()), (2, 0));
    assert_eq!(link.in_flight(), 0);
    out.drain(|h| cache.free(h));
    drop(cache);
    assert_eq!(pool.audit().free, a.buffers());
}

#[test]
fn quota_bounds_buffers_held_by_one_nf() {
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut sent = 0;
    // The NF never consumes: only the rx ring's capacity can be queued.
    for _ in 0..10 {
        let mut b = batch_of(&mut cache, 32);
        sent += link.send(&pool, &mut b).unwrap();
        b.drain(|h| cache.free(h));
    }
    assert_eq!(sent, 64);
    assert_eq!(link.reclaim(&mut cache).packets, 64);
}

#[test]
fn an_nf_holds_at_most_a_quarter_of_the_large_buffers() {
    let a = Arena::create(ArenaConfig {
        large_buffers: 8,
        ..arena().config().to_owned()
    })
    .unwrap();
    let pool = BufferPool::for_arena(&a);
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut nf = NfEndpoint::new(&a, 0, 0);
    // ordinary, large, large, large, ordinary: the third large one and
    // what follows it wait (order is kept).
    let mut b = HandleBatch::new();
    b.push(cache.alloc().unwrap()).unwrap();
    for _ in 0..3 {
        b.push(cache.alloc_large().unwrap()).unwrap();
    }
    b.push(cache.alloc().unwrap()).unwrap();
    assert_eq!(link.send(&pool, &mut b).unwrap(), 3);
    assert_eq!(b.len(), 2);
    assert_eq!(link.send(&pool, &mut b).unwrap(), 0);
    // The NF gives one back: one more large buffer may go.
    let mut raw = [0u32; 8];
    let n = nf.recv_raw(&mut raw).unwrap();
    let mut back = HandleBatch::new();
    for &r in &raw[..n] {
        if let Some(RxEntry::Packet(h)) = nf.decode(r) {
            if h.index() >= a.buffers() && back.is_empty() {
                back.push(h).unwrap();
            } else {
                let _still_the_nfs = h.into_raw();
            }
        }
    }
    nf.send(&mut back).unwrap();
    let mut out = HandleBatch::new();
    assert_eq!(link.recv(&pool, &mut out, 8).unwrap().received, 1);
    assert_eq!(link.send(&pool, &mut b).unwrap(), 2);
    out.drain(|h| cache.free(h));
    assert_eq!(link.reclaim(&mut cache).packets, 4);
    drop(cache);
    assert_eq!(pool.audit().free, a.total_buffers());
}

#[test]
fn spares_come_back_as_originated_packets_and_are_not_losses() {
    use std::sync::atomic::Ordering::Relaxed;
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut link = NfLink::new(&a, 0);
    let mut nf = NfEndpoint::new(&a, 0, 0);
    let ctl = a.nf_control(0);
    assert_eq!(
        link.refill_spares(&mut cache).unwrap(),
        0,
        "no target, no spares"
    );
    ctl.spare_target.store(8, Relaxed);
    assert_eq!(link.refill_spares(&mut cache).unwrap(), 8);
    assert_eq!(
        link.refill_spares(&mut cache).unwrap(),
        0,
        "stash already full"
    );
    let mut raw = [0u32; 16];
    let n = nf.recv_raw(&mut raw).unwrap();
    let mut stash: Vec<PktHandle> = raw[..n]
        .iter()
        .map(|&r| match nf.decode(r) {
            Some(RxEntry::Spare(h)) => h,
            other => panic!("expected a spare, got {other:?}"),
        })
        .collect();
    // The NF uses three spares and sends them as new packets.
    let mut out = HandleBatch::new();
    for _ in 0..3 {
        out.push(stash.pop().unwrap()).unwrap();
    }
    ctl.spares_consumed.store(3, Relaxed);
    nf.send(&mut out).unwrap();
    let mut back = HandleBatch::new();
    let got = link.recv(&pool, &mut back, 64).unwrap();
    assert_eq!((got.received, got.originated), (3, 3));
    assert_eq!(
        link.refill_spares(&mut cache).unwrap(),
        3,
        "stash topped up"
    );
    back.drain(|h| cache.free(h));
    // Spares still stashed (5 + 3 in the ring) are not packets.
    assert_eq!(
        link.reclaim(&mut cache),
        Reclaimed {
            packets: 0,
            spares: 8,
            messages: 0
        }
    );
    drop(cache);
    assert_eq!(pool.audit().free, a.buffers());
}
