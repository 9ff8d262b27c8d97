//! `flow_monitor`: records, timeouts and IPFIX export, checked by a
//! collector in the test that decodes every message with its own decoder
//! (written from RFC 7011, sharing no code with the NF), and by tshark.

mod common;
use common::*;

use std::collections::HashMap;
use std::net::{IpAddr, UdpSocket};
use std::time::Duration;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;
use sluice_nfs::flow_monitor::exporter::ExportConfig;
use sluice_nfs::flow_monitor::table::Timeouts;
use sluice_nfs::flow_monitor::{FlowMonitor, Settings};
use sluice_packet::{L4Spec, TcpFlags};

const S: u64 = 1_000_000_000;
/// The harness clock starts at 1 s; with a zero epoch offset record times
/// are harness ms.
const T0: u64 = 1_000_000_000;

// ---------------------------------------------------------------- decoder

#[derive(Debug, Clone)]
struct Message {
    version: u16,
    length: u16,
    export_time: u32,
    sequence: u32,
    domain: u32,
    /// (template id, [(ie, len)]) in order of appearance.
    templates: Vec<(u16, Vec<(u16, u16)>)>,
    /// Data records: template id and IE → value bytes.
    records: Vec<(u16, HashMap<u16, Vec<u8>>)>,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
fn uint(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| a << 8 | u64::from(x))
}

/// Decodes one IPFIX message, learning templates into `known`. Panics on
/// anything RFC 7011 does not allow.
fn decode(m: &[u8], known: &mut HashMap<u16, Vec<(u16, u16)>>) -> Message {
    assert!(m.len() >= 16, "short message");
    let mut msg = Message {
        version: be16(&m[0..]),
        length: be16(&m[2..]),
        export_time: be32(&m[4..]),
        sequence: be32(&m[8..]),
        domain: be32(&m[12..]),
        templates: vec![],
        records: vec![],
    };
    assert_eq!(usize::from(msg.length), m.len(), "length field");
    let mut off = 16;
    while off < m.len() {
        assert!(off + 4 <= m.len(), "truncated set header");
        let (id, len) = (be16(&m[off..]), usize::from(be16(&m[off + 2..])));
        assert!(len >= 4 && off + len <= m.len(), "set length {len}");
        let body = &m[off + 4..off + len];
        match id {
            2 => {
                let mut p = 0;
                while p + 4 <= body.len() {
                    let (tid, n) = (be16(&body[p..]), usize::from(be16(&body[p + 2..])));
                    assert!(tid >= 256, "template id {tid}");
                    p += 4;
                    let mut fields = vec![];
                    for _ in 0..n {
                        let (ie, l) = (be16(&body[p..]), be16(&body[p + 2..]));
                        assert_eq!(ie & 0x8000, 0, "no enterprise fields expected");
                        fields.push((ie, l));
                        p += 4;
                    }
                    known.insert(tid, fields.clone());
                    msg.templates.push((tid, fields));
                }
                assert_eq!(p, body.len(), "template set padding");
            }
            256.. => {
                let fields = known.get(&id).expect("data set before its template");
                let rlen: usize = fields.iter().map(|f| usize::from(f.1)).sum();
                assert_eq!(body.len() % rlen, 0, "data set holds whole records");
                for r in body.chunks(rlen) {
                    let mut vals = HashMap::new();
                    let mut p = 0;
                    for &(ie, l) in fields {
                        vals.insert(ie, r[p..p + usize::from(l)].to_vec());
                        p += usize::from(l);
                    }
                    msg.records.push((id, vals));
                }
            }
            _ => panic!("unexpected set id {id}"),
        }
        off += len;
    }
    msg
}

/// A decoded flow record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    proto: u8,
    flags: u16,
    octets: u64,
    packets: u64,
    start: u64,
    end: u64,
    reason: u8,
}

fn rec(v: &HashMap<u16, Vec<u8>>) -> Rec {
    let addr = |ie4: u16, ie6: u16| -> IpAddr {
        if let Some(b) = v.get(&ie4) {
            IpAddr::from(<[u8; 4]>::try_from(b.as_slice()).unwrap())
        } else {
            IpAddr::from(<[u8; 16]>::try_from(v[&ie6].as_slice()).unwrap())
        }
    };
    assert_eq!(v.len(), 11, "every template field is present");
    Rec {
        src: addr(8, 27),
        dst: addr(12, 28),
        sport: uint(&v[&7]) as u16,
        dport: uint(&v[&11]) as u16,
        proto: uint(&v[&4]) as u8,
        flags: uint(&v[&6]) as u16,
        octets: uint(&v[&1]),
        packets: uint(&v[&2]),
        start: uint(&v[&152]),
        end: uint(&v[&153]),
        reason: uint(&v[&136]) as u8,
    }
}

