//! Micro-benchmarks of the buffer pool's per-worker cache and of one hop
//! through a process NF's ring pair.
//!
//! * `pool/alloc_free_pair`: `PoolCache::alloc` then `PoolCache::free` of the
//!   same buffer (per pair). The cache never drains or overflows, so this is
//!   the per-packet fast path: a `Vec` pop/push and two owner-table stores.
//! * `pool/batch32`: 32 allocs into a `HandleBatch`, then 32 frees. A refill
//!   of 32 means the global stack's mutex is taken about once per batch in
//!   each direction, so this is the amortised cost including the lock.
//! * `hop/round_trip32`: the per-hop cost of a process NF, per packet, for a
//!   batch of 32: `NfLink::send` (ownership tags + rx enqueue),
//!   `NfEndpoint::recv_raw` + `decode` + `NfEndpoint::send` (the NF side),
//!   and `NfLink::recv` (tx dequeue + per-handle ownership check), all on one
//!   thread through a real arena, so it is the instruction cost with warm
//!   caches, not cross-core traffic.
//! * `hop/round_trip32_with_wakes`: the same plus the two `wake` calls the
//!   platform and the NF make per batch (a SeqCst fence and a load each when
//!   the peer is awake, which is the busy case).
//! * `crossing/copy_64`, `crossing/copy_1500`: a packet crossing a trust
//!   boundary (`sluice_mem::cross_into`): a batch of 32 packets of that
//!   size is moved into another domain and back, per packet: a buffer of
//!   the other domain, the metadata and the bytes copied, the old buffer
//!   freed.
//! * `crossing/same_domain`: the check the worker makes per batch when
//!   trust domains exist and the packets are already the NF's (per packet).
//!
//! Throughput is reported in elements (buffers or packets), so per-item ns is
//! `1e9 / throughput`. Run briefly with
//! `cargo bench -p sluice-mem --bench pool -- --warm-up-time 1 --measurement-time 2`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_mem::{
    Arena, ArenaConfig, BufferPool, HandleBatch, NfEndpoint, NfLink, PoolCache, RxEntry,
};

/// Buffers in the pool and the arena.
const BUFFERS: u32 = 4096;
/// Packets per batch, the platform's usual burst.
const BATCH: usize = 32;

fn alloc_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool");
    let pool = BufferPool::new(BUFFERS);
    let mut cache = PoolCache::new(&pool, BATCH);

    g.throughput(Throughput::Elements(1));
    g.bench_function("alloc_free_pair", |b| {
        b.iter(|| {
            let h = cache.alloc().expect("pool has buffers");
            cache.free(black_box(h));
        })
    });

    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("batch32", |b| {
        let mut batch = HandleBatch::new();
        b.iter(|| {
            for _ in 0..BATCH {
                let h = cache.alloc().expect("pool has buffers");
                if batch.push(h).is_err() {
                    unreachable!("a batch holds MAX_BATCH >= 32 handles");
                }
            }
            black_box(batch.indices());
            batch.drain(|h| cache.free(h));
        })
    });
    g.finish();
}

/// The NF's side of one hop: take everything queued to it and send it back.
fn nf_echo(nf: &mut NfEndpoint<'_>, raw: &mut [u32; BATCH], back: &mut HandleBatch) {
    let n = nf.recv_raw(raw).unwrap();
    for &r in &raw[..n] {
        match nf.decode(r) {
            Some(RxEntry::Packet(h)) => {
                if back.push(h).is_err() {
                    unreachable!("batch of {BATCH} fits");
                }
            }
            other => panic!("unexpected ring entry {other:?}"),
        }
    }
    let sent = nf.send(back).unwrap();
    debug_assert_eq!(sent, n);
}

