//! Micro-benchmarks of the SPSC descriptor ring (`sluice_mem::ring`).
//!
//! * `ring/single_thread/{1,32,256}`: one thread enqueues a batch of that
//!   many `u32` descriptors into a 1024-slot ring and dequeues it again. The
//!   reported throughput is items/s, so per-item cost is `1e9 / throughput`
//!   ns; with one thread every shared line stays in the core's L1, so this is
//!   the instruction cost of the ring, not the cost of moving lines.
//! * `ring/two_threads/batch32`: a producer thread and a consumer thread
//!   move items through a 1024-slot ring in batches of 32 (`iter_custom`:
//!   the time from the producer's first enqueue until the consumer has every
//!   item; thread start and exit are excluded). This includes the cross-core
//!   cache-line traffic on the indices and the slots, so it needs two idle
//!   cores to mean anything; on a shared or 2-vCPU machine expect large
//!   variance.
//! * `ring/room_of_1000_idle_rings/{reread,cached}`: what a worker pays to
//!   ask 1,000 rings whose consumers are idle for room for a batch of 32
//!   (its ingress pass with 1,000 chains from one port): `free` re-reads
//!   each ring's consumer index (a cache line of its own per ring),
//!   `free_up_to(32)` reads it only when the count cached in the producer
//!   shows less.
//!
//! Run briefly with
//! `cargo bench -p sluice-mem --bench ring -- --warm-up-time 1 --measurement-time 2`.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice_mem::{RingRef, RingShared};

/// Ring size used by every benchmark here (the platform's default order).
const RING_SLOTS: usize = 1024;

fn slots(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring/single_thread");
    for batch in [1usize, 32, 256] {
        let shared = RingShared::default();
        let slots = slots(RING_SLOTS);
        let ring = RingRef::new(&shared, &slots).expect("power-of-two ring");
        let (mut p, mut cons) = (ring.producer(), ring.consumer());
        let items: Vec<u32> = (0..batch as u32).collect();
        let mut out = vec![0u32; batch];
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::from_parameter(batch), |b| {
            b.iter(|| {
                let n = p.enqueue(black_box(&items)).unwrap();
                let m = cons.dequeue(black_box(&mut out[..n])).unwrap();
                debug_assert_eq!(n, m);
                black_box(&out);
            })
        });
    }
    g.finish();
}

/// Moves `iters * BATCH` items from a producer thread to a consumer thread
/// and returns the time it took.
fn move_items(iters: u64, batch: usize) -> Duration {
    let shared = RingShared::default();
    let slots = slots(RING_SLOTS);
    let ring = RingRef::new(&shared, &slots).expect("power-of-two ring");
    let total = iters * batch as u64;
    let consumer_running = AtomicBool::new(false);
    std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            let mut c = ring.consumer();
            let mut out = vec![0u32; batch];
            let mut got = 0u64;
            let mut sum = 0u64;
            // Spin, not block, from here on: a futex wake-up of a sleeping
            // consumer takes tens of microseconds in a VM and would be timed.
            consumer_running.store(true, Ordering::Release);
            while got < total {
                let n = c.dequeue(&mut out).unwrap();
                if n == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                sum = sum.wrapping_add(out[..n].iter().map(|&v| v as u64).sum::<u64>());
                got += n as u64;
            }
            // Stop the clock here, not after `join`: thread exit costs tens
            // of microseconds, which would swamp samples of few iterations.
            let done = Instant::now();
            black_box(sum);
            done
        });
        let mut p = ring.producer();
        let items: Vec<u32> = (0..batch as u32).collect();
        while !consumer_running.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < total {
            let want = (total - sent).min(batch as u64) as usize;
            let n = p.enqueue(&items[..want]).unwrap();
            if n == 0 {
                std::hint::spin_loop();
            }
            sent += n as u64;
        }
        let done = consumer.join().expect("consumer thread");
        done.duration_since(start)
    })
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring/two_threads");
    let batch = 32;
    g.throughput(Throughput::Elements(batch as u64));
    g.bench_function("batch32", |b| {
        b.iter_custom(|iters| move_items(iters, batch))
    });
    g.finish();
}

fn room_of_idle_rings(c: &mut Criterion) {
    const RINGS: usize = 1000;
    let shared: Vec<RingShared> = (0..RINGS).map(|_| RingShared::default()).collect();
    let slot_sets: Vec<Vec<AtomicU32>> = (0..RINGS).map(|_| slots(RING_SLOTS)).collect();
    let rings: Vec<RingRef<'_>> = (shared.iter().zip(&slot_sets))
        .map(|(s, sl)| RingRef::new(s, sl).expect("power-of-two ring"))
        .collect();
    let mut producers: Vec<_> = rings.iter().map(|r| r.producer()).collect();
    let mut g = c.benchmark_group("ring/room_of_1000_idle_rings");
    g.throughput(Throughput::Elements(RINGS as u64));
    g.bench_function("reread", |b| {
        b.iter(|| {
            let mut least = u32::MAX;
            for p in producers.iter_mut() {
                least = least.min(p.free().unwrap());
            }
            black_box(least)
        })
    });
    g.bench_function("cached", |b| {
        b.iter(|| {
            let mut least = u32::MAX;
            for p in producers.iter_mut() {
                least = least.min(p.free_up_to(32).unwrap());
            }
            black_box(least)
        })
    });
    g.finish();
}

criterion_group!(benches, single_thread, two_threads, room_of_idle_rings);
criterion_main!(benches);
