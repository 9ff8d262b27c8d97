//! `acl`: first-match rules, defaults, prefixes, protocols, ports, non-IP
//! and malformed frames, the per-flow cache, and located config errors.

mod common;
use common::*;

use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, NetworkFunction, Verdict};
use sluice_packet::ParseError;

fn denied() -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("acl", "denied")))
}

fn non_ip() -> Verdict {
    Verdict::Drop(DropReason::nf_local(reason_index("acl", "non_ip")))
}

/// Verdicts of a fresh ACL with `config` for `frames`.
fn verdicts(config: Value, frames: &[Vec<u8>]) -> Vec<Verdict> {
    let mut nf = build("acl", config);
    Harness::new()
        .run(nf.as_mut(), frames)
        .into_iter()
        .map(|o| o.verdict)
        .collect()
}

/// The verdict of a fresh ACL for one frame.
fn verdict(config: &Value, frame: Vec<u8>) -> Verdict {
    verdicts(config.clone(), &[frame])[0]
}

fn c(h: &Harness, name: &str) -> u64 {
    h.counter(counter_index("acl", name))
}

#[test]
fn descriptor() {
    let t = nf_type("acl");
    assert_eq!(t.drop_reasons, ["denied", "non_ip"]);
    assert_eq!(t.counters, ["accepted", "denied", "rule_scans"]);
}

#[test]
fn empty_config_accepts_everything_unchanged() {
    for config in [json!(null), json!({}), json!({ "rules": [] })] {
        let mut nf = build("acl", config);
        let input = vec![
            udp("10.0.0.1", 1, "10.0.0.2", 2),
            tcp("2001:db8::1", 1, "2001:db8::2", 2),
            ping("10.0.0.1", "10.0.0.2", 3, false),
            arp(),
        ];
        let out = Harness::new().run(nf.as_mut(), &input);
        for (o, i) in out.iter().zip(&input) {
            assert_eq!(o.verdict, Verdict::Next);
            assert_eq!(&o.frame, i);
        }
    }
}

#[test]
fn first_matching_rule_decides() {
    let cfg = json!({
        "default": "drop",
        "rules": [
            { "action": "drop", "src": "10.0.0.66" },
            { "action": "accept", "src": "10.0.0.0/24" },
            { "action": "drop", "dst_port": 22, "proto": "tcp" },
            { "action": "accept", "proto": "tcp" },
        ]
    });
    // Rule 0 beats rule 1 for .66.
    assert_eq!(verdict(&cfg, udp("10.0.0.66", 1, "10.9.0.1", 80)), denied());
    // Rule 1 accepts the rest of the /24, even tcp/22 (rule 2 comes later).
    assert_eq!(
        verdict(&cfg, udp("10.0.0.65", 1, "10.9.0.1", 80)),
        Verdict::Next
    );
    assert_eq!(
        verdict(&cfg, tcp("10.0.0.65", 1, "10.9.0.1", 22)),
        Verdict::Next
    );
    // Outside the /24: tcp/22 dropped by rule 2, other tcp accepted by rule 3.
    assert_eq!(verdict(&cfg, tcp("10.0.1.1", 1, "10.9.0.1", 22)), denied());
    assert_eq!(
        verdict(&cfg, tcp("10.0.1.1", 1, "10.9.0.1", 23)),
        Verdict::Next
    );
    // No rule matches: the default.
    assert_eq!(verdict(&cfg, udp("10.0.1.1", 1, "10.9.0.1", 22)), denied());
}

#[test]
fn default_action() {
    let f = || udp("10.0.0.1", 1, "10.0.0.2", 2);
    assert_eq!(verdict(&json!({ "default": "accept" }), f()), Verdict::Next);
    assert_eq!(verdict(&json!({ "default": "drop" }), f()), denied());
    // A rule that does not match leaves the packet to the default.
    let rules = json!([{ "action": "accept", "dst": "192.0.2.0/24" }]);
    assert_eq!(
        verdict(&json!({ "default": "drop", "rules": rules }), f()),
        denied()
    );
    let rules = json!([{ "action": "drop", "dst": "192.0.2.0/24" }]);
    assert_eq!(verdict(&json!({ "rules": rules }), f()), Verdict::Next);
}

