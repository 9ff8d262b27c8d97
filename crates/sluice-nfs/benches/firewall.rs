//! Firewall hot path at scale: 1 k rules, 100 k tracked TCP connections.
//!
//! - `firewall/hit_cached`: a packet of an established connection whose
//!   platform flow id points at its entry: the established fast path
//!   (entry checked against the header bytes, no flow key, no hashing);
//! - `firewall/hit_cached_warm`: the same with the batch's conntrack lines
//!   warmed first, as the NF's `process` does;
//! - `firewall/hit_hashed`: the same without a flow id (full path: flow
//!   key, hash + probe);
//! - `firewall/new_denied_1k_rules`: a NEW connection scanning all 1 k
//!   rules to the default drop.
//!
//! Each iteration decides a batch of 32 packets of random connections
//! (parse + conntrack + verdict); time per packet = time / 32. Run with
//! `cargo bench -p sluice-nfs --bench firewall -- --warm-up-time 1 --measurement-time 3`.
//! On a busy machine use `FIREWALL_CPU_NS=1` (on-CPU time; it also prints
//! the bench's own share, frame pick + touch pass + parse, as
//! `calibration/batch_touch+parse`) or `FIREWALL_INSTR=<variant>` under
//! callgrind (see docs/nfs/firewall.md).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use sluice_nf::{BuildContext, NfId, PortId, Resolver};
use sluice_nfs::firewall::{Decision, Firewall};
use sluice_packet::{parse, write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
use sluice_spec::ConfigNode;

/// Tracked connections (`FIREWALL_CONNS` overrides it for the on-CPU report).
const CONNS: u32 = 100_000;

fn conns() -> u32 {
    std::env::var("FIREWALL_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CONNS)
}
const RULES: u32 = 1_000;
const BATCH: usize = 32;
const NOW: u64 = 1_000_000_000;

struct NoNames;
impl Resolver for NoNames {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<PortId> {
        None
    }
}

fn frame(i: u32, dst: &str, flags: TcpFlags) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i / 16)),
        dst_ip: dst.parse().unwrap(),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: 1024 + (i % 16) as u16,
            dst_port: 443,
            seq: 1,
            ack: 1,
            flags,
            window: 100,
        },
    };
    let mut buf = vec![0u8; spec.header_len()];
    let n = write_frame(&mut buf, &spec, b"").unwrap();
    buf.truncate(n);
    buf
}

fn firewall() -> Firewall {
    // 999 rules that never match this traffic (other sources and ports),
    // then one accepting TCP to 192.0.2.0/24: every NEW connection scans
    // all of them.
    let mut rules: Vec<_> = (0..RULES - 1)
        .map(|i| {
            json!({ "action": "drop", "proto": "tcp",
                    "src": format!("172.{}.{}.0/24", 16 + i / 256, i % 256),
                    "dst_port": format!("{}-{}", 2000 + i, 2001 + i) })
        })
        .collect();
    rules.push(json!({ "action": "accept", "proto": "tcp", "dst": "192.0.2.0/24" }));
    let config = ConfigNode::from_json(json!({ "capacity": CONNS + 1024, "rules": rules }));
    let ctx = BuildContext {
        name: "fw",
        config: &config,
        resolver: &NoNames,
        flow_capacity: CONNS + 1024,
    };
    Firewall::from_build_context(&ctx).unwrap()
}

fn order(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut s = seed;
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

/// One batch of 32 packets of random established connections, as the NF's
/// `process` does it: a first pass touching each frame's headers (the
/// platform has just classified them, so they are hot) and, with `warm`,
/// warming the conntrack lines; then parse + decide.
#[inline(never)]
fn hit_batch(
    fw: &mut Firewall,
    frames: &[Vec<u8>],
    seq: &[usize],
    pos: &mut usize,
    cached: bool,
    warm: bool,
    now: u64,
) {
    let mut idx = [0usize; BATCH];
    let mut ids = [u32::MAX; BATCH];
    let mut touch = 0u8;
    for k in 0..BATCH {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        idx[k] = i;
        if cached {
            ids[k] = i as u32;
        }
        touch ^= frames[i][23];
    }
    black_box(touch);
    if warm {
        fw.warm(&ids);
    }
    for k in 0..BATCH {
        let f = &frames[idx[k]];
        let h = parse(f).unwrap();
        black_box(fw.decide(f, &h, 0, ids[k], now));
    }
}

/// `hit_batch` without the firewall: frame choice, touch pass, parse.
#[inline(never)]
fn touch_parse_batch(frames: &[Vec<u8>], seq: &[usize], pos: &mut usize) {
    let mut idx = [0usize; BATCH];
    let mut touch = 0u8;
    for slot in idx.iter_mut() {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        *slot = i;
        touch ^= frames[i][23];
    }
    black_box(touch);
    for i in idx {
        let f = &frames[i];
        black_box(parse(f).unwrap());
    }
}

/// On-CPU time of this thread (ns), which a busy machine's descheduling
/// does not inflate (cache contention still does).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn setup() -> (Firewall, Vec<Vec<u8>>, Vec<usize>) {
    let mut fw = firewall();
    let frames: Vec<Vec<u8>> = (0..conns())
        .map(|i| frame(i, "192.0.2.1", TcpFlags::ACK))
        .collect();
    // Picked up from a mid-stream ACK (tcp_loose) as ESTABLISHED.
    for (i, f) in frames.iter().enumerate() {
        let d = fw.decide(f, &parse(f).unwrap(), 0, i as u32, NOW);
        assert_eq!(
            d,
            Decision::New {
                rule: Some(RULES as usize - 1)
            }
        );
    }
    assert_eq!(fw.conntrack().len(), frames.len());
    let seq = order(frames.len(), 0x9e37_79b9);
    (fw, frames, seq)
}

