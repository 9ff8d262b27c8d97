//! NAT44 cost per packet with 100 k live mappings (one session each),
//! through the NF's real `process` path on batches of 32 packets held in
//! an arena, each packet of a mapping drawn at random (a fixed shuffle of
//! all 100 k), so the tables are touched as in real traffic:
//!
//! - `nat/outbound_100k`: outbound UDP with the platform's flow id (the
//!   per-flow-id hint hits);
//! - `nat/outbound_100k_lookup`: the same without a flow id (hash lookup);
//! - `nat/inbound_100k`: the replies (destination translated back), with
//!   their own platform flow ids;
//! - `nat/copy_only_100k`: the batch refill every case includes (32
//!   pristine 64-byte frames copied from 100 k, flow ids set, verdicts
//!   reset: translation rewrites in place, so each packet starts from a
//!   copy, a cache miss of its own at 100 k frames); subtract it;
//! - `nat/outbound_hot_1k` / `copy_only_hot_1k`: the same over 1 k flows,
//!   whose state stays in cache: the compute cost alone.
//!
//! Every case reports on-CPU time (`CLOCK_THREAD_CPUTIME_ID`), which
//! descheduling on a busy machine does not inflate (cache contention from
//! other tenants still does). Throughput is per packet (32 per iteration).
//!
//! `cargo bench -p sluice-nfs --bench nat -- --warm-up-time 1 --measurement-time 3`
//!
//! `NAT_CPU_NS=1` instead prints, for each case, the median on-CPU ns per
//! packet of 5 runs of 2 M packets, and the NAT's own share (case minus
//! its copy-only baseline).
//!
//! Instruction counts (stable under load, unlike time): with
//! `NAT_INSTR_PACKETS=N` (and optionally `NAT_INSTR_CASE=inbound` or
//! `lookup`) the binary sets up the same 100 k mappings, runs one pass over
//! every flow and then N packets of the outbound (inbound, no-flow-id) case
//! through `process`, and exits; the difference between two
//! callgrind runs divided by the extra packets is instructions per packet,
//! batch refill included (`NAT_INSTR_CASE=copy` gives the refill alone):
//!
//! ```sh
//! B=$(ls -t target/release/deps/nat-* | grep -v '\.d$' | head -1)
//! for n in 320000 640000; do NAT_INSTR_PACKETS=$n valgrind --tool=callgrind \
//!   --callgrind-out-file=/dev/null $B 2>&1 | grep refs; done
//! ```

#![allow(missing_docs)] // criterion_group! generates undocumented items

#[path = "common/rig.rs"]
mod rig;
use rig::Rig;

use std::time::Duration;

use criterion::{black_box, criterion_group, Bencher, Criterion, Throughput};
use sluice_nf::harness::NoNames;
use sluice_nf::{Batch, BuildContext, Verdict};
use sluice_nfs::nat::{build_nf, counters, NatNf};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::MacAddr;
use sluice_spec::ConfigNode;
use std::net::Ipv4Addr;

const FLOWS: u32 = 100_000;
const BATCH: usize = 32;
/// Platform flow ids of the reply direction start here (after
/// translation the platform classifies replies as a flow of their own).
const REPLY_IDS: u32 = 131_072;
const NOW: u64 = 1_000_000_000;

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

fn nat() -> NatNf {
    let config = ConfigNode::from_json(serde_json::json!({
        "inside": ["10.0.0.0/8"],
        "pool": ["192.0.2.0/28"],
        "capacity": 131072,
    }));
    let ctx = BuildContext {
        name: "nat".into(),
        config: &config,
        resolver: &NoNames,
        flow_capacity: 262_144,
    };
    build_nf(&ctx).unwrap()
}

/// One 64-byte frame per flow.
type Frames = Vec<[u8; 64]>;

