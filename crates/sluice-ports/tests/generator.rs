//! Behaviour of the traffic generator: frames parse and verify with
//! sluice-packet, TCP life cycle, size mixes, rate limiting, tuples.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use sluice_packet::ip::IpProtocol;
use sluice_packet::tcp::TcpSegment;
use sluice_packet::{flow_key, parse, verify_checksums, FlowKey, Headers, TcpFlags};
use sluice_ports::generator::{DATACENTER_FRAME_LENS, MAX_FRAME_LEN};
use sluice_ports::{Generator, GeneratorConfig, IpVersionChoice, Protocol, SizeSpec, Stamp};

fn cfg(protocol: Protocol, ip_version: IpVersionChoice, size: SizeSpec) -> GeneratorConfig {
    let v6 = ip_version == IpVersionChoice::V6;
    GeneratorConfig {
        flows: 37,
        protocol,
        ip_version,
        size,
        packets_per_flow: 6,
        src_prefix: if v6 { "2001:db8:1::/48" } else { "10.0.0.0/16" }
            .parse()
            .unwrap(),
        dst_prefix: if v6 {
            "2001:db8:2::/64"
        } else {
            "192.168.0.0/24"
        }
        .parse()
        .unwrap(),
        ..GeneratorConfig::default()
    }
}

/// Everything one generated frame must satisfy, whatever the mode.
fn check_frame(f: &[u8], now: u64) -> (Headers, Option<Stamp>) {
    let h = parse(f).unwrap_or_else(|e| panic!("parse failed: {e} on {f:02x?}"));
    verify_checksums(f, &h).unwrap_or_else(|e| panic!("checksum: {e} on {f:02x?}"));
    assert!(h.ip_version == 4 || h.ip_version == 6);
    assert!(h.l4_protocol == IpProtocol::UDP || h.l4_protocol == IpProtocol::TCP);
    // No link padding: the frame is exactly the IP packet.
    assert_eq!(
        usize::from(h.payload_offset) + usize::from(h.payload_len),
        f.len()
    );
    let payload = &f[usize::from(h.payload_offset)..];
    let stamp = Stamp::read(payload);
    if payload.len() >= Stamp::LEN {
        let s = stamp.expect("frames with room carry a stamp");
        assert_eq!(s.timestamp_ns, now);
        assert!(payload[Stamp::LEN..].iter().all(|&b| b == 0));
    } else {
        assert!(payload.iter().all(|&b| b == 0));
    }
    (h, stamp)
}

#[test]
fn every_mode_emits_valid_frames() {
    let protos = [Protocol::Udp, Protocol::Tcp, Protocol::Mixed];
    let versions = [
        IpVersionChoice::V4,
        IpVersionChoice::V6,
        IpVersionChoice::Mixed,
    ];
    let sizes = [
        SizeSpec::Fixed(0),
        SizeSpec::Fixed(64),
        SizeSpec::Fixed(129),
        SizeSpec::Fixed(1514),
        SizeSpec::Fixed(MAX_FRAME_LEN as u16),
        SizeSpec::Imix,
        SizeSpec::Datacenter,
    ];
    let mut buf = vec![0xa5u8; MAX_FRAME_LEN];
    for p in protos {
        for v in versions {
            for s in sizes {
                let mut g = Generator::new(cfg(p, v, s)).unwrap();
                let mut kinds = HashSet::new();
                let mut next_seq: HashMap<u32, u64> = HashMap::new();
                for i in 0..600u64 {
                    let now = 1_000_000 + i * 7;
                    // Stale bytes from a previous, longer frame must not leak.
                    buf.fill(0xa5);
                    let n = g.write_next(&mut buf, now);
                    assert!(n > 0 && n <= MAX_FRAME_LEN);
                    let (h, stamp) = check_frame(&buf[..n], now);
                    kinds.insert((h.ip_version, h.l4_protocol));
                    if let SizeSpec::Fixed(want) = s {
                        // Fixed sizes are raised to headers + stamp.
                        let min = usize::from(h.payload_offset) + Stamp::LEN;
                        assert_eq!(n, usize::from(want).max(min), "{p:?} {v:?} {s:?}");
                        assert!(stamp.is_some());
                    }
                    if let Some(st) = stamp {
                        let e = next_seq.entry(st.flow).or_insert(0);
                        assert!(st.seq >= *e, "per-flow stamp sequence goes up");
                        *e = st.seq + 1;
                    }
                }
                let want_kinds = match (p, v) {
                    (Protocol::Mixed, IpVersionChoice::Mixed) => 4,
                    (Protocol::Mixed, _) | (_, IpVersionChoice::Mixed) => 2,
                    _ => 1,
                };
                assert_eq!(kinds.len(), want_kinds, "{p:?} {v:?} {s:?}: {kinds:?}");
                let st = g.stats();
                assert_eq!(st.packets, 600);
            }
        }
    }
}

