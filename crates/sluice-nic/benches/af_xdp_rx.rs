//! Receive rate of an AF_XDP port on veth, 64 B frames (60 B + FCS).
//!
//! `cargo bench -p sluice-nic --bench af_xdp_rx [-- SECONDS_PER_ROUND ROUNDS]`
//! (root). A sender thread blasts frames through a second AF_XDP port on
//! the veth peer; the measured port receives them into arena buffers. Prints
//! the rate of each round and the median, then the cost of the one copy
//! from UMEM to arena per frame, measured in isolation: the input to the
//! arena-as-UMEM decision (docs/architecture.md, "NIC ports").
#![allow(unsafe_code)]

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PoolCache};
use sluice_nic::af_xdp::{AfXdpConfig, AfXdpPort};
use sluice_nic::NicPort;

fn arena() -> Arena {
    Arena::create(ArenaConfig {
        buffers: 8192,
        ring_size: 64,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .expect("arena")
}

fn sh(args: &[&str]) {
    let ok = Command::new(args[0])
        .args(&args[1..])
        .status()
        .map(|s| s.success());
    assert!(matches!(ok, Ok(true)), "{args:?} failed");
}

struct Pair(&'static str);
impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", self.0]).status();
    }
}

fn frame() -> [u8; 60] {
    let mut f = [0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

/// CPU time of the calling thread, ns: unlike wall time it is not
/// inflated by other processes on a loaded machine.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// Median CPU ns to reset an arena buffer and copy `len` bytes into it from
/// a 2 KiB frame of a 16 MiB area (the rx path's `copy_out`): frames taken
/// in ring order (`random` false: as the RX ring hands them over, the
/// kernel having just written them) or at random (cache-cold).
fn copy_cost(len: usize, random: bool) -> f64 {
    let umem = vec![0xa5u8; 8192 * 2048];
    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 64);
    let mut hs: Vec<_> = (0..1024).map(|_| cache.alloc().expect("buffer")).collect();
    let mut samples = Vec::new();
    let mut x = 12345u64;
    for _ in 0..15 {
        let n = 1_000_000;
        let t = thread_cpu_ns();
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let frame = if random { x % 8192 } else { (i % 2048) as u64 };
            let src = frame as usize * 2048;
            let mut p = a.pkt(&mut hs[i % 1024]);
            p.reset(len);
            p.data_mut().copy_from_slice(&umem[src..src + len]);
        }
        samples.push((thread_cpu_ns() - t) as f64 / n as f64);
    }
    for h in hs {
        cache.free(h);
    }
    median(&mut samples)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    let rounds: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the AF_XDP bench needs root (veth + BPF)");
        return;
    }
    let _ = Command::new("ip")
        .args(["link", "del", "sxbench0"])
        .status();
    sh(&[
        "ip", "link", "add", "sxbench0", "type", "veth", "peer", "name", "sxbench1",
    ]);
    let _pair = Pair("sxbench0");
    sh(&["ip", "link", "set", "sxbench0", "up"]);
    sh(&["ip", "link", "set", "sxbench1", "up"]);

    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let a = arena();
            let pool = BufferPool::new(a.buffers());
            let mut cache = PoolCache::new(&pool, 256);
            let mut tx = AfXdpPort::open(&AfXdpConfig::new("sxbench1")).expect("sender port");
            let f = frame();
            let mut batch = HandleBatch::new();
            let c = thread_cpu_ns();
            while !stop.load(Ordering::Relaxed) {
                while !batch.is_full() {
                    let Some(mut h) = cache.alloc() else { break };
                    let mut p = a.pkt(&mut h);
                    p.reset(f.len());
                    p.data_mut().copy_from_slice(&f);
                    if let Err(h) = batch.push(h) {
                        cache.free(h);
                        break;
                    }
                }
                let _ = tx.tx_burst(&a, &mut cache, &mut batch);
            }
            batch.drain(|h| cache.free(h));
            (tx.stats().tx_packets, thread_cpu_ns() - c)
        })
    };

    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 256);
    let mut rx = AfXdpPort::open(&AfXdpConfig::new("sxbench0")).expect("measured port");
    eprintln!("{}", rx.describe());
    let mut batch = HandleBatch::new();
    let mut rates = Vec::new();
    let mut cpu = Vec::new();
    let mut work = Vec::new();
    let fd = rx.rx_fd().expect("pollable");
    // Warm-up round, not counted.
    for round in 0..=rounds {
        let start = rx.stats().rx_packets;
        let t = Instant::now();
        let c = thread_cpu_ns();
        let mut busy = Duration::ZERO;
        while t.elapsed() < Duration::from_secs_f64(secs) {
            let b = Instant::now();
            let n = rx.rx_burst(&a, &mut cache, &mut batch, 256).expect("rx");
            batch.drain(|h| cache.free(h));
            if n > 0 {
                busy += b.elapsed();
            } else {
                // Sleep like an idle worker, so CPU time counts work only.
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, 1) };
            }
        }
        let frames = (rx.stats().rx_packets - start) as f64;
        let mpps = frames / t.elapsed().as_secs_f64() / 1e6;
        let ns = (thread_cpu_ns() - c) as f64 / frames.max(1.0);
        let busy_ns = busy.as_nanos() as f64 / frames.max(1.0);
        if round > 0 {
            println!(
                "round {round}: {mpps:.3} Mpps wall, receiver {ns:.0} ns CPU per frame \
                 (with idle wakeups), {busy_ns:.1} ns per frame inside non-empty rx_burst calls"
            );
            rates.push(mpps);
            cpu.push(ns);
            work.push(busy_ns);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (sent, sender_cpu) = sender.join().expect("sender");
    // The sender's thread carries the kernel's work: the sendto wakeups run
    // the veth transmit, the receiving side's native XDP program, the
    // redirect and the kernel's copy into the receiver's UMEM.
    let sender_ns = sender_cpu as f64 / sent.max(1) as f64;
    let s = rx.stats();
    let rx_mpps = median(&mut rates);
    let rx_ns = median(&mut cpu);
    let burst_ns = median(&mut work);
    println!(
        "af_xdp rx 64 B on veth: median {rx_mpps:.3} Mpps wall; receiver {rx_ns:.0} ns CPU per \
         frame with idle wakeups, {burst_ns:.1} ns per frame in rx_burst ({:.1} Mpps per core) \
         over {rounds} × {secs} s (sent {sent}, received {}, dropped {})",
        1e3 / burst_ns,
        s.rx_packets,
        s.rx_dropped
    );
    println!(
        "sender + kernel: {sender_ns:.0} ns CPU per frame sent ({:.2} Mpps per core)",
        1e3 / sender_ns
    );
    let c64 = copy_cost(64, false);
    let c64r = copy_cost(64, true);
    let c1500 = copy_cost(1500, false);
    println!(
        "copy UMEM → arena (CPU time): {c64:.1} ns for 64 B in ring order ({c64r:.1} ns from \
         random frames), {c1500:.1} ns for 1500 B; the 64 B copy is {:.0} % of rx_burst's cost \
         and {:.1} % of the CPU per frame end to end (sender + kernel + receiver)",
        100.0 * c64 / burst_ns,
        100.0 * c64 / (sender_ns + burst_ns)
    );
}