#[test]
fn ipv4_prefixes() {
    let cfg = json!({ "rules": [
        { "action": "drop", "src": "10.0.240.0/20" },
        { "action": "drop", "dst": "192.0.2.7" },
        { "action": "drop", "src": "0.0.0.0/0", "dst": "198.51.100.0/31" },
    ]});
    for (src, dst, want) in [
        ("10.0.240.0", "1.1.1.1", denied()),
        ("10.0.255.255", "1.1.1.1", denied()),
        ("10.0.239.255", "1.1.1.1", Verdict::Next),
        ("10.1.240.1", "1.1.1.1", Verdict::Next),
        ("1.1.1.1", "192.0.2.7", denied()),
        ("1.1.1.1", "192.0.2.8", Verdict::Next),
        ("1.1.1.1", "198.51.100.1", denied()),
        ("1.1.1.1", "198.51.100.2", Verdict::Next),
    ] {
        assert_eq!(verdict(&cfg, udp(src, 1, dst, 2)), want, "{src} -> {dst}");
    }
}

#[test]
fn host_bits_of_a_rule_prefix_are_ignored() {
    let cfg = json!({ "rules": [{ "action": "drop", "src": "10.1.2.3/8" }] });
    assert_eq!(verdict(&cfg, udp("10.200.0.1", 1, "1.1.1.1", 2)), denied());
    assert_eq!(
        verdict(&cfg, udp("11.0.0.1", 1, "1.1.1.1", 2)),
        Verdict::Next
    );
}

#[test]
fn ipv6_prefixes_and_families_do_not_mix() {
    let cfg = json!({ "rules": [
        { "action": "drop", "src": "2001:db8:bad::/48" },
        { "action": "drop", "dst": "2001:db8::53" },
        { "action": "drop", "src": "0.0.0.0/0", "dst": "0.0.0.0/0" },
    ]});
    for (src, dst, want) in [
        ("2001:db8:bad::1", "2001:db8::1", denied()),
        ("2001:db8:bad:ffff::1", "2001:db8::1", denied()),
        ("2001:db8:bae::1", "2001:db8::1", Verdict::Next),
        ("2001:db8::1", "2001:db8::53", denied()),
        ("2001:db8::1", "2001:db8::54", Verdict::Next),
        // IPv4 prefixes never match IPv6 packets, even ::/0-like ones.
        ("fd00::1", "fd00::2", Verdict::Next),
        // ...and every IPv4 packet matches the IPv4 catch-all.
        ("10.0.0.1", "10.0.0.2", denied()),
    ] {
        assert_eq!(verdict(&cfg, tcp(src, 1, dst, 2)), want, "{src} -> {dst}");
    }
    let cfg = json!({ "rules": [{ "action": "drop", "src": "::/0" }] });
    assert_eq!(
        verdict(&cfg, udp("10.0.0.1", 1, "10.0.0.2", 2)),
        Verdict::Next
    );
    assert_eq!(verdict(&cfg, udp("::1", 1, "::2", 2)), denied());
}

#[test]
fn protocols_by_name_and_number() {
    let frames = || {
        vec![
            udp("10.0.0.1", 1, "10.0.0.2", 2),
            tcp("10.0.0.1", 1, "10.0.0.2", 2),
            ping("10.0.0.1", "10.0.0.2", 5, false),
            ping("fd00::1", "fd00::2", 5, false),
        ]
    };
    let n = Verdict::Next;
    let d = denied();
    for (proto, want) in [
        (json!("udp"), [d, n, n, n]),
        (json!(17), [d, n, n, n]),
        (json!("tcp"), [n, d, n, n]),
        (json!(6), [n, d, n, n]),
        (json!("icmp"), [n, n, d, n]),
        (json!(1), [n, n, d, n]),
        (json!("icmpv6"), [n, n, n, d]),
        (json!(58), [n, n, n, d]),
        (json!(47), [n, n, n, n]),
        (json!(0), [n, n, n, n]),
    ] {
        let cfg = json!({ "rules": [{ "action": "drop", "proto": proto }] });
        assert_eq!(verdicts(cfg, &frames()), want, "proto {proto}");
    }
}

