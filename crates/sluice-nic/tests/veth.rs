//! AF_PACKET and TAP ports on real interfaces (a veth pair, a tap). Needs
//! root; skips with a message otherwise. Interfaces are removed by Drop
//! guards even when an assertion fails.

use std::process::Command;

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PoolCache};
use sluice_nic::options::RingVersion;
use sluice_nic::{AfPacketOptions, AfPacketPort, NicPort, TapOptions, TapPort};

fn privileged() -> bool {
    if sluice_nic::has_net_caps() {
        return true;
    }
    eprintln!("skipping: needs root (CAP_NET_RAW and CAP_NET_ADMIN) to create interfaces");
    false
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// A veth pair, deleted on drop.
struct Veth(String, String);

impl Veth {
    fn new(tag: &str) -> Veth {
        let a = format!("sn{tag}{}a", std::process::id() % 10000);
        let b = format!("sn{tag}{}b", std::process::id() % 10000);
        let _ = Command::new("ip").args(["link", "del", &a]).status();
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        let v = Veth(a, b);
        // No IPv6 autoconf chatter on the test link: off before it is up.
        for n in [&v.0, &v.1] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
        }
        ip(&["link", "set", &v.0, "up"]);
        ip(&["link", "set", &v.1, "up"]);
        v
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

fn arena() -> Arena {
    Arena::create(ArenaConfig {
        buffers: 4096,
        ring_size: 256,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 0,
        ..Default::default()
    })
    .expect("arena")
}

/// A UDP frame with a distinct payload byte.
fn frame(i: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1000u16.to_be_bytes());
    f[36..38].copy_from_slice(&2000u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f[59] = i;
    f
}

fn fill(arena: &Arena, cache: &mut PoolCache<'_>, frames: &[Vec<u8>]) -> HandleBatch {
    let mut b = HandleBatch::new();
    for f in frames {
        let mut h = cache.alloc().expect("buffer");
        let mut p = arena.pkt(&mut h);
        p.reset(f.len());
        p.data_mut().copy_from_slice(f);
        b.push(h).expect("room");
    }
    b
}

/// Receives until `want` frames arrived or 2 s passed; returns their bytes.
fn receive(
    port: &mut dyn NicPort,
    arena: &Arena,
    cache: &mut PoolCache<'_>,
    want: usize,
) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while got.len() < want && std::time::Instant::now() < deadline {
        let mut b = HandleBatch::new();
        port.rx_burst(arena, cache, &mut b, 256).expect("rx");
        b.drain(|mut h| {
            got.push(arena.pkt(&mut h).data().to_vec());
            cache.free(h);
        });
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    got
}

#[test]
fn af_packet_moves_frames_across_a_veth_pair_and_ignores_its_own() {
    moves_frames(RingVersion::V3, "p");
}

#[test]
fn af_packet_v2_ring_moves_frames_too() {
    moves_frames(RingVersion::V2, "q");
}

fn moves_frames(ring: RingVersion, tag: &str) {
    if !privileged() {
        return;
    }
    let veth = Veth::new(tag);
    let arena = arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 64);
    let o = AfPacketOptions {
        ring,
        ..AfPacketOptions::default()
    };
    let mut a = AfPacketPort::open(&veth.0, &o, 1).expect("open a");
    let mut b = AfPacketPort::open(&veth.1, &o, 1).expect("open b");
    let kernel = |n: &str, c: &str| -> u64 {
        std::fs::read_to_string(format!("/sys/class/net/{n}/statistics/{c}"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (tx0, rx0) = (kernel(&veth.0, "tx_packets"), kernel(&veth.1, "rx_packets"));
    let frames: Vec<Vec<u8>> = (0..100u8).map(frame).collect();
    let mut batch = fill(&arena, &mut cache, &frames);
    let mut sent = 0;
    while !batch.is_empty() {
        sent += a.tx_burst(&arena, &mut cache, &mut batch).expect("tx");
    }
    assert_eq!(sent, 100);
    let got = receive(&mut b, &arena, &mut cache, 100);
    assert_eq!(got, frames, "b receives exactly what a sent, in order");
    // a sent them, so a must not read them back (PACKET_IGNORE_OUTGOING).
    assert!(receive(&mut a, &arena, &mut cache, 1).is_empty());
    let sa = a.stats();
    let sb = b.stats();
    assert_eq!((sa.tx_packets, sa.tx_bytes, sa.tx_errors), (100, 6000, 0));
    assert_eq!((sb.rx_packets, sb.rx_bytes, sb.rx_dropped), (100, 6000, 0));
    // The kernel saw the same on the interfaces.
    assert_eq!(kernel(&veth.0, "tx_packets") - tx0, 100);
    assert_eq!(kernel(&veth.1, "rx_packets") - rx0, 100);
    drop(batch);
    assert!(cache.cached() > 0);
}

#[test]
fn af_packet_fanout_queues_share_the_traffic() {
    if !privileged() {
        return;
    }
    let veth = Veth::new("f");
    let arena = arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 64);
    let mut a = AfPacketPort::open(&veth.0, &AfPacketOptions::default(), 1).expect("open a");
    let o = AfPacketOptions {
        queues: 4,
        ..AfPacketOptions::default()
    };
    let mut b = AfPacketPort::open(&veth.1, &o, 1).expect("open b with fanout");
    assert!(b.rx_fd().is_some());
    let frames: Vec<Vec<u8>> = (0..50u8).map(frame).collect();
    let mut batch = fill(&arena, &mut cache, &frames);
    while !batch.is_empty() {
        a.tx_burst(&arena, &mut cache, &mut batch).expect("tx");
    }
    let mut got = receive(&mut b, &arena, &mut cache, 50);
    got.sort();
    let mut want = frames.clone();
    want.sort();
    assert_eq!(
        got, want,
        "every frame arrives once across the fanout group"
    );
}

#[test]
fn missing_interfaces_are_reported_clearly() {
    let e = AfPacketPort::open("sluice-nope0", &AfPacketOptions::default(), 1)
        .err()
        .expect("no such interface");
    assert!(e.0.contains("`sluice-nope0` does not exist"), "{e}");
}

#[test]
fn tap_port_exchanges_frames_and_vanishes_on_close() {
    if !privileged() {
        return;
    }
    let name = format!("sntap{}", std::process::id() % 10000);
    let arena = arena();
    let pool = BufferPool::new(arena.buffers());
    let mut cache = PoolCache::new(&pool, 64);
    let mut tap = TapPort::open(&name, &TapOptions::default()).expect("create tap");
    assert!(std::path::Path::new(&format!("/sys/class/net/{name}")).exists());
    let again = TapPort::open(&name, &TapOptions::default())
        .err()
        .expect("duplicate");
    assert!(again.0.contains("already exists"), "{again}");
    // Frames written to the tap arrive on the interface (the kernel's
    // rx counter), frames the kernel sends out come back to us.
    let mut sock =
        AfPacketPort::open(&name, &AfPacketOptions::default(), 1).expect("af_packet on tap");
    let frames: Vec<Vec<u8>> = (0..10u8).map(frame).collect();
    let mut batch = fill(&arena, &mut cache, &frames);
    while !batch.is_empty() {
        tap.tx_burst(&arena, &mut cache, &mut batch)
            .expect("tap tx");
    }
    let seen = receive(&mut sock, &arena, &mut cache, 10);
    assert_eq!(seen, frames);
    let mut batch = fill(&arena, &mut cache, &frames);
    while !batch.is_empty() {
        sock.tx_burst(&arena, &mut cache, &mut batch)
            .expect("sock tx");
    }
    let back: Vec<Vec<u8>> = receive(&mut tap, &arena, &mut cache, 10)
        .into_iter()
        .filter(|f| f.len() == 60 && f[23] == 17)
        .collect();
    assert_eq!(back, frames);
    assert_eq!(tap.stats().tx_packets, 10);
    drop(sock);
    drop(tap);
    assert!(
        !std::path::Path::new(&format!("/sys/class/net/{name}")).exists(),
        "the tap disappears with its port"
    );
}
