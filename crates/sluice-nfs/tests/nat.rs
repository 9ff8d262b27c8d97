//! `nat`: RFC 4787/5382/5508 behaviours through the harness — port
//! preservation and allocation, mapping (EIM/ADM/APDM) and filtering
//! (EIF/ADF/APDF) behaviours, port forwarding, hairpinning, ICMP query and
//! error translation, timeouts and expiry, exhaustion, pass-through and
//! drops, located config errors.

mod common;
mod nat_util;
use common::*;
use nat_util::*;

use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NetworkFunction, PortId, Verdict};
use sluice_packet::{ParseError, TcpFlags};

const S: u64 = 1_000_000_000;
const T0: u64 = 1_000 * S;

fn drop(name: &str) -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("nat", name)))
}

fn c(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("nat", name))
}

/// One pool address, inside 10.0.0.0/16, plus `extra` keys.
fn cfg(extra: Value) -> Value {
    let mut base = json!({ "inside": ["10.0.0.0/16"], "pool": ["192.0.2.1"] });
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

struct Nat {
    nf: Box<dyn NetworkFunction>,
    h: Harness,
}

impl Nat {
    fn new(extra: Value) -> Nat {
        let mut h = Harness::new();
        h.set_now_ns(T0);
        Nat {
            nf: build("nat", cfg(extra)),
            h,
        }
    }

    /// Runs one frame; returns (verdict, frame), checking every checksum of
    /// a translated frame.
    fn run(&mut self, f: Vec<u8>) -> (Verdict, Vec<u8>) {
        let o = self.h.run(self.nf.as_mut(), &[f]).pop().unwrap();
        if !matches!(o.verdict, Verdict::Drop(_)) && o.frame[12..14] == [8, 0] {
            check_frame(&o.frame, "output");
        }
        (o.verdict, o.frame)
    }

    /// Runs one frame that must pass (any non-drop verdict); returns its
    /// (src, dst) tuple.
    fn pass(&mut self, f: Vec<u8>) -> (String, String) {
        let (v, out) = self.run(f);
        assert!(!matches!(v, Verdict::Drop(_)), "dropped: {v:?}");
        tuple(&out)
    }

    fn at(&mut self, secs: u64) {
        self.h.set_now_ns(T0 + secs * S);
    }

    fn c(&self, name: &str) -> u64 {
        c(&self.h, name)
    }
}

fn t(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[test]
fn descriptor() {
    let t = nf_type("nat");
    assert_eq!(
        t.drop_reasons,
        ["no_mapping", "filtered", "fragment", "unsupported"]
    );
    assert_eq!(
        t.counters,
        [
            "translated_out",
            "translated_in",
            "hairpinned",
            "icmp_errors_translated",
            "mappings",
            "sessions",
            "mapping_created",
            "mapping_expired",
            "no_mapping",
            "filtered",
            "untranslated"
        ]
    );
}

#[test]
fn outbound_udp_preserves_the_port_and_the_reply_comes_back() {
    let mut n = Nat::new(json!({}));
    let out = udp4("10.0.0.1", 5000, "198.51.100.7", 53);
    let (v, f) = n.run(out.clone());
    assert_eq!(v, Verdict::Next);
    assert_eq!(tuple(&f), t("192.0.2.1:5000", "198.51.100.7:53"));
    // Only the source address, the IP checksum, and the UDP checksum change
    // (the port is preserved).
    let diff: Vec<usize> = (0..out.len()).filter(|&i| out[i] != f[i]).collect();
    assert!(
        diff.iter()
            .all(|i| [24, 25, 26, 27, 28, 29, 40, 41].contains(i)),
        "{diff:?}"
    );
    let (v, back) = n.run(udp4("198.51.100.7", 53, "192.0.2.1", 5000));
    assert_eq!(v, Verdict::Next);
    assert_eq!(tuple(&back), t("198.51.100.7:53", "10.0.0.1:5000"));
    assert_eq!(back, udp4("198.51.100.7", 53, "10.0.0.1", 5000));
    assert_eq!((n.c("translated_out"), n.c("translated_in")), (1, 1));
    assert_eq!(
        (n.c("mappings"), n.c("sessions"), n.c("mapping_created")),
        (1, 1, 1)
    );
}

#[test]
fn a_taken_port_gets_the_next_free_one_and_low_ports_stay_low() {
    let mut n = Nat::new(json!({}));
    assert_eq!(
        n.pass(udp4("10.0.0.1", 5000, "198.51.100.7", 53)).0,
        "192.0.2.1:5000"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.2", 5000, "198.51.100.7", 53)).0,
        "192.0.2.1:5001"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.3", 5000, "198.51.100.7", 53)).0,
        "192.0.2.1:5002"
    );
    // TCP has its own port space: 5000 is free there.
    assert_eq!(
        n.pass(tcp4("10.0.0.2", 5000, "198.51.100.7", 80, TcpFlags::SYN))
            .0,
        "192.0.2.1:5000"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.1", 123, "198.51.100.7", 123)).0,
        "192.0.2.1:123"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.2", 123, "198.51.100.7", 123)).0,
        "192.0.2.1:124"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.3", 1023, "198.51.100.7", 123)).0,
        "192.0.2.1:1023"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.4", 1023, "198.51.100.7", 123)).0,
        "192.0.2.1:1",
        "a privileged port wraps within 1-1023"
    );
    // Replies reach the right host.
    assert_eq!(
        n.pass(udp4("198.51.100.7", 53, "192.0.2.1", 5001)).1,
        "10.0.0.2:5000"
    );
    assert_eq!(
        n.pass(udp4("198.51.100.7", 53, "192.0.2.1", 5002)).1,
        "10.0.0.3:5000"
    );
}

#[test]
fn pooling_is_paired_by_internal_address() {
    let mut n = Nat::new(json!({ "pool": ["192.0.2.4/30"] }));
    // Internal address a uses pool address number a mod 4.
    for (host, ext) in [
        ("10.0.0.1", "192.0.2.5"),
        ("10.0.0.2", "192.0.2.6"),
        ("10.0.0.7", "192.0.2.7"),
        ("10.0.1.0", "192.0.2.4"),
    ] {
        for dst in ["198.51.100.1", "203.0.113.9"] {
            let (src, _) = n.pass(udp4(host, 7777, dst, 9));
            assert_eq!(src, format!("{ext}:7777"), "{host} to {dst}");
        }
    }
}

#[test]
fn endpoint_independent_mapping_reuses_the_external_endpoint() {
    let mut n = Nat::new(json!({ "mapping": "endpoint_independent" }));
    let a = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1)).0;
    let b = n.pass(udp4("10.0.0.1", 4000, "198.51.100.2", 2)).0;
    let c2 = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 3)).0;
    assert_eq!(
        (a.as_str(), b.as_str(), c2.as_str()),
        ("192.0.2.1:4000", "192.0.2.1:4000", "192.0.2.1:4000")
    );
    assert_eq!((n.c("mappings"), n.c("sessions")), (1, 3));
}

