//! `nat` properties: translate-then-reverse is the identity, every
//! checksum is valid after every rewrite (checked by full recomputation,
//! independently of `sluice_packet`), and no input makes it panic.

mod common;
mod nat_util;
use common::*;
use nat_util::*;

use proptest::prelude::*;
use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{NetworkFunction, Verdict};
use sluice_packet::{L4Spec, TcpFlags};
use std::net::Ipv4Addr;

const BEHAVIOURS: [&str; 3] = [
    "endpoint_independent",
    "address_dependent",
    "address_and_port_dependent",
];

fn nat(mapping: usize, filtering: usize) -> Box<dyn NetworkFunction> {
    build(
        "nat",
        json!({
            "inside": ["10.0.0.0/16"],
            "pool": ["192.0.2.0/31"],
            "mapping": BEHAVIOURS[mapping],
            "filtering": BEHAVIOURS[filtering],
            "capacity": 4096,
        }),
    )
}

#[derive(Debug, Clone)]
struct Flow {
    proto: u8,
    host: Ipv4Addr,
    sport: u16,
    remote: Ipv4Addr,
    dport: u16,
    payload: Vec<u8>,
}

fn l4(proto: u8, sport: u16, dport: u16, reply: bool) -> L4Spec {
    match proto {
        TCP => L4Spec::Tcp {
            src_port: sport,
            dst_port: dport,
            seq: 1,
            ack: 2,
            flags: TcpFlags::ACK,
            window: 9,
        },
        UDP => L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
        _ => L4Spec::IcmpEcho {
            id: if reply { dport } else { sport },
            seq: 4,
            reply,
        },
    }
}

fn flow() -> impl Strategy<Value = Flow> {
    (
        prop_oneof![Just(TCP), Just(UDP), Just(ICMP)],
        0u16..8,
        prop_oneof![
            Just(5000u16),
            Just(80),
            Just(1023),
            Just(65535),
            any::<u16>()
        ],
        prop_oneof![
            Just([198u8, 51, 100, 1]),
            Just([203, 0, 113, 9]),
            any::<[u8; 4]>()
        ],
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..48),
    )
        .prop_map(|(proto, h, sport, r, dport, payload)| Flow {
            proto,
            host: Ipv4Addr::new(10, 0, 0, 1 + h as u8),
            sport,
            // Never inside or in the pool (both would be other behaviours).
            remote: if r[0] == 10 || r[..3] == [192, 0, 2] {
                Ipv4Addr::new(198, 51, 100, r[3])
            } else {
                Ipv4Addr::from(r)
            },
            dport,
            payload,
        })
}