#[test]
fn fixed_64_sizes_per_kind() {
    // 64 B is below headers + stamp for every kind: raised to the minimum.
    let mut buf = [0u8; MAX_FRAME_LEN];
    for (p, v, want) in [
        (Protocol::Udp, IpVersionChoice::V4, 66),
        (Protocol::Tcp, IpVersionChoice::V4, 78),
        (Protocol::Udp, IpVersionChoice::V6, 86),
        (Protocol::Tcp, IpVersionChoice::V6, 98),
    ] {
        let mut g = Generator::new(cfg(p, v, SizeSpec::Fixed(64))).unwrap();
        assert_eq!(g.write_next(&mut buf, 1), want);
    }
}

#[test]
fn imix_is_7_4_1_over_a_long_run_and_small_frames_are_unstamped() {
    let mut g = Generator::new(cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Imix)).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut counts: HashMap<usize, u64> = HashMap::new();
    let total = 240_000u64;
    for i in 0..total {
        let n = g.write_next(&mut buf, i);
        if n == 60 {
            // 60 B IPv4/UDP has an 18-byte payload: no room for a stamp.
            let h = parse(&buf[..n]).unwrap();
            assert_eq!(Stamp::read(&buf[usize::from(h.payload_offset)..n]), None);
        }
        *counts.entry(n).or_default() += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    for (len, weight) in [(60, 7.0), (566, 4.0), (1514, 1.0)] {
        let got = counts[&len] as f64;
        let want = total as f64 * weight / 12.0;
        assert!(
            (got - want).abs() < want * 0.02,
            "len {len}: {got} vs {want} ({counts:?})"
        );
    }
    let bytes: u64 = counts.iter().map(|(l, c)| *l as u64 * c).sum();
    assert_eq!(g.stats().bytes, bytes);
}

#[test]
fn datacenter_is_bimodal() {
    let mut g = Generator::new(cfg(
        Protocol::Udp,
        IpVersionChoice::V4,
        SizeSpec::Datacenter,
    ))
    .unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let (mut small, mut large) = (0u32, 0u32);
    let mut seen = HashSet::new();
    for i in 0..20_000 {
        let n = g.write_next(&mut buf, i);
        assert!(DATACENTER_FRAME_LENS.contains(&(n as u16)));
        seen.insert(n);
        if n < 700 {
            assert!((150..=250).contains(&n));
            small += 1;
        } else {
            assert!((1350..=1450).contains(&n));
            large += 1;
        }
    }
    assert_eq!(seen.len(), 8);
    assert!((f64::from(small) / f64::from(large) - 1.0).abs() < 0.05);
}

