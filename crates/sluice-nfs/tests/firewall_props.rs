//! Properties of the firewall over random rules and traffic:
//! - every reply (and every later packet, both directions) of a connection
//!   the rules accepted passes, whatever the rules say about the reply;
//! - every reject answer parses and has valid checksums (IPv4/IPv6,
//!   VLAN-tagged or not, any payload size), and goes back out of the
//!   ingress port.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{PortId, Verdict};
use sluice_packet::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, TcpFlags};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Tcp,
    Udp,
    Ping,
}

#[derive(Debug, Clone)]
struct Conn {
    v6: bool,
    client: u8,
    server: u8,
    cport: u16,
    sport: u16,
    kind: Kind,
}

fn addr(v6: bool, host: u8) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(host)))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, host))
    }
}

impl Conn {
    /// Packet `n` of the connection: 0 opens, odd ones are replies.
    fn packet(&self, n: u32) -> Vec<u8> {
        let reply = n % 2 == 1;
        let (c, s) = (addr(self.v6, self.client), addr(self.v6, self.server));
        let (src, dst, sp, dp) = if reply {
            (s, c, self.sport, self.cport)
        } else {
            (c, s, self.cport, self.sport)
        };
        let l4 = match self.kind {
            Kind::Udp => L4Spec::Udp {
                src_port: sp,
                dst_port: dp,
            },
            Kind::Ping => L4Spec::IcmpEcho {
                id: self.cport,
                seq: n as u16,
                reply,
            },
            Kind::Tcp => {
                let flags = match n {
                    0 => SYN,
                    1 => SYN | ACK,
                    _ => ACK | PSH,
                };
                L4Spec::Tcp {
                    src_port: sp,
                    dst_port: dp,
                    seq: 100 + n,
                    ack: if n == 0 { 0 } else { 100 + n },
                    flags: TcpFlags::from_bits(flags),
                    window: 1000,
                }
            }
        };
        frame_ip(src, dst, l4, b"data")
    }
}

fn conn() -> impl Strategy<Value = Conn> {
    (
        any::<bool>(),
        1u8..6,
        1u8..6,
        1000u16..1010,
        prop::sample::select(vec![22u16, 53, 80, 443]),
        0..3u8,
    )
        .prop_map(|(v6, client, server, cport, sport, k)| Conn {
            v6,
            client,
            server,
            cport,
            sport,
            kind: [Kind::Tcp, Kind::Udp, Kind::Ping][usize::from(k)],
        })
}

fn rule() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["accept", "drop", "reject"]),
        prop::option::of(1u8..6),
        prop::option::of(1u8..6),
        prop::option::of(prop::sample::select(vec!["tcp", "udp"])),
        prop::option::of(prop::sample::select(vec![22u16, 53, 80, 443])),
    )
        .prop_map(|(action, src, dst, proto, port)| {
            let mut r = json!({ "action": action });
            if let Some(s) = src {
                r["src"] = json!(format!("10.0.0.{s}"));
            }
            if let Some(d) = dst {
                r["dst"] = json!(format!("fd00::{d}"));
            }
            if let Some(p) = proto {
                r["proto"] = json!(p);
                if let Some(port) = port {
                    // Rules talk about the reply direction too: a rule
                    // matching the server's port as a *source* must not
                    // affect replies of accepted connections.
                    r["src_port"] = json!(port);
                }
            }
            r
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn replies_of_an_accepted_connection_pass(
        rules in prop::collection::vec(rule(), 0..8),
        default in prop::sample::select(vec!["accept", "drop", "reject"]),
        conns in prop::collection::vec(conn(), 1..12),
        rounds in 2u32..6,
    ) {
        let mut fw = firewall(json!({ "default": default, "rules": rules }));
        let mut h = Harness::new();
        let mut accepted = vec![None; conns.len()];
        // Round r sends packet r of every connection, interleaved.
        for r in 0..rounds {
            let frames: Vec<Vec<u8>> = conns.iter().map(|c| c.packet(r)).collect();
            let out = h.run(&mut fw, &frames);
            for (i, o) in out.iter().enumerate() {
                if r == 0 {
                    // Several generated connections may share a tuple; the
                    // first decides.
                    let first = conns[..i].iter().position(|c| c.packet(0) == frames[i]);
                    accepted[i] = Some(match first {
                        Some(j) => accepted[j].unwrap(),
                        None => o.verdict == Verdict::Next,
                    });
                } else if accepted[i] == Some(true) {
                    prop_assert_eq!(o.verdict, Verdict::Next, "conn {:?} packet {}", conns[i], r);
                    prop_assert_eq!(&o.frame, &frames[i]);
                }
            }
        }
    }

    #[test]
    fn checksums_valid_after_reject_rewrite(
        v6 in any::<bool>(),
        vlan in prop::option::of(1u16..4095),
        kind in 0..3u8,
        flags in any::<u8>(),
        payload in prop::collection::vec(any::<u8>(), 0..1400),
        seq in any::<u32>(),
        ack in any::<u32>(),
        admin in any::<bool>(),
    ) {
        let l4 = match kind {
            0 => L4Spec::Tcp { src_port: 1234, dst_port: 23, seq, ack, flags: TcpFlags::from_bits(flags), window: 9 },
            1 => L4Spec::Udp { src_port: 1234, dst_port: 9 },
            _ => L4Spec::IcmpEcho { id: 3, seq: 4, reply: false },
        };
        let spec = FrameSpec {
            src_mac: MAC_A,
            dst_mac: MAC_B,
            vlan,
            src_ip: addr(v6, 1),
            dst_ip: addr(v6, 2),
            ttl: 9,
            l4,
        };
        let mut buf = vec![0u8; spec.header_len() + payload.len()];
        let n = write_frame(&mut buf, &spec, &payload).unwrap();
        buf.truncate(n);
        let code = if admin { "admin_prohibited" } else { "port_unreachable" };
        let mut fw = firewall(json!({ "default": "reject", "reject_with": code }));
        let out = Harness::new().run(&mut fw, std::slice::from_ref(&buf));
        let o = &out[0];
        if o.verdict == Verdict::ToPort(PortId(0)) {
            let hd = parse(&o.frame).expect("answer parses");
            verify_checksums(&o.frame, &hd).expect("answer checksums");
            prop_assert_eq!(hd.vlan_id(), vlan);
            prop_assert_eq!(&o.frame[..6], &buf[6..12]);
            let ip_max = if v6 { 1280 } else { 576 };
            prop_assert!(o.frame.len() - usize::from(hd.l3_offset) <= ip_max);
            if kind == 0 && !admin {
                // TCP: a RST (no explicit ICMP code configured per rule).
                prop_assert!(hd.l4_protocol.0 == 6);
            }
        } else {
            // Only packets that may not be answered are dropped: RSTs and
            // TCP segments conntrack finds invalid (they never reach rules).
            prop_assert!(kind == 0, "{:?}", o.verdict);
        }
    }
}