struct Collector {
    sock: UdpSocket,
    known: HashMap<u16, Vec<(u16, u16)>>,
    raw: Vec<Vec<u8>>,
}

impl Collector {
    fn new() -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Collector {
            sock,
            known: HashMap::new(),
            raw: vec![],
        }
    }
    fn port(&self) -> u16 {
        self.sock.local_addr().unwrap().port()
    }
    /// Every message received so far (loopback delivers before send returns,
    /// so a short timeout only marks the end).
    fn messages(&mut self) -> Vec<Message> {
        let mut out = vec![];
        let mut buf = [0u8; 65536];
        while let Ok(n) = self.sock.recv(&mut buf) {
            self.raw.push(buf[..n].to_vec());
            out.push(decode(&buf[..n], &mut self.known));
        }
        out
    }
}

// ---------------------------------------------------------------- setup

fn settings(port: u16, mtu: u16) -> Settings {
    Settings {
        export: ExportConfig {
            collector: format!("127.0.0.1:{port}").parse().unwrap(),
            domain_id: 4242,
            mtu,
            template_refresh_ns: 600 * S,
        },
        timeouts: Timeouts {
            active_ns: 60 * S,
            idle_ns: 15 * S,
        },
        scan_interval_ns: S,
    }
}

fn monitor(c: &Collector, mtu: u16) -> FlowMonitor {
    FlowMonitor::new(settings(c.port(), mtu), FLOW_CAPACITY, 0).unwrap()
}

fn tcp_flags(
    src: &str,
    sport: u16,
    dst: &str,
    dport: u16,
    flags: TcpFlags,
    payload: &[u8],
) -> Vec<u8> {
    frame(
        src,
        dst,
        L4Spec::Tcp {
            src_port: sport,
            dst_port: dport,
            seq: 1,
            ack: 0,
            flags,
            window: 512,
        },
        payload,
    )
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ctr(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("flow_monitor", name))
}

// ---------------------------------------------------------------- tests

#[test]
fn descriptor_and_config_errors() {
    let t = nf_type("flow_monitor");
    assert!(t.drop_reasons.is_empty());
    assert_eq!(
        &t.counters[..4],
        [
            "records_exported",
            "messages_sent",
            "export_errors",
            "flows_active"
        ]
    );
    let e = build_err("flow_monitor", json!(null));
    assert!(e.to_string().contains("collector"), "{e}");
    let e = build_err("flow_monitor", json!({ "collector": "no-port" }));
    assert!(
        e.to_string().contains("cannot resolve collector `no-port`"),
        "{e}"
    );
    let e = build_err(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "mtu": 100 }),
    );
    assert!(e.to_string().contains("mtu 100 is too small"), "{e}");
    let e = build_err(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "idle_timeout": 0 }),
    );
    assert!(e.to_string().contains("idle_timeout 0 must be"), "{e}");
    let e = build_err(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "bogus": 1 }),
    );
    assert!(e.to_string().contains("bogus"), "{e}");
    build(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "observation_domain_id": 7 }),
    );
}

#[test]
fn tcp_control_bits_include_ns_and_the_reserved_bits() {
    // RFC 7125: tcpControlBits carries bytes 12-13 of the TCP header without
    // the data offset, so NS (0x100) and the three reserved bits are
    // reported, not only the eight classic flags.
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    let syn = tcp_flags("10.0.0.1", 40000, "10.0.0.2", 80, TcpFlags::SYN, b"");
    let mut ns_ack = tcp_flags("10.0.0.1", 40000, "10.0.0.2", 80, TcpFlags::ACK, b"x");
    // Byte 12 of the TCP header (after 14 B Ethernet + 20 B IPv4): data
    // offset 5, reserved bit 0x2 and NS set.
    assert_eq!(ns_ack[46], 0x50);
    ns_ack[46] = 0x53;
    h.run(&mut nf, &[syn.clone(), ns_ack]);
    let id = h.flow_id_of(&syn).unwrap();
    h.end_flow(&mut nf, id);
    nf.on_tick(T0 + 1_000_000);
    let msgs = col.messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].records.len(), 1);
    assert_eq!(rec(&msgs[0].records[0].1).flags, 0x0312);
}

