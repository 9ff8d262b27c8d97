//! What one more NF costs the control path when N run already: the
//! spec with the addition validated whole, or the addition alone against
//! the spec's index (`sluice_spec::add_to`), the whole
//! spec compiled against the running plan or the addition alone
//! (`compile_addition`), the plan copied and diffed, at N = 100 and 1,000 (`sluice bench instantiate` measures the same end
//! to end, through the daemon).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_dataplane::compile::{compile, compile_addition, compile_checked, Target};
use sluice_dataplane::diff::Diff;

/// A spec of `n` forwarders, each in a chain of its own from one
/// generator (told apart by TCP destination port).
fn spec_text(n: usize) -> String {
    let mut nfs = String::new();
    let mut chains = String::new();
    for i in 0..n {
        nfs += &format!("  - {{ name: n{i}, type: forwarder, isolation: process }}\n");
        chains += &addition_chain(i);
    }
    format!(
        "ports:\n  - {{ name: gen, kind: generator }}\n  - {{ name: out, kind: sink }}\n\
         nfs:\n{nfs}chains:\n{chains}"
    )
}

fn addition_chain(i: usize) -> String {
    format!(
        "  - {{ name: c{i}, from: gen, match: {{ proto: tcp, dst_port: {} }}, nfs: [n{i}], to: out }}\n",
        1000 + i
    )
}

fn bench(c: &mut Criterion) {
    let registry = sluice_nfs::REGISTRY;
    let types: Vec<&str> = registry.iter().map(|t| t.name).collect();
    for n in [100usize, 1000] {
        let base = sluice_spec::parse_str(&spec_text(n), "base.yaml", &types).unwrap();
        let target = Target {
            replicas: 1,
            flow_capacity: base.settings.flow_table.capacity,
            max_ports: 64,
            max_nfs: 4096,
            max_chains: 4096,
        };
        let prev = compile(&base, registry, &target, None).unwrap();
        let text = format!(
            "nfs:\n  - {{ name: n{n}, type: forwarder, isolation: process }}\nchains:\n{}",
            addition_chain(n)
        );
        let addition = sluice_spec::parse_additions(&text, "add.yaml").unwrap();
        let grown = sluice_spec::add(Some(&base), addition.clone(), &types).unwrap();
        // What checking the spec with the addition whole costs (what an
        // addition cost before the index)...
        c.bench_function(&format!("control/validate_whole_{n}"), |b| {
            b.iter(|| black_box(&*grown).validate(&types).unwrap())
        });
        // ...and adding as the daemon adds: to the spec itself, no copy of
        // it, checked against its index (built once, before the first
        // round); the addition is taken off again for the next round.
        let mut held = Some(sluice_spec::IndexedSpec::from(base.clone()));
        c.bench_function(&format!("control/add_to_{n}"), |b| {
            b.iter(|| {
                let grown = sluice_spec::add_to(held.take(), addition.clone(), &types).unwrap();
                held = grown.into_base();
            })
        });
        c.bench_function(&format!("control/compile_{n}"), |b| {
            b.iter(|| compile_checked(&grown, registry, &target, Some(&prev)).unwrap())
        });
        c.bench_function(&format!("control/compile_addition_{n}"), |b| {
            b.iter(|| compile_addition(&grown, registry, &target, &prev).unwrap())
        });
        let next = compile_checked(&grown, registry, &target, Some(&prev)).unwrap();
        c.bench_function(&format!("control/plan_clone_{n}"), |b| {
            b.iter(|| black_box(&prev).clone())
        });
        c.bench_function(&format!("control/diff_{n}"), |b| {
            b.iter(|| Diff::between(black_box(&prev), black_box(&next)))
        });
        // The plan an addition makes shares the running entries, which the
        // diff skips.
        let added = compile_addition(&grown, registry, &target, &prev).unwrap();
        c.bench_function(&format!("control/diff_addition_{n}"), |b| {
            b.iter(|| Diff::between(black_box(&prev), black_box(&added)))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