fn hop(c: &mut Criterion) {
    let arena = Arena::create(ArenaConfig {
        buffers: BUFFERS,
        ring_size: 1024,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .expect("arena");
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, BATCH);
    let mut link = NfLink::new(&arena, 0);
    let mut nf = NfEndpoint::new(&arena, 0, 0);
    let mut batch = HandleBatch::new();
    for _ in 0..BATCH {
        if batch
            .push(cache.alloc().expect("pool has buffers"))
            .is_err()
        {
            unreachable!("batch of {BATCH} fits");
        }
    }
    let mut raw = [0u32; BATCH];
    let mut back = HandleBatch::new();

    let mut g = c.benchmark_group("hop");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("round_trip32", |b| {
        b.iter(|| {
            let sent = link.send(&pool, &mut batch).unwrap();
            debug_assert_eq!(sent, BATCH);
            nf_echo(&mut nf, &mut raw, &mut back);
            let got = link.recv(&pool, &mut batch, BATCH).unwrap();
            debug_assert_eq!(got.received, BATCH);
            black_box(got);
        })
    });
    g.bench_function("round_trip32_with_wakes", |b| {
        b.iter(|| {
            link.send(&pool, &mut batch).unwrap();
            black_box(link.wake());
            nf_echo(&mut nf, &mut raw, &mut back);
            black_box(nf.wake_platform());
            let got = link.recv(&pool, &mut batch, BATCH).unwrap();
            black_box(got);
        })
    });
    g.finish();

    assert_eq!(batch.len(), BATCH, "every buffer came back");
    batch.drain(|h| cache.free(h));
    drop(cache);
    assert_eq!(pool.audit().free, BUFFERS, "no buffer leaked");
}

fn crossing(c: &mut Criterion) {
    let mut config = ArenaConfig {
        buffers: BUFFERS,
        ring_size: 64,
        nf_slots: 1,
        workers: 1,
        ..Default::default()
    };
    config.domain_buffers[0] = BUFFERS;
    let arena = Arena::create(config).expect("arena");
    let pool = BufferPool::for_arena(&arena);
    let mut cache = PoolCache::new(&pool, BATCH);
    let mut g = c.benchmark_group("crossing");
    for size in [64usize, 1500] {
        let mut batch = HandleBatch::new();
        for _ in 0..BATCH {
            let mut h = cache.alloc().expect("pool has buffers");
            arena.pkt(&mut h).reset(size);
            if batch.push(h).is_err() {
                unreachable!("batch of {BATCH} fits");
            }
        }
        g.throughput(Throughput::Elements(2 * BATCH as u64));
        g.bench_function(format!("copy_{size}"), |b| {
            b.iter(|| {
                let there = sluice_mem::cross_into(&arena, &mut cache, &mut batch, 1);
                let back = sluice_mem::cross_into(&arena, &mut cache, &mut batch, 0);
                debug_assert_eq!(there.copied + back.copied, 2 * BATCH as u32);
                black_box((there, back));
            })
        });
        if size == 64 {
            g.throughput(Throughput::Elements(BATCH as u64));
            g.bench_function("same_domain", |b| {
                b.iter(|| black_box(sluice_mem::cross_into(&arena, &mut cache, &mut batch, 0)))
            });
        }
        batch.drain(|h| cache.free(h));
    }
    g.finish();
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity(), "no buffer leaked");
}

/// What trust domains add where the worker and NFs reach a slot: the
/// slot's domain is looked up (one region, or the last of 16) before its
/// doorbell word, ring or control block.
fn slot_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("slot_lookup");
    for named in [0usize, 15] {
        let mut config = ArenaConfig {
            buffers: 256,
            ring_size: 64,
            nf_slots: 64,
            workers: 1,
            ..Default::default()
        };
        config.domain_buffers[..named].fill(256);
        let arena = Arena::create(config).expect("arena");
        // The last domain's slots: the most regions to look past.
        let slots = arena.domain_slots(named);
        g.throughput(Throughput::Elements(slots.len() as u64));
        g.bench_function(format!("bell_and_ring_{}_domains", named + 1), |b| {
            b.iter(|| {
                let mut n = 0u32;
                for s in slots.clone() {
                    let bell = arena.bell_word((s / 64) as usize);
                    n += u32::from(bell.any(1 << (s % 64)));
                    n += arena.nf_rx_ring(black_box(s)).occupancy();
                }
                black_box(n)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, alloc_free, hop, crossing, slot_lookup);
criterion_main!(benches);
