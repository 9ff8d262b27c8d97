//! AF_XDP port on a veth pair whose far end lives in a network namespace.
//!
//! Needs root (CAP_NET_ADMIN + CAP_BPF + CAP_SYS_ADMIN for namespaces);
//! every test skips with a message otherwise. Namespaces and interfaces are
//! removed by a guard, also when a test fails.
#![allow(unsafe_code)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{frame, is_root, link_show, sys_counter, xdp_detached, Veth};
use sluice_mem::{Arena, BufferPool, HandleBatch, PoolCache};
use sluice_nic::af_xdp::{AfXdpConfig, AfXdpPort, XdpModeChoice};
use sluice_nic::NicPort;

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipped: AF_XDP tests need root (veth, netns, BPF); run as root");
            return;
        }
    };
}

fn receive(
    port: &mut AfXdpPort,
    arena: &Arena,
    cache: &mut PoolCache<'_>,
    want: usize,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut batch = HandleBatch::new();
    while got.len() < want && Instant::now() < deadline {
        let n = port.rx_burst(arena, cache, &mut batch, 64).unwrap();
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        batch.drain(|mut h| {
            got.push(arena.pkt(&mut h).data().to_vec());
            cache.free(h);
        });
    }
    got
}

/// Gives the kernel its receive buffers (the port does on its first poll),
/// so frames sent next find room.
fn prime(port: &mut AfXdpPort, arena: &Arena, cache: &mut PoolCache<'_>) {
    let mut batch = HandleBatch::new();
    assert_eq!(port.rx_burst(arena, cache, &mut batch, 64).unwrap(), 0);
    assert_eq!(port.stats().held % 2048, 0, "full fill rings");
    assert!(port.stats().held > 0);
}

#[test]
fn frames_cross_in_both_directions_and_counters_match_the_kernel() {
    require_root!();
    let veth = Veth::new("rt");
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena).unwrap();
    prime(&mut port, &arena, &mut cache);
    eprintln!("{}", port.describe());
    // veth: native XDP, and the kernel copies (no zero-copy driver).
    assert_eq!(port.mode().as_deref(), Some("native XDP, copy"));
    let rx0 = sys_counter(&veth.inside, "rx_packets");
    let tx0 = sys_counter(&veth.inside, "tx_packets");

    // Peer → port.
    let peer = veth.peer_socket();
    let sent: Vec<Vec<u8>> = (0..100u32).map(|i| frame(i, 60)).collect();
    for f in &sent {
        peer.send(f);
    }
    let got = receive(&mut port, &arena, &mut cache, sent.len());
    assert_eq!(got, sent, "frames arrive intact and in order");

    // Port → peer, with a mix of sizes.
    let back: Vec<Vec<u8>> = (0..50u32)
        .map(|i| frame(1000 + i, 60 + 20 * i as usize))
        .collect();
    let mut batch = HandleBatch::new();
    for f in &back {
        let mut h = cache.alloc().unwrap();
        let mut p = arena.pkt(&mut h);
        p.reset(f.len());
        p.data_mut().copy_from_slice(f);
        batch.push(h).unwrap();
    }
    let mut removed = 0;
    while !batch.is_empty() {
        removed += port.tx_burst(&arena, &mut cache, &mut batch).unwrap();
    }
    assert_eq!(removed, back.len());
    let echoed = peer.recv_incoming(back.len(), Duration::from_secs(10));
    assert_eq!(echoed, back, "transmitted frames reach the peer intact");

    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (100, 50));
    assert_eq!(s.rx_bytes, 100 * 60);
    assert_eq!(s.tx_bytes, back.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!((s.rx_dropped, s.rx_oversize, s.tx_errors), (0, 0, 0));
    assert_eq!(sys_counter(&veth.inside, "rx_packets") - rx0, s.rx_packets);
    assert_eq!(sys_counter(&veth.inside, "tx_packets") - tx0, s.tx_packets);
    // Received frames are the arena buffers the kernel wrote: no copy.
    assert!(
        s.held >= 2048,
        "the fill ring, and sent frames not yet reaped"
    );
    port.release(&mut cache).unwrap();
    let after = port.stats();
    assert_eq!(
        (after.held, after.rx_packets, after.tx_packets),
        (0, 100, 50)
    );
    let mut none = HandleBatch::new();
    assert_eq!(port.rx_burst(&arena, &mut cache, &mut none, 64).unwrap(), 0);
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity(), "no buffer leaked");
}

