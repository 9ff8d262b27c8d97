//! Router benchmarks: LPM lookups with a million routes (IPv4 DIR-24-8
//! with a BGP-like length mix; IPv6 byte-stride tables and range lines
//! with /32–/64s, /48s, /128 host routes and a default route) and the
//! whole NF per packet (parse, checksum check, lookup, neighbour, TTL, MAC
//! rewrite).
//!
//! `cargo bench -p sluice-nfs --bench router -- --warm-up-time 1 --measurement-time 3`
//!
//! Each iteration handles 1024 addresses / 256 frames; divide the time by
//! that (criterion prints it as elements per second). Times are the
//! thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time, so time
//! spent descheduled on a loaded machine is not counted (cache and memory
//! interference from other processes still is).

#![allow(missing_docs)] // criterion_group! generates an undocumented pub fn

use std::fmt::Write as _;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Bencher, Criterion, Throughput};
use sluice_nf::{BuildContext, NfId, PortId, Resolver};
use sluice_nfs::router::compile;
use sluice_nfs::router::forward::Stats;
use sluice_nfs::router::lpm_v4::LpmV4;
use sluice_nfs::router::lpm_v6::LpmV6;
use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr};
use sluice_spec::ConfigNode;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const N: usize = 1_000_000;

/// Runs `f` per iteration, timed by the thread's CPU clock.
fn cpu_time(b: &mut Bencher<'_>, mut f: impl FnMut()) {
    b.iter_custom(|iters| {
        let t0 = sluice_sys::thread_cpu_ns();
        for _ in 0..iters {
            f();
        }
        Duration::from_nanos(sluice_sys::thread_cpu_ns() - t0)
    })
}

/// A BGP-like IPv4 length mix: 60 % /24, 30 % /16–/23, 10 % /25–/32.
fn v4_routes(rng: &mut Rng) -> Vec<(u32, u8, u32)> {
    (0..N)
        .map(|i| {
            let r = rng.next();
            let len = match r % 10 {
                0..=5 => 24,
                6..=8 => 16 + (r >> 8) as u8 % 8,
                _ => 25 + (r >> 8) as u8 % 8,
            };
            let a = (rng.next() as u32) & (u32::MAX << (32 - len));
            (a, len, 1 + (i as u32 % 64))
        })
        .collect()
}

/// A default route, then /32–/64 prefixes under 4096 /32 allocations of
/// 2000::/4, one in ten a /48 and one in a hundred a /128 host route.
fn v6_routes(rng: &mut Rng) -> Vec<(u128, u8, u32)> {
    let mut routes = vec![(0, 0, 1)];
    routes.extend((1..N).map(|i| {
        let r = rng.next();
        let len = match r % 100 {
            0 => 128,
            1..=10 => 48,
            _ => 32 + ((r >> 40) % 33) as u8,
        };
        let top = (0x2000u128 << 112) | (((r >> 8) as u128 & 0xfff) << 96);
        let low = (rng.next() as u128) << 32 | (rng.next() as u128 & 0xffff_ffff);
        let a = (top | low) & (u128::MAX << (128 - len as u32));
        (a, len, 1 + (i as u32 % 64))
    }));
    routes
}

fn lpm(c: &mut Criterion) {
    let mut rng = Rng(0x0bad_cafe_1234_5678);
    let r4 = v4_routes(&mut rng);
    let t4 = LpmV4::build(&r4);
    let addrs4: Vec<u32> = (0..1 << 16).map(|_| rng.next() as u32).collect();
    let r6 = v6_routes(&mut rng);
    let t0 = std::time::Instant::now();
    let t6 = LpmV6::build(&r6);
    eprintln!(
        "v4: {} tbl8 groups; v6: {} MiB, built in {} ms",
        t4.tbl8_groups(),
        t6.memory_bytes() >> 20,
        t0.elapsed().as_millis()
    );
    // Addresses inside random routes' /32 allocations (random v6
    // addresses would all stop at the direct table).
    let addrs6: Vec<u128> = (0..1 << 16)
        .map(|_| {
            let (p, _, _) = r6[(rng.next() % N as u64) as usize];
            (p & (u128::MAX << 96)) | (rng.next() as u128) << 32 | rng.next() as u128 & 0xffff_ffff
        })
        .collect();
    let mut g = c.benchmark_group("router");
    g.throughput(Throughput::Elements(1024));
    let mut k = 0usize;
    g.bench_function("lpm_v4_lookup_1M", |b| {
        cpu_time(b, || {
            let mut acc = 0u32;
            for i in 0..1024 {
                acc = acc.wrapping_add(t4.lookup(addrs4[(k + i) & 0xffff]));
            }
            k = k.wrapping_add(1024);
            black_box(acc);
        })
    });
    g.bench_function("lpm_v6_lookup_1M", |b| {
        cpu_time(b, || {
            let mut acc = 0u32;
            for i in 0..1024 {
                acc = acc.wrapping_add(t6.lookup(addrs6[(k + i) & 0xffff]));
            }
            k = k.wrapping_add(1024);
            black_box(acc);
        })
    });
    let mut out = [0u32; 1024];
    g.bench_function("lpm_v6_lookup_batch_1M", |b| {
        cpu_time(b, || {
            let s = k & 0xfc00;
            t6.lookup_batch(&addrs6[s..s + 1024], &mut out);
            k = k.wrapping_add(1024);
            black_box(out[0]);
        })
    });
    // The floor: one random 4-byte read from a 64 MiB array (what a
    // DIR-24-8 lookup of a /24-or-shorter route is).
    let big = vec![1u32; 1 << 24];
    g.bench_function("random_read_64MiB", |b| {
        cpu_time(b, || {
            let mut acc = 0u32;
            for i in 0..1024 {
                acc = acc.wrapping_add(big[(addrs4[(k + i) & 0xffff] >> 8) as usize]);
            }
            k = k.wrapping_add(1024);
            black_box(acc);
        })
    });
    g.finish();
}

