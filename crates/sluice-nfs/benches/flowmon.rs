//! ns/packet of the flow_monitor, tunnel and classifier NFs on 32-packet
//! batches held in a real arena (no per-iteration frame copies):
//!
//! * `flowmon/observe_100k`: flow_monitor on packets spread over 100 k
//!   flows (each iteration rewrites the source address and flow id of the
//!   batch for the next 32 flows, a few ns/packet of the figure);
//! * `flowmon/scan_100k`: one timeout scan (tick) over 100 k active
//!   flows, none expiring (throughput = flows scanned);
//! * `vxlan/encap`, `vxlan/decap`: 64-byte inner UDP frames, IPv4 outer
//!   (the batch is restored with one pull/push of the headroom);
//! * `classifier/8_rules`: 8 rules, packets matching the last one.
//!
//! `cargo bench -p sluice-nfs --bench flowmon`

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::net::UdpSocket;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfId, PortId, Resolver, Verdict};
use sluice_nfs::elements::classifier::Classifier;
use sluice_nfs::elements::filter::parse_filter;
use sluice_nfs::flow_monitor::exporter::ExportConfig;
use sluice_nfs::flow_monitor::table::Timeouts;
use sluice_nfs::flow_monitor::{FlowMonitor, Settings};
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr};
use sluice_spec::ConfigNode;

#[path = "common/rig.rs"]
#[allow(dead_code)] // each bench uses its own part of the shared rig
mod rig;
use rig::Rig;

const BATCH: usize = 32;

fn frame(src: u32, sport: u16) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: std::net::Ipv4Addr::from(src).into(),
        dst_ip: std::net::Ipv4Addr::new(10, 1, 0, 1).into(),
        ttl: 64,
        l4: L4Spec::Udp {
            src_port: sport,
            dst_port: 443,
        },
    };
    let mut b = vec![0u8; 64];
    let n = write_frame(&mut b, &spec, &[0; 22]).unwrap();
    b.truncate(n);
    b
}

/// The shared rig's batch loaded once with `frames` (flow id = index) and
/// kept across iterations.
struct Bench {
    rig: Rig,
}

impl Bench {
    fn new(frames: &[Vec<u8>]) -> Self {
        let mut rig = Rig::new(frames.len());
        let mut next = frames.iter().enumerate();
        rig.fill(|p| {
            let (i, f) = next.next().expect("one frame per buffer");
            let pkt = p.raw();
            pkt.reset(f.len());
            pkt.data_mut().copy_from_slice(f);
            pkt.set_flow_id(i as u32);
            pkt.set_timestamp_ns(1_000_000_000);
        });
        Bench { rig }
    }

    fn run(&mut self, nf: &mut dyn NetworkFunction, now: u64) {
        let mut batch = Batch::new(&self.rig.arena, &mut self.rig.handles);
        batch.reset_verdicts();
        let mut ctx = Context::new(self.rig.arena.nf_control(0), &self.rig.arena, now);
        nf.process(&mut batch, &mut ctx);
    }

    fn each(&mut self, f: impl FnMut(&mut sluice_nf::Packet<'_>)) {
        self.rig.fill(f);
    }
}

fn flowmon(c: &mut Criterion) {
    const FLOWS: u32 = 100_000;
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let settings = Settings {
        export: ExportConfig {
            collector: sink.local_addr().unwrap(),
            domain_id: 1,
            mtu: 1500,
            template_refresh_ns: u64::MAX / 4,
        },
        timeouts: Timeouts {
            active_ns: u64::MAX / 4,
            idle_ns: u64::MAX / 4,
        },
        scan_interval_ns: 1_000_000_000,
    };
    let mut nf = FlowMonitor::new(settings, 131_072, 0).unwrap();
    let frames: Vec<Vec<u8>> = (0..BATCH as u32)
        .map(|i| frame(0x0a00_0000 + i, 1000))
        .collect();
    let mut b = Bench::new(&frames);
    let mut next = 0u32;
    let mut g = c.benchmark_group("flowmon");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("observe_100k", |bch| {
        bch.iter(|| {
            b.each(|p| {
                let id = next % FLOWS;
                next = next.wrapping_add(7919);
                p.data_mut()[26..30].copy_from_slice(&(0x0a00_0000 + id).to_be_bytes());
                p.raw().set_flow_id(id);
            });
            b.run(&mut nf, 2_000_000_000);
        })
    });
    assert_eq!(nf.flows_active(), FLOWS as usize);
    g.throughput(Throughput::Elements(u64::from(FLOWS)));
    g.bench_function("scan_100k", |bch| bch.iter(|| nf.on_tick(3_000_000_000)));
    g.finish();
}

struct NoNames;

impl Resolver for NoNames {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<PortId> {
        None
    }
    fn input_port(&self, _: &str) -> Option<PortId> {
        None
    }
}

fn build(ty: &str, cfg: serde_json::Value) -> Box<dyn NetworkFunction> {
    let node = ConfigNode::from_json(cfg);
    let ctx = BuildContext {
        name: "bench".into(),
        config: &node,
        resolver: &NoNames,
        flow_capacity: 1024,
    };
    let t = sluice_nfs::REGISTRY.iter().find(|t| t.name == ty).unwrap();
    (t.build)(&ctx).unwrap()
}

fn vxlan(c: &mut Criterion) {
    let mut enc = build(
        "vxlan_encap",
        serde_json::json!({ "vni": 42, "local": "192.0.2.1", "remote": "192.0.2.2" }),
    );
    let mut dec = build("vxlan_decap", serde_json::json!({ "vni": 42 }));
    let frames: Vec<Vec<u8>> = (0..BATCH as u32)
        .map(|i| frame(0x0a00_0000 + i, 1000 + i as u16))
        .collect();
    let mut b = Bench::new(&frames);
    let mut g = c.benchmark_group("vxlan");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("encap", |bch| {
        bch.iter(|| {
            b.run(enc.as_mut(), 1);
            b.each(|p| {
                let _ = p.raw().pull_front(50);
            });
        })
    });
    b.run(enc.as_mut(), 1);
    g.bench_function("decap", |bch| {
        bch.iter(|| {
            b.run(dec.as_mut(), 1);
            b.each(|p| {
                let _ = p.raw().push_front(50);
            });
        })
    });
    let mut ok = true;
    b.each(|p| ok &= p.verdict() == Verdict::Next);
    assert!(ok, "decap accepted every packet");
    g.finish();
}

fn classifier(c: &mut Criterion) {
    let exprs = [
        "tcp dst port 22",
        "udp port 53",
        "icmp or icmp6",
        "src net 192.168.0.0/16",
        "tcp and portrange 8000-8100",
        "ip6 and udp",
        "vlan 100",
        "udp and dst port 443 and src net 10.0.0.0/8",
    ];
    let rules = exprs
        .iter()
        .map(|e| (parse_filter(e).unwrap(), Verdict::Next))
        .collect();
    let mut nf = Classifier::new(rules, Verdict::Next);
    let frames: Vec<Vec<u8>> = (0..BATCH as u32)
        .map(|i| frame(0x0a00_0000 + i, 1000))
        .collect();
    let mut b = Bench::new(&frames);
    let mut g = c.benchmark_group("classifier");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("8_rules", |bch| bch.iter(|| b.run(&mut nf, 1)));
    g.finish();
    assert!(nf.rule_hits()[7] > 0, "packets match the last rule");
}

criterion_group!(benches, flowmon, vxlan, classifier);
criterion_main!(benches);
