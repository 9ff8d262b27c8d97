//! Receive rate of an AF_XDP port on veth, 64 B frames (60 B + FCS).
//!
//! `cargo bench -p sluice-nic --bench af_xdp_rx [-- SECONDS_PER_ROUND ROUNDS]`
//! (root). A sender thread blasts frames through a second AF_XDP port on
//! the veth peer; the measured port receives them: the kernel writes each
//! frame into an arena buffer (the UMEM is the arena's buffer region), and
//! `rx_burst` hands the buffer over and refills the fill ring. Prints the
//! rate of each round and the median, with the receiver's CPU per frame
//! inside `rx_burst` (docs/architecture.md, "NIC ports").
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
            let mut tx = AfXdpPort::open(&AfXdpConfig::new("sxbench1"), &a).expect("sender port");
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
            let sent = (tx.stats().tx_packets, thread_cpu_ns() - c);
            tx.release(&mut cache).expect("sender released");
            sent
        })
    };

    let a = arena();
    let pool = BufferPool::new(a.buffers());
    let mut cache = PoolCache::new(&pool, 256);
    let mut rx = AfXdpPort::open(&AfXdpConfig::new("sxbench0"), &a).expect("measured port");
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
}