#[test]
fn port_numbers_and_ranges() {
    let cfg = json!({ "rules": [
        { "action": "drop", "proto": "udp", "dst_port": 53 },
        { "action": "drop", "proto": "tcp", "dst_port": "8000-8080" },
        { "action": "drop", "src_port": "0-1023", "dst_port": "1024-65535" },
    ]});
    for (f, want) in [
        (udp("10.0.0.1", 5000, "10.0.0.2", 53), denied()),
        (udp("10.0.0.1", 5000, "10.0.0.2", 54), Verdict::Next),
        (tcp("10.0.0.1", 5000, "10.0.0.2", 53), Verdict::Next),
        (tcp("10.0.0.1", 5000, "10.0.0.2", 7999), Verdict::Next),
        (tcp("10.0.0.1", 5000, "10.0.0.2", 8000), denied()),
        (tcp("10.0.0.1", 5000, "10.0.0.2", 8080), denied()),
        (tcp("10.0.0.1", 5000, "10.0.0.2", 8081), Verdict::Next),
        // Rule 2 (no proto): both ranges must hold, for tcp and udp alike.
        (udp("10.0.0.1", 1023, "10.0.0.2", 1024), denied()),
        (tcp("10.0.0.1", 0, "10.0.0.2", 65535), denied()),
        (tcp("10.0.0.1", 1024, "10.0.0.2", 1024), Verdict::Next),
        (udp("10.0.0.1", 80, "10.0.0.2", 1023), Verdict::Next),
        (udp("fd00::1", 80, "fd00::2", 2000), denied()),
    ] {
        let k = sluice_packet::flow_key(&f).unwrap();
        assert_eq!(verdict(&cfg, f), want, "{k}");
    }
}

#[test]
fn rules_with_ports_never_match_portless_protocols() {
    // ICMP echo flow keys carry the echo id in both port fields; a port
    // rule without `proto` must not match pings by their id.
    let cfg = json!({ "rules": [
        { "action": "drop", "dst_port": 53 },
        { "action": "drop", "src_port": "0-65535" },
    ]});
    assert_eq!(
        verdict(&cfg, ping("10.0.0.1", "10.0.0.2", 53, false)),
        Verdict::Next
    );
    assert_eq!(
        verdict(&cfg, ping("fd00::1", "fd00::2", 53, true)),
        Verdict::Next
    );
    assert_eq!(verdict(&cfg, udp("10.0.0.1", 9, "10.0.0.2", 53)), denied());
}

#[test]
fn non_ip_frames() {
    assert_eq!(verdict(&json!({}), arp()), Verdict::Next);
    assert_eq!(
        verdict(&json!({ "non_ip": "accept" }), arp()),
        Verdict::Next
    );
    assert_eq!(verdict(&json!({ "non_ip": "drop" }), arp()), non_ip());
    // `default` and rules do not apply to non-IP frames.
    let cfg = json!({ "default": "drop", "rules": [{ "action": "drop" }] });
    assert_eq!(verdict(&cfg, arp()), Verdict::Next);
    // Behind VLAN tags (up to two) too.
    let mut tagged = arp();
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x64, 0x88, 0xa8, 0x00, 0x01]);
    assert_eq!(
        verdict(&json!({ "non_ip": "drop" }), tagged.clone()),
        non_ip()
    );
    // A third tag is more than sluice parses: malformed, not non-IP.
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x02]);
    assert_eq!(
        verdict(&json!({ "non_ip": "accept" }), tagged),
        Verdict::Drop(DropReason::malformed(ParseError::TooManyVlanTags))
    );
    // An unknown EtherType is non-IP too.
    let mut other = arp();
    other[12..14].copy_from_slice(&[0x88, 0xcc]); // LLDP
    assert_eq!(verdict(&json!({ "non_ip": "drop" }), other), non_ip());
}

#[test]
fn malformed_frames_are_dropped_with_the_parse_error() {
    let mut truncated_ip = udp("10.0.0.1", 1, "10.0.0.2", 2);
    truncated_ip.truncate(14 + 10);
    let mut bad_udp_len = udp("10.0.0.1", 1, "10.0.0.2", 2);
    bad_udp_len[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&4u16.to_be_bytes());
    let mut bad_version = tcp("10.0.0.1", 1, "10.0.0.2", 2);
    bad_version[14] = 0x55;
    let mut short_arp = arp();
    short_arp.truncate(30);
    for (f, e) in [
        (vec![0u8; 9], ParseError::EthernetTruncated),
        (truncated_ip, ParseError::Ipv4Truncated),
        (bad_udp_len, ParseError::UdpBadLength),
        (bad_version, ParseError::Ipv4BadVersion),
        (short_arp, ParseError::ArpTruncated),
    ] {
        // Malformed is not "denied": even an accept-all ACL drops them, and
        // so does `non_ip: accept` for a broken ARP frame.
        let got = verdict(&json!({ "default": "accept", "non_ip": "accept" }), f);
        assert_eq!(got, Verdict::Drop(DropReason::malformed(e)), "{e:?}");
        assert_eq!(
            DropReason::malformed(e).name().unwrap(),
            format!("malformed:{}", e.name())
        );
    }
}