#[test]
fn tcp_flow_end_exports_both_directions_with_every_field() {
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    let c2s = [
        tcp_flags("10.0.0.1", 40000, "10.0.0.2", 80, TcpFlags::SYN, b""),
        tcp_flags(
            "10.0.0.1",
            40000,
            "10.0.0.2",
            80,
            TcpFlags::ACK,
            b"GET / HTTP/1.0\r\n\r\n",
        ),
        tcp_flags(
            "10.0.0.1",
            40000,
            "10.0.0.2",
            80,
            TcpFlags::from_bits(0x11),
            b"",
        ),
    ];
    let s2c = tcp_flags(
        "10.0.0.2",
        80,
        "10.0.0.1",
        40000,
        TcpFlags::from_bits(0x12),
        b"hello",
    );
    let out = h.run(&mut nf, &[c2s[0].clone()]);
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[0].frame, c2s[0]);
    h.set_now_ns(T0 + 2_500_000);
    h.run(&mut nf, std::slice::from_ref(&s2c));
    h.set_now_ns(T0 + 7_000_000);
    h.run(&mut nf, &c2s[1..]);
    assert_eq!(ctr(&h, "flows_active"), 1);
    assert_eq!(ctr(&h, "packets"), 4);
    // Nothing is sent per packet.
    assert!(col.messages().is_empty());

    let id = h.flow_id_of(&c2s[0]).unwrap();
    h.end_flow(&mut nf, id);
    assert_eq!(ctr(&h, "flows_active"), 0);
    nf.on_tick(T0 + 8 * 1_000_000);
    let msgs = col.messages();
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!((m.version, m.sequence, m.domain), (10, 0, 4242));
    assert_eq!(
        m.export_time, 1,
        "export time is harness seconds with a zero offset"
    );
    let tids: Vec<u16> = m.templates.iter().map(|t| t.0).collect();
    assert_eq!(tids, [256, 257]);
    let v4: Vec<u16> = m.templates[0].1.iter().map(|f| f.0).collect();
    assert_eq!(v4, [8, 12, 7, 11, 4, 6, 1, 2, 152, 153, 136]);
    let v6: Vec<u16> = m.templates[1].1.iter().map(|f| f.0).collect();
    assert_eq!(v6, [27, 28, 7, 11, 4, 6, 1, 2, 152, 153, 136]);
    assert_eq!(m.records.len(), 2);
    let ip_len = |f: &Vec<u8>| (f.len() - 14) as u64;
    let mut recs: Vec<Rec> = m.records.iter().map(|r| rec(&r.1)).collect();
    recs.sort_by_key(|r| r.sport);
    assert_eq!(
        recs[0],
        Rec {
            src: ip("10.0.0.2"),
            dst: ip("10.0.0.1"),
            sport: 80,
            dport: 40000,
            proto: 6,
            flags: 0x12,
            octets: ip_len(&s2c),
            packets: 1,
            start: 1002,
            end: 1002,
            reason: 3,
        }
    );
    assert_eq!(
        recs[1],
        Rec {
            src: ip("10.0.0.1"),
            dst: ip("10.0.0.2"),
            sport: 40000,
            dport: 80,
            proto: 6,
            flags: 0x13,
            octets: c2s.iter().map(ip_len).sum(),
            packets: 3,
            start: 1000,
            end: 1007,
            reason: 3,
        }
    );
    let s = nf.stats();
    assert_eq!(
        (
            s.records_exported,
            s.messages_sent,
            s.export_errors,
            s.templates_sent
        ),
        (2, 1, 0, 1)
    );
}

#[test]
fn idle_timeout_ends_an_ipv6_flow_and_link_padding_is_not_counted() {
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    let mut f = udp("2001:db8::1", 5353, "2001:db8::2", 53);
    let ip_bytes = (f.len() - 14) as u64;
    f.extend_from_slice(&[0; 6]); // Ethernet trailer
    h.run(&mut nf, &[f.clone(), f.clone()]);
    nf.on_tick(T0 + 14 * S);
    assert!(col.messages().iter().all(|m| m.records.is_empty()));
    assert_eq!(nf.flows_active(), 1);
    nf.on_tick(T0 + 15 * S);
    let msgs = col.messages();
    let recs: Vec<Rec> = msgs
        .iter()
        .flat_map(|m| m.records.iter().map(|r| rec(&r.1)))
        .collect();
    assert_eq!(
        recs,
        [Rec {
            src: ip("2001:db8::1"),
            dst: ip("2001:db8::2"),
            sport: 5353,
            dport: 53,
            proto: 17,
            flags: 0,
            octets: 2 * ip_bytes,
            packets: 2,
            start: 1000,
            end: 1000,
            reason: 1,
        }]
    );
    assert_eq!(msgs.last().unwrap().records[0].0, 257);
    assert_eq!(nf.flows_active(), 0);
}

