//! Generator cost per packet (ns), for the sizes and protocols the data
//! plane runs at 10-20 Mpps.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sluice_ports::generator::MAX_FRAME_LEN;
use sluice_ports::{Generator, GeneratorConfig, IpVersionChoice, Protocol, SizeSpec};

fn cfg(protocol: Protocol, ip_version: IpVersionChoice, size: SizeSpec) -> GeneratorConfig {
    GeneratorConfig {
        flows: 1024,
        protocol,
        ip_version,
        size,
        packets_per_flow: 16,
        src_prefix: if ip_version == IpVersionChoice::V6 {
            "2001:db8:1::/48".parse().unwrap()
        } else {
            "10.0.0.0/16".parse().unwrap()
        },
        dst_prefix: if ip_version == IpVersionChoice::V6 {
            "2001:db8:2::/48".parse().unwrap()
        } else {
            "10.1.0.0/16".parse().unwrap()
        },
        ..GeneratorConfig::default()
    }
}

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "udp4_64B",
            Protocol::Udp,
            IpVersionChoice::V4,
            SizeSpec::Fixed(64),
        ),
        (
            "tcp4_64B",
            Protocol::Tcp,
            IpVersionChoice::V4,
            SizeSpec::Fixed(64),
        ),
        (
            "udp6_64B",
            Protocol::Udp,
            IpVersionChoice::V6,
            SizeSpec::Fixed(64),
        ),
        (
            "udp4_imix",
            Protocol::Udp,
            IpVersionChoice::V4,
            SizeSpec::Imix,
        ),
        (
            "tcp4_imix",
            Protocol::Tcp,
            IpVersionChoice::V4,
            SizeSpec::Imix,
        ),
        (
            "mixed_datacenter",
            Protocol::Mixed,
            IpVersionChoice::Mixed,
            SizeSpec::Datacenter,
        ),
    ];
    let mut g = c.benchmark_group("generator");
    g.throughput(Throughput::Elements(1));
    for (name, p, v, s) in cases {
        let mut gen = Generator::new(cfg(p, v, s)).unwrap();
        let mut buf = vec![0u8; MAX_FRAME_LEN];
        let mut now = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                now += 50;
                std::hint::black_box(gen.write_next(std::hint::black_box(&mut buf), now))
            })
        });
    }
    // Burst of 32 into 32 distinct buffers, as a data-plane tx loop does.
    let mut gen =
        Generator::new(cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64))).unwrap();
    g.throughput(Throughput::Elements(32));
    g.bench_function("udp4_64B_burst32", |b| {
        b.iter_batched_ref(
            || vec![[0u8; 128]; 32],
            |bufs| {
                let mut n = 0;
                for buf in bufs.iter_mut() {
                    n += gen.write_next(buf, 1000);
                }
                n
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
