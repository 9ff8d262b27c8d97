//! `classifier`: verdicts and counters, config errors, a property test
//! against a reference evaluation written here on the generated packet's
//! fields, and a differential test against `tcpdump -r`.

mod common;
use common::*;

use std::net::IpAddr;

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NfId, PortId, Verdict};
use sluice_nfs::elements::classifier::Classifier;
use sluice_nfs::elements::filter::parse_filter;
use sluice_packet::{write_frame, FrameSpec, L4Spec, TcpFlags};

fn filtered() -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("classifier", "filtered")))
}

#[test]
fn first_matching_rule_decides_and_counters_add_up() {
    let mut nf = build(
        "classifier",
        json!({ "rules": [
            { "match": "tcp dst port 80", "to": "a" },
            { "match": "udp and (port 53 or portrange 5000-5010)", "to": "out" },
            { "match": "icmp or icmp6", "to": "drop" },
            { "match": "src net 10.9.0.0/16", "to": "b" }
        ], "default": "next" }),
    );
    let mut h = Harness::new();
    let mut bad = udp("10.0.0.1", 1, "10.0.0.2", 2);
    bad[14] = 0x3f;
    let input = vec![
        tcp("10.0.0.1", 4000, "10.0.0.2", 80),
        tcp("10.0.0.2", 80, "10.0.0.1", 4000),
        udp("2001:db8::1", 5005, "2001:db8::2", 9),
        ping("10.0.0.1", "10.0.0.2", 1, false),
        ping("2001:db8::1", "2001:db8::2", 1, false),
        tcp("10.9.1.1", 1, "10.0.0.2", 2),
        arp(),
        bad,
    ];
    let v: Vec<Verdict> = h
        .run(nf.as_mut(), &input)
        .into_iter()
        .map(|o| o.verdict)
        .collect();
    assert_eq!(
        v,
        [
            Verdict::ToNf(NfId(0)),
            Verdict::Next,
            Verdict::ToPort(PortId(0)),
            filtered(),
            filtered(),
            Verdict::ToNf(NfId(1)),
            Verdict::Next,
            v[7],
        ]
    );
    assert!(matches!(v[7], Verdict::Drop(r) if r.as_nf_local().is_none()));
    let c = |n: &str| h.counter(counter_index("classifier", n));
    assert_eq!((c("matched"), c("defaulted"), c("filtered")), (5, 2, 2));
}

#[test]
fn arp_matches_host_and_default_drop() {
    let mut nf = build(
        "classifier",
        json!({ "rules": [{ "match": "host 10.0.0.2 and not ip", "to": "b" }], "default": "drop" }),
    );
    let out = Harness::new().run(nf.as_mut(), &[arp(), udp("10.0.0.1", 1, "10.0.0.2", 2)]);
    assert_eq!(out[0].verdict, Verdict::ToNf(NfId(1)));
    assert_eq!(out[1].verdict, filtered());
}

#[test]
fn config_errors_name_the_rule() {
    let e = build_err(
        "classifier",
        json!({ "rules": [{ "match": "tcp", "to": "a" }, { "match": "tcp prot 80", "to": "a" }] }),
    );
    let s = e.to_string();
    assert!(
        s.contains("rules[1].match") && s.contains("unexpected `prot`"),
        "{s}"
    );
    let e = build_err(
        "classifier",
        json!({ "rules": [{ "match": "tcp", "to": "nowhere" }] }),
    );
    assert!(e.to_string().contains("`nowhere` is not an NF"), "{e}");
    let e = build_err("classifier", json!({ "default": "nowhere" }));
    assert!(e.to_string().contains("default"), "{e}");
}

// ------------------------------------------------ property: reference eval

/// A generated packet described by its fields.
#[derive(Debug, Clone)]
struct Pkt {
    v6: bool,
    src: u8,
    dst: u8,
    /// 0 tcp, 1 udp, 2 icmp echo
    l4: u8,
    sport: u16,
    dport: u16,
    vlan: Option<u16>,
}

const PORTS: [u16; 5] = [22, 53, 80, 443, 8080];

fn addr(v6: bool, last: u8) -> IpAddr {
    if v6 {
        format!("2001:db8::{last}").parse().unwrap()
    } else {
        format!("10.0.{}.{last}", last / 4).parse().unwrap()
    }
}

impl Pkt {
    fn frame(&self) -> Vec<u8> {
        let l4 = match self.l4 {
            0 => L4Spec::Tcp {
                src_port: self.sport,
                dst_port: self.dport,
                seq: 1,
                ack: 0,
                flags: TcpFlags::SYN,
                window: 100,
            },
            1 => L4Spec::Udp {
                src_port: self.sport,
                dst_port: self.dport,
            },
            _ => L4Spec::IcmpEcho {
                id: self.sport,
                seq: 1,
                reply: false,
            },
        };
        let spec = FrameSpec {
            src_mac: MAC_A,
            dst_mac: MAC_B,
            vlan: self.vlan,
            src_ip: addr(self.v6, self.src),
            dst_ip: addr(self.v6, self.dst),
            ttl: 64,
            l4,
        };
        let mut buf = vec![0u8; spec.header_len() + 4];
        let n = write_frame(&mut buf, &spec, b"data").unwrap();
        buf.truncate(n);
        buf
    }
    fn has_ports(&self) -> bool {
        self.l4 < 2
    }
}