#[test]
fn address_dependent_mapping_splits_by_remote_address() {
    let mut n = Nat::new(json!({ "mapping": "address_dependent" }));
    let a = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1)).0;
    let b = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 2)).0;
    let c2 = n.pass(udp4("10.0.0.1", 4000, "198.51.100.2", 1)).0;
    assert_eq!(
        (a.as_str(), b.as_str(), c2.as_str()),
        ("192.0.2.1:4000", "192.0.2.1:4000", "192.0.2.1:4001")
    );
    assert_eq!((n.c("mappings"), n.c("sessions")), (2, 3));
}

#[test]
fn address_and_port_dependent_mapping_splits_by_remote_endpoint() {
    let mut n = Nat::new(json!({ "mapping": "address_and_port_dependent" }));
    let a = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1)).0;
    let b = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 2)).0;
    let a2 = n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1)).0;
    assert_eq!(
        (a.as_str(), b.as_str(), a2.as_str()),
        ("192.0.2.1:4000", "192.0.2.1:4001", "192.0.2.1:4000")
    );
    // Each external endpoint returns to the same inside endpoint.
    assert_eq!(
        n.pass(udp4("198.51.100.1", 2, "192.0.2.1", 4001)).1,
        "10.0.0.1:4000"
    );
    assert_eq!(n.c("mappings"), 2);
}