#[test]
fn tcp_connections_syn_data_fin_then_new_port() {
    let mut c = cfg(Protocol::Tcp, IpVersionChoice::V4, SizeSpec::Imix);
    c.flows = 3;
    c.packets_per_flow = 5;
    let mut g = Generator::new(c).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    // Per slot: list of (src_port, seq, flags, payload_len, ack).
    type Seg = (u16, u32, TcpFlags, u32, u32);
    let mut per_slot: Vec<Vec<Seg>> = vec![Vec::new(); 3];
    for i in 0..3 * 5 * 4 {
        let n = g.write_next(&mut buf, i);
        let h = parse(&buf[..n]).unwrap();
        verify_checksums(&buf[..n], &h).unwrap();
        let t = TcpSegment::new_checked(&buf[usize::from(h.l4_offset)..n]).unwrap();
        per_slot[(i % 3) as usize].push((
            t.src_port(),
            t.seq(),
            t.flags(),
            u32::from(h.payload_len),
            t.ack(),
        ));
    }
    for segs in &per_slot {
        let mut ports = Vec::new();
        for conn in segs.chunks(5) {
            assert_eq!(conn.len(), 5);
            let port = conn[0].0;
            assert!(conn.iter().all(|s| s.0 == port), "one port per connection");
            ports.push(port);
            assert_eq!(conn[0].2, TcpFlags::SYN);
            assert_eq!(conn[0].4, 0, "SYN has ack 0");
            for s in &conn[1..4] {
                assert_eq!(s.2, TcpFlags::ACK | TcpFlags::PSH);
                assert_ne!(s.4, 0);
            }
            assert_eq!(conn[4].2, TcpFlags::FIN | TcpFlags::ACK);
            // SYN consumes payload + 1, data its payload.
            assert_eq!(conn[1].1, conn[0].1.wrapping_add(conn[0].3 + 1));
            for w in conn[1..].windows(2) {
                assert_eq!(w[1].1, w[0].1.wrapping_add(w[0].3));
            }
        }
        // Every connection of the slot uses a new source port.
        let distinct: HashSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    }
    let st = g.stats();
    assert_eq!(st.flows_opened, 12);
    assert_eq!(st.flows_closed, 12);
}

#[test]
fn tcp_packets_per_flow_zero_never_closes_and_udp_is_long_lived() {
    let mut c = cfg(Protocol::Mixed, IpVersionChoice::V4, SizeSpec::Fixed(100));
    c.flows = 4;
    c.packets_per_flow = 0;
    let mut g = Generator::new(c).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut keys = HashSet::new();
    for i in 0..400 {
        let n = g.write_next(&mut buf, i);
        keys.insert(flow_key(&buf[..n]).unwrap());
    }
    assert_eq!(keys.len(), 4);
    let st = g.stats();
    assert_eq!((st.flows_opened, st.flows_closed), (4, 0));
}

#[test]
fn tuples_are_distinct_within_ranges_and_deterministic() {
    let mut c = cfg(Protocol::Mixed, IpVersionChoice::V4, SizeSpec::Fixed(64));
    c.flows = 2000;
    c.src_ports = (5000, 7999);
    c.dst_ports = (80, 90);
    let mut buf = [0u8; MAX_FRAME_LEN];
    let mut first_pass = |c: &GeneratorConfig| {
        let mut g = Generator::new(c.clone()).unwrap();
        let mut keys = Vec::new();
        let mut frames = Vec::new();
        for i in 0..c.flows as u64 {
            let n = g.write_next(&mut buf, i);
            keys.push(flow_key(&buf[..n]).unwrap());
            frames.push(buf[..n].to_vec());
        }
        (keys, frames)
    };
    let (keys, frames) = first_pass(&c);
    let distinct: HashSet<FlowKey> = keys.iter().copied().collect();
    assert_eq!(distinct.len(), 2000);
    let src_net: ipnet::IpNet = c.src_prefix;
    let dst_net: ipnet::IpNet = c.dst_prefix;
    for k in &keys {
        assert!(src_net.contains(&k.src_ip()));
        assert!(dst_net.contains(&k.dst_ip()));
        assert!((5000..=7999).contains(&k.src_port));
        assert!((80..=90).contains(&k.dst_port));
    }
    assert_eq!(first_pass(&c).1, frames, "same seed, same frames");
    c.seed ^= 1;
    assert_ne!(first_pass(&c).1, frames, "another seed, other tuples");
}