#[test]
fn an_exhausted_pool_shortens_the_fill_ring_and_the_kernel_counts_what_found_no_buffer() {
    require_root!();
    let veth = Veth::new("ex");
    let arena = common::arena();
    // A pool of 16 buffers for 40 frames: the fill ring gets all 16.
    let pool = BufferPool::new(16);
    let mut cache = PoolCache::new(&pool, 4);
    let mut port = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena).unwrap();
    let mut batch = HandleBatch::new();
    assert_eq!(
        port.rx_burst(&arena, &mut cache, &mut batch, 64).unwrap(),
        0
    );
    assert_eq!(port.stats().held, 16);
    assert!(cache.alloc().is_none(), "every buffer is on the fill ring");
    let peer = veth.peer_socket();
    let sent: Vec<Vec<u8>> = (0..40u32).map(|i| frame(i, 60)).collect();
    for f in &sent {
        peer.send(f);
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let dropped = loop {
        let n = port.rx_burst(&arena, &mut cache, &mut batch, 64).unwrap();
        assert!(n <= 16, "never more frames than buffers");
        // The frames are held (not freed): the pool stays dry.
        std::thread::sleep(Duration::from_millis(2));
        let d = port.stats().rx_dropped;
        if batch.len() + d as usize >= sent.len() || Instant::now() > deadline {
            break d;
        }
    };
    // The first 16 arrived in order; the kernel dropped and counted the
    // rest, and the fill ring stayed empty while the pool was dry.
    batch.drain(|mut h| {
        got.push(arena.pkt(&mut h).data().to_vec());
        cache.free(h);
    });
    assert_eq!(got, sent[..16].to_vec());
    assert_eq!(
        dropped, 24,
        "what found no buffer is counted, not lost silently"
    );
    // Buffers back in the pool: the next poll refills and frames flow again.
    assert_eq!(
        port.rx_burst(&arena, &mut cache, &mut batch, 64).unwrap(),
        0
    );
    assert_eq!(port.stats().held, 16);
    let more: Vec<Vec<u8>> = (100..105u32).map(|i| frame(i, 60)).collect();
    for f in &more {
        peer.send(f);
    }
    assert_eq!(receive(&mut port, &arena, &mut cache, 5), more);
    port.release(&mut cache).unwrap();
    drop(cache);
    assert_eq!(pool.audit().free, 16, "no buffer leaked");
}

#[test]
fn a_port_closed_under_load_gives_every_buffer_back() {
    require_root!();
    let veth = Veth::new("cl");
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena).unwrap();
    prime(&mut port, &arena, &mut cache);
    // The peer keeps sending while the port receives, transmits (so
    // frames are in flight on the TX ring) and is then closed.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let blaster = {
        let stop = stop.clone();
        let peer = veth.peer_socket();
        std::thread::spawn(move || {
            let f = frame(7, 60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if !peer.try_send(&f) {
                    std::thread::yield_now();
                }
            }
        })
    };
    let mut batch = HandleBatch::new();
    let mut echoed = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        port.rx_burst(&arena, &mut cache, &mut batch, 64).unwrap();
        echoed += port.tx_burst(&arena, &mut cache, &mut batch).unwrap();
    }
    let s = port.stats();
    assert!(s.rx_packets > 0 && echoed > 0, "traffic flowed: {s:?}");
    port.release(&mut cache).unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    blaster.join().unwrap();
    batch.drain(|h| cache.free(h));
    assert_eq!(port.stats().held, 0);
    drop(cache);
    let a = pool.audit();
    assert_eq!(
        (a.free, a.platform, a.at_nfs),
        (pool.capacity(), 0, 0),
        "every buffer the kernel held is back"
    );
    let (gone, out) = xdp_detached(&veth.inside);
    assert!(gone, "detached on release: {out}");
}

