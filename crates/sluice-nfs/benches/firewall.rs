//! Firewall hot path at scale: 1 k rules, 100 k tracked TCP connections.
//!
//! - `firewall/hit_cached`: a packet of an established connection whose
//!   platform flow id points at its entry, through `Firewall::decide_frame`
//!   as `process` calls it: the established fast path straight from the
//!   frame's bytes (no header parse, no flow key, no hashing);
//! - `firewall/hit_cached_warm`: the same with the batch's flow-id slots
//!   and conntrack entries prefetched first, as the NF's `process` does;
//! - `firewall/hit_hashed`: the same without a flow id (parse + full path:
//!   flow key, hash + probe);
//! - `firewall/process_100k`: the NF's real `process` on a batch of 32
//!   buffers in an arena, refilled before each call with the frames of 32
//!   random connections (as the platform hands them over: just written),
//!   on-CPU time; `firewall/copy_only_100k` is that refill alone, to
//!   subtract;
//! - `firewall/new_denied_1k_rules`: a NEW connection scanning all 1 k
//!   rules to the default drop.
//!
//! Each iteration decides a batch of 32 packets of random connections
//! (parse where needed + conntrack + verdict); time per packet = time /
//! 32. The `hit_*` frames are picked at random out of 100 k, so unlike in
//! `process_100k` they are not in cache. Run with
//! `cargo bench -p sluice-nfs --bench firewall -- --warm-up-time 1 --measurement-time 3`.
//! On a busy machine use `FIREWALL_CPU_NS=1` (on-CPU time; it also prints
//! the bench's own share, frame pick + prefetch pass, as
//! `calibration/batch_pick`, the earlier frame pick + touch pass + parse
//! as `calibration/batch_touch+parse`, and `process_100k` minus its
//! refill) or `FIREWALL_INSTR=<variant>` under callgrind (`hit_cached`,
//! `hit_cached_warm`, `hit_hashed` with `--toggle-collect='*hit_batch*'`;
//! `process`, `copy_only` with `--toggle-collect='*Rig*'`; see
//! docs/nfs/firewall.md).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

#[path = "common/rig.rs"]
mod rig;
use rig::Rig;

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::json;
use sluice_nf::{BuildContext, NfId, PortId, Resolver, Verdict};
use sluice_nfs::firewall::{counters, Decision, Firewall};
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
    fn input_port(&self, _: &str) -> Option<PortId> {
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
/// `process` did it before it kept its first pass's tuples: a first pass
/// gathering the flow ids and prefetching each frame's headers and, with
/// `warm`, prefetching the conntrack lines; then `decide_frame` (which
/// parses only the packets its fast path cannot take).
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
    for k in 0..BATCH {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        idx[k] = i;
        if cached {
            ids[k] = i as u32;
        }
        sluice_sys::prefetch(&frames[i][0]);
    }
    if warm {
        fw.warm(&ids);
    }
    for k in 0..BATCH {
        let f = &frames[idx[k]];
        black_box(fw.decide_frame(f, 0, ids[k], now).unwrap());
    }
}

/// The bench's own share of `hit_batch`: frame choice and the prefetch
/// pass.
#[inline(never)]
fn pick_batch(frames: &[Vec<u8>], seq: &[usize], pos: &mut usize) {
    let mut idx = [0usize; BATCH];
    for slot in idx.iter_mut() {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        *slot = i;
        sluice_sys::prefetch(&frames[i][0]);
    }
    black_box(idx);
}

/// The previous calibration: frame choice, touch pass, parse.
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

/// Loads the rig's batch with the frames of the next 32 connections of
/// `seq` (from `*pos`), flow id = connection, verdict `Next`, as the
/// platform hands them over.
fn fill(rig: &mut Rig, frames: &[[u8; 64]], seq: &[usize], pos: &mut usize) {
    rig.fill(|p| {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        p.data_mut().copy_from_slice(&frames[i]);
        p.raw().set_flow_id(i as u32);
        p.set_verdict(Verdict::Next);
    });
}

/// The frames padded to 64 bytes (the Ethernet minimum with FCS), for
/// the arena's fixed-length buffers; the IP length still bounds them.
fn padded(frames: &[Vec<u8>]) -> Vec<[u8; 64]> {
    frames
        .iter()
        .map(|f| {
            let mut b = [0u8; 64];
            b[..f.len()].copy_from_slice(f);
            b
        })
        .collect()
}

/// One iteration of `process_100k` (`run`) or `copy_only_100k`.
#[inline(always)]
fn process_step(
    rig: &mut Rig,
    fw: &mut Firewall,
    frames: &[[u8; 64]],
    seq: &[usize],
    pos: &mut usize,
    run: bool,
) {
    fill(rig, frames, seq, pos);
    if run {
        rig.process(fw, NOW);
    }
    black_box(&rig.handles);
}

