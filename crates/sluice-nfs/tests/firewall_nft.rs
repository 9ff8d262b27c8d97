//! Differential test against Linux: the same packets go through the
//! firewall NF (in the harness) and through nftables in a network namespace
//! (`firewall_nft/ruleset.nft`: `ct state established,related accept`,
//! `ct state invalid drop`, then the same rules), and every packet must get
//! the same fate: passed, dropped, or answered with a reject.
//!
//! Needs root, `ip`, `nft` (Debian package nftables, installed by
//! `.ci/run`) and python3; skips with a message otherwise. The namespaces
//! are removed by the script even when it fails.

mod common;
mod firewall_support;
use common::*;
use firewall_support::*;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::Verdict;

const C: &str = "10.1.0.2";
const S: &str = "10.2.0.2";
const C6: &str = "fd01::2";
const S6: &str = "fd02::2";

#[path = "firewall_nft/frames.rs"]
mod frames;
use frames::*;

/// One test frame and how long to wait before sending it (ms).
struct Sent {
    frame: Vec<u8>,
    delay_ms: u32,
}

/// A UDP datagram with `n` bytes of payload.
fn udp_n(src: &str, sport: u16, dst: &str, dport: u16, n: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    frame(
        src,
        dst,
        sluice_packet::L4Spec::Udp {
            src_port: sport,
            dst_port: dport,
        },
        &payload,
    )
}