#[test]
fn mixed_versions_embed_v4_hosts_in_nat64_prefix() {
    let mut c = cfg(Protocol::Udp, IpVersionChoice::Mixed, SizeSpec::Fixed(64));
    c.flows = 4;
    let mut g = Generator::new(c.clone()).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let nat64: ipnet::Ipv6Net = "64:ff9b::/96".parse().unwrap();
    for i in 0..4 {
        let n = g.write_next(&mut buf, i);
        let k = flow_key(&buf[..n]).unwrap();
        match (i % 2, k.src_ip(), k.dst_ip()) {
            (0, IpAddr::V4(s), IpAddr::V4(_)) => assert!(c.src_prefix.contains(&IpAddr::V4(s))),
            (1, IpAddr::V6(s), IpAddr::V6(d)) => {
                assert!(nat64.contains(&s) && nat64.contains(&d));
                let v4 = std::net::Ipv4Addr::from_bits(s.to_bits() as u32);
                assert!(c.src_prefix.contains(&IpAddr::V4(v4)));
            }
            other => panic!("flow {i}: unexpected {other:?}"),
        }
    }
}

#[test]
fn rate_limit_gives_the_right_count_in_simulated_time() {
    let mut c = cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64));
    c.rate_pps = Some(250_000);
    let mut g = Generator::new(c).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    let start = 7_000_000_000u64;
    let mut now = start;
    let mut sent = 0u64;
    // Poll every 37 us for 2 s, at most 32 packets per poll.
    while now <= start + 2_000_000_000 {
        let due = g.due(now, 32);
        for _ in 0..due {
            assert!(g.write_next(&mut buf, now) > 0);
        }
        sent += due as u64;
        now += 37_000;
    }
    // 250k/s over 2 s, plus the first packet at t = 0; the last poll may be
    // up to one poll interval short of 2 s.
    let want = 500_000.0;
    assert!(
        (sent as f64 - want).abs() <= 250_000.0 * 37e-6 + 1.0,
        "{sent}"
    );

    // Unlimited: due gives max.
    let mut u =
        Generator::new(cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64))).unwrap();
    assert_eq!(u.due(0, 64), 64);
}

#[test]
fn count_and_duration_end_the_run() {
    let mut c = cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64));
    c.count = Some(100);
    let mut g = Generator::new(c).unwrap();
    let mut buf = [0u8; MAX_FRAME_LEN];
    assert_eq!(g.due(0, 1000), 100);
    for _ in 0..100 {
        assert!(g.write_next(&mut buf, 0) > 0);
    }
    assert!(g.is_finished(0));
    assert_eq!(g.due(1, 1000), 0);
    assert_eq!(g.write_next(&mut buf, 1), 0);
    assert_eq!(g.stats().packets, 100);

    let mut c = cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64));
    c.duration_ns = Some(1_000_000);
    c.rate_pps = Some(1_000_000);
    let mut g = Generator::new(c).unwrap();
    let mut now = 500;
    let mut sent = 0;
    while !g.is_finished(now) {
        for _ in 0..g.due(now, 1 << 20) {
            g.write_next(&mut buf, now);
            sent += 1;
        }
        now += 1000;
    }
    assert_eq!(now, 500 + 1_000_000);
    assert_eq!(g.due(now, 10), 0);
    // 1 Mpps for 1 ms: 1000 packets (plus the initial token).
    assert!((1000..=1001).contains(&sent), "{sent}");
}

