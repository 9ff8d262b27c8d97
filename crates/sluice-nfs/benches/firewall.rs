//! Firewall hot path at scale: 1 k rules, 100 k tracked TCP connections.
//!
//! Every connection is opened with a handshake (SYN, SYN/ACK, ACK), so it
//! is ESTABLISHED, assured and checked against the sequence window (not
//! picked up mid-stream: Linux makes such a connection liberal, and with
//! no reply seen its segments fail the window checks and pass
//! regardless). Its packets then alternate, per connection, between 10
//! bytes of client data and the server's ACK of them, sequence and
//! acknowledgment numbers advancing (`Stream`), so each one is in the
//! window and updates the window state as real traffic does, not a
//! retransmission of the last.
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
use sluice_nf::harness::NoNames;
use sluice_nf::{BuildContext, Verdict};
use sluice_nfs::conntrack::{TcpState, ASSURED};
use sluice_nfs::firewall::{counters, Decision, Firewall};
use sluice_packet::checksum::{update_u16, update_u32};
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

/// Client and server initial sequence numbers of every connection.
const CISN: u32 = 0x1000_0000;
const SISN: u32 = 0x5000_0000;
/// Client data per segment.
const DATA: &[u8; 10] = b"0123456789";
/// Offsets in a frame: TCP sequence and acknowledgment numbers, checksum.
const SEQ_AT: usize = 14 + 20 + 4;
const ACK_AT: usize = 14 + 20 + 8;
const CSUM_AT: usize = 14 + 20 + 16;

/// A TCP frame of connection `i` (client `10.0.0.0 + i / 16`, port
/// `1024 + i % 16`) with server `dst`:443, from the server with
/// `from_server`.
#[allow(clippy::too_many_arguments)]
fn tcp(
    i: u32,
    dst: &str,
    from_server: bool,
    flags: TcpFlags,
    seq: u32,
    ack: u32,
    data: &[u8],
) -> Vec<u8> {
    let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i / 16));
    let server: IpAddr = dst.parse().unwrap();
    let cport = 1024 + (i % 16) as u16;
    let (src_ip, dst_ip, src_port, dst_port) = match from_server {
        false => (client, server, cport, 443),
        true => (server, client, 443, cport),
    };
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
        dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
        vlan: None,
        src_ip,
        dst_ip,
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window: 65_535,
        },
    };
    let mut buf = vec![0u8; spec.header_len() + data.len()];
    let n = write_frame(&mut buf, &spec, data).unwrap();
    buf.truncate(n);
    buf
}

/// A connection's opening SYN (to `dst`).
fn syn(i: u32, dst: &str) -> Vec<u8> {
    tcp(i, dst, false, TcpFlags::SYN, CISN, 0, b"")
}

/// The frame padded to 64 bytes (the Ethernet minimum with FCS), for the
/// arena's fixed-length buffers; the IP length still bounds it.
fn pad(f: &[u8]) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..f.len()].copy_from_slice(f);
    b
}

/// The established connections' traffic: visit `k` of connection `i`
/// is, for even `k`, the client's `k / 2`-th 10 bytes of data, for odd
/// `k` the server's ACK of them. Written from one template per direction
/// (connection 0's first segments, in cache) with the connection's
/// client address and port and the one number that advances patched in,
/// the IPv4 and TCP checksums updated (RFC 1624), as a sender's stack
/// would write it; the only per-connection state is the count (4 bytes),
/// so the refill adds no cache miss of its own to `process_100k`'s and
/// `copy_only_100k`'s.
struct Stream {
    /// Connection 0's first data segment and its ACK.
    templates: [[u8; 64]; 2],
    /// Per connection: segments sent so far.
    visits: Vec<u32>,
}

/// Offsets in a frame: source and destination address and port.
const SRC_IP_AT: usize = 26;
const DST_IP_AT: usize = 30;
const SRC_PORT_AT: usize = 34;
const DST_PORT_AT: usize = 36;
const IP_CSUM_AT: usize = 24;

