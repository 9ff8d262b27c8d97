//! What a `per_flow` pool (`exclusive.rs`) costs per decision at 64 and
//! at 1,024 members (the most the spec allows): a flowless packet, which
//! goes to the least loaded member; a new flow under the `shared`
//! fallback with every member busy, which shares the least loaded one;
//! and a member handed back after its reset.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_dataplane::classes::ClassKey;
use sluice_dataplane::exclusive::Exclusive;
use sluice_dataplane::replicas::ReplicaSet;
use sluice_spec::{Fallback, Steer};

/// Flow ids the pool tracks.
const FLOWS: u32 = 65_536;

fn bench(c: &mut Criterion) {
    for n in [64u16, 1024] {
        let mut set = ReplicaSet::new((0..n).collect(), Steer::PerFlow);
        set.fallback = Fallback::Shared;
        let sets = [Some(set.clone())];
        let mut e = Exclusive::default();
        e.install(&sets, FLOWS);
        // Every member busy with one flow (flow f on member f).
        for f in 0..u32::from(n) {
            e.pick(0, &set, f, || ClassKey::NONE);
        }
        let mut f = u32::from(n);
        c.bench_function(&format!("per_flow_pool/flowless_{n}"), |b| {
            b.iter(|| black_box(e.pick(0, &set, black_box(u32::MAX), || ClassKey::NONE)))
        });
        let mut idle = Vec::new();
        c.bench_function(&format!("per_flow_pool/shared_new_flow_{n}"), |b| {
            b.iter(|| {
                // A flow arrives, shares the least loaded member, and
                // ends: the table stays as it was.
                f = u32::from(n) + (f + 1) % 1024;
                let m = e.pick(0, &set, black_box(f), || ClassKey::NONE);
                e.release(f, &mut idle);
                black_box(m)
            })
        });
        // A member whose only flow ends and which comes back after its
        // reset, while the others stay busy.
        let last = u32::from(n) - 1;
        c.bench_function(&format!("per_flow_pool/release_and_idle_again_{n}"), |b| {
            b.iter(|| {
                e.release(last, &mut idle);
                for i in idle.drain(..) {
                    e.idle_again(i);
                }
                black_box(e.pick(0, &set, last, || ClassKey::NONE))
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
