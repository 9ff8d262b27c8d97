//! What picking an NF replica costs per packet: the bucket table of
//! `hash` steering at 4 and 64 replicas, and `shortest_queue`
//! for a flow already pinned and for a new flow (which looks at every
//! member's queue).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_dataplane::replicas::{Pins, ReplicaSet};
use sluice_spec::Steer;

fn bench(c: &mut Criterion) {
    let mut h = 0u32;
    for n in [4u16, 64] {
        let set = ReplicaSet::new((0..n).collect(), Steer::Hash);
        c.bench_function(&format!("replicas/hash_table_{n}"), |b| {
            b.iter(|| {
                h = h.wrapping_add(0x9e37_79b9);
                black_box(set.by_hash(black_box(h)))
            })
        });
    }
    const FLOWS: u32 = 65_536;
    let set = ReplicaSet::new((0..4).collect(), Steer::ShortestQueue);
    let mut pins = Pins::default();
    pins.install(&[Some(set.clone())], FLOWS);
    let queued = [3usize, 1, 4, 1];
    for f in 0..FLOWS {
        pins.pick(0, &set, f, |m| queued[m as usize]);
    }
    let mut f = 0u32;
    c.bench_function("replicas/shortest_queue_pinned_4", |b| {
        b.iter(|| {
            f = (f + 7919) % FLOWS;
            black_box(pins.pick(0, &set, black_box(f), |m| queued[m as usize]))
        })
    });
    c.bench_function("replicas/shortest_queue_new_flow_4", |b| {
        b.iter(|| {
            f = (f + 7919) % FLOWS;
            pins.release(f);
            black_box(pins.pick(0, &set, black_box(f), |m| queued[m as usize]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