/// Loads the rig's batch with the frames of the next 32 flows of `seq`
/// (from `*pos`), with flow id `id_base + flow` (none if `id_base` is
/// `u32::MAX`), as the platform hands them over: verdict `Next`.
fn fill(rig: &mut Rig, frames: &[[u8; 64]], seq: &[u32], pos: &mut usize, id_base: u32) {
    rig.fill(|p| {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        p.data_mut().copy_from_slice(&frames[i as usize]);
        let id = if id_base == u32::MAX {
            u32::MAX
        } else {
            id_base + i
        };
        p.raw().set_flow_id(id);
        p.set_verdict(Verdict::Next);
    });
}

/// A fixed shuffle of `0..n` (xorshift Fisher–Yates).
fn shuffle(n: u32, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    let mut s = seed;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

struct Setup {
    nf: NatNf,
    rig: Rig,
    out: Frames,
    back: Frames,
    seq: Vec<u32>,
}

/// The NAT with 100 k mappings made through `process`, the outbound
/// frames, their replies and a random order over all flows.
fn setup() -> Setup {
    let mut nf = nat();
    let mut rig = Rig::new(BATCH);
    let remote = Ipv4Addr::new(198, 51, 100, 1);
    let out: Frames = (0..FLOWS)
        .map(|i| {
            frame(
                Ipv4Addr::from(0x0a00_0000 + i),
                10_000 + (i % 50_000) as u16,
                remote,
                443,
            )
        })
        .collect();
    let mut back = Vec::with_capacity(FLOWS as usize);
    let in_order: Vec<u32> = (0..FLOWS).collect();
    let mut pos = 0;
    for _ in 0..FLOWS as usize / BATCH {
        fill(&mut rig, &out, &in_order, &mut pos, 0);
        rig.process(&mut nf, NOW);
        Batch::new(&rig.arena, &mut rig.handles).for_each(|p| {
            assert_eq!(p.verdict(), Verdict::Next);
            // The reply to the translated packet.
            let t = p.data();
            let (s, d) = (&t[26..30], &t[30..34]);
            let ext = Ipv4Addr::new(s[0], s[1], s[2], s[3]);
            let rem = Ipv4Addr::new(d[0], d[1], d[2], d[3]);
            let sp = u16::from_be_bytes([t[34], t[35]]);
            back.push(frame(rem, 443, ext, sp));
        });
    }
    assert_eq!(back.len(), FLOWS as usize);
    assert_eq!(nf.nat().mapping_count(), FLOWS as usize);
    assert_eq!(rig.counter(counters::TRANSLATED_OUT), u64::from(FLOWS));
    Setup {
        nf,
        rig,
        out,
        back,
        seq: shuffle(FLOWS, 0x9e37_79b9),
    }
}

/// A bench case: which frames, which flow ids, over how many flows of the
/// shuffle, and whether the NAT runs or only the batch refill.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    inbound: bool,
    id_base: u32,
    span: usize,
    translate: bool,
    /// The copy-only case to subtract.
    baseline: &'static str,
}

const CASES: [Case; 6] = [
    Case {
        name: "outbound_100k",
        inbound: false,
        id_base: 0,
        span: FLOWS as usize,
        translate: true,
        baseline: "copy_only_100k",
    },
    Case {
        name: "outbound_100k_lookup",
        inbound: false,
        id_base: u32::MAX,
        span: FLOWS as usize,
        translate: true,
        baseline: "copy_only_100k",
    },
    Case {
        name: "inbound_100k",
        inbound: true,
        id_base: REPLY_IDS,
        span: FLOWS as usize,
        translate: true,
        baseline: "copy_only_100k",
    },
    Case {
        name: "copy_only_100k",
        inbound: false,
        id_base: 0,
        span: FLOWS as usize,
        translate: false,
        baseline: "",
    },
    Case {
        name: "outbound_hot_1k",
        inbound: false,
        id_base: 0,
        span: 1000,
        translate: true,
        baseline: "copy_only_hot_1k",
    },
    Case {
        name: "copy_only_hot_1k",
        inbound: false,
        id_base: 0,
        span: 1000,
        translate: false,
        baseline: "",
    },
];