#[test]
fn small_buffer_writes_nothing() {
    let mut g = Generator::new(cfg(
        Protocol::Udp,
        IpVersionChoice::V4,
        SizeSpec::Fixed(1000),
    ))
    .unwrap();
    let mut small = [0u8; 999];
    assert_eq!(g.write_next(&mut small, 0), 0);
    let mut g64 =
        Generator::new(cfg(Protocol::Udp, IpVersionChoice::V4, SizeSpec::Fixed(64))).unwrap();
    assert_eq!(
        g64.write_next(&mut [0u8; 127], 0),
        0,
        "needs the 128-byte work area"
    );
    assert_eq!(g64.write_next(&mut [0u8; 128], 0), 66);
    assert_eq!(g.stats().packets, 0);
    let mut buf = [0u8; MAX_FRAME_LEN];
    assert_eq!(g.write_next(&mut buf, 0), 1000);
}

#[test]
fn shards_together_send_exactly_the_unsharded_flows_rate_and_count() {
    use sluice_ports::{ConfigError, Shard};
    let mut c = cfg(Protocol::Tcp, IpVersionChoice::V4, SizeSpec::Fixed(64));
    c.flows = 37;
    c.count = Some(1001);
    c.rate_pps = Some(999);
    let mut buf = [0u8; MAX_FRAME_LEN];
    // Every packet of the unsharded generator, by flow stamp.
    let run = |c: &GeneratorConfig| {
        let mut g = Generator::new(c.clone()).unwrap();
        let mut by_flow: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
        let mut buf = [0u8; MAX_FRAME_LEN];
        // Simulated time: ten seconds at 1 ms steps drains the count.
        for t in 0..10_000u64 {
            let now = 1_000_000_000 + t * 1_000_000;
            for _ in 0..g.due(now, 64) {
                let n = g.write_next(&mut buf, now);
                let (_, stamp) = check_frame(&buf[..n], now);
                // The stamp's time, and so the TCP checksum, differ per run.
                let mut frame = buf[..n - Stamp::LEN].to_vec();
                frame[50..52].fill(0);
                by_flow.entry(stamp.unwrap().flow).or_default().push(frame);
            }
        }
        (g.stats().packets, by_flow)
    };
    let (total, whole) = run(&c);
    assert_eq!(total, 1001);
    let mut merged: HashMap<u32, Vec<Vec<u8>>> = HashMap::new();
    let mut sum = 0;
    for index in 0..3 {
        let mut s = c.clone();
        s.shard = Shard { index, count: 3 };
        let g = Generator::new(s.clone()).unwrap();
        assert_eq!(g.flows(), if index == 0 { 13 } else { 12 });
        let (n, flows) = run(&s);
        assert!(
            flows.keys().all(|f| f % 3 == index),
            "shard owns slots i % 3"
        );
        sum += n;
        for (f, frames) in flows {
            assert!(merged.insert(f, frames).is_none(), "a flow in two shards");
        }
    }
    assert_eq!(sum, 1001, "shard counts add up to the total");
    // Per flow, the shard sends the same frames in the same order as the
    // unsharded generator sends for that flow (up to the count's cut-off).
    for (f, frames) in &merged {
        let w = &whole[f];
        let n = frames.len().min(w.len());
        assert_eq!(frames[..n], w[..n], "flow {f}");
    }
    // Proportional rates add up too.
    for (total, flows) in [(999u64, 37u32), (7, 3), (1_000_000, 64)] {
        let parts: u64 = (0..3)
            .map(|index| Shard { index, count: 3 }.part_of(total, flows))
            .sum();
        assert_eq!(parts, total);
    }
    for bad in [
        Shard { index: 3, count: 3 },
        Shard { index: 0, count: 0 },
        Shard {
            index: 0,
            count: 38,
        },
    ] {
        let mut s = c.clone();
        s.shard = bad;
        assert_eq!(Generator::new(s).unwrap_err(), ConfigError::BadShard(bad));
    }
    let _ = &mut buf;
}
