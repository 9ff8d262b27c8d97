//! Flow-table lookup cost: hits on a table holding 100 k flows, and the
//! full ingress step (flow key extraction + symmetric hash + lookup).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_dataplane::flow_table::FlowTable;
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::{flow_key, FlowKey, IpProtocol, MacAddr};

fn key(i: u32) -> FlowKey {
    FlowKey::new(
        std::net::Ipv4Addr::from(0x0a00_0000 + i).into(),
        std::net::Ipv4Addr::new(10, 1, 0, 1).into(),
        (i % 60000) as u16 + 1,
        80,
        IpProtocol::UDP,
    )
}

fn bench(c: &mut Criterion) {
    const FLOWS: u32 = 100_000;
    let mut t = FlowTable::new(131_072, u64::MAX / 4, 1);
    let keys: Vec<FlowKey> = (0..FLOWS).map(key).collect();
    for k in &keys {
        let ck = k.canonical();
        t.lookup_or_insert(&ck, k.symmetric_hash(), 0, || Some(0))
            .unwrap();
    }
    let mut i = 0usize;
    c.bench_function("flow_table/hit_100k", |b| {
        b.iter(|| {
            i = (i * 7919 + 1) % FLOWS as usize;
            let k = &keys[i];
            black_box(t.lookup_or_insert(&k.canonical(), k.symmetric_hash(), 1, || None))
        })
    });
    let frames: Vec<Vec<u8>> = (0..1024u32)
        .map(|j| {
            let k = &keys[(j * 97) as usize];
            let spec = FrameSpec {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                vlan: None,
                src_ip: k.src_ip(),
                dst_ip: k.dst_ip(),
                ttl: 64,
                l4: L4Spec::Udp {
                    src_port: k.src_port,
                    dst_port: k.dst_port,
                },
            };
            let mut buf = vec![0u8; 128];
            let n = write_frame(&mut buf, &spec, &[0u8; 18]).unwrap();
            buf.truncate(n);
            buf
        })
        .collect();
    let mut j = 0usize;
    c.bench_function("flow_table/ingress_step_64B", |b| {
        b.iter(|| {
            j = (j + 1) & 1023;
            let k = flow_key(black_box(&frames[j])).unwrap();
            black_box(t.lookup_or_insert(&k.canonical(), k.symmetric_hash(), 1, || None))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