/// The inbound verdicts for, in order: the remote the host sent to, the
/// same address from another port, another address.
fn filtering(mode: &str) -> [Verdict; 3] {
    let mut n = Nat::new(json!({ "filtering": mode }));
    n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1));
    [
        n.run(udp4("198.51.100.1", 1, "192.0.2.1", 4000)).0,
        n.run(udp4("198.51.100.1", 99, "192.0.2.1", 4000)).0,
        n.run(udp4("203.0.113.5", 1, "192.0.2.1", 4000)).0,
    ]
}

#[test]
fn filtering_behaviours() {
    let ok = Verdict::Next;
    let no = drop("filtered");
    assert_eq!(filtering("endpoint_independent"), [ok, ok, ok]);
    assert_eq!(filtering("address_dependent"), [ok, ok, no]);
    assert_eq!(filtering("address_and_port_dependent"), [ok, no, no]);
}

#[test]
fn endpoint_independent_filtering_admits_anyone_to_the_mapped_host() {
    let mut n = Nat::new(json!({}));
    n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1));
    assert_eq!(
        n.pass(udp4("203.0.113.5", 7, "192.0.2.1", 4000)),
        t("203.0.113.5:7", "10.0.0.1:4000")
    );
    // ... and the host's answer to the newcomer leaves by the same mapping.
    assert_eq!(
        n.pass(udp4("10.0.0.1", 4000, "203.0.113.5", 7)),
        t("192.0.2.1:4000", "203.0.113.5:7")
    );
}

#[test]
fn address_dependent_filtering_follows_sessions_to_the_address() {
    let mut n = Nat::new(json!({ "filtering": "address_dependent", "timeouts": { "udp": 120 } }));
    n.pass(udp4("10.0.0.1", 4000, "198.51.100.1", 1));
    n.at(60);
    assert_eq!(
        n.run(udp4("198.51.100.1", 50, "192.0.2.1", 4000)).0,
        Verdict::Next
    );
    // Both sessions to that address time out: its packets are filtered again.
    n.at(300);
    assert_eq!(
        n.run(udp4("198.51.100.1", 51, "192.0.2.1", 4000)).0,
        drop("filtered")
    );
}

#[test]
fn unsolicited_inbound_is_filtered_and_counted() {
    let mut n = Nat::new(json!({}));
    assert_eq!(
        n.run(udp4("198.51.100.1", 1, "192.0.2.1", 4000)).0,
        drop("filtered")
    );
    assert_eq!(
        n.run(tcp4("198.51.100.1", 1, "192.0.2.1", 22, TcpFlags::SYN))
            .0,
        drop("filtered")
    );
    assert_eq!(
        n.run(ping4("198.51.100.1", "192.0.2.1", 5, false)).0,
        drop("filtered")
    );
    assert_eq!(n.c("filtered"), 3);
    assert_eq!(n.c("sessions"), 0);
}

