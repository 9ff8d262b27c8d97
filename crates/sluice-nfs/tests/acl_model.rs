//! Property test: for random rule lists and random 5-tuples (both
//! directions, several times over so the per-flow cache is exercised), the
//! `acl` NF decides exactly as a straightforward reference model.

mod common;
use common::*;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};
use sluice_packet::L4Spec;

/// A prefix of the model: network address bits and length.
#[derive(Debug, Clone, Copy)]
enum Net {
    V4(u32, u8),
    V6(u128, u8),
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        match (*self, ip) {
            (Net::V4(net, len), IpAddr::V4(a)) => {
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                u32::from(a) & mask == net & mask
            }
            (Net::V6(net, len), IpAddr::V6(a)) => {
                let mask = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - len)
                };
                u128::from(a) & mask == net & mask
            }
            _ => false,
        }
    }

    /// Config text: `addr/len`, or a bare address for host prefixes half
    /// of the time.
    fn text(&self, bare: bool) -> String {
        match *self {
            Net::V4(a, 32) if bare => Ipv4Addr::from(a).to_string(),
            Net::V6(a, 128) if bare => Ipv6Addr::from(a).to_string(),
            Net::V4(a, l) => format!("{}/{l}", Ipv4Addr::from(a)),
            Net::V6(a, l) => format!("{}/{l}", Ipv6Addr::from(a)),
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    accept: bool,
    src: Option<(Net, bool)>,
    dst: Option<(Net, bool)>,
    /// Protocol number, and whether to write it as a name.
    proto: Option<(u8, bool)>,
    /// Inclusive range, and how to write it (0: number if single, 1: "A-B", 2: "A" / "A-B").
    src_port: Option<(u16, u16, u8)>,
    dst_port: Option<(u16, u16, u8)>,
}

impl Rule {
    fn matches(&self, t: &Tuple) -> bool {
        let has_ports = matches!(t.proto(), 6 | 17 | 132);
        let port_ok = |r: &Option<(u16, u16, u8)>, p: u16| match r {
            None => true,
            Some((lo, hi, _)) => has_ports && *lo <= p && p <= *hi,
        };
        self.proto.is_none_or(|(p, _)| p == t.proto())
            && self.src.is_none_or(|(n, _)| n.contains(t.src))
            && self.dst.is_none_or(|(n, _)| n.contains(t.dst))
            && port_ok(&self.src_port, t.sport)
            && port_ok(&self.dst_port, t.dport)
    }

    fn json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert(
            "action".into(),
            json!(if self.accept { "accept" } else { "drop" }),
        );
        if let Some((n, bare)) = self.src {
            m.insert("src".into(), json!(n.text(bare)));
        }
        if let Some((n, bare)) = self.dst {
            m.insert("dst".into(), json!(n.text(bare)));
        }
        if let Some((p, as_name)) = self.proto {
            let name = match p {
                6 => Some("tcp"),
                17 => Some("udp"),
                1 => Some("icmp"),
                58 => Some("icmpv6"),
                _ => None,
            };
            m.insert(
                "proto".into(),
                match name {
                    Some(n) if as_name => json!(n),
                    _ => json!(p),
                },
            );
        }
        let range = |(lo, hi, style): (u16, u16, u8)| match style {
            0 if lo == hi => json!(lo),
            2 if lo == hi => json!(lo.to_string()),
            _ => json!(format!("{lo}-{hi}")),
        };
        if let Some(r) = self.src_port {
            m.insert("src_port".into(), range(r));
        }
        if let Some(r) = self.dst_port {
            m.insert("dst_port".into(), range(r));
        }
        Value::Object(m)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum L4 {
    Udp,
    Tcp,
    Echo,
}

#[derive(Debug, Clone)]
struct Tuple {
    src: IpAddr,
    dst: IpAddr,
    l4: L4,
    /// Ports (ICMP: `sport` is the echo id).
    sport: u16,
    dport: u16,
}

impl Tuple {
    fn proto(&self) -> u8 {
        match (self.l4, self.src) {
            (L4::Udp, _) => 17,
            (L4::Tcp, _) => 6,
            (L4::Echo, IpAddr::V4(_)) => 1,
            (L4::Echo, IpAddr::V6(_)) => 58,
        }
    }

    /// The reply: addresses and ports swapped (same echo id).
    fn reversed(&self) -> Tuple {
        match self.l4 {
            L4::Echo => Tuple {
                src: self.dst,
                dst: self.src,
                ..self.clone()
            },
            _ => Tuple {
                src: self.dst,
                dst: self.src,
                sport: self.dport,
                dport: self.sport,
                l4: self.l4,
            },
        }
    }

    fn frame(&self, reply: bool) -> Vec<u8> {
        let l4 = match self.l4 {
            L4::Udp => L4Spec::Udp {
                src_port: self.sport,
                dst_port: self.dport,
            },
            L4::Tcp => tcp_l4(self.sport, self.dport),
            L4::Echo => L4Spec::IcmpEcho {
                id: self.sport,
                seq: 1,
                reply,
            },
        };
        frame_ip(self.src, self.dst, l4, b"x")
    }
}

fn model(rules: &[Rule], default_accept: bool, t: &Tuple) -> bool {
    rules
        .iter()
        .find(|r| r.matches(t))
        .map_or(default_accept, |r| r.accept)
}

// Small address and port pools so that rules and packets meet often.
fn v4_addr() -> impl Strategy<Value = u32> {
    (0u32..4, 0u32..8).prop_map(|(a, b)| 0x0a00_0000 | a << 8 | b)
}
fn v6_addr() -> impl Strategy<Value = u128> {
    (0u128..4, 0u128..8).prop_map(|(a, b)| 0xfd00_u128 << 112 | a << 16 | b)
}
const PORTS: [u16; 9] = [0, 1, 53, 80, 443, 1023, 1024, 8080, 65535];
fn port() -> impl Strategy<Value = u16> {
    prop::sample::select(PORTS.to_vec())
}

fn net() -> impl Strategy<Value = (Net, bool)> {
    let v4 = (
        v4_addr(),
        prop::sample::select(vec![0u8, 8, 16, 22, 24, 29, 30, 31, 32]),
    )
        .prop_map(|(a, l)| {
            let mask = if l == 0 { 0 } else { u32::MAX << (32 - l) };
            Net::V4(a & mask, l)
        });
    let v6 = (
        v6_addr(),
        prop::sample::select(vec![0u8, 8, 64, 112, 120, 125, 126, 127, 128]),
    )
        .prop_map(|(a, l)| {
            let mask = if l == 0 { 0 } else { u128::MAX << (128 - l) };
            Net::V6(a & mask, l)
        });
    (prop_oneof![v4, v6], any::<bool>())
}

fn range() -> impl Strategy<Value = (u16, u16, u8)> {
    (port(), port(), 0u8..3).prop_map(|(a, b, s)| (a.min(b), a.max(b), s))
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        any::<bool>(),
        prop::option::weighted(0.4, net()),
        prop::option::weighted(0.4, net()),
        prop::option::weighted(
            0.5,
            (
                prop::sample::select(vec![6u8, 17, 1, 58, 47, 132]),
                any::<bool>(),
            ),
        ),
        prop::option::weighted(0.3, range()),
        prop::option::weighted(0.3, range()),
    )
        .prop_map(|(accept, src, dst, mut proto, src_port, dst_port)| {
            // Ports only with tcp, udp, sctp or no protocol (else a config
            // error, tested elsewhere).
            if (src_port.is_some() || dst_port.is_some())
                && proto.is_some_and(|(p, _)| !matches!(p, 6 | 17 | 132))
            {
                proto = None;
            }
            Rule {
                accept,
                src,
                dst,
                proto,
                src_port,
                dst_port,
            }
        })
}

fn tuple() -> impl Strategy<Value = Tuple> {
    let l4 = prop::sample::select(vec![L4::Udp, L4::Tcp, L4::Echo]);
    let v4 = (v4_addr(), v4_addr())
        .prop_map(|(s, d)| (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d))));
    let v6 = (v6_addr(), v6_addr())
        .prop_map(|(s, d)| (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d))));
    (prop_oneof![v4, v6], l4, port(), port()).prop_map(|((src, dst), l4, sport, dport)| Tuple {
        src,
        dst,
        l4,
        sport,
        dport: if l4 == L4::Echo { sport } else { dport },
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn acl_agrees_with_the_reference_model(
        rules in prop::collection::vec(rule(), 0..8),
        default_accept in any::<bool>(),
        tuples in prop::collection::vec(tuple(), 1..8),
    ) {
        let config = json!({
            "default": if default_accept { "accept" } else { "drop" },
            "rules": rules.iter().map(Rule::json).collect::<Vec<_>>(),
        });
        let mut nf = build("acl", config.clone());
        let mut h = Harness::new();
        let denied = Verdict::Drop(DropReason::nf_local(reason_index("acl", "denied")));
        // Every tuple and its reply, then everything again in reverse
        // order: second answers come from the per-flow cache.
        let mut input = Vec::new();
        let mut want = Vec::new();
        for t in &tuples {
            for (tt, reply) in [(t.clone(), false), (t.reversed(), true)] {
                input.push(tt.frame(reply));
                want.push(if model(&rules, default_accept, &tt) { Verdict::Next } else { denied });
            }
        }
        let (mut again, mut want_again) = (input.clone(), want.clone());
        again.reverse();
        want_again.reverse();
        input.extend(again);
        want.extend(want_again);
        let got: Vec<Verdict> = h.run(nf.as_mut(), &input).into_iter().map(|o| o.verdict).collect();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let key = sluice_packet::flow_key(&input[i]).unwrap();
            prop_assert_eq!(g, w, "packet {} ({}) under {}", i, key, config);
        }
    }
}