#[test]
fn counters() {
    let mut nf = build(
        "acl",
        json!({ "rules": [{ "action": "drop", "proto": "udp" }] }),
    );
    let mut h = Harness::new();
    let u = udp("10.0.0.1", 1, "10.0.0.2", 2);
    let t = tcp("10.0.0.1", 1, "10.0.0.2", 2);
    h.run(
        nf.as_mut(),
        &[u.clone(), t.clone(), u.clone(), t.clone(), t.clone()],
    );
    assert_eq!(c(&h, "accepted"), 3);
    assert_eq!(c(&h, "denied"), 2);
    // One scan per flow direction; the rest come from the cache.
    assert_eq!(c(&h, "rule_scans"), 2);
    // Non-IP and malformed frames are neither accepted nor denied.
    h.run(nf.as_mut(), &[arp(), vec![0; 5]]);
    assert_eq!((c(&h, "accepted"), c(&h, "denied")), (3, 2));
    assert_eq!(c(&h, "rule_scans"), 2);
}

/// A config under which the two directions of one flow get different
/// answers: requests to 10.0.0.2:80 pass, replies from it are dropped, and
/// for 10.0.0.3 it is the other way round.
fn asymmetric() -> Value {
    json!({ "default": "accept", "rules": [
        { "action": "drop", "src": "10.0.0.2", "src_port": 80, "proto": "udp" },
        { "action": "drop", "dst": "10.0.0.3" },
    ]})
}

#[test]
fn cache_answers_both_directions_like_the_uncached_scan() {
    // Both orders of first packet: the first packet of a flow may be in
    // the canonical direction or not.
    let flows = [
        (
            udp("10.0.0.1", 5000, "10.0.0.2", 80),
            udp("10.0.0.2", 80, "10.0.0.1", 5000),
        ),
        (
            udp("10.0.0.2", 80, "10.0.0.1", 5001),
            udp("10.0.0.1", 5001, "10.0.0.2", 80),
        ),
        (
            tcp("10.0.0.9", 1, "10.0.0.3", 2),
            tcp("10.0.0.3", 2, "10.0.0.9", 1),
        ),
        (
            tcp("10.0.0.3", 2, "10.0.0.9", 3),
            tcp("10.0.0.9", 3, "10.0.0.3", 2),
        ),
    ];
    let mut nf = build("acl", asymmetric());
    let mut h = Harness::new();
    for (fwd, rev) in &flows {
        assert_eq!(h.flow_id_of(fwd), h.flow_id_of(rev), "one flow id");
        // Uncached: a fresh ACL for each packet.
        let want_fwd = verdict(&asymmetric(), fwd.clone());
        let want_rev = verdict(&asymmetric(), rev.clone());
        assert_ne!(want_fwd, want_rev, "directions differ by construction");
        // Cached: alternate directions over several batches.
        for round in 0..3 {
            let input = vec![fwd.clone(), rev.clone(), rev.clone(), fwd.clone()];
            let got: Vec<Verdict> = h
                .run(nf.as_mut(), &input)
                .into_iter()
                .map(|o| o.verdict)
                .collect();
            assert_eq!(
                got,
                [want_fwd, want_rev, want_rev, want_fwd],
                "round {round}"
            );
        }
    }
    // Two scans per flow, one per direction, whatever the traffic volume.
    assert_eq!(c(&h, "rule_scans"), 2 * flows.len() as u64);
    // Concretely: flow 0 request passes, reply is dropped.
    assert_eq!(verdict(&asymmetric(), flows[0].0.clone()), Verdict::Next);
    assert_eq!(verdict(&asymmetric(), flows[0].1.clone()), denied());
}

#[test]
fn flow_end_and_reset_clear_the_cache() {
    let mut nf = build("acl", asymmetric());
    let mut h = Harness::new();
    let f = udp("10.0.0.1", 5000, "10.0.0.2", 80);
    let id = h.flow_id_of(&f).unwrap();
    h.run(nf.as_mut(), &[f.clone(), f.clone()]);
    assert_eq!(c(&h, "rule_scans"), 1);
    h.end_flow(nf.as_mut(), id);
    h.run(nf.as_mut(), std::slice::from_ref(&f));
    assert_eq!(c(&h, "rule_scans"), 2, "rescanned after flow end");
    nf.reset();
    h.run(nf.as_mut(), std::slice::from_ref(&f));
    assert_eq!(c(&h, "rule_scans"), 3, "rescanned after reset");
    h.end_flow(nf.as_mut(), u32::MAX); // out of range: ignored
}