#[test]
fn port_forwarding_both_ways_and_for_connections_the_server_opens() {
    let mut n = Nat::new(json!({
        "filtering": "address_and_port_dependent",
        "forward": [
            { "proto": "tcp", "external": "192.0.2.1:8080", "internal": "10.0.0.5:80" },
            { "external": "198.51.100.200:53", "internal": "10.0.0.53:53" }
        ]
    }));
    let syn = tcp4("203.0.113.9", 40000, "192.0.2.1", 8080, TcpFlags::SYN);
    assert_eq!(n.pass(syn), t("203.0.113.9:40000", "10.0.0.5:80"));
    let synack = tcp4(
        "10.0.0.5",
        80,
        "203.0.113.9",
        40000,
        TcpFlags::SYN | TcpFlags::ACK,
    );
    assert_eq!(n.pass(synack), t("192.0.2.1:8080", "203.0.113.9:40000"));
    // A connection the server opens itself uses the forwarded endpoint.
    let out = tcp4("10.0.0.5", 80, "203.0.113.50", 443, TcpFlags::SYN);
    assert_eq!(n.pass(out).0, "192.0.2.1:8080");
    // UDP to 8080 is not forwarded; 8080 is reserved for TCP only.
    assert_eq!(
        n.run(udp4("203.0.113.9", 1, "192.0.2.1", 8080)).0,
        drop("filtered")
    );
    // A rule without proto forwards both, on an address outside the pool.
    assert_eq!(
        n.pass(udp4("203.0.113.9", 5353, "198.51.100.200", 53)).1,
        "10.0.0.53:53"
    );
    assert_eq!(
        n.pass(tcp4(
            "203.0.113.9",
            5353,
            "198.51.100.200",
            53,
            TcpFlags::SYN
        ))
        .1,
        "10.0.0.53:53"
    );
    // Dynamic allocation skips the forwarded port.
    assert_eq!(
        n.pass(tcp4("10.0.0.9", 8080, "203.0.113.1", 1, TcpFlags::SYN))
            .0,
        "192.0.2.1:8081"
    );
    // Static mappings are not counted as dynamic ones.
    assert_eq!(n.c("mapping_created"), 1);
}

#[test]
fn hairpinning_translates_both_ways_and_returns_to_the_ingress_port() {
    let mut n = Nat::new(json!({}));
    // B is reachable at 192.0.2.1:6000 through its mapping.
    n.pass(udp4("10.0.0.2", 6000, "198.51.100.1", 1));
    // A sends to B's external endpoint: seen by B as from A's external one.
    let (v, f) = n.run(udp4("10.0.0.1", 5000, "192.0.2.1", 6000));
    assert_eq!(v, Verdict::ToPort(PortId(0)));
    assert_eq!(tuple(&f), t("192.0.2.1:5000", "10.0.0.2:6000"));
    // B answers A's external endpoint, which hairpins back to A.
    let (v, f) = n.run(udp4("10.0.0.2", 6000, "192.0.2.1", 5000));
    assert_eq!(v, Verdict::ToPort(PortId(0)));
    assert_eq!(tuple(&f), t("192.0.2.1:6000", "10.0.0.1:5000"));
    assert_eq!(n.c("hairpinned"), 2);
    // To a port nobody mapped: filtered like any unsolicited packet.
    assert_eq!(
        n.run(udp4("10.0.0.1", 5000, "192.0.2.1", 7000)).0,
        drop("filtered")
    );
    // hairpin_output: next continues the chain; hairpin: false refuses.
    let mut n = Nat::new(json!({ "hairpin_output": "next" }));
    n.pass(udp4("10.0.0.2", 6000, "198.51.100.1", 1));
    assert_eq!(
        n.run(udp4("10.0.0.1", 5000, "192.0.2.1", 6000)).0,
        Verdict::Next
    );
    let mut n = Nat::new(json!({ "hairpin": false }));
    n.pass(udp4("10.0.0.2", 6000, "198.51.100.1", 1));
    assert_eq!(
        n.run(udp4("10.0.0.1", 5000, "192.0.2.1", 6000)).0,
        drop("unsupported")
    );
}

#[test]
fn icmp_echo_ids_are_mapped_like_ports() {
    let mut n = Nat::new(json!({}));
    let (v, f) = n.run(ping4("10.0.0.1", "198.51.100.1", 77, false));
    assert_eq!(v, Verdict::Next);
    assert_eq!(tuple(&f), t("192.0.2.1:77", "198.51.100.1:77"));
    assert_eq!(
        n.pass(ping4("10.0.0.2", "198.51.100.1", 77, false)).0,
        "192.0.2.1:78",
        "77 is taken"
    );
    let (_, back) = n.run(ping4("198.51.100.1", "192.0.2.1", 78, true));
    assert_eq!(back, ping4("198.51.100.1", "10.0.0.2", 77, true));
    assert_eq!(
        n.pass(ping4("198.51.100.1", "192.0.2.1", 77, true)).1,
        "10.0.0.1:77"
    );
}