/// The original 28 packets, then TCP window tracking and scaling,
/// checksums, IPv4 and IPv6 fragments. IPv4 frames get a distinct
/// identification (fragments: their datagram's), IPv6 frames a distinct
/// flow label (per datagram), so the Linux side recognises them after
/// forwarding.
fn packets() -> Vec<Sent> {
    let get = b"GET / HTTP/1.0\r\n\r\n";
    let ok = b"HTTP/1.0 200 OK\r\n\r\n";
    let (g, o) = (get.len() as u32, ok.len() as u32);
    let dns_q = udp(C, 3333, S, 53);
    let mut v = vec![
        // 0-7: a whole accepted connection.
        tcp_seg(C, 40000, S, 80, SYN, 1000, 0, b""),
        tcp_seg(S, 80, C, 40000, SYN | ACK, 5000, 1001, b""),
        tcp_seg(C, 40000, S, 80, ACK, 1001, 5001, b""),
        tcp_seg(C, 40000, S, 80, ACK | PSH, 1001, 5001, get),
        tcp_seg(S, 80, C, 40000, ACK | PSH, 5001, 1001 + g, ok),
        tcp_seg(C, 40000, S, 80, FIN | ACK, 1001 + g, 5001 + o, b""),
        tcp_seg(S, 80, C, 40000, FIN | ACK, 5001 + o, 1002 + g, b""),
        tcp_seg(C, 40000, S, 80, ACK, 1002 + g, 5002 + o, b""),
        // 8-11: blocked, rejected (RST, ICMP), server may not open.
        tcp_seg(C, 40001, S, 22, SYN, 77, 0, b""),
        tcp_seg(C, 40002, S, 23, SYN, 4242, 0, b""),
        udp(C, 40003, S, 9),
        tcp_seg(S, 80, C, 40009, SYN, 9, 0, b""),
        // 12-13: picked up mid-stream (tcp_loose), its reply passes.
        tcp_seg(C, 40004, S, 80, ACK | PSH, 700, 900, b"more"),
        tcp_seg(S, 80, C, 40004, ACK, 900, 704, b""),
        // 14-16: ping, its reply, an unsolicited reply.
        ping(C, S, 7, false),
        ping(S, C, 7, true),
        ping(S, C, 8, true),
        // 17-20: DNS, its reply, a related ICMP error, an unrelated one.
        dns_q.clone(),
        udp(S, 53, C, 3333),
        icmp_error(S, C, 3, 3, ip_of(&dns_q)),
        icmp_error(S, C, 3, 3, ip_of(&udp(C, 3334, S, 53))),
        // 21-22: invalid flags, a FIN opening nothing.
        tcp_seg(C, 40005, S, 80, SYN | FIN, 1, 0, b""),
        tcp_seg(C, 40010, S, 80, FIN | ACK, 1, 1, b""),
        // 23: mid-stream data to telnet: NEW, rejected with a RST.
        tcp_seg(C, 40006, S, 23, ACK | PSH, 10, 20, b"hi"),
        // 24: the server opening UDP: no rule.
        udp(S, 53, C, 3335),
        // 25-27: SYN, an ACK in SYN_SENT (invalid), the server's RST.
        tcp_seg(C, 40011, S, 80, SYN, 300, 0, b""),
        tcp_seg(C, 40011, S, 80, ACK, 301, 1, b""),
        tcp_seg(S, 80, C, 40011, RST | ACK, 0, 301, b""),
        // 28-32: a connection with data, acknowledged.
        tcp_seg(C, 41000, S, 80, SYN, 1000, 0, b""),
        tcp_seg(S, 80, C, 41000, SYN | ACK, 5000, 1001, b""),
        tcp_seg(C, 41000, S, 80, ACK, 1001, 5001, b""),
        tcp_seg(C, 41000, S, 80, ACK | PSH, 1001, 5001, b"hello"),
        tcp_seg(S, 80, C, 41000, ACK, 5001, 1006, b""),
        // 33: data beyond the receiver's window (SEQ over upper bound).
        tcp_seg(C, 41000, S, 80, ACK | PSH, 101_006, 5001, b"x"),
        // 34: an ACK of data never sent (ACK over upper bound).
        tcp_seg(S, 80, C, 41000, ACK, 5001, 51_006, b""),
        // 35: a RST far out of the window; 36: one at the expected SEQ.
        tcp_seg(C, 41000, S, 80, RST, 201_006, 0, b""),
        tcp_seg(C, 41000, S, 80, RST | ACK, 1006, 5001, b""),
    ];
    // 37-41: window scaling offered by both (shift 7, windows of 1024):
    // data 60000 bytes ahead is inside the 128 KiB scaled window.
    // 42-46: the SYN/ACK offers none, so no scaling: the same is not.
    let ws = [1, 3, 3, 7];
    for (port, both) in [(41002u16, true), (41003, false)] {
        let win = |f: Vec<u8>| {
            let mut f = f;
            f[48..50].copy_from_slice(&1024u16.to_be_bytes());
            fix_l4_checksum(&mut f);
            f
        };
        let syn = win(tcp_seg(C, port, S, 80, SYN, 2000, 0, b""));
        let syn_ack = win(tcp_seg(S, 80, C, port, SYN | ACK, 7000, 2001, b""));
        v.push(with_tcp_options(&syn, &ws));
        v.push(if both {
            with_tcp_options(&syn_ack, &ws)
        } else {
            syn_ack
        });
        v.push(win(tcp_seg(C, port, S, 80, ACK, 2001, 7001, b"")));
        v.push(win(tcp_seg(S, 80, C, port, ACK, 7001, 2001, b"")));
        v.push(win(tcp_seg(
            C,
            port,
            S,
            80,
            ACK | PSH,
            62_001,
            7001,
            b"data",
        )));
    }
    // 47: a SYN with a bad IP header checksum; 48: a DNS query with a bad
    // UDP checksum; 49: one with none (0: allowed over IPv4); 50: a ping
    // with a bad ICMP checksum; 51: data of 41002 with a bad TCP
    // checksum, 52: the same with a good one.
    let mut bad_ip = tcp_seg(C, 41004, S, 80, SYN, 1, 0, b"");
    bad_ip[24] ^= 0x11;
    let mut bad_udp = udp(C, 3340, S, 53);
    bad_udp[40] ^= 0x22;
    let mut no_udp = udp(C, 3341, S, 53);
    no_udp[40..42].copy_from_slice(&[0, 0]);
    let mut bad_icmp = ping(C, S, 9, false);
    bad_icmp[36] ^= 0x33;
    let good = tcp_seg(C, 41002, S, 80, ACK | PSH, 2001, 7001, b"abc");
    let mut bad_tcp = good.clone();
    bad_tcp[50] ^= 0x44;
    v.extend([bad_ip, bad_udp, no_udp, bad_icmp, bad_tcp, good]);
    let mut out: Vec<Sent> = v
        .into_iter()
        .enumerate()
        .map(|(i, mut f)| {
            set_ip_id(&mut f, 0x4000 + i as u16);
            Sent {
                frame: f,
                delay_ms: 0,
            }
        })
        .collect();
    let push =
        |out: &mut Vec<Sent>, f: Vec<u8>, delay_ms: u32| out.push(Sent { frame: f, delay_ms });
    // IPv4 fragments of UDP datagrams to DNS (1208 bytes of IP payload),
    // cut at 600: 53-54 in order, 55-56 out of order, 57-59 overlapping
    // (the whole datagram goes; the proper last fragment then waits
    // alone), 60-62 a duplicate first fragment, 63-64 the last fragment
    // after the first timed out (1 s), 65-66 to a port no rule allows,
    // 67-68 to a rejected port (ICMP unreachable for the datagram),
    // 69-70 a first fragment with a bad header checksum, 71-73 a 3508-byte
    // datagram in three, 74-75 a bad UDP checksum seen after reassembly.
    let d = |sport: u16, dport: u16, n: usize| udp_n(C, sport, S, dport, n);
    let (a, b) = (0..600, 600..1208);
    let f0 = d(3400, 53, 1200);
    push(&mut out, fragment_v4(&f0, a.clone(), true, 0x5000), 0);
    push(&mut out, fragment_v4(&f0, b.clone(), false, 0x5000), 0);
    let f1 = d(3401, 53, 1200);
    push(&mut out, fragment_v4(&f1, b.clone(), false, 0x5001), 0);
    push(&mut out, fragment_v4(&f1, a.clone(), true, 0x5001), 0);
    let f2 = d(3402, 53, 1200);
    push(&mut out, fragment_v4(&f2, a.clone(), true, 0x5002), 0);
    push(&mut out, fragment_v4(&f2, 592..1208, false, 0x5002), 0);
    push(&mut out, fragment_v4(&f2, b.clone(), false, 0x5002), 0);
    let f3 = d(3403, 53, 1200);
    push(&mut out, fragment_v4(&f3, a.clone(), true, 0x5003), 0);
    push(&mut out, fragment_v4(&f3, a.clone(), true, 0x5003), 0);
    push(&mut out, fragment_v4(&f3, b.clone(), false, 0x5003), 0);
    let f4 = d(3404, 53, 1200);
    push(&mut out, fragment_v4(&f4, a.clone(), true, 0x5004), 0);
    push(&mut out, fragment_v4(&f4, b.clone(), false, 0x5004), 1500);
    let f5 = d(3405, 54, 1200);
    push(&mut out, fragment_v4(&f5, a.clone(), true, 0x5005), 0);
    push(&mut out, fragment_v4(&f5, b.clone(), false, 0x5005), 0);
    let f6 = d(3406, 9, 1200);
    push(&mut out, fragment_v4(&f6, a.clone(), true, 0x5006), 0);
    push(&mut out, fragment_v4(&f6, b.clone(), false, 0x5006), 0);
    let f7 = d(3407, 53, 1200);
    let mut bad_first = fragment_v4(&f7, a.clone(), true, 0x5007);
    bad_first[25] ^= 0x55;
    push(&mut out, bad_first, 0);
    push(&mut out, fragment_v4(&f7, b.clone(), false, 0x5007), 0);
    let f8 = d(3408, 53, 3500);
    for (k, f) in fragments_v4(&f8, &[1480, 1480, 0], 0x5008)
        .into_iter()
        .enumerate()
    {
        let _ = k;
        push(&mut out, f, 0);
    }
    let f9 = d(3409, 53, 1200);
    push(&mut out, fragment_v4(&f9, a.clone(), true, 0x5009), 0);
    let mut corrupt = fragment_v4(&f9, b.clone(), false, 0x5009);
    corrupt[100] ^= 0x66;
    push(&mut out, corrupt, 0);
    // IPv6: 76 a DNS query; fragments cut at 600 of 1208 bytes: 77-78 in
    // order, 79-80 out of order, 81-83 overlapping (RFC 5722: all go),
    // 84-85 the last after the first timed out (1 s).
    let d6 = |sport: u16| udp_n(C6, sport, S6, 53, 1200);
    let mut q6 = udp(C6, 3500, S6, 53);
    set_flow_label(&mut q6, 0x60000);
    push(&mut out, q6, 0);
    let label = |mut f: Vec<u8>, l: u32| {
        set_flow_label(&mut f, l);
        f
    };
    let g0 = d6(3501);
    push(
        &mut out,
        label(fragment_v6(&g0, a.clone(), true, 0x6001), 0x60001),
        0,
    );
    push(
        &mut out,
        label(fragment_v6(&g0, b.clone(), false, 0x6001), 0x60001),
        0,
    );
    let g1 = d6(3502);
    push(
        &mut out,
        label(fragment_v6(&g1, b.clone(), false, 0x6002), 0x60002),
        0,
    );
    push(
        &mut out,
        label(fragment_v6(&g1, a.clone(), true, 0x6002), 0x60002),
        0,
    );
    let g2 = d6(3503);
    push(
        &mut out,
        label(fragment_v6(&g2, a.clone(), true, 0x6003), 0x60003),
        0,
    );
    push(
        &mut out,
        label(fragment_v6(&g2, 592..1208, false, 0x6003), 0x60003),
        0,
    );
    push(
        &mut out,
        label(fragment_v6(&g2, b.clone(), false, 0x6003), 0x60003),
        0,
    );
    let g3 = d6(3504);
    push(
        &mut out,
        label(fragment_v6(&g3, a.clone(), true, 0x6004), 0x60004),
        0,
    );
    push(
        &mut out,
        label(fragment_v6(&g3, b, false, 0x6004), 0x60004),
        1500,
    );
    out
}

