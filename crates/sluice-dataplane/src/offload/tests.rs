//! Cutting and completing at a port's edges, over a real arena: order,
//! budgets, accounting and the named drops of bad offload state.

use std::collections::VecDeque;

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PoolCache, DATA_ROOM};
use sluice_nic::{NicError, NicPort, NicStats};
use sluice_packet::gso::{Offload, F_NEEDS_CSUM, GSO_TCPV4};
use sluice_packet::{checksum, parse, verify_checksums, write_frame};
use sluice_packet::{FrameSpec, L4Spec, MacAddr, TcpFlags};

use super::*;

fn arena() -> Arena {
    Arena::create(ArenaConfig {
        buffers: 512,
        ring_size: 64,
        nf_slots: 1,
        workers: 1,
        hugepages: false,
        large_buffers: 8,
        ..Default::default()
    })
    .unwrap()
}

fn frame(tcp: bool, payload: usize) -> Vec<u8> {
    let l4 = if tcp {
        L4Spec::Tcp {
            src_port: 1,
            dst_port: 2,
            seq: 7,
            ack: 9,
            flags: TcpFlags::from_bits(0x18),
            window: 100,
        }
    } else {
        L4Spec::Udp {
            src_port: 1,
            dst_port: 2,
        }
    };
    let spec = FrameSpec {
        src_mac: "02:00:00:00:00:01".parse().unwrap(),
        dst_mac: MacAddr::BROADCAST,
        vlan: None,
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        ttl: 64,
        l4,
    };
    let body: Vec<u8> = (0..payload).map(|i| i as u8).collect();
    let mut f = vec![0u8; payload + 100];
    let n = write_frame(&mut f, &spec, &body).unwrap();
    f.truncate(n);
    f
}

/// `f` as a stack with checksum offload hands it out: the transport
/// checksum field holds the pseudo-header sum only.
fn partial(mut f: Vec<u8>, gso_size: u16) -> (Vec<u8>, Offload) {
    let tcp = f[23] == 6;
    let at = 34 + if tcp { 16 } else { 6 };
    let pseudo = checksum::pseudo_header_v4(
        &"10.0.0.1".parse().unwrap(),
        &"10.0.0.2".parse().unwrap(),
        f[23],
        (f.len() - 34) as u16,
    );
    f[at..at + 2].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
    let o = Offload {
        gso_type: if gso_size > 0 { GSO_TCPV4 } else { 0 },
        flags: F_NEEDS_CSUM,
        gso_size,
        csum_start: 34,
        csum_offset: (at - 34) as u16,
    };
    (f, o)
}

fn load(arena: &Arena, cache: &mut PoolCache<'_>, f: &[u8], o: &Offload) -> PktHandle {
    let mut h = if f.len() > DATA_ROOM {
        cache.alloc_large().unwrap()
    } else {
        cache.alloc().unwrap()
    };
    let mut p = arena.pkt(&mut h);
    p.reset(f.len());
    p.data_mut().copy_from_slice(f);
    p.set_offload(o);
    h
}

#[test]
fn transmit_cuts_completes_and_names_what_it_refuses() {
    let a = arena();
    let pool = BufferPool::for_arena(&a);
    let mut cache = PoolCache::new(&pool, 32);
    let mut off = PortOffload::default();
    configure(&mut off, (false, true));
    let plain = frame(false, 30);
    let (udp, udp_o) = partial(frame(false, 500), 0);
    let (tcp, tcp_o) = partial(frame(true, 10_000), 1000);
    let bad = Offload {
        gso_size: 0,
        ..tcp_o
    };
    let mut b = HandleBatch::new();
    for (f, o) in [
        (&plain, Offload::NONE),
        (&udp, udp_o),
        (&tcp, tcp_o),
        (&tcp, bad),
        (&plain, Offload::NONE),
    ] {
        b.push(load(&a, &mut cache, f, &o)).unwrap();
    }
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let mut st = OffloadStats::default();
    let lost = off.tx(&a, &mut b, &mut cache, &mut st, |out, cache| {
        out.drain(|mut h| {
            let p = a.pkt(&mut h);
            assert!(!p.has_offload(), "only plain frames leave");
            sent.push(p.data().to_vec());
            cache.free(h);
        });
        0
    });
    assert_eq!(lost, 1, "the super-packet with gso_size 0");
    assert_eq!(st.offload_drops.0[GsoError::GsoSizeZero.index()], 1);
    assert_eq!(sent.len(), 1 + 1 + 10 + 1);
    assert_eq!(sent[0], plain);
    assert_eq!(sent[12], plain, "order kept");
    for f in &sent[1..12] {
        verify_checksums(f, &parse(f).unwrap()).expect("valid checksums");
    }
    let payload: Vec<u8> = sent[2..12].iter().flat_map(|s| s[54..].to_vec()).collect();
    assert_eq!(payload, tcp[54..]);
    assert_eq!(
        (st.gso_split, st.gso_segments, st.checksums_completed),
        (1, 9, 1)
    );
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity());
}