impl Stream {
    fn new(n: u32) -> Stream {
        let d = TcpFlags::ACK | TcpFlags::PSH;
        let server = "192.0.2.1";
        Stream {
            templates: [
                pad(&tcp(0, server, false, d, CISN + 1, SISN + 1, DATA)),
                pad(&tcp(
                    0,
                    server,
                    true,
                    TcpFlags::ACK,
                    SISN + 1,
                    CISN + 11,
                    b"",
                )),
            ],
            visits: vec![0; n as usize],
        }
    }

    /// Writes connection `i`'s next segment into `out` (64 bytes) and,
    /// with `send`, counts it as sent; without, the next call writes the
    /// same segment (the `copy_only` refill: the same work, and the
    /// firewall sees no gap in the sequence).
    #[inline(always)]
    fn write(&mut self, i: usize, out: &mut [u8], send: bool) {
        let k = self.visits[i];
        let reply = k & 1 == 1;
        out.copy_from_slice(&self.templates[usize::from(reply)]);
        // The client's address and port (connection 0's in the template).
        let ip = 0x0a00_0000 + i as u32 / 16;
        let port = 1024 + (i % 16) as u16;
        let (ip_at, port_at) = match reply {
            false => (SRC_IP_AT, SRC_PORT_AT),
            true => (DST_IP_AT, DST_PORT_AT),
        };
        let mut ip_csum = get16(out, IP_CSUM_AT);
        let mut tcp_csum = get16(out, CSUM_AT);
        let old = put32(out, ip_at, ip);
        ip_csum = update_u32(ip_csum, old, ip);
        tcp_csum = update_u32(tcp_csum, old, ip);
        let old = put16(out, port_at, port);
        tcp_csum = update_u16(tcp_csum, old, port);
        // The data's SEQ, or the ACK of it.
        let at = if reply { ACK_AT } else { SEQ_AT };
        let old = get32(out, at);
        let new = old.wrapping_add(DATA.len() as u32 * (k / 2));
        put32(out, at, new);
        tcp_csum = update_u32(tcp_csum, old, new);
        put16(out, IP_CSUM_AT, ip_csum);
        put16(out, CSUM_AT, tcp_csum);
        self.visits[i] = k + u32::from(send);
    }
}

#[inline(always)]
fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes `v` at `at`; returns what was there.
#[inline(always)]
fn put16(b: &mut [u8], at: usize, v: u16) -> u16 {
    let old = get16(b, at);
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    old
}

/// Writes `v` at `at`; returns what was there.
#[inline(always)]
fn put32(b: &mut [u8], at: usize, v: u32) -> u32 {
    let old = get32(b, at);
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    old
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
        name: "fw".into(),
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
/// gathering the flow ids and writing each connection's next segment into
/// its frame (the frames are spread over 100 k connections, as the
/// prefetch of each frame's headers was) and, with `warm`, prefetching the
/// conntrack lines; then `decide_frame` (which parses only the packets its
/// fast path cannot take).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn hit_batch(
    fw: &mut Firewall,
    st: &mut Stream,
    frames: &mut [[u8; 64]],
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
        st.write(i, &mut frames[i], true);
    }
    if warm {
        fw.warm(&ids);
    }
    for k in 0..BATCH {
        let f = &frames[idx[k]];
        black_box(fw.decide_frame(f, 0, ids[k], now).unwrap());
    }
}

/// The bench's own share of `hit_batch`: frame choice and the write pass
/// (the same segments again: nothing is sent).
#[inline(never)]
fn pick_batch(st: &mut Stream, frames: &mut [[u8; 64]], seq: &[usize], pos: &mut usize) {
    let mut idx = [0usize; BATCH];
    for slot in idx.iter_mut() {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        *slot = i;
        st.write(i, &mut frames[i], false);
    }
    black_box(idx);
}