#[test]
fn active_timeout_reports_partial_records_and_the_flow_goes_on() {
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    let f = udp("10.0.0.1", 1, "10.0.0.2", 2);
    let l = (f.len() - 14) as u64;
    for t in [0, 10, 20, 30, 40, 50] {
        h.set_now_ns(T0 + t * S);
        h.run(&mut nf, std::slice::from_ref(&f));
        nf.on_tick(T0 + t * S);
    }
    nf.on_tick(T0 + 60 * S);
    h.set_now_ns(T0 + 61 * S);
    h.run(&mut nf, &[f.clone(), f.clone()]);
    nf.on_tick(T0 + 62 * S);
    nf.on_stop(T0 + 63 * S);
    let msgs = col.messages();
    let recs: Vec<Rec> = msgs
        .iter()
        .flat_map(|m| m.records.iter().map(|r| rec(&r.1)))
        .collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(
        (
            recs[0].packets,
            recs[0].octets,
            recs[0].start,
            recs[0].end,
            recs[0].reason
        ),
        (6, 6 * l, 1000, 51_000, 2)
    );
    assert_eq!(
        (
            recs[1].packets,
            recs[1].octets,
            recs[1].start,
            recs[1].end,
            recs[1].reason
        ),
        (2, 2 * l, 62_000, 62_000, 4)
    );
    // Sequence numbers count data records sent before each message.
    let mut seq = 0;
    for m in &msgs {
        assert_eq!(m.sequence, seq);
        seq += m.records.len() as u32;
    }
}

#[test]
fn messages_stay_within_the_mtu_and_templates_refresh() {
    let mut col = Collector::new();
    let mtu = 400;
    let mut nf = monitor(&col, mtu);
    let mut h = Harness::new();
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| {
            if i % 2 == 0 {
                udp("10.0.0.1", 1000 + i, "10.0.0.2", 53)
            } else {
                udp("2001:db8::1", 1000 + i, "2001:db8::2", 53)
            }
        })
        .collect();
    h.run(&mut nf, &frames);
    for f in &frames {
        let id = h.flow_id_of(f).unwrap();
        h.end_flow(&mut nf, id);
    }
    nf.on_tick(T0 + S);
    let msgs = col.messages();
    assert!(msgs.len() > 1);
    assert!(col.raw.iter().all(|m| m.len() <= usize::from(mtu) - 28));
    let mut seq = 0;
    let mut ports = vec![];
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.sequence, seq);
        assert_eq!(
            m.templates.is_empty(),
            i > 0,
            "templates only in the first message"
        );
        seq += m.records.len() as u32;
        ports.extend(m.records.iter().map(|r| rec(&r.1).sport));
    }
    ports.sort();
    assert_eq!(ports, (1000..1040).collect::<Vec<_>>());
    assert_eq!(nf.stats().records_exported, 40);
    assert_eq!(nf.stats().messages_sent, msgs.len() as u64);

    // Before the refresh time a tick sends nothing; at it, templates alone.
    nf.on_tick(T0 + 300 * S);
    assert!(col.messages().is_empty());
    nf.on_tick(T0 + 601 * S);
    let msgs = col.messages();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].templates.len(), 2);
    assert!(msgs[0].records.is_empty());
    assert_eq!(msgs[0].sequence, 40);
}

#[test]
fn non_ip_passes_and_malformed_drops() {
    let col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    let mut bad = udp("10.0.0.1", 1, "10.0.0.2", 2);
    bad[14] = 0x4f; // IHL 60 bytes > packet
    let out = h.run(&mut nf, &[arp(), bad]);
    assert_eq!(out[0].verdict, Verdict::Next);
    assert!(matches!(out[1].verdict, Verdict::Drop(_)));
    assert_eq!(ctr(&h, "non_ip"), 1);
    assert_eq!(ctr(&h, "packets"), 0);
    assert_eq!(nf.flows_active(), 0);
}