fn tuple_of(f: &[u8]) -> (Ipv4Addr, Ipv4Addr, u16, u16) {
    let (s, d) = addrs(f);
    let (sp, dp) = ports(f);
    (s, d, sp, dp)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// An outbound packet is translated; the reply its remote would send
    /// to the translated packet, once translated inbound, is exactly the
    /// original packet reversed — under every mapping and filtering
    /// behaviour, with earlier flows competing for the same ports.
    #[test]
    fn translate_then_reverse_is_identity(
        mapping in 0usize..3,
        filtering in 0usize..3,
        earlier in proptest::collection::vec(flow(), 0..6),
        f in flow(),
    ) {
        let mut nf = nat(mapping, filtering);
        let mut h = Harness::new();
        for e in &earlier {
            let o = v4(e.host, e.remote, l4(e.proto, e.sport, e.dport, false), &e.payload);
            h.run(nf.as_mut(), &[o]);
        }
        let o = v4(f.host, f.remote, l4(f.proto, f.sport, f.dport, false), &f.payload);
        let out = h.run(nf.as_mut(), &[o]).pop().unwrap();
        prop_assert_eq!(out.verdict, Verdict::Next);
        let (s, d, sp, dp) = tuple_of(&out.frame);
        prop_assert!(s == Ipv4Addr::new(192, 0, 2, 0) || s == Ipv4Addr::new(192, 0, 2, 1));
        prop_assert_eq!((d, dp), (f.remote, if f.proto == ICMP { sp } else { f.dport }));
        // The remote's reply to what it received.
        let reply = v4(d, s, l4(f.proto, dp, sp, true), &f.payload);
        let back = h.run(nf.as_mut(), &[reply]).pop().unwrap();
        prop_assert_eq!(back.verdict, Verdict::Next);
        let want = v4(f.remote, f.host, l4(f.proto, f.dport, f.sport, true), &f.payload);
        prop_assert_eq!(back.frame, want);
    }

    /// Every IPv4 checksum of every frame the NAT lets through is valid
    /// (outer IP, transport, and for ICMP errors the quoted IP header and
    /// quoted transport when whole), over random mixes of outbound,
    /// inbound, hairpinned and ICMP error traffic.
    #[test]
    fn all_checksums_valid_after_every_rewrite(
        mapping in 0usize..3,
        filtering in 0usize..3,
        steps in proptest::collection::vec((0u8..6, flow(), 0usize..64, any::<bool>()), 1..40),
    ) {
        let mut nf = nat(mapping, filtering);
        let mut h = Harness::new();
        let mut sent: Vec<(Vec<u8>, Vec<u8>)> = Vec::new(); // (original, translated)
        let mut delivered: Vec<Vec<u8>> = Vec::new(); // inbound, as delivered inside
        for (kind, f, pick, zero_udp) in steps {
            let frame = match kind {
                // Outbound.
                0 | 1 => v4(f.host, f.remote, l4(f.proto, f.sport, f.dport, false), &f.payload),
                // Inbound reply to something sent (or unsolicited).
                2 => match sent.get(pick % sent.len().max(1)) {
                    Some((_, t)) => {
                        let (s, d, sp, dp) = tuple_of(t);
                        v4(d, s, l4(t[23], dp, sp, true), &f.payload)
                    }
                    None => v4(f.remote, Ipv4Addr::new(192, 0, 2, 1), l4(f.proto, f.dport, f.sport, true), &f.payload),
                },
                // Hairpin to an external endpoint already mapped.
                3 => match sent.get(pick % sent.len().max(1)) {
                    Some((_, t)) if t[23] != ICMP => {
                        let (s, _, sp, _) = tuple_of(t);
                        v4(f.host, s, l4(t[23], f.sport, sp, false), &f.payload)
                    }
                    _ => continue,
                },
                // Inbound ICMP error quoting a translated packet.
                4 => match sent.get(pick % sent.len().max(1)) {
                    Some((_, t)) => {
                        let (s, _, _, _) = tuple_of(t);
                        let len = 28 + pick % (t.len() - 14 - 27);
                        icmp_error("203.0.113.254", &s.to_string(), 11, 0, t, len)
                    }
                    None => continue,
                },
                // Outbound ICMP error quoting a delivered inbound packet.
                _ => match delivered.get(pick % delivered.len().max(1)) {
                    Some(t) => {
                        let (s, d, _, _) = tuple_of(t);
                        let len = 28 + pick % (t.len() - 14 - 27);
                        icmp_error(&d.to_string(), &s.to_string(), 3, 3, t, len)
                    }
                    None => continue,
                },
            };
            let mut frame = frame;
            if zero_udp && frame[23] == UDP {
                frame[40] = 0;
                frame[41] = 0;
            }
            let o = h.run(nf.as_mut(), std::slice::from_ref(&frame)).pop().unwrap();
            if matches!(o.verdict, Verdict::Drop(_)) {
                continue;
            }
            check_frame(&o.frame, &format!("step kind {kind}"));
            if o.frame[23] == UDP && zero_udp {
                prop_assert_eq!(&o.frame[40..42], &[0, 0], "a zero UDP checksum stays zero");
            }
            match kind {
                0 | 1 => sent.push((frame, o.frame)),
                2 => delivered.push(o.frame),
                _ => {}
            }
        }
    }

    /// Arbitrary bytes, and mutations of valid NAT traffic, never panic.
    #[test]
    fn never_panics(
        f in flow(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
        junk in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let mut nf = nat(0, 0);
        let mut h = Harness::new();
        let o = v4(f.host, f.remote, l4(f.proto, f.sport, f.dport, false), &f.payload);
        let t = h.run(nf.as_mut(), std::slice::from_ref(&o)).pop().unwrap().frame;
        let mut err = icmp_error("203.0.113.1", "192.0.2.1", 3, 1, &t, t.len() - 14);
        for (i, x) in &flips {
            let n = err.len();
            err[14 + i % (n - 14)] ^= x;
        }
        err.truncate(14 + cut % (err.len() - 13));
        h.run(nf.as_mut(), &[err, junk]);
    }
}