/// Time between frames on both sides (the script's wait for an answer).
const GAP_NS: u64 = 60_000_000;

fn nf_fates(sent: &[Sent]) -> Vec<&'static str> {
    nf_fates_with(sent, json!({}))
}

/// [`nf_fates`] with the config's top-level keys overridden by `extra`.
fn nf_fates_with(sent: &[Sent], extra: serde_json::Value) -> Vec<&'static str> {
    let mut config = json!({
        "frag_timeout": 1,
        "frag6_timeout": 1,
        "rules": [
            { "action": "accept", "dst": "10.2.0.2", "proto": "tcp", "dst_port": 80 },
            { "action": "reject", "proto": "tcp", "dst_port": 23 },
            { "action": "reject", "proto": "udp", "dst_port": 9, "reject_with": "port_unreachable" },
            { "action": "accept", "proto": "icmp", "icmp_type": 8 },
            { "action": "accept", "proto": "udp", "dst_port": 53 },
        ]
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    let mut fw = firewall(config);
    let mut h = Harness::new();
    let mut now = 1_000_000_000;
    let fate = |v: Verdict| match v {
        Verdict::Next => "pass",
        Verdict::ToPort(_) => "reject",
        _ => "drop",
    };
    sent.iter()
        .map(|s| {
            now += u64::from(s.delay_ms) * 1_000_000 + GAP_NS;
            h.set_now_ns(now);
            h.tick(&mut fw);
            let _ = h.take_emitted();
            let out = h.run(&mut fw, std::slice::from_ref(&s.frame));
            if let Some(o) = out.first() {
                return fate(o.verdict);
            }
            // Held for reassembly: what its datagram did, if it completed.
            let fates: Vec<&str> = h
                .take_emitted()
                .into_iter()
                .map(|o| fate(o.verdict))
                .collect();
            ["reject", "pass"]
                .into_iter()
                .find(|f| fates.contains(f))
                .unwrap_or("drop")
        })
        .collect()
}

/// A pcap of the frames; each record's timestamp holds the delay before
/// sending it (seconds and microseconds), which the script honours.
fn write_pcap(path: &Path, sent: &[Sent]) {
    let mut b = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for s in sent {
        let f = &s.frame;
        let (sec, usec) = (s.delay_ms / 1000, s.delay_ms % 1000 * 1000);
        for w in [sec, usec, f.len() as u32, f.len() as u32] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

fn missing_prerequisite() -> Option<String> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
        });
    if uid.as_deref() != Some("0") {
        return Some("not root".into());
    }
    for tool in ["ip", "nft", "python3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!(
                "`{tool}` not found (apt-get install iproute2 nftables python3)"
            ));
        }
    }
    None
}