#[test]
fn export_errors_are_counted_when_the_collector_is_gone() {
    let col = Collector::new();
    let mut nf = monitor(&col, 1500);
    drop(col);
    let mut h = Harness::new();
    h.run(&mut nf, &[udp("10.0.0.1", 1, "10.0.0.2", 2)]);
    // The first send gets the ICMP port unreachable back; the next reports it.
    for t in 1..4 {
        nf.on_tick(T0 + 600 * t * S);
    }
    assert!(nf.stats().export_errors >= 1, "{:?}", nf.stats());
}

/// Writes the messages as Ethernet/IPv4/UDP frames in a pcap and asks
/// tshark to decode them as IPFIX: no malformed packets, no expert
/// warnings, and the fields as sent.
#[test]
fn tshark_decodes_the_messages_as_ipfix() {
    if std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_err()
    {
        eprintln!("SKIP: tshark is not installed");
        return;
    }
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    let mut h = Harness::new();
    h.run(
        &mut nf,
        &[
            tcp_flags("10.0.0.1", 40000, "10.0.0.2", 80, TcpFlags::SYN, b""),
            udp("2001:db8::1", 5353, "2001:db8::2", 53),
        ],
    );
    nf.on_stop(T0 + S);
    col.messages();
    assert_eq!(col.raw.len(), 1);
    let dir = std::env::temp_dir().join(format!("flowmon-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("ipfix.pcap");
    let mut file = vec![];
    file.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    file.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    file.extend_from_slice(&65535u32.to_le_bytes());
    file.extend_from_slice(&1u32.to_le_bytes());
    for m in &col.raw {
        let f = frame(
            "192.0.2.1",
            "192.0.2.2",
            L4Spec::Udp {
                src_port: 50000,
                dst_port: 4739,
            },
            m,
        );
        file.extend_from_slice(&[0; 8]);
        file.extend_from_slice(&(f.len() as u32).to_le_bytes());
        file.extend_from_slice(&(f.len() as u32).to_le_bytes());
        file.extend_from_slice(&f);
    }
    std::fs::write(&pcap, file).unwrap();
    let out = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-d",
            "udp.port==4739,cflow",
            "-V",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Version: 10"), "{text}");
    assert!(text.contains("Observation Domain Id: 4242"), "{text}");
    assert!(!text.contains("Malformed"), "{text}");
    assert!(!text.contains("Expert Info"), "{text}");
    for needle in [
        "SrcAddr: 10.0.0.1",
        "DstAddr: 10.0.0.2",
        "SrcPort: 40000",
        "DstPort: 80",
        "SrcAddr: 2001:db8::1",
        "DstPort: 53",
        "Flow End Reason: Forced end (4)",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }
}

/// The SDK hooks: `tick` runs the timeouts and sends, `stop` ends every
/// flow and sends; counters are published from both.
#[test]
fn tick_and_stop_hooks_export_through_the_sdk() {
    use sluice_nf::NetworkFunction;
    let mut col = Collector::new();
    let mut nf = monitor(&col, 1500);
    assert_eq!(nf.tick_interval_ns(), Some(S));
    let mut h = Harness::new();
    h.run(
        &mut nf,
        &[
            udp("10.0.0.1", 1, "10.0.0.2", 2),
            udp("10.0.0.3", 1, "10.0.0.2", 2),
        ],
    );
    h.set_now_ns(T0 + 20 * S);
    h.run(&mut nf, &[udp("10.0.0.3", 1, "10.0.0.2", 2)]);
    h.tick(&mut nf); // the first flow is idle for 20 s > 15 s
    let recs: Vec<Rec> = col
        .messages()
        .iter()
        .flat_map(|m| m.records.iter().map(|r| rec(&r.1)))
        .collect();
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].src, recs[0].reason), (ip("10.0.0.1"), 1));
    assert_eq!(ctr(&h, "flows_active"), 1);
    assert_eq!(ctr(&h, "records_exported"), 1);
    h.stop(&mut nf);
    let recs: Vec<Rec> = col
        .messages()
        .iter()
        .flat_map(|m| m.records.iter().map(|r| rec(&r.1)))
        .collect();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        (recs[0].src, recs[0].packets, recs[0].reason),
        (ip("10.0.0.3"), 2, 4)
    );
    assert_eq!(
        (
            ctr(&h, "flows_active"),
            ctr(&h, "records_exported"),
            ctr(&h, "messages_sent")
        ),
        (0, 2, 2)
    );
    assert!(
        h.take_emitted().is_empty(),
        "flow_monitor never emits packets"
    );
}