/// A generated expression: its text and its reference meaning.
#[derive(Debug, Clone)]
enum E {
    Ip(bool),
    L4(u8),
    Host(Option<bool>, bool, u8),
    Net24(bool, u8),
    Port(Option<bool>, u16),
    Range(u16, u16),
    Vlan(Option<u16>),
    Not(Box<E>),
    And(Box<E>, Box<E>),
    Or(Box<E>, Box<E>),
}

fn dir(d: Option<bool>) -> &'static str {
    match d {
        None => "",
        Some(true) => "src ",
        Some(false) => "dst ",
    }
}

impl E {
    fn text(&self) -> String {
        match self {
            E::Ip(v6) => (if *v6 { "ip6" } else { "ip" }).into(),
            E::L4(0) => "tcp".into(),
            E::L4(1) => "udp".into(),
            E::L4(_) => "(icmp or icmp6)".into(),
            E::Host(d, v6, a) => format!("{}host {}", dir(*d), addr(*v6, *a)),
            E::Net24(v6, a) => {
                if *v6 {
                    "net 2001:db8::/64".into()
                } else {
                    format!("net 10.0.{}.0/24", a / 4)
                }
            }
            E::Port(d, p) => format!("{}port {p}", dir(*d)),
            E::Range(a, b) => format!("portrange {a}-{b}"),
            E::Vlan(None) => "vlan".into(),
            E::Vlan(Some(v)) => format!("vlan {v}"),
            E::Not(a) => format!("not {}", a.text()),
            E::And(a, b) => format!("({} and {})", a.text(), b.text()),
            E::Or(a, b) => format!("({} or {})", a.text(), b.text()),
        }
    }
    fn eval(&self, p: &Pkt) -> bool {
        match self {
            E::Ip(v6) => p.v6 == *v6,
            E::L4(l) => p.l4 == *l,
            E::Host(d, v6, a) => {
                p.v6 == *v6
                    && match d {
                        None => p.src == *a || p.dst == *a,
                        Some(true) => p.src == *a,
                        Some(false) => p.dst == *a,
                    }
            }
            E::Net24(v6, a) => p.v6 == *v6 && (*v6 || p.src / 4 == a / 4 || p.dst / 4 == a / 4),
            E::Port(d, n) => {
                p.has_ports()
                    && match d {
                        None => p.sport == *n || p.dport == *n,
                        Some(true) => p.sport == *n,
                        Some(false) => p.dport == *n,
                    }
            }
            E::Range(a, b) => {
                p.has_ports() && ((*a..=*b).contains(&p.sport) || (*a..=*b).contains(&p.dport))
            }
            E::Vlan(v) => p.vlan.is_some_and(|x| v.is_none_or(|y| x == y)),
            E::Not(a) => !a.eval(p),
            E::And(a, b) => a.eval(p) && b.eval(p),
            E::Or(a, b) => a.eval(p) || b.eval(p),
        }
    }
}

fn port() -> impl Strategy<Value = u16> {
    prop::sample::select(PORTS.to_vec())
}

fn leaf() -> impl Strategy<Value = E> {
    let d = prop::option::of(any::<bool>());
    prop_oneof![
        any::<bool>().prop_map(E::Ip),
        (0u8..3).prop_map(E::L4),
        (d.clone(), any::<bool>(), 1u8..9).prop_map(|(d, v, a)| E::Host(d, v, a)),
        (any::<bool>(), 1u8..9).prop_map(|(v, a)| E::Net24(v, a)),
        (d, port()).prop_map(|(d, p)| E::Port(d, p)),
        (port(), port()).prop_map(|(a, b)| E::Range(a.min(b), a.max(b))),
        prop::option::of(prop::sample::select(vec![10u16, 20])).prop_map(E::Vlan),
    ]
}

fn expr() -> impl Strategy<Value = E> {
    leaf().prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|a| E::Not(Box::new(a))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| E::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| E::Or(Box::new(a), Box::new(b))),
        ]
    })
}