#[test]
fn flow_ids_beyond_the_cache_still_get_the_right_answer() {
    // The harness gives frames without a flow id u32::MAX; the platform
    // never exceeds flow_capacity, but the ACL must not trust that.
    struct HighIds(Box<dyn NetworkFunction>);
    impl NetworkFunction for HighIds {
        fn process(&mut self, b: &mut sluice_nf::Batch<'_>, ctx: &mut sluice_nf::Context<'_>) {
            b.for_each(|p| p.raw().set_flow_id(FLOW_CAPACITY + 7));
            self.0.process(b, ctx)
        }
    }
    let mut nf = HighIds(build("acl", asymmetric()));
    let out = Harness::new().run(
        &mut nf,
        &[
            udp("10.0.0.1", 5000, "10.0.0.2", 80),
            udp("10.0.0.2", 80, "10.0.0.1", 5000),
        ],
    );
    assert_eq!(out[0].verdict, Verdict::Next);
    assert_eq!(out[1].verdict, denied());
}

/// Builds an ACL whose rule 1 is `rule` and returns the error.
fn rule1_error(rule: Value) -> sluice_spec::SpecError {
    build_err("acl", json!({ "rules": [{ "action": "accept" }, rule] }))
}

#[test]
fn config_errors_name_the_rule_field() {
    for (rule, field, words) in [
        (
            json!({ "action": "drop", "src": "10.0.0/33" }),
            "rules[1].src",
            "invalid prefix `10.0.0/33`",
        ),
        (
            json!({ "action": "drop", "dst": "fd00::/129" }),
            "rules[1].dst",
            "invalid prefix `fd00::/129`",
        ),
        (
            json!({ "action": "drop", "proto": "udp", "dst_port": "80-20" }),
            "rules[1].dst_port",
            "invalid port range `80-20`",
        ),
        (
            json!({ "action": "drop", "proto": "tcp", "src_port": "http" }),
            "rules[1].src_port",
            "invalid port range `http`",
        ),
        (
            json!({ "action": "drop", "src_port": 70000 }),
            "rules[1].src_port",
            "port 70000 is out of range 0-65535",
        ),
        (
            json!({ "action": "drop", "proto": "tpc" }),
            "rules[1].proto",
            "unknown protocol `tpc`",
        ),
        (
            json!({ "action": "drop", "proto": 256 }),
            "rules[1].proto",
            "protocol 256 is out of range 0-255",
        ),
        (
            json!({ "action": "drop", "proto": "icmp", "dst_port": 53 }),
            "rules[1].proto",
            "ports can only be matched for tcp, udp or sctp",
        ),
        (
            json!({ "action": "drop", "proto": 1, "src_port": "1-2" }),
            "rules[1].proto",
            "ports can only be matched for tcp, udp or sctp",
        ),
    ] {
        let e = rule1_error(rule.clone());
        assert_eq!(e.field, field, "{rule}: {e}");
        assert!(e.message.contains(words), "{rule}: {e}");
        assert!(e.to_string().contains(&format!("{field}: ")), "{e}");
    }
}

#[test]
fn config_errors_inside_a_spec_carry_the_full_path() {
    let node = sluice_spec::ConfigNode::from_json(json!({ "rules": [
        { "action": "accept" },
        { "action": "drop", "src": "10.0.0/33" },
    ]}))
    .with_path("nfs[0].config");
    let e = build_node("acl", &node).err().unwrap();
    assert_eq!(e.field, "nfs[0].config.rules[1].src");
    assert_eq!(
        e.to_string(),
        "<generated>: nfs[0].config.rules[1].src: invalid prefix `10.0.0/33` (expected e.g. 10.0.0.0/8 or 2001:db8::/32)"
    );
}

#[test]
fn structural_config_errors() {
    // Unknown action, unknown keys, missing action.
    let e = rule1_error(json!({ "action": "allow" }));
    assert!(e.message.contains("allow"), "{e}");
    assert!(e.field.starts_with("rules[1]"), "{e}");
    let e = rule1_error(json!({ "action": "drop", "port": 80 }));
    assert!(e.message.contains("port"), "{e}");
    let e = rule1_error(json!({ "src": "10.0.0.0/8" }));
    assert!(e.message.contains("action"), "{e}");
    let e = build_err("acl", json!({ "default": "deny" }));
    assert!(e.message.contains("deny"), "{e}");
    let e = build_err("acl", json!({ "rule": [] }));
    assert!(e.message.contains("rule"), "{e}");
}