struct Ports;
impl Resolver for Ports {
    fn nf(&self, _: &str) -> Option<NfId> {
        None
    }
    fn port(&self, name: &str) -> Option<PortId> {
        ["in", "out"]
            .iter()
            .position(|n| *n == name)
            .map(|i| PortId(i as u16))
    }
    /// Every port here both receives and transmits.
    fn input_port(&self, name: &str) -> Option<PortId> {
        self.port(name)
    }
}

fn frame(dst: std::net::IpAddr, src: &str) -> Vec<u8> {
    let spec = FrameSpec {
        src_mac: MacAddr::new(2, 0, 0, 0, 0, 9),
        dst_mac: MacAddr::new(2, 0, 0, 0, 1, 0),
        vlan: None,
        src_ip: src.parse().unwrap(),
        dst_ip: dst,
        ttl: 64,
        l4: L4Spec::Udp {
            src_port: 1000,
            dst_port: 2000,
        },
    };
    let mut buf = vec![0u8; 2048];
    let n = write_frame(&mut buf, &spec, &[0u8; 18]).unwrap();
    buf.truncate(n);
    buf
}

fn nf(c: &mut Criterion) {
    let mut rng = Rng(0x1357_9bdf_2468_ace0);
    let mut text = String::with_capacity(N * 50);
    for (a, l, _) in v4_routes(&mut rng) {
        writeln!(text, "{}/{l} via 10.0.1.2 dev out", Ipv4Addr::from(a)).unwrap();
    }
    for (a, l, _) in v6_routes(&mut rng) {
        writeln!(text, "{}/{l} via 2001:db8:1::2 dev out", Ipv6Addr::from(a)).unwrap();
    }
    let path = std::env::temp_dir().join(format!("sluice-router-bench-{}.txt", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let node = ConfigNode::from_json(serde_json::json!({
        "interfaces": [
            { "port": "in", "mac": "02:00:00:00:01:00", "addresses": ["10.0.0.1/24", "2001:db8::1/64"] },
            { "port": "out", "mac": "02:00:00:00:02:00", "addresses": ["10.0.1.1/24", "2001:db8:1::1/64"] },
        ],
        "routes": ["0.0.0.0/0 via 10.0.1.2 dev out", "::/0 via 2001:db8:1::2 dev out"],
        "routes_file": path.to_str().unwrap(),
        "neighbours": [
            { "ip": "10.0.1.2", "mac": "02:00:00:00:00:22", "dev": "out" },
            { "ip": "2001:db8:1::2", "mac": "02:00:00:00:00:22", "dev": "out" },
        ],
        "icmp_errors": false,
    }));
    let ctx = BuildContext {
        name: "r".into(),
        config: &node,
        resolver: &Ports,
        flow_capacity: 1024,
    };
    let mut router = compile(&ctx).unwrap();
    std::fs::remove_file(&path).unwrap();
    // 64 batches of 256 frames with distinct destinations, used in turn,
    // so lookups meet the table mostly cache-cold as real traffic would.
    const SETS: usize = 64;
    let v4: Vec<Vec<u8>> = (0..256 * SETS)
        .map(|_| {
            frame(
                Ipv4Addr::from(rng.next() as u32 % 0x7e00_0000 + 0x0100_0000).into(),
                "10.0.0.9",
            )
        })
        .collect();
    let v6: Vec<Vec<u8>> = (0..256 * SETS)
        .map(|_| {
            let top = (0x2000u128 << 112) | ((rng.next() as u128 & 0xfff) << 96);
            frame(
                Ipv6Addr::from(top | rng.next() as u128).into(),
                "2001:db8::9",
            )
        })
        .collect();
    let mut g = c.benchmark_group("router");
    g.throughput(Throughput::Elements(256));
    // Buffers with room, refreshed from the frames each time (a 64-byte
    // copy per frame, ≈ 2 ns, included in the figure).
    let mut bufs: Vec<Vec<u8>> = (0..256).map(|_| vec![0u8; 2048]).collect();
    let mut set = 0usize;
    for (name, all, batched) in [
        ("nf_forward_v4", &v4, false),
        ("nf_forward_v4_batched", &v4, true),
        ("nf_forward_v6", &v6, false),
        ("nf_forward_v6_batched", &v6, true),
    ] {
        g.bench_function(name, |b| {
            cpu_time(b, || {
                set = (set + 1) % SETS;
                let frames = &all[set * 256..(set + 1) * 256];
                let mut st = Stats::default();
                // As the NF does: the whole batch's lookups first.
                let mut vals = [0u32; 256];
                if batched && frames[0][12] == 0x08 {
                    for (v, f) in vals.iter_mut().zip(frames) {
                        let dst = u32::from_be_bytes(f[30..34].try_into().unwrap());
                        *v = router.table().v4_value(dst);
                    }
                } else if batched {
                    let dsts: [u128; 256] = std::array::from_fn(|i| {
                        u128::from_be_bytes(frames[i][38..54].try_into().unwrap())
                    });
                    router.table().v6_values(&dsts, &mut vals);
                }
                for (i, (buf, f)) in bufs.iter_mut().zip(frames.iter()).enumerate() {
                    buf[..f.len()].copy_from_slice(f);
                    let hint = batched.then_some(vals[i]);
                    let v =
                        router.process_frame_hinted(buf, f.len(), 0, i as u32, 1, hint, &mut st);
                    black_box(v);
                }
                assert_eq!(st.forwarded, 256);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lpm, nf);
criterion_main!(benches);
