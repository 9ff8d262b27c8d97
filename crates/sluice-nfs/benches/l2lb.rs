//! Per-packet cost of the issue-3 NFs' cores: a bridge lookup (learn +
//! forward of a known unicast frame with 4 k stations), a NAT load
//! balancer packet with 100 k tracked connections, and a policer packet
//! (parse + DSCP read + srTCM/trTCM colouring, per-flow buckets).
//!
//!     cargo bench -p sluice-nfs --bench l2lb

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_nfs::bridge::core::{Bridge, PortVlans};
use sluice_nfs::load_balancer::balancer::{Backend, Balancer, Mode, Service};
use sluice_nfs::load_balancer::maglev;
use sluice_nfs::policer::dscp;
use sluice_nfs::policer::meter::{Buckets, Meter, MeterKind};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::{parse, MacAddr};

const S: u64 = 1_000_000_000;

fn udp(src: std::net::Ipv4Addr, sport: u16, dst: &str, dport: u16) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip: src.into(),
        dst_ip: dst.parse().unwrap(),
        ttl: 64,
        l4: L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
    };
    let mut buf = vec![0u8; 128];
    let n = write_frame(&mut buf, &spec, &[0u8; 18]).unwrap();
    buf.truncate(n);
    buf
}

fn mac(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [2, 0, b[0], b[1], b[2], b[3]]
}

fn bridge(c: &mut Criterion) {
    const STATIONS: u32 = 4096;
    let ports = vec![
        PortVlans {
            access: Some(1),
            trunk: vec![],
            native: None,
        };
        8
    ];
    let mut br = Bridge::new(&ports, 8192, 300 * S);
    let frames: Vec<Vec<u8>> = (0..STATIONS)
        .map(|i| {
            let mut f = vec![0u8; 60];
            f[0..6].copy_from_slice(&mac((i * 7 + 1) % STATIONS));
            f[6..12].copy_from_slice(&mac(i));
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f
        })
        .collect();
    for (i, f) in frames.iter().enumerate() {
        br.decide(f, i % 8, S);
    }
    let mut i = 0usize;
    c.bench_function("l2lb/bridge_lookup", |b| {
        b.iter(|| {
            i = (i + 1) % STATIONS as usize;
            black_box(br.decide(&frames[i], i % 8, S + 1))
        })
    });
}

fn load_balancer(c: &mut Criterion) {
    const CONNS: u32 = 100_000;
    let backends: Vec<Backend> = (0..16)
        .map(|i| Backend {
            name: format!("b{i}"),
            addr: format!("10.1.0.{}", i + 1).parse().unwrap(),
            port: Some(8080),
            mac: None,
            weight: 1,
        })
        .collect();
    let svc = Service {
        vip: "10.0.0.100".parse().unwrap(),
        ports: vec![80],
        tcp: true,
        udp: true,
    };
    let mut lb = Balancer::new(
        svc,
        Mode::Nat,
        backends,
        maglev::default_size(16),
        131_072,
        131_072,
        3600 * S,
    );
    let frames: Vec<Vec<u8>> = (0..CONNS)
        .map(|i| {
            udp(
                std::net::Ipv4Addr::from(0xc0a8_0000 + i),
                (i % 50_000) as u16 + 1024,
                "10.0.0.100",
                80,
            )
        })
        .collect();
    let mut scratch = vec![0u8; frames[0].len()];
    for (i, f) in frames.iter().enumerate() {
        scratch.copy_from_slice(f);
        lb.handle(&mut scratch, i as u32, S);
    }
    assert_eq!(lb.connections(), CONNS as usize);
    // Each iteration copies the 60-byte request into a scratch buffer
    // (≈ 2 ns) because NAT rewrites it in place.
    let mut i = 0usize;
    c.bench_function("l2lb/lb_nat_100k", |b| {
        b.iter(|| {
            i = (i * 7919 + 1) % CONNS as usize;
            scratch.copy_from_slice(&frames[i]);
            black_box(lb.handle(&mut scratch, i as u32, S + 1))
        })
    });
}

fn policer(c: &mut Criterion) {
    let m = Meter::new(MeterKind::TrTcm {
        cir: 1_250_000,
        cbs: 16_384,
        pir: 2_500_000,
        pbs: 32_768,
    })
    .unwrap();
    let mut buckets = vec![Buckets::default(); 1024];
    let frames: Vec<Vec<u8>> = (0..1024u32)
        .map(|i| {
            udp(
                std::net::Ipv4Addr::from(0x0a00_0000 + i),
                1000,
                "10.0.0.2",
                80,
            )
        })
        .collect();
    let mut i = 0usize;
    let mut now = S;
    c.bench_function("l2lb/policer", |b| {
        b.iter(|| {
            i = (i + 1) % 1024;
            now += 100;
            let f = &frames[i];
            let h = parse(f).unwrap();
            let d = dscp::read(f, usize::from(h.l3_offset), h.ip_version);
            black_box(d);
            black_box(m.color(&mut buckets[i], now, f.len() as u64, None))
        })
    });
}

criterion_group!(benches, bridge, load_balancer, policer);
criterion_main!(benches);
