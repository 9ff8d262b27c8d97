//! `ids`: the rule parser (accepted and rejected syntax, exact errors),
//! matching (each content modifier, nocase, pcre, headers, flow, actions),
//! cross-segment TCP matching, the alert log, a property test against a
//! naive oracle, and a golden pcap run through the platform.

mod common;
use common::*;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{json, Value};
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};
use sluice_nfs::ids::engine::{Decision, Engine, Stats};
use sluice_nfs::ids::rule::{Action, AddrExpr, Direction, FlowDir, PayloadOpt, PortExpr, Proto};
use sluice_nfs::ids::rule_parser::{parse_rule, parse_rules_text, Vars};
use sluice_packet::{L4Spec, TcpFlags};
use sluice_spec::ConfigNode;

// ---------------------------------------------------------------- helpers

fn vars() -> Vars {
    let mut v = Vars::new();
    v.set("HOME_NET", "[10.1.0.0/16,2001:db8::/32]");
    v.set("EXTERNAL_NET", "!$HOME_NET");
    v.set("HTTP_PORTS", "[80,8080:8081]");
    v
}

/// The error `parse_rule` gives for `text`.
fn rule_err(text: &str) -> String {
    match parse_rule(text, &vars(), "t") {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

fn engine(config: Value) -> Engine {
    sluice_nfs::ids::build_engine(&ConfigNode::from_json(config), FLOW_CAPACITY)
        .unwrap_or_else(|e| panic!("config rejected: {e}"))
}

/// An engine with one `alert tcp any any -> any any (<opts> sid:1;)` rule.
fn one_rule(opts: &str) -> Engine {
    engine(json!({ "rules": [format!("alert tcp any any -> any any ({opts} sid:1;)")] }))
}

fn tcp_seg(src: &str, sport: u16, dst: &str, dport: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    frame(
        src,
        dst,
        L4Spec::Tcp {
            src_port: sport,
            dst_port: dport,
            seq,
            ack: 1,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 512,
        },
        payload,
    )
}

fn tcp_payload(payload: &[u8]) -> Vec<u8> {
    tcp_seg("10.0.0.1", 1234, "10.1.0.1", 80, 1, payload)
}

/// Whether `opts` alerts on one TCP packet carrying `payload`.
fn alerts(opts: &str, payload: &[u8]) -> bool {
    let mut e = one_rule(opts);
    assert_eq!(e.inspect(&tcp_payload(payload), 0, 0), Decision::Forward);
    e.take_stats().alerts == 1
}

// ----------------------------------------------------------------- parser

#[test]
fn descriptor() {
    let t = nf_type("ids");
    assert_eq!(t.drop_reasons, ["rule_drop"]);
    assert_eq!(
        t.counters,
        [
            "packets_inspected",
            "bytes_inspected",
            "alerts",
            "drops",
            "stream_reassembled_matches",
            "stream_gaps",
            "passes",
            "alert_log_dropped"
        ]
    );
}

#[test]
fn rules_file_must_be_a_regular_file_of_bounded_size() {
    check_refuses_odd_input_files("ids", json!({}), "rules_file");
}

#[test]
fn parses_a_full_rule() {
    let r = parse_rule(
        r#"drop tcp $EXTERNAL_NET ![1:1023,3389] <> $HOME_NET $HTTP_PORTS (msg:"a \"quoted\"; msg"; flow:to_server,established; content:"GET|20|/"; depth:5; content:!"x|3b|y"; nocase; distance:1; within:10; pcre:"/ab+c/iR"; sid:42; rev:3; classtype:web-application-attack; reference:url,example.org; metadata:policy balanced;)"#,
        &vars(),
        "f:1",
    )
    .unwrap();
    assert_eq!(r.action, Action::Drop);
    assert_eq!(r.proto, Proto::Tcp);
    assert_eq!(r.direction, Direction::Both);
    assert_eq!(r.msg, r#"a "quoted"; msg"#);
    assert_eq!((r.sid, r.rev), (42, 3));
    assert_eq!(r.classtype.as_deref(), Some("web-application-attack"));
    assert_eq!(r.flow.dir, FlowDir::ToServer);
    assert_eq!(r.flow.established, Some(true));
    assert_eq!(r.origin, "f:1");
    assert_eq!(
        r.src_ports,
        PortExpr::Not(Box::new(PortExpr::List(vec![
            PortExpr::Range(1, 1023),
            PortExpr::Range(3389, 3389)
        ])))
    );
    assert!(matches!(r.src, AddrExpr::Not(_)));
    assert!(r.src.contains(&"192.0.2.1".parse().unwrap()));
    assert!(!r.src.contains(&"10.1.2.3".parse().unwrap()));
    assert!(!r.src.contains(&"2001:db8::1".parse().unwrap()));
    assert!(r.dst_ports.contains(8081) && r.dst_ports.contains(80) && !r.dst_ports.contains(8082));
    assert_eq!(r.payload.len(), 3);
    let PayloadOpt::Content(c0) = &r.payload[0] else {
        panic!()
    };
    assert_eq!(c0.pattern, b"GET /");
    assert_eq!(
        (c0.depth, c0.offset, c0.negated, c0.nocase),
        (Some(5), None, false, false)
    );
    let PayloadOpt::Content(c1) = &r.payload[1] else {
        panic!()
    };
    assert_eq!(c1.pattern, b"x;y");
    assert!(c1.negated && c1.nocase);
    assert_eq!((c1.distance, c1.within), (Some(1), Some(10)));
    let PayloadOpt::Pcre(p) = &r.payload[2] else {
        panic!()
    };
    assert!(p.relative && !p.negated);
}

#[test]
fn snort3_content_modifiers_and_lists() {
    let r = parse_rule(
        r#"alert udp [10.0.0.0/8, !10.9.0.0/16] :1023 -> any 53: (content:"abc", nocase, offset 2, depth 4; sid:1)"#,
        &vars(),
        "t",
    )
    .unwrap();
    let PayloadOpt::Content(c) = &r.payload[0] else {
        panic!()
    };
    assert!(c.nocase);
    assert_eq!((c.offset, c.depth), (Some(2), Some(4)));
    assert!(r.src.contains(&"10.1.0.1".parse().unwrap()));
    assert!(!r.src.contains(&"10.9.0.1".parse().unwrap()));
    assert!(!r.src.contains(&"11.0.0.1".parse().unwrap()));
    assert_eq!(r.src_ports, PortExpr::Range(0, 1023));
    assert_eq!(r.dst_ports, PortExpr::Range(53, 65535));
}

#[test]
fn rejects_bad_rules_with_exact_errors() {
    for (text, want) in [
        ("alert tcp any any -> any any", "missing option list `( … )`"),
        ("alert tcp any any -> any any (sid:1;", "missing `)` at the end of the option list"),
        ("alert tcp any any any -> any any (sid:1;)", "the header needs 7 fields (action proto src_addr src_port direction dst_addr dst_port), found 8: `alert tcp any any any -> any any`"),
        ("log tcp any any -> any any (sid:1;)", "action: unsupported action `log` (alert, drop or pass)"),
        ("alert http any any -> any any (sid:1;)", "protocol: unsupported protocol `http` (tcp, udp, icmp or ip)"),
        ("alert tcp 10.0.0.300 any -> any any (sid:1;)", "source address: invalid address `10.0.0.300` (expected any, an address, a CIDR prefix, a [list] or a $VARIABLE)"),
        ("alert tcp $NOPE any -> any any (sid:1;)", "source address: undefined variable `$NOPE`"),
        ("alert tcp !any any -> any any (sid:1;)", "source address: `!any` matches no address"),
        ("alert tcp any 70000 -> any any (sid:1;)", "source port: invalid port `70000` (expected any, N, A:B, A:, :B, a [list] or a $VARIABLE; ports are 0-65535)"),
        ("alert tcp any any -> any 90:80 (sid:1;)", "destination port: port range `90:80` is reversed"),
        ("alert tcp any any => any any (sid:1;)", "direction: expected `->` or `<>`, got `=>`"),
        ("alert icmp any 1 -> any any (sid:1;)", "source port: must be `any` for icmp rules"),
        ("alert tcp any any -> any any (msg:\"x\";)", "missing `sid` option"),
        ("alert tcp any any -> any any (sid:0;)", "option `sid`: must be at least 1"),
        ("alert tcp any any -> any any (sid:1; sid:2;)", "option `sid`: given twice"),
        ("alert tcp any any -> any any (sid:x;)", "option `sid`: expected a non-negative integer, got `x`"),
        ("alert tcp any any -> any any (content:abc; sid:1;)", "option `content`: expected a quoted string, got `abc`"),
        ("alert tcp any any -> any any (content:\"\"; sid:1;)", "option `content`: empty content"),
        ("alert tcp any any -> any any (content:\"|4|\"; sid:1;)", "option `content`: odd number of hex digits in `|…|`"),
        ("alert tcp any any -> any any (content:\"|zz|\"; sid:1;)", "option `content`: invalid hex digit `z` in `|…|`"),
        ("alert tcp any any -> any any (content:\"|41\"; sid:1;)", "option `content`: unterminated `|` hex section"),
        ("alert tcp any any -> any any (content:\"a\\nb\"; sid:1;)", "option `content`: invalid escape `\\n` (escape only \", \\, ;, : and |; write other bytes as |hex|)"),
        ("alert tcp any any -> any any (content:\"abc\"; depth:2; sid:1;)", "option `depth`: depth 2 is shorter than the content (3 bytes)"),
        ("alert tcp any any -> any any (content:\"abc\"; within:2; sid:1;)", "option `within`: within 2 is shorter than the content (3 bytes)"),
        ("alert tcp any any -> any any (depth:2; sid:1;)", "option `depth`: must follow a `content` option"),
        ("alert tcp any any -> any any (content:\"a\"; offset:1; distance:2; sid:1;)", "option `distance`: cannot be combined with offset/depth on the same content"),
        ("alert tcp any any -> any any (content:\"a\"; within:2; depth:2; sid:1;)", "option `depth`: cannot be combined with distance/within on the same content"),
        ("alert tcp any any -> any any (content:\"a\"; offset:1; offset:2; sid:1;)", "option `offset`: given twice for the same content"),
        ("alert tcp any any -> any any (content:\"a\"; nocase:1; sid:1;)", "option `nocase`: takes no value, got `1`"),
        ("alert tcp any any -> any any (pcre:\"/(a)\\1/\"; sid:1;)", "option `pcre`: backreference `\\1` is not supported (the regex crate matches in linear time and has no backtracking-only features)"),
        ("alert tcp any any -> any any (pcre:\"/a(?=b)/\"; sid:1;)", "option `pcre`: lookahead `(?=` is not supported (the regex crate matches in linear time and has no backtracking-only features)"),
        ("alert tcp any any -> any any (pcre:\"/a/G\"; sid:1;)", "option `pcre`: unsupported flag `G` (supported: i, s, m, x, R)"),
        ("alert tcp any any -> any any (flow:to_server,to_client; sid:1;)", "option `flow`: conflicting directions"),
        ("alert tcp any any -> any any (flow:only_stream; sid:1;)", "option `flow`: unsupported flow keyword `only_stream` (to_server, from_client, to_client, from_server, established, not_established, stateless)"),
        ("alert tcp any any -> any any (byte_test:1,>,2,0; sid:1;)", "option `byte_test`: unsupported (supported: msg, content with nocase/offset/depth/distance/within/fast_pattern, pcre, flow, sid, rev, gid, classtype, reference, metadata, priority)"),
        ("alert tcp any any -> any any (msg:\"x; sid:1;)", "unterminated quoted string in the option list"),
    ] {
        assert_eq!(rule_err(text), want, "{text}");
    }
}

#[test]
fn rules_text_reports_file_and_line() {
    let text = "# comment\n\nvar WEB 10.1.0.0/16\nalert tcp any any -> $WEB 80 (msg:\"ok\"; \\\n  sid:1;)\n\nalert tcp any any -> any any (content:\"abcd\"; depth:3; sid:2;)\n";
    let err = parse_rules_text(text, "local.rules", &mut Vars::new()).unwrap_err();
    assert_eq!(
        err,
        "local.rules:7: option `depth`: depth 3 is shorter than the content (4 bytes)"
    );
    let ok = parse_rules_text(
        &text[..text
            .find("\n\nalert tcp any any -> any any (content")
            .unwrap()],
        "l",
        &mut Vars::new(),
    )
    .unwrap();
    assert_eq!(ok.len(), 1);
    assert_eq!(ok[0].origin, "l:4");
    assert!(ok[0].dst.contains(&"10.1.2.3".parse().unwrap()));
}

#[test]
fn config_errors_name_the_field_and_rule() {
    let e = build_err(
        "ids",
        json!({ "rules": ["alert tcp any any -> any any (sid:1;)", "alert tcp any any -> any any (content:\"ab\"; depth:1; sid:2;)"] }),
    );
    assert_eq!(e.field, "rules[1]");
    assert_eq!(
        e.message,
        "option `depth`: depth 1 is shorter than the content (2 bytes)"
    );
    let e = build_err(
        "ids",
        json!({ "rules": ["alert tcp any any -> any any (sid:7;)", "alert udp any any -> any any (sid:7;)"] }),
    );
    assert_eq!(e.field, "rules[1]");
    assert_eq!(
        e.message,
        "rules[1]: sid 7 is already used by the rule at rules[0]"
    );
    let e = build_err("ids", json!({}));
    assert_eq!(e.message, "no rules: give `rules_file` or `rules`");
    let e = build_err(
        "ids",
        json!({ "rules": ["alert tcp any any -> any any (sid:1;)"], "mode": "loud" }),
    );
    assert!(e.message.contains("unknown variant `loud`"), "{e}");
    let e = build_err("ids", json!({ "rules_file": "/nonexistent/x.rules" }));
    assert_eq!(e.field, "rules_file");
    assert!(
        e.message
            .starts_with("cannot read `/nonexistent/x.rules`: "),
        "{e}"
    );

    let dir = tmp_dir("cfgerr");
    let path = dir.join("bad.rules");
    std::fs::write(&path, "alert tcp any any -> any any (sid:1;)\nalert tcp any any -> any any (content:\"x\"; pcre:\"/(?<=a)b/\"; sid:2;)\n").unwrap();
    let e = build_err("ids", json!({ "rules_file": path.to_str().unwrap() }));
    assert_eq!(e.field, "rules_file");
    assert_eq!(
        e.message,
        format!("{}:2: option `pcre`: lookbehind `(?<=` is not supported (the regex crate matches in linear time and has no backtracking-only features)", path.display())
    );
}

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-ids-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

// --------------------------------------------------------------- matching

#[test]
fn content_and_nocase() {
    assert!(alerts(r#"content:"evil";"#, b"an evil payload"));
    assert!(!alerts(r#"content:"evil";"#, b"an EVIL payload"));
    assert!(alerts(r#"content:"evil"; nocase;"#, b"an EvIl payload"));
    assert!(alerts(r#"content:"|de ad|BE|ef|";"#, b"x\xde\xadBE\xefy"));
    assert!(!alerts(r#"content:"evil";"#, b"an evi"));
    // Negated content.
    assert!(alerts(
        r#"content:"GET"; content:!"Host";"#,
        b"GET / HTTP/1.0\r\n"
    ));
    assert!(!alerts(
        r#"content:"GET"; content:!"Host";"#,
        b"GET / HTTP/1.0\r\nHost: a\r\n"
    ));
    // Every content must match (the second is not the fast pattern).
    assert!(!alerts(
        r#"content:"longer pattern"; content:"zz";"#,
        b"a longer pattern"
    ));
    assert!(alerts(
        r#"content:"longer pattern"; content:"zz";"#,
        b"zz a longer pattern"
    ));
}

#[test]
fn offset_and_depth() {
    let opts = r#"content:"abc"; offset:2; depth:5;"#;
    assert!(alerts(opts, b"..abc...."));
    assert!(alerts(opts, b"....abc.."));
    assert!(!alerts(opts, b".abc......"), "starts before offset");
    assert!(!alerts(opts, b".....abc.."), "ends after offset+depth");
    assert!(alerts(r#"content:"abc"; depth:3;"#, b"abc"));
    assert!(!alerts(r#"content:"abc"; depth:3;"#, b"xabc"));
}

#[test]
fn distance_and_within() {
    let opts = r#"content:"ab"; content:"cd"; distance:2; within:4;"#;
    // window after "ab" ends at 2: [4, 8)
    assert!(alerts(opts, b"ab..cd.."));
    assert!(alerts(opts, b"ab....cd"));
    assert!(!alerts(opts, b"ab.cd..."), "too close");
    assert!(!alerts(opts, b"ab.....cd"), "too far");
    // Backtracking: the first "ab" fails, a later one succeeds.
    assert!(alerts(opts, b"ab.......ab..cd"));
    // Negative distance reaches back.
    assert!(alerts(
        r#"content:"world"; content:"hello"; distance:-11; within:5;"#,
        b"hello world"
    ));
    // distance alone: anywhere after.
    assert!(alerts(
        r#"content:"a1"; content:"b2"; distance:0;"#,
        b"a1......b2"
    ));
    assert!(!alerts(
        r#"content:"a1"; content:"b2"; distance:0;"#,
        b"b2......a1"
    ));
}

#[test]
fn pcre_options() {
    assert!(alerts(r#"pcre:"/user=[a-z]{3,}\d/";"#, b"GET /?user=bob7"));
    assert!(!alerts(r#"pcre:"/user=[a-z]{3,}\d/";"#, b"GET /?user=BOB7"));
    assert!(alerts(r#"pcre:"/user=[a-z]{3,}\d/i";"#, b"GET /?user=BOB7"));
    assert!(alerts(r#"pcre:"/^a.b$/s";"#, b"a\nb"));
    assert!(!alerts(r#"pcre:"/^a.b$/";"#, b"a\nb"));
    assert!(alerts(r#"pcre:"/^b$/m";"#, b"a\nb\nc"));
    assert!(alerts(r#"pcre:"/ a \x20 b /x";"#, b"a b"));
    // R: relative to the previous content.
    assert!(alerts(r#"content:"key="; pcre:"/^\d+/R";"#, b"x key=123"));
    assert!(!alerts(
        r#"content:"key="; pcre:"/^\d+/R";"#,
        b"x key=abc 123"
    ));
    // Negated.
    assert!(alerts(r#"content:"GET"; pcre:!"/admin/";"#, b"GET /index"));
    assert!(!alerts(r#"content:"GET"; pcre:!"/admin/";"#, b"GET /admin"));
}

fn stats_of(e: &mut Engine) -> Stats {
    e.take_stats()
}

#[test]
fn headers_flow_and_actions() {
    let mut e = engine(json!({
        "vars": { "HOME_NET": "10.1.0.0/16", "EXTERNAL_NET": "!$HOME_NET" },
        "rules": [
            "alert tcp $EXTERNAL_NET any -> $HOME_NET [80,443] (msg:\"x\"; content:\"x\"; sid:1;)",
            "alert udp any any <> 10.1.0.1 53 (content:\"q\"; sid:2;)",
            "alert icmp any any -> any any (sid:3;)",
            "alert tcp any any -> any !22 (flow:to_client; content:\"x\"; sid:4;)",
        ]
    }));
    let hits = |e: &mut Engine| {
        let mut v = Vec::new();
        e.take_rule_hits(|i, n| v.push((i, n)));
        v.sort();
        v
    };
    e.inspect(&tcp_seg("192.0.2.1", 5, "10.1.0.1", 443, 1, b"x"), 0, 0);
    assert_eq!(hits(&mut e), [(0, 1)], "sender is the client: to_server");
    e.inspect(&tcp_seg("10.1.0.2", 5, "10.1.0.1", 443, 1, b"x"), 1, 0);
    assert_eq!(hits(&mut e), [], "internal source is not EXTERNAL_NET");
    e.inspect(&tcp_seg("192.0.2.1", 5, "10.1.0.1", 8080, 1, b"x"), 2, 0);
    assert_eq!(hits(&mut e), [], "port not in list");
    // <>: both directions.
    e.inspect(
        &frame(
            "10.1.0.1",
            "192.0.2.9",
            L4Spec::Udp {
                src_port: 53,
                dst_port: 999,
            },
            b"q",
        ),
        3,
        0,
    );
    e.inspect(
        &frame(
            "192.0.2.9",
            "10.1.0.1",
            L4Spec::Udp {
                src_port: 999,
                dst_port: 53,
            },
            b"q",
        ),
        3,
        0,
    );
    e.inspect(
        &frame(
            "192.0.2.9",
            "10.1.0.1",
            L4Spec::Udp {
                src_port: 999,
                dst_port: 54,
            },
            b"q",
        ),
        4,
        0,
    );
    assert_eq!(hits(&mut e), [(1, 2)]);
    e.inspect(&ping("10.0.0.1", "10.0.0.2", 1, false), 5, 0);
    assert_eq!(hits(&mut e), [(2, 1)]);
    // flow:to_client: only the reply direction of flow 0.
    e.inspect(&tcp_seg("10.1.0.1", 443, "192.0.2.1", 5, 1, b"x"), 0, 0);
    assert_eq!(hits(&mut e), [(3, 1)]);
    let s = stats_of(&mut e);
    assert_eq!(s.packets_inspected, 8);
    assert_eq!(s.alerts, 5);
    assert_eq!(s.bytes_inspected, 4 + 3 + 4, "tcp, udp, icmp payloads");
}

#[test]
fn established_needs_the_handshake() {
    let mut e = one_rule(r#"flow:established,to_server; content:"x";"#);
    let l4 = |seq, flags| L4Spec::Tcp {
        src_port: 1,
        dst_port: 80,
        seq,
        ack: 0,
        flags,
        window: 9,
    };
    let rl4 = |seq, flags| L4Spec::Tcp {
        src_port: 80,
        dst_port: 1,
        seq,
        ack: 0,
        flags,
        window: 9,
    };
    let c = "10.0.0.1";
    let s = "10.0.0.2";
    e.inspect(&frame(c, s, l4(1, TcpFlags::SYN), b"x"), 0, 0);
    e.inspect(
        &frame(s, c, rl4(7, TcpFlags::SYN | TcpFlags::ACK), b""),
        0,
        0,
    );
    assert_eq!(e.take_stats().alerts, 0);
    e.inspect(&frame(c, s, l4(2, TcpFlags::ACK), b"x"), 0, 0);
    assert_eq!(e.take_stats().alerts, 1);
}

#[test]
fn ips_drops_ids_alerts_and_pass_stops() {
    let rules = json!([
        "pass tcp 10.0.0.9 any -> any any (sid:10;)",
        "drop tcp any any -> any 80 (msg:\"bad\"; content:\"bad\"; sid:11;)",
        "alert tcp any any -> any any (content:\"bad\"; sid:12;)",
    ]);
    let frames = vec![
        tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 1, b"bad"),
        tcp_seg("10.0.0.9", 1, "10.1.0.1", 80, 1, b"bad"),
        tcp_seg("10.0.0.1", 1, "10.1.0.1", 81, 1, b"bad"),
        tcp_seg("10.0.0.1", 2, "10.1.0.1", 80, 1, b"good"),
    ];
    let dropped = Verdict::Drop(DropReason::nf_local(reason_index("ids", "rule_drop")));
    let c = |h: &Harness, n: &str| h.counter(counter_index("ids", n));

    let mut nf = build("ids", json!({ "mode": "ips", "rules": rules.clone() }));
    let mut h = Harness::new();
    let v: Vec<Verdict> = h
        .run(nf.as_mut(), &frames)
        .into_iter()
        .map(|o| o.verdict)
        .collect();
    assert_eq!(v, [dropped, Verdict::Next, Verdict::Next, Verdict::Next]);
    // Per-rule counts are extended counters, by rule index.
    assert_eq!(
        [h.ext_counter(0), h.ext_counter(1), h.ext_counter(2)],
        [0, 1, 1]
    );
    // Frame 0: drop (evaluation stops before sid 12); frame 1: pass;
    // frame 2: sid 12 only (port 81).
    assert_eq!(c(&h, "alerts"), 2);
    assert_eq!(c(&h, "drops"), 1);
    assert_eq!(c(&h, "passes"), 1);
    assert_eq!(c(&h, "packets_inspected"), 4);

    let mut nf = build("ids", json!({ "rules": rules }));
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &frames);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    assert!(
        out.iter().zip(&frames).all(|(o, f)| &o.frame == f),
        "never rewritten"
    );
    // IDS mode: the drop rule alerts and evaluation goes on to sid 12.
    assert_eq!(c(&h, "alerts"), 3);
    assert_eq!(c(&h, "drops"), 0);
}

#[test]
fn malformed_and_non_ip() {
    let mut nf = build(
        "ids",
        json!({ "rules": ["alert ip any any -> any any (sid:1;)"] }),
    );
    let mut bad = tcp_payload(b"x");
    bad[14] = 0x41; // IPv4 with IHL 1
    let out = Harness::new().run(nf.as_mut(), &[bad, arp()]);
    assert!(
        matches!(out[0].verdict, Verdict::Drop(r) if r.name().unwrap().starts_with("malformed:"))
    );
    assert_eq!(out[1].verdict, Verdict::Next);
}

// ----------------------------------------------------------------- stream

#[test]
fn content_split_across_in_order_segments_matches() {
    let mut e = one_rule(r#"content:"cmd.exe"; nocase;"#);
    let a = tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 100, b"GET /scripts/CM");
    let b = tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 115, b"D.EXE?/c+dir");
    assert_eq!(e.inspect(&a, 3, 0), Decision::Forward);
    assert_eq!(e.take_stats().alerts, 0);
    e.inspect(&b, 3, 0);
    let s = e.take_stats();
    assert_eq!(
        (s.alerts, s.stream_reassembled_matches, s.stream_gaps),
        (1, 1, 0)
    );
    // The same bytes again (a retransmission) are a gap: no second alert.
    e.inspect(&b, 3, 0);
    let s = e.take_stats();
    assert_eq!((s.alerts, s.stream_gaps), (0, 1));
}

#[test]
fn carry_spans_several_short_segments_and_relative_options() {
    // One content over three segments: the tail (6 bytes) keeps growing.
    let mut e = one_rule(r#"content:"cmd.exe";"#);
    let mut seq = 1;
    for part in [&b"GET /cm"[..], b"d.", b"exe"] {
        e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, seq, part), 0, 0);
        seq += part.len() as u32;
    }
    let s = e.take_stats();
    assert_eq!((s.alerts, s.stream_reassembled_matches), (1, 1));
    // A relative chain whose first content straddles the boundary.
    let mut e = one_rule(r#"content:"cmd"; content:".exe"; distance:0; within:4;"#);
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 1, b"GET /cm"), 0, 0);
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 8, b"d.exe"), 0, 0);
    let s = e.take_stats();
    assert_eq!((s.alerts, s.stream_reassembled_matches), (1, 1));
    let mut e = one_rule(r#"content:"cmd"; content:".exe"; distance:0; within:4;"#);
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 1, b"GET /cm"), 0, 0);
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 8, b"d..exe"), 0, 0);
    assert_eq!(e.take_stats().alerts, 0, "within 4 of the end of cmd");
}

#[test]
fn out_of_order_segments_do_not_match_and_are_counted() {
    let mut e = one_rule(r#"content:"cmd.exe";"#);
    let a = tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 100, b"GET /cm");
    let b = tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 107, b"d.exe");
    e.inspect(&b, 0, 0);
    e.inspect(&a, 0, 0);
    let s = e.take_stats();
    assert_eq!(
        (s.alerts, s.stream_gaps),
        (0, 1),
        "b first: nothing to compare; a: gap"
    );
    // A hole between segments.
    let mut e = one_rule(r#"content:"cmd.exe";"#);
    e.inspect(&a, 0, 0);
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 108, b"d.exe"), 0, 0);
    let s = e.take_stats();
    assert_eq!((s.alerts, s.stream_gaps), (0, 1));
    // Other direction and other flows never share a tail.
    let mut e = one_rule(r#"content:"cmd.exe";"#);
    e.inspect(&a, 0, 0);
    e.inspect(&tcp_seg("10.1.0.1", 80, "10.0.0.1", 1, 107, b"d.exe"), 0, 0);
    e.inspect(&tcp_seg("10.0.0.2", 1, "10.1.0.1", 80, 107, b"d.exe"), 1, 0);
    assert_eq!(e.take_stats().alerts, 0);
    // flow_end forgets the tail.
    let mut e = one_rule(r#"content:"cmd.exe";"#);
    e.inspect(&a, 0, 0);
    e.flow_end(0);
    e.inspect(&b, 0, 0);
    assert_eq!(e.take_stats().alerts, 0);
}

#[test]
fn no_stream_matching_when_disabled_or_absolute() {
    let mut e = engine(
        json!({ "stream": false, "rules": ["alert tcp any any -> any any (content:\"cmd.exe\"; sid:1;)"] }),
    );
    e.inspect(
        &tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 100, b"GET /cm"),
        0,
        0,
    );
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 107, b"d.exe"), 0, 0);
    assert_eq!(e.take_stats().alerts, 0);
    // offset/depth are positions in a packet: no cross-segment match.
    let mut e = one_rule(r#"content:"cmd.exe"; depth:100;"#);
    e.inspect(
        &tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 100, b"GET /cm"),
        0,
        0,
    );
    e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 107, b"d.exe"), 0, 0);
    assert_eq!(e.take_stats().alerts, 0);
}

// -------------------------------------------------------------- alert log

#[test]
fn alert_log_lines_and_bound() {
    let dir = tmp_dir("log");
    let path = dir.join("alerts.json");
    let rules = json!(["alert tcp any any -> any any (msg:\"say \\\"hi\\\"\"; content:\"hi\"; classtype:misc-activity; sid:5; rev:2;)"]);
    let mut nf = build(
        "ids",
        json!({ "alert_log": path.to_str().unwrap(), "rules": rules.clone() }),
    );
    let mut h = Harness::new();
    h.run(
        nf.as_mut(),
        &[tcp_seg("10.0.0.1", 7, "10.1.0.1", 80, 1, b"hi")],
    );
    // Buffered: nothing written by the packet path until a flush (the file
    // is not even created before the first one).
    assert!(!path.exists());
    h.tick(nf.as_mut());
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        "{\"ts_ns\":1000000000,\"sid\":5,\"rev\":2,\"msg\":\"say \\\"hi\\\"\",\"classtype\":\"misc-activity\",\"action\":\"alert\",\"stream\":false,\"proto\":\"tcp\",\"src\":\"10.0.0.1\",\"src_port\":7,\"dst\":\"10.1.0.1\",\"dst_port\":80}\n"
    );
    let line_len = text.len() as u64;
    // Bounded: room for two lines; a buffer of 4 loses the rest.
    let mut nf = build(
        "ids",
        json!({ "alert_log": path.to_str().unwrap(), "alert_log_max_bytes": 2 * line_len + 10, "alert_buffer": 4, "rules": rules }),
    );
    let mut h = Harness::new();
    let frames = vec![tcp_seg("10.0.0.1", 7, "10.1.0.1", 80, 1, b"hi"); 6];
    h.run(nf.as_mut(), &frames);
    // One batch: 4 buffered (2 written, 2 over the bound), 2 refused.
    assert_eq!(h.counter(counter_index("ids", "alerts")), 6);
    assert_eq!(h.counter(counter_index("ids", "alert_log_dropped")), 4);
    h.stop(nf.as_mut());
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
}

#[test]
fn building_an_ids_leaves_its_alert_log_alone() {
    // `sluice validate` builds every NF: an existing log must survive it.
    let dir = tmp_dir("validate");
    let path = dir.join("alerts.json");
    std::fs::write(&path, "yesterday's alerts\n").unwrap();
    let rules = json!(["alert tcp any any -> any any (content:\"hi\"; sid:1;)"]);
    drop(build(
        "ids",
        json!({ "alert_log": path.to_str().unwrap(), "rules": rules.clone() }),
    ));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "yesterday's alerts\n"
    );
    // A path that cannot be written is a config error at the field.
    let e = build_err(
        "ids",
        json!({ "alert_log": dir.to_str().unwrap(), "rules": rules.clone() }),
    );
    assert_eq!(e.field, "alert_log");
    assert!(e.message.contains("is a directory"), "{}", e.message);
    let e = build_err(
        "ids",
        json!({ "alert_log": dir.join("no/such/dir/a.json").to_str().unwrap(), "rules": rules }),
    );
    assert_eq!(e.field, "alert_log");
}

#[test]
fn a_restarted_ids_appends_to_the_alert_log_and_a_new_run_starts_it_anew() {
    let dir = tmp_dir("restart");
    let path = dir.join("alerts.json");
    let config = ConfigNode::from_json(json!({
        "alert_log": path.to_str().unwrap(),
        "rules": ["alert tcp any any -> any any (content:\"hi\"; sid:1;)"],
    }));
    let alert_once = |restarts: u32| {
        let mut e =
            sluice_nfs::ids::build_engine_restarted(&config, FLOW_CAPACITY, restarts).unwrap();
        e.inspect(&tcp_seg("10.0.0.1", 7, "10.1.0.1", 80, 1, b"hi"), 0, 1);
        e.flush_log(2);
    };
    let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
    alert_once(0);
    assert_eq!(lines(), 1);
    // Restarted instances keep the alerts that led up to the crash.
    alert_once(1);
    alert_once(2);
    assert_eq!(lines(), 3);
    // The next run's first instance starts the log anew.
    alert_once(0);
    assert_eq!(lines(), 1);
}

// --------------------------------------------------------------- property

/// Naive oracle: an occurrence of `c` lies in `[offset, offset + depth)`.
fn oracle(payload: &[u8], c: &[u8], offset: usize, depth: Option<usize>) -> bool {
    let end = depth.map_or(payload.len(), |d| (offset + d).min(payload.len()));
    (offset..end).any(|i| i + c.len() <= end && &payload[i..i + c.len()] == c)
}

fn content_hex(c: &[u8]) -> String {
    let hex: Vec<String> = c.iter().map(|b| format!("{b:02x}")).collect();
    format!("|{}|", hex.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn content_matches_iff_present(
        c in proptest::collection::vec(b'a'..=b'd', 1..6),
        prefix in proptest::collection::vec(b'a'..=b'e', 0..40),
        suffix in proptest::collection::vec(b'a'..=b'e', 0..40),
        insert in any::<bool>(),
    ) {
        let mut payload = prefix.clone();
        if insert {
            payload.extend_from_slice(&c);
        }
        payload.extend_from_slice(&suffix);
        let want = oracle(&payload, &c, 0, None);
        prop_assert!(want || !insert);
        let opts = format!("content:\"{}\";", content_hex(&c));
        prop_assert_eq!(alerts(&opts, &payload), want);
    }

    #[test]
    fn long_payloads_match_iff_present(
        c in proptest::collection::vec(b'a'..=b'c', 3..24),
        len in 256usize..1460,
        at_frac in 0.0f64..1.0,
        insert in any::<bool>(),
        seed in any::<u64>(),
    ) {
        // Long payloads take the multi-lane scan: an occurrence anywhere,
        // including across the lanes' slice boundaries, must be found.
        let mut x = seed | 1;
        let mut payload: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 4) as u8
            })
            .collect();
        if insert {
            let at = ((len - c.len()) as f64 * at_frac) as usize;
            payload[at..at + c.len()].copy_from_slice(&c);
        }
        let opts = format!("content:\"{}\";", content_hex(&c));
        prop_assert_eq!(alerts(&opts, &payload), oracle(&payload, &c, 0, None));
    }

    #[test]
    fn offset_depth_window_is_exact(
        c in proptest::collection::vec(b'a'..=b'c', 1..4),
        payload in proptest::collection::vec(b'a'..=b'c', 1..60),
        offset in 0usize..30,
        extra in proptest::option::of(0usize..20),
    ) {
        let depth = extra.map(|e| e + c.len());
        let mut opts = format!("content:\"{}\"; offset:{offset};", content_hex(&c));
        if let Some(d) = depth {
            opts.push_str(&format!(" depth:{d};"));
        }
        prop_assert_eq!(alerts(&opts, &payload), oracle(&payload, &c, offset, depth));
    }

    #[test]
    fn split_anywhere_still_matches(
        c in proptest::collection::vec(b'a'..=b'z', 2..12),
        pre in proptest::collection::vec(b'0'..=b'9', 0..20),
        post in proptest::collection::vec(b'0'..=b'9', 0..20),
        cut_frac in 0.0f64..1.0,
    ) {
        let mut whole = pre.clone();
        whole.extend_from_slice(&c);
        whole.extend_from_slice(&post);
        let cut = 1 + ((whole.len() - 1) as f64 * cut_frac) as usize;
        let mut e = one_rule(&format!("content:\"{}\";", content_hex(&c)));
        e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 50, &whole[..cut]), 0, 0);
        e.inspect(&tcp_seg("10.0.0.1", 1, "10.1.0.1", 80, 50 + cut as u32, &whole[cut..]), 0, 0);
        prop_assert_eq!(e.take_stats().alerts, 1);
    }
}

// ----------------------------------------------------------------- golden

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ids")
        .join(name)
}

/// The frames of a classic little-endian pcap file.
fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let d = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Microsecond (scapy) or nanosecond (sluice's pcap_out) little-endian.
    assert!(
        matches!(&d[..4], [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]),
        "{}",
        path.display()
    );
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= d.len() {
        let incl = u32::from_le_bytes(d[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(d[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    out
}

#[test]
fn golden_http_stream_through_the_platform() {
    let dir = tmp_dir("golden");
    let out = dir.join("out.pcap");
    let log = dir.join("alerts.json");
    let spec = format!(
        r#"ports:
  - {{ name: trace, kind: pcap_in, path: "{input}" }}
  - {{ name: dump, kind: pcap_out, path: "{out}" }}
nfs:
  - name: ids
    type: ids
    isolation: inline
    config:
      mode: ips
      rules_file: "{rules}"
      alert_log: "{log}"
      vars: {{ HOME_NET: "10.1.0.0/16", EXTERNAL_NET: "!$HOME_NET" }}
chains:
  - {{ name: main, from: trace, nfs: [ids], to: dump }}
"#,
        input = fixture("ids_in.pcap").display(),
        out = out.display(),
        rules = fixture("ids.rules").display(),
        log = log.display(),
    );
    let names: Vec<&str> = sluice_nfs::REGISTRY.iter().map(|t| t.name).collect();
    let spec = sluice_spec::parse_str(&spec, "ids_golden.yaml", &names).unwrap();
    let r = sluice_dataplane::run(
        &spec,
        sluice_nfs::REGISTRY,
        sluice_dataplane::RunOptions {
            duration: Some(std::time::Duration::from_secs(30)),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(r.packets_in, 42, "{r:#?}");
    assert_eq!(r.packets_out, 41, "{r:#?}");
    assert_eq!(r.drops.get("ids:rule_drop"), Some(&1), "{r:#?}");
    assert_eq!(r.drops_total, 1, "{r:#?}");
    assert_eq!(r.unaccounted, 0);
    let c = &r.nfs[0].counters;
    assert_eq!(c["packets_inspected"], 42, "{c:?}");
    assert_eq!(c["alerts"], 3, "{c:?}");
    assert_eq!(c["drops"], 1, "{c:?}");
    assert_eq!(c["stream_reassembled_matches"], 1, "{c:?}");
    assert_eq!(c["stream_gaps"], 2, "{c:?}");
    assert_eq!(c["passes"], 5, "{c:?}");
    assert_eq!(c["alert_log_dropped"], 0, "{c:?}");

    let got = read_pcap(&out);
    let want = read_pcap(&fixture("ids_expected.pcap"));
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}");
    }

    let text = std::fs::read_to_string(&log).unwrap();
    let alerts: Vec<String> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {} {} {}:{} {}:{}",
                v["sid"],
                v["action"].as_str().unwrap(),
                v["stream"],
                v["src"].as_str().unwrap(),
                v["src_port"],
                v["dst"].as_str().unwrap(),
                v["dst_port"]
            )
        })
        .collect();
    let want: Vec<String> = std::fs::read_to_string(fixture("ids_expected_alerts.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(alerts, want);
}