/// What Linux does with each packet (nftables as in `ruleset.nft`, the
/// default sysctls but `ipfrag_time` and `nf_conntrack_frag6_timeout` of
/// 1 s), as measured by `nft_diff.py`; the NF must match it even where
/// the test cannot run Linux.
fn linux_expected() -> Vec<&'static str> {
    let (p, d, r) = ("pass", "drop", "reject");
    let mut v = vec![
        p, p, p, p, p, p, p, p, d, r, r, d, p, p, p, p, d, p, p, p, d, d, d, r, d, p, d, p,
    ];
    // Window tracking: 28-32 pass; 33 SEQ over, 34 ACK over, 35 RST out
    // of window: INVALID; 36 the in-window RST passes.
    v.extend([p, p, p, p, p, d, d, d, p]);
    // Scaling: 37-41 all pass; 42-45 pass, 46 (unscaled) INVALID.
    v.extend([p, p, p, p, p, p, p, p, p, d]);
    // Checksums: 47-51 drop but 49 (no UDP checksum); 52 passes.
    v.extend([d, d, p, d, d, p]);
    // IPv4 fragments 53-75.
    v.extend([
        d, p, d, p, d, d, d, d, d, p, d, d, d, d, d, r, d, d, d, d, p, d, d,
    ]);
    // IPv6 76-85.
    v.extend([p, d, p, d, p, d, d, d, d, d]);
    v
}