#[test]
fn inbound_icmp_errors_are_translated_with_their_quote() {
    for (proto, quote_len) in [(UDP, 28), (UDP, 37), (TCP, 28), (TCP, 40), (ICMP, 36)] {
        let mut n = Nat::new(json!({}));
        let out = match proto {
            UDP => udp4("10.0.0.1", 5000, "198.51.100.7", 53),
            TCP => tcp4("10.0.0.1", 5000, "198.51.100.7", 80, TcpFlags::SYN),
            _ => ping4("10.0.0.1", "198.51.100.7", 5000, false),
        };
        let (_, translated) = n.run(out.clone());
        // A router on the path reports the translated packet.
        let err = icmp_error("203.0.113.254", "192.0.2.1", 11, 0, &translated, quote_len);
        let (v, f) = n.run(err);
        assert_eq!(v, Verdict::Next, "proto {proto} quote {quote_len}");
        // Exactly what the router would have sent had it seen the original.
        let want = icmp_error("203.0.113.254", "10.0.0.1", 11, 0, &out, quote_len);
        assert_eq!(f, want, "proto {proto} quote {quote_len}");
        assert_eq!(n.c("icmp_errors_translated"), 1);
    }
}

#[test]
fn outbound_icmp_errors_are_translated_with_their_quote() {
    let mut n = Nat::new(json!({}));
    n.pass(udp4("10.0.0.1", 5000, "198.51.100.7", 53));
    let inbound = udp4("198.51.100.7", 53, "192.0.2.1", 5000);
    let (_, delivered) = n.run(inbound.clone());
    // The inside host answers port unreachable about what it received.
    let err = icmp_error("10.0.0.1", "198.51.100.7", 3, 3, &delivered, 37);
    let (v, f) = n.run(err);
    assert_eq!(v, Verdict::Next);
    assert_eq!(
        f,
        icmp_error("192.0.2.1", "198.51.100.7", 3, 3, &inbound, 37)
    );
    // An error about nothing the NAT knows is not let out.
    let stray = icmp_error(
        "10.0.0.1",
        "198.51.100.7",
        3,
        3,
        &udp4("198.51.100.7", 1, "10.0.0.1", 2),
        28,
    );
    assert_eq!(n.run(stray).0, drop("no_mapping"));
    let stray = icmp_error(
        "203.0.113.1",
        "192.0.2.1",
        3,
        1,
        &udp4("192.0.2.1", 9, "198.51.100.9", 2),
        28,
    );
    assert_eq!(n.run(stray).0, drop("filtered"));
    // A quote too short to hold the ports is malformed.
    let short = icmp_error(
        "203.0.113.1",
        "192.0.2.1",
        3,
        1,
        &udp4("192.0.2.1", 5000, "198.51.100.7", 53),
        24,
    );
    assert_eq!(
        n.run(short).0,
        Verdict::Drop(DropReason::malformed(ParseError::Icmpv4Truncated))
    );
}

#[test]
fn udp_mappings_last_their_timeout_refreshed_by_traffic() {
    let mut n = Nat::new(json!({ "capacity": 64 }));
    n.pass(udp4("10.0.0.1", 5000, "198.51.100.7", 53));
    n.at(299);
    assert_eq!(
        n.run(udp4("198.51.100.7", 53, "192.0.2.1", 5000)).0,
        Verdict::Next,
        "refreshes (inbound)"
    );
    n.at(598);
    assert_eq!(
        n.run(udp4("198.51.100.7", 53, "192.0.2.1", 5000)).0,
        Verdict::Next
    );
    n.at(898);
    // Expired at 598 + 300: the sweep of this batch removes it.
    assert_eq!(
        n.run(udp4("198.51.100.7", 53, "192.0.2.1", 5000)).0,
        drop("filtered")
    );
    assert_eq!(
        (n.c("mappings"), n.c("sessions"), n.c("mapping_expired")),
        (0, 0, 1)
    );
    // The port is free again: a new host gets it.
    assert_eq!(
        n.pass(udp4("10.0.0.9", 5000, "198.51.100.7", 53)).0,
        "192.0.2.1:5000"
    );
}

