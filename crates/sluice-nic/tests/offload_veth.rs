//! `offload: true` on real interfaces: GSO super-packets with partial
//! checksums cross a veth pair and a tap whole, with their offload state,
//! in large buffers; a port without offloads refuses them as oversize.
//! Needs root; skips with a message otherwise.

use std::process::Command;

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PoolCache};
use sluice_nic::options::RingVersion;
use sluice_nic::{AfPacketOptions, AfPacketPort, NicPort, TapOptions, TapPort};
use sluice_packet::gso::{Offload, F_NEEDS_CSUM, GSO_TCPV4};
use sluice_packet::{checksum, write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};

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
        let a = format!("so{tag}{}a", std::process::id() % 10000);
        let b = format!("so{tag}{}b", std::process::id() % 10000);
        let _ = Command::new("ip").args(["link", "del", &a]).status();
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        let v = Veth(a, b);
        for n in [&v.0, &v.1] {
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
            ip(&["link", "set", n, "up"]);
        }
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
        buffers: 1024,
        ring_size: 256,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 16,
        ..Default::default()
    })
    .expect("arena")
}

const PAYLOAD: usize = 20_000;
const MSS: u16 = 1400;

/// A TCP super-packet as a stack with TSO hands it out: 20 000 bytes of
/// payload, the pseudo-header sum in the checksum field.
fn super_packet() -> (Vec<u8>, Offload) {
    let spec = FrameSpec {
        src_mac: "02:00:00:00:00:01".parse().unwrap(),
        dst_mac: "02:00:00:00:00:02".parse::<MacAddr>().unwrap(),
        vlan: None,
        src_ip: "10.9.0.1".parse().unwrap(),
        dst_ip: "10.9.0.2".parse().unwrap(),
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: 40_000,
            dst_port: 5201,
            seq: 1000,
            ack: 1,
            flags: TcpFlags::from_bits(0x18),
            window: 1000,
        },
    };
    let payload: Vec<u8> = (0..PAYLOAD).map(|i| (i * 7) as u8).collect();
    let mut f = vec![0u8; PAYLOAD + 100];
    let n = write_frame(&mut f, &spec, &payload).unwrap();
    f.truncate(n);
    let pseudo = checksum::pseudo_header_v4(
        &"10.9.0.1".parse().unwrap(),
        &"10.9.0.2".parse().unwrap(),
        6,
        (n - 34) as u16,
    );
    f[50..52].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
    let o = Offload {
        gso_type: GSO_TCPV4,
        flags: F_NEEDS_CSUM,
        gso_size: MSS,
        csum_start: 34,
        csum_offset: 16,
    };
    (f, o)
}

fn send(port: &mut dyn NicPort, arena: &Arena, cache: &mut PoolCache<'_>, f: &[u8], o: &Offload) {
    let mut h = cache.alloc_large().expect("large buffer");
    let mut p = arena.pkt(&mut h);
    p.reset(f.len());
    p.data_mut().copy_from_slice(f);
    p.set_offload(o);
    let mut b = HandleBatch::new();
    b.push(h).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !b.is_empty() && std::time::Instant::now() < deadline {
        port.tx_burst(arena, cache, &mut b).expect("tx");
    }
    assert!(b.is_empty(), "the interface never took the super-packet");
}

/// Receives until a frame longer than `min_len` arrives (other traffic on
/// a fresh link is ignored) or 2 s pass.
fn receive_big(
    port: &mut dyn NicPort,
    arena: &Arena,
    cache: &mut PoolCache<'_>,
    min_len: usize,
) -> Option<(Vec<u8>, Offload, bool)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline {
        let mut b = HandleBatch::new();
        port.rx_burst(arena, cache, &mut b, 256).expect("rx");
        let mut found = None;
        b.drain(|mut h| {
            let p = arena.pkt(&mut h);
            if p.data().len() > min_len && found.is_none() {
                found = Some((p.data().to_vec(), p.offload(), p.is_large()));
            }
            cache.free(h);
        });
        if found.is_some() {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    None
}

fn assert_same_super_packet(got: Option<(Vec<u8>, Offload, bool)>, f: &[u8], o: &Offload) {
    let (data, off, large) = got.expect("the super-packet arrived whole");
    assert!(large, "a super-packet lands in a large buffer");
    assert_eq!(data.len(), f.len());
    assert_eq!(data, f, "bytes unchanged (checksum still partial)");
    assert!(off.is_gso() && off.needs_csum(), "{off:?}");
    assert_eq!(off.gso_size, o.gso_size);
    assert_eq!(
        (off.csum_start, off.csum_offset),
        (o.csum_start, o.csum_offset)
    );
}

#[test]
fn af_packet_carries_super_packets_whole_across_a_veth_pair() {
    if !privileged() {
        return;
    }
    let veth = Veth::new("g");
    let arena = arena();
    let pool = BufferPool::for_arena(&arena);
    let mut cache = PoolCache::new(&pool, 64);
    let offload = AfPacketOptions {
        offload: true,
        ..AfPacketOptions::default()
    };
    for ring in [RingVersion::V3, RingVersion::V2] {
        let o = AfPacketOptions {
            ring,
            ..offload.clone()
        };
        let mut rx = AfPacketPort::open(&veth.0, &o, 1).expect("rx port");
        let mut plain = AfPacketPort::open(&veth.0, &AfPacketOptions::default(), 1).expect("plain");
        let mut tx = AfPacketPort::open(&veth.1, &o, 1).expect("tx port");
        let (f, off) = super_packet();
        send(&mut tx, &arena, &mut cache, &f, &off);
        assert_eq!(tx.stats().tx_gso, 1);
        assert_same_super_packet(receive_big(&mut rx, &arena, &mut cache, 2000), &f, &off);
        assert_eq!(rx.stats().rx_gso, 1, "{ring:?}");
        // The same frame on a socket without vnet headers: too big.
        assert!(receive_big(&mut plain, &arena, &mut cache, 2000).is_none());
        assert!(plain.stats().rx_oversize >= 1, "{:?}", plain.stats());
    }
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity(), "every buffer back");
}

#[test]
fn tap_carries_super_packets_whole_both_ways() {
    if !privileged() {
        return;
    }
    let name = format!("sotap{}", std::process::id() % 10000);
    let arena = arena();
    let pool = BufferPool::for_arena(&arena);
    let mut cache = PoolCache::new(&pool, 64);
    let mut tap = TapPort::open(
        &name,
        &TapOptions {
            queues: 1,
            offload: true,
        },
    )
    .expect("tap");
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "1");
    let o = AfPacketOptions {
        offload: true,
        ..AfPacketOptions::default()
    };
    let mut kernel_side = AfPacketPort::open(&name, &o, 1).expect("af_packet on the tap");
    let (f, off) = super_packet();
    // sluice → tap → the kernel receives it whole.
    send(&mut tap, &arena, &mut cache, &f, &off);
    assert_same_super_packet(
        receive_big(&mut kernel_side, &arena, &mut cache, 2000),
        &f,
        &off,
    );
    // The kernel transmits on the tap → sluice reads it whole.
    send(&mut kernel_side, &arena, &mut cache, &f, &off);
    assert_same_super_packet(receive_big(&mut tap, &arena, &mut cache, 2000), &f, &off);
    assert_eq!((tap.stats().rx_gso, tap.stats().tx_gso), (1, 1));
    drop(tap);
    drop(kernel_side);
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity());
}