#[test]
fn frames_longer_than_the_mtu_are_refused_and_counted() {
    require_root!();
    let veth = Veth::new("mt");
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena).unwrap();
    let peer = veth.peer_socket();
    let tx0 = sys_counter(&veth.inside, "tx_packets");
    let mut batch = HandleBatch::new();
    // MTU 1500: 1518 B (with a VLAN tag's room) fits, 1600 B and 0 B do not.
    for len in [1600usize, 0, 1514] {
        let f = frame(len as u32, len.max(18));
        let mut h = cache.alloc().unwrap();
        let mut p = arena.pkt(&mut h);
        p.reset(len);
        let n = p.data().len();
        p.data_mut().copy_from_slice(&f[..n]);
        batch.push(h).unwrap();
    }
    assert_eq!(port.tx_burst(&arena, &mut cache, &mut batch).unwrap(), 3);
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_errors), (1, 2));
    assert_eq!(
        peer.recv_incoming(1, Duration::from_secs(10)),
        vec![frame(1514, 1514)]
    );
    assert_eq!(sys_counter(&veth.inside, "tx_packets") - tx0, 1);
}

#[test]
fn dropping_the_port_detaches_the_program() {
    require_root!();
    let veth = Veth::new("dr");
    let port = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &common::arena()).unwrap();
    assert!(
        link_show(&veth.inside).contains("prog/xdp"),
        "attached while open"
    );
    drop(port);
    let (gone, out) = xdp_detached(&veth.inside);
    assert!(gone, "still attached after drop: {out}");
}

#[test]
fn generic_mode_is_reported_when_asked_for() {
    require_root!();
    let veth = Veth::new("gm");
    let mut c = AfXdpConfig::new(&veth.inside);
    c.xdp_mode = XdpModeChoice::Generic;
    let port = AfXdpPort::open(&c, &common::arena()).unwrap();
    assert_eq!(port.xdp_mode().as_str(), "generic");
    assert_eq!(port.mode().as_deref(), Some("generic XDP, copy"));
    assert!(link_show(&veth.inside).contains("xdpgeneric"));
}

#[test]
fn a_second_port_on_the_same_interface_is_refused_clearly() {
    require_root!();
    let veth = Veth::new("bz");
    let arena = common::arena();
    let _first = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena).unwrap();
    let e = AfXdpPort::open(&AfXdpConfig::new(&veth.inside), &arena)
        .err()
        .expect("second port must fail")
        .to_string();
    assert!(e.contains(&veth.inside) && e.contains("already"), "{e}");
}

#[test]
fn a_queue_the_interface_lacks_is_refused_clearly() {
    require_root!();
    let veth = Veth::new("mq");
    let mut c = AfXdpConfig::new(&veth.inside);
    c.queues = 4;
    let e = AfXdpPort::open(&c, &common::arena())
        .err()
        .expect("veth has one queue")
        .to_string();
    assert!(e.contains("queue 1") && e.contains("lower `queues`"), "{e}");
    let (gone, out) = xdp_detached(&veth.inside);
    assert!(gone, "left attached after a failed open: {out}");
}

#[test]
fn a_missing_interface_says_what_to_do() {
    // Needs no privilege: the lookup comes first.
    let e = AfXdpPort::open(&AfXdpConfig::new("sluice-nope0"), &common::arena())
        .err()
        .expect("no such interface")
        .to_string();
    assert!(
        e.contains("sluice-nope0") && e.contains("no such interface"),
        "{e}"
    );
}