#[test]
fn tcp_timeouts_depend_on_the_connection_phase() {
    let mut n = Nat::new(json!({ "capacity": 64 }));
    let syn = |p| tcp4("10.0.0.1", p, "198.51.100.7", 80, TcpFlags::SYN);
    let back = |p, f| tcp4("198.51.100.7", 80, "192.0.2.1", p, f);
    // Half open: transitory, 240 s.
    n.pass(syn(1000));
    // Established: 7440 s.
    n.pass(syn(2000));
    n.pass(back(2000, TcpFlags::SYN | TcpFlags::ACK));
    // Closed both ways: transitory again.
    n.pass(syn(3000));
    n.pass(back(3000, TcpFlags::SYN | TcpFlags::ACK));
    n.pass(tcp4(
        "10.0.0.1",
        3000,
        "198.51.100.7",
        80,
        TcpFlags::FIN | TcpFlags::ACK,
    ));
    n.pass(back(3000, TcpFlags::FIN | TcpFlags::ACK));
    // Reset: transitory.
    n.pass(syn(4000));
    n.pass(back(4000, TcpFlags::SYN | TcpFlags::ACK));
    n.pass(back(4000, TcpFlags::RST));
    assert_eq!(n.c("sessions"), 4);
    n.at(239);
    n.pass(udp4("10.0.0.200", 1, "198.51.100.7", 1)); // a batch runs the sweep
    assert_eq!(n.c("sessions"), 5);
    n.at(241);
    n.pass(udp4("10.0.0.200", 1, "198.51.100.7", 1));
    assert_eq!(
        n.c("sessions"),
        2,
        "only the established connection and the UDP flow remain"
    );
    assert_eq!(n.run(back(1000, TcpFlags::ACK)).0, drop("filtered"));
    assert_eq!(n.run(back(2000, TcpFlags::ACK)).0, Verdict::Next);
    n.at(7440 + 100);
    assert_eq!(
        n.run(back(2000, TcpFlags::ACK)).0,
        Verdict::Next,
        "refreshed at 241"
    );
    n.at(241 + 7440 + 1 + 7440);
    assert_eq!(n.run(back(2000, TcpFlags::ACK)).0, drop("filtered"));
    assert_eq!(n.c("mapping_expired"), 5);
}

#[test]
fn icmp_query_mappings_last_60_seconds() {
    let mut n = Nat::new(json!({}));
    n.pass(ping4("10.0.0.1", "198.51.100.1", 3, false));
    n.at(59);
    assert_eq!(
        n.run(ping4("198.51.100.1", "192.0.2.1", 3, true)).0,
        Verdict::Next
    );
    n.at(119);
    assert_eq!(
        n.run(ping4("198.51.100.1", "192.0.2.1", 3, true)).0,
        drop("filtered")
    );
}

#[test]
fn pool_exhaustion_drops_as_no_mapping() {
    let mut n = Nat::new(json!({ "ports": "1024-1025" }));
    assert_eq!(
        n.pass(udp4("10.0.0.1", 5000, "198.51.100.1", 1)).0,
        "192.0.2.1:1024"
    );
    assert_eq!(
        n.pass(udp4("10.0.0.2", 5000, "198.51.100.1", 1)).0,
        "192.0.2.1:1025"
    );
    assert_eq!(
        n.run(udp4("10.0.0.3", 5000, "198.51.100.1", 1)).0,
        drop("no_mapping")
    );
    // Existing sessions keep working.
    assert_eq!(
        n.pass(udp4("10.0.0.1", 5000, "198.51.100.1", 1)).0,
        "192.0.2.1:1024"
    );
    // A full session table as well.
    let mut n = Nat::new(json!({ "capacity": 2 }));
    n.pass(udp4("10.0.0.1", 5000, "198.51.100.1", 1));
    n.pass(udp4("10.0.0.1", 5000, "198.51.100.1", 2));
    assert_eq!(
        n.run(udp4("10.0.0.1", 5000, "198.51.100.1", 3)).0,
        drop("no_mapping")
    );
    assert_eq!(n.c("no_mapping"), 1);
}