#[test]
fn same_fate_as_linux_nftables() {
    let sent = packets();
    let ours = nf_fates(&sent);
    // The NF side alone is deterministic: check it even without root.
    let want = linux_expected();
    assert_eq!(ours.len(), want.len());
    let off: Vec<String> = ours
        .iter()
        .zip(&want)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("packet {i}: firewall {a}, expected {b}"))
        .collect();
    assert!(off.is_empty(), "{}", off.join("\n"));
    if let Some(why) = missing_prerequisite() {
        eprintln!("skipping the nftables differential test: {why}");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fw-nft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("frames.pcap");
    write_pcap(&pcap, &sent);
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/firewall_nft");
    let out = Command::new("python3")
        .arg(here.join("nft_diff.py"))
        .arg(&pcap)
        .arg(here.join("ruleset.nft"))
        .arg(std::process::id().to_string())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "nft_diff.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let linux: Vec<String> = serde_json::from_slice(&out.stdout).expect("a JSON list of fates");
    let diffs: Vec<String> = ours
        .iter()
        .zip(&linux)
        .enumerate()
        .filter(|(_, (a, b))| **a != b.as_str())
        .map(|(i, (a, b))| format!("packet {i}: firewall {a}, Linux {b}"))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(linux.len(), ours.len());
    eprintln!(
        "nftables differential: {}/{} packets agree",
        ours.len() - diffs.len(),
        ours.len()
    );
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The two switches away from Linux's defaults change exactly the
/// packets they should (each check fails if its feature is taken out):
/// `liberal: true` (`nf_conntrack_tcp_be_liberal = 1`) passes the
/// out-of-window data, ACK and RST and the unscaled data (33, 34, 35,
/// 46); `checksum: false` passes the bad IPv4 header, UDP, ICMP and TCP
/// checksums (47, 48, 50, 51), completes the datagram whose first
/// fragment had a bad header checksum (70) and passes the reassembled
/// datagram with a bad UDP checksum (75).
#[test]
fn liberal_and_unchecked_differ_from_linux_defaults_where_they_should() {
    let sent = packets();
    let base = nf_fates(&sent);
    let diff = |extra| -> Vec<usize> {
        let other = nf_fates_with(&sent, extra);
        (0..base.len()).filter(|&i| base[i] != other[i]).collect()
    };
    assert_eq!(diff(json!({ "liberal": true })), [33, 34, 35, 46]);
    assert_eq!(diff(json!({ "checksum": false })), [47, 48, 50, 51, 70, 75]);
}