/// A NIC that hands out prepared frames with their offload state.
struct FakeNic(VecDeque<(Vec<u8>, Offload)>);

impl NicPort for FakeNic {
    fn kind(&self) -> &'static str {
        "fake"
    }
    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError> {
        let mut n = 0;
        while n < max {
            let Some((f, o)) = self.0.pop_front() else {
                break;
            };
            out.push(load(arena, cache, &f, &o)).unwrap();
            n += 1;
        }
        Ok(n)
    }
    fn tx_burst(
        &mut self,
        _: &Arena,
        _: &mut PoolCache<'_>,
        _: &mut HandleBatch,
    ) -> Result<usize, NicError> {
        Ok(0)
    }
    fn offloads(&self) -> bool {
        true
    }
    fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    fn stats(&self) -> NicStats {
        NicStats::default()
    }
}

#[test]
fn receive_cuts_within_the_budget_and_keeps_order() {
    let a = arena();
    let pool = BufferPool::for_arena(&a);
    let mut cache = PoolCache::new(&pool, 32);
    let mut off = PortOffload::default();
    configure(&mut off, (true, false));
    let first = frame(false, 10);
    let (tcp, tcp_o) = partial(frame(true, 6_000), 1000);
    let (udp, udp_o) = partial(frame(false, 300), 0);
    let mut nic = FakeNic(
        [
            (first.clone(), Offload::NONE),
            (tcp.clone(), tcp_o),
            (udp, udp_o),
        ]
        .into(),
    );
    let mut st = OffloadStats::default();
    let mut got = Vec::new();
    for _ in 0..10 {
        let mut out = HandleBatch::new();
        let n = off
            .rx(&mut nic, &a, &mut cache, &mut out, 4, &mut st)
            .unwrap();
        assert!(n <= 4, "the budget holds");
        out.drain(|mut h| {
            let p = a.pkt(&mut h);
            assert!(!p.has_offload());
            got.push(p.data().to_vec());
            cache.free(h);
        });
    }
    assert_eq!(got.len(), 1 + 6 + 1);
    assert_eq!(got[0], first);
    for f in &got[1..] {
        verify_checksums(f, &parse(f).unwrap()).expect("valid checksums");
    }
    assert_eq!(got[7][23], 17, "the UDP frame comes after every segment");
    assert_eq!((st.gso_split, st.checksums_completed), (1, 1));
    assert!(!off.holds_packets());
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity());
}

#[test]
fn a_port_holding_a_super_packet_frees_it_on_release() {
    let a = arena();
    let pool = BufferPool::for_arena(&a);
    let mut cache = PoolCache::new(&pool, 32);
    let mut off = PortOffload::default();
    configure(&mut off, (true, false));
    let (tcp, tcp_o) = partial(frame(true, 6_000), 1000);
    let mut nic = FakeNic([(tcp, tcp_o)].into());
    let mut st = OffloadStats::default();
    let mut out = HandleBatch::new();
    assert_eq!(
        off.rx(&mut nic, &a, &mut cache, &mut out, 2, &mut st)
            .unwrap(),
        2
    );
    assert!(off.holds_packets());
    out.drain(|h| cache.free(h));
    off.release(&mut cache);
    drop(cache);
    assert_eq!(pool.audit().free, pool.capacity(), "nothing leaked");
}