#[test]
fn passes_what_is_not_nat_traffic_and_drops_what_it_cannot_translate() {
    let mut n = Nat::new(json!({}));
    for f in [
        arp(),
        udp("2001:db8::1", 1, "2001:db8::2", 2),
        udp4("10.0.0.1", 1, "10.0.0.2", 2), // inside to inside
        udp4("198.51.100.1", 1, "203.0.113.1", 2), // outside, not to the pool
    ] {
        let (v, out) = n.run(f.clone());
        assert_eq!((v, out), (Verdict::Next, f));
    }
    assert_eq!(n.c("untranslated"), 4);
    // GRE from inside, a fragment, an ICMP timestamp request.
    let mut gre = udp4("10.0.0.1", 1, "198.51.100.1", 2);
    gre[23] = 47;
    fix_ip_checksum(&mut gre);
    assert_eq!(n.run(gre).0, drop("unsupported"));
    let mut frag = udp4("10.0.0.1", 1, "198.51.100.1", 2);
    frag[20] = 0x20; // MF
    fix_ip_checksum(&mut frag);
    assert_eq!(n.run(frag).0, drop("fragment"));
    let mut ts = ping4("10.0.0.1", "198.51.100.1", 1, false);
    ts[34] = 13;
    assert_eq!(n.run(ts).0, drop("unsupported"));
    let mut bad = udp4("10.0.0.1", 1, "198.51.100.1", 2);
    bad.truncate(36);
    assert_eq!(
        n.run(bad).0,
        Verdict::Drop(DropReason::malformed(ParseError::Ipv4Truncated))
    );
}

fn fix_ip_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let s: u32 = f[14..34]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    f[24..26].copy_from_slice(&(!(s as u16)).to_be_bytes());
}

#[test]
fn inside_by_ingress_port() {
    // The harness delivers on port 0, which the test resolver calls `out`.
    let mut n = Nat::new(json!({ "inside": [], "inside_ports": ["out"] }));
    assert_eq!(
        n.pass(udp4("172.16.0.1", 5000, "198.51.100.1", 1)).0,
        "192.0.2.1:5000"
    );
    let mut n = Nat::new(json!({ "inside": [], "inside_ports": ["dump"] }));
    assert_eq!(
        n.run(udp4("172.16.0.1", 5000, "198.51.100.1", 1)).0,
        Verdict::Next
    );
    assert_eq!(n.c("untranslated"), 1);
}

#[test]
fn an_input_only_port_is_inside_unless_hairpins_must_go_back_through_it() {
    // `gen` is the test resolver's generator: packets come in through it,
    // nothing can leave through it.
    let base = json!({ "pool": ["192.0.2.1"], "inside_ports": ["gen"] });
    let with = |extra: Value| {
        let mut c = base.clone();
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        sluice_spec::ConfigNode::from_json(c).with_path("config")
    };
    for ok in [
        json!({ "hairpin_output": "next" }),
        json!({ "hairpin": false }),
    ] {
        if let Err(e) = build_node("nat", &with(ok.clone())) {
            panic!("{ok}: {e}");
        }
    }
    let Err(e) = build_node("nat", &with(json!({}))) else {
        panic!("hairpins to an input-only ingress port accepted");
    };
    assert_eq!(e.field, "config.inside_ports[0]", "{e}");
    assert!(e.message.contains("port `gen` cannot transmit"), "{e}");
    assert!(e.message.contains("hairpin_output: next"), "{e}");
}

