//! NAT44 cost per packet with 100 k live mappings (one session each), in
//! a random order over all flows so the tables are touched as in real
//! traffic:
//!
//! - `nat/outbound_100k`: outbound UDP, per-flow-id cache hit (the
//!   platform's flow id known);
//! - `nat/outbound_100k_lookup`: the same without a flow id (hash lookup);
//! - `nat/inbound_100k`: replies, cache hit;
//! - `nat/copy_only_100k`: the per-packet frame restore the other cases
//!   include (translation rewrites in place, so each packet starts from a
//!   pristine copy, a cache miss of its own at 100 k frames); subtract it;
//! - `nat/outbound_hot_1k` / `copy_only_hot_1k`: the same over 1 k flows,
//!   whose state stays in cache: the compute cost alone.
//!
//! `cargo bench -p sluice-nfs --bench nat`
//!
//! Instruction counts (stable under load, unlike time): with
//! `NAT_INSTR_PACKETS=N` the binary sets up the same 100 k mappings, runs N
//! cache-hit outbound translations and exits; the difference between two
//! callgrind runs divided by the extra packets is instructions per packet:
//!
//! ```sh
//! B=$(ls -t target/release/deps/nat-* | grep -v '\.d$' | head -1)
//! for n in 100000 200000; do NAT_INSTR_PACKETS=$n valgrind --tool=callgrind \
//!   --callgrind-out-file=/dev/null $B 2>&1 | grep refs; done
//! ```

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, Criterion, Throughput};
use sluice_nf::{BuildContext, NfId, PortId, Resolver};
use sluice_nfs::nat::{build_nf, Action, Nat};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::MacAddr;
use sluice_spec::ConfigNode;
use std::net::Ipv4Addr;

const FLOWS: u32 = 100_000;
const BATCH: usize = 256;

struct NoNames;
impl Resolver for NoNames {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<PortId> {
        None
    }
}

fn frame(src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> [u8; 64] {
    let spec = FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan: None,
        src_ip: src.into(),
        dst_ip: dst.into(),
        ttl: 64,
        l4: L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
    };
    let mut buf = [0u8; 64];
    write_frame(&mut buf, &spec, &[0u8; 22]).unwrap();
    buf
}

fn nat() -> Nat {
    let config = ConfigNode::from_json(serde_json::json!({
        "inside": ["10.0.0.0/8"],
        "pool": ["192.0.2.0/28"],
        "capacity": 131072,
    }));
    let ctx = BuildContext {
        name: "nat",
        config: &config,
        resolver: &NoNames,
        flow_capacity: 262_144,
    };
    build_nf(&ctx).unwrap().into_nat()
}

/// One 64-byte frame per flow.
type Frames = Vec<[u8; 64]>;

/// The NAT with 100 k mappings, the outbound frames, their replies and a
/// pseudo-random walk over all flows.
fn setup() -> (Nat, Frames, Frames, Vec<u32>) {
    let mut nat = nat();
    let remote = Ipv4Addr::new(198, 51, 100, 1);
    let out: Vec<[u8; 64]> = (0..FLOWS)
        .map(|i| {
            frame(
                Ipv4Addr::from(0x0a00_0000 + i),
                10_000 + (i % 50_000) as u16,
                remote,
                443,
            )
        })
        .collect();
    let now = NOW;
    let mut back = Vec::with_capacity(FLOWS as usize);
    for (i, f) in out.iter().enumerate() {
        let mut t = *f;
        assert_eq!(nat.translate(&mut t, 0, i as u32, now), Action::Out);
        // The reply to the translated packet.
        let (s, d) = (&t[26..30], &t[30..34]);
        let ext = Ipv4Addr::new(s[0], s[1], s[2], s[3]);
        let rem = Ipv4Addr::new(d[0], d[1], d[2], d[3]);
        let sp = u16::from_be_bytes([t[34], t[35]]);
        back.push(frame(rem, 443, ext, sp));
    }
    assert_eq!(nat.mapping_count(), FLOWS as usize);
    // A fixed pseudo-random walk over every flow.
    let order: Vec<u32> = (0..FLOWS)
        .map(|i| (i as u64 * 7919 % FLOWS as u64) as u32)
        .collect();
    (nat, out, back, order)
}

const NOW: u64 = 1_000_000_000;

fn bench(c: &mut Criterion) {
    let (mut nat, out, back, order) = setup();
    let mut g = c.benchmark_group("nat");
    g.throughput(Throughput::Elements(BATCH as u64));
    // `span` flows of the walk are visited: all 100 k (tables far larger
    // than the caches), or 1 k (hot tables: the compute cost alone).
    let mut run = |name: &str,
                   frames: &[[u8; 64]],
                   flow_base: u32,
                   with_id: bool,
                   translate: bool,
                   span: usize| {
        let mut k = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    let i = order[k] as usize;
                    k = if k + 1 == span { 0 } else { k + 1 };
                    let mut f = frames[i];
                    if translate {
                        let id = if with_id {
                            flow_base + i as u32
                        } else {
                            u32::MAX
                        };
                        black_box(nat.translate(&mut f, 0, id, NOW));
                    }
                    black_box(&f);
                }
            })
        });
    };
    let all = order.len();
    run("outbound_100k", &out, 0, true, true, all);
    run("outbound_100k_lookup", &out, 0, false, true, all);
    run("inbound_100k", &back, 131_072, true, true, all);
    run("copy_only_100k", &out, 0, true, false, all);
    run("outbound_hot_1k", &out, 0, true, true, 1000);
    run("copy_only_hot_1k", &out, 0, true, false, 1000);
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    if let Some(n) = std::env::var("NAT_INSTR_PACKETS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let (mut nat, out, _, order) = setup();
        for k in 0..n {
            let i = order[k % order.len()] as usize;
            let mut f = out[i];
            black_box(nat.translate(&mut f, 0, i as u32, NOW));
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
