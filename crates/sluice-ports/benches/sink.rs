//! Sink cost per packet (ns).  Frames are pre-generated (1024 flows) and
//! observed cyclically; after the first pass stamps repeat and take the
//! duplicate branch, which costs the same table work as in-order traffic.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_ports::generator::MAX_FRAME_LEN;
use sluice_ports::{
    Generator, GeneratorConfig, IpVersionChoice, Protocol, Sink, SinkConfig, SizeSpec,
};

fn frames(protocol: Protocol, size: SizeSpec) -> Vec<Vec<u8>> {
    let mut g = Generator::new(GeneratorConfig {
        flows: 1024,
        protocol,
        ip_version: IpVersionChoice::V4,
        size,
        ..GeneratorConfig::default()
    })
    .unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    (0..8192)
        .map(|i| {
            let n = g.write_next(&mut buf, 1_000 + i);
            buf[..n].to_vec()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sink");
    g.throughput(Throughput::Elements(1));
    for (name, p, s) in [
        ("udp4_64B", Protocol::Udp, SizeSpec::Fixed(64)),
        ("tcp4_64B", Protocol::Tcp, SizeSpec::Fixed(64)),
        ("udp4_imix", Protocol::Udp, SizeSpec::Imix),
        ("tcp4_imix", Protocol::Tcp, SizeSpec::Imix),
    ] {
        let fs = frames(p, s);
        let mut sink = Sink::new(SinkConfig::default());
        let mut i = 0usize;
        let mut now = 1_000_000u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) & 8191;
                now += 10;
                sink.observe(std::hint::black_box(&fs[i]), now - 500, now);
            })
        });
        std::hint::black_box(sink.report());
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