/// `FIREWALL_CPU_NS=1 cargo bench ... --bench firewall`: on-CPU ns per
/// packet of each hit variant over 2 M packets (median of 5 runs), for a
/// loaded machine where wall-clock criterion figures are inflated.
fn cpu_time_report() {
    let (mut fw, frames, seq) = setup();
    for (name, cached, warm) in [
        ("hit_cached", true, false),
        ("hit_cached_warm", true, true),
        ("hit_hashed", false, false),
    ] {
        let mut runs = Vec::new();
        let mut pos = 0;
        for _ in 0..5 {
            let batches = 2_000_000 / BATCH;
            let t0 = cpu_ns();
            for _ in 0..batches {
                hit_batch(&mut fw, &frames, &seq, &mut pos, cached, warm, NOW);
            }
            runs.push((cpu_ns() - t0) as f64 / (batches * BATCH) as f64);
        }
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "firewall/{name}: {:.1} ns/packet on-CPU (median of 5; runs {runs:.1?})",
            runs[2]
        );
    }
    // Calibration: the bench's own share of `hit_cached_warm` (picking
    // 32 random frames out of 100 k, the touch pass, the parse), so the
    // firewall's share is the difference.
    let mut runs = Vec::new();
    let mut pos = 0;
    for _ in 0..5 {
        let batches = 2_000_000 / BATCH;
        let t0 = cpu_ns();
        for _ in 0..batches {
            touch_parse_batch(&frames, &seq, &mut pos);
        }
        runs.push((cpu_ns() - t0) as f64 / (batches * BATCH) as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "calibration/batch_touch+parse: {:.1} ns/packet on-CPU (median of 5; runs {runs:.1?})",
        runs[2]
    );
    // Calibration under the same load: parse + flow key + symmetric hash
    // alone (docs/benchmarks.md: ≈ 10 + 33 ns on a quiet machine).
    let mut runs = Vec::new();
    let mut pos = 0;
    for _ in 0..5 {
        let t0 = cpu_ns();
        for _ in 0..2_000_000 {
            let f = &frames[seq[pos]];
            pos = if pos + 1 == seq.len() { 0 } else { pos + 1 };
            let h = parse(f).unwrap();
            let k = sluice_packet::FlowKey::from_headers(f, &h).unwrap();
            black_box(k.symmetric_hash());
        }
        runs.push((cpu_ns() - t0) as f64 / 2e6);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "calibration/parse+flow_key+hash: {:.1} ns/packet on-CPU (median of 5; runs {runs:.1?})",
        runs[2]
    );
}

/// `FIREWALL_INSTR=<variant>`: 10 000 batches of one hit variant and
/// nothing else timed, for counting instructions with callgrind
/// (`--toggle-collect='*hit_batch*'`), which machine load does not move.
fn instr_run(variant: &str) {
    let (mut fw, frames, seq) = setup();
    let (cached, warm) = match variant {
        "hit_cached" => (true, false),
        "hit_cached_warm" => (true, true),
        _ => (false, false),
    };
    let mut pos = 0;
    for _ in 0..10_000 {
        hit_batch(&mut fw, &frames, &seq, &mut pos, cached, warm, NOW);
    }
}

fn bench(c: &mut Criterion) {
    if std::env::var_os("FIREWALL_CPU_NS").is_some() {
        cpu_time_report();
        return;
    }
    if let Ok(v) = std::env::var("FIREWALL_INSTR") {
        instr_run(&v);
        return;
    }
    let (mut fw, frames, seq) = setup();
    let now = NOW;

    let mut g = c.benchmark_group("firewall");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (name, cached, warm) in [
        ("hit_cached", true, false),
        ("hit_cached_warm", true, true),
        ("hit_hashed", false, false),
    ] {
        let mut pos = 0;
        g.bench_function(name, |b| {
            b.iter(|| hit_batch(&mut fw, &frames, &seq, &mut pos, cached, warm, now))
        });
    }
    // NEW connections no rule accepts (another destination): nothing is
    // inserted, every packet scans 1 k rules to the default drop.
    let denied: Vec<Vec<u8>> = (0..1024u32)
        .map(|i| frame(i, "192.0.9.9", TcpFlags::SYN))
        .collect();
    let mut pos = 0;
    g.bench_function("new_denied_1k_rules", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                let f = &denied[pos];
                pos = (pos + 1) % denied.len();
                let h = parse(f).unwrap();
                black_box(fw.decide(f, &h, 0, u32::MAX, now));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
