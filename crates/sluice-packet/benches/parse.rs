//! Hot-path benchmarks: parse, flow_key, checksums, write_frame.
//!
//! Run briefly with
//! `cargo bench -p sluice-packet --bench parse -- --warm-up-time 1 --measurement-time 2`.

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::checksum;
use sluice_packet::ethernet::MacAddr;
use sluice_packet::flow::flow_key;
use sluice_packet::parse::{parse, verify_checksums};
use sluice_packet::tcp::TcpFlags;

fn spec(src: &str, dst: &str, l4: L4Spec) -> FrameSpec {
    FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip: src.parse::<IpAddr>().unwrap(),
        dst_ip: dst.parse::<IpAddr>().unwrap(),
        ttl: 64,
        l4,
    }
}

const UDP: L4Spec = L4Spec::Udp {
    src_port: 1234,
    dst_port: 5678,
};
const TCP: L4Spec = L4Spec::Tcp {
    src_port: 40000,
    dst_port: 443,
    seq: 1,
    ack: 2,
    flags: TcpFlags::ACK,
    window: 1000,
};

/// A 64-byte frame (60 bytes + 4 FCS on the wire: we build 64 bytes of
/// headers + payload, as a traffic generator's "64 B" frames).
fn frame64(s: &FrameSpec) -> Vec<u8> {
    let mut buf = vec![0u8; 64];
    let payload = vec![0xabu8; 64 - s.header_len()];
    let n = write_frame(&mut buf, s, &payload).unwrap();
    assert_eq!(n, 64);
    buf
}

fn bench(c: &mut Criterion) {
    let frames = [
        ("ipv4_udp", frame64(&spec("10.0.0.1", "10.0.0.2", UDP))),
        ("ipv4_tcp", frame64(&spec("10.0.0.1", "10.0.0.2", TCP))),
        (
            "ipv6_udp",
            frame64(&spec("2001:db8::1", "2001:db8::2", UDP)),
        ),
        // A frame of an EtherType the parser does not know (as DPDK's
        // null device hands out: zeros), which takes the general path.
        ("other_ethertype", vec![0u8; 64]),
    ];

    let mut g = c.benchmark_group("parse");
    for (name, f) in &frames {
        g.bench_function(*name, |b| b.iter(|| parse(black_box(f))));
    }
    g.finish();

    let mut g = c.benchmark_group("flow_key");
    for (name, f) in &frames {
        g.bench_function(*name, |b| b.iter(|| flow_key(black_box(f))));
    }
    g.finish();

    let mut g = c.benchmark_group("flow_key+symmetric_hash");
    for (name, f) in &frames {
        g.bench_function(*name, |b| {
            b.iter(|| flow_key(black_box(f)).map(|k| k.symmetric_hash()))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("verify_checksums");
    for (name, f) in &frames {
        let h = parse(f).unwrap();
        g.bench_function(*name, |b| b.iter(|| verify_checksums(black_box(f), &h)));
    }
    g.finish();

    let mut g = c.benchmark_group("checksum");
    let ip_hdr = &frames[0].1[14..34];
    g.bench_function("full_ipv4_header_20B", |b| {
        b.iter(|| checksum::checksum(black_box(ip_hdr)))
    });
    for len in [64usize, 1500] {
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("full_{len}B"), |b| {
            b.iter(|| checksum::checksum(black_box(&data)))
        });
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("incremental_u16", |b| {
        b.iter(|| checksum::update_u16(black_box(0x1234), black_box(0x4011), black_box(0x3f11)))
    });
    g.bench_function("incremental_u32", |b| {
        b.iter(|| {
            checksum::update_u32(
                black_box(0x1234),
                black_box(0x0a00_0001),
                black_box(0xc0a8_0101),
            )
        })
    });
    g.finish();

    let mut g = c.benchmark_group("write_frame");
    for (name, s) in [
        ("ipv4_udp_64B", spec("10.0.0.1", "10.0.0.2", UDP)),
        ("ipv4_tcp_64B", spec("10.0.0.1", "10.0.0.2", TCP)),
        ("ipv6_udp_64B", spec("2001:db8::1", "2001:db8::2", UDP)),
    ] {
        let payload = vec![0xabu8; 64 - s.header_len()];
        let mut buf = [0u8; 64];
        g.bench_function(name, |b| {
            b.iter(|| write_frame(black_box(&mut buf), black_box(&s), black_box(&payload)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