#[test]
fn the_flow_cache_never_outlives_its_session() {
    let mut n = Nat::new(json!({}));
    let f = udp4("10.0.0.1", 5000, "198.51.100.7", 53);
    n.pass(f.clone());
    n.pass(f.clone());
    n.at(400);
    // Expired: a fresh mapping, counted as such.
    n.pass(f.clone());
    assert_eq!((n.c("mapping_created"), n.c("mapping_expired")), (2, 1));
    let id = n.h.flow_id_of(&f).unwrap();
    n.h.end_flow(n.nf.as_mut(), id);
    assert_eq!(n.pass(f).0, "192.0.2.1:5000");
    n.nf.reset();
    assert_eq!(
        n.run(udp4("198.51.100.7", 53, "192.0.2.1", 5000)).0,
        drop("filtered")
    );
}

#[test]
fn config_errors_name_the_field() {
    for (config, field, msg) in [
        (
            json!({ "inside": ["10.0.0.0/8"] }),
            "config",
            "missing field `pool`",
        ),
        (json!({ "pool": ["192.0.2.1"] }), "config.inside", "inside"),
        (
            json!({ "inside": ["10.0.0.0/33"], "pool": ["192.0.2.1"] }),
            "config.inside[0]",
            "invalid IPv4 prefix",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["2001:db8::1"] }),
            "config.pool[0]",
            "invalid IPv4 prefix",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["10.1.0.1"] }),
            "config.pool",
            "is inside",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.0.0/16"] }),
            "config.pool[0]",
            "at most 1024",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.0/24", "192.0.2.7"] }),
            "config.pool",
            "overlap",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "ports": "0-100" }),
            "config.ports",
            "invalid port range",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "mapping": "cone" }),
            "config.mapping",
            "unknown variant",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "capacity": 0 }),
            "config.capacity",
            "out of range",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "timeouts": { "udp": 60 } }),
            "config.timeouts.udp",
            "REQ-5",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "timeouts": { "tcp_established": 3600 } }),
            "config.timeouts.tcp_established",
            "2 hours 4 minutes",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "timeouts": { "icmp": 10 } }),
            "config.timeouts.icmp",
            "60 seconds",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "inside_ports": ["nope"] }),
            "config.inside_ports[0]",
            "no port named `nope`",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "forward": [{ "proto": "sctp", "external": "192.0.2.1:1", "internal": "10.0.0.1:1" }] }),
            "config.forward[0].proto",
            "tcp or udp",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "forward": [{ "external": "192.0.2.1", "internal": "10.0.0.1:1" }] }),
            "config.forward[0].external",
            "address:port",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "forward": [{ "external": "192.0.2.1:1", "internal": "172.16.0.1:1" }] }),
            "config.forward[0].internal",
            "not inside",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "forward": [
            { "external": "192.0.2.1:1", "internal": "10.0.0.1:1" },
            { "proto": "udp", "external": "192.0.2.1:1", "internal": "10.0.0.2:1" }] }),
            "config.forward[1]",
            "already used",
        ),
        (
            json!({ "inside": ["10.0.0.0/8"], "pool": ["192.0.2.1"], "hairpinning": true }),
            "config.hairpinning",
            "unknown field",
        ),
    ] {
        let node = sluice_spec::ConfigNode::from_json(config.clone()).with_path("config");
        let Err(e) = build_node("nat", &node) else {
            panic!("{config} accepted");
        };
        assert_eq!(e.field, field, "{config}: {e}");
        assert!(e.message.contains(msg), "{config}: {e}");
    }
}

#[test]
fn tick_expires_idle_mappings_without_traffic() {
    let mut n = Nat::new(json!({}));
    assert_eq!(n.nf.tick_interval_ns(), Some(100_000_000));
    n.pass(udp4("10.0.0.1", 5000, "198.51.100.7", 53));
    n.at(299);
    n.h.tick(n.nf.as_mut());
    assert_eq!((n.c("mappings"), n.c("sessions")), (1, 1));
    // Past the timeout, four ticks sweep the whole default 64 k table.
    n.at(301);
    for _ in 0..4 {
        n.h.tick(n.nf.as_mut());
    }
    assert_eq!(
        (n.c("mappings"), n.c("sessions"), n.c("mapping_expired")),
        (0, 0, 1)
    );
}