/// The previous calibration: frame choice, touch pass, parse.
#[inline(never)]
fn touch_parse_batch(frames: &[[u8; 64]], seq: &[usize], pos: &mut usize) {
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

/// Loads the rig's batch with the next segments of the next 32
/// connections of `seq` (from `*pos`), flow id = connection, verdict
/// `Next`, as the platform hands them over; `send`: as sent (else the
/// same segments come again next time).
fn fill(rig: &mut Rig, st: &mut Stream, seq: &[usize], pos: &mut usize, send: bool) {
    rig.fill(|p| {
        let i = seq[*pos];
        *pos = if *pos + 1 == seq.len() { 0 } else { *pos + 1 };
        st.write(i, p.data_mut(), send);
        p.raw().set_flow_id(i as u32);
        p.set_verdict(Verdict::Next);
    });
}

/// One iteration of `process_100k` (`run`) or `copy_only_100k`: the same
/// refill either way, segments counted as sent only when processed.
#[inline(always)]
fn process_step(
    rig: &mut Rig,
    fw: &mut Firewall,
    st: &mut Stream,
    seq: &[usize],
    pos: &mut usize,
    run: bool,
) {
    fill(rig, st, seq, pos, run);
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

/// The bench's state: the firewall, its connections' traffic, a frame
/// per connection (for `hit_*`) and the order connections are visited in.
struct Setup {
    fw: Firewall,
    st: Stream,
    frames: Vec<[u8; 64]>,
    seq: Vec<usize>,
}

fn setup() -> Setup {
    let mut fw = firewall();
    let n = conns();
    let d = "192.0.2.1";
    // Every connection opened by a handshake: NEW (1 k rules scanned),
    // then SYN_RECV, then ESTABLISHED and assured.
    for i in 0..n {
        let hs = [
            syn(i, d),
            tcp(
                i,
                d,
                true,
                TcpFlags::SYN | TcpFlags::ACK,
                SISN,
                CISN + 1,
                b"",
            ),
            tcp(i, d, false, TcpFlags::ACK, CISN + 1, SISN + 1, b""),
        ];
        for (k, f) in hs.iter().enumerate() {
            let got = fw.decide(f, &parse(f).unwrap(), 0, i, NOW);
            let want = match k {
                0 => Decision::New {
                    rule: Some(RULES as usize - 1),
                },
                _ => Decision::Established,
            };
            assert_eq!(got, want, "connection {i}, handshake packet {k}");
        }
        let f = &hs[2];
        let key = sluice_packet::FlowKey::from_headers(f, &parse(f).unwrap()).unwrap();
        let e = fw.conntrack().lookup(0, &key, NOW).unwrap();
        assert_eq!(e.proto_state, TcpState::Established as u8);
        assert_ne!(e.flags & ASSURED, 0);
    }
    assert_eq!(fw.conntrack().len(), n as usize);
    let mut st = Stream::new(n);
    let mut frames = vec![[0u8; 64]; n as usize];
    for (i, f) in frames.iter_mut().enumerate() {
        st.write(i, f, false);
    }
    // The patched segments are well formed, both directions.
    for i in [0, 1, 17, n as usize - 1] {
        for send in [true, false] {
            let mut f = [0u8; 64];
            st.write(i, &mut f, send);
            sluice_packet::verify_checksums(&f, &parse(&f).unwrap()).unwrap();
        }
        st.visits[i] = 0;
    }
    let seq = order(n as usize, 0x9e37_79b9);
    Setup {
        fw,
        st,
        frames,
        seq,
    }
}

/// `FIREWALL_CPU_NS=1 cargo bench ... --bench firewall`: on-CPU ns per
/// packet of each hit variant over 2 M packets (median of 5 runs), for a
/// loaded machine where wall-clock criterion figures are inflated.
fn cpu_time_report() {
    let Setup {
        mut fw,
        mut st,
        mut frames,
        seq,
    } = setup();
    for (name, cached, warm) in [
        ("hit_cached", true, false),
        ("hit_cached_warm", true, true),
        ("hit_hashed", false, false),
    ] {
        let mut pos = 0;
        on_cpu(&format!("firewall/{name}"), || {
            hit_batch(
                &mut fw,
                &mut st,
                &mut frames,
                &seq,
                &mut pos,
                cached,
                warm,
                NOW,
            )
        });
    }
    // Calibration: the bench's own share of `hit_cached_warm` (picking
    // 32 random frames out of 100 k and writing their segments), so the
    // firewall's share, its parse included, is the difference.
    let mut pos = 0;
    on_cpu("calibration/batch_pick", || {
        pick_batch(&mut st, &mut frames, &seq, &mut pos)
    });
    // The previous calibration (frame pick, touch pass, parse), to
    // compare with figures taken before the firewall parsed for itself.
    let mut pos = 0;
    on_cpu("calibration/batch_touch+parse", || {
        touch_parse_batch(&frames, &seq, &mut pos)
    });
    // The NF's real `process` on a batch in an arena: refill (write the
    // next segments of 32 random connections, as the platform would have
    // written them) + process, and the refill alone to subtract.
    let mut rig = Rig::new(BATCH);
    let mut medians = [0.0; 2];
    for (k, (name, run)) in [("process_100k", true), ("copy_only_100k", false)]
        .into_iter()
        .enumerate()
    {
        let mut pos = 0;
        medians[k] = on_cpu(&format!("firewall/{name}"), || {
            process_step(&mut rig, &mut fw, &mut st, &seq, &mut pos, run)
        });
    }
    // Every segment passed in the window (none INVALID, none off the
    // ESTABLISHED path).
    assert_eq!(rig.counter(counters::INVALID), 0);
    assert_eq!(
        rig.counter(counters::ESTABLISHED),
        rig.counter(counters::ACCEPTED)
    );
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
    let Setup {
        mut fw,
        mut st,
        mut frames,
        seq,
    } = setup();
    if let Some(run) = match variant {
        "process" => Some(true),
        "copy_only" => Some(false),
        _ => None,
    } {
        let mut rig = Rig::new(BATCH);
        let mut pos = 0;
        for _ in 0..10_000 {
            process_step(&mut rig, &mut fw, &mut st, &seq, &mut pos, run);
        }
        assert_eq!(rig.counter(counters::INVALID), 0);
        return;
    }
    let (cached, warm) = match variant {
        "hit_cached" => (true, false),
        "hit_cached_warm" => (true, true),
        _ => (false, false),
    };
    let mut pos = 0;
    for _ in 0..10_000 {
        hit_batch(
            &mut fw,
            &mut st,
            &mut frames,
            &seq,
            &mut pos,
            cached,
            warm,
            NOW,
        );
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
    let Setup {
        mut fw,
        mut st,
        mut frames,
        seq,
    } = setup();
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
            b.iter(|| {
                hit_batch(
                    &mut fw,
                    &mut st,
                    &mut frames,
                    &seq,
                    &mut pos,
                    cached,
                    warm,
                    now,
                )
            })
        });
    }
    // The real `process` (on-CPU time: this machine is shared) and the
    // batch refill it includes, to subtract.
    let mut rig = Rig::new(BATCH);
    for (name, run) in [("process_100k", true), ("copy_only_100k", false)] {
        let mut pos = 0;
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let t0 = sluice_sys::thread_cpu_ns();
                for _ in 0..iters {
                    process_step(&mut rig, &mut fw, &mut st, &seq, &mut pos, run);
                }
                std::time::Duration::from_nanos(sluice_sys::thread_cpu_ns() - t0)
            })
        });
    }
    assert!(rig.counter(counters::ESTABLISHED) > 0);
    assert_eq!(rig.counter(counters::INVALID), 0);
    // NEW connections no rule accepts (another destination): nothing is
    // inserted, every packet scans 1 k rules to the default drop.
    let denied: Vec<Vec<u8>> = (0..1024u32).map(|i| syn(i, "192.0.9.9")).collect();
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