fn pkt() -> impl Strategy<Value = Pkt> {
    (
        any::<bool>(),
        1u8..9,
        1u8..9,
        0u8..3,
        port(),
        port(),
        prop::option::of(prop::sample::select(vec![10u16, 20, 30])),
    )
        .prop_map(|(v6, src, dst, l4, sport, dport, vlan)| Pkt {
            v6,
            src,
            dst,
            l4,
            sport,
            dport,
            vlan,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn classifier_agrees_with_the_reference(e in expr(), pkts in prop::collection::vec(pkt(), 1..16)) {
        let text = e.text();
        let c = Classifier::new(vec![(parse_filter(&text).unwrap(), Verdict::Next)], Verdict::Next);
        for p in &pkts {
            let got = c.classify(&p.frame()).unwrap() == Some(0);
            prop_assert_eq!(got, e.eval(p), "`{}` on {:?}", text, p);
        }
    }
}

// ------------------------------------------------ differential: tcpdump

fn pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut f = vec![];
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    for (i, fr) in frames.iter().enumerate() {
        f.extend_from_slice(&(i as u32).to_le_bytes());
        f.extend_from_slice(&[0; 4]);
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(&(fr.len() as u32).to_le_bytes());
        f.extend_from_slice(fr);
    }
    std::fs::write(path, f).unwrap();
}

/// Indices (pcap seconds) of the packets `tcpdump -r` selects with `expr`.
fn tcpdump(path: &std::path::Path, expr: &str) -> Vec<usize> {
    let out = std::process::Command::new("tcpdump")
        .args(["-r", path.to_str().unwrap(), "-nn", "-tt", expr])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tcpdump `{expr}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('.').next().unwrap().parse::<usize>().unwrap())
        .collect()
}

#[test]
fn agrees_with_tcpdump() {
    if std::process::Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIP: tcpdump is not installed");
        return;
    }
    // Untagged packets for plain expressions; tcpdump only looks past a
    // VLAN tag after a `vlan` primitive, so tagged ones get their own set.
    let mut plain = vec![];
    let mut tagged = vec![];
    for v6 in [false, true] {
        for l4 in 0..3 {
            for (src, dst) in [(1, 2), (2, 5), (6, 1)] {
                for (sport, dport) in [(22, 80), (53, 8080), (443, 53)] {
                    let p = Pkt {
                        v6,
                        src,
                        dst,
                        l4,
                        sport,
                        dport,
                        vlan: None,
                    };
                    plain.push(p.frame());
                    tagged.push(
                        Pkt {
                            vlan: Some(if sport == 22 { 10 } else { 20 }),
                            ..p
                        }
                        .frame(),
                    );
                }
            }
        }
    }
    plain.push(arp());
    let dir = std::env::temp_dir().join(format!("classifier-tcpdump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pp, tp) = (dir.join("plain.pcap"), dir.join("tagged.pcap"));
    pcap(&pp, &plain);
    pcap(&tp, &tagged);
    let check = |path: &std::path::Path, frames: &[Vec<u8>], expr: &str| {
        let c = Classifier::new(
            vec![(parse_filter(expr).unwrap(), Verdict::Next)],
            Verdict::Next,
        );
        let ours: Vec<usize> = frames
            .iter()
            .enumerate()
            .filter(|(_, f)| c.classify(f).unwrap() == Some(0))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(ours, tcpdump(path, expr), "`{expr}`");
    };
    for expr in [
        "ip",
        "ip6",
        "tcp",
        "udp",
        "icmp",
        "icmp6",
        "arp",
        "host 10.0.0.2",
        "src host 10.0.0.2",
        "dst host 2001:db8::5",
        "net 10.0.1.0/24",
        "src net 10.0.0.0/24",
        "net 2001:db8::/32",
        "port 53",
        "src port 53",
        "dst port 80",
        "portrange 50-100",
        "dst portrange 440-8080",
        "tcp port 80",
        "udp dst port 53",
        "proto 17",
        "proto 1",
        "ip proto 6",
        "not tcp",
        "tcp or udp",
        "tcp and not port 22",
        "(udp or icmp) and host 10.0.0.1",
        "ip6 and (src port 443 or dst port 8080)",
        "not (ip and port 53) and not arp",
        "host 10.0.0.1 && !udp || icmp6",
    ] {
        check(&pp, &plain, expr);
    }
    for expr in [
        "vlan",
        "vlan 10",
        "vlan 20 and tcp",
        "vlan and ip6 and port 53",
        "vlan 10 and host 2001:db8::1",
    ] {
        check(&tp, &tagged, expr);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn per_rule_hits_are_extended_counters() {
    let mut nf = build(
        "classifier",
        json!({ "rules": [{ "match": "udp", "to": "next" }, { "match": "tcp", "to": "drop" }] }),
    );
    let mut h = Harness::new();
    h.run(
        nf.as_mut(),
        &[
            udp("10.0.0.1", 1, "10.0.0.2", 2),
            tcp("10.0.0.1", 1, "10.0.0.2", 2),
            tcp("10.0.0.1", 3, "10.0.0.2", 2),
        ],
    );
    assert_eq!(
        (h.ext_counter(0), h.ext_counter(1), h.ext_counter(2)),
        (1, 2, 0)
    );
}