/// One iteration of `case`: refill the batch, then (unless copy-only)
/// run it through the NF.
#[inline(always)]
fn step(s: &mut Setup, case: &Case, pos: &mut usize) {
    let frames = if case.inbound { &s.back } else { &s.out };
    let seq = &s.seq[..case.span];
    fill(&mut s.rig, frames, seq, pos, case.id_base);
    if case.translate {
        s.rig.process(&mut s.nf, NOW);
    }
    black_box(&s.rig.handles);
}

/// Criterion timing on this thread's CPU clock.
fn cpu_time(b: &mut Bencher<'_>, mut f: impl FnMut()) {
    b.iter_custom(|iters| {
        let t0 = sluice_sys::thread_cpu_ns();
        for _ in 0..iters {
            f();
        }
        Duration::from_nanos(sluice_sys::thread_cpu_ns() - t0)
    })
}

fn bench(c: &mut Criterion) {
    let mut s = setup();
    let mut g = c.benchmark_group("nat");
    g.throughput(Throughput::Elements(BATCH as u64));
    for case in CASES {
        let mut pos = 0usize;
        g.bench_function(case.name, |b| cpu_time(b, || step(&mut s, &case, &mut pos)));
    }
    g.finish();
    // Every translated packet was translated (no drop, no fallback to
    // passing unchanged).
    let translated =
        s.rig.counter(counters::TRANSLATED_OUT) + s.rig.counter(counters::TRANSLATED_IN);
    assert!(translated > u64::from(FLOWS));
    assert_eq!(s.rig.counter(counters::UNTRANSLATED), 0);
    assert_eq!(s.rig.counter(counters::NO_MAPPING), 0);
    assert_eq!(s.rig.counter(counters::FILTERED), 0);
}

/// `NAT_CPU_NS=1`: median on-CPU ns per packet of each case over 5 runs
/// of 2 M packets, and the NAT's share (minus the copy-only baseline).
fn cpu_time_report() {
    let mut s = setup();
    let mut medians: Vec<(&str, f64)> = Vec::new();
    for case in CASES {
        let mut pos = 0usize;
        let batches = 2_000_000 / BATCH;
        // Warm-up: one pass, so hints and caches are as in steady state.
        for _ in 0..case.span.div_ceil(BATCH) {
            step(&mut s, &case, &mut pos);
        }
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t0 = sluice_sys::thread_cpu_ns();
            for _ in 0..batches {
                step(&mut s, &case, &mut pos);
            }
            runs.push((sluice_sys::thread_cpu_ns() - t0) as f64 / (batches * BATCH) as f64);
        }
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        medians.push((case.name, runs[2]));
        println!(
            "nat/{}: {:.1} ns/packet on-CPU (median of 5; runs {runs:.1?})",
            case.name, runs[2]
        );
    }
    for case in CASES.iter().filter(|c| c.translate) {
        let get = |n: &str| medians.iter().find(|m| m.0 == n).map_or(0.0, |m| m.1);
        println!(
            "nat/{} minus {}: {:.1} ns/packet",
            case.name,
            case.baseline,
            get(case.name) - get(case.baseline)
        );
    }
}

/// `NAT_INSTR_PACKETS=N`: N packets of one case and nothing else, for
/// callgrind.
fn instr_run(n: usize) {
    let mut s = setup();
    let name = match std::env::var("NAT_INSTR_CASE").as_deref() {
        Ok("inbound") => "inbound_100k",
        Ok("copy") => "copy_only_100k",
        Ok("lookup") => "outbound_100k_lookup",
        _ => "outbound_100k",
    };
    let case = CASES.iter().find(|c| c.name == name).copied().unwrap();
    let mut pos = 0usize;
    // One pass over every flow first, so the replies' flow ids are known
    // too (as in steady state); it costs the same in both runs.
    for _ in 0..case.span.div_ceil(BATCH) {
        step(&mut s, &case, &mut pos);
    }
    for _ in 0..n / BATCH {
        step(&mut s, &case, &mut pos);
    }
}

criterion_group!(benches, bench);

fn main() {
    if let Some(n) = std::env::var("NAT_INSTR_PACKETS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        instr_run(n);
        return;
    }
    if std::env::var_os("NAT_CPU_NS").is_some() {
        cpu_time_report();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
