//! DPDK port on virtual devices (`--features dpdk`): `net_ring` (loopback),
//! `net_null` (source and sink) and `net_af_packet` on a veth pair (root).
//!
//! EAL is initialised once per process, so every test uses the same
//! `eal_args` and its own device name.
#![cfg(feature = "dpdk")]

mod common;

use std::time::{Duration, Instant};

use common::{frame, is_root, sys_counter, Veth};
use sluice_mem::{Arena, BufferPool, HandleBatch, PoolCache};
use sluice_nic::dpdk::{DpdkConfig, DpdkPort};
use sluice_nic::NicPort;

fn config(name: &str, vdev: &str) -> DpdkConfig {
    let mut c = DpdkConfig::new(name);
    c.vdev = Some(vdev.to_string());
    c.eal_args = [
        "--no-huge",
        "--no-shconf",
        "--no-pci",
        "-m",
        "512",
        "--log-level=lib.eal:error",
    ]
    .map(String::from)
    .to_vec();
    c.descriptors = 512;
    c.mbufs = 4095;
    c
}

fn send(port: &mut DpdkPort, arena: &Arena, cache: &mut PoolCache<'_>, frames: &[Vec<u8>]) {
    let mut batch = HandleBatch::new();
    for f in frames {
        let mut h = cache.alloc().unwrap();
        let mut p = arena.pkt(&mut h);
        p.reset(f.len());
        p.data_mut().copy_from_slice(f);
        batch.push(h).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !batch.is_empty() && Instant::now() < deadline {
        port.tx_burst(arena, cache, &mut batch).unwrap();
    }
    assert!(batch.is_empty(), "the device took every frame");
}

fn receive(
    port: &mut DpdkPort,
    arena: &Arena,
    cache: &mut PoolCache<'_>,
    want: usize,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut batch = HandleBatch::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < want && Instant::now() < deadline {
        if port.rx_burst(arena, cache, &mut batch, 64).unwrap() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        batch.drain(|mut h| {
            got.push(arena.pkt(&mut h).data().to_vec());
            cache.free(h);
        });
    }
    got
}

#[test]
fn net_ring_loops_frames_back_intact() {
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = DpdkPort::open(&config("net_ring0", "")).unwrap();
    let frames: Vec<Vec<u8>> = (0..40u32).map(|i| frame(i, 60 + 37 * i as usize)).collect();
    send(&mut port, &arena, &mut cache, &frames);
    let got = receive(&mut port, &arena, &mut cache, frames.len());
    assert_eq!(got, frames);
    let s = port.stats();
    let bytes: u64 = frames.iter().map(|f| f.len() as u64).sum();
    assert_eq!(
        (s.tx_packets, s.tx_bytes, s.rx_packets, s.rx_bytes),
        (40, bytes, 40, bytes)
    );
    let d = port.device_stats().unwrap();
    assert_eq!((d[0], d[1]), (40, 40), "device counters agree");
    drop(port);
    assert_eq!(pool.audit().free, pool.capacity(), "no buffer leaked");
}

#[test]
fn net_null_is_a_source_of_sized_frames_and_a_counting_sink() {
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = DpdkPort::open(&config("net_null0", "size=64")).unwrap();
    let mut batch = HandleBatch::new();
    let n = port.rx_burst(&arena, &mut cache, &mut batch, 32).unwrap();
    assert_eq!(n, 32, "net_null always has frames");
    batch.drain(|mut h| {
        assert_eq!(arena.pkt(&mut h).len(), 64);
        cache.free(h);
    });
    send(&mut port, &arena, &mut cache, &vec![frame(1, 100); 20]);
    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.tx_bytes), (32, 20, 2000));
    assert_eq!(port.device_stats().unwrap()[1], 20);
}

#[test]
fn oversize_and_empty_frames_are_refused_and_counted() {
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let mut port = DpdkPort::open(&config("net_null1", "")).unwrap();
    let mut batch = HandleBatch::new();
    for len in [0usize, 2048, 60] {
        let mut h = cache.alloc().unwrap();
        arena.pkt(&mut h).reset(len);
        batch.push(h).unwrap();
    }
    assert_eq!(port.tx_burst(&arena, &mut cache, &mut batch).unwrap(), 3);
    let s = port.stats();
    assert_eq!((s.tx_packets, s.tx_errors), (1, 2));
}

#[test]
fn unknown_devices_say_what_to_do() {
    let e = DpdkPort::open(&DpdkConfig {
        vdev: None,
        ..config("0000:99:00.0", "")
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("no such DPDK device") && e.contains("vdev"),
        "{e}"
    );
    let e = DpdkPort::open(&config("bogus0", ""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("creating virtual device `bogus0`"), "{e}");
}

#[test]
fn different_eal_args_are_refused() {
    // Make sure EAL is up with the common arguments first.
    drop(DpdkPort::open(&config("net_null2", "")).unwrap());
    let mut c = config("net_null3", "");
    c.eal_args.push("--no-hpet".into());
    let e = DpdkPort::open(&c).unwrap_err().to_string();
    assert!(e.contains("same eal_args"), "{e}");
}

#[test]
fn net_af_packet_on_veth_exchanges_frames_with_the_peer() {
    if !is_root() {
        eprintln!("skipped: net_af_packet on veth needs root");
        return;
    }
    let veth = Veth::new("dp");
    let arena = common::arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 32);
    let name = "net_af_packet0";
    let mut port = DpdkPort::open(&config(name, &format!("iface={}", veth.inside))).unwrap();
    let rx0 = sys_counter(&veth.inside, "rx_packets");
    let tx0 = sys_counter(&veth.inside, "tx_packets");
    let peer = veth.peer_socket();
    let frames: Vec<Vec<u8>> = (0..30u32).map(|i| frame(i, 60)).collect();
    for f in &frames {
        peer.send(f);
    }
    assert_eq!(receive(&mut port, &arena, &mut cache, 30), frames);
    let back: Vec<Vec<u8>> = (0..20u32).map(|i| frame(500 + i, 200)).collect();
    send(&mut port, &arena, &mut cache, &back);
    assert_eq!(peer.recv_incoming(20, Duration::from_secs(10)), back);
    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets), (30, 20));
    assert_eq!(sys_counter(&veth.inside, "rx_packets") - rx0, 30);
    assert_eq!(sys_counter(&veth.inside, "tx_packets") - tx0, 20);
}

#[test]
fn a_virtual_device_its_driver_refuses_is_reported_with_dpdks_reason() {
    // net_null takes `copy` and `no-rx`, but not both: it says so in its
    // log, which the error carries, and no port is left behind.
    let e = DpdkPort::open(&config("net_null9", "copy=1,no-rx=1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`net_null9,copy=1,no-rx=1`"), "{e}");
    assert!(e.contains("(DPDK: "), "DPDK's own words: {e}");
    assert!(!e.contains("no such DPDK device"), "{e}");
    // The name is free again: the same device with good arguments opens.
    let p = DpdkPort::open(&config("net_null9", "copy=1"));
    assert!(p.is_ok(), "{:?}", p.err().map(|e| e.to_string()));
}