#[test]
fn a_driver_without_native_xdp_is_refused_in_native_mode_and_works_in_auto() {
    require_root!();
    let veth = Veth::new("lo");
    // The namespace's loopback has no native XDP; opening happens in a
    // thread inside the namespace, where `lo` is that namespace's own.
    let (native, auto) = veth.in_namespace(|| {
        let mut c = AfXdpConfig::new("lo");
        c.xdp_mode = XdpModeChoice::Native;
        let arena = common::arena();
        let native = AfXdpPort::open(&c, &arena).err().map(|e| e.to_string());
        let auto = AfXdpPort::open(&AfXdpConfig::new("lo"), &arena).map(|p| p.xdp_mode().as_str());
        (native, auto.map_err(|e| e.to_string()))
    });
    let native = native.expect("lo has no native XDP");
    assert!(
        native.contains("no native XDP support") && native.contains("xdp_mode: generic"),
        "{native}"
    );
    assert_eq!(auto.unwrap(), "generic", "auto falls back to generic");
}

#[test]
fn two_queues_share_one_pollable_descriptor_and_receive_everything() {
    require_root!();
    let veth = Veth::with_queues("q2", 2);
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut c = AfXdpConfig::new(&veth.inside);
    c.queues = 2;
    let mut port = AfXdpPort::open(&c, &arena).unwrap();
    prime(&mut port, &arena, &mut cache);
    assert!(port.describe().contains("2 queue(s)"));
    let fd = port.rx_fd().unwrap();
    let peer = veth.peer_socket();
    let sent: Vec<Vec<u8>> = (0..200u32).map(|i| frame(i, 64)).collect();
    for f in &sent {
        peer.send(f);
    }
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(ready, 1, "the port's descriptor signals input");
    let mut got = receive(&mut port, &arena, &mut cache, sent.len());
    got.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(sys_counter(&veth.inside, "rx_packets"), 200);
}

const PRIV_ENV: &str = "SLUICE_XDP_TEST_UNPRIV_IF";

/// Not a test on its own: run without privileges by
/// `unprivileged_open_says_to_run_as_root`.
#[test]
fn child_opens_without_privilege() {
    let Ok(ifname) = std::env::var(PRIV_ENV) else {
        return;
    };
    match AfXdpPort::open(&AfXdpConfig::new(&ifname), &common::arena()) {
        Ok(_) => println!("RESULT: opened"),
        Err(e) => println!("RESULT: {e}"),
    }
}

#[test]
fn unprivileged_open_says_to_run_as_root() {
    require_root!();
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs setpriv (util-linux) to drop privileges");
        return;
    }
    let veth = Veth::new("np");
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child_opens_without_privilege", "--nocapture"])
        .env(PRIV_ENV, &veth.inside)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.split_once("RESULT: ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("child printed no result: {text}"));
    assert!(
        line.contains("run sluice as root") && line.contains("CAP_BPF"),
        "{line}"
    );
    let (gone, out) = xdp_detached(&veth.inside);
    assert!(gone, "left attached after a failed open: {out}");
}

const CHILD_ENV: &str = "SLUICE_XDP_TEST_CHILD_IF";

/// Not a test on its own: the SIGKILL test re-runs this binary with only
/// this function and `SLUICE_XDP_TEST_CHILD_IF` set, so it opens a port and
/// waits to be killed.
#[test]
fn child_holds_a_port_until_killed() {
    let Ok(ifname) = std::env::var(CHILD_ENV) else {
        return;
    };
    let _port = AfXdpPort::open(&AfXdpConfig::new(&ifname), &common::arena()).unwrap();
    println!("READY");
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn sigkill_leaves_no_program_attached() {
    require_root!();
    let veth = Veth::new("kl");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holds_a_port_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &veth.inside)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.any(|l| l.map(|l| l.contains("READY")).unwrap_or(false));
    if !ready {
        let _ = child.kill();
        let _ = child.wait();
        panic!("child did not open the port");
    }
    assert!(
        link_show(&veth.inside).contains("prog/xdp"),
        "child attached it"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (gone, out) = xdp_detached(&veth.inside);
    assert!(gone, "still attached after SIGKILL: {out}");
}