/// On-CPU time of this thread (ns), which a busy machine's descheduling
/// does not inflate (cache contention still does). From
/// `CLOCK_THREAD_CPUTIME_ID`, which brings the running thread's time up
/// to date when read: `/proc/thread-self/schedstat`, read before, gives
/// it only as of the last tick or switch (16 µs to 800 µs for the same
/// 1.3 ms of work on a 6.18 kernel), which moved each 2 M-packet run by
/// up to ±2 ns per packet.
fn cpu_ns() -> u64 {
    sluice_sys::thread_cpu_ns()
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
        let mut pos = 0;
        on_cpu(&format!("firewall/{name}"), || {
            hit_batch(&mut fw, &frames, &seq, &mut pos, cached, warm, NOW)
        });
    }
    // Calibration: the bench's own share of `hit_cached_warm` (picking
    // 32 random frames out of 100 k and prefetching them), so the
    // firewall's share, its parse included, is the difference.
    let mut pos = 0;
    on_cpu("calibration/batch_pick", || {
        pick_batch(&frames, &seq, &mut pos)
    });
    // The previous calibration (frame pick, touch pass, parse), to
    // compare with figures taken before the firewall parsed for itself.
    let mut pos = 0;
    on_cpu("calibration/batch_touch+parse", || {
        touch_parse_batch(&frames, &seq, &mut pos)
    });
    // The NF's real `process` on a batch in an arena: refill (copy 32
    // frames of random connections, as the platform would have written
    // them) + process, and the refill alone to subtract.
    let mut rig = Rig::new(BATCH);
    let padded = padded(&frames);
    let mut medians = [0.0; 2];
    for (k, (name, run)) in [("process_100k", true), ("copy_only_100k", false)]
        .into_iter()
        .enumerate()
    {
        let mut pos = 0;
        medians[k] = on_cpu(&format!("firewall/{name}"), || {
            process_step(&mut rig, &mut fw, &padded, &seq, &mut pos, run)
        });
    }
    assert_eq!(rig.counter(counters::INVALID), 0);
    println!(
        "firewall/process_100k minus copy_only_100k: {:.1} ns/packet",
        medians[0] - medians[1]
    );
    // Calibration under the same load: parse + flow key + symmetric hash
    // alone (docs/benchmarks.md: ≈ 10 + 33 ns on a quiet machine).
    let mut pos = 0;
    on_cpu("calibration/parse+flow_key+hash", || {
        for _ in 0..BATCH {
            let f = &frames[seq[pos]];
            pos = if pos + 1 == seq.len() { 0 } else { pos + 1 };
            let h = parse(f).unwrap();
            let k = sluice_packet::FlowKey::from_headers(f, &h).unwrap();
            black_box(k.symmetric_hash());
        }
    });
}

/// Runs `batch` (one batch of `BATCH` packets) over 2 M packets, five
/// times, prints the median on-CPU ns per packet under `label` with every
/// run, and returns the median.
fn on_cpu(label: &str, mut batch: impl FnMut()) -> f64 {
    let batches = 2_000_000 / BATCH;
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t0 = cpu_ns();
        for _ in 0..batches {
            batch();
        }
        runs.push((cpu_ns() - t0) as f64 / (batches * BATCH) as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{label}: {:.1} ns/packet on-CPU (median of 5; runs {runs:.1?})",
        runs[2]
    );
    runs[2]
}

/// `FIREWALL_INSTR=<variant>`: 10 000 batches of one hit variant and
/// nothing else timed, for counting instructions with callgrind
/// (`--toggle-collect='*hit_batch*'`), which machine load does not move.
fn instr_run(variant: &str) {
    let (mut fw, frames, seq) = setup();
    if let Some(run) = match variant {
        "process" => Some(true),
        "copy_only" => Some(false),
        _ => None,
    } {
        let mut rig = Rig::new(BATCH);
        let padded = padded(&frames);
        let mut pos = 0;
        for _ in 0..10_000 {
            process_step(&mut rig, &mut fw, &padded, &seq, &mut pos, run);
        }
        return;
    }
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
    // The real `process` (on-CPU time: this machine is shared) and the
    // batch refill it includes, to subtract.
    let mut rig = Rig::new(BATCH);
    let padded = padded(&frames);
    for (name, run) in [("process_100k", true), ("copy_only_100k", false)] {
        let mut pos = 0;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let t0 = sluice_sys::thread_cpu_ns();
                for _ in 0..iters {
                    process_step(&mut rig, &mut fw, &padded, &seq, &mut pos, run);
                }
                std::time::Duration::from_nanos(sluice_sys::thread_cpu_ns() - t0)
            })
        });
    }
    assert!(rig.counter(counters::ESTABLISHED) > 0);
    assert_eq!(rig.counter(counters::INVALID), 0);
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
                black_box(fw.decide_frame(f, 0, u32::MAX, now).unwrap());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
